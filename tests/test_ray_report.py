"""The reproduction report's structural part on the Ray backend (skipped where Ray is not installed): its DP
headroom tasks at a small configuration give the local backend's text exactly."""

from __future__ import annotations


def test_ray_structure_report_equals_local(cluster):
    from membudget.studies.budgetpm_reproduction import structure_report
    from membudget.studies.execution import RayExecutor

    small = {"n_resamples": 200, "n_boundary": 3, "n_load": 4}
    remote = structure_report(**small, executor=RayExecutor())
    assert remote == structure_report(**small) and "k=3 minus k=0" in remote

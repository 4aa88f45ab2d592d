"""``evaluate --sweep`` on the Ray backend (the simulated cluster of conftest.py): the cap sweep's (schedule, cap)
tasks give the local sweep and table exactly."""

from membudget.studies import budgetpm
from membudget.studies.execution import RayExecutor
from membudget.studies.suite import fit_suite


def test_ray_cap_sweep_equals_local(cluster):
    suite = fit_suite(dev_seeds=range(2000, 2005), temporal_budgets=("B10",), analysis_seeds=range(4000, 4002))
    cfg = budgetpm.EvalConfig(policies=["Static", "Sequential", "DeadlineOutcome"], budgets=["B10"],
                              first_seed=9000, n_weeks=2, bootstrap=200, sweep=True)
    local_rows, local_sweeps = budgetpm.run(cfg, suite=suite)
    rows, sweeps = budgetpm.run(cfg, suite=suite, executor=RayExecutor())
    assert sweeps == local_sweeps
    assert [len(points) for points in sweeps.values()] == [20, 20, 20]
    assert budgetpm.format_table(rows, "Static", sweeps) == budgetpm.format_table(local_rows, "Static",
                                                                                 local_sweeps)

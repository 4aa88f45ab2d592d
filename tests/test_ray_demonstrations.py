"""The DP demonstrations' Minari export on the Ray backend (the simulated cluster of conftest.py): one DP task per
week, the same dataset as the local export."""

import numpy as np


def test_ray_dp_demonstrations_equal_local(cluster, tmp_path, monkeypatch):
    from membudget.studies.execution import RayExecutor
    from membudget.teachers.minari_export import export_dp_demonstrations

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    seeds = range(9000, 9004)
    local = export_dp_demonstrations("membudget/pmweek-dp-local-v0", seeds, budget="B10")
    remote = export_dp_demonstrations("membudget/pmweek-dp-ray-v0", seeds, budget="B10", map=RayExecutor().map)
    episodes = [list(ds.iterate_episodes()) for ds in (local, remote)]
    assert len(episodes[0]) == len(episodes[1]) == 4
    for a, b in zip(*episodes):
        assert a.id == b.id
        for field in ("actions", "rewards", "terminations", "truncations"):
            assert np.array_equal(getattr(a, field), getattr(b, field))
        assert a.observations.keys() == b.observations.keys()
        assert all(np.array_equal(a.observations[k], b.observations[k]) for k in a.observations)

"""LIMBO's study (``evaluate replay``, ``replay-alpha``) on a simulated Ray cluster equals the local run exactly."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def one_torch_thread():
    """The local PPO training on one thread, as on a Ray worker (OMP_NUM_THREADS=1): a tiny PPO update runs many
    times slower on two threads that other processes contend for."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_ray_replay_study_and_alpha_selection_equal_local(cluster, one_torch_thread):
    from membudget.studies import limbo
    from membudget.studies.execution import RayExecutor

    config = {"families": ("os",), "profiles": ("weak",), "seeds": (42,), "bandit": limbo.Bandit(0.3),
              "ppo_timesteps": 64}
    local, remote = limbo.evaluate(**config), limbo.evaluate(**config, executor=RayExecutor())
    assert [r["agent"] for r in local] == [r["agent"] for r in remote] and "ppo" in [r["agent"] for r in local]
    for a, b in zip(local, remote):
        for u, v in zip(a["runs"], b["runs"], strict=True):
            assert u.keys() == v.keys() and all(np.array_equal(u[k], v[k]) for k in u), a["agent"]
    assert limbo.format_results(local, 200) == limbo.format_results(remote, 200)
    grid = {"grid": limbo.bandit_grid((0.0, 0.5)), "seeds": (1, 2), "families": ("db",), "profiles": ("weak", "mid")}
    assert limbo.select_alpha(**grid) == limbo.select_alpha(**grid, executor=RayExecutor())

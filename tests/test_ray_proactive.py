"""The ProactiveStream-v0 study on the Ray backend (a simulated cluster; skipped where Ray is not installed)."""

import numpy as np


def test_ray_proactive_evaluation_equals_local(cluster):
    from membudget.studies.execution import RayExecutor
    from membudget.studies.proactmem import evaluate

    local = evaluate(["code"], 2, ppo_timesteps=128, progress=lambda m: None)
    remote = evaluate(["code"], 2, ppo_timesteps=128, progress=lambda m: None, executor=RayExecutor(),
                      chunk_streams=1)
    np.testing.assert_equal(local, remote)
    assert set(remote["code"]) >= {"PPO", "FullHierarchy"}

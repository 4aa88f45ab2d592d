"""RLlib's row of the interop checks: one PPO iteration per environment with two EnvRunner processes (the
shared-budget env multi-agent, one shared policy), and both ways of making a membudget env on a Ray worker that
never imported membudget. Skipped where ``ray[rllib]`` is not installed (.ci/ray installs it)."""

import os

import numpy as np
import pytest

pytest.importorskip("ray.rllib")
import ray

from membudget.agents.rllib import SHARED_BUDGET_ID, make_shared_budget, train_rllib_ppo


@pytest.fixture
def ray_session(cluster):
    """The simulated cluster of conftest.py (three 1-CPU nodes), shared with the Ray backend's tests."""
    return cluster


# A runtime environment of its own: Ray never hands this task a worker that ran other tests' tasks.
@ray.remote(max_calls=1, runtime_env={"env_vars": {"MEMBUDGET_FRESH_WORKER": "1"}})
def _make_on_a_fresh_worker(env_id):
    import sys

    import gymnasium as gym

    before = "membudget" in sys.modules
    env = gym.make(env_id)
    obs, _ = env.reset(seed=6000)
    return before, env.spec.id, obs.shape


def test_prefixed_id_imports_membudget_on_a_fresh_worker(ray_session):
    before, env_id, shape = ray.get(_make_on_a_fresh_worker.remote("membudget:membudget/PMWeekFlat-v0"))
    assert not before and env_id == "membudget/PMWeekFlat-v0" and shape == (9 + 28 * 11,)


def test_shared_budget_is_a_flat_multi_agent_env():
    env = make_shared_budget({"n_agents": 2, "budget": "B10"})
    obs, _ = env.reset(seed=6000)
    assert sorted(obs) == ["agent_0", "agent_1"]
    assert all(o.shape == env.observation_space[a].shape == (9 + 1 + 28 * 11,) for a, o in obs.items())
    # the flat layout is gymnasium.spaces.flatten's: budget, mask, others, resources
    raw, _ = env.par_env.env.reset(seed=6000)
    assert np.array_equal(obs["agent_0"][9:20], raw["agent_0"]["mask"])


@pytest.mark.parametrize("env,env_config", [("pmweek-flat", {"budget": "B10"}), ("replay", {}), ("tiers", {}),
                                            ("shared-budget", {"n_agents": 2, "budget": "B10"})])
def test_one_ppo_iteration_with_two_env_runner_processes(ray_session, env, env_config):
    algo, history = train_rllib_ppo(env, 1, env_config, num_env_runners=2, train_batch_size=160, minibatch_size=80,
                                    num_epochs=1)
    try:
        pids = algo.env_runner_group.foreach_env_runner(lambda runner: os.getpid(), local_env_runner=False)
        assert len(set(pids)) == 2 and os.getpid() not in pids
        assert history[0]["env_steps"] >= 160
        if env == "pmweek-flat":  # an 80-step week per runner; rewards sum to the week's Set F1
            assert 0.0 <= history[0]["episode_return_mean"] <= 1.0
    finally:
        algo.stop()


def test_shared_budget_id_is_registered(ray_session):
    from ray.tune.registry import ENV_CREATOR, _global_registry

    from membudget.agents.rllib import register_rllib_envs

    register_rllib_envs()
    assert _global_registry.contains(ENV_CREATOR, SHARED_BUDGET_ID)
    assert _global_registry.contains(ENV_CREATOR, "membudget/PMWeek-v0")


def test_example_config_runs():
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # RAY_ADDRESS=local: the example starts its own Ray instance, as it does on a user's machine, instead of joining
    # the simulated cluster this session may have running
    out = subprocess.run([sys.executable, os.path.join(root, "docs", "examples", "rllib_pmweek.py"), "--quick"],
                         capture_output=True, text=True, timeout=600, check=True,
                         env={**os.environ, "RAY_ADDRESS": "local"}).stdout
    assert "iteration 1: " in out and "mean week Set F1" in out

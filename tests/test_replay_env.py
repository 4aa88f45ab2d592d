"""ReplayStream-v0: checkers, determinism, the fixed counterfactual, argument errors, baselines' protocol."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

import membudget  # noqa: F401
from membudget.baselines.replay import (FixedRecentReplay, GroupSelfConsistency, HindsightOracle, NoReplay,
                                        RetrievedTopK)
from membudget.envs.replay import N_ACTIONS, N_FEATURES, action_index, generate_stream

ENV_ID = "membudget/ReplayStream-v0"


def play(env, seed, actions):
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for a in actions:
        obs, r, term, trunc, info = env.step(int(a))
        out.append((obs, r, info["correct"], info["tokens"], info["cost"]))
        if term:
            break
    return out


def test_gymnasium_check_env():
    env = gym.make(ENV_ID, n_tasks=40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_check_env(env.unwrapped)


def test_sb3_check_env():
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(ENV_ID, n_tasks=40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_check_env(env.unwrapped, warn=True)


def test_spaces_and_bounds_over_a_stream():
    env = gym.make(ENV_ID, family="os", profile="weak")
    assert env.action_space == gym.spaces.Discrete(N_ACTIONS)
    assert env.observation_space.shape == (N_FEATURES,) and env.observation_space.dtype == np.float32
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=3)
    done, total, n = False, 0.0, 0
    while not done:
        assert env.observation_space.contains(obs)
        obs, r, done, trunc, info = env.step(int(rng.integers(N_ACTIONS)))
        assert not trunc and 0.0 <= info["cost"] <= 1.0
        assert r == pytest.approx(float(info["correct"]) - 0.5 * info["cost"])
        total += r
        n += 1
    assert env.observation_space.contains(obs) and n == 500
    assert info["episode_metrics"]["return"] == pytest.approx(total)


def test_same_seed_same_trajectory_and_different_seed_differs():
    acts = np.random.default_rng(1).integers(0, N_ACTIONS, 200)
    a = play(gym.make(ENV_ID, n_tasks=200), 7, acts)
    b = play(gym.make(ENV_ID, n_tasks=200), 7, acts)
    np.testing.assert_array_equal(a[0], b[0])
    for x, y in zip(a[1:], b[1:]):
        np.testing.assert_array_equal(x[0], y[0])
        assert x[1:] == y[1:]
    c = play(gym.make(ENV_ID, n_tasks=200), 8, acts)
    assert any(x[3] != y[3] for x, y in zip(a[1:], c[1:]))


def test_counterfactual_is_fixed_whatever_the_policy():
    env = gym.make(ENV_ID, n_tasks=120)
    env.reset(seed=11)
    correct, tokens = (x.copy() for x in env.unwrapped.outcome_table())
    for policy_seed in (0, 1):
        acts = np.random.default_rng(policy_seed).integers(0, N_ACTIONS, 120)
        env.reset(seed=11)
        np.testing.assert_array_equal(env.unwrapped.stream.correct, correct)
        for t, a in enumerate(acts):
            _, _, _, _, info = env.step(int(a))
            assert info["correct"] == correct[t, a] and info["tokens"] == tokens[t, a]
    # recent_k / retrieve_k change only the replay actions they govern
    s1 = generate_stream(5, n_tasks=120, recent_k=1)
    s16 = generate_stream(5, n_tasks=120, recent_k=16, retrieve_k=4)
    none = [action_index("none", b) for b in ("low", "medium", "high")]
    np.testing.assert_array_equal(s1.correct[:, none], s16.correct[:, none])
    np.testing.assert_array_equal(s1.in_bank, s16.in_bank)


def test_oracle_matches_the_table_and_is_an_upper_bound():
    from membudget.studies.limbo import run_policy

    oracle = run_policy(HindsightOracle(None), seed=42, n_tasks=150, version=0)
    s = generate_stream(42, n_tasks=150)
    np.testing.assert_array_equal(oracle["actions"], s.oracle_actions())
    assert oracle["accuracy"] == pytest.approx(s.correct.any(axis=1).mean())
    for pol in (NoReplay(), FixedRecentReplay(k=8), RetrievedTopK(k=1)):
        assert run_policy(pol, seed=42, n_tasks=150, version=0)["accuracy"] <= oracle["accuracy"]


@pytest.mark.parametrize("kwargs, match", [
    ({"family": "sql"}, "unknown family"), ({"profile": "huge"}, "unknown profile"),
    ({"n_tasks": 0}, "n_tasks must be an int"), ({"recent_k": 0}, "recent_k must be an int"),
    ({"retrieve_k": 1.5}, "retrieve_k must be an int"), ({"cost_weight": -1}, "cost_weight must be"),
    ({"cost_weight": float("nan")}, "cost_weight must be"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gym.make(ENV_ID, **kwargs)


def test_bad_actions_and_call_order():
    env = gym.make(ENV_ID, n_tasks=2).unwrapped
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(0)
    env.reset(seed=0)
    for bad in (12, -1, 1.0, np.array([1]), "3"):
        with pytest.raises(ValueError, match="Discrete"):
            env.step(bad)
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(seed=0, options={"x": 1})
    env.step(0)
    env.step(np.int64(3))
    with pytest.raises(RuntimeError, match="ended"):
        env.step(0)


def test_baseline_protocol_and_errors():
    obs = np.zeros(N_FEATURES, dtype=np.float32)
    a, state = NoReplay().predict(obs)
    assert a.shape == () and int(a) == action_index("none", "low") and state is None
    a, _ = FixedRecentReplay(k=16, budget="high").predict(np.zeros((5, N_FEATURES)))
    assert a.shape == (5,) and (a == action_index("full", "high")).all()
    with pytest.raises(ValueError, match="k must be one of"):
        FixedRecentReplay(k=3).env_kwargs
    with pytest.raises(ValueError, match="budget must be one of"):
        NoReplay(budget="huge").predict(obs)
    with pytest.raises(ValueError, match="n must be one of"):
        GroupSelfConsistency(n=0).score_stream(None)
    with pytest.raises(ValueError, match=r"one environment: pass one observation \(d,\) or a batch of one"):
        HindsightOracle(gym.make(ENV_ID)).predict(np.zeros((2, N_FEATURES)))


def test_stream_memory_is_linear_in_its_length(monkeypatch):
    """A stream keeps the retriever's noise only on the bank items each task sees and the relevance only of those
    pairs: 4,000 tasks stay below one (T, T) float64 table (122 MB, and the draws held four such tables; at the
    bound of 100,000 tasks they needed 75 GB and the reset failed). The noise table is drawn a block of rows at a time, and the block size
    changes nothing."""
    import dataclasses
    import tracemalloc

    from membudget.envs.replay import world as world_module

    tracemalloc.start()
    try:
        generate_stream(3, n_tasks=4000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20, peak / 2**20
    ref = generate_stream(4, n_tasks=300, family="os", recent_k=16, retrieve_k=8)
    monkeypatch.setattr(world_module, "NOISE_BLOCK", 7 * 300 + 1)
    small = generate_stream(4, n_tasks=300, family="os", recent_k=16, retrieve_k=8)
    for f in dataclasses.fields(ref):
        assert np.array_equal(getattr(ref, f.name), getattr(small, f.name)), f.name

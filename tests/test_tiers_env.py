"""TierRouting-v0: checkers, determinism, the fixed counterfactual, the hard cap, argument errors."""

from __future__ import annotations

import itertools
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

import membudget  # noqa: F401
from membudget.envs.tiers import (COMBOS, STRATEGIES, TierRoutingEnv, combo_index, floor_cost_bound,
                                  query_for_seed, reference_costs)

ENV_ID = "membudget/TierRouting-v0"


def play(env, seed, tiers, options=None):
    obs, _ = env.reset(seed=seed, options=options)
    out = [obs]
    for a in tiers:
        obs, r, term, trunc, info = env.step(a)
        out.append((obs, r, term, info))
    return out


@pytest.mark.parametrize("kwargs", [{}, {"strategy": "reasoning", "lam_conditioned": True},
                                    {"strategy": "capacity", "population": "longmemeval",
                                     "max_cost_per_query": 0.004}])
def test_checkers(kwargs):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_check_env(gym.make(ENV_ID, **kwargs).unwrapped)
        sb3_check_env(gym.make(ENV_ID, **kwargs).unwrapped, warn=True)


def test_observation_in_bounds_and_named():
    env = TierRoutingEnv(strategy="capacity", max_cost_per_query=0.003, lam_conditioned=True)
    assert env.observation_space.shape == (len(env.feature_names),) == (23,)
    rng = np.random.default_rng(0)
    for s in range(40):
        obs, _ = env.reset(seed=s)
        assert env.observation_space.contains(obs)
        for k in range(5):
            assert obs[16 + k] == 1.0 and obs[16:21].sum() == 1.0      # module one-hot
            obs, *_ = env.step(int(rng.integers(3)))
            assert env.observation_space.contains(obs)


def test_determinism_same_seed_same_query_and_outcomes():
    a, b = TierRoutingEnv(strategy="capacity"), TierRoutingEnv(strategy="capacity")
    for seed, tiers in [(1, [2, 0, 1, 2, 1]), (7, [0, 0, 0, 0, 0])]:
        ra, rb = play(a, seed, tiers), play(b, seed, tiers)
        assert np.array_equal(ra[0], rb[0])
        for x, y in zip(ra[1:], rb[1:]):
            assert np.array_equal(x[0], y[0]) and x[1] == y[1]
    # the query reset(seed) draws is query_for_seed(seed), and strategies share it (paired)
    q = query_for_seed(11)
    for s in STRATEGIES:
        env = TierRoutingEnv(strategy=s)
        env.reset(seed=11)
        assert np.array_equal(env.query.needs, q.needs) and env.query.chunk_tokens == q.chunk_tokens


def test_counterfactual_is_fixed_whatever_came_before():
    env = TierRoutingEnv(strategy="implementation")
    env.reset(seed=3)
    table = [x.copy() for x in env.outcome_table()]
    rng = np.random.default_rng(1)
    for _ in range(30):                                 # unrelated queries played in between
        env.reset()
        for _ in range(5):
            env.step(int(rng.integers(3)))
    for tiers in [(0, 0, 0, 0, 0), (2, 1, 0, 2, 1), (1, 2, 2, 0, 0)]:
        out = play(env, 3, tiers)
        info = out[-1][3]
        i = combo_index(tiers)
        assert info["episode_metrics"]["r_task"] == table[0][i] and info["episode_metrics"]["cost"] == pytest.approx(table[1][i], rel=1e-12)
        assert info["episode_metrics"]["cost"] == pytest.approx(sum(o[3]["module_cost"] for o in out[1:]), rel=1e-12)
    # every combination played through the environment matches the table
    for i, tiers in enumerate(itertools.islice(COMBOS, 0, 243, 7)):
        info = play(env, 3, [int(t) for t in tiers])[-1][3]
        j = combo_index(tiers)
        assert info["episode_metrics"]["r_task"] == table[0][j] and 0.0 <= info["episode_metrics"]["r_task"] <= 1.0


def test_reward_is_static_cost_reward_at_the_end():
    env = TierRoutingEnv(strategy="capacity", lam=0.5)
    out = play(env, 5, [1, 1, 2, 0, 1])
    assert [o[1] for o in out[1:4]] == [0.0, 0.0, 0.0, 0.0][:3] and out[4][1] == 0.0
    info = out[-1][3]
    assert info["episode_metrics"]["r_cost"] == pytest.approx(1 - min(info["episode_metrics"]["cost"] / env.cost_ref, 1.0))
    assert out[-1][1] == pytest.approx(info["episode_metrics"]["r_task"] + 0.5 * info["episode_metrics"]["r_cost"]) and out[-1][2]


def test_strategy_shapes():
    """Seed 001 §6.3: implementation spans the widest cost range, reasoning a narrow one, capacity the best
    quality at high budget (all-HIGH)."""
    spans = {s: reference_costs(s, "locomo")[2] / reference_costs(s, "locomo")[0] for s in STRATEGIES}
    assert spans["implementation"] > spans["capacity"] > spans["reasoning"] and spans["reasoning"] < 3
    high = {}
    for s in STRATEGIES:
        env = TierRoutingEnv(strategy=s)
        high[s] = np.mean([play(env, q, [2] * 5)[-1][3]["episode_metrics"]["r_task"] for q in range(60)])
    assert high["capacity"] == max(high.values())


def test_lambda_conditioned_observation_and_option():
    env = TierRoutingEnv(lam_conditioned=True)
    obs, info = env.reset(seed=0, options={"lam": 0.3})
    assert obs[-1] == np.float32(0.3) and info["lam"] == 0.3
    out = play(env, 0, [1] * 5, options={"lam": 1.0})
    m = out[-1][3]["episode_metrics"]
    assert out[-1][3]["lam"] == 1.0 and out[-1][1] == pytest.approx(m["r_task"] + m["r_cost"])
    seen = {env.reset(seed=s)[1]["lam"] for s in range(40)}
    assert seen == {0.0, 0.1, 0.3, 0.5, 1.0}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_hard_cap_never_exceeded_under_random_policy(strategy):
    lo, mid, high = reference_costs(strategy, "hotpotqa")
    cap = max(floor_cost_bound(strategy, "hotpotqa"), (mid + high) / 2 if strategy == "reasoning" else mid)
    env = TierRoutingEnv(strategy=strategy, population="hotpotqa", max_cost_per_query=cap)
    rng = np.random.default_rng(0)
    n_down = 0
    for s in range(150):
        env.reset(seed=s)
        for _ in range(5):
            req = int(rng.integers(3))
            obs, _, term, _, info = env.step(req)
            assert obs[21] >= 0.0
            assert info["requested_tier"] == req
            if info["downgraded"]:
                n_down += 1
                assert info["tier"] < req
            else:
                assert info["tier"] == req
        assert info["episode_metrics"]["cost"] <= cap + 1e-15
        assert info["episode_metrics"]["downgrades"] == sum(a != b for a, b in zip(info["episode_metrics"]["tiers"],
                                                                           info["episode_metrics"]["requested_tiers"]))
    assert n_down > 0  # the cap binds, and every downgrade is reported


def test_hard_cap_keeps_every_combination_within_cap_that_fits():
    """A combination whose total cost fits the cap is played unchanged."""
    env = TierRoutingEnv(strategy="capacity", max_cost_per_query=0.002)
    env.reset(seed=4)
    _, cost = env.outcome_table()
    fits = np.flatnonzero(cost <= 0.002)
    for i in fits[:: max(1, len(fits) // 15)]:
        info = play(env, 4, [int(t) for t in COMBOS[i]])[-1][3]
        assert info["episode_metrics"]["downgrades"] == 0 and info["episode_metrics"]["cost"] == pytest.approx(cost[i])


@pytest.mark.parametrize("kwargs, match", [
    ({"strategy": "magic"}, "unknown strategy"),
    ({"population": "squad"}, "unknown population"),
    ({"backbone": "gpt"}, "unknown backbone"),
    ({"lam": -0.1}, "lam must be"),
    ({"lam": float("nan")}, "lam must be"),
    ({"lam_conditioned": "yes"}, "lam_conditioned must be a bool"),
    ({"lam_values": []}, "lam_values must be a non-empty"),
    ({"lam_values": 3}, "lam_values must be"),
    ({"max_cost_per_query": 0}, "max_cost_per_query must be"),
    ({"max_cost_per_query": 1e-7}, "below the largest all-LOW cost"),
    ({"noise": 2.0}, "noise must be"),
])
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TierRoutingEnv(**kwargs)


def test_bad_actions_and_calls_raise():
    env = TierRoutingEnv()
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(0)
    env.reset(seed=0)
    for bad in (3, -1, 1.0, np.array([0, 1]), "LOW"):
        with pytest.raises(ValueError, match=r"action must be an integer in \[0, 3\)"):
            env.step(bad)
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"budget": 1})
    with pytest.raises(ValueError, match="lam_conditioned=True"):
        env.reset(options={"lam": 0.3})
    for _ in range(5):
        env.step(0)
    with pytest.raises(RuntimeError, match="has been answered"):
        env.step(0)


def test_conditioned_lambdas_are_bounded_by_the_float32_observation():
    """λ values above float32's largest are refused naming the argument (the observation, and its space's bound,
    read them as inf); the largest allowed one is observed as itself."""
    with pytest.raises(ValueError, match=r"lam_values entry must be a finite number in \[0, 3.40282e\+38\]"):
        gym.make("membudget/TierRouting-v0", lam_conditioned=True, lam_values=(0.0, 1e39))
    from membudget.envs.tiers.env import MAX_LAMBDA

    env = gym.make("membudget/TierRouting-v0", lam_conditioned=True, lam_values=(0.0, MAX_LAMBDA))
    obs, _ = env.reset(seed=0, options={"lam": MAX_LAMBDA})
    assert np.isfinite(env.observation_space.high).all() and obs[-1] == np.float32(MAX_LAMBDA)
    assert env.observation_space.contains(obs)

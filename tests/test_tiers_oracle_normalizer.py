"""TierRouting-v0: the hindsight oracle against brute force, the §5.5 normaliser on known streams, baselines, and a
short PPO router under the hard cap."""

from __future__ import annotations

import numpy as np
import pytest

from membudget.baselines.tiers import AllHigh, AllLow, FixedTier, OracleTiers, RandomTiers
from membudget.envs.tiers import COMBOS, BudgetMemReward, CostNormalizer, TierRoutingEnv
from membudget.envs.tiers.env import query_for_seed
from membudget.envs.tiers.world import combo_index, outcomes
from membudget.teachers.tier_oracle import (HindsightTierOracle, best_combination, demonstrations, frontier_at,
                                            lagrangian_frontier, pareto_front)


def _brute_front(r, c):
    return sorted(i for i in range(len(r))
                  if not any((r[j] >= r[i] and c[j] <= c[i] and (r[j] > r[i] or c[j] < c[i])) or
                             (r[j] == r[i] and c[j] == c[i] and j < i) for j in range(len(r))))


@pytest.mark.parametrize("strategy", ["implementation", "reasoning", "capacity"])
def test_oracle_equals_brute_force(strategy):
    env = TierRoutingEnv(strategy=strategy)
    for seed in (0, 1):
        env.reset(seed=seed)
        r, c = env.outcome_table()
        front = pareto_front(r, c)
        assert sorted(front.tolist()) == _brute_front(r, c)
        assert np.all(np.diff(c[front]) >= 0) and np.all(np.diff(r[front]) > 0)
        # brute force through the environment for λ and a cap
        played = []
        for tiers in COMBOS:
            env.reset(seed=seed)
            for a in tiers:
                _, rew, _, _, info = env.step(int(a))
            played.append((info["episode_metrics"]["r_task"], info["episode_metrics"]["cost"]))
        pr, pc = np.array(played).T
        assert np.array_equal(pr, r) and np.allclose(pc, c, rtol=1e-12)
        for lam in (0.0, 0.3, 1.0):
            i = best_combination(r, c, lam=lam, cost_ref=env.cost_ref)
            score = pr + lam * (1 - np.clip(pc / env.cost_ref, 0, 1))
            assert score[i] == pytest.approx(score.max())
        cap = np.median(c)
        i = best_combination(r, c, cap=cap)
        assert c[i] <= cap and r[i] == r[c <= cap].max()


def test_oracle_policy_plays_its_combination_and_respects_env_cap():
    env = TierRoutingEnv(strategy="capacity", max_cost_per_query=0.002)
    oracle = OracleTiers(env)
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        r, c = env.outcome_table()
        for _ in range(5):
            a, _ = oracle.predict(obs)
            obs, _, term, _, info = env.step(a)
        assert info["episode_metrics"]["downgrades"] == 0 and info["episode_metrics"]["cost"] <= 0.002
        assert info["episode_metrics"]["r_task"] == r[c <= 0.002 + 1e-15].max()
    with pytest.raises(ValueError, match="privileged"):
        OracleTiers().predict(obs)
    X, y = demonstrations(TierRoutingEnv(), range(3))
    assert X.shape == (15, 21) and set(y) <= {0, 1, 2}


def test_lagrangian_frontier_is_monotone_and_interpolates():
    env = TierRoutingEnv(strategy="capacity")
    tables = []
    for s in range(30):
        env.reset(seed=s)
        tables.append(env.outcome_table())
    fr = lagrangian_frontier(tables, np.concatenate([[0], np.logspace(-3, 3, 30) / env.cost_ref]))
    assert np.all(np.diff(fr[:, 1]) <= 1e-15) and np.all(np.diff(fr[:, 2]) <= 1e-12)
    assert fr[0, 2] == pytest.approx(np.mean([t[0].max() for t in tables]))
    mid = (fr[0, 1] + fr[-1, 1]) / 2
    assert fr[-1, 2] <= frontier_at(fr, mid) <= fr[0, 2]
    # ranked by another table: the choices follow it, the quality stays the realised r_task
    rank = [-c for _, c in tables]                                  # "cheapest is best": all-LOW everywhere
    low = lagrangian_frontier(tables, [0.0], rank=rank)[0]
    assert low[1] == pytest.approx(np.mean([c[0] for _, c in tables]))
    assert low[2] == pytest.approx(np.mean([r[0] for r, _ in tables]))
    with pytest.raises(ValueError, match="rank"):
        lagrangian_frontier(tables, [0.0], rank=rank[:-1])


def test_normalizer_quantiles_and_beta_on_known_stream():
    n = CostNormalizer(window=101, use_beta=True, eps=1e-6)
    costs = np.arange(101, dtype=float)          # Q5 = 5, Q95 = 95 exactly (linear interpolation)
    rt = np.tile([0.0, 1.0], 51)[:101]
    for r, c in zip(rt, costs):
        s = n.update(r, c)
    assert (s["q5"], s["q95"]) == (pytest.approx(5.0), pytest.approx(95.0))
    assert s["r_cost"] == 0.0                    # the last cost, 100, is above Q95
    # one more query: the window drops cost 0 and holds 1..100 and the new 50
    w = np.r_[np.arange(1, 101, dtype=float), 50.0]
    q5, q95 = np.quantile(w, 0.05), np.quantile(w, 0.95)
    assert n.update(0.0, 50.0)["r_cost"] == pytest.approx(1 - (50 - q5) / (q95 - q5))
    # β = std(r_task) / (std(r_cost) + eps) over the window
    m = CostNormalizer(window=4, eps=1e-6)
    for r, c in [(0.2, 1.0), (0.8, 3.0), (0.2, 1.0), (0.8, 3.0)]:
        s = m.update(r, c)
    assert s["beta"] == pytest.approx(np.std([0.2, 0.8, 0.2, 0.8]) / (np.std(list(m.r_cost)) + 1e-6))
    assert list(m.r_cost) == [1.0, 0.0, 1.0, 0.0]          # worked out by hand from the windows
    # the β ablation: β = 1
    z = CostNormalizer(window=4, use_beta=False)
    for r, c in [(0.2, 1.0), (0.8, 3.0), (0.2, 1.0)]:
        s = z.update(r, c)
    assert s["beta"] == 1.0
    total, st = z.reward(0.8, 3.0, lam=0.3)
    assert total == pytest.approx(0.8 + 0.3 * 1.0 * st["r_cost"])
    # constant costs: Q95 = Q5, every cost gets r_cost = 1
    k = CostNormalizer(window=8)
    assert all(k.update(0.5, 2.0)["r_cost"] == 1.0 for _ in range(5))


def test_normalizer_window_slides():
    n = CostNormalizer(window=10)
    for c in range(100):
        n.update(0.5, float(c))
    assert list(n.costs) == list(map(float, range(90, 100)))
    assert n.quantiles() == (pytest.approx(np.quantile(np.arange(90, 100), 0.05)),
                             pytest.approx(np.quantile(np.arange(90, 100), 0.95)))


@pytest.mark.parametrize("kwargs, match", [({"window": 1}, "window"), ({"eps": 0}, "eps"), ({"eps": 5e-324}, "eps"),
                                           ({"min_history": 1}, "min_history"), ({"use_beta": 1}, "use_beta")])
def test_normalizer_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CostNormalizer(**kwargs)
    with pytest.raises(ValueError, match="finite"):
        CostNormalizer().update(float("nan"), 1.0)


def test_normalizer_rewards_stay_finite_at_the_smallest_eps():
    """Constant costs make std(r_cost) 0, so β is std(r_task) / eps: finite at the smallest eps allowed."""
    from membudget.envs.tiers.wrappers import MIN_EPS

    n = CostNormalizer(eps=MIN_EPS)
    rewards = [n.reward(r, 3.0, lam=1.0)[0] for r in (0.0, 1.0, 0.0, 1.0)]
    assert np.isfinite(rewards).all() and max(rewards) == pytest.approx(1.0 + 0.5 / MIN_EPS)


def test_wrapper_reward_uses_env_lambda():
    env = BudgetMemReward(TierRoutingEnv(strategy="capacity", lam_conditioned=True), window=16)
    for s in range(6):
        env.reset(seed=s, options={"lam": 0.5})
        for a in (s % 3, 1, 2, 0, 1):
            _, r, term, _, info = env.step(a)
        st = info["episode_metrics"]["normalized"]
        assert r == pytest.approx(info["episode_metrics"]["r_task"] + 0.5 * st["beta"] * st["r_cost"])


def test_baselines_protocol():
    obs = np.zeros((4, 21), dtype=np.float32)
    assert AllLow().predict(obs[0])[0] == 0 and AllHigh().predict(obs)[0].tolist() == [2] * 4
    a = RandomTiers(seed=3).predict(obs)[0]
    assert np.array_equal(a, RandomTiers(seed=3).predict(obs)[0]) and set(a) <= {0, 1, 2}
    with pytest.raises(ValueError, match="tier must be"):
        FixedTier(3)


def test_learned_router_never_exceeds_hard_cap():
    from membudget.agents.tier_router import train_router
    from membudget.studies.budgetmem import rollout

    cap = 0.0015
    model = train_router(lam=0.0, strategy="capacity", total_timesteps=1000, n_steps=250, batch_size=50,
                         max_cost_per_query=cap, bc_queries=0)
    run = rollout(model, range(50_000, 50_100), strategy="capacity", max_cost_per_query=cap)
    assert run["cost"].max() <= cap + 1e-15
    assert (run["tiers"] <= run["requested"]).all() and run["downgrades"].sum() == (run["tiers"]
                                                                                      != run["requested"]).sum()


def test_expected_table_is_r_task_before_judge_noise():
    for noise in (0.0, 0.04):
        env = TierRoutingEnv(strategy="reasoning", noise=noise)
        env.reset(seed=3)
        p, c = env.outcome_table(expected=True)
        r, c2 = env.outcome_table()
        assert np.array_equal(c, c2)
        assert np.array_equal(r, np.clip(p + noise * env.query.judge_noise, 0.0, 1.0))
    env = TierRoutingEnv(strategy="capacity", noise=0.0)
    for seed in range(5):
        env.reset(seed=seed)
        assert (HindsightTierOracle(env, lam=0.3, expected=True).combination()
                == HindsightTierOracle(env, lam=0.3).combination())
    X, y = demonstrations(TierRoutingEnv(strategy="capacity"), range(20), lam=0.0, expected=True)
    assert set(y[4::5]) == {2}        # before noise, the summary's HIGH tier is always the best ending at λ = 0


def _frontier_gain_over_all_mid(strategy, seeds, ranked_by):
    """Realised mean r_task of the Lagrangian frontier of the combinations ranked by ``ranked_by(query, outcomes)``,
    minus all-MID's, at all-MID's mean cost."""
    from membudget.studies.budgetmem import oracle_frontier

    mid = combo_index([1] * 5)
    tables, rank = [], []
    for s in seeds:
        q = query_for_seed(s)
        o = outcomes(q, strategy)
        tables.append((o.r_task, o.cost))
        rank.append(ranked_by(q, o))
    mid_cost = np.mean([c[mid] for _, c in tables])
    frontier = oracle_frontier(tables, np.mean([c[-1] for _, c in tables]), rank=rank)
    return frontier_at(frontier, mid_cost) - np.mean([r[mid] for r, _ in tables])


@pytest.mark.parametrize("strategy", ["implementation", "reasoning", "capacity"])
def test_module_level_routing_pays_at_all_mid_cost(strategy):
    """The world's premise (seed 001 §6.4), independent of any router: on training queries, routing each query by
    its expected quality — knowing its needs and hardness, or only its question type — beats all-MID at all-MID's
    mean cost."""
    from dataclasses import replace

    from membudget.envs.tiers.world import HARDNESS_RANGE, TYPE_HARDNESS, TYPE_NEEDS

    def by_type(q, o):
        typical = replace(q, needs=np.clip(TYPE_NEEDS[q.qtype], 0.02, 0.98),
                          hardness=np.clip(TYPE_HARDNESS[q.qtype], *HARDNESS_RANGE))
        return outcomes(typical, strategy).expected_r_task

    seeds = range(200)
    knows_needs = _frontier_gain_over_all_mid(strategy, seeds, lambda q, o: o.expected_r_task)
    knows_type = _frontier_gain_over_all_mid(strategy, seeds, by_type)
    assert knows_needs >= 0.015 and knows_type >= 0.01


def test_hardness_scales_capability_in_closed_form():
    from dataclasses import replace

    from membudget.envs.tiers.world import PROFILES

    q = query_for_seed(7)
    cap = np.asarray(PROFILES[("capacity", "llama")].capability)
    d = np.array([0.5, 0.9, 0.1, 0.3, 0.7])
    tiers = (0, 1, 2, 1, 0)
    for h in (np.full(5, 0.5), np.array([0.05, 1.5, 0.3, 0.9, 0.2])):
        c = np.array([cap[k, a] ** (2 * h[k]) for k, a in enumerate(tiers)])
        m_fil = 1 - d[0] * (1 - c[0])
        m_ext = [1 - d[k] * (1 - c[k] * (0.6 + 0.4 * m_fil)) for k in (1, 2, 3)]
        p = q.answerability * np.sqrt(m_fil) * np.prod(m_ext) * (1 - d[4] * (1 - c[4]))
        o = outcomes(replace(q, needs=d, hardness=h), "capacity")
        assert o.expected_r_task[combo_index(tiers)] == pytest.approx(p, rel=1e-12)
    easy, hard = (outcomes(replace(q, needs=d, hardness=np.full(5, h)), "capacity").expected_r_task
                  for h in (0.05, 1.5))
    assert easy[0] / easy[-1] > 0.8 > 0.15 > hard[0] / hard[-1]     # all-LOW vs all-HIGH

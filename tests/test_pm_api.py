"""Public API of ``membudget/PMWeek-v0``: checkers, determinism, spaces, the vector env, executor invariants,
argument validation and the week generator."""

from __future__ import annotations

import math
import pickle
import re
import warnings

import gymnasium as gym
from gymnasium.utils.env_checker import check_env as gym_check_env
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import membudget  # noqa: F401  (registers the ids)
from membudget.envs.pm import (BUDGET_FEATURE_NAMES, COST_PROFILES, RESOURCE_FEATURE_NAMES, PMWeekEnv,
                               PMWeekVectorEnv, episode_to_dict, generate_episode, validate_episode)
from membudget.envs.pm.env import ACTION_MODES, LATE_POLICIES
from membudget.envs.pm.world import DEFAULT_RESOURCES, KIND_CHANNEL, NEVER, POS, WorldConfig
from membudget.envs.registration import ENV_IDS, VARIANTS

# the flat variant wraps the same env; tests/test_registry.py checks it
PM_IDS = tuple(i for i in ENV_IDS if i.startswith("membudget/PMWeek") and i not in VARIANTS)

ENV_ID = "membudget/PMWeek-v0"
R = len(DEFAULT_RESOURCES)
T = 80
SB3_SHAPE_WARNING = r"Your observation resources has an unconventional shape"
EPISODE_KEYS = ("set_f1", "tp", "fp", "fn", "realized_cost", "queries")


# ----------------------------------------------------------------------------------------------- helpers


def assert_same(a, b, path="root"):
    """Exact recursive equality of observations / infos (numpy arrays, nested dicts, lists, NaN == NaN)."""
    if isinstance(a, dict):
        assert isinstance(b, dict), f"{path}: dict vs {type(b).__name__}"
        assert a.keys() == b.keys(), f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
        assert len(a) == len(b), f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), f"{path}: ndarray vs {type(b).__name__}"
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} vs {b.dtype}"
        np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), f"{path}: nan vs {b!r}"
    else:
        assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
        assert a == b, f"{path}: {a!r} != {b!r}"


def random_action(rng: np.random.Generator, action_mode: str, shape=(R,), p: float = 0.4):
    if action_mode == "binary":
        return (rng.random(shape) < p).astype(np.int8)
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32)


def rollout(env, actions, *, seed=None, options=None):
    """Reset and play ``actions`` until termination; returns (reset obs, reset info, list of step tuples)."""
    obs, info = env.reset(seed=seed, options=options)
    steps = []
    for a in actions:
        out = env.step(a)
        steps.append(out)
        if out[2] or out[3]:
            break
    return obs, info, steps


def action_sequence(seed, action_mode, n=T):
    rng = np.random.default_rng(seed)
    return [random_action(rng, action_mode) for _ in range(n)]


def assert_in_space(space, obs):
    assert isinstance(obs, dict) and obs.keys() == space.spaces.keys()
    for k, sub in space.spaces.items():
        x = obs[k]
        assert isinstance(x, np.ndarray), k
        assert x.shape == sub.shape, (k, x.shape, sub.shape)
        assert x.dtype == sub.dtype, (k, x.dtype, sub.dtype)
        if isinstance(sub, gym.spaces.Box):
            bad = np.argwhere((x < sub.low) | (x > sub.high) | ~np.isfinite(x))
            assert bad.size == 0, f"{k}: entries {bad.tolist()[:5]} = {x[tuple(bad.T)][:5]} outside the bounds"
        assert sub.contains(x), k
    assert space.contains(obs)


# ------------------------------------------------------------------------------------------ env checkers


@pytest.mark.parametrize("env_id", PM_IDS)
@pytest.mark.parametrize("action_mode", ACTION_MODES)
def test_gymnasium_check_env(env_id, action_mode):
    env = gym.make(env_id, action_mode=action_mode)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize("env_id", PM_IDS)
@pytest.mark.parametrize("action_mode", ACTION_MODES)
def test_sb3_check_env(env_id, action_mode):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(env_id, action_mode=action_mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error", UserWarning)
        # the one expected warning: the 2-D "resources" Box (documented; MultiInputPolicy flattens it)
        warnings.filterwarnings("always", message=SB3_SHAPE_WARNING, category=UserWarning)
        sb3_check_env(env.unwrapped, warn=True)
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert all(re.match(SB3_SHAPE_WARNING, m) for m in messages), messages
    env.close()


# ------------------------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("action_mode", ACTION_MODES)
@pytest.mark.parametrize("seed", [0, 123])
def test_same_seed_same_trajectory(action_mode, seed):
    actions = action_sequence(seed + 7, action_mode)
    runs = []
    for _ in range(2):
        env = gym.make(ENV_ID, action_mode=action_mode, late_policy="execute")
        runs.append(rollout(env, actions, seed=seed))
    (o1, i1, s1), (o2, i2, s2) = runs
    assert_same(o1, o2)
    assert_same(i1, i2)
    assert len(s1) == len(s2) == T
    for k, (a, b) in enumerate(zip(s1, s2)):
        assert_same(list(a), list(b), f"step {k}")
    assert "episode_metrics" in s1[-1][4]


def test_different_seeds_different_weeks():
    env = PMWeekEnv()
    obs = {}
    weeks = {}
    for seed in (1, 2, 3):
        obs[seed], _ = env.reset(seed=seed)
        weeks[seed] = episode_to_dict(env.episode)
    for a, b in ((1, 2), (1, 3), (2, 3)):
        assert weeks[a]["intentions"] != weeks[b]["intentions"]
        assert weeks[a]["hints"] != weeks[b]["hints"]
        assert not np.array_equal(obs[a]["resources"], obs[b]["resources"])


def test_unseeded_resets_continue_the_seeded_generator():
    """reset(seed=s) then reset() twice gives the same three weeks on two environments."""
    e1, e2 = PMWeekEnv(), PMWeekEnv()
    e1.reset(seed=11)
    e2.reset(seed=11)
    for _ in range(2):
        e1.reset()
        e2.reset()
        assert episode_to_dict(e1.episode) == episode_to_dict(e2.episode)
    e3 = PMWeekEnv()
    e3.reset(seed=11)
    assert episode_to_dict(e3.episode)["intentions"] != episode_to_dict(e1.episode)["intentions"]


@pytest.mark.parametrize("action_mode", ACTION_MODES)
def test_pickle_round_trip_continues_identically(action_mode):
    env = PMWeekEnv(action_mode=action_mode, budget="B20", cost_profile="mild")
    actions = action_sequence(5, action_mode, n=2 * T)
    env.reset(seed=42)
    for a in actions[:25]:
        env.step(a)
    clone = pickle.loads(pickle.dumps(env))
    for k, a in enumerate(actions[25:T]):
        assert_same(list(env.step(a)), list(clone.step(a)), f"step {25 + k}")
    # the generators were pickled too: the next unseeded week is the same
    assert_same(env.reset(), clone.reset())
    assert episode_to_dict(env.episode) == episode_to_dict(clone.episode)
    for k, a in enumerate(actions[T:]):
        assert_same(list(env.step(a)), list(clone.step(a)), f"second week, step {k}")


# ------------------------------------------------------------------------------------------------ spaces


@pytest.mark.parametrize("action_mode", ACTION_MODES)
def test_documented_spaces_match(action_mode):
    doc = PMWeekEnv.__doc__
    m_res = re.search(r'"resources"``: ``Box\(R, (\d+)\)``', doc)
    m_bud = re.search(r'"budget"``: ``Box\((\d+),\)``', doc)
    assert m_res and m_bud, "the class docstring no longer states the observation shapes"
    n_res_feat, n_bud_feat = int(m_res.group(1)), int(m_bud.group(1))
    assert re.search(r'"mask"``: ``MultiBinary\(R\)``', doc)
    assert re.search(r'``action_mode="binary"`` \(default\): ``MultiBinary\(R\)``', doc)
    assert re.search(r'``action_mode="scores"``:\s+``Box\(-1, 1, \(R,\), float32\)``', doc)
    m_r = re.search(r"of ``R`` external-state resources \(default (\d+)", doc)
    assert m_r and int(m_r.group(1)) == R

    env = PMWeekEnv(action_mode=action_mode)
    space = env.observation_space
    assert isinstance(space, gym.spaces.Dict) and set(space.spaces) == {"resources", "budget", "mask"}
    assert space["resources"].shape == (R, n_res_feat) and space["resources"].dtype == np.float32
    assert space["budget"].shape == (n_bud_feat,) and space["budget"].dtype == np.float32
    assert isinstance(space["mask"], gym.spaces.MultiBinary) and space["mask"].shape == (R,)
    assert n_res_feat == len(RESOURCE_FEATURE_NAMES) and n_bud_feat == len(BUDGET_FEATURE_NAMES)
    assert len(set(RESOURCE_FEATURE_NAMES)) == n_res_feat and len(set(BUDGET_FEATURE_NAMES)) == n_bud_feat
    if action_mode == "binary":
        assert isinstance(env.action_space, gym.spaces.MultiBinary) and env.action_space.shape == (R,)
    else:
        a = env.action_space
        assert isinstance(a, gym.spaces.Box) and a.shape == (R,) and a.dtype == np.float32
        assert np.all(a.low == -1.0) and np.all(a.high == 1.0)


@pytest.mark.parametrize("per_step_cap", [None, 1, 3])
@pytest.mark.parametrize("budget", [None, "B5", 13])
@pytest.mark.parametrize("late_policy", LATE_POLICIES)
@pytest.mark.parametrize("cost_profile", sorted(COST_PROFILES))
def test_observations_in_space_and_types(cost_profile, late_policy, budget, per_step_cap):
    action_mode = "scores" if budget == 13 else "binary"
    env = PMWeekEnv(budget=budget, per_step_cap=per_step_cap, cost_profile=cost_profile, late_policy=late_policy,
                    action_mode=action_mode)
    rng = np.random.default_rng(2024)
    for seed in (3, 4):
        obs, info = env.reset(seed=seed)
        assert_in_space(env.observation_space, obs)
        assert info["remaining_budget"] == (-1 if env.budget is None else env.budget)
        terminated = False
        n = 0
        while not terminated:
            # mix: propose all candidates half of the time (spends the budget), random otherwise
            a = random_action(rng, action_mode)
            if rng.random() < 0.5:
                a = obs["mask"].astype(a.dtype)
            assert env.action_space.contains(a)
            new_obs, reward, terminated, truncated, info = env.step(a)
            n += 1
            assert type(reward) is float and math.isfinite(reward)
            assert type(terminated) is bool and type(truncated) is bool and truncated is False
            assert_in_space(env.observation_space, new_obs)  # includes the terminal observation
            for k in obs:
                assert not np.shares_memory(obs[k], new_obs[k]), k
            obs = new_obs
        assert n == T
        assert not obs["mask"].any(), "no resource is a candidate after the last step"


@pytest.mark.parametrize("seed", [0, 2000])
def test_candidate_mask_without_queries_matches_the_definition(seed):
    """With no queries nothing is resolved, so the mask is: some registered, active, non-visible intention on r
    whose declared window widened by the lookahead contains t."""
    env = PMWeekEnv()
    obs, _ = env.reset(seed=seed)
    ep, look = env.episode, env.world.lookahead
    hidden = (ep.resource >= 0) & ep.registered
    for t in range(T):
        live = hidden & (ep.active_from <= t) & (t <= ep.active_until) & (ep.declared_start - look <= t) \
            & (t <= ep.declared_end)
        expected = np.zeros(R, dtype=np.int8)
        expected[ep.resource[live]] = 1
        np.testing.assert_array_equal(obs["mask"], expected, err_msg=f"t={t}")
        obs, *_ = env.step(np.zeros(R, dtype=np.int8))


def test_mutating_an_observation_does_not_change_the_next():
    actions = action_sequence(9, "binary")
    env = PMWeekEnv()
    _, _, reference = rollout(env, actions, seed=17)
    obs, _ = env.reset(seed=17)
    for k, a in enumerate(actions):
        for v in obs.values():
            v[...] = 7  # scribble over the returned arrays
        obs, *_ = env.step(a)
        assert_same(obs, reference[k][0], f"step {k}")


@pytest.mark.parametrize("late_policy", LATE_POLICIES)
@pytest.mark.parametrize("cost_profile", ["unit", "skewed"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rewards_sum_to_set_f1(seed, cost_profile, late_policy):
    env = PMWeekEnv(budget="B40", per_step_cap=3, cost_profile=cost_profile, late_policy=late_policy)
    _, _, steps = rollout(env, action_sequence(seed, "binary"), seed=100 + seed)
    ep = steps[-1][4]["episode_metrics"]
    total = sum(s[1] for s in steps)
    assert abs(total - ep["set_f1"]) <= 1e-9
    tp, fp, fn = ep["tp"], ep["fp"], ep["fn"]
    assert tp + fp + fn > 0
    assert ep["set_f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn), abs=1e-12)
    # the per-step event counts add up to the episode counts (late executions count as FP)
    infos = [s[4] for s in steps]
    # every reward is the change of the running Set F1 of the step's counts
    ctp = cfp = cfn = 0
    running = 0.0
    for k, (_, reward, _, _, info) in enumerate(steps):
        before = running
        ctp, cfp, cfn = ctp + info["tp"], cfp + info["fp"], cfn + info["fn"]
        running = 2 * ctp / (2 * ctp + cfp + cfn) if ctp + cfp + cfn else 0.0
        assert reward == pytest.approx(running - before, abs=1e-12), f"step {k}"
    assert sum(i["tp"] for i in infos) == tp
    assert sum(i["fp"] for i in infos) == fp
    assert sum(i["late_execution"] for i in infos) == ep["late_execution"] <= fp
    assert sum(i["fn"] for i in infos) == fn
    assert sum(i["cost"] for i in infos) == ep["realized_cost"]
    assert sum(len(np.flatnonzero(i["queried"])) for i in infos) == ep["queries"]
    if late_policy == "expire":
        assert sum(i["late_execution"] for i in infos) == 0


# ------------------------------------------------------------------------------------------- vector env


def _vector_vs_single(venv, singles, action_mode, rng, n_steps, pending=None, start_obs=None):
    """Step ``venv`` and the single envs with the same actions under the NEXT_STEP autoreset convention."""
    n = venv.num_envs
    pending = [False] * n if pending is None else pending
    terminations = np.zeros(n, dtype=int)
    last = [None] * n
    for k in range(n_steps):
        actions = random_action(rng, action_mode, (n, R))
        vobs, vrew, vterm, vtrunc, vinfo = venv.step(actions)
        assert vrew.shape == (n,) and vterm.dtype == bool and not vtrunc.any()
        for i, env in enumerate(singles):
            where = f"step {k}, env {i}"
            if pending[i]:
                obs, _ = env.reset()
                reward, terminated, info = 0.0, False, None
            else:
                obs, reward, terminated, _, info = env.step(actions[i])
            pending[i] = terminated
            terminations[i] += terminated
            last[i] = obs
            for key in obs:
                np.testing.assert_array_equal(vobs[key][i], obs[key], err_msg=f"{where}: obs[{key!r}]")
            assert vrew[i] == reward, where
            assert bool(vterm[i]) is terminated, where
            if info is not None:
                for key in ("tp", "fp", "fn", "cost"):
                    assert vinfo[key][i] == info[key], (where, key)
                if env.budget is not None:
                    assert vinfo["remaining_budget"][i] == info["remaining_budget"], where
            if terminated:
                assert vinfo["_episode_metrics"][i]
                for key in EPISODE_KEYS:
                    assert vinfo["episode_metrics"][key][i] == info["episode_metrics"][key], (where, key)
            elif "_episode_metrics" in vinfo:
                assert not vinfo["_episode_metrics"][i]
    return pending, terminations, last


VECTOR_CONFIGS = [
    {},
    {"budget": "B5", "per_step_cap": 1, "cost_profile": "skewed", "late_policy": "execute", "load": 3},
]


@pytest.mark.parametrize("config", VECTOR_CONFIGS, ids=["default", "B5-cap1-skewed-execute-load3"])
@pytest.mark.parametrize("action_mode", ACTION_MODES)
def test_make_vec_matches_single_envs(config, action_mode):
    n, seed = 3, 500
    venv = gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="vector_entry_point", action_mode=action_mode,
                        **config)
    assert isinstance(venv, PMWeekVectorEnv)
    assert venv.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    singles = [PMWeekEnv(action_mode=action_mode, **config) for _ in range(n)]
    assert venv.single_observation_space == singles[0].observation_space
    assert venv.single_action_space == singles[0].action_space
    vobs, _ = venv.reset(seed=seed)
    assert venv.observation_space.contains(vobs)
    for i, env in enumerate(singles):
        obs, _ = env.reset(seed=seed + i)
        for key in obs:
            np.testing.assert_array_equal(vobs[key][i], obs[key])
    rng = np.random.default_rng(77)
    _, terminations, _ = _vector_vs_single(venv, singles, action_mode, rng, n_steps=2 * T + T // 2 + 2)
    assert (terminations == 2).all()
    venv.close()


def test_vector_reset_with_seed_list_and_reset_mask():
    n = 3
    venv = PMWeekVectorEnv(num_envs=n, budget="B20", per_step_cap=2)
    singles = [PMWeekEnv(budget="B20", per_step_cap=2) for _ in range(n)]
    seeds = [7, 3, 11]
    vobs, _ = venv.reset(seed=seeds)
    for i, env in enumerate(singles):
        obs, _ = env.reset(seed=seeds[i])
        np.testing.assert_array_equal(vobs["resources"][i], obs["resources"])
    rng = np.random.default_rng(1)
    pending, _, current = _vector_vs_single(venv, singles, "binary", rng, n_steps=30)

    # reset envs 0 and 2 mid-week without a seed: they continue their own generators like reset() would
    mask = np.array([True, False, True])
    vobs, _ = venv.reset(options={"reset_mask": mask})
    for i in np.flatnonzero(mask):
        current[i], _ = singles[i].reset()
        pending[i] = False
    for i in range(n):  # env 1 keeps its current observation
        for key in vobs:
            np.testing.assert_array_equal(vobs[key][i], current[i][key], err_msg=f"env {i} {key}")
    # staggered weeks now: autoresets happen at different steps
    pending, terminations, _ = _vector_vs_single(venv, singles, "binary", rng, n_steps=2 * T, pending=pending)
    assert terminations.tolist() == [1, 2, 1]

    # a seeded partial reset seeds sub-environment i with seed + i
    vobs, _ = venv.reset(seed=900, options={"reset_mask": np.array([False, True, False])})
    obs, _ = singles[1].reset(seed=901)
    np.testing.assert_array_equal(vobs["resources"][1], obs["resources"])
    pending[1] = False
    _vector_vs_single(venv, singles, "binary", rng, n_steps=T + 5, pending=pending)


def test_vector_action_masks():
    venv = PMWeekVectorEnv(num_envs=2)
    obs, _ = venv.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(T + 3):
        m = venv.action_masks()
        assert m.shape == (2, 2 * R) and m.dtype == bool
        assert m[:, 0::2].all()
        np.testing.assert_array_equal(m[:, 1::2], obs["mask"].astype(bool))
        obs, *_ = venv.step(random_action(rng, "binary", (2, R)))


@pytest.mark.parametrize("call, error, match", [
    (lambda v: v.step(np.zeros((2, R), dtype=np.int8)), RuntimeError, "reset"),
    (lambda v: v.reset(options={"foo": 1}), ValueError, "unknown reset options"),
    (lambda v: v.reset(seed=[1, 2, 3]), ValueError, "seed list"),
    (lambda v: v.reset(options={"reset_mask": np.array([1, 0])}), ValueError, "reset_mask"),
    (lambda v: v.reset(options={"reset_mask": np.array([True, False])}), RuntimeError, "first reset"),
])
def test_vector_bad_input(call, error, match):
    venv = PMWeekVectorEnv(num_envs=2)
    with pytest.raises(error, match=match):
        call(venv)


@pytest.mark.parametrize("num_envs", [2, 16])  # the binary check's two paths: up to 64 values, and a batch
@pytest.mark.parametrize("bad", [2.0, -1.0, 0.5, np.nan, np.inf])
def test_vector_bad_action(num_envs, bad):
    venv = PMWeekVectorEnv(num_envs=num_envs)
    venv.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        venv.step(np.zeros(R, dtype=np.int8))
    action = np.zeros((num_envs, R))
    action[-1, -1] = bad
    with pytest.raises(ValueError, match="0 or 1"):
        venv.step(action)
    action[-1, -1] = -0.0  # equal to 0
    venv.step(action)
    with pytest.raises(ValueError, match="num_envs"):
        PMWeekVectorEnv(num_envs=0)


# -------------------------------------------------------------------------------------- executor invariants


def reference_executor(scores, mask, costs, remaining, cap, cost_cap):
    """BudgetPM Algorithm 1 as documented: scan proposals by score (score / cost if prices differ; ties to lower
    cost, then lower index), skip non-candidates and what B, N_max or L cannot afford, keep scanning."""
    unequal = costs.min() != costs.max()
    prop = [r for r in range(len(scores)) if scores[r] > 0]
    prop.sort(key=lambda r: (-(scores[r] / costs[r] if unequal else scores[r]), costs[r], r))
    selected, skipped, spent = [], dict(non_candidate=0, budget=0, count_cap=0, cost_cap=0), 0
    for r in prop:
        c = int(costs[r])
        if not mask[r]:
            skipped["non_candidate"] += 1
        elif remaining is not None and c > remaining - spent:
            skipped["budget"] += 1
        elif cap is not None and len(selected) >= cap:
            skipped["count_cap"] += 1
        elif cost_cap is not None and spent + c > cost_cap:
            skipped["cost_cap"] += 1
        else:
            selected.append(r)
            spent += c
    return sorted(selected), skipped


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(week=st.integers(0, 100_000), action_seed=st.integers(0, 2**32 - 1), budget=st.integers(1, 80),
       cap=st.integers(1, 4), cost_cap=st.one_of(st.none(), st.integers(1, 24)),
       cost_profile=st.sampled_from(sorted(COST_PROFILES)), action_mode=st.sampled_from(ACTION_MODES),
       p=st.floats(0.05, 1.0), late_policy=st.sampled_from(LATE_POLICIES))
def test_executor_invariants(week, action_seed, budget, cap, cost_cap, cost_profile, action_mode, p, late_policy):
    env = PMWeekEnv(budget=budget, per_step_cap=cap, per_step_cost_cap=cost_cap, cost_profile=cost_profile,
                    action_mode=action_mode, late_policy=late_policy)
    rng = np.random.default_rng(action_seed)
    obs, info = env.reset(seed=week)
    costs = env.episode.costs
    remaining = info["remaining_budget"]
    assert remaining == budget
    spent = 0
    for t in range(T):
        mask = obs["mask"].astype(bool)
        assert np.array_equal(env.action_masks()[1::2], mask)
        action = random_action(rng, action_mode, p=p)
        if rng.random() < 0.3:  # sometimes propose exactly the candidates
            if action_mode == "scores":
                action = np.where(mask, np.maximum(np.abs(action), 0.01), -1.0).astype(np.float32)
            else:
                action = mask.astype(np.int8)
        obs, reward, terminated, _, info = env.step(action)
        queried = np.flatnonzero(info["queried"])
        assert info["step"] == t
        assert len(queried) <= cap
        assert mask[queried].all(), "queried a resource that was not a candidate"
        assert info["cost"] == int(costs[queried].sum())
        if cost_cap is not None:
            assert info["cost"] <= cost_cap
        spent += info["cost"]
        assert spent <= budget
        assert info["remaining_budget"] == remaining - info["cost"]
        remaining = info["remaining_budget"]
        scores = np.asarray(action, dtype=np.float64)
        proposed = scores > 0
        assert info["skipped_non_candidate"] == int(np.sum(proposed & ~mask))
        assert len(queried) + sum(v for k, v in info.items() if k.startswith("skipped_")) == int(proposed.sum())
        expected_sel, expected_skip = reference_executor(scores, mask, costs, remaining + info["cost"], cap,
                                                         cost_cap)
        assert queried.tolist() == expected_sel
        assert {k: info[f"skipped_{k}"] for k in expected_skip} == expected_skip
        assert terminated == (t == T - 1)
    assert info["episode_metrics"]["realized_cost"] == spent


def test_proposing_a_non_candidate_is_counted_and_scanning_continues():
    env = PMWeekEnv(budget=None, per_step_cap=1)
    obs, _ = env.reset(seed=0)
    steps = 0
    while obs["mask"].all() or not obs["mask"].any():
        obs, *_ = env.step(np.zeros(R, dtype=np.int8))
        steps += 1
    non_cand = int(np.flatnonzero(~obs["mask"].astype(bool))[0])
    cand = int(np.flatnonzero(obs["mask"])[0])
    env_s = PMWeekEnv(budget=None, per_step_cap=1, action_mode="scores")
    obs_s, _ = env_s.reset(seed=0)
    for _ in range(steps):
        obs_s, *_ = env_s.step(np.zeros(R, dtype=np.float32))
    np.testing.assert_array_equal(obs_s["mask"], obs["mask"])
    a = np.full(R, -1.0, dtype=np.float32)
    a[non_cand], a[cand] = 1.0, 0.5  # the non-candidate is scanned first, skipped, the cap is still free
    _, _, _, _, info = env_s.step(a)
    assert info["skipped_non_candidate"] == 1
    assert np.flatnonzero(info["queried"]).tolist() == [cand]
    b = np.zeros(R, dtype=np.int8)
    b[non_cand] = 1
    _, _, _, _, info = env.step(b)
    assert [info[f"skipped_{k}"] for k in ("non_candidate", "budget", "count_cap", "cost_cap")] == [1, 0, 0, 0]
    assert np.flatnonzero(info["queried"]).size == 0 and info["cost"] == 0


def _advance_to_clock_and_snapshot_candidates(env):
    """Step with empty proposals until the clock and a snapshot resource are candidates at once; returns
    (seed, steps taken, clock index, snapshot index, observation)."""
    classes = [c for _, c in DEFAULT_RESOURCES]
    clock = classes.index("clock")
    snaps = [i for i, c in enumerate(classes) if c == "snapshot"]
    for seed in range(50):
        obs, _ = env.reset(seed=seed)
        for t in range(T - 1):
            m = obs["mask"].astype(bool)
            if m[clock] and m[snaps].any():
                return seed, t, clock, int(np.array(snaps)[m[snaps]][0]), obs
            obs, *_ = env.step(np.zeros(env.action_space.shape, dtype=env.action_space.dtype))
    raise AssertionError("no week with simultaneous clock and snapshot candidates")


@pytest.mark.parametrize("clock_score, snap_score, profile, winner", [
    (0.2, 0.6, "skewed", "clock"),   # 0.2/1 > 0.6/4: score per cost, not raw score
    (0.2, 0.6, "unit", "snap"),      # equal prices: raw score
    (0.25, 1.0, "skewed", "clock"),  # tie in score/cost -> lower cost
    (0.1, 0.8, "skewed", "snap"),    # 0.8/4 > 0.1/1
])
def test_scores_executor_order_by_score_per_cost(clock_score, snap_score, profile, winner):
    env = PMWeekEnv(budget=None, per_step_cap=1, cost_profile=profile, action_mode="scores")
    _, _, clock, snap, obs = _advance_to_clock_and_snapshot_candidates(env)
    assert env.episode.costs[clock] < env.episode.costs[snap] or profile == "unit"
    a = np.full(R, -1.0, dtype=np.float32)
    a[clock], a[snap] = clock_score, snap_score
    _, _, _, _, info = env.step(a)
    assert np.flatnonzero(info["queried"]).tolist() == [clock if winner == "clock" else snap]
    assert info["skipped_count_cap"] == 1
    assert info["cost"] == env.episode.costs[np.flatnonzero(info["queried"])[0]]


def test_binary_ties_go_to_lower_cost_then_lower_index():
    env = PMWeekEnv(budget=None, per_step_cap=1, cost_profile="skewed", action_mode="binary")
    seed, steps, clock, snap, obs = _advance_to_clock_and_snapshot_candidates(env)
    a = obs["mask"].astype(np.int8)
    _, _, _, _, info = env.step(a)
    assert np.flatnonzero(info["queried"]).tolist() == [clock]  # all scores 1: the cheapest (clock, cost 1) first
    env_u = PMWeekEnv(budget=None, per_step_cap=1, cost_profile="unit")
    obs, _ = env_u.reset(seed=seed)
    for _ in range(steps):
        obs, *_ = env_u.step(np.zeros(R, dtype=np.int8))
    cands = np.flatnonzero(obs["mask"])
    assert cands.size >= 2
    a = np.zeros(R, dtype=np.int8)
    a[cands[-2:]] = 1
    _, _, _, _, info = env_u.step(a)
    assert np.flatnonzero(info["queried"]).tolist() == [cands[-2]]  # equal prices and scores: lower index


def test_action_masks():
    env = PMWeekEnv()
    obs, _ = env.reset(seed=8)
    rng = np.random.default_rng(8)
    for _ in range(T):
        m = env.action_masks()
        assert m.shape == (2 * R,) and m.dtype == bool
        assert m[0::2].all()
        np.testing.assert_array_equal(m[1::2], obs["mask"].astype(bool))
        obs, _, terminated, _, _ = env.step(random_action(rng, "binary"))
    assert terminated


# --------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("action_mode, action, error, match", [
    ("binary", np.zeros(R - 1, dtype=np.int8), ValueError, "shape"),
    ("binary", np.zeros((1, R), dtype=np.int8), ValueError, "shape"),
    ("scores", np.zeros(R + 1, dtype=np.float32), ValueError, "shape"),
    ("binary", np.full(R, 2), ValueError, "0 or 1"),
    ("binary", np.full(R, 0.5), ValueError, "0 or 1"),
    ("binary", np.full(R, -1), ValueError, "0 or 1"),
    ("scores", np.full(R, 1.5, dtype=np.float32), ValueError, r"\[-1, 1\]"),
    ("scores", np.full(R, -1.01), ValueError, r"\[-1, 1\]"),
    ("scores", np.full(R, np.nan, dtype=np.float32), ValueError, r"\[-1, 1\]"),
    ("binary", np.array(["1"] * R), TypeError, "dtype"),
    ("scores", np.array(["0.5"] * R), TypeError, "dtype"),
])
def test_bad_action_raises(action_mode, action, error, match):
    env = PMWeekEnv(action_mode=action_mode)
    env.reset(seed=0)
    with pytest.raises(error, match=match):
        env.step(action)
    # nothing happened: the env is still at step 0 and accepts a valid action
    _, _, _, _, info = env.step(np.zeros(R, dtype=np.int8 if action_mode == "binary" else np.float32))
    assert info["step"] == 0


@pytest.mark.parametrize("kwargs, error, match", [
    ({"budget": 0}, ValueError, r"budget must be an int in 1\.\."),
    ({"budget": -3}, ValueError, r"budget must be an int in 1\.\."),
    ({"budget": "B0"}, ValueError, r"is not a level"),
    ({"budget": "X10"}, ValueError, r"'X10' is not a level; the levels are B5, B10"),
    ({"budget": 10.5}, TypeError, r"budget must be an int"),
    ({"budget": True}, TypeError, r"budget must be an int"),
    ({"cost_profile": "flat"}, ValueError, r"unknown cost_profile 'flat'"),
    ({"late_policy": "ignore"}, ValueError, r"late_policy must be one of"),
    ({"action_mode": "discrete"}, ValueError, r"action_mode must be one of"),
    ({"per_step_cap": 0}, ValueError, r"per_step_cap must be an int in \[1, "),
    ({"per_step_cap": 1.5}, ValueError, r"per_step_cap must be an int in \[1, "),
    ({"per_step_cost_cap": -1}, ValueError, r"per_step_cost_cap must be an int in \[1, "),
    ({"load": -1}, ValueError, r"load must be an int in \[0, 100\]"),
    ({"world": {"horizon": 10}}, TypeError, r"world must be a WorldConfig"),
])
def test_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        PMWeekEnv(**kwargs)
    with pytest.raises(error, match=match):
        PMWeekVectorEnv(num_envs=2, **kwargs)
    with pytest.raises(error, match=match):
        gym.make(ENV_ID, **kwargs)


def test_step_before_reset_and_after_termination():
    env = PMWeekEnv()
    with pytest.raises(RuntimeError, match=r"reset\(\) before step\(\)"):
        env.step(np.zeros(R, dtype=np.int8))
    env.reset(seed=1)
    for _ in range(T):
        _, _, terminated, _, _ = env.step(np.zeros(R, dtype=np.int8))
    assert terminated
    with pytest.raises(RuntimeError, match="terminated"):
        env.step(np.zeros(R, dtype=np.int8))
    env.reset()
    env.step(np.zeros(R, dtype=np.int8))  # fine again after reset


@pytest.mark.parametrize("options, error, match", [
    ({"seed": 3}, ValueError, r"unknown reset options \['seed'\]"),
    ({"episode": None, "foo": 1}, ValueError, r"unknown reset options \['foo'\]"),
    ({"episode": "not an episode"}, TypeError, r"options\['episode'\] must be an Episode, got str"),
    ({"episode": episode_to_dict(generate_episode(1))}, TypeError, r"must be an Episode, got dict"),
])
def test_bad_reset_options(options, error, match):
    env = PMWeekEnv()
    with pytest.raises(error, match=match):
        env.reset(seed=0, options=options)


# ------------------------------------------------------------------------------------------------ generator


@pytest.mark.parametrize("load", [0, 3])
@pytest.mark.parametrize("cost_profile", ["unit", "skewed"])
@pytest.mark.parametrize("seed", [0, 2000, 6001])
def test_generate_episode_is_what_reset_plays(seed, load, cost_profile):
    env = gym.make(ENV_ID, load=load, cost_profile=cost_profile)
    env.reset(seed=seed)
    played = episode_to_dict(env.unwrapped.episode)
    generated = episode_to_dict(generate_episode(seed, cost_profile=cost_profile, load=load))
    played_meta, generated_meta = played.pop("meta"), generated.pop("meta")
    assert played == generated
    assert played_meta["load"] == generated_meta["load"] == load


def test_reset_episode_records_its_seed():
    """The played week's provenance names the seed, as generate_episode(seed) does (meta = {seed, load})."""
    env = PMWeekEnv()
    env.reset(seed=2000)
    assert env.episode.meta == generate_episode(2000).meta == {"seed": 2000, "load": 0}


@pytest.mark.parametrize("seed", [2000, 21000])
def test_load_keeps_the_base_week(seed):
    k0, k3 = generate_episode(seed, load=0), generate_episode(seed, load=3)
    d0, d3 = episode_to_dict(k0), episode_to_dict(k3)
    n0 = k0.n_intentions
    assert k3.n_intentions == n0 + 3 * 7
    assert d3["intentions"][:n0] == d0["intentions"]
    assert d3["updates"] == d0["updates"] and d3["resources"] == d0["resources"]
    assert d3["visible_outcomes"] == d0["visible_outcomes"] and d3["calendar"] == d0["calendar"]
    extra = d3["intentions"][n0:]
    assert all(x["id"].startswith("X") for x in extra)
    assert not any(i.startswith("X") for i in k0.ids)
    assert all(x["kind"] == "channel" and x["polarity"] == "positive" and x["resource"] != "clock"
               for x in extra)
    assert np.all(k3.kind[n0:] == KIND_CHANNEL) and np.all(k3.polarity[n0:] == POS)
    # hints: the extra triggers only add relevance; it is unchanged where no extra trigger's bump reaches
    assert np.all(k3.hints >= k0.hints)
    untouched = np.ones_like(k0.hints, dtype=bool)
    t = np.arange(k0.horizon)
    for r, onset in zip(k3.resource[n0:], k3.onset[n0:]):
        assert onset < NEVER
        untouched[t <= onset + 1, r] = False
        assert k3.hints[onset, r] > k0.hints[onset, r] or k0.hints[onset, r] == 1.0
    np.testing.assert_array_equal(k3.hints[untouched], k0.hints[untouched])
    assert untouched.any()


@pytest.mark.parametrize("cost_profile", sorted(COST_PROFILES))
def test_generated_weeks_validate(cost_profile):
    prices, scale = COST_PROFILES[cost_profile]
    for seed in range(50):
        ep = generate_episode(seed, cost_profile=cost_profile, load=seed % 4)
        validate_episode(ep)
        assert ep.cost_profile == cost_profile
        assert ep.costs.tolist() == [round(prices[c] * scale) for c in ep.resource_classes]
        assert ep.hints.shape == (T, R)


def test_kernel_column_indices_follow_the_names():
    """The kernels write and the envs read columns through index records derived from the name tuples, so names
    and numbers cannot drift; the envs' info keys follow the kernel's event and skip columns."""
    from membudget.envs.pm.core import BF, EV, EVENT_COLUMNS, METRIC_NAMES, MT, RF, SK, SKIP_NAMES
    from membudget.envs.pm.env import EVENT_KEYS, SKIPPED_KEYS

    for record, names in ((RF, RESOURCE_FEATURE_NAMES), (BF, BUDGET_FEATURE_NAMES), (EV, EVENT_COLUMNS),
                          (SK, SKIP_NAMES), (MT, METRIC_NAMES)):
        assert record._fields == names and tuple(record) == tuple(range(len(names)))
    assert EVENT_KEYS == EVENT_COLUMNS[:EV.n_events]
    assert SKIPPED_KEYS == tuple(f"skipped_{name}" for name in SK._fields)


def test_the_all_relevant_reference_steps_a_bounded_number_of_cells_at_once(monkeypatch):
    """The budget levels' All-relevant reference steps its weeks in cores of at most ``CALIBRATION_CELLS`` steps ×
    resources (all twenty development weeks of a 10,000-step, 1,000-resource world at once took 4 GB; of a
    100,000-step one, 40) with the same costs and metrics as all weeks at once."""
    from membudget.envs.pm import core as core_module
    from membudget.envs.pm import levels

    world, seeds = WorldConfig(horizon=40, n_days=2), range(2000, 2007)
    whole = levels.all_relevant_costs(seeds, world, "mild", 1)
    sizes, real = [], core_module.PMWeekCore

    class Counted(real):
        def __init__(self, n, *args, **kwargs):
            sizes.append(n)
            super().__init__(n, *args, **kwargs)

    monkeypatch.setattr(core_module, "PMWeekCore", Counted)
    monkeypatch.setattr(levels, "CALIBRATION_CELLS", 3 * 40 * len(world.resources) + 5)
    costs, metrics = levels.all_relevant_costs(seeds, world, "mild", 1)
    assert sizes == [3, 3, 1]
    np.testing.assert_array_equal(costs, whole[0])
    np.testing.assert_array_equal(metrics, whole[1])
    assert levels.all_relevant_costs([], world)[0].shape == (0,)


def test_weeks_never_hold_more_intentions_than_a_week_file_may():
    """A load that alone adds more than MAX_INTENTIONS intentions is refused at construction, before any draw; a
    drawn week over the bound raises naming it (such a week was played, but saving it, replaying it through
    ``options={"episode": ...}`` and every teacher refused it); a load in a world without channels is refused at
    construction too."""
    from membudget.envs.pm.world import MAX_INTENTIONS

    long_days = WorldConfig(horizon=20_000, n_days=20_000)
    with pytest.raises(ValueError, match=r"^load 51 adds 1020000 intentions over the world's 20000 days; a week "
                                         r"holds at most 1000000$"):
        PMWeekEnv(budget=None, world=long_days, load=51)
    env = PMWeekEnv(budget=None, world=long_days, load=50)  # exactly the bound, plus the base week's intentions
    with pytest.raises(ValueError, match=rf"^the week drew \d+ intentions, more than a week holds "
                                         rf"\({MAX_INTENTIONS}\)"):
        env.reset(seed=0)
    with pytest.raises(ValueError, match="no channel resources"):
        PMWeekEnv(budget=None, world=WorldConfig(resources=(("clock", "clock"),)), load=1)

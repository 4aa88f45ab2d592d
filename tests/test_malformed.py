"""Bad input on every path into PMWeek-v0 (episode files and objects, constructor arguments, seeds, actions, reset
options) and into the saved gates: each malformed input is refused with the project's own ``ValueError`` naming
the field, or runs to a result inside the documented ranges. Regression cases for each class of input that was once
accepted wrongly or failed obscurely, then hypothesis fuzzing (derandomized: the same examples on every run)."""

import copy
import importlib
import inspect
import json

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from membudget.agents import BoostedGate, StaticGate
from membudget.envs.pm import (NEVER, EpisodeFormatError, PMWeekEnv, PMWeekVectorEnv, WorldConfig, episode_from_dict,
                               episode_to_dict, generate_episode, load_episode, validate_episode)
from membudget.envs.pm.world import MAX_BUDGET, MAX_COST, replace
from membudget.envs.tiers import TierRoutingEnv, generate_query

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

BASE = generate_episode(2000)
BASE_DICT = episode_to_dict(BASE)
ENV = PMWeekEnv(budget="B10")


def play(ep, env=ENV, seed=0):
    """Run ``ep`` to its end under random binary proposals; every observation must lie in the space and the
    week's metrics in their ranges."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(options={"episode": ep})
    assert env.observation_space.contains(obs)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(rng.integers(0, 2, env.action_space.shape))
        assert env.observation_space.contains(obs) and np.isfinite(reward)
        total += reward
        done = terminated or truncated
    m = info["episode_metrics"]
    assert 0 <= m["set_f1"] <= 1 and 0 <= m["on_time_recall"] <= 1
    assert min(m["tp"], m["fp"], m["fn"], m["queries"]) >= 0
    assert 0 <= m["realized_cost"] <= env.unwrapped.budget
    assert np.all(m["spend_per_quarter"] >= 0) and m["spend_per_quarter"].sum() == m["realized_cost"]
    assert total == pytest.approx(m["set_f1"])


def _row(d, kind):
    return next(r for r in d["intentions"] if r["kind"] == kind)


# --- silently wrong once: integers past the kernels' width, non-finite floats, costs that overflow ---------------

@pytest.mark.parametrize("value", [2**31, 2**32, 2**63, NEVER, -1, 80])
@pytest.mark.parametrize("field", ["onset", "deadline"])
def test_never_is_null_only_in_files(field, value):
    d = copy.deepcopy(BASE_DICT)
    row = _row(d, "channel")
    row[field] = value
    with pytest.raises(EpisodeFormatError, match=rf"\.{field}: .*(outside the horizon|out of range)"):
        episode_from_dict(d)


@pytest.mark.parametrize("value", [2**31, 2**32, -5, NEVER + 1])
def test_in_memory_onset_outside_horizon_is_refused(value):
    j = int(np.flatnonzero(BASE.kind == 1)[0])  # a channel intention
    onset = BASE.onset.copy()
    onset[j] = value
    with pytest.raises(EpisodeFormatError, match=r"\.onset: .* outside the horizon"):
        ENV.reset(options={"episode": replace(BASE, onset=onset)})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.5, 24.0])
def test_calendar_hour_must_be_finite_in_a_day(value, tmp_path):
    d = copy.deepcopy(BASE_DICT)
    d["calendar"]["hour"][3] = value
    with pytest.raises(EpisodeFormatError, match=r"calendar\.hour"):
        episode_from_dict(d)
    path = tmp_path / "ep.json"
    path.write_text(json.dumps(d))  # NaN / Infinity tokens, as Python writes them
    with pytest.raises(EpisodeFormatError, match=r"calendar\.hour"):
        load_episode(path)
    hour = BASE.step_hour.copy()
    hour[3] = value
    with pytest.raises(EpisodeFormatError, match=r"calendar\.hour"):
        validate_episode(replace(BASE, step_hour=hour))


@pytest.mark.parametrize("cost", [MAX_COST + 1, 2**62, 0])
def test_costs_are_bounded_so_no_sum_overflows(cost):
    costs = BASE.costs.copy()
    costs[1] = cost
    with pytest.raises(EpisodeFormatError, match=rf"resources\.cost: costs must be integers in 1\.\.{MAX_COST}"):
        validate_episode(replace(BASE, costs=costs))


def test_the_largest_costs_and_budget_play_without_overflow():
    costs = np.full_like(BASE.costs, MAX_COST)
    env = PMWeekEnv(budget=MAX_BUDGET, per_step_cap=None)
    play(replace(BASE, costs=costs), env)


@pytest.mark.parametrize("kwargs", [dict(budget=MAX_BUDGET + 1), dict(per_step_cost_cap=MAX_BUDGET + 1),
                                    dict(per_step_cap=10**6)])
def test_budget_and_caps_are_bounded(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        PMWeekEnv(**kwargs)


# --- in-memory episodes: the kernels' dtypes exactly, or a clear error ------------------------------------------

@pytest.mark.parametrize("make", [lambda a: a.tolist(), lambda a: a.astype(np.int32), lambda a: a.astype(">i8"),
                                  lambda a: a.astype(np.float16), lambda a: a.astype(np.complex128),
                                  lambda a: a.astype(object), lambda a: a[:-1]],
                         ids=["list", "int32", "big-endian", "float16", "complex", "object", "short"])
@pytest.mark.parametrize("field", ["onset", "priority", "miss_cost", "registered", "hints", "step_hour", "costs"])
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_in_memory_arrays_of_another_dtype_or_shape_are_refused(field, make):
    with pytest.raises(EpisodeFormatError, match="expected .* array"):
        ENV.reset(options={"episode": replace(BASE, **{field: make(getattr(BASE, field))})})


@pytest.mark.parametrize("updates", [({"step": 1},), ("cancel",), ({"step": "3", "kind": "cancel", "target": "C000",
                                                                     "registered": True, "new_id": None},),
                                     [dict(step=1, kind="cancel", target="C000", registered=True, new_id=None)]])
def test_malformed_updates_are_refused(updates):
    with pytest.raises(EpisodeFormatError, match="updates"):
        validate_episode(replace(BASE, updates=updates))


@pytest.mark.parametrize("change,match", [
    (dict(ids=tuple(range(BASE.n_intentions))), r"intentions\.id"), (dict(resource_names=(1,) * 11), r"resources\.name"),
    (dict(resource_classes=("clock",) + ("cloud",) * 10), r"resources\.class"), (dict(horizon=10**6), "horizon"),
    (dict(horizon=80.0), "horizon"), (dict(meta=[1]), "meta"), (dict(cost_profile=None), "cost_profile")])
def test_malformed_scalar_fields_are_refused(change, match):
    with pytest.raises(EpisodeFormatError, match=match):
        validate_episode(replace(BASE, **change))


# --- unreadable files ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("content", [b"\xff\xfe\x00{", b"[" * 100_000 + b"]" * 100_000, b'{"horizon": ' +
                                     b"9" * 5000 + b"}", b"{" + b'"format": "membudget.pm-episode/1", "horizon": 1' +
                                     b"0" * 20 + b"}", b""])
def test_unreadable_files_raise_episode_format_error(content, tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(EpisodeFormatError, match="bad.json"):
        load_episode(path)


# --- seeds, actions, reset options ---------------------------------------------------------------------------

@pytest.mark.parametrize("action", [[[0, 1], [1]], None, "1" * 11, {"a": 1}, np.full(11, np.nan), np.zeros(12)])
def test_malformed_actions_are_refused(action):
    ENV.reset(seed=1)
    with pytest.raises((ValueError, TypeError), match="action"):
        ENV.step(action)


@pytest.mark.parametrize("field,value", [("needs", np.full(5, np.nan)), ("answerability", -0.5),
                                         ("context_tokens", 10**9), ("type_cues", np.zeros(3)),
                                         ("judge_noise", np.full(243, np.inf)), ("qtype", 1.5)])
def test_tier_routing_query_option_is_validated(field, value):
    env = TierRoutingEnv()
    q = generate_query(np.random.default_rng(0), "locomo")
    setattr(q, field, value)
    with pytest.raises(ValueError, match=rf"query\.{field}"):
        env.reset(options={"query": q})


# --- saved gates: structure checked at load, so predict() is bounded -------------------------------------------

@pytest.fixture(scope="module")
def boosted(tmp_path_factory):
    gate = BoostedGate(n_estimators=3, max_depth=2)
    X = np.random.default_rng(0).normal(size=(200, 27))
    gate._fit_scorer(X, (X[:, 0] > 0).astype(int))
    gate.thresholds_ = {"B20": 0.5}
    return gate


def _resave(gate, path, **arrays):
    z = {"kind": np.array("BoostedGate"), "config": np.array(json.dumps(gate.get_params())),
         "thresholds": np.array(json.dumps(gate.thresholds_)), **gate._arrays(), **arrays}
    np.savez(path, **z)
    return path


@pytest.mark.parametrize("edit,match", [
    (lambda g: {"left": np.where(g.left_ > 0, 0, g.left_)}, "child must come after its parent"),
    (lambda g: {"right": np.where(g.right_ > 0, g.right_ + 10**6, g.right_)}, "inside the tree"),
    (lambda g: {"left": np.where(g.right_ > 0, g.right_, g.left_)}, "two parents"),
    (lambda g: {"right": np.where(g.right_ > 0, -1, g.right_)}, "exactly one child"),
    (lambda g: {"feature": np.where(g.left_ > 0, 27, g.feature_)}, "split features"),
    (lambda g: {"value": g.value_[:, :-1]}, "shape"),
    (lambda g: {"threshold": np.where(g.left_ > 0, np.nan, g.threshold_)}, "non-finite"),
])
def test_crafted_boosted_gate_files_are_refused(boosted, tmp_path, edit, match):
    with pytest.raises(ValueError, match=match):
        BoostedGate.load(_resave(boosted, tmp_path / "g.npz", **edit(boosted)))


def test_boosted_gate_deeper_than_max_depth_is_refused(boosted, tmp_path):
    cfg = dict(boosted.get_params(), max_depth=1)
    path = tmp_path / "g.npz"
    _resave(boosted, path, config=np.array(json.dumps(cfg)))
    with pytest.raises(ValueError, match="deeper than max_depth=1"):
        BoostedGate.load(path)
    cfg["max_depth"] = 10**9
    _resave(boosted, path, config=np.array(json.dumps(cfg)))
    with pytest.raises(ValueError, match="max_depth"):
        BoostedGate.load(path)


def test_boosted_gate_round_trip_keeps_scores(boosted, tmp_path):
    X = np.random.default_rng(1).normal(size=(50, 27))
    loaded = BoostedGate.load(_resave(boosted, tmp_path / "g.npz"))
    np.testing.assert_array_equal(loaded.score(X), boosted.score(X))


@pytest.mark.parametrize("arrays,match", [({"coef": np.zeros(26)}, "coef"), ({"mean": np.zeros((27, 1))}, "mean"),
                                          ({"scale": np.zeros(27)}, "scale")])
def test_static_gate_arrays_of_the_wrong_shape_are_refused(tmp_path, arrays, match):
    gate = StaticGate()
    gate.mean_, gate.scale_, gate.coef_, gate.intercept_ = np.zeros(27), np.ones(27), np.zeros(27), 0.0
    gate.thresholds_ = {"B20": 0.5}
    z = {"kind": np.array("StaticGate"), "config": np.array(json.dumps(gate.get_params())),
         "thresholds": np.array(json.dumps(gate.thresholds_)), **gate._arrays(), **arrays}
    np.savez(tmp_path / "s.npz", **z)
    with pytest.raises(ValueError, match=match):
        StaticGate.load(tmp_path / "s.npz")


# --- fuzzing ---------------------------------------------------------------------------------------------------

def _leaves(d, path=()):
    if isinstance(d, dict):
        for k, v in d.items():
            yield path + (k,)
            yield from _leaves(v, path + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d[:3]):  # the first entries of each list stand for the rest
            yield path + (i,)
            yield from _leaves(v, path + (i,))


PATHS = [p for p in _leaves(BASE_DICT) if p[0] != "meta"]
PLAUSIBLE = st.one_of(st.integers(-2, 90), st.floats(0, 1.5), st.booleans(), st.none())
JSON_VALUES = st.one_of(
    PLAUSIBLE, PLAUSIBLE, PLAUSIBLE, st.integers(-2**70, 2**70), st.sampled_from([-1, 0, 1, 79, 80, 2**31, 2**63, NEVER]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
    st.sampled_from(["clock", "delta", "channel", "lure", "tp", "C000", "cancel"]),
    st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))


def _set(d, path, value):
    for k in path[:-1]:
        d = d[k]
    if value is _DELETE:
        del d[path[-1]]
    else:
        d[path[-1]] = value


_DELETE = object()


@pytest.mark.slow
@FUZZ
@given(st.lists(st.tuples(st.sampled_from(PATHS), st.one_of(JSON_VALUES, st.just(_DELETE))), min_size=1,
                max_size=3))
def test_fuzzed_episode_files_are_refused_or_play_in_range(tmp_path_factory, edits):
    d = copy.deepcopy(BASE_DICT)
    for path, value in edits:
        try:
            _set(d, path, value)
        except (KeyError, IndexError, TypeError):  # an earlier edit removed or replaced the parent
            pass
    file = tmp_path_factory.mktemp("fuzz") / "ep.json"
    file.write_text(json.dumps(d))
    try:
        ep = episode_from_dict(d)
    except EpisodeFormatError:
        event("refused")
        with pytest.raises(EpisodeFormatError):
            load_episode(file)
        return
    event("played")
    assert episode_to_dict(load_episode(file)) == episode_to_dict(ep)
    play(ep)


ARRAY_FIELDS = ["kind", "resource", "active_from", "active_until", "declared_start", "declared_end", "onset",
                "deadline", "polarity", "priority", "version", "visible_outcome", "registered", "cross_day",
                "update_sensitive", "miss_cost", "step_day", "step_hour", "weekday", "costs", "hints"]


@FUZZ
@given(st.sampled_from(ARRAY_FIELDS), st.integers(0, 10**6),
       st.sampled_from([np.int64, np.bool_, np.float64, np.int32, np.float16, ">f8"]),
       st.one_of(st.integers(-2, 90), st.integers(0, 1), st.floats(0, 1), st.integers(-2**40, 2**40),
                 st.floats(allow_nan=True, allow_infinity=True)))
def test_fuzzed_in_memory_episodes_are_refused_or_play_in_range(field, where, dtype, value):
    a = np.array(getattr(BASE, field))
    flat = a.reshape(-1).astype(np.float64)
    flat[where % flat.size] = value
    with np.errstate(invalid="ignore", over="ignore"):
        changed = flat.reshape(a.shape).astype(dtype)
    ep = replace(BASE, **{field: changed})
    try:
        validate_episode(ep)
    except EpisodeFormatError:
        event("refused")
        with pytest.raises(EpisodeFormatError):
            ENV.reset(options={"episode": ep})
        return
    event("played")
    play(ep)


ARGUMENTS = {
    "budget": st.one_of(st.sampled_from(["B5", "B10", "B80", "B0", "B-3", "10", None]), st.integers(-5, 2**41),
                        st.floats(allow_nan=True)),
    "per_step_cap": st.one_of(st.none(), st.integers(-2, 2**33), st.floats(allow_nan=True), st.booleans()),
    "per_step_cost_cap": st.one_of(st.none(), st.integers(-2, 2**41), st.text(max_size=2)),
    "cost_profile": st.sampled_from(["unit", "mild", "skewed", "flat", 1]),
    "late_policy": st.sampled_from(["expire", "execute", "never", None]),
    "load": st.one_of(st.integers(-1, 10**12), st.floats(allow_nan=True)),
    "action_mode": st.sampled_from(["binary", "scores", "flat", 3]),
}


@FUZZ
@given(st.fixed_dictionaries({}, optional=ARGUMENTS), st.one_of(st.none(), st.integers(-3, 2**70),
                                                                st.floats(allow_nan=True), st.text(max_size=2)))
def test_fuzzed_constructor_arguments_and_seeds_are_refused_or_work(kwargs, seed):
    try:
        env = PMWeekEnv(**kwargs)
    except (ValueError, TypeError) as e:
        event("refused")
        assert any(name in str(e) for name in kwargs), f"{e} names none of {sorted(kwargs)}"
        return
    try:
        obs, _ = env.reset(seed=seed)
    except (ValueError, TypeError) as e:
        event("refused")
        assert "seed" in str(e)
        return
    event("played")
    assert env.observation_space.contains(obs)
    obs, *_ = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs)


@FUZZ
@given(st.lists(st.one_of(st.integers(-3, 2**70), st.floats(allow_nan=True), st.none(), st.text(max_size=2)),
                min_size=1, max_size=3))
def test_fuzzed_vector_seeds_are_refused_or_play_those_weeks(seeds):
    env = PMWeekVectorEnv(len(seeds))
    try:
        env.reset(seed=seeds)
    except (ValueError, TypeError) as e:
        event("refused")
        assert "seed" in str(e)
        return
    event("played")
    for i, s in enumerate(seeds):
        if s is not None:  # None draws a fresh week
            np.testing.assert_array_equal(env._core.episode(i).onset, generate_episode(s).onset)


def test_world_config_sizes_are_bounded_before_any_allocation():
    with pytest.raises(ValueError, match="resources"):
        WorldConfig(resources=tuple((f"r{i}", "clock" if i == 0 else "delta") for i in range(2000)))
    with pytest.raises(ValueError, match="resources"):
        WorldConfig(resources=(("clock", "clock", "extra"),))


ENV_IDS = sorted(i for i in gym.registry if i.startswith("membudget/"))
JUNK = st.one_of(st.sampled_from([None, True, False, -1, 0, 1, 2, 1.5, float("nan"), float("inf"), 2**70, "x", "",
                                  [], {}, (1, 2), object()]), st.integers(-10, 10**7), st.floats(-10, 10))


def _constructor_parameters(env_id):
    entry = gym.spec(env_id).entry_point
    module, name = entry.split(":")
    cls = getattr(importlib.import_module(module), name)
    return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "render_mode")]


@pytest.mark.parametrize("env_id", ENV_IDS)
@settings(FUZZ, max_examples=40)
@given(data=st.data())
def test_fuzzed_constructor_arguments_of_every_env_are_refused_or_work(env_id, data):
    params = _constructor_parameters(env_id)
    if not params:
        return
    name = data.draw(st.sampled_from(params))
    value = data.draw(JUNK)
    try:
        env = gym.make(env_id, **{name: value})
    except (ValueError, TypeError) as e:
        event("refused")
        assert name in str(e), f"{env_id}({name}={value!r}): {e}"
        return
    event("played")
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    for _ in range(3):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs) and np.isfinite(reward)
        if terminated or truncated:
            break
    env.close()


# --- training settings: refused before any work (the teacher and the environments are never reached) ------------

def _no_work(*args, **kwargs):
    raise AssertionError("training started before its settings were checked")


TRAINING_CASES = [
    ("ppo", dict(gamma=5.0), "gamma"), ("ppo", dict(n_epochs=-5), "n_epochs"), ("ppo", dict(hidden=(0,)), "hidden"),
    ("ppo", dict(learning_rate=float("nan")), "learning_rate"), ("ppo", dict(total_timesteps=0), "total_timesteps"),
    ("ppo", dict(hidden=(1.5, 8)), "hidden"), ("ppo", dict(n_minibatches=0), "n_minibatches"),
    ("sb3", dict(gamma=5.0), "gamma"), ("sb3", dict(n_epochs=-5), "n_epochs"), ("sb3", dict(net_arch=(0,)), "net_arch"),
    ("sb3", dict(learning_rate=float("nan")), "learning_rate"), ("sb3", dict(batch_size=0), "batch_size"),
    ("sb3", dict(seed=-1), "seed"), ("sb3", dict(n_envs=0), "num_envs"),
    ("bc", dict(epochs=0), "epochs"), ("bc", dict(hidden=0), "hidden"), ("bc", dict(hidden=(64, 2.5)), "hidden"),
    ("bc", dict(seed=1.5), "seed"), ("dagger", dict(iterations=0), "iterations"), ("dagger", dict(epochs=-1), "epochs"),
    ("bc", dict(lr=float("nan")), "lr"), ("bc", dict(batch=0), "batch"), ("dagger", dict(lr=0.0), "lr"),
]


@pytest.mark.parametrize("learner,kwargs,match", TRAINING_CASES,
                         ids=[f"{c[0]}-{next(iter(c[1]))}={next(iter(c[1].values()))}" for c in TRAINING_CASES])
def test_impossible_training_settings_are_refused_before_any_work(monkeypatch, learner, kwargs, match):
    from membudget.agents import imitation, ppo, rl
    from membudget.agents.tasks import PMWEEK

    monkeypatch.setattr(imitation, "dp_demonstrations", _no_work)
    monkeypatch.setattr(PMWEEK, "vector_env", _no_work)
    train = {"ppo": ppo.train_ppo, "sb3": rl.train_ppo_allocator, "bc": lambda **kw: imitation.fit_bc(range(2000,
             2002), "B10", **kw), "dagger": lambda **kw: imitation.fit_dagger(range(2000, 2002), "B10", **kw)}[learner]
    with pytest.raises(ValueError, match=match):
        train(**kwargs)

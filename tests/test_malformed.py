"""Bad input on every path into PMWeek-v0 (episode files and objects, constructor arguments, seeds, actions, reset
options) and into the saved gates: each malformed input is refused with the project's own ``ValueError`` naming
the field, or runs to a result inside the documented ranges. Regression cases for each class of input that was once
accepted wrongly or failed obscurely, then hypothesis fuzzing (derandomized: the same examples on every run)."""

import base64
import copy
import importlib
import inspect
import json
import os
import re
import warnings
import zipfile

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
    gate.set_fitted_arrays(gate._fit_scorer(X, (X[:, 0] > 0).astype(int)))
    gate.thresholds_ = {"B20": 0.5}
    return gate


def _resave(gate, path, **arrays):
    z = {"kind": np.array("BoostedGate"), "config": np.array(json.dumps(gate.get_params())),
         "thresholds": np.array(json.dumps(gate.thresholds_)), **gate.fitted_arrays(), **arrays}
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
         "thresholds": np.array(json.dumps(gate.thresholds_)), **gate.fitted_arrays(), **arrays}
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
            np.testing.assert_array_equal(env.core.episode(i).onset, generate_episode(s).onset)


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
    ("sb3", dict(seed=-1), "seed"), ("sb3", dict(n_envs=0), "n_envs"),
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


# --- SB3 model files: loaded without running code from them, malformed ones refused naming the file -------------

TINY_SB3 = ["--total-timesteps", "64", "--n-envs", "2", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1",
            "--eval-every", "0", "--eval-weeks", "1", "--progress-bar", "off", "--learning-curve", "off"]
SB3_RUNS = {"ppo-mlp": ["sb3-ppo", "--policy", "mlp"], "maskable-ppo": ["sb3-maskable-ppo"],
            "ppo-conditioned": ["sb3-ppo-conditioned", "--envs-per-budget", "1", "--budgets", "B5,B20"]}


@pytest.fixture(scope="module")
def sb3_models(tmp_path_factory):
    """``{run: model.zip}`` of genuine models saved by ``python -m membudget.train`` (tiny runs)."""
    from membudget import train

    out = tmp_path_factory.mktemp("sb3")
    args = {run: [a for a in TINY_SB3 if run != "ppo-conditioned" or a not in ("--n-envs", "2")] for run in SB3_RUNS}
    return {run: os.path.join(train.main([*SB3_RUNS[run], *args[run], "--out", str(out), "--name", run]),
                              "model.zip") for run in SB3_RUNS}


def _rewrite(src, dst, data=None, drop=(), entries=None):
    """A copy of the archive ``src`` at ``dst``: ``data(d)`` edits the parsed data entry, ``drop`` leaves entries
    out, ``entries`` replaces (or adds) entries by name."""
    with zipfile.ZipFile(src) as z:
        files = {n: z.read(n) for n in z.namelist() if n not in drop}
    if data is not None:
        d = json.loads(files["data"])
        data(d)
        files["data"] = json.dumps(d).encode()
    files.update(entries or {})
    with zipfile.ZipFile(dst, "w") as z:
        for n, b in files.items():
            z.writestr(n, b)
    return str(dst)


class _Marker:
    """Unpickling it creates the directory ``path``: the code a crafted model file would run."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return os.makedirs, (self.path,)


def _planted(path):
    import cloudpickle

    return {":type:": "<class 'function'>", ":serialized:": base64.b64encode(cloudpickle.dumps(_Marker(path))).decode()}


@pytest.mark.parametrize("run", sorted(SB3_RUNS))
def test_safe_load_of_a_trained_model_acts_as_the_trusted_load(sb3_models, run):
    from membudget.agents.rl import load_policy

    safe, kw = load_policy(os.path.dirname(sb3_models[run]))
    trusted, kw_trusted = load_policy(sb3_models[run], trust_remote_code=True)
    assert kw == kw_trusted == {"action_mode": "binary"} and type(safe) is type(trusted)
    safe_model, trusted_model = getattr(safe, "model", safe), getattr(trusted, "model", trusted)
    assert type(safe_model.policy) is type(trusted_model.policy)
    assert safe_model.observation_space == trusted_model.observation_space
    assert safe_model.action_space == trusted_model.action_space
    assert safe_model.clip_range(1.0) == trusted_model.clip_range(1.0) == 0.2
    env = PMWeekVectorEnv(num_envs=4, budget="B10")
    obs, _ = env.reset(seed=9000)
    for _ in range(20):
        a, _ = safe.predict(obs, deterministic=True)
        np.testing.assert_array_equal(a, trusted.predict(obs, deterministic=True)[0])
        np.testing.assert_array_equal(safe.predict({k: v[0] for k, v in obs.items()}, deterministic=True)[0], a[0])
        obs, *_ = env.step(a)


def test_a_crafted_pickle_never_runs_on_the_default_path(sb3_models, tmp_path, monkeypatch, capsys):
    from membudget import evaluate
    from membudget.agents.rl import load_policy
    from membudget.studies import budgetpm

    genuine, marker = sb3_models["maskable-ppo"], tmp_path / "ran"
    monkeypatch.setattr(budgetpm, "fit_suite", lambda **kw: pytest.fail("loaded"))
    # entries the safe load rebuilds or drops: the file's pickles are ignored, the model loads (also on the
    # command line, which then goes on to fit the gates)
    for key in ("clip_range", "ep_info_buffer"):
        swapped = _rewrite(genuine, tmp_path / f"{key}.zip", data=lambda d: d[key].update(
            {":serialized:": _planted(marker)[":serialized:"]}))
        assert load_policy(swapped)[0].model.clip_range(1.0) == 0.2
        with pytest.raises(pytest.fail.Exception, match="loaded"):
            evaluate.main(["--model", swapped, "--progress-bar", "off"])
    # an entry it cannot rebuild, or a policy class that is not a plain reference: refused by name
    extra = _rewrite(genuine, tmp_path / "extra.zip", data=lambda d: d.update(evil=_planted(marker)))
    with pytest.raises(ValueError, match=r"extra\.zip: entry 'evil' is pickled .*trust_remote_code=True"):
        load_policy(extra)
    with pytest.raises(SystemExit) as e:
        evaluate.main(["--model", extra, "--progress-bar", "off"])
    assert e.value.code == 2 and re.search(r"extra\.zip: entry 'evil' is pickled", capsys.readouterr().err)
    policy = _rewrite(genuine, tmp_path / "policy.zip", data=lambda d: d["policy_class"].update(
        {":serialized:": _planted(marker)[":serialized:"]}))
    with pytest.raises(ValueError, match=r"policy\.zip: entry 'policy_class' is a pickle that is not a plain class"):
        load_policy(policy)
    assert not marker.exists()
    # the payload is live: the trusted load (library or command line) runs it
    load_policy(swapped, trust_remote_code=True)
    assert marker.is_dir()
    marker.rmdir()
    with pytest.raises(pytest.fail.Exception, match="loaded"):
        evaluate.main(["--model", swapped, "--trust-model", "--progress-bar", "off"])
    assert marker.is_dir()


def _written(path, content: bytes) -> str:
    path.write_bytes(content)
    return str(path)


def _flipped(path, entry):
    """``path`` with one byte of ``entry``'s stored data inverted (its checksum no longer matches)."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(entry)
    raw = bytearray(open(path, "rb").read())
    raw[info.header_offset + 30 + len(info.filename) + len(info.extra) + 100] ^= 0xFF
    open(path, "wb").write(raw)
    return path


def _a2c_model(tmp_path):
    from stable_baselines3 import A2C

    from membudget.agents.sb3_vec import PMWeekSB3VecEnv

    model = A2C("MultiInputPolicy", PMWeekSB3VecEnv(1), n_steps=4, device="cpu")
    model.save(tmp_path / "a2c.zip")
    return str(tmp_path / "a2c.zip")


def _counts_model(tmp_path):
    from stable_baselines3 import PPO

    from membudget.agents.sb3_vec import PMWeekSB3VecEnv

    model = PPO("MultiInputPolicy", PMWeekSB3VecEnv(1, observe_counts=True), n_steps=64, batch_size=64,
                device="cpu")
    model.save(tmp_path / "counts.zip")
    return str(tmp_path / "counts.zip")


MODEL_FILES = {
    "text": (lambda g, t: _written(t / "m.zip", b"not a zip"), "not a saved .*BadZipFile"),
    "truncated": (lambda g, t: _written(t / "m.zip", open(g, "rb").read()[:5000]), "not a saved .*BadZipFile"),
    "not weights": (lambda g, t: _rewrite(g, t / "m.zip", entries={"policy.pth": b"\0" * 64}), "not plain tensors"),
    "bit flip": (lambda g, t: _flipped(_rewrite(g, t / "m.zip"), "policy.pth"), "'policy.pth' is corrupt"),
    "no weights": (lambda g, t: _rewrite(g, t / "m.zip", drop=("policy.pth",)), r"lacks the entries \['policy.pth'\]"),
    "no data": (lambda g, t: _rewrite(g, t / "m.zip", drop=("data",)), r"lacks the entries \['data'\]"),
    "data not json": (lambda g, t: _rewrite(g, t / "m.zip", entries={"data": b"{nope"}), "JSONDecodeError"),
    "data a list": (lambda g, t: _rewrite(g, t / "m.zip", entries={"data": b"[]"}), "must be a JSON object"),
    "no policy class": (lambda g, t: _rewrite(g, t / "m.zip", data=lambda d: d.pop("policy_class")),
                        "no serialized policy_class"),
    "a2c": (lambda g, t: _a2c_model(t), r"lacks \['batch_size', 'n_epochs', 'clip_range'\]: not a PPO model"),
    "other spaces": (lambda g, t: _counts_model(t), "'observation_space' is not PMWeek-v0's|differs"),
    "other actions": (lambda g, t: _rewrite(g, t / "m.zip", data=lambda d: d["action_space"].update(n=12)),
                      r"'action_space' differs .*'n'"),
    "weights of another policy": (lambda g, t: _rewrite(g, t / "m.zip", data=lambda d: d["policy_kwargs"].update(
        net_arch=[8])), "weights do not fit"),
    "huge rollout": (lambda g, t: _rewrite(g, t / "m.zip", data=lambda d: d.update(n_steps=10**9)),
                     "rollout buffer is limited"),
    "replaces a method": (lambda g, t: _rewrite(g, t / "m.zip", data=lambda d: d.update(predict=1)),
                          "'predict' is not an attribute SB3 saves"),
    "unknown policy kwargs": (lambda g, t: _rewrite(g, t / "m.zip", data=lambda d: d["policy_kwargs"].update(
        ortho_init=False)), r"policy_kwargs' has keys \['ortho_init'\]"),
    "learning-rate schedule": (lambda g, t: _rewrite(g, t / "m.zip", data=lambda d: d.update(learning_rate=0.5)),
                               "'lr_schedule' is the constant 0.0003"),
}


@pytest.mark.parametrize("case", sorted(MODEL_FILES))
def test_malformed_model_files_are_refused_naming_the_file(sb3_models, tmp_path, case):
    from membudget.agents.rl import load_policy

    make, match = MODEL_FILES[case]
    path = make(sb3_models["ppo-mlp"], tmp_path)
    with pytest.raises(ValueError, match=rf"^{re.escape(path)}:? .*({match})"):
        load_policy(path)


# --- --config files: bounded before any field is read ---------------------------------------------------------

LAUGHS = "".join(f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n" for p, c in zip("abcdefgh", "bcdefghi"))
CONFIG_FILES = {
    "aliases.yaml": ("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + LAUGHS, "anchors and aliases"),
    "anchor.yaml": ("seed: &s 3\n", "anchors and aliases"),
    "merge.yaml": ("base: &b {seed: 1}\nrun:\n  <<: *b\n", "anchors and aliases"),
    "deep.yaml": ("a: " + "[" * 5 + "]" * 5 + "\n", "nested deeper than 4"),
    "deep.json": ('{"a": ' + "[" * 5 + "]" * 5 + "}", "nested deeper than 4"),
    "abyss.json": ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 4"),
    "huge.json": ('{"seed": 1, "pad": "' + "x" * (1 << 20) + '"}', "limited to 1048576 bytes"),
    "broken.yaml": ("seed: [1,\n", "not valid YAML"),
    "latin1.json": (b'{"budget": "\xe9"}', "not UTF-8"),
}


@pytest.mark.parametrize("name", sorted(CONFIG_FILES))
def test_malformed_config_files_are_refused_before_parsing_a_field(tmp_path, monkeypatch, name):
    import yaml

    from membudget import train
    from membudget.studies import runs

    content, match = CONFIG_FILES[name]
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    if "anchors" in match or "deeper" in match:
        monkeypatch.setattr(yaml, "safe_load", lambda *a: pytest.fail("YAML constructed before the checks"))
    monkeypatch.setattr(runs, "resolve_config", lambda *a, **k: pytest.fail("a field was read"))
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: .*{match}"):
        runs.load_config_file(str(path))
    with pytest.raises(SystemExit) as e:  # the command line: the same message on one line, exit status 2
        train.main(["ppo", "--config", str(path), "--out", str(tmp_path)])
    assert e.value.code == 2


def test_config_files_within_the_bounds_still_load(tmp_path):
    from membudget.studies.runs import load_config_file

    (tmp_path / "c.yaml").write_text("seed: 3\nbudgets: [B5, B10]\nnet-arch: [16, 16]\n")
    assert load_config_file(str(tmp_path / "c.yaml")) == {"seed": 3, "budgets": ["B5", "B10"], "net_arch": [16, 16]}
    (tmp_path / "c.json").write_text(json.dumps({"seed": 3, "x": [[[1]]]}))
    assert load_config_file(str(tmp_path / "c.json")) == {"seed": 3, "x": [[[1]]]}


# --- Discrete actions: one rule in every environment with a Discrete action space --------------------------------

DISCRETE_IDS = [i for i in ENV_IDS if isinstance(gym.make(i).action_space, gym.spaces.Discrete)]
ACTION_FORMS = {
    "int": lambda a: a, "np.int64": np.int64, "np.int8": np.int8, "np.uint8": np.uint8, "0-d array": np.array,
    "0-d uint16 array": lambda a: np.array(a, dtype=np.uint16), "np.uint64": np.uint64,
    "shape (1,)": lambda a: np.array([a]), "shape (1, 1)": lambda a: np.array([[a]]), "list": lambda a: [a],
    "float": float, "np.float32": np.float32, "0-d float array": lambda a: np.array(float(a)), "str": str,
    "bool": bool, "np.bool_": np.bool_, "None": lambda a: None, "past n": lambda a: 10**6, "negative": lambda a: -1,
    "past int64": lambda a: 2**64, "np.uint32": np.uint32, "np.int64 past n": lambda a: np.int64(10**6),
    "np.int16 negative": lambda a: np.int16(-1),
}


def test_every_discrete_id_is_covered():
    assert set(DISCRETE_IDS) == {"membudget/TierRouting-v0", "membudget/ReplayStream-v0",
                                 "membudget/ReplayStream-v1", "membudget/ProactiveStream-v0",
                                 "membudget/ProactiveStream-v1"}


@pytest.mark.parametrize("form", sorted(ACTION_FORMS))
@pytest.mark.parametrize("env_id", DISCRETE_IDS)
def test_discrete_actions_are_accepted_in_exactly_the_forms_gymnasium_accepts(env_id, form):
    env = gym.make(env_id).unwrapped  # no PassiveEnvChecker: the environment's own check answers
    env.reset(seed=0)
    action = ACTION_FORMS[form](1)
    accepted = form not in ("bool", "np.bool_") and env.action_space.contains(action)
    assert accepted == (form in ("int", "np.int64", "np.int8", "np.uint8", "np.uint32", "0-d array",
                                 "0-d uint16 array"))
    if accepted:
        env.step(action)
        return
    with pytest.raises(ValueError, match=re.escape(f"action must be an integer in [0, {env.action_space.n}) "
                                                   f"(Discrete({env.action_space.n})): a Python int, a NumPy "
                                                   "integer or a 0-d integer array, got")):
        env.step(action)


# --- the shared-budget env's AEC and parallel forms: our own ValueError naming the agent --------------------------

def _aec_at_the_end():
    from membudget.envs import shared_budget

    env = shared_budget.env(n_agents=2)
    env.reset(seed=0)
    while not all(env.terminations.values()):
        env.step(np.zeros(11, np.float32))
    return env


def test_aec_refuses_an_action_for_a_terminated_agent_and_after_the_episode():
    env = _aec_at_the_end()
    agent = env.agent_selection
    with pytest.raises(ValueError, match=rf"agent '{agent}' has terminated: its remaining step takes None"):
        env.step(np.zeros(11, np.float32))
    while env.agents:
        env.step(None)
    for action in (None, np.zeros(11, np.float32)):
        with pytest.raises(ValueError, match=r"the episode is over: .*call reset\(\)"):
            env.step(action)
    env.reset(seed=1)
    env.step(np.zeros(11, np.float32))  # a new episode plays


@pytest.mark.parametrize("action,match", [(np.zeros(5), r"shape \(11,\)"), (np.full(11, 2.0), r"\[-1, 1\]"),
                                          (np.array(["x"] * 11), "numeric"), ("x", "shape")])
def test_aec_refuses_a_malformed_action_naming_the_agent_when_given(action, match):
    from membudget.envs import shared_budget

    env = shared_budget.env(n_agents=3)
    with pytest.raises(ValueError, match=r"call reset\(\) before step\(\)"):
        env.step(np.zeros(11, np.float32))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=rf"agent 'agent_0': .*{match}"):
        env.step(action)  # the first agent's action, not the last's
    env.step(np.zeros(11, np.float32))
    with pytest.raises(ValueError, match=rf"agent 'agent_1': .*{match}"):
        env.step(action)


def test_parallel_form_refuses_unknown_agents_and_actions_after_the_episode():
    from membudget.envs import shared_budget

    env = shared_budget.parallel_env(n_agents=2)
    env.reset(seed=0)
    ok = {"agent_0": np.zeros(11, np.float32), "agent_1": np.zeros(11, np.float32)}
    with pytest.raises(ValueError, match=r"actions for \['agent_2'\], which are not agents"):
        env.step({**ok, "agent_2": np.zeros(11, np.float32)})
    with pytest.raises(ValueError, match=r"agent 'agent_1': .*shape \(11,\)"):
        env.step({**ok, "agent_1": np.zeros(3)})
    while env.agents:
        env.step(ok)
    with pytest.raises(ValueError, match=r"the episode is over: .*\['agent_0', 'agent_1'\]"):
        env.step(ok)


# --- a teacher given a week and its settings: every bad field named, the week's costs included -------------------

@pytest.mark.parametrize("teacher", ["HindsightDP", "CurrentGreedy"])
@pytest.mark.parametrize("budget,costs,match", [
    (MAX_BUDGET + 1, 0, r"^budget must be an int in \[1, 1000000000000\].*; episode resources\.cost: costs must be"),
    (0, MAX_COST + 1, r"^budget must be .*got 0; episode resources\.cost: costs must be integers in 1\.\.1000000"),
    (10, 0, r"^episode resources\.cost: costs must be integers"),
    (MAX_BUDGET + 1, 1, r"^budget must be an int in \[1, 1000000000000\] or None, got 1000000000001$"),
])
def test_teachers_name_a_bad_budget_and_bad_costs_together(teacher, budget, costs, match):
    from membudget import teachers

    ep = replace(BASE, costs=np.full_like(BASE.costs, costs))
    error = ValueError if costs == 1 else EpisodeFormatError
    with pytest.raises(error, match=match):
        getattr(teachers, teacher)(budget=budget).solve(ep)


def test_teachers_name_every_bad_argument():
    from membudget.teachers import HindsightDP

    with pytest.raises(ValueError, match=r"budget .*; per_step_cap must be an int in \[1, 1000\] or None, got 0; "
                                         r"per_step_cost_cap .*; lookahead .*; late_policy must be"):
        HindsightDP(budget=-1, per_step_cap=0, per_step_cost_cap=1.5, lookahead=-1, late_policy="x").solve(BASE)


# --- LinUCB: inputs checked where they enter, each error naming the argument ------------------------------------

def _bandit():
    from membudget.agents.linucb import LinUCB

    return LinUCB().fit(np.zeros((2, 3)), [0, 1], [1, 0], [0.1, 0.2])


LINUCB_CASES = {
    "fit: strings": (lambda b: b.fit([["a", "b", "c"]], [0], [1], [0]), r"^X must be numbers"),
    "fit: ragged": (lambda b: b.fit([[1, 2, 3], [1]], [0, 1], [1, 1], [0, 0]), r"^X must be numbers in a regular"),
    "fit: None target": (lambda b: b.fit(np.zeros((1, 3)), [0], None, [0]), r"^correct must be numbers, got None"),
    "fit: string target": (lambda b: b.fit(np.zeros((1, 3)), [0], [1], ["0.5"]), r"^cost must be numbers"),
    "fit: huge X": (lambda b: b.fit(np.full((1, 3), 1e200), [0], [1], [0]), r"^X is too large: at most 1e\+50"),
    "fit: nan X": (lambda b: b.fit(np.array([[0, np.nan, 0]]), [0], [1], [0]), r"^X must be finite, found nan at"),
    "fit: huge target": (lambda b: b.fit(np.zeros((1, 3)), [0], [1e200], [0]), r"^correct is too large"),
    "fit: inf target": (lambda b: b.fit(np.zeros((1, 3)), [0], [1], [np.inf]), r"^cost must be finite"),
    "fit: targets per row": (lambda b: b.fit(np.zeros((2, 3)), [0, 1], [1, 0, 1], 0.1), r"^correct must be one number"),
    "update: strings": (lambda b: b.update(["1", "2", "3"], 0, 1.0, 0.1), r"^x must be numbers"),
    "update: None x": (lambda b: b.update(None, 0, 1.0, 0.1), r"^x must be numbers, got None"),
    "update: huge x": (lambda b: b.update(np.array([0, 1e200, 0]), 0, 1.0, 0.1), r"^x\[1\] is too large.*1e\+200"),
    "update: inf x": (lambda b: b.update(np.array([0, np.inf, 0]), 0, 1.0, 0.1), r"^x\[1\] must be finite"),
    "update: None target": (lambda b: b.update(np.zeros(3), 0, None, 0.1), r"^correct must be numbers, got None"),
    "update: string target": (lambda b: b.update(np.zeros(3), 0, 1.0, "0.1"), r"^cost must be numbers"),
    "update: huge target": (lambda b: b.update(np.zeros(3), 0, 1.0, 1e200), r"^cost is too large.*1e\+200"),
    "select: huge x": (lambda b: b.select(np.array([0, 1e60, 0])), r"^x\[1\] is too large"),
    "select: nan x": (lambda b: b.select(np.array([0, np.nan, 0])), r"^x\[1\] must be finite"),
    "predict: strings": (lambda b: b.predict(np.array(["a", "b", "c"])), r"^observation must be numbers"),
    "predict: huge": (lambda b: b.predict(np.array([1e200, 0, 0])), r"^observation is too large"),
    "alpha": (lambda b: b.set_params(alpha=1e300).fit(np.zeros((1, 3)), [0], [1], [0]), r"^alpha is too large"),
    "l2_lambda": (lambda b: b.set_params(l2_lambda=1e-300).fit(np.zeros((1, 3)), [0], [1], [0]),
                  r"^l2_lambda is too small"),
}


@pytest.mark.parametrize("case", sorted(LINUCB_CASES))
def test_linucb_inputs_are_refused_naming_the_argument(case):
    call, match = LINUCB_CASES[case]
    b = _bandit()
    before = copy.deepcopy((b.A_inv_, b.b_, b.theta_))
    with pytest.raises(ValueError, match=match):
        call(b)
    if not case.startswith(("fit", "alpha", "l2_lambda")):
        for was, now in zip(before, (b.A_inv_, b.b_, b.theta_)):
            np.testing.assert_array_equal(was, now)  # a refused update changes nothing


def test_linucb_values_up_to_the_bound_keep_the_ridge_state_finite():
    from membudget.agents.linucb import MAX_MAGNITUDE, LinUCB

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (20, 12)) * MAX_MAGNITUDE
    b = LinUCB(alpha=MAX_MAGNITUDE, cost_weight=MAX_MAGNITUDE)
    b.fit(X[:10], rng.integers(0, 12, 10), np.full(10, -MAX_MAGNITUDE), np.full(10, MAX_MAGNITUDE))  # cost >= 0
    for x in X[10:]:
        b.update(x, b.select(x), -MAX_MAGNITUDE, MAX_MAGNITUDE)
    assert all(np.isfinite(a).all() for a in (b.A_inv_, b.b_, b.theta_, b.decision_function(X)))


def test_linucb_batch_of_collinear_rows_at_a_large_scale_updates_exactly():
    from membudget.agents.linucb import LinUCB

    x = np.full(12, 1e9)  # S = I + X A^-1 X^T is singular in float64 (x·x = 1.2e19): one row at a time
    batched = LinUCB().fit(np.stack([x, -x]), [0, 0], [1.0, 0.0], [0.5, 0.5])
    rows = LinUCB().fit(x[None], [0], [1.0], [0.5]).partial_fit(-x[None], [0], [0.0], [0.5])
    np.testing.assert_array_equal(batched.A_inv_, rows.A_inv_)
    np.testing.assert_array_equal(batched.theta_, rows.theta_)


# --- gates: a config field of the wrong type is refused at load, not inside predict ------------------------------

def _static_gate_file(path, config=None, thresholds=None):
    gate = StaticGate()
    gate.mean_, gate.scale_, gate.coef_, gate.intercept_ = np.zeros(27), np.ones(27), np.zeros(27), 0.0
    np.savez(path, kind=np.array("StaticGate"), config=np.array(json.dumps({**gate.get_params(), **(config or {})})),
             thresholds=np.array(json.dumps({"B20": 0.5} if thresholds is None else thresholds)), **gate.fitted_arrays())
    return path


@pytest.mark.parametrize("config,match", [
    ({"budget": ["B20"]}, r"config: budget must be a budget level name such as 'B20' or a positive int, got \['B20'\]"),
    ({"budget": "twenty"}, "config: budget must be"), ({"budget": True}, "config: budget must be"),
    ({"label": ["outcome"]}, "config: label must be 'outcome' or 'due'"), ({"C": "1.0"}, "config: C must be"),
    ({"max_iter": 0}, "config: max_iter must be a positive int"), ({"n_folds": 1.5}, "config: n_folds must be"),
    ({"calibration_budgets": "B20"}, r"config: calibration_budgets must be a non-empty list"),
    ({"calibration_budgets": [["B20"]]}, r"config: calibration_budgets\[0\] must be a budget level name"),
])
def test_gate_config_fields_of_the_wrong_type_are_refused_at_load(tmp_path, config, match):
    path = _static_gate_file(tmp_path / "g.npz", config=config)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: {match}"):
        StaticGate.load(path)


@pytest.mark.parametrize("thresholds,match", [({"B20": "0.5"}, "threshold of 'B20' must be a finite number"),
                                              ({"twenty": 0.5}, "a thresholds key must be"),
                                              ({}, "thresholds must map budgets to numbers")])
def test_gate_thresholds_of_the_wrong_type_are_refused_at_load(tmp_path, thresholds, match):
    with pytest.raises(ValueError, match=match):
        StaticGate.load(_static_gate_file(tmp_path / "g.npz", thresholds=thresholds))


@pytest.mark.parametrize("config,match", [({"teacher": "oracle"}, "teacher must be"),
                                          ({"grid": [0.5, "0.6"]}, r"grid\[1\] must be a finite number"),
                                          ({"grid": []}, "grid must be a non-empty list"),
                                          ({"per_step_cap": 0}, "per_step_cap must be")])
def test_temporal_gate_config_is_checked_at_load(tmp_path, config, match):
    from membudget.agents import TemporalGate

    gate = TemporalGate(budget=42)
    gate.mean_, gate.scale_, gate.coef_, gate.intercept_ = np.zeros(36), np.ones(36), np.zeros(36), 0.0
    gate.thresholds_ = {42: 0.5}
    gate.save(tmp_path / "t.npz")
    obs = PMWeekEnv(budget=42, action_mode="scores").reset(seed=0)[0]
    np.testing.assert_array_equal(TemporalGate.load(tmp_path / "t.npz").predict(obs)[0], gate.predict(obs)[0])
    with np.load(tmp_path / "t.npz") as z:
        arrays = dict(z)
    arrays["config"] = np.array(json.dumps({**gate.get_params(), **config}))
    np.savez(tmp_path / "t.npz", **arrays)
    with pytest.raises(ValueError, match=f"config: {match}"):
        TemporalGate.load(tmp_path / "t.npz")


# --- students: fitting data, settings and observations checked where they enter ----------------------------------

def _student(threshold=0.5):
    from membudget.agents.per_resource import StudentPolicy

    return StudentPolicy(_net(), threshold)


def _net(**kwargs):
    """A small untrained student network, the same on every call."""
    import torch

    from membudget.agents.per_resource import PerResourceNet

    with torch.random.fork_rng():
        torch.manual_seed(0)
        return PerResourceNet(hidden=(8,), **kwargs)


def _fit_bc(**kwargs):
    from membudget.agents.imitation import fit_bc

    return fit_bc(range(2000, 2001), "B10", **kwargs)


def _demos(**change):
    from membudget.agents.imitation import Demonstrations

    arrays = dict(resources=np.zeros((4, 11, 27)), budget=np.zeros((4, 9)), mask=np.ones((4, 11)),
                  labels=np.zeros((4, 11)))
    return Demonstrations(**{**arrays, **change})


OBS = ENV.reset(seed=0)[0]
STUDENT_CASES = {
    "threshold 1.5": (lambda: _student(1.5), r"^threshold must be a finite number in \(0, 1\)"),
    "threshold nan": (lambda: _student(float("nan")), "^threshold must be a finite number"),
    "threshold string": (lambda: _student("0.5"), "^threshold must be a finite number"),
    "context string": (lambda: _net(context="no"), "^context must be a bool"),
    "fit_bc context": (lambda: _fit_bc(context="yes"), "^context must be a bool"),
    "demos labels None": (lambda: _demos(labels=None), "^labels must be numbers"),
    "demos strings": (lambda: _demos(resources=np.full((4, 11, 27), "x")), "^resources must be numbers"),
    "demos nan": (lambda: _demos(budget=np.full((4, 9), np.nan)), "^budget must be finite"),
    "demos shapes": (lambda: _demos(mask=np.ones((4, 10))), r"^mask must have shape \(4, 11\)"),
    "demos labels 2": (lambda: _demos(labels=np.full((4, 11), 2.0)), "^labels must be 0 or 1"),
    "predict list": (lambda: _student().predict([1, 2, 3]), "^observation must be a mapping"),
    "predict strings": (lambda: _student().predict({**OBS, "budget": np.full(9, "x")}),
                        r"^observation\['budget'\] must be numbers"),
    "predict nan": (lambda: _student().predict({**OBS, "resources": np.full((11, 27), np.nan)}),
                    r"^observation\['resources'\] must be finite"),
    "predict features": (lambda: _student().predict({**OBS, "resources": np.zeros((11, 26))}),
                         r"^observation\['resources'\] must have shape \(R, 27\)"),
    "predict mask": (lambda: _student().predict({**OBS, "mask": np.ones(10)}),
                     r"^observation\['mask'\] must have shape \(11,\)"),
}


@pytest.mark.parametrize("case", sorted(STUDENT_CASES))
def test_student_inputs_are_refused_naming_the_argument(monkeypatch, case):
    from membudget.agents import imitation

    monkeypatch.setattr(imitation, "dp_demonstrations", _no_work)
    call, match = STUDENT_CASES[case]
    with pytest.raises(ValueError, match=match):
        call()


# --- every policy kind follows SB3's predict contract: SB3's evaluate_policy plays it as our own loop does --------

def _gate(cls=StaticGate, budget="B20", n_features=27, **kwargs):
    gate = cls(budget=budget, **kwargs)
    gate.mean_, gate.scale_, gate.intercept_ = np.zeros(n_features), np.ones(n_features), -0.5
    gate.coef_ = np.random.default_rng(0).normal(size=n_features)
    gate.thresholds_ = {budget: 0.5}
    return gate


def _pm(budget="B20", **kwargs):
    return lambda: PMWeekEnv(budget=budget, action_mode="scores", **kwargs)


EVAL_SEED = 11


def _dp_schedule(env):
    """The hindsight DP's schedule of the week the evaluation plays, replayed."""
    from membudget.teachers import HindsightDP
    from membudget.teachers.policy import SchedulePolicy

    env.reset(seed=EVAL_SEED)
    return SchedulePolicy([HindsightDP.from_env(env).solve(env.episode).schedule], 11)


def _policy_kinds():
    from membudget.agents import TemporalGate
    from membudget.agents.linucb import LinUCB
    from membudget.agents.per_resource import StudentPolicy
    from membudget.baselines import proactive
    from membudget.baselines.pm import AllRelevant, RandomFeasible
    from membudget.baselines.replay import HindsightOracle, NoReplay
    from membudget.baselines.schedules import DeadlineBackoffOutcome, FractionPacing, Pacing, RelevanceGate
    from membudget.baselines.tiers import AllMid, RandomTiers
    from membudget.envs.proactive import ProactiveStreamEnv
    from membudget.envs.replay import ReplayStreamEnv
    from membudget.teachers.tier_oracle import HindsightTierOracle
    from membudget.wrappers import HindsightTeacher, TeacherPolicy

    relevance = RelevanceGate()
    relevance.thresholds_ = {"B20": 0.3}
    return {  # name: (environment factory, policy factory taking the environment)
        "gate": (_pm(), lambda env: _gate()),
        "temporal gate": (_pm("B10"), lambda env: _gate(TemporalGate, "B10", 36)),
        "relevance gate": (_pm(), lambda env: relevance),
        "schedule": (_pm(10), lambda env: DeadlineBackoffOutcome(scorer=_gate(), cap=10)),
        "pacing": (_pm("B10"), lambda env: Pacing(scorer=_gate(), threshold=0.5)),
        "fraction pacing": (_pm(), lambda env: FractionPacing(scorer=_gate(), fraction=0.2,
                                                              thresholds={"B20": 0.5, "B40": 0.4})),
        "student": (_pm("B10"), lambda env: StudentPolicy(_net())),
        "teacher": (lambda: HindsightTeacher(PMWeekEnv(budget="B10")), TeacherPolicy),
        "dp schedule": (lambda: PMWeekEnv(budget="B10"), _dp_schedule),
        "all relevant": (lambda: PMWeekEnv(budget=None, per_step_cap=None), lambda env: AllRelevant()),
        "random feasible": (lambda: PMWeekEnv(budget="B10"), lambda env: RandomFeasible(seed=3)),
        "tier oracle": (TierRoutingEnv, HindsightTierOracle),
        "tier baseline": (TierRoutingEnv, lambda env: AllMid()),
        "random tiers": (TierRoutingEnv, lambda env: RandomTiers(seed=3)),
        "replay oracle": (lambda: ReplayStreamEnv(n_tasks=30), HindsightOracle),
        "replay baseline": (lambda: ReplayStreamEnv(n_tasks=30), lambda env: NoReplay()),
        "linucb": (lambda: ReplayStreamEnv(n_tasks=30), lambda env: LinUCB().fit(
            np.random.default_rng(0).random((40, 12)), np.arange(40) % 12, np.ones(40), np.zeros(40))),
        "proactive rule": (lambda: ProactiveStreamEnv(n_days=14), lambda env: proactive.FullHierarchy()),
    }


POLICY_KINDS = sorted(_policy_kinds())


def _own_loop(policy, env, seed):
    obs, _ = env.reset(seed=seed)
    total, done, first = 0.0, False, True
    while not done:
        action, _ = policy.predict(obs, episode_start=np.array([first]), deterministic=True)
        assert np.shape(action) == env.action_space.shape
        obs, reward, terminated, truncated, _ = env.step(action)
        total, done, first = total + reward, terminated or truncated, False
    return total


def _sb3_evaluation(policy, env, seed):
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([lambda: env])
    venv.seed(seed)
    mean, _ = evaluate_policy(policy, venv, n_eval_episodes=1, deterministic=True, warn=False)
    return mean


@pytest.mark.parametrize("kind", POLICY_KINDS)
def test_sb3_evaluate_policy_plays_every_policy_kind_as_a_single_observation_loop(kind):
    make_env, make_policy = _policy_kinds()[kind]
    env = make_env()
    own = _own_loop(make_policy(env), env, seed=EVAL_SEED)
    env = make_env()
    assert _sb3_evaluation(make_policy(env), env, seed=EVAL_SEED) == pytest.approx(own, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("run", ["ppo-mlp", "maskable-ppo"])
def test_sb3_evaluate_policy_plays_a_loaded_model(sb3_models, run):
    from membudget.agents.rl import load_policy

    policy, kw = load_policy(sb3_models[run])
    own = _own_loop(policy, PMWeekEnv(budget="B10", **kw), seed=EVAL_SEED)
    assert _sb3_evaluation(policy, PMWeekEnv(budget="B10", **kw), seed=EVAL_SEED) == pytest.approx(own, rel=1e-6)


def test_single_environment_policies_refuse_a_batch_of_several():
    from membudget.baselines.replay import HindsightOracle
    from membudget.envs.replay import ReplayStreamEnv
    from membudget.teachers.tier_oracle import HindsightTierOracle
    from membudget.wrappers import HindsightTeacher, TeacherPolicy

    for env, policy in ((TierRoutingEnv(), HindsightTierOracle), (ReplayStreamEnv(n_tasks=5), HindsightOracle)):
        obs, _ = env.reset(seed=0)
        with pytest.raises(ValueError, match=r"one environment: pass one observation \(d,\) or a batch of one"):
            policy(env).predict(np.stack([obs, obs]))
    env = HindsightTeacher(PMWeekEnv(budget="B10"))
    obs, _ = env.reset(seed=0)
    with pytest.raises(ValueError, match="the teacher follows 1 environment: .*got a batch of 2"):
        TeacherPolicy(env).predict({k: np.stack([v, v]) for k, v in obs.items()})


# --- command lines: every count refuses 0 or negatives where they make no sense, before any work -----------------

CLI_COUNTS = [  # (module:function, arguments before the count, flag, smallest value accepted)
    ("membudget.envs.pm.__main__:main", ["calibrate"], "--n-weeks", 1),
    ("membudget.envs.pm.__main__:main", ["calibrate"], "--first-seed", 0),
    ("membudget.teachers.__main__:main", ["export-minari", "--dataset-id", "x/y-v0"], "--n-weeks", 1),
    ("membudget.teachers.__main__:main", ["labels", "--out", "l.npz"], "--n-weeks", 1),
    ("membudget.teachers.__main__:main", ["labels", "--out", "l.npz"], "--first-seed", 0),
    ("membudget.studies.generate:labels_main", ["--out", "l.npz"], "--n-weeks", 1),
    ("membudget.studies.generate:labels_main", ["--out", "l.npz"], "--chunk-weeks", 0),
    ("membudget.studies.generate:labels_main", ["--out", "l.npz"], "--num-cpus", 1),
    ("membudget.studies.generate:demonstrations_main", ["--dataset-id", "x/y-v0"], "--n-weeks", 1),
    ("membudget.studies.shared_quota:main", [], "--timesteps", 1),
    ("membudget.studies.budgetpm_reproduction:main", [], "--resamples", 1),
    ("membudget.studies.budgetpm_reproduction:structure_main", [], "--resamples", 1),
    ("membudget.studies.conversation:main", [], "--resamples", 1),
    ("membudget.studies.limbo:replay_main", [], "--bootstrap", 1),
    ("membudget.studies.limbo:replay_main", [], "--seeds", 0),
    ("membudget.studies.limbo:replay_main", [], "--ppo-timesteps", 0),
    ("membudget.studies.proactmem:main", [], "--streams", 2),
    ("membudget.studies.proactmem:main", [], "--bootstrap", 100),
    ("membudget.studies.budgetmem:main", [], "--n-queries", 1),
    ("membudget.studies.budgetmem:main", [], "--timesteps", 0),
    ("membudget.studies.budgetmem:main", [], "--bc-queries", 0),
    ("membudget.studies.budgetmem:main", [], "--workers", 1),
    ("membudget.bench.teachers:main", [], "--n-weeks", 1),
    ("membudget.bench.teacher:main", [], "--weeks", 1),
    ("membudget.bench.linucb:main", [], "--n-tasks", 1),
    ("membudget.bench.vector:main", [], "--num-envs", 1),
    ("membudget.bench.speed:main", [], "--rounds", 1),
    ("membudget.bench.deployed:main", [], "--rounds", 1),
    ("membudget.bench.proactive:main", [], "--days", 14),
    ("membudget.bench.ray_scaling:main", [], "--label-weeks", 1),
    ("membudget.bench.conversation:main", [], "--rounds", 1),
    ("membudget.bench.posterior_calibration:main", [], "--samples", 1),
    ("membudget.bench.posterior_calibration:main", [], "--particles", 1),
]


@pytest.mark.parametrize("target,args,flag,low", CLI_COUNTS, ids=[f"{t.split(':')[0].split('.')[-1]}:{t.split(':')[1]}"
                                                                  f"{flag}" for t, _, flag, _ in CLI_COUNTS])
def test_command_line_counts_below_their_minimum_are_refused(capsys, target, args, flag, low):
    module, function = target.split(":")
    main = getattr(importlib.import_module(module), function)
    for value in (low - 1, -1, "ten"):
        with pytest.raises(SystemExit) as exit_:
            main([*args, flag, str(value)])
        assert exit_.value.code == 2
        assert f"argument {flag}: must be an integer >= {low}, got '{value}'" in capsys.readouterr().err


def test_evaluate_counts_are_refused_before_the_gates_are_fitted(monkeypatch, capsys):
    from membudget import evaluate
    from membudget.studies import budgetpm

    monkeypatch.setattr(budgetpm, "fit_suite", lambda **kw: pytest.fail("fitted before checking the counts"))
    for flag, value, match in (("--repetitions", 0, "repetitions must be a positive int"),
                               ("--n-weeks", 0, "n_weeks must be a positive int"),
                               ("--first-seed", -1, "first_seed must be a non-negative int")):
        with pytest.raises(SystemExit) as e:
            evaluate.main([flag, str(value), "--progress-bar", "off"])
        assert e.value.code == 2 and re.search(match, capsys.readouterr().err)


@pytest.mark.parametrize("learner,kwargs,match", [
    ("replay", dict(total_timesteps=0), "total_timesteps must be a positive int"),
    ("replay", dict(n_steps=1), r"n_steps x n_envs must be at least 2"),
    ("replay", dict(batch_size=1), r"batch_size must be an int >= 2"),
    ("replay", dict(learning_rate=0.0), "learning_rate must be"),
    ("proactive", dict(n_envs=0), "n_envs must be a positive int"),
    ("proactive", dict(gamma=1.5), "gamma must be"),
    ("tiers", dict(n_epochs=0), "n_epochs must be a positive int"),
    ("tiers", dict(total_timesteps=-1), "total_timesteps must be a non-negative int"),
    ("tiers", dict(bc_epochs=0), "bc_epochs must be a positive int"),
])
def test_sb3_learners_of_the_other_envs_refuse_impossible_settings_before_any_work(monkeypatch, learner, kwargs,
                                                                                   match):
    from membudget.agents import proactive_ppo, replay_ppo, tier_router

    module = {"replay": replay_ppo, "proactive": proactive_ppo, "tiers": tier_router}[learner]
    monkeypatch.setattr(module, "make_env", _no_work)
    train = tier_router.train_router if learner == "tiers" else module.train_ppo
    with pytest.raises(ValueError, match=match):
        train(**kwargs)


# ---------------------------------------------------------------------- flags, reset options, seeds of every env
BOOL_ARGUMENTS = [("membudget/PMWeek-v0", "observe_counts"), ("membudget/PMWeekFlat-v0", "observe_counts"),
                  ("membudget/TierRouting-v0", "lam_conditioned")]


@pytest.mark.parametrize("value", ["no", 0, 1, None, float("nan"), [1]])
@pytest.mark.parametrize("env_id,name", BOOL_ARGUMENTS)
def test_flag_arguments_must_be_bools_not_truthy_values(env_id, name, value):
    with pytest.raises(ValueError, match=f"{name} must be a bool"):
        gym.make(env_id, **{name: value})


@pytest.mark.parametrize("value", ["no", 1, None])
def test_vector_and_multi_agent_flags_must_be_bools(value):
    from membudget.envs import shared_budget
    from membudget.envs.pm.vector import PMWeekVectorEnv

    with pytest.raises(ValueError, match="observe_counts must be a bool"):
        PMWeekVectorEnv(2, observe_counts=value)
    with pytest.raises(ValueError, match="cooperative must be a bool"):
        shared_budget.parallel_env(cooperative=value)


@pytest.mark.parametrize("options", ["x", ["episode"], [], 3])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_options_that_are_not_a_dict_are_refused(env_id, options):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is out of date.*")
        env = gym.make(env_id).unwrapped
    with pytest.raises(TypeError, match="options must be a dict or None"):
        env.reset(seed=0, options=options)
    env.reset(seed=0, options={})  # an empty dict is no option


def test_vector_reset_options_are_checked_like_the_single_envs():
    from membudget.envs.pm.vector import PMWeekVectorEnv

    env = PMWeekVectorEnv(2)
    with pytest.raises(TypeError, match="options must be a dict or None"):
        env.reset(seed=0, options="reset_mask")
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(seed=0, options={"episode": None})


@pytest.mark.parametrize("seed", [True, -1, 1.0, "3"])
def test_conversation_seeds_are_checked_like_every_other_envs(seed):
    env = gym.make("membudget/ConversationPM-v1").unwrapped
    with pytest.raises(ValueError, match="seed must be"):
        env.reset(seed=seed)
    first = env.reset(seed=np.int64(3))[0]["resources"]
    assert np.array_equal(first, env.reset(seed=3)[0]["resources"])


@pytest.mark.parametrize("cap", [2**63, 2**64, 1001])
def test_conversation_per_step_cap_is_bounded_before_it_reaches_the_kernels(cap):
    from membudget.envs.conversation.env import ConversationPMEnv
    from membudget.envs.pm.env import PMWeekEnv

    with pytest.raises(ValueError, match="per_step_cap must be an int in"):
        ConversationPMEnv(per_step_cap=cap)
    PMWeekEnv().reset(seed=0)  # the kernels of the process still work


@pytest.mark.parametrize("env_id,kwargs", [("membudget/ReplayStream-v1", dict(family=[1])),
                                           ("membudget/ReplayStream-v0", dict(family={})),
                                           ("membudget/ProactiveStream-v0", dict(scope=[1])),
                                           ("membudget/ProactiveStream-v1", dict(scope=np.zeros(2)))])
def test_unhashable_names_are_refused_naming_the_argument(env_id, kwargs):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is out of date.*")
        with pytest.raises(ValueError, match=f"unknown {next(iter(kwargs))}"):
            gym.make(env_id, **kwargs)


def test_shared_budget_reset_infos_have_the_step_infos_keys_and_types():
    from membudget.envs import shared_budget

    env = shared_budget.parallel_env(n_agents=2)
    obs, infos = env.reset(seed=0)
    _, _, _, _, step_infos = env.step({a: obs[a]["mask"] * 0.5 - 0.25 for a in env.agents})
    for a in env.possible_agents:
        assert list(infos[a]) == list(step_infos[a])
        for k, v in infos[a].items():
            step = step_infos[a][k]
            assert np.asarray(v).dtype == np.asarray(step).dtype and np.shape(v) == np.shape(step)
        assert not infos[a]["queried"].any() and infos[a]["cost"] == 0


def test_shared_budget_default_cap_names_n_agents_when_too_many():
    from membudget.envs import shared_budget

    with pytest.raises(ValueError, match=r"per_step_cap='per_agent' \(2 per agent\) allows at most 500 agents, got "
                                         r"n_agents=501; pass a per_step_cap"):
        shared_budget.parallel_env(n_agents=501)
    assert shared_budget.parallel_env(n_agents=501, per_step_cap=None).n_agents == 501

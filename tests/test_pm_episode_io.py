"""Episode files: exact round trip, replay through ``reset(options={"episode": ...})`` and the validator."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import membudget  # noqa: F401
from membudget.envs.pm import (EpisodeFormatError, PMWeekEnv, episode_from_dict, episode_to_dict,
                               generate_episode, load_episode, save_episode, validate_episode)
from membudget.envs.pm.world import replace

T = 80


def assert_same(a, b, path="root"):
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, path
        np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(a, float) and a != a:
        assert isinstance(b, float) and b != b, path
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"


def play(env, actions, **reset_kwargs):
    out = [env.reset(**reset_kwargs)]
    for a in actions:
        step = env.step(a)
        out.append(step)
        if step[2]:
            break
    return out


@pytest.mark.parametrize("seed, cost_profile, load, late_policy", [
    (2000, "unit", 0, "expire"),
    (4001, "skewed", 3, "execute"),
    (21000, "mild", 3, "expire"),
])
def test_save_load_round_trip_and_replay(tmp_path, seed, cost_profile, load, late_policy):
    ep = generate_episode(seed, cost_profile=cost_profile, load=load)
    path = tmp_path / f"week{seed}.json"
    save_episode(ep, path)
    loaded = load_episode(path)
    assert episode_to_dict(loaded) == episode_to_dict(ep)
    # every array field is bit-identical, dtypes included
    for name in ("hints", "miss_cost", "step_hour", "onset", "deadline", "registered", "costs"):
        a, b = getattr(ep, name), getattr(loaded, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert loaded.ids == ep.ids and loaded.updates == ep.updates
    # the file is plain JSON and loading it again gives the same again
    assert json.loads(path.read_text())["format"] == "membudget.pm-episode/1"
    save_episode(loaded, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text() == path.read_text()

    kw = dict(budget="B20", per_step_cap=2, cost_profile=cost_profile, late_policy=late_policy, load=load)
    rng = np.random.default_rng(seed)
    actions = [(rng.random(ep.n_resources) < 0.5).astype(np.int8) for _ in range(T)]
    from_seed = play(PMWeekEnv(**kw), actions, seed=seed)
    replayed = play(PMWeekEnv(**kw), actions, options={"episode": loaded})
    assert len(from_seed) == len(replayed) == T + 1
    for k, (a, b) in enumerate(zip(from_seed, replayed)):
        assert_same(list(a), list(b), f"step {k}")
    assert from_seed[-1][4]["episode_metrics"]["queries"] > 0


def test_replay_ignores_the_env_seed():
    """A replayed episode is the given week whatever the environment's generator would draw."""
    ep = generate_episode(2001)
    env = PMWeekEnv()
    o1, _ = env.reset(seed=5, options={"episode": ep})
    assert env.episode is ep
    o2, _ = PMWeekEnv().reset(seed=2001)
    for k in o1:
        np.testing.assert_array_equal(o1[k], o2[k])


@pytest.fixture(scope="module")
def base_dict():
    return episode_to_dict(generate_episode(2000))


def _first(d, **where):
    for j, row in enumerate(d["intentions"]):
        if all(row[k] == v if not callable(v) else v(row[k]) for k, v in where.items()):
            return j, row
    raise AssertionError(f"week 2000 has no intention with {where}")


def _set_field(name, where, field, value, message):
    """A mutation named ``name``: ``field`` of the week's first intention matching ``where`` (:func:`_first`) set
    to ``value``; the error names the intention and the field, then says ``message``."""
    def mutate(d):
        j, row = _first(d, **where)
        row[field] = value
        return rf"intentions\[{j}\] \({row['id']}\)\.{field}: {message}"

    mutate.__name__ = name
    return mutate


FIELD_EDITS = [_set_field(*edit) for edit in [
    ("unknown_resource", {"kind": "channel"}, "resource", "fax_machine", "unknown resource 'fax_machine'"),
    ("active_from_outside", {"kind": "channel"}, "active_from", T, f"{T} is outside the horizon"),
    ("active_from_negative", {"kind": "time"}, "active_from", -1, "-1 is outside the horizon"),
    ("declared_end_outside", {"kind": "time"}, "declared_end", T + 5, f"{T + 5} is outside the horizon"),
    ("onset_outside", {"kind": "channel", "onset": lambda v: v is not None}, "onset", T + 1,
     f"{T + 1} is outside the horizon"),
    ("time_not_on_clock", {"kind": "time"}, "resource", "email", "a time intention must be on the clock"),
    ("channel_on_clock", {"kind": "channel"}, "resource", "clock", "a channel intention cannot be on the clock"),
    ("visible_with_resource", {"kind": "visible"}, "resource", "email", "visible intentions are not queried"),
    ("visible_outcome_of_hidden", {"kind": "channel"}, "visible_outcome", "tp", "only visible intentions have one"),
]]


def _deadline_before_onset(d):
    j, row = _first(d, kind="channel", onset=lambda v: v is not None and v >= 1)
    row["deadline"] = row["onset"] - 1
    return rf"intentions\[{j}\] \({row['id']}\)\.deadline: {row['onset'] - 1} is before the onset {row['onset']}"


def _onset_without_deadline(d):
    j, row = _first(d, kind="channel", onset=lambda v: v is not None)
    row["deadline"] = None
    return rf"intentions\[{j}\] \({row['id']}\)\.deadline: onset and deadline must both be null or both be set"


def _update_target_missing(d):
    assert d["updates"], "week 2000 has no updates"
    d["updates"][0]["target"] = "Z999"
    return r"updates\[0\]\.target: 'Z999' points at no intention"


def _update_new_id_missing(d):
    j = next(j for j, u in enumerate(d["updates"]) if u["new_id"] is not None)
    d["updates"][j]["new_id"] = "Q001v2"
    return rf"updates\[{j}\]\.new_id: 'Q001v2' points at no intention"


def _update_kind(d):
    d["updates"][0]["kind"] = "postpone"
    return r"updates\[0\]\.kind: 'postpone' is not one of"


def _duplicate_ids(d):
    d["intentions"][3]["id"] = d["intentions"][0]["id"]
    return rf"intentions\.id: duplicate ids \['{d['intentions'][0]['id']}'\]"


def _visible_without_onset(d):
    j, row = _first(d, kind="visible")
    row["onset"] = row["deadline"] = None
    return rf"intentions\[{j}\] \({row['id']}\)\.onset"


def _hints_missing_step(d):
    d["hints"] = d["hints"][:-1]
    return rf"hints: expected .* array of shape \({T}, 11\), got .* shape \({T - 1}, 11\)"


def _hints_ragged(d):
    d["hints"][4] = d["hints"][4][:-1]
    return r"hints"


def _hints_too_high(d):
    d["hints"][3][2] = 1.5
    return r"hints: values must be finite and lie in \[0, 1\]"


def _hints_negative(d):
    d["hints"][0][0] = -0.01
    return r"hints: values must be finite and lie in \[0, 1\]"


def _hints_nan(d):
    d["hints"][7][1] = float("nan")
    return r"hints: values must be finite"


def _visible_counts_disagree(d):
    d["visible_outcomes"]["tp"] += 1
    return r"visible_outcomes: .* disagrees with the visible intentions"


def _missing_top_field(d):
    del d["horizon"]
    return r"episode: missing field 'horizon'"


def _missing_intention_field(d):
    del d["intentions"][2]["onset"]
    return rf"intentions\[2\] \({d['intentions'][2]['id']}\): missing field 'onset'"


def _missing_resource_cost(d):
    del d["resources"][4]["cost"]
    return r"resources\[4\]: missing field 'cost'"


def _wrong_format(d):
    d["format"] = "membudget.pm-episode/2"
    return r"format: expected 'membudget.pm-episode/1', got 'membudget.pm-episode/2'"


def _bad_kind(d):
    d["intentions"][0]["kind"] = "sensor"
    return r"intentions\[0\] .*\.kind: 'sensor' is not one of"


def _bad_polarity(d):
    d["intentions"][0]["polarity"] = "maybe"
    return r"intentions\[0\] .*\.polarity: 'maybe' is not one of"


def _registered_not_bool(d):
    d["intentions"][0]["registered"] = 1
    return r"intentions\[0\] .*\.registered: expected true/false"


def _priority_not_int(d):
    d["intentions"][0]["priority"] = 2.5
    return r"intentions\[0\] .*\.priority: expected an integer"


def _cost_not_positive(d):
    d["resources"][1]["cost"] = 0
    return r"resources\.cost: costs must be integers in 1\.\.1000000"


def _two_clocks(d):
    d["resources"][1]["class"] = "clock"
    return r"resources: exactly one resource must have class 'clock'"


def _calendar_short(d):
    d["calendar"]["hour"] = d["calendar"]["hour"][:-2]
    return r"calendar\.hour: expected .* shape \(80,\), got .* shape \(78,\)"


MUTATIONS = [
    *FIELD_EDITS, _deadline_before_onset, _onset_without_deadline, _update_target_missing,
    _update_new_id_missing, _update_kind, _duplicate_ids, _visible_without_onset,
    _hints_missing_step, _hints_ragged, _hints_too_high, _hints_negative, _hints_nan, _visible_counts_disagree,
    _missing_top_field, _missing_intention_field, _missing_resource_cost, _wrong_format, _bad_kind,
    _bad_polarity, _registered_not_bool, _priority_not_int, _cost_not_positive, _two_clocks, _calendar_short,
]


def _meta_not_object(d):
    d["meta"] = "seed 2000"
    return r"meta"


def _update_target_not_a_string(d):
    d["updates"][0]["target"] = [d["updates"][0]["target"]]
    return r"updates\[0\]\.target"


def _update_new_id_not_a_string(d):
    d["updates"][0]["new_id"] = ["T001v2"]
    return r"updates\[0\]\.new_id"


def _calendar_day_not_integer(d):
    d["calendar"]["day"] = [x + 0.5 for x in d["calendar"]["day"]]
    return r"calendar\.day"


#: Values of the wrong JSON type: rejected with an EpisodeFormatError too (never a bare TypeError, never a silent
#: truncation -- DESIGN §6).
WRONG_TYPES = [_meta_not_object, _update_target_not_a_string, _update_new_id_not_a_string,
               _calendar_day_not_integer]


@pytest.mark.parametrize("mutate", WRONG_TYPES, ids=[m.__name__.strip("_") for m in WRONG_TYPES])
def test_validator_rejects_wrong_types(base_dict, mutate):
    d = copy.deepcopy(base_dict)
    match = mutate(d)
    with pytest.raises(EpisodeFormatError, match=match):
        episode_from_dict(d)


def test_unmutated_dict_is_accepted(base_dict):
    ep = episode_from_dict(copy.deepcopy(base_dict))
    assert episode_to_dict(ep) == base_dict


@pytest.mark.parametrize("mutate", MUTATIONS, ids=[m.__name__.strip("_") for m in MUTATIONS])
def test_validator_rejects(base_dict, mutate, tmp_path):
    d = copy.deepcopy(base_dict)
    match = mutate(d)
    with pytest.raises(EpisodeFormatError, match=match):
        episode_from_dict(d)
    # the same through a file (NaN is not valid strict JSON, so that case stays in memory)
    if mutate is not _hints_nan:
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(d))
        with pytest.raises(EpisodeFormatError, match=match):
            load_episode(path)


def test_invalid_json_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"format": "membudget.pm-episode/1", "horizon": 80,')
    with pytest.raises(EpisodeFormatError, match=r"broken\.json: not valid UTF-8 JSON"):
        load_episode(path)


@pytest.mark.parametrize("value", [[], "episode", 3])
def test_not_an_object(value):
    with pytest.raises(EpisodeFormatError, match="episode: expected a JSON object"):
        episode_from_dict(value)


def test_error_type_is_a_value_error():
    assert issubclass(EpisodeFormatError, ValueError)


def test_reset_validates_a_given_episode():
    ep = generate_episode(2000)
    j = int(np.flatnonzero(ep.onset < 10**9)[0])
    bad = replace(ep, deadline=np.where(np.arange(ep.n_intentions) == j, -1, ep.deadline))
    with pytest.raises(EpisodeFormatError, match=rf"intentions\[{j}\] \({ep.ids[j]}\)\.deadline"):
        validate_episode(bad)
    env = PMWeekEnv()
    with pytest.raises(EpisodeFormatError, match=r"\.deadline"):
        env.reset(options={"episode": bad})
    # the original is untouched by replace() and still plays
    env.reset(options={"episode": ep})
    assert env.episode is ep


@pytest.mark.parametrize("change, field", [
    (lambda ep: {"kind": np.append(ep.kind, 2)}, "intentions.kind"),
    (lambda ep: {"registered": ep.registered[:3]}, "intentions.registered"),
    (lambda ep: {"polarity": np.where(np.arange(ep.n_intentions) == 0, 7, ep.polarity)}, "intentions.polarity"),
    (lambda ep: {"kind": np.where(np.arange(ep.n_intentions) == 0, -1, ep.kind)}, "intentions.kind"),
    (lambda ep: {"costs": np.full(ep.n_resources, 0.5)}, "resources.cost"),
    (lambda ep: {"onset": ep.onset.astype(float)}, "intentions.onset"),
])
def test_hand_built_episode_objects_are_validated_before_use(change, field):
    from membudget.envs.pm import PMWeekEnv
    from membudget.envs.pm.world import replace

    ep = generate_episode(2000)
    bad = replace(ep, **change(ep))
    with pytest.raises(EpisodeFormatError, match=field.replace(".", r"\.")):
        validate_episode(bad)
    env = PMWeekEnv()
    with pytest.raises(EpisodeFormatError):
        env.reset(options={"episode": bad})
    assert env.episode is None


def test_the_array_pass_finds_every_intention_the_per_intention_rules_refuse():
    """``validate_episode`` checks only the intentions its array pass marks: on random breakages of the intentions'
    fields (steps, kinds, resources, outcomes, priorities, costs, versions), every intention the per-intention
    rules refuse is marked, so the first error is the one the full loop would raise."""
    from membudget.envs.pm.episode_io import _check_intention, _suspect_intentions
    from membudget.envs.pm.world import NEVER

    ep = generate_episode(4000)
    clock = ep.resource_classes.index("clock")
    n, R = len(ep.ids), ep.n_resources
    values = {"kind": [0, 1, 2], "resource": [-1, 0, clock, R - 1, R], "polarity": [0, 1],
              "visible_outcome": list(range(5)), "onset": [NEVER, -1, 0, 5, T - 1, T],
              "deadline": [NEVER, -1, 0, 4, 6, T - 1, T], "active_from": [-1, 0, 10, T - 1, T],
              "active_until": [-1, 0, 9, T - 1, T], "declared_start": [-1, 0, 10, T], "declared_end": [-1, 9, T - 1, T],
              "priority": [0, 1, 3, 4], "miss_cost": [np.nan, np.inf, -0.5, 0.0, 3.0, 3.5], "version": [-1, 0, 2]}
    rng = np.random.default_rng(0)
    refused = 0
    for _ in range(400):
        fields = {}
        for _ in range(rng.integers(1, 4)):
            name = list(values)[rng.integers(len(values))]
            a = fields.get(name, getattr(ep, name).copy())
            a[rng.integers(n)] = values[name][rng.integers(len(values[name]))]
            fields[name] = a
        broken = replace(ep, **fields)
        bad = set()
        for i in range(n):
            try:
                _check_intention(broken, i, clock)
            except EpisodeFormatError:
                bad.add(i)
        assert bad <= set(_suspect_intentions(broken, clock).tolist())
        refused += bool(bad)
    assert refused > 300


def test_validating_updates_never_searches_the_ids():
    """Each update's target is looked up in a table of the ids built once, never searched for in them (a search
    per update made validating a week of 10^4 updates among 5.6 * 10^4 intentions take 0.8 s, a teacher's every
    solve included); the visible-target rule still finds the first intention of that id."""
    from membudget.envs.pm import WorldConfig
    from membudget.envs.pm.world import KIND_VISIBLE

    class Ids(tuple):
        searches = 0

        def index(self, *args):
            Ids.searches += 1
            return super().index(*args)

    ep = generate_episode(3, WorldConfig(n_updates=40.0))
    assert len(ep.updates) > 20
    validate_episode(replace(ep, ids=Ids(ep.ids)))
    assert Ids.searches == 0
    visible = ep.ids[int(np.flatnonzero(ep.kind == KIND_VISIBLE)[0])]
    cancel = {**ep.updates[0], "target": visible, "new_id": None, "kind": "cancel"}
    bad = replace(ep, updates=(cancel,) + ep.updates[1:])
    with pytest.raises(EpisodeFormatError, match=r"updates\[0\]\.target: updates of visible intentions"):
        validate_episode(bad)

"""Episode files: a documented JSON format, round-tripping exactly, with a validator.

Format (``format`` = ``"membudget.pm-episode/1"``)::

    {
      "format": "membudget.pm-episode/1",
      "horizon": 80,                       # T
      "calendar": {"day": [...T ints], "hour": [...T floats], "weekday": [...T ints, 0 = Monday]},
      "cost_profile": "unit",              # informational; costs below are what the executor charges
      "resources": [{"name": "clock", "class": "clock", "cost": 1}, ...],
      "intentions": [{
          "id": "C003", "kind": "time|channel|visible", "resource": "email" | null (visible),
          "active_from": int, "active_until": int,          # steps the intention is in the ledger
          "declared_start": int, "declared_end": int,       # the window the user gave (visible to the agent)
          "onset": int | null, "deadline": int | null,      # hidden truth; null = never holds in the horizon
          "polarity": "positive|lure|stale", "registered": bool,   # false: the compiler never stored it
          "priority": int, "miss_cost": float, "cross_day": bool, "update_sensitive": bool,
          "version": int, "visible_outcome": "none|tp|fn|fp|tn"}, ...],
      "updates": [{"step": int, "kind": "cancel|override|reschedule", "target": id, "registered": bool,
                   "new_id": id | null}, ...],
      "visible_outcomes": {"tp": int, "fp": int, "fn": int},   # must agree with the visible intentions
      "hints": [[...R floats in [0, 1]] x T],
      "meta": {...}                          # free-form provenance (seed, load)
    }
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from .world import (KINDS, KIND_CHANNEL, KIND_TIME, KIND_VISIBLE, MAX_COST, MAX_HORIZON, MAX_INTENTIONS,
                    MAX_RESOURCES, NEVER, POLARITIES, RESOURCE_CLASSES, UPDATE_KINDS, VISIBLE_OUTCOMES, Episode)

FORMAT = "membudget.pm-episode/1"


class EpisodeFormatError(ValueError):
    """An episode file or object that cannot describe a PM week; the message names the offending field."""


def episode_to_dict(ep: Episode) -> dict:
    names = ep.resource_names

    def opt(v):
        return None if v >= NEVER else int(v)

    intentions = []
    for i in range(ep.n_intentions):
        intentions.append({
            "id": ep.ids[i], "kind": KINDS[ep.kind[i]],
            "resource": None if ep.resource[i] < 0 else names[ep.resource[i]],
            "active_from": int(ep.active_from[i]), "active_until": int(ep.active_until[i]),
            "declared_start": int(ep.declared_start[i]), "declared_end": int(ep.declared_end[i]),
            "onset": opt(ep.onset[i]), "deadline": opt(ep.deadline[i]),
            "polarity": POLARITIES[ep.polarity[i]], "registered": bool(ep.registered[i]),
            "priority": int(ep.priority[i]), "miss_cost": float(ep.miss_cost[i]),
            "cross_day": bool(ep.cross_day[i]), "update_sensitive": bool(ep.update_sensitive[i]),
            "version": int(ep.version[i]), "visible_outcome": VISIBLE_OUTCOMES[ep.visible_outcome[i]],
        })
    return {
        "format": FORMAT,
        "horizon": int(ep.horizon),
        "calendar": {"day": ep.step_day.tolist(), "hour": ep.step_hour.tolist(), "weekday": ep.weekday.tolist()},
        "cost_profile": ep.cost_profile,
        "resources": [{"name": n, "class": c, "cost": int(x)}
                      for n, c, x in zip(names, ep.resource_classes, ep.costs)],
        "intentions": intentions,
        "updates": [dict(u) for u in ep.updates],
        "visible_outcomes": ep.visible_counts(),
        "hints": ep.hints.tolist(),
        "meta": dict(ep.meta),
    }


def _need(d: dict, key: str, where: str):
    if not isinstance(d, dict) or key not in d:
        raise EpisodeFormatError(f"{where}: missing field '{key}'")
    return d[key]


#: Integers in files must lie in +-2**53 (exact in a float); the range checks of :func:`validate_episode` are
#: tighter still (steps inside the horizon, costs <= MAX_COST).
_INT_LIMIT = 2**53


def _int(v, where):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise EpisodeFormatError(f"{where}: expected an integer, got {_short(v)}")
    if abs(int(v)) > _INT_LIMIT:
        raise EpisodeFormatError(f"{where}: {_short(v)} is out of range (|value| <= 2**53; 'never' is null)")
    return int(v)


def _str(v, where):
    if not isinstance(v, str):
        raise EpisodeFormatError(f"{where}: expected a string, got {_short(v)}")
    return v


def _short(v) -> str:
    text = repr(v) if not isinstance(v, int) or abs(v) < 10**30 else f"an integer of {len(str(abs(v)))} digits"
    return text if len(text) <= 80 else text[:77] + "..."


def _array(values, dtype, where):
    """A numeric array; integer fields must hold integers (a 2.5 is rejected, not truncated)."""
    try:
        a = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise EpisodeFormatError(f"{where}: not a numeric array ({e})") from None
    if np.asarray(values).dtype == np.bool_:
        raise EpisodeFormatError(f"{where}: expected numbers, got booleans")
    if not np.all(np.isfinite(a)):
        raise EpisodeFormatError(f"{where}: values must be finite numbers (no NaN or Infinity)")
    if dtype is np.int64:
        if np.any(a != np.round(a)) or np.any(np.abs(a) > _INT_LIMIT):
            raise EpisodeFormatError(f"{where}: expected integers (|value| <= 2**53)")
        return a.astype(np.int64)
    return a


def _choice(v, options, where):
    if v not in options:
        raise EpisodeFormatError(f"{where}: {v!r} is not one of {list(options)}")
    return options.index(v)


def episode_from_dict(d: dict) -> Episode:
    """Parse and validate an episode dict (as written by :func:`episode_to_dict`)."""
    if not isinstance(d, dict):
        raise EpisodeFormatError(f"episode: expected a JSON object, got {type(d).__name__}")
    fmt = _need(d, "format", "episode")
    if fmt != FORMAT:
        raise EpisodeFormatError(f"format: expected {FORMAT!r}, got {fmt!r}")
    T = _int(_need(d, "horizon", "episode"), "horizon")
    cal = _need(d, "calendar", "episode")
    res = _need(d, "resources", "episode")
    if not isinstance(res, list) or not res:
        raise EpisodeFormatError("resources: expected a non-empty list")
    names = tuple(_str(_need(r, "name", f"resources[{j}]"), f"resources[{j}].name") for j, r in enumerate(res))
    classes = tuple(_need(r, "class", f"resources[{j}]") for j, r in enumerate(res))
    for j, c in enumerate(classes):
        _choice(c, RESOURCE_CLASSES, f"resources[{j}].class")
    costs = [_int(_need(r, "cost", f"resources[{j}]"), f"resources[{j}].cost") for j, r in enumerate(res)]
    rows = _need(d, "intentions", "episode")
    if not isinstance(rows, list):
        raise EpisodeFormatError("intentions: expected a list")
    cols = {k: [] for k in ("kind", "resource", "active_from", "active_until", "declared_start", "declared_end",
                            "onset", "deadline", "polarity", "priority", "version", "visible_outcome",
                            "registered", "cross_day", "update_sensitive", "miss_cost")}
    ids = []
    for j, row in enumerate(rows):
        w = f"intentions[{j}]"
        ids.append(_str(_need(row, "id", w), f"{w}.id"))
        w = f"intentions[{j}] ({ids[-1]})"
        cols["kind"].append(_choice(_need(row, "kind", w), KINDS, f"{w}.kind"))
        r = _need(row, "resource", w)
        if r is None:
            cols["resource"].append(-1)
        elif r not in names:
            raise EpisodeFormatError(f"{w}.resource: unknown resource {r!r}; resources are {list(names)}")
        else:
            cols["resource"].append(names.index(r))
        for k in ("active_from", "active_until", "declared_start", "declared_end", "priority", "version"):
            cols[k].append(_int(_need(row, k, w), f"{w}.{k}"))
        for k in ("onset", "deadline"):
            v = _need(row, k, w)
            v = NEVER if v is None else _int(v, f"{w}.{k}")
            if v == NEVER and row[k] is not None:
                raise EpisodeFormatError(f"{w}.{k}: {v} is outside the horizon ('never' is null)")
            cols[k].append(v)
        cols["polarity"].append(_choice(_need(row, "polarity", w), POLARITIES, f"{w}.polarity"))
        cols["visible_outcome"].append(_choice(_need(row, "visible_outcome", w), VISIBLE_OUTCOMES,
                                               f"{w}.visible_outcome"))
        for k in ("registered", "cross_day", "update_sensitive"):
            v = _need(row, k, w)
            if not isinstance(v, bool):
                raise EpisodeFormatError(f"{w}.{k}: expected true/false, got {v!r}")
            cols[k].append(v)
        mc = _need(row, "miss_cost", w)
        if isinstance(mc, bool) or not isinstance(mc, (int, float)) or not math.isfinite(mc):
            raise EpisodeFormatError(f"{w}.miss_cost: expected a finite number, got {_short(mc)}")
        cols["miss_cost"].append(float(mc))
    updates = _need(d, "updates", "episode")
    if not isinstance(updates, list):
        raise EpisodeFormatError("updates: expected a list")
    ups = []
    for j, u in enumerate(updates):
        w = f"updates[{j}]"
        ups.append({"step": _int(_need(u, "step", w), f"{w}.step"), "kind": _need(u, "kind", w),
                    "target": _need(u, "target", w), "registered": _need(u, "registered", w),
                    "new_id": _need(u, "new_id", w)})
    meta = d.get("meta", {})
    if not isinstance(meta, dict):
        raise EpisodeFormatError(f"meta: expected a JSON object, got {meta!r}")
    hints = _array(_need(d, "hints", "episode"), np.float64, "hints")
    day = _array(_need(cal, "day", "calendar"), np.int64, "calendar.day")
    hour = _array(_need(cal, "hour", "calendar"), np.float64, "calendar.hour")
    weekday = _array(_need(cal, "weekday", "calendar"), np.int64, "calendar.weekday")
    ep = Episode(horizon=T, step_day=day, step_hour=hour, weekday=weekday, resource_names=names,
                 resource_classes=classes, costs=np.array(costs, dtype=np.int64),
                 cost_profile=_str(d.get("cost_profile", "custom"), "cost_profile"), ids=tuple(ids),
                 hints=hints, updates=tuple(ups), meta=dict(meta),
                 **{k: np.array(v, dtype=bool if k in ("registered", "cross_day", "update_sensitive") else
                                (np.float64 if k == "miss_cost" else np.int64)).reshape(-1)
                    for k, v in cols.items()})
    validate_episode(ep)
    declared = _need(d, "visible_outcomes", "episode")
    if declared != ep.visible_counts():
        raise EpisodeFormatError(f"visible_outcomes: {declared} disagrees with the visible intentions "
                                 f"{ep.visible_counts()}")
    return ep


_DTYPES = {"i": np.dtype(np.int64), "b": np.dtype(np.bool_), "f": np.dtype(np.float64)}
_INTENTION_FIELDS = (("kind", "i"), ("resource", "i"), ("active_from", "i"), ("active_until", "i"),
                     ("declared_start", "i"), ("declared_end", "i"), ("onset", "i"), ("deadline", "i"),
                     ("polarity", "i"), ("priority", "i"), ("version", "i"), ("visible_outcome", "i"),
                     ("cross_day", "b"), ("update_sensitive", "b"), ("registered", "b"), ("miss_cost", "f"))


def _check_array(where, a, kind, shape):
    """The kernels read these arrays as they are: exactly int64 / bool / float64 in native byte order."""
    want = _DTYPES[kind]
    if not isinstance(a, np.ndarray) or a.dtype != want or a.shape != shape:
        got = f"a {a.dtype.str} array of shape {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
        raise EpisodeFormatError(f"{where}: expected a native-byte-order {want} array of shape {shape}, got {got} "
                                 f"(convert with np.asarray(x, dtype=np.{want}))")


_UPDATE_KEYS = {"step", "kind", "target", "registered", "new_id"}


def _check_names(where, names, options=None):
    if not isinstance(names, tuple) or any(not isinstance(x, str) for x in names):
        raise EpisodeFormatError(f"{where}: expected a tuple of strings, got {_short(names)}")
    for x in names if options else ():
        if x not in options:
            raise EpisodeFormatError(f"{where}: {x!r} is not one of {list(options)}")


def validate_episode(ep: Episode) -> None:
    """Raise :class:`EpisodeFormatError` naming the first impossible field of ``ep``: types and dtypes (the
    kernels' own: int64, bool, float64), shapes, ranges (steps inside the horizon, horizon <= MAX_HORIZON,
    costs in 1..MAX_COST, at most MAX_RESOURCES resources and MAX_INTENTIONS intentions) and cross-field rules."""
    if not isinstance(ep, Episode):
        raise EpisodeFormatError(f"episode: expected an Episode, got {type(ep).__name__}")
    _check_fields(ep)
    _check_week(ep)
    clock = ep.resource_classes.index("clock")
    for i in _suspect_intentions(ep, clock):  # the first one raises, naming its field
        _check_intention(ep, i, clock)
    _check_updates(ep)


def _check_fields(ep: Episode) -> None:
    """The horizon, the resource and intention names, and the types, shapes and codes of the field arrays."""
    T = ep.horizon
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or not 1 <= T <= MAX_HORIZON:
        raise EpisodeFormatError(f"horizon: must be an int in 1..{MAX_HORIZON}, got {_short(T)}")
    _check_names("resources.name", ep.resource_names)
    _check_names("resources.class", ep.resource_classes, RESOURCE_CLASSES)
    R = ep.n_resources
    if not 1 <= R <= MAX_RESOURCES or len(ep.resource_classes) != R:
        raise EpisodeFormatError(f"resources: expected 1..{MAX_RESOURCES} resources with one class each, got "
                                 f"{R} names and {len(ep.resource_classes)} classes")
    _check_names("intentions.id", ep.ids)
    n = len(ep.ids)
    if n > MAX_INTENTIONS:
        raise EpisodeFormatError(f"intentions: at most {MAX_INTENTIONS} per week, got {n}")
    for name, kind in _INTENTION_FIELDS:
        _check_array(f"intentions.{name}", getattr(ep, name), kind, (n,))
    for name, codes in (("kind", KINDS), ("polarity", POLARITIES), ("visible_outcome", VISIBLE_OUTCOMES)):
        a = getattr(ep, name)
        if n and (a.min() < 0 or a.max() >= len(codes)):
            raise EpisodeFormatError(f"intentions.{name}: codes must lie in 0..{len(codes) - 1} ({list(codes)})")
    for name, field, kind in (("step_day", "day", "i"), ("step_hour", "hour", "f"), ("weekday", "weekday", "i")):
        _check_array(f"calendar.{field}", getattr(ep, name), kind, (T,))


def _check_week(ep: Episode) -> None:
    """The calendar, the resources and their prices, the hints, the cost profile, the meta data and unique ids."""
    if np.any(ep.step_day < 0) or np.any(ep.step_day > MAX_HORIZON) or np.any(np.diff(ep.step_day) < 0):
        raise EpisodeFormatError(f"calendar.day: days must lie in 0..{MAX_HORIZON} and not decrease")
    if not np.all(np.isfinite(ep.step_hour)) or np.any((ep.step_hour < 0) | (ep.step_hour >= 24)):
        raise EpisodeFormatError("calendar.hour: hours must be finite and lie in [0, 24)")
    if np.any((ep.weekday < 0) | (ep.weekday > 6)):
        raise EpisodeFormatError("calendar.weekday: must lie in 0..6")
    R = ep.n_resources
    if len(set(ep.resource_names)) != R:
        raise EpisodeFormatError(f"resources: names must be unique, got {list(ep.resource_names)}")
    if list(ep.resource_classes).count("clock") != 1:
        raise EpisodeFormatError("resources: exactly one resource must have class 'clock'")
    _check_array("resources.cost", ep.costs, "i", (R,))
    if np.any(ep.costs < 1) or np.any(ep.costs > MAX_COST):
        raise EpisodeFormatError(f"resources.cost: costs must be integers in 1..{MAX_COST} (scale fractional "
                                 f"prices, as the cost profiles do), got {_short(ep.costs.tolist())}")
    _check_array("hints", ep.hints, "f", (ep.horizon, R))
    if not np.all(np.isfinite(ep.hints)) or np.any((ep.hints < 0) | (ep.hints > 1)):
        raise EpisodeFormatError("hints: values must be finite and lie in [0, 1]")
    if not isinstance(ep.cost_profile, str):
        raise EpisodeFormatError(f"cost_profile: expected a string, got {_short(ep.cost_profile)}")
    if not isinstance(ep.meta, dict):
        raise EpisodeFormatError(f"meta: expected a dict, got {type(ep.meta).__name__}")
    if len(set(ep.ids)) != len(ep.ids):
        dup = sorted({i for i in ep.ids if ep.ids.count(i) > 1})
        raise EpisodeFormatError(f"intentions.id: duplicate ids {dup}")


def _suspect_intentions(ep: Episode, clock: int) -> np.ndarray:
    """The intentions that break a rule of :func:`_check_intention`, found with array operations (checked fields
    of checked types and shapes), in order: every intention it would refuse is among them, so checking these alone
    raises the loop's first error, and a valid week costs no Python per intention."""
    T, R = ep.horizon, ep.n_resources
    kind, r, out = ep.kind, ep.resource, ep.visible_outcome
    vis = kind == KIND_VISIBLE
    none = out == VISIBLE_OUTCOMES.index("none")
    positive_ok = (out == VISIBLE_OUTCOMES.index("tp")) | (out == VISIBLE_OUTCOMES.index("fn"))
    negative_ok = (out == VISIBLE_OUTCOMES.index("fp")) | (out == VISIBLE_OUTCOMES.index("tn"))
    bad = np.where(vis, (r != -1) | (ep.onset == NEVER) | none | ~np.where(ep.polarity == 0, positive_ok, negative_ok),
                   (r < 0) | (r >= R) | ((kind == KIND_TIME) & (r != clock)) | ((kind == KIND_CHANNEL) & (r == clock))
                   | ~none)
    for name in ("active_from", "active_until", "declared_start", "declared_end"):
        v = getattr(ep, name)
        bad |= (v < 0) | (v >= T)
    bad |= (ep.active_until < ep.active_from) | (ep.declared_end < ep.declared_start)
    on, dl = ep.onset, ep.deadline
    for v in (on, dl):
        bad |= (v != NEVER) & ((v < 0) | (v >= T))
    bad |= ((on == NEVER) != (dl == NEVER)) | ((on != NEVER) & (dl < on))
    bad |= (ep.priority < 1) | (ep.priority > 3) | (ep.version < 0)
    with np.errstate(invalid="ignore"):
        bad |= ~(np.isfinite(ep.miss_cost) & (ep.miss_cost >= 0) & (ep.miss_cost <= 3))
    return np.flatnonzero(bad)


def _check_intention(ep: Episode, i: int, clock: int) -> None:
    """Intention ``i``: its kind's rules (resource, cue, visible outcome), its steps and its numbers."""
    T = ep.horizon
    w = f"intentions[{i}] ({ep.ids[i]})"
    kind, r = ep.kind[i], ep.resource[i]
    if kind == KIND_VISIBLE:
        if r != -1:
            raise EpisodeFormatError(f"{w}.resource: visible intentions are not queried; must be null")
        if ep.onset[i] == NEVER:
            raise EpisodeFormatError(f"{w}.onset: a visible intention needs the step of its cue")
        if VISIBLE_OUTCOMES[ep.visible_outcome[i]] == "none":
            raise EpisodeFormatError(f"{w}.visible_outcome: a visible intention needs tp/fn/fp/tn")
        ok = ("tp", "fn") if ep.polarity[i] == 0 else ("fp", "tn")
        if VISIBLE_OUTCOMES[ep.visible_outcome[i]] not in ok:
            raise EpisodeFormatError(f"{w}.visible_outcome: a {POLARITIES[ep.polarity[i]]} visible intention "
                                     f"can only be {ok}")
    else:
        if not 0 <= r < ep.n_resources:
            raise EpisodeFormatError(f"{w}.resource: a {KINDS[kind]} intention needs a resource")
        if kind == KIND_TIME and r != clock:
            raise EpisodeFormatError(f"{w}.resource: a time intention must be on the clock")
        if kind == KIND_CHANNEL and r == clock:
            raise EpisodeFormatError(f"{w}.resource: a channel intention cannot be on the clock")
        if VISIBLE_OUTCOMES[ep.visible_outcome[i]] != "none":
            raise EpisodeFormatError(f"{w}.visible_outcome: only visible intentions have one")
    for name in ("active_from", "active_until", "declared_start", "declared_end"):
        v = getattr(ep, name)[i]
        if not 0 <= v < T:
            raise EpisodeFormatError(f"{w}.{name}: {v} is outside the horizon 0..{T - 1}")
    if ep.active_until[i] < ep.active_from[i]:
        raise EpisodeFormatError(f"{w}.active_until: {ep.active_until[i]} is before active_from "
                                 f"{ep.active_from[i]}")
    if ep.declared_end[i] < ep.declared_start[i]:
        raise EpisodeFormatError(f"{w}.declared_end: before declared_start")
    on, dl = ep.onset[i], ep.deadline[i]
    for name, v in (("onset", on), ("deadline", dl)):
        if v != NEVER and not 0 <= v < T:
            raise EpisodeFormatError(f"{w}.{name}: {v} is outside the horizon 0..{T - 1} (never: null in files, "
                                     f"NEVER in memory)")
    if (on == NEVER) != (dl == NEVER):
        raise EpisodeFormatError(f"{w}.deadline: onset and deadline must both be null or both be set")
    if on != NEVER:
        if not 0 <= on < T:
            raise EpisodeFormatError(f"{w}.onset: {on} is outside the horizon 0..{T - 1}")
        if not 0 <= dl < T:
            raise EpisodeFormatError(f"{w}.deadline: {dl} is outside the horizon 0..{T - 1}")
        if dl < on:
            raise EpisodeFormatError(f"{w}.deadline: {dl} is before the onset {on}")
    if ep.priority[i] < 1 or ep.priority[i] > 3:
        raise EpisodeFormatError(f"{w}.priority: must lie in 1..3, got {ep.priority[i]}")
    if not (math.isfinite(ep.miss_cost[i]) and 0 <= ep.miss_cost[i] <= 3):
        raise EpisodeFormatError(f"{w}.miss_cost: must lie in [0, 3], got {ep.miss_cost[i]}")
    if ep.version[i] < 0:
        raise EpisodeFormatError(f"{w}.version: must be >= 0")


def _check_updates(ep: Episode) -> None:
    """The user's updates: their fields, the intentions they point at and the steps they happen at."""
    if not isinstance(ep.updates, tuple):
        raise EpisodeFormatError(f"updates: expected a tuple of dicts, got {type(ep.updates).__name__}")
    # each id's first index (what ep.ids.index gives), so that an update's target is looked up, not searched for: a
    # search per update was quadratic (0.8 s for a week of 10^4 updates among 5.6 * 10^4 intentions)
    first = {}
    for i, x in enumerate(ep.ids):
        first.setdefault(x, i)
    for j, u in enumerate(ep.updates):
        w = f"updates[{j}]"
        if not isinstance(u, dict) or set(u) != _UPDATE_KEYS:
            raise EpisodeFormatError(f"{w}: expected a dict with exactly the keys {sorted(_UPDATE_KEYS)}, got "
                                     f"{_short(u)}")
        if isinstance(u["step"], bool) or not isinstance(u["step"], (int, np.integer)):
            raise EpisodeFormatError(f"{w}.step: expected an integer, got {_short(u['step'])}")
        for k in ("target", "new_id"):
            if not (isinstance(u[k], str) or (k == "new_id" and u[k] is None)):
                raise EpisodeFormatError(f"{w}.{k}: expected an intention id (string), got {_short(u[k])}")
        if u["kind"] not in UPDATE_KINDS:
            raise EpisodeFormatError(f"{w}.kind: {u['kind']!r} is not one of {list(UPDATE_KINDS)}")
        if u["target"] not in first:
            raise EpisodeFormatError(f"{w}.target: {u['target']!r} points at no intention")
        if not 0 <= u["step"] < ep.horizon:
            raise EpisodeFormatError(f"{w}.step: {u['step']} is outside the horizon")
        if not isinstance(u["registered"], bool):
            raise EpisodeFormatError(f"{w}.registered: expected true/false")
        if u["kind"] == "cancel" and u["new_id"] is not None:
            raise EpisodeFormatError(f"{w}.new_id: a cancel creates no new version")
        if u["new_id"] is not None and u["new_id"] not in first:
            raise EpisodeFormatError(f"{w}.new_id: {u['new_id']!r} points at no intention")
        if ep.kind[first[u["target"]]] == KIND_VISIBLE:
            raise EpisodeFormatError(f"{w}.target: updates of visible intentions are not modelled")


def save_episode(ep: Episode, path) -> None:
    """Write ``ep`` as JSON (see the module docstring for the format)."""
    with open(os.fspath(path), "w") as f:
        json.dump(episode_to_dict(ep), f)


def load_episode(path) -> Episode:
    """Read and validate an episode file."""
    with open(os.fspath(path), encoding="utf-8") as f:
        try:
            d = json.load(f)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise EpisodeFormatError(f"{path}: not valid UTF-8 JSON ({e})") from None
        except RecursionError:
            raise EpisodeFormatError(f"{path}: JSON nested too deeply") from None
        except ValueError as e:  # e.g. an integer literal past Python's digit limit
            raise EpisodeFormatError(f"{path}: unreadable number ({e})") from None
    try:
        return episode_from_dict(d)
    except EpisodeFormatError as e:
        raise EpisodeFormatError(f"{path}: {e}") from None

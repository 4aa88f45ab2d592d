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

from .world import (KINDS, KIND_CHANNEL, KIND_TIME, KIND_VISIBLE, NEVER, POLARITIES, RESOURCE_CLASSES,
                    UPDATE_KINDS, VISIBLE_OUTCOMES, Episode)

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


def _int(v, where):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise EpisodeFormatError(f"{where}: expected an integer, got {v!r}")
    return int(v)


def _array(values, dtype, where):
    """A numeric array; integer fields must hold integers (a 2.5 is rejected, not truncated)."""
    try:
        a = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise EpisodeFormatError(f"{where}: not a numeric array ({e})") from None
    if np.asarray(values).dtype == np.bool_:
        raise EpisodeFormatError(f"{where}: expected numbers, got booleans")
    if dtype is np.int64:
        if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
            raise EpisodeFormatError(f"{where}: expected integers")
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
    names = tuple(str(_need(r, "name", f"resources[{j}]")) for j, r in enumerate(res))
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
        ids.append(str(_need(row, "id", w)))
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
            cols[k].append(NEVER if v is None else _int(v, f"{w}.{k}"))
        cols["polarity"].append(_choice(_need(row, "polarity", w), POLARITIES, f"{w}.polarity"))
        cols["visible_outcome"].append(_choice(_need(row, "visible_outcome", w), VISIBLE_OUTCOMES,
                                               f"{w}.visible_outcome"))
        for k in ("registered", "cross_day", "update_sensitive"):
            v = _need(row, k, w)
            if not isinstance(v, bool):
                raise EpisodeFormatError(f"{w}.{k}: expected true/false, got {v!r}")
            cols[k].append(v)
        mc = _need(row, "miss_cost", w)
        if isinstance(mc, bool) or not isinstance(mc, (int, float)):
            raise EpisodeFormatError(f"{w}.miss_cost: expected a number, got {mc!r}")
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
        for k in ("target", "new_id"):
            if not (isinstance(ups[-1][k], str) or (k == "new_id" and ups[-1][k] is None)):
                raise EpisodeFormatError(f"{w}.{k}: expected an intention id (string), got {ups[-1][k]!r}")
    meta = d.get("meta", {})
    if not isinstance(meta, dict):
        raise EpisodeFormatError(f"meta: expected a JSON object, got {meta!r}")
    hints = _array(_need(d, "hints", "episode"), np.float64, "hints")
    day = _array(_need(cal, "day", "calendar"), np.int64, "calendar.day")
    hour = _array(_need(cal, "hour", "calendar"), np.float64, "calendar.hour")
    weekday = _array(_need(cal, "weekday", "calendar"), np.int64, "calendar.weekday")
    ep = Episode(horizon=T, step_day=day, step_hour=hour, weekday=weekday, resource_names=names,
                 resource_classes=classes, costs=np.array(costs, dtype=np.int64),
                 cost_profile=str(d.get("cost_profile", "custom")), ids=tuple(ids),
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


def validate_episode(ep: Episode) -> None:
    """Raise :class:`EpisodeFormatError` naming the first impossible field of ``ep``."""
    T, R = ep.horizon, ep.n_resources
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 1:
        raise EpisodeFormatError(f"horizon: must be an int >= 1, got {T!r}")
    n = len(ep.ids)
    kinds = {"b": "booleans", "i": "integers", "f": "numbers"}
    for name, kind in (("kind", "i"), ("resource", "i"), ("active_from", "i"), ("active_until", "i"),
                       ("declared_start", "i"), ("declared_end", "i"), ("onset", "i"), ("deadline", "i"),
                       ("polarity", "i"), ("priority", "i"), ("version", "i"), ("visible_outcome", "i"),
                       ("cross_day", "b"), ("update_sensitive", "b"), ("registered", "b"), ("miss_cost", "f")):
        a = getattr(ep, name)
        if not isinstance(a, np.ndarray) or a.shape != (n,):
            raise EpisodeFormatError(f"intentions.{name}: expected an array of {n} entries (one per id), got "
                                     f"{getattr(a, 'shape', type(a).__name__)}")
        if a.dtype.kind not in (("i", "u") if kind == "i" else ("b",) if kind == "b" else ("i", "u", "f")):
            raise EpisodeFormatError(f"intentions.{name}: expected {kinds[kind]}, got dtype {a.dtype}")
    for name, codes in (("kind", KINDS), ("polarity", POLARITIES), ("visible_outcome", VISIBLE_OUTCOMES)):
        a = getattr(ep, name)
        if n and (a.min() < 0 or a.max() >= len(codes)):
            raise EpisodeFormatError(f"intentions.{name}: codes must lie in 0..{len(codes) - 1} ({list(codes)})")
    for name in ("step_day", "step_hour", "weekday"):
        if getattr(ep, name).shape != (T,):
            raise EpisodeFormatError(f"calendar.{name}: expected {T} entries, got shape {getattr(ep, name).shape}")
    if np.any(np.diff(ep.step_day) < 0):
        raise EpisodeFormatError("calendar.day: days must not decrease")
    if np.any((ep.weekday < 0) | (ep.weekday > 6)):
        raise EpisodeFormatError("calendar.weekday: must lie in 0..6")
    if len(set(ep.resource_names)) != R:
        raise EpisodeFormatError(f"resources: names must be unique, got {list(ep.resource_names)}")
    if list(ep.resource_classes).count("clock") != 1:
        raise EpisodeFormatError("resources: exactly one resource must have class 'clock'")
    costs = np.asarray(ep.costs)
    if costs.shape != (R,) or costs.dtype.kind not in "iuf" or np.any(costs <= 0) or np.any(costs != np.round(costs)):
        raise EpisodeFormatError(f"resources.cost: costs must be positive integers (scale fractional prices, as "
                                 f"the cost profiles do), got {costs.tolist()}")
    if ep.hints.shape != (T, R):
        raise EpisodeFormatError(f"hints: expected shape ({T}, {R}), got {ep.hints.shape}")
    if not np.all(np.isfinite(ep.hints)) or np.any((ep.hints < 0) | (ep.hints > 1)):
        raise EpisodeFormatError("hints: values must be finite and lie in [0, 1]")
    if len(set(ep.ids)) != len(ep.ids):
        dup = sorted({i for i in ep.ids if ep.ids.count(i) > 1})
        raise EpisodeFormatError(f"intentions.id: duplicate ids {dup}")
    clock = ep.resource_classes.index("clock")
    for i, iid in enumerate(ep.ids):
        w = f"intentions[{i}] ({iid})"
        kind, r = ep.kind[i], ep.resource[i]
        if kind == KIND_VISIBLE:
            if r != -1:
                raise EpisodeFormatError(f"{w}.resource: visible intentions are not queried; must be null")
            if ep.onset[i] >= NEVER:
                raise EpisodeFormatError(f"{w}.onset: a visible intention needs the step of its cue")
            if VISIBLE_OUTCOMES[ep.visible_outcome[i]] == "none":
                raise EpisodeFormatError(f"{w}.visible_outcome: a visible intention needs tp/fn/fp/tn")
            ok = ("tp", "fn") if ep.polarity[i] == 0 else ("fp", "tn")
            if VISIBLE_OUTCOMES[ep.visible_outcome[i]] not in ok:
                raise EpisodeFormatError(f"{w}.visible_outcome: a {POLARITIES[ep.polarity[i]]} visible intention "
                                         f"can only be {ok}")
        else:
            if not 0 <= r < R:
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
        if (on >= NEVER) != (dl >= NEVER):
            raise EpisodeFormatError(f"{w}.deadline: onset and deadline must both be null or both be set")
        if on < NEVER:
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
    id_set = set(ep.ids)
    for j, u in enumerate(ep.updates):
        w = f"updates[{j}]"
        if u["kind"] not in UPDATE_KINDS:
            raise EpisodeFormatError(f"{w}.kind: {u['kind']!r} is not one of {list(UPDATE_KINDS)}")
        if u["target"] not in id_set:
            raise EpisodeFormatError(f"{w}.target: {u['target']!r} points at no intention")
        if not 0 <= u["step"] < T:
            raise EpisodeFormatError(f"{w}.step: {u['step']} is outside the horizon")
        if not isinstance(u["registered"], bool):
            raise EpisodeFormatError(f"{w}.registered: expected true/false")
        if u["kind"] == "cancel" and u["new_id"] is not None:
            raise EpisodeFormatError(f"{w}.new_id: a cancel creates no new version")
        if u["new_id"] is not None and u["new_id"] not in id_set:
            raise EpisodeFormatError(f"{w}.new_id: {u['new_id']!r} points at no intention")
        target = ep.ids.index(u["target"])
        if ep.kind[target] == KIND_VISIBLE:
            raise EpisodeFormatError(f"{w}.target: updates of visible intentions are not modelled")


def save_episode(ep: Episode, path) -> None:
    """Write ``ep`` as JSON (see the module docstring for the format)."""
    with open(os.fspath(path), "w") as f:
        json.dump(episode_to_dict(ep), f)


def load_episode(path) -> Episode:
    """Read and validate an episode file."""
    with open(os.fspath(path)) as f:
        try:
            d = json.load(f)
        except json.JSONDecodeError as e:
            raise EpisodeFormatError(f"{path}: not valid JSON ({e})") from None
    return episode_from_dict(d)

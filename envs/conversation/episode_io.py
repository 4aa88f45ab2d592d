"""Conversation files: a documented JSON format, round-tripping exactly, with a validator (in the style of the PM
week's :mod:`membudget.envs.pm.episode_io`).

Format (``format`` = ``"membudget.conversation-episode/2"``; files of format ``/1``, written before the base
response was modelled, read with ``base`` all 0)::

    {
      "format": "membudget.conversation-episode/2",
      "horizon": 66,                          # T user messages (decision steps)
      "gate": 0.05,                           # similarity gate of the candidates
      "messages": [{"kind": "filler|other_test|pm_quote|pm_instruction|tr_setup|tr_trigger|tr_lure|reset",
                    "test": id | null}, ...],  # T entries; the test a scripted line or lure belongs to
      "tests": [{"id": "pm1", "kind": "prospective|trigger",
                 "stored": int,                # step of the quote / of the trigger-response setup
                 "live_from": int, "live_until": int,   # steps the memory is queryable
                 "ordinal": int | null,        # n of a prospective test (null for trigger response)
                 "fires": [int, ...]}, ...],   # steps it truly fires: [live_from + n - 1] / 3 activations
      "token_similarity": [[...R floats in [0, 1]] x T],
      "fuzzy_similarity": [[...] x T], "repeat_fraction": [[...] x T],   # zero where the memory is not live
      "verifier": [[...R ints 0/1] x T],      # 1: the verifier answers "fires"; 0 on every non-candidate pair
      "base": [[...R ints 0/1] x T],          # 1: the base response (no verifier call) executes the memory;
                                               # 0 where the memory is not live
      "meta": {...}                            # free-form provenance (seed)
    }
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from ..pm.episode_io import EpisodeFormatError
from .world import (ACTIVATIONS, MAX_HORIZON, MAX_TESTS, MESSAGE_KINDS, PROSPECTIVE, TEST_KINDS, TRIGGER,
                    Conversation)

FORMAT = "membudget.conversation-episode/2"
FORMAT_V1 = "membudget.conversation-episode/1"
"""The format before base responses (read with ``base`` all 0)."""


def conversation_to_dict(conv: Conversation) -> dict:
    ids = conv.test_ids
    return {
        "format": FORMAT,
        "horizon": int(conv.horizon),
        "gate": float(conv.gate),
        "messages": [{"kind": MESSAGE_KINDS[k], "test": None if j < 0 else ids[j]}
                     for k, j in zip(conv.message_kind.tolist(), conv.message_test.tolist())],
        "tests": [{"id": ids[j], "kind": TEST_KINDS[conv.test_kind[j]], "stored": int(conv.stored[j]),
                   "live_from": int(conv.live_from[j]), "live_until": int(conv.live_until[j]),
                   "ordinal": int(conv.ordinal[j]) if conv.test_kind[j] == PROSPECTIVE else None,
                   "fires": [int(t) for t in conv.fires[j]]} for j in range(conv.n_resources)],
        "token_similarity": conv.token_similarity.tolist(),
        "fuzzy_similarity": conv.fuzzy_similarity.tolist(),
        "repeat_fraction": conv.repeat_fraction.tolist(),
        "verifier": conv.verifier.tolist(),
        "base": conv.base.tolist(),
        "meta": dict(conv.meta),
    }


def _need(d, key, where):
    if not isinstance(d, dict) or key not in d:
        raise EpisodeFormatError(f"{where}: missing field '{key}'")
    return d[key]


def _int(v, where, low, high):
    """An integer in [low, high] (never a bool, a float or a huge number)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not low <= v <= high:
        raise EpisodeFormatError(f"{where}: expected an integer in [{low}, {high}], got {v!r}")
    return int(v)


def _choice(v, options, where):
    if not isinstance(v, str) or v not in options:
        raise EpisodeFormatError(f"{where}: {v!r} is not one of {list(options)}")
    return options.index(v)


def _matrix(values, where, T, R, integer=False):
    """A ``(T, R)`` array of finite numbers in [0, 1] (of 0/1 integers with ``integer``)."""
    if not isinstance(values, list) or len(values) != T or \
            any(not isinstance(row, list) or len(row) != R for row in values):
        raise EpisodeFormatError(f"{where}: expected {T} rows of {R} numbers")
    for t, row in enumerate(values):
        for r, v in enumerate(row):
            ok = isinstance(v, int) if integer else isinstance(v, (int, float))
            if isinstance(v, bool) or not ok or not math.isfinite(v) or not 0 <= v <= 1:
                raise EpisodeFormatError(f"{where}[{t}][{r}]: expected {'0 or 1' if integer else 'a number in [0, 1]'}"
                                         f", got {v!r}")
    return np.array(values, dtype=np.int8 if integer else np.float64).reshape(T, R)


def conversation_from_dict(d: dict) -> Conversation:
    """Parse and validate a conversation dict (as written by :func:`conversation_to_dict`)."""
    if not isinstance(d, dict):
        raise EpisodeFormatError(f"conversation: expected a JSON object, got {type(d).__name__}")
    fmt = _need(d, "format", "conversation")
    if fmt not in (FORMAT, FORMAT_V1):
        raise EpisodeFormatError(f"format: expected {FORMAT!r} (or {FORMAT_V1!r}), got {fmt!r}")
    T = _int(_need(d, "horizon", "conversation"), "horizon", 2, MAX_HORIZON)
    gate = _need(d, "gate", "conversation")
    if isinstance(gate, bool) or not isinstance(gate, (int, float)) or not math.isfinite(gate) or not 0 < gate <= 1:
        raise EpisodeFormatError(f"gate: expected a number in (0, 1], got {gate!r}")
    tests = _need(d, "tests", "conversation")
    if not isinstance(tests, list) or not 2 <= len(tests) <= 2 * MAX_TESTS:
        raise EpisodeFormatError(f"tests: expected a list of 2..{2 * MAX_TESTS} tests")
    ids = tuple(_need(x, "id", f"tests[{j}]") for j, x in enumerate(tests))
    for j, i in enumerate(ids):
        if not isinstance(i, str) or not i:
            raise EpisodeFormatError(f"tests[{j}].id: expected a non-empty string, got {i!r}")
    if len(set(ids)) != len(ids):
        raise EpisodeFormatError(f"tests.id: duplicate ids in {list(ids)}")
    cols = {k: [] for k in ("test_kind", "stored", "live_from", "live_until", "ordinal")}
    fires = []
    for j, x in enumerate(tests):
        w = f"tests[{j}] ({ids[j]})"
        kind = _choice(_need(x, "kind", w), TEST_KINDS, f"{w}.kind")
        cols["test_kind"].append(kind)
        for k in ("stored", "live_from", "live_until"):
            cols[k].append(_int(_need(x, k, w), f"{w}.{k}", 0, T - 1))
        n = _need(x, "ordinal", w)
        if kind == PROSPECTIVE:
            cols["ordinal"].append(_int(n, f"{w}.ordinal", 1, T))
        elif n is not None:
            raise EpisodeFormatError(f"{w}.ordinal: a trigger test has none (null), got {n!r}")
        else:
            cols["ordinal"].append(0)
        f = _need(x, "fires", w)
        if not isinstance(f, list):
            raise EpisodeFormatError(f"{w}.fires: expected a list of steps")
        fires.append(tuple(_int(v, f"{w}.fires[{k}]", 0, T - 1) for k, v in enumerate(f)))
    messages = _need(d, "messages", "conversation")
    if not isinstance(messages, list) or len(messages) != T:
        raise EpisodeFormatError(f"messages: expected a list of {T} messages (one per step)")
    kinds, owners = [], []
    for t, m in enumerate(messages):
        kinds.append(_choice(_need(m, "kind", f"messages[{t}]"), MESSAGE_KINDS, f"messages[{t}].kind"))
        o = _need(m, "test", f"messages[{t}]")
        if o is not None and o not in ids:
            raise EpisodeFormatError(f"messages[{t}].test: {o!r} is no test id; tests are {list(ids)}")
        owners.append(-1 if o is None else ids.index(o))
    meta = d.get("meta", {})
    if not isinstance(meta, dict):
        raise EpisodeFormatError(f"meta: expected a JSON object, got {meta!r}")
    R = len(ids)
    arr = {k: np.array(v, dtype=np.int64) for k, v in cols.items()}
    conv = Conversation(
        horizon=T, gate=float(gate), message_kind=np.array(kinds, dtype=np.int64),
        message_test=np.array(owners, dtype=np.int64), test_ids=ids, test_kind=arr["test_kind"],
        stored=arr["stored"], live_from=arr["live_from"], live_until=arr["live_until"], ordinal=arr["ordinal"],
        fires=tuple(fires), token_similarity=_matrix(_need(d, "token_similarity", "conversation"),
                                                     "token_similarity", T, R),
        fuzzy_similarity=_matrix(_need(d, "fuzzy_similarity", "conversation"), "fuzzy_similarity", T, R),
        repeat_fraction=_matrix(_need(d, "repeat_fraction", "conversation"), "repeat_fraction", T, R),
        verifier=_matrix(_need(d, "verifier", "conversation"), "verifier", T, R, integer=True),
        base=None if fmt == FORMAT_V1 else _matrix(_need(d, "base", "conversation"), "base", T, R, integer=True),
        meta=dict(meta))
    validate_conversation(conv)
    return conv


def validate_conversation(conv: Conversation) -> None:
    """Raise :class:`~membudget.envs.pm.EpisodeFormatError` naming the first impossible field of ``conv``."""
    T = conv.horizon
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or not 2 <= T <= MAX_HORIZON:
        raise EpisodeFormatError(f"horizon: must be an int in [2, {MAX_HORIZON}], got {T!r}")
    if isinstance(conv.gate, bool) or not isinstance(conv.gate, (int, float)) or not math.isfinite(conv.gate) \
            or not 0 < conv.gate <= 1:
        raise EpisodeFormatError(f"gate: must be a number in (0, 1], got {conv.gate!r}")
    R = len(conv.test_ids)
    for name in ("test_kind", "stored", "live_from", "live_until", "ordinal"):
        a = getattr(conv, name)
        if not isinstance(a, np.ndarray) or a.shape != (R,) or a.dtype.kind not in "iu":
            raise EpisodeFormatError(f"tests.{name}: expected {R} integers (one per test)")
    for name in ("message_kind", "message_test"):
        a = getattr(conv, name)
        if not isinstance(a, np.ndarray) or a.shape != (T,) or a.dtype.kind not in "iu":
            raise EpisodeFormatError(f"messages.{name}: expected {T} integers (one per step)")
    if np.any((conv.message_kind < 0) | (conv.message_kind >= len(MESSAGE_KINDS))):
        raise EpisodeFormatError(f"messages.kind: codes must lie in 0..{len(MESSAGE_KINDS) - 1}")
    if np.any((conv.message_test < -1) | (conv.message_test >= R)):
        raise EpisodeFormatError("messages.test: points at no test")
    kinds = conv.test_kind.tolist()
    if PROSPECTIVE not in kinds or TRIGGER not in kinds or any(k not in (PROSPECTIVE, TRIGGER) for k in kinds):
        raise EpisodeFormatError("tests.kind: need at least one prospective and one trigger test (macro accuracy "
                                 "averages the two components)")
    if not isinstance(conv.fires, tuple) or len(conv.fires) != R:
        raise EpisodeFormatError(f"tests.fires: expected {R} entries (one per test)")
    for j in range(R):
        w = f"tests[{j}] ({conv.test_ids[j]})"
        a, b, s = int(conv.live_from[j]), int(conv.live_until[j]), int(conv.stored[j])
        for name, v in (("stored", s), ("live_from", a), ("live_until", b)):
            if not 0 <= v < T:
                raise EpisodeFormatError(f"{w}.{name}: {v} is outside the horizon 0..{T - 1}")
        if b < a:
            raise EpisodeFormatError(f"{w}.live_until: {b} is before live_from {a}")
        if s > a:
            raise EpisodeFormatError(f"{w}.stored: {s} is after live_from {a} (a memory is stored before it is live)")
        f = list(conv.fires[j])
        if f != sorted(set(f)) or any(not a <= t <= b for t in f):
            raise EpisodeFormatError(f"{w}.fires: {f} must be increasing steps inside the live period {a}..{b}")
        if conv.test_kind[j] == PROSPECTIVE:
            n = int(conv.ordinal[j])
            if n < 1 or f != [a + n - 1]:
                raise EpisodeFormatError(f"{w}.fires: a prospective test fires once, at its n-th reply "
                                         f"(live_from + ordinal - 1 = {a + n - 1}), got {f}")
        elif len(f) != ACTIVATIONS:
            raise EpisodeFormatError(f"{w}.fires: a trigger test has {ACTIVATIONS} activations, got {f}")
    for name in ("token_similarity", "fuzzy_similarity", "repeat_fraction"):
        a = getattr(conv, name)
        if not isinstance(a, np.ndarray) or a.shape != (T, R) or a.dtype.kind != "f":
            raise EpisodeFormatError(f"{name}: expected a ({T}, {R}) float array")
        if not np.all(np.isfinite(a)) or np.any((a < 0) | (a > 1)):
            raise EpisodeFormatError(f"{name}: values must be finite and lie in [0, 1]")
        if np.any(a[~conv.live()] != 0):
            raise EpisodeFormatError(f"{name}: must be 0 where the memory is not live")
    v = conv.verifier
    if not isinstance(v, np.ndarray) or v.shape != (T, R) or v.dtype.kind not in "iu" or np.any((v != 0) & (v != 1)):
        raise EpisodeFormatError(f"verifier: expected a ({T}, {R}) array of 0/1")
    b = conv.base
    if not isinstance(b, np.ndarray) or b.shape != (T, R) or b.dtype.kind not in "iu" or np.any((b != 0) & (b != 1)):
        raise EpisodeFormatError(f"base: expected a ({T}, {R}) array of 0/1")
    if np.any(b.astype(bool) & ~conv.live()):
        t, r = np.argwhere(b.astype(bool) & ~conv.live())[0]
        raise EpisodeFormatError(f"base[{t}][{r}]: the base response executes only live memories")
    if np.any(v.astype(bool) & ~conv.candidates()):
        t, r = np.argwhere(v.astype(bool) & ~conv.candidates())[0]
        raise EpisodeFormatError(f"verifier[{t}][{r}]: the verifier answers only candidate pairs (live and token "
                                 f"similarity >= gate)")


def save_conversation(conv: Conversation, path) -> None:
    """Write ``conv`` as JSON (see the module docstring for the format)."""
    with open(os.fspath(path), "w") as f:
        json.dump(conversation_to_dict(conv), f)


def load_conversation(path) -> Conversation:
    """Read and validate a conversation file."""
    with open(os.fspath(path)) as f:
        try:
            d = json.load(f)
        except json.JSONDecodeError as e:
            raise EpisodeFormatError(f"{path}: not valid JSON ({e})") from None
    return conversation_from_dict(d)

"""The streams of ``membudget/ProactiveStream-v1``: v0's world (:mod:`membudget.envs.proactive.world`) with
**carried opportunities**, whose evidence lies beyond the event window and is carried by the daily trajectories.

ProactMem's trajectory memory holds source-validated summaries of completed days — activities completed, changed
circumstances, per entity — that "remain in the current construction cycle after their events leave event
memory" (§3.1, appendix B.1), and adding it "raises effectiveness in every scope, with the largest improvement on
Code" (§5.4; 4, 15 and 64 more true positives on Sports, Home and Code, appendix C). In v0 almost no opportunity
needs evidence older than the 72-hour / 100-event window, so trajectories could not pay. v1 keeps every v0 draw
(in v0's order: the same routines, needs, events and labels where nothing is added; Sports at v1's skip
probabilities) and then, from the same
generator, adds per scope two public event types (two facts appended to v0's vocabulary, :data:`SCOPES_V1`):

- an **anchor**, a completed activity or changed circumstance of an entity — Sports: the participant reports a
  setback (``report=setback``: a minor injury or illness that pauses activity); Home: a carer's visit changes the
  care plan (``visit=carer``); Code: a maintainer requests changes on a pull request (``review=changes``, the
  entity is the pull request, ``object_id``);
- a **follow-up** of an entity — Sports: the app's check-in prompt (``prompt=checkin``); Home: the medication
  cabinet is opened (``cabinet=medication``); Code: the contributor pushes an update to the pull request
  (``update=pr``).

A follow-up is a reference opportunity (ProactMem's ``y_t``, support bit 4 besides v0's 1 = A and 2 = B) when an
anchor of the **same entity** happened from the start of the seventh day before the follow-up's day up to the
follow-up (so it is in the follow-up's event window or in the trajectories of the last seven completed days) and
the latent need is present (:data:`CARRIED_NEED`): a return-to-activity suggestion after a setback, a medication
check-in after a change of plan, review help on the update of a pull request that had changes requested. A
follow-up without such an anchor is a reference negative. Anchors are followed up after
:data:`CARRIED_AGE` days (uniform), mostly beyond the 72-hour window; decoy follow-ups (no anchor) come at the
scope's own rate. The rates per scope (:data:`CARRIED_RATES`) are chosen on development streams (seeds 0-9) to
keep the order of the paper's true-positive gains of trajectories (Code ≫ Home > Sports), see
``docs/envs/proactive_stream.md``.

Everything else — the routines (ProactMem's ``B``), current evidence (``A``), novelty, the public predicates
:func:`~membudget.envs.proactive.world.evidence` and :func:`~membudget.envs.proactive.world.feasible` — is v0's,
evaluated on the stream with the added events, except that Sports' due routines are skipped more often
(:data:`SPORTS_SKIP_V1`; v0's generator draws in v0's order at those probabilities).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ..validation import check_int
from .schema import MINUTES_PER_DAY, Stream
from .world import (CODE, DEFAULT_DAYS, HOME, MAX_DAYS, SPORTS, SPORTS_SKIP, _GENERATORS, _code, _label, _sports,
                    check_scope, unlabelled_stream)

CARRIED_FACTS = {"sports": ("report=setback", "prompt=checkin"), "home": ("visit=carer", "cabinet=medication"),
                 "code": ("review=changes", "update=pr")}
"""Per scope the anchor fact and the follow-up fact v1 appends to v0's vocabulary."""
TRIGGERS_V1 = {"sports": SPORTS.triggers, "home": HOME.triggers, "code": CODE.triggers + ("kind=pr_review",)}
"""Per scope the trigger facts the proposer pairs with behaviours. v0's Code list lacks ``kind=pr_review``, the
trigger of its afternoon-merge routine (a reviewed pull request is merged that afternoon), so that routine could
never be proposed; v1 adds it."""
SCOPES_V1 = {spec.name: replace(spec, facts=spec.facts + CARRIED_FACTS[spec.name], triggers=TRIGGERS_V1[spec.name])
             for spec in (SPORTS, HOME, CODE)}
CARRIED_AGE = (1.5, 6.75)
"""Days from an anchor to its follow-up (uniform): about 30% fall within the 72-hour event window."""
CARRIED_NEED = 0.85
"""Probability that a follow-up with an anchor is an opportunity (the latent need ``N``)."""
CARRIED_WINDOW_DAYS = 7
"""An anchor supports a follow-up from the start of this many days before the follow-up's day (the completed days
a rolling trajectory view of :data:`~membudget.envs.proactive.memory.CYCLE_DAYS` records holds)."""
CARRIED_RATES = {"sports": (0.35, 0.5), "home": (0.8, 0.8), "code": (1.2, 0.6)}
"""Per scope: anchors per week that are followed up, and decoy follow-ups per week (no anchor). Chosen on
development streams 0-9 so that the true-positive gain of trajectories keeps the paper's order (Code ≫ Home >
Sports); the analysis streams were not used."""
CODE_TEMPLATES_V1 = {"same_day_review": ("kind=pr_opened", "kind=pr_review", (780, 960)),
                     "morning_triage": ("kind=issue_opened", "response=maintainer", (600, 720)),
                     "afternoon_merge": ("kind=pr_review", "kind=pr_merged", (900, 1020))}
"""Code's routines in v1: a maintainer's review session (13:00-16:00), triage session (10:00-12:00) and merge
session (15:00-17:00). v0's windows span 4 to 7.5 hours (``same_day_review`` 10:00-17:30), wider than any window
the proposer searches (at most 3 hours), so it split each routine into sub-windows whose ends fell before the
routine's: the *deviated* state fired while the response was still due, and most of Code's routine opportunities
(the first event after the routine's window) had no actionable regularity. Chosen on development streams (seeds
0-99), the analysis streams were not used."""
CODE_SKIP_V1 = 0.25
"""Probability that a v1 Code routine does not respond to its trigger (v0: 0.35; Sports' fair-weather rates are
0.2-0.25): at 0.35 a routine's replay confidence stays near the 0.5 activation threshold and its regularity
alternates between active, weakening and dormant."""
SPORTS_SKIP_V1 = {name: 1.6 * p for name, p in SPORTS_SKIP.items()}
"""Sports' fair-weather skip probabilities, 1.6 times v0's (0.4, 0.4, 0.32): a participant misses a due walk or ride
more often, so more decision points inside a routine's window find it pending. Chosen on development streams 0-9,
where v0's rates left the full hierarchy's gain over event + trajectory memory within noise on Sports
(ProactMem: the full hierarchy raises effectiveness in every scope); the analysis streams were not used."""
_GENERATORS_V1 = {**_GENERATORS, "sports": functools.partial(_sports, skip=SPORTS_SKIP_V1),
                  "code": functools.partial(_code, skip=CODE_SKIP_V1, templates=CODE_TEMPLATES_V1)}
DAYTIME = (540, 1200)
"""Anchors and follow-ups of Sports and Home happen between 9:00 and 20:00."""


def check_scope_v1(scope):
    return check_scope(scope, SCOPES_V1)


def _part_bit(spec, tod):
    """Sports' slot or Home's part of day at a time of day (the bit v0's events of that time carry)."""
    if spec.name == "sports":
        names = ("slot=morning", "slot=midday", "slot=afternoon", "slot=evening", "slot=night")
        return spec.bit(names[int(np.searchsorted((660, 840, 1020, 1200), tod, side="right"))])
    names = ("part=night", "part=morning", "part=afternoon", "part=evening")
    return spec.bit(names[0 if tod < 360 or tod >= 1320 else (1 if tod < 720 else (2 if tod < 1080 else 3))])


def _carried_events(rng, spec, a, n_days, rates):
    """The anchors and follow-ups of one stream: rows ``(time, kind, facts, object id, object age, is follow-up,
    need)``. Sports and Home have one entity (−1); Code's entities are the pull requests v0 opened."""
    anchored, decoys = rates
    anchor_bit, follow_bit = (spec.bit(f) for f in CARRIED_FACTS[spec.name])
    end = n_days * MINUTES_PER_DAY
    rows = []
    if spec.name == "code":
        opened = np.flatnonzero(a["kind"] == CODE.kinds.index("pr_opened"))
        comment, push = CODE.kinds.index("issue_comment"), CODE.kinds.index("push")
        comment_bits = spec.bit("kind=issue_comment") | spec.bit("actor=maintainer") | anchor_bit
        push_bits = spec.bit("kind=push") | spec.bit("actor=contributor") | follow_bit
        n_anchor = min(opened.size, rng.poisson(anchored * n_days / 7))
        n_decoy = min(opened.size - n_anchor, rng.poisson(decoys * n_days / 7))
        chosen = rng.permutation(opened)[:n_anchor + n_decoy]
        for k, i in enumerate(chosen.tolist()):
            start = int(a["time"][i])
            obj = int(a["object_id"][i])
            anchor = start + int(rng.uniform(0.1, 2.0) * MINUTES_PER_DAY)
            if k < n_anchor:                                   # a decoy's update follows no request for changes
                rows.append((anchor, comment, comment_bits, obj, anchor - start, False, False))
            follow = anchor + int(rng.uniform(*CARRIED_AGE) * MINUTES_PER_DAY)
            rows.append((follow, push, push_bits, obj, follow - start, True, rng.random() < CARRIED_NEED))
        return [r for r in rows if r[0] < end]
    for _ in range(rng.poisson(anchored * n_days / 7)):
        anchor = int(rng.integers(0, n_days)) * MINUTES_PER_DAY + int(rng.integers(*DAYTIME))
        follow = anchor + int(rng.uniform(*CARRIED_AGE) * MINUTES_PER_DAY)
        follow = follow - follow % MINUTES_PER_DAY + int(np.clip(follow % MINUTES_PER_DAY, *DAYTIME))
        rows.append((anchor, 0, anchor_bit | _part_bit(spec, anchor % MINUTES_PER_DAY), -1, 0, False, False))
        rows.append((follow, 0, follow_bit | _part_bit(spec, follow % MINUTES_PER_DAY), -1, 0, True,
                     rng.random() < CARRIED_NEED))
    for _ in range(rng.poisson(decoys * n_days / 7)):
        follow = int(rng.integers(0, n_days)) * MINUTES_PER_DAY + int(rng.integers(*DAYTIME))
        rows.append((follow, 0, follow_bit | _part_bit(spec, follow % MINUTES_PER_DAY), -1, 0, True,
                     rng.random() < CARRIED_NEED))
    return [r for r in rows if r[0] < end]


def _with_carried(a: dict, rows: list, spec) -> tuple:
    """v0's generator output ``a`` with the carried rows merged in time order (a stable sort: an added event comes
    after v0's events of the same minute); returns the merged arrays and the follow-up / need flags."""
    n0, n1 = a["time"].size, len(rows)
    time, kind, facts, obj, age, follow, need = (np.array(c) for c in zip(*rows)) if rows else [np.zeros(0)] * 7
    values = np.zeros((n1, len(spec.values)), np.float32)
    if spec.name == "code" and n1:                                 # the object's age, as v0's Code events carry it
        values[:, spec.values.index("object_age")] = np.clip(age / (7 * MINUTES_PER_DAY), 0, 1)
    merged = {
        "time": np.concatenate([a["time"], time.astype(np.int64)]),
        "kind": np.concatenate([a["kind"], kind.astype(np.int64)]),
        "facts": np.concatenate([a["facts"], facts.astype(np.int64)]),
        "observed": np.concatenate([a["observed"], np.ones(n1, bool)]),
        "values": np.concatenate([a["values"], values]),
        "object_id": np.concatenate([a["object_id"], obj.astype(np.int64)]),
        "need": np.concatenate([a["need"], np.zeros(n1, bool)]),
    }
    order = np.argsort(merged["time"], kind="stable")
    merged = {k: v[order] for k, v in merged.items()}
    keys = a["a_key"] + [None] * n1
    merged["a_key"] = [keys[i] for i in order.tolist()]
    is_follow = np.concatenate([np.zeros(n0, bool), follow.astype(bool)])[order]
    carried_need = np.concatenate([np.zeros(n0, bool), need.astype(bool)])[order]
    return merged, is_follow, carried_need


def carried_support(stream: Stream, t: int) -> bool:
    """Whether an anchor of follow-up ``t``'s entity happened from the start of the :data:`CARRIED_WINDOW_DAYS`-th
    day before ``t``'s day up to ``t`` (False when ``t`` is not a follow-up). Public: a memory that holds those
    days' events (the event window and the last seven days' trajectories together) can tell."""
    spec = SCOPES_V1[stream.scope]
    anchor_bit, follow_bit = (spec.bit(f) for f in CARRIED_FACTS[stream.scope])
    if not stream.facts[t] & follow_bit:
        return False
    lo = int(np.searchsorted(stream.time, (stream.day(t) - CARRIED_WINDOW_DAYS) * MINUTES_PER_DAY))
    window = slice(lo, t)
    same = (stream.object_id[window] == stream.object_id[t]) & stream.observed[window]
    return bool(np.any(same & ((stream.facts[window] & anchor_bit) != 0)))


def generate_stream_v1(seed=None, *, scope="sports", n_days=None, rng: np.random.Generator | None = None) -> Stream:
    """Draw one ProactiveStream-v1 stream: v0's draws in v0's order, then the carried events from the same
    generator; labels as in v0 on the merged stream, plus the carried opportunities. ``rng`` (the environment's
    ``np_random``) takes precedence over ``seed``."""
    spec = check_scope_v1(scope)
    n_days = DEFAULT_DAYS[scope] if n_days is None else n_days
    n_days = check_int("n_days", n_days, 14, MAX_DAYS)
    rng = np.random.default_rng(seed) if rng is None else rng
    a, routines = _GENERATORS_V1[scope](rng, n_days)
    if scope == "code":                    # a maintainer's response is a comment, not a review (v0: both)
        review = a["kind"] == CODE.kinds.index("pr_review")
        a["facts"] = np.where(review, a["facts"] & ~CODE.bit("response=maintainer"), a["facts"])
    rows = _carried_events(rng, spec, a, n_days, CARRIED_RATES[scope])
    a, is_follow, carried_need = _with_carried(a, rows, spec)
    stream = unlabelled_stream(scope, seed, a, routines)
    _label(stream, a["need"], a["a_key"])
    episode_id = int(stream.episode.max()) + 1 if len(stream) else 0
    for t in np.flatnonzero(is_follow & carried_need).tolist():
        if not carried_support(stream, t):
            continue
        stream.support[t] |= 4
        if not stream.label[t]:
            stream.label[t], stream.episode[t], stream.service[t] = 1, episode_id, 0
            episode_id += 1
    stream.validate(spec)
    return stream


__all__ = ["CARRIED_AGE", "CARRIED_FACTS", "CARRIED_NEED", "CARRIED_RATES", "CARRIED_WINDOW_DAYS", "SCOPES_V1",
           "SPORTS_SKIP_V1", "carried_support", "check_scope_v1", "generate_stream_v1"]

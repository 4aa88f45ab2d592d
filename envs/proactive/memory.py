"""ProactMem's memory hierarchy (ProactMem §3.1–3.2, appendix B.1–B.2) as a deterministic library.

Three layers are built from one :class:`~.schema.Stream`, processed chronologically:

- **bounded event memory** ``S_t`` (eq. 4): the prior events at most ``Δ`` = 72 hours older than ``e_t``, at most
  ``K − 1`` = 99 of them (:func:`event_window`);
- **fact-validated temporal trajectory memory** ``W_t`` (eq. 5): at the end of each local day a summariser turns
  the day's events into :class:`Segment` s with an interval, claimed facts and source citations; a validator keeps
  only segments whose facts are supported by their cited events of that completed day (:func:`fact_consistent`).
  The accepted segments of the current seven-record cycle form ``W_t`` (:class:`DailyRecord`);
- **replay-assessed behavioural regularity memory** ``L_t`` (eq. 6): every seven completed records a proposer
  suggests trigger → behaviour regularities (:func:`propose`), replay over the recorded days counts fulfilled and
  violated days (:func:`replay`) and a candidate becomes *active* at ``n_f >= 3``, confidence ``>= 0.5`` and lift
  ``>= 1.0`` (:func:`assess`); later days update admitted regularities online (:func:`observe`: active →
  weakening → dormant → candidate, B.2).

Retrieval ``R_t`` (eq. 7) matches the admitted regularities against the open day's events and keeps the top three
upcoming, pending or deviated occurrences (:func:`occurrence_state`, :func:`select`).

The two LLM calls of ProactMem (the daily summariser and the weekly proposer) are replaced by deterministic
stand-ins: :func:`summarise_day` segments the day's observed events and injects LLM-like errors (an unsupported
behaviour fact, a citation to another day) at a configurable rate from a seeded generator, so the validator has
something to reject; :func:`propose` enumerates frequent trigger–behaviour pairs of the cycle. Memory construction
never reads reference labels and never depends on an agent's actions, so an environment can precompute every
layer's output for every event once per stream (:func:`memory_trace`), or day by day ahead of the episode
(:meth:`ProactiveMemory.advance`).

Times are absolute minutes since the stream's epoch (a Monday 00:00); a *time of day* (tod) is ``time % 1440``
and day ``d`` has weekday ``d % 7`` (0 = Monday).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple, Sequence

import numba
import numpy as np

from .schema import ALL_DAYS, MINUTES_PER_DAY, WEEKEND, WORKDAYS, ScopeSpec, Stream

EVENT_HORIZON = 72 * 60
"""Δ of eq. 4: event memory keeps prior events at most 72 hours older than the current event."""
EVENT_CAPACITY = 100
"""K of eq. 4: the current event plus at most K − 1 = 99 prior events."""
CYCLE_DAYS = 7
"""Completed daily records per consolidation cycle (empty records count too, B.1)."""
ACTIVATION_MIN_SUPPORT = 3
"""A candidate needs at least this many fulfilled days ``n_f`` to become active."""
ACTIVATION_MIN_CONFIDENCE = 0.5
"""... and at least this replay confidence (eq. 6) ..."""
ACTIVATION_MIN_LIFT = 1.0
"""... and at least this lift (eq. 6)."""
WEAKENING_VIOLATIONS = 2
"""Consecutive violated days that move an active regularity to weakening (B.2)."""
DORMANT_VIOLATIONS = 4
"""Consecutive violated days that move an active or weakening regularity to dormant (B.2)."""
TOP_K = 3
"""Regularities retrieved per event (eq. 7)."""
LIFECYCLE = ("candidate", "active", "weakening", "dormant")
"""Lifecycle states of a regularity; the order of ``active`` before ``weakening`` is the retrieval priority."""
OCCURRENCE = ("deviated", "pending", "upcoming", "fulfilled", "censored")
"""Occurrence states of a matched regularity; the first three are retrievable, in this priority order."""
ELIGIBLE = ("active", "weakening")
"""Lifecycle states that are retrieved and updated online."""
RETRIEVED = OCCURRENCE[:3]
"""Occurrence states that retrieval admits (B.2)."""
_RETRIEVED_RANK = {occurrence: k for k, occurrence in enumerate(RETRIEVED)}
_LIFECYCLE_RANK = {state: k for k, state in enumerate(LIFECYCLE)}
SEGMENT_GAP = 120
"""Minutes between consecutive observed events beyond which the summariser starts a new segment."""
PROPOSAL_REACH = 240
"""Minutes after a trigger claim within which the proposer counts a behaviour claim as following it."""
PROPOSAL_MIN_DAYS = 2
"""Distinct days of a cycle a trigger → behaviour pair needs before the proposer suggests it."""
PROPOSAL_GRID = 10
"""Minutes of the proposer's time-of-day grid."""
PROPOSAL_WIDTHS = (60, 120, 180)
"""Window widths (minutes) the proposer searches for frequent behaviour times."""


def _tod(time: int) -> int:
    return time % MINUTES_PER_DAY


def _any_within(times, lo: int, hi: int) -> bool:
    """Whether the sorted ``times`` hold one in ``[lo, hi]``."""
    i = bisect_left(times, lo)
    return i < len(times) and times[i] <= hi


def event_window(time: np.ndarray, t: int, horizon: int = EVENT_HORIZON, capacity: int = EVENT_CAPACITY) -> int:
    """Bounded event memory of eq. 4: the first index ``lo`` of ``S_t`` = events ``lo .. t − 1``.

    ``S_t = Tail_{K−1}((e_i)_{i<t, 0 <= τ_t − τ_i <= Δ})``: the prior events at most ``horizon`` minutes older than
    event ``t`` (an event exactly ``horizon`` older is kept), of which the ``capacity − 1`` most recent. ``time``
    must be non-decreasing.
    """
    if horizon < 0 or capacity < 1:
        raise ValueError(f"event_window needs horizon >= 0 and capacity >= 1, got {horizon} and {capacity}")
    first_in_horizon = int(np.searchsorted(time, time[t] - horizon, side="left"))
    return max(first_in_horizon, t - (capacity - 1))


def event_windows(time: np.ndarray, horizon: int = EVENT_HORIZON, capacity: int = EVENT_CAPACITY) -> np.ndarray:
    """:func:`event_window` of every event at once."""
    if horizon < 0 or capacity < 1:
        raise ValueError(f"event_window needs horizon >= 0 and capacity >= 1, got {horizon} and {capacity}")
    return np.maximum(np.searchsorted(time, time - horizon, side="left"), np.arange(time.size) - (capacity - 1))


@dataclass(frozen=True)
class Segment:
    """One trajectory segment of a daily record: an interval, the facts ``F(d)`` it claims and its sources ``E(d)``."""

    day: int
    start: int
    """Absolute minute the segment starts."""
    end: int
    """Absolute minute the segment ends."""
    facts: int
    """Bitmask of the claimed facts ``F(d)``."""
    fact_times: tuple
    """``((fact index, absolute minute), ...)`` sorted: every time a claimed fact happened (a fact carried by several
    cited events is claimed at each of their times, so replay sees a later in-window occurrence too)."""
    citations: tuple
    """Indices of the cited source events ``E(d)`` in the stream."""


def summarise_day(stream: Stream, day: int, indices: Sequence[int], spec: ScopeSpec, rng: np.random.Generator,
                  hallucination_rate: float) -> list[Segment]:
    """Deterministic stand-in for the LLM summariser of one completed local day.

    Consecutive *observed* events among ``indices`` (the day's events, in time order) form one segment until an
    event's behaviour facts (``spec.behaviour_ids``) differ from the previous observed event's or the gap between
    them exceeds :data:`SEGMENT_GAP` minutes. A segment claims the union of its events' facts, each at the time of
    every cited event that has it, spans its first to its last event and cites all of them.

    LLM error model, per segment with four draws ``u = rng.random(4)`` (always drawn, so errors at a lower rate are
    a subset of those at a higher one for the same seed): if ``u[0] < hallucination_rate`` the segment claims one
    behaviour fact none of its events has (chosen by ``u[1]``, timed at the segment start); if
    ``u[2] < hallucination_rate / 4`` it also cites an event of an earlier day (chosen by ``u[3]``), an unresolved
    citation. Only earlier events are cited so that the summary of a day never depends on later events.
    """
    return _summarise(stream, [day], [np.asarray(indices, dtype=np.int64)], spec, rng, hallucination_rate)[0][0]


def _summarise(stream: Stream, days: Sequence[int], day_indices: Sequence[np.ndarray], spec: ScopeSpec,
               rng: np.random.Generator, hallucination_rate: float) -> list[tuple[list[Segment], list[bool], dict]]:
    """:func:`summarise_day` for several days at once (in order; their segments' draws come from ``rng`` in the
    same order), vectorised over their events. Returns per day the segments, per segment whether an error was
    injected (a segment without one claims exactly its cited events' facts at their times), and the claims of the
    segments without one as :attr:`DailyRecord.claims` groups them (``{fact: sorted times}``)."""
    idx = np.concatenate([np.asarray(i, np.int64) for i in day_indices]) if len(day_indices) else np.zeros(0, np.int64)
    position = np.repeat(np.arange(len(day_indices)), [len(i) for i in day_indices])
    keep = stream.observed[idx]
    idx, position = idx[keep], position[keep]
    time, facts = stream.time[idx], stream.facts[idx]
    behaviour_mask = sum(1 << b for b in spec.behaviour_ids)
    new = np.ones(idx.size, bool)                          # an observed event that opens a segment
    new[1:] = ((position[1:] != position[:-1]) | (((facts[1:] ^ facts[:-1]) & behaviour_mask) != 0)
               | (time[1:] - time[:-1] > SEGMENT_GAP))
    first = np.flatnonzero(new)
    last = np.append(first[1:], idx.size) - 1
    segment_facts = np.bitwise_or.reduceat(facts, first).tolist() if first.size else []
    # every (fact, time) claim of each segment, sorted and without repeats
    event, fact = np.nonzero((facts[:, None] >> np.arange(len(spec.facts))) & 1)
    segment_of = np.cumsum(new) - 1
    span = int(time.max()) + 1 if time.size else 1          # claims sorted by (segment, fact, time) as one key
    claims = np.unique((segment_of[event] * len(spec.facts) + fact) * span + time[event])
    claim_segment, claim_fact = np.divmod(claims // span, len(spec.facts))
    claim_time = claims % span
    claim_bounds = np.searchsorted(claim_segment, np.arange(first.size + 1)).tolist()
    claim_pairs = list(zip(claim_fact.tolist(), claim_time.tolist()))
    u = rng.random((first.size, 4)).tolist()
    behaviours = spec.behaviour_ids
    out = [([], [], {}) for _ in days]
    earlier_events = [int(np.min(i)) if len(i) else 0 for i in day_indices]
    idx_list, time_list, position_list = idx.tolist(), time.tolist(), position[first].tolist()
    for k, (lo, hi) in enumerate(zip(first.tolist(), last.tolist())):
        d = position_list[k]
        seg_facts, fact_times = segment_facts[k], claim_pairs[claim_bounds[k]:claim_bounds[k + 1]]
        start, end, citations = time_list[lo], time_list[hi], tuple(idx_list[lo:hi + 1])
        injected = False
        if u[k][0] < hallucination_rate:
            absent = [b for b in behaviours if not seg_facts >> b & 1]
            if absent:
                invented = absent[int(u[k][1] * len(absent))]
                seg_facts |= 1 << invented
                fact_times = sorted(fact_times + [(invented, start)])
                injected = True
        if u[k][2] < hallucination_rate / 4 and earlier_events[d]:
            citations += (int(u[k][3] * earlier_events[d]),)
            injected = True
        out[d][0].append(Segment(days[d], start, end, seg_facts, tuple(fact_times), citations))
        out[d][1].append(injected)
    natural = ~np.array([bad for _, flags, _ in out for bad in flags], bool)[claim_segment]
    day_of, fact_of, time_of = position[first][claim_segment][natural], claim_fact[natural], claim_time[natural]
    order = np.lexsort((time_of, fact_of, day_of))
    day_of, fact_of, time_of = day_of[order], fact_of[order], time_of[order].tolist()
    group = np.flatnonzero(np.diff(day_of * len(spec.facts) + fact_of, prepend=-1)).tolist() + [len(time_of)]
    day_list, fact_list = day_of.tolist(), fact_of.tolist()
    for a, b in zip(group[:-1], group[1:]):
        out[day_list[a]][2][fact_list[a]] = tuple(time_of[a:b])
    return out


def fact_consistent(segment: Segment, stream: Stream, day_indices: Sequence[int]) -> bool:
    """Source consistency of eq. 5: may the segment enter trajectory memory?

    Accepts when the citations are non-empty, resolved (valid stream indices) and all among ``day_indices`` (the
    events of the segment's completed day, ``E(d) ⊆ E_completed day``); the interval is exactly the span of the
    cited events within the segment's day; every claimed fact is supported, ``F(d) ⊆ ∪_{e∈E(d)} F(e)``, and each
    ``(fact, time)`` claim is the time of a cited event carrying that fact.
    """
    citations, n = segment.citations, len(stream)
    if not citations or not all(0 <= c < n and c in day_indices for c in citations):
        return False
    cited = list(citations)
    times = stream.time[cited].tolist()
    support, facts_at = 0, {}                       # facts_at: time -> facts of the cited events at that time
    for time, facts in zip(times, stream.facts[cited].tolist()):
        support |= facts
        facts_at[time] = facts_at.get(time, 0) | facts
    if segment.facts & ~support:
        return False
    if (segment.start, segment.end) != (min(times), max(times)) or segment.start // MINUTES_PER_DAY != segment.day:
        return False
    timed = 0
    for fact, time in segment.fact_times:
        if not facts_at.get(time, 0) >> fact & 1:
            return False
        timed |= 1 << fact
    return timed == segment.facts


@dataclass
class DailyRecord:
    """One completed local day of trajectory memory (empty and unobservable days produce a record too, B.1)."""

    day: int
    segments: list
    """The accepted segments (all of them when validation is off)."""
    rejected: int
    """Segments the validator dropped."""
    gaps: tuple
    """Sorted absolute times of the day's unobserved events (censoring evidence for replay)."""
    observed_times: tuple
    """Sorted absolute times of the day's observed events (observability evidence for the base rate)."""

    def occurrences(self, fact: int) -> tuple:
        """Sorted absolute times at which the accepted segments claim ``fact`` on this day."""
        return self.claims.get(fact, ())

    @cached_property
    def claims(self) -> dict:
        """``{fact: sorted claim times}``, built once: replay, proposals, online updates and the environment's
        features all read the same record many times (a record does not change once built)."""
        claims = {}
        for seg in self.segments:
            for f, time in seg.fact_times:
                claims.setdefault(f, []).append(time)
        return {f: tuple(sorted(times)) for f, times in claims.items()}

    @cached_property
    def replay_cache(self) -> dict:
        """:func:`replay`'s counts of this day per ``(trigger, behaviour, start, end)`` on an applicable weekday:
        every weekly consolidation replays each candidate over the last four cycles' records again, mostly with an
        unchanged window."""
        return {}


@dataclass
class Regularity:
    """A conditional behavioural regularity: on days in ``weekdays``, after the trigger fact ``g`` the behaviour
    fact ``p`` follows within the time-of-day window ``[start, end]``."""

    rid: int
    trigger: int
    behaviour: int
    start: int
    """First minute of day of the behaviour window."""
    end: int
    """Last minute of day of the behaviour window (a trigger counts only at or before it)."""
    weekdays: int
    """Bit ``w`` set: applies on weekday ``w`` (0 = Monday)."""
    sources: tuple
    """Days of the daily records that supported the proposal(s)."""
    n_f: int = 0
    """Fulfilled days: from replay, then online after admission."""
    n_v: int = 0
    """Violated days: from replay, then online after admission."""
    base: float = 0.0
    """Base rate of the behaviour in the window over observable applicable days (eq. 6), from the last replay."""
    state: str = "candidate"
    consecutive_violations: int = 0
    admitted: bool = False

    @property
    def confidence(self) -> float:
        """Replay confidence ``n_f / (n_f + n_v)`` (eq. 6, zero without evidence) until admission; afterwards the
        support ratio smoothed with one initial success and failure, ``(n_f + 1) / (n_f + n_v + 2)`` (B.2)."""
        if self.admitted:
            return (self.n_f + 1) / (self.n_f + self.n_v + 2)
        return self.n_f / (self.n_f + self.n_v) if self.n_f + self.n_v else 0.0

    @property
    def lift(self) -> float:
        """``confidence / base`` (eq. 6); zero when the base rate is zero."""
        return self.confidence / self.base if self.base else 0.0


def day_outcome(reg: Regularity, record: DailyRecord) -> str:
    """Replay outcome of one recorded day for a regularity (eq. 6, B.1).

    ``inapplicable``: the weekday is not in the mask. ``untriggered``: no trigger claim at a time of day ``<= end``.
    Otherwise, with ``τ_g`` the first such trigger claim: ``fulfilled`` when the behaviour is claimed at
    ``τ_p >= τ_g`` with time of day in ``[start, end]``; ``censored`` when an unobserved event lies between ``τ_g``
    and the window end (the behaviour may have happened unseen); ``violated`` otherwise.
    """
    if not reg.weekdays >> (record.day % 7) & 1:
        return "inapplicable"
    day_start = record.day * MINUTES_PER_DAY
    window_start, window_end = day_start + reg.start, day_start + reg.end
    claims = record.claims
    triggers = claims.get(reg.trigger, ())              # sorted: the first is the earliest
    if not triggers or triggers[0] > window_end:
        return "untriggered"
    trigger = triggers[0]
    if _any_within(claims.get(reg.behaviour, ()), max(trigger, window_start), window_end):
        return "fulfilled"
    if _any_within(record.gaps, trigger, window_end):
        return "censored"
    return "violated"


def replay(reg: Regularity, records: Sequence[DailyRecord]) -> tuple[int, int, float]:
    """Historical replay of eq. 6 over ``records``: ``(n_f, n_v, base)``.

    Each date counts at most once (its first record). ``base`` is the share of observable applicable days —
    triggered or not; observable = at least one observed event and no unobserved one within the window — on which
    the behaviour is claimed within the window; zero without observable days.
    """
    n_f = n_v = observable = with_behaviour = 0
    seen = set()
    weekdays, start, end = reg.weekdays, reg.start, reg.end
    key = (reg.trigger, reg.behaviour, start, end)
    for record in records:
        day = record.day
        if day in seen:
            continue
        seen.add(day)
        if not weekdays >> (day % 7) & 1:                # inapplicable
            continue
        counts = record.replay_cache.get(key)
        if counts is None:
            outcome = day_outcome(reg, record)
            lo = day * MINUTES_PER_DAY + start
            hi = lo + end - start
            seen_all = _any_within(record.observed_times, lo, hi) and not _any_within(record.gaps, lo, hi)
            counts = record.replay_cache[key] = (outcome == "fulfilled", outcome == "violated", seen_all,
                                              seen_all and _any_within(record.claims.get(reg.behaviour, ()), lo, hi))
        n_f += counts[0]
        n_v += counts[1]
        observable += counts[2]
        with_behaviour += counts[3]
    return n_f, n_v, with_behaviour / observable if observable else 0.0


def admit(reg: Regularity, n_f: int, n_v: int, base: float) -> None:
    """Make a regularity active with the given evidence (replay counts, or none without the replay gate)."""
    reg.n_f, reg.n_v, reg.base = n_f, n_v, base
    reg.state, reg.admitted, reg.consecutive_violations = "active", True, 0


def assess(reg: Regularity, records: Sequence[DailyRecord]) -> bool:
    """Replay gate: replay a candidate over ``records``, store its counts and base rate, and admit it (→ active)
    when ``n_f >= 3``, confidence ``>= 0.5`` and lift ``>= 1.0``. Returns whether it was admitted."""
    reg.n_f, reg.n_v, reg.base = replay(reg, records)
    if (reg.n_f >= ACTIVATION_MIN_SUPPORT and reg.confidence >= ACTIVATION_MIN_CONFIDENCE
            and reg.lift >= ACTIVATION_MIN_LIFT):
        admit(reg, reg.n_f, reg.n_v, reg.base)
        return True
    return False


def observe(reg: Regularity, record: DailyRecord) -> str:
    """Online lifecycle update of B.2 with one newly completed record; returns the day's outcome.

    Only admitted regularities (active or weakening) learn online; candidates wait for replay and dormant ones for
    readmission. Fulfilled: ``n_f + 1``, the violation streak resets and a weakening regularity becomes active
    again at confidence ``>= 0.5``. Violated: ``n_v + 1``; a streak of :data:`WEAKENING_VIOLATIONS` makes it
    weakening, one of :data:`DORMANT_VIOLATIONS` dormant. Censored, untriggered and inapplicable days change nothing.
    """
    outcome = day_outcome(reg, record)
    if reg.state not in ELIGIBLE:
        return outcome
    if outcome == "fulfilled":
        reg.n_f += 1
        reg.consecutive_violations = 0
        if reg.state == "weakening" and reg.confidence >= ACTIVATION_MIN_CONFIDENCE:
            reg.state = "active"
    elif outcome == "violated":
        reg.n_v += 1
        reg.consecutive_violations += 1
        if reg.consecutive_violations >= DORMANT_VIOLATIONS:
            reg.state = "dormant"
        elif reg.consecutive_violations >= WEAKENING_VIOLATIONS:
            reg.state = "weakening"
    return outcome


class Proposal(NamedTuple):
    """A proposed regularity: ``(trigger, behaviour, start, end, weekdays, sources)``."""

    trigger: int
    behaviour: int
    start: int
    end: int
    weekdays: int
    sources: tuple


def propose(records: Sequence[DailyRecord], spec: ScopeSpec, min_days: int = PROPOSAL_MIN_DAYS) -> list[Proposal]:
    """Deterministic stand-in for the LLM proposer: regularities from frequent trigger → behaviour pairs.

    For each trigger ``g`` in ``spec.trigger_ids`` and behaviour ``p != g`` in ``spec.behaviour_ids``, the
    candidate behaviour times are the ``p`` claims at or after a claim of ``g`` and at most
    :data:`PROPOSAL_REACH` minutes later. The proposer looks for the time-of-day windows (widths in
    :data:`PROPOSAL_WIDTHS`, on a 10-minute grid) in which such claims fall on the most distinct days — the
    best-supported first, the narrowest on ties — and proposes each window whose claims span at least ``min_days``
    days, removing its claims before looking for the next. A proposal's window spans its behaviour times widened
    by ``spec.proposal_pad`` on each side (clipped to the day); its weekday mask is ``WORKDAYS`` when all its days
    are Monday–Friday, ``WEEKEND`` when all are Saturday/Sunday and all days otherwise; its sources are its days.
    """
    if min_days < 1:
        raise ValueError(f"min_days must be at least 1, got {min_days}")
    proposals = []
    n_bins = MINUTES_PER_DAY // PROPOSAL_GRID
    claims = [record.claims for record in records]
    behaviours = spec.behaviour_ids
    for g in spec.trigger_ids:
        for p in behaviours:
            if g == p:
                continue
            points = []                                   # (record position, time of day)
            for k, record_claims in enumerate(claims):
                triggers = record_claims.get(g)
                if triggers:                              # a trigger claim in [time − reach, time]
                    points += [(k, _tod(time)) for time in record_claims.get(p, ())
                               if _any_within(triggers, time - PROPOSAL_REACH, time)]
            while len({k for k, _ in points}) >= min_days:
                n_days, lo, width = _best_window(np.array(points, np.int64), len(records), n_bins,
                                                 np.array(PROPOSAL_WIDTHS, np.int64), PROPOSAL_GRID)
                if n_days < min_days:
                    break
                inside = [(k, tod) for k, tod in points if lo <= tod < lo + width]
                points = [pt for pt in points if not lo <= pt[1] < lo + width]
                days = tuple(sorted({records[k].day for k, _ in inside}))
                weekdays = {day % 7 for day in days}
                mask = WORKDAYS if max(weekdays) < 5 else WEEKEND if min(weekdays) >= 5 else ALL_DAYS
                tods = [tod for _, tod in inside]
                proposals.append(Proposal(g, p, max(0, min(tods) - spec.proposal_pad),
                                          min(MINUTES_PER_DAY - 1, max(tods) + spec.proposal_pad), mask, days))
    return proposals


@numba.njit(cache=True)
def _best_window(points, n_records, n_bins, widths, grid):
    """The proposer's window search over ``points`` (record position, time of day): for each width, the first
    grid-aligned window ``[lo, lo + width)`` holding points of the most records; the best-supported over widths,
    the narrowest on ties. Returns ``(records, lo, width)``."""
    cum = np.zeros((n_records, n_bins + 1), np.int64)        # cum[k, j]: record k's points in bins < j
    for i in range(points.shape[0]):
        cum[points[i, 0], points[i, 1] // grid + 1] = 1
    for k in range(n_records):
        for j in range(1, n_bins + 1):
            cum[k, j] += cum[k, j - 1]
    best, best_lo, best_width = -1, 0, 0
    for width in widths:
        k_bins = width // grid
        for j in range(n_bins + 1 - k_bins):
            support = 0
            for k in range(n_records):
                support += cum[k, j + k_bins] - cum[k, j] > 0
            if support > best:
                best, best_lo, best_width = support, j * grid, width
    return best, best_lo, best_width


def merge_proposal(regularities: list[Regularity], proposal: Proposal) -> Regularity:
    """Add a proposal to the store without duplicating: an existing regularity with the same trigger, behaviour
    and weekday mask and an overlapping window absorbs it (it takes the newer window — the latest cycle's evidence,
    so a drifting routine is followed instead of widened without bound — and the sources are united); otherwise a
    new candidate with the next id is appended. Returns the regularity concerned."""
    for reg in regularities:
        if ((reg.trigger, reg.behaviour, reg.weekdays) == (proposal.trigger, proposal.behaviour, proposal.weekdays)
                and reg.start <= proposal.end and proposal.start <= reg.end):
            reg.start, reg.end = proposal.start, proposal.end
            reg.sources = tuple(sorted(set(reg.sources) | set(proposal.sources)))
            return reg
    reg = Regularity(len(regularities), *proposal)
    regularities.append(reg)
    return reg


@dataclass(frozen=True)
class Match:
    """One retrieved regularity at one event (a snapshot; the regularity itself keeps changing)."""

    rid: int
    trigger: int
    behaviour: int
    start: int
    end: int
    confidence: float
    lift: float
    n_f: int
    n_v: int
    state: str
    """``active`` or ``weakening``."""
    occurrence: str
    """``deviated``, ``pending`` or ``upcoming``."""
    distance: int
    """Minutes from the current time of day to the window (0 inside it, else to the nearest edge)."""


def occurrence_state(reg: Regularity, now_tod: int, today_claims: Sequence[tuple], spec: ScopeSpec) -> str | None:
    """Current matching of §3.2 / B.2 for one regularity at time of day ``now_tod``.

    ``today_claims``: the open day's events so far, the current one included, in time order, as
    ``(time of day, facts bitmask, observed)``. The caller checks the weekday. Returns ``None`` (not applicable)
    outside ``[start − spec.lead, end + spec.grace]``. With ``τ_g`` the first observed trigger claim at a time of
    day ``<= end``: the behaviour claimed in ``[max(τ_g, start), now]`` → ``fulfilled``; else an unobserved event
    since ``τ_g`` → ``censored``; else past ``end`` → ``deviated``; else ``pending``. Without a trigger:
    ``upcoming`` before ``end``, else ``None``.
    """
    if not reg.start - spec.lead <= now_tod <= reg.end + spec.grace:
        return None
    trigger_bit, behaviour_bit = 1 << reg.trigger, 1 << reg.behaviour
    trigger = next((tod for tod, facts, observed in today_claims
                    if observed and facts & trigger_bit and tod <= reg.end), None)
    last_behaviour = max((tod for tod, facts, observed in today_claims
                          if observed and facts & behaviour_bit and tod <= now_tod), default=-1)
    last_gap = max((tod for tod, _, observed in today_claims if not observed), default=-1)
    return _occurrence(reg, now_tod, trigger, last_behaviour, last_gap, spec)


def _occurrence(reg: Regularity, now_tod: int, trigger: int | None, last_behaviour: int, last_gap: int,
                spec: ScopeSpec) -> str | None:
    """:func:`occurrence_state` from the open day's summary: ``trigger`` (``τ_g`` or None), the latest time of day
    ``<= now`` of an observed behaviour claim and the latest of an unobserved event (−1: none)."""
    if not reg.start - spec.lead <= now_tod <= reg.end + spec.grace:
        return None
    if trigger is None:
        return "upcoming" if now_tod < reg.end else None
    if last_behaviour >= max(trigger, reg.start):
        return "fulfilled"
    if last_gap >= trigger:
        return "censored"
    return "deviated" if now_tod > reg.end else "pending"


def select(regularities: Sequence[Regularity], now: int, today_claims: Sequence[tuple], spec: ScopeSpec) -> list[Match]:
    """Regularity retrieval ``R_t`` of eq. 7 at absolute time ``now``.

    Eligible: active or weakening, weekday in the mask, occurrence deviated, pending or upcoming (fulfilled,
    censored and inapplicable occurrences are excluded). Ranked by occurrence (deviated, pending, upcoming),
    lifecycle (active before weakening), confidence (descending), distance to the window (ascending) and id; the
    top :data:`TOP_K`.
    """
    now_tod, weekday = _tod(now), (now // MINUTES_PER_DAY) % 7
    return _top(((reg, occurrence_state(reg, now_tod, today_claims, spec)) for reg in regularities
                 if reg.state in ELIGIBLE and reg.weekdays >> weekday & 1), now_tod)


def _top(scored, now_tod: int) -> list[Match]:
    """The ranking of :func:`select` over ``(regularity, occurrence state)`` pairs (a :class:`Match` is made for the
    top :data:`TOP_K` only; the ranking keys end in the regularity's id, unique per event, so they fix the order)."""
    ranked = []
    for reg, occurrence in scored:
        if occurrence not in _RETRIEVED_RANK:
            continue
        distance = max(reg.start - now_tod, now_tod - reg.end, 0)
        ranked.append((_RETRIEVED_RANK[occurrence], _LIFECYCLE_RANK[reg.state], -reg.confidence, distance, reg.rid,
                       reg, occurrence))
    ranked.sort()
    return [Match(reg.rid, reg.trigger, reg.behaviour, reg.start, reg.end, -negative_confidence, reg.lift, reg.n_f,
                  reg.n_v, reg.state, occurrence, distance)
            for _, _, negative_confidence, distance, _, reg, occurrence in ranked[:TOP_K]]


@dataclass
class MemoryTrace:
    """What each memory layer returns at every event ``t`` of a stream (the state before committing ``t``)."""

    event_lo: np.ndarray
    """int64 ``(n,)``: ``S_t`` = events ``event_lo[t] .. t − 1`` (eq. 4)."""
    cycle_records: list
    """``W_t``: the accepted daily records of the current cycle, one tuple shared by all events between changes."""
    matches: list
    """``R_t``: tuple of at most :data:`TOP_K` :class:`Match` es."""
    n_eligible: np.ndarray
    """int64 ``(n,)``: active plus weakening regularities at ``t``."""
    n_segments: np.ndarray
    """int64 ``(n,)``: accepted segments in ``W_t``."""
    records: list = field(default_factory=list)
    """Every completed :class:`DailyRecord` (the stream's last, open day is never completed)."""
    regularities: list = field(default_factory=list)
    """The regularity store at the end of the stream."""
    rejected: int = 0
    """Segments the validator rejected over the stream."""


class ProactiveMemory:
    """ProactMem's memory for one stream, built chronologically (ProactMem §3.1–3.2, B.1–B.2).

    Records start at the day of the stream's first event. For each event ``t`` (:meth:`trace`): when ``t`` opens a
    later local day, every completed day since the last record — empty ones included — is summarised into a :class:`DailyRecord` (one generator,
    ``np.random.default_rng(seed)``, for all days in order), its segments validated with :func:`fact_consistent`
    (``validate=True``; rejected ones are dropped and counted) or kept unchecked (``validate=False``); the record
    updates the admitted regularities online (:func:`observe`). Every :data:`CYCLE_DAYS` records, weekly
    consolidation returns dormant regularities to candidate, merges the cycle's proposals into the store
    (:func:`propose`, :func:`merge_proposal`), replays every candidate over the last ``replay_horizon_days``
    records (:func:`assess`; the horizon is what lets a dormant regularity be re-tested on recent behaviour
    rather than on the days that made it dormant) and resets the trajectory view ``W_t``. Then the layers are read
    for ``t``: ``S_t`` (:func:`event_window`), ``W_t`` and ``R_t`` (:func:`select` on the open day's events with
    ``t`` itself visible). ``t`` then stays in the open-day buffer.

    ``replay_gate=False`` is the "w/o replay gate" ablation: after every completed day the records of the cycle so
    far are proposed from and every proposal whose regularity is a candidate becomes active at once, without
    replay or thresholds (no evidence: ``n_f = n_v = 0``). Proposals are still merged and admitted regularities
    still follow the online lifecycle; weekly consolidation then only returns dormant ones to candidate and resets
    ``W_t``.

    ``rolling_view=True`` (ProactiveStream-v1) makes ``W_t`` the accepted records of the last :data:`CYCLE_DAYS`
    completed days instead of the current cycle's, so that a completed day's trajectories stay in view for a week
    whatever the consolidation phase; consolidation and replay are unchanged.
    """

    def __init__(self, stream: Stream, spec: ScopeSpec, *, validate: bool = True, replay_gate: bool = True,
                 hallucination_rate: float = 0.1, replay_horizon_days: int = 28, seed: int = 0,
                 rolling_view: bool = False):
        if stream.scope != spec.name:
            raise ValueError(f"stream {stream.stream_id} belongs to scope {stream.scope!r}, not {spec.name!r}")
        stream.validate(spec)
        if not 0.0 <= hallucination_rate <= 1.0:
            raise ValueError(f"hallucination_rate must lie in [0, 1], got {hallucination_rate}")
        if int(replay_horizon_days) != replay_horizon_days or replay_horizon_days < CYCLE_DAYS:
            raise ValueError(f"replay_horizon_days must be an integer >= {CYCLE_DAYS} (one cycle), "
                             f"got {replay_horizon_days}")
        self.stream, self.spec = stream, spec
        self.validate, self.replay_gate = bool(validate), bool(replay_gate)
        self.hallucination_rate = float(hallucination_rate)
        self.replay_horizon_days = int(replay_horizon_days)
        self.rolling_view = bool(rolling_view)
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._records, self._cycle, self._regularities = [], [], []
        self._rejected = 0
        self._refresh_views()
        self._trace, self._ready = None, 0

    def trace(self) -> MemoryTrace:
        """Run the whole stream once and return the per-event layer outputs (cached: later calls return it)."""
        return self.advance(len(self.stream))

    def advance(self, t: int) -> MemoryTrace:
        """Build the trace day by day until it covers event ``t`` (or the whole stream) and return it: the layer
        outputs of events ``0 .. ready − 1`` (:attr:`ready`) are final, the rest not yet filled in. A consumer that
        reads the events in order (the environment) pays for the days as it reaches them; the result is the same
        object, with the same contents, as building it at once."""
        if self._trace is None:
            self._start()
        start = self._ready
        while self._ready <= t and self._d < len(self._day_bounds) - 1:
            self._next_day()
        trace = self._trace
        trace.n_eligible[start:self._ready] = self._n_eligible[start:]
        trace.n_segments[start:self._ready] = self._n_segments[start:]
        return trace

    @property
    def ready(self) -> int:
        """Events whose layer outputs :meth:`advance` has filled in."""
        return self._ready

    def _start(self) -> None:
        """The empty trace, the summaries of every completed day and the per-event state for matching."""
        stream, spec = self.stream, self.spec
        n = len(stream)
        trace = self._trace = MemoryTrace(np.empty(n, np.int64), [], [], np.empty(n, np.int64),
                                          np.empty(n, np.int64), self._records, self._regularities)
        times = self._times = stream.time.tolist()
        self._observed = stream.observed.tolist()
        trace.event_lo[:] = event_windows(stream.time)
        # records start at the first event's day; every day before the last, open one is completed (empty ones too,
        # each when the next day opens); their summaries are drawn in day order, in batches as the days complete
        self._first_day = times[0] // MINUTES_PER_DAY if n else 0
        n_days = (times[-1] // MINUTES_PER_DAY if n else 0) - self._first_day
        bounds = np.searchsorted(stream.time, np.arange(self._first_day, self._first_day + n_days + 1)
                                 * MINUTES_PER_DAY)
        self._summaries = []
        # the open day's state for matching (what select reads from today_claims; times are sorted): per event, the
        # time of day of the latest observed claim of each behaviour and of the latest unobserved event so far that
        # day (−1: none), and per fact the first observed event claiming it each day (:meth:`_first_of_day`)
        tod_all = stream.time % MINUTES_PER_DAY
        day_start = stream.time - tod_all

        def latest(mask):
            last = np.maximum.accumulate(np.where(mask, stream.time, -1))
            return np.where(last >= day_start, last - day_start, -1).tolist()

        self._last_behaviour = {b: latest(stream.observed & (stream.facts >> b & 1 == 1)) for b in spec.behaviour_ids}
        self._last_gap = latest(~stream.observed)
        self._first_claim = {}
        self._tod_all = tod_all.tolist()
        self._day_bounds = bounds.tolist() + [n]
        self._d, self._n_eligible, self._n_segments = 0, [], []

    def _first_of_day(self, fact: int, day: int) -> int:
        """The first observed event of ``day`` claiming ``fact`` (−1: none)."""
        if fact not in self._first_claim:
            stream = self.stream
            hits = np.flatnonzero(stream.observed & (stream.facts >> fact & 1 == 1))
            days_hit, first = np.unique(stream.time[hits] // MINUTES_PER_DAY, return_index=True)
            self._first_claim[fact] = dict(zip(days_hit.tolist(), hits[first].tolist()))
        return self._first_claim[fact].get(day, -1)

    def _next_day(self) -> None:
        """Complete the previous day, then fill in the trace's entries of the next day's events."""
        spec, trace, tod_all, day_bounds, d = self.spec, self._trace, self._tod_all, self._day_bounds, self._d
        n = len(tod_all)
        lo, hi = day_bounds[d], day_bounds[d + 1]
        self._d += 1
        if d:
            self._complete_day(self._first_day + d - 1, range(day_bounds[d - 1], lo))
        if lo == hi:
            return
        tods = tod_all[lo:hi]
        # each applicable eligible regularity over the events inside its matching window
        scored = [[] for _ in tods]
        for reg in self._eligible:
            if not reg.weekdays >> ((self._first_day + d) % 7) & 1:
                continue
            first = lo + bisect_left(tods, reg.start - spec.lead)
            last = lo + bisect_right(tods, reg.end + spec.grace)
            if first == last:
                continue
            trigger_at = self._first_of_day(reg.trigger, self._first_day + d)
            if trigger_at < 0 or tod_all[trigger_at] > reg.end:      # τ_g: the first claim, if by the end
                trigger_at = n
            last_behaviour, last_gap = self._last_behaviour[reg.behaviour], self._last_gap
            for i in range(first, last):
                occurrence = _occurrence(reg, tod_all[i], tod_all[trigger_at] if trigger_at <= i else None,
                                         last_behaviour[i], last_gap[i], spec)
                if occurrence in RETRIEVED:
                    scored[i - lo].append((reg, occurrence))
        trace.matches.extend(tuple(_top(pairs, tod)) if pairs else () for pairs, tod in zip(scored, tods))
        trace.cycle_records.extend([self._cycle_view] * (hi - lo))
        self._n_eligible += [len(self._eligible)] * (hi - lo)
        self._n_segments += [self._cycle_segments] * (hi - lo)
        trace.rejected = self._rejected
        self._ready = hi

    def _summarise_through(self, k: int) -> None:
        """Draw the summaries of completed days up to position ``k``, together with as many again as are drawn
        (at least a cycle): a few vectorised batches per stream, and a reset pays only for its first days. The
        draws come from one generator in day order, so the summaries do not depend on the batches."""
        done, bounds = len(self._summaries), self._day_bounds
        stop = min(len(bounds) - 2, max(k + 1, 2 * done, CYCLE_DAYS))
        day_indices = [np.arange(lo, hi) for lo, hi in zip(bounds[done:stop], bounds[done + 1:stop + 1])]
        self._summaries += _summarise(self.stream, range(self._first_day + done, self._first_day + stop),
                                      day_indices, self.spec, self._rng, self.hallucination_rate)

    def _complete_day(self, day: int, indices: range) -> None:
        stream = self.stream
        if day - self._first_day >= len(self._summaries):
            self._summarise_through(day - self._first_day)
        segments, injected, claims = self._summaries[day - self._first_day]
        # a segment without an injected error passes the validator by construction: only the others are checked
        accepted = ([s for s, bad in zip(segments, injected) if not bad or fact_consistent(s, stream, indices)]
                    if self.validate else segments)
        self._rejected += len(segments) - len(accepted)
        times, observed = self._times[indices.start:indices.stop], self._observed[indices.start:indices.stop]
        record = DailyRecord(day, accepted, len(segments) - len(accepted),
                             tuple([t for t, seen in zip(times, observed) if not seen]),
                             tuple([t for t, seen in zip(times, observed) if seen]))
        if len(accepted) == injected.count(False):      # exactly the segments without an injected error:
            record.__dict__["claims"] = claims          # their claims, grouped by the summary pass
        self._records.append(record)
        self._cycle.append(record)
        for reg in self._eligible:
            observe(reg, record)
        if not self.replay_gate:
            for proposal in propose(self._cycle, self.spec):
                reg = merge_proposal(self._regularities, proposal)
                if reg.state == "candidate":
                    admit(reg, 0, 0, 0.0)
        if len(self._cycle) == CYCLE_DAYS:
            self._consolidate()
        self._refresh_views()

    def _consolidate(self) -> None:
        for reg in self._regularities:
            if reg.state == "dormant":
                reg.state, reg.admitted = "candidate", False
        if self.replay_gate:
            for proposal in propose(self._cycle, self.spec):
                merge_proposal(self._regularities, proposal)
            horizon = self._records[-self.replay_horizon_days:]
            for reg in self._regularities:
                if reg.state == "candidate":
                    assess(reg, horizon)
        self._cycle = []

    def _refresh_views(self) -> None:
        """Per-day views shared by every event until the next completed day."""
        self._cycle_view = tuple(self._records[-CYCLE_DAYS:] if self.rolling_view else self._cycle)
        self._cycle_segments = sum(len(record.segments) for record in self._cycle_view)
        self._eligible = [reg for reg in self._regularities if reg.state in ELIGIBLE]


def memory_trace(stream: Stream, spec: ScopeSpec, **kwargs) -> MemoryTrace:
    """``ProactiveMemory(stream, spec, **kwargs).trace()``."""
    return ProactiveMemory(stream, spec, **kwargs).trace()

"""Stream generators of ``ProactiveStream-v0`` (ProactMem, §4 and appendix A) and their reference labels.

No external data: each scope has a generative model shaped after the paper's source (HeartSteps for Sports, CASAS
for Home, GH Archive for Code). A stream is driven by latent **routines** (:class:`~.schema.Routine`: a trigger
fact, an expected behaviour within a time-of-day window, weekday restrictions, a skip probability and a span of days
— routines start and stop, which is the drift the regularity lifecycle has to follow) and latent **needs** (whether
an event that shows current evidence really is an opportunity). Everything is drawn from one generator, so a stream
is a deterministic function of its seed.

**Reference labels** follow ProactMem eq. 9, ``y_t = 1 ⟺ (A(e_t) ∨ B(e_t, H_<t)) ∧ N_t``:

- *A — the current event supports it*: the scope's public :func:`evidence` predicate holds and the latent need is
  present (Sports: a sedentary available moment in fair weather; Home: a second consecutive motionless daytime
  segment at home; Code: a failing CI run on the default branch, or a bug report with reproduction steps).
- *B — history supports it*: a routine in force has been triggered today and its behaviour has not happened (up to
  and including the current event) — Sports suggests the usual walk at the decision point inside the routine's
  window (``pending``), Home and Code check in at the first event after the window closed without it (``deviated``,
  within the scope's grace: 30 minutes in ProactMem, widened to the event spacing in Home (60) and Code (180), see
  :attr:`~.schema.ScopeSpec.grace`) — and the current event is feasible (:func:`feasible`).
- *N — novelty*: only the first actionable event of an opportunity episode is labelled; later events of the same
  episode (``Stream.episode``) are covered and labelled *abstain*. A-episodes: one per day (Sports), one per
  motionless period (Home), a run of failing CI until a green one, or one issue (Code). B-episodes: one per
  routine occurrence.

Streams are fixed whatever the agent does (offline replay, as in the paper): an intervention does not change later
events.
"""

from __future__ import annotations

from bisect import bisect_right

import numba
import numpy as np

from ..validation import check_int, check_known
from .schema import ALL_DAYS, MINUTES_PER_DAY, WEEKEND, WORKDAYS, Routine, ScopeSpec, Stream

SPORTS = ScopeSpec(
    name="sports",
    kinds=("decision_point",),
    facts=("available",
           "activity=still", "activity=walking", "activity=in_vehicle", "activity=on_bicycle",
           "location=home", "location=work", "location=other",
           "weather=clear", "weather=cloudy", "weather=rain", "weather=snow",
           "steps=low", "steps=mid", "steps=high",
           "slot=morning", "slot=midday", "slot=afternoon", "slot=evening", "slot=night"),
    values=("steps_pre30", "steps_pre60", "temperature"),
    triggers=("location=home", "location=work", "slot=morning", "slot=midday", "slot=evening"),
    behaviours=("steps=high", "activity=walking", "activity=on_bicycle"),
    actionable=("pending",),
    services=("walk_suggestion", "activity_break"),
    event_tokens=60, segment_tokens=45, regularity_tokens=70, matching_overhead_tokens=40,
    lead=30, grace=30, proposal_pad=30,
)

HOME = ScopeSpec(
    name="home",
    kinds=("segment",),
    facts=("room=bedroom", "room=bathroom", "room=kitchen", "room=living", "room=entry",
           "door=front", "motion=none", "motion=low", "motion=high",
           "part=night", "part=morning", "part=afternoon", "part=evening"),
    values=("bedroom", "bathroom", "kitchen", "living", "entry", "total"),
    triggers=("room=bathroom", "room=kitchen", "door=front"),
    behaviours=("room=kitchen", "door=front", "room=entry"),
    actionable=("deviated",),
    services=("checkin_routine", "checkin_inactivity"),
    event_tokens=110, segment_tokens=50, regularity_tokens=70, matching_overhead_tokens=40,
    lead=30, grace=60, proposal_pad=25,
)

CODE = ScopeSpec(
    name="code",
    kinds=("push", "issue_opened", "issue_comment", "issue_closed", "pr_opened", "pr_review", "pr_merged"),
    facts=("kind=push", "kind=issue_opened", "kind=issue_comment", "kind=issue_closed", "kind=pr_opened",
           "kind=pr_review", "kind=pr_merged",
           "actor=maintainer", "actor=contributor", "actor=bot",
           "label=bug", "label=feature", "label=docs",
           "ci=failure", "ci=success", "repro=yes", "branch=default", "response=maintainer"),
    values=("text_length", "files_changed", "object_age"),
    triggers=("kind=pr_opened", "kind=issue_opened", "kind=push"),
    behaviours=("kind=pr_review", "response=maintainer", "kind=pr_merged"),
    actionable=("deviated",),
    services=("review_help", "triage_help", "ci_fix_help"),
    event_tokens=140, segment_tokens=60, regularity_tokens=70, matching_overhead_tokens=40,
    lead=30, grace=180, proposal_pad=30,
)

SCOPES = {s.name: s for s in (SPORTS, HOME, CODE)}
DEFAULT_DAYS = {"sports": 56, "home": 28, "code": 70}
"""Days per stream: enough weekly cycles for regularities to be proposed, admitted, drift and be readmitted."""


MAX_DAYS = 730
"""Longest stream (days): two years of events bound the memory trace built at reset."""

class _Choice:
    """A categorical distribution as the kernels draw it: ``rng.choice(options, p=p)`` is one uniform draw mapped
    through ``cdf`` (``p.cumsum()`` normalised by its last entry, searched from the right), and
    ``rng.choice(options, size, replace=False, p=p)`` repeats that with the found options' ``p`` zeroed."""

    def __init__(self, options, p):
        self.options = tuple(options)
        self.p = np.asarray(p, dtype=np.float64)
        self.cdf = np.cumsum(self.p)
        self.cdf /= self.cdf[-1]


def _feasible(spec: ScopeSpec, facts: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """:func:`feasible` for every row of the arrays."""
    def has(name):
        return (facts & spec.bit(name)) != 0

    if spec.name == "sports":
        return observed & has("available") & (has("weather=clear") | has("weather=cloudy"))
    if spec.name == "home":
        return observed & ~has("motion=none")
    return observed.copy()


def _evidence(spec: ScopeSpec, time: np.ndarray, facts: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """:func:`evidence` for every row of the arrays (Home looks back at most four rows, within the arrays)."""
    def has(name):
        return (facts & spec.bit(name)) != 0

    out = np.full(facts.shape, -1, np.int64)
    if spec.name == "sports":
        ok = (_feasible(spec, facts, observed) & has("activity=still") & has("steps=low")
              & (has("slot=midday") | has("slot=afternoon")))
        out[ok] = spec.services.index("activity_break")
    elif spec.name == "home":
        tod = time % MINUTES_PER_DAY
        still = observed & has("motion=none")
        door = np.concatenate(([0], np.cumsum(has("door=front"))))
        door_recent = door[1:] - door[np.maximum(0, np.arange(facts.size) - 4)] > 0   # rows t − 4 .. t
        ok = still & (540 <= tod) & (tod <= 1200) & np.concatenate(([False], still[:-1])) & ~door_recent
        out[ok] = spec.services.index("checkin_inactivity")
    else:
        out[observed & has("kind=issue_opened") & has("label=bug") & has("repro=yes")] = spec.services.index(
            "triage_help")
        out[observed & has("kind=push") & has("branch=default") & has("ci=failure")] = spec.services.index(
            "ci_fix_help")
    return out


# ------------------------------------------------------------------------------------------ public predicates


def feasible(stream: Stream, t: int) -> bool:
    """Whether a history-supported (routine) service is feasible at event ``t`` from public fields alone (part of
    every scope's task semantics: Sports — observed, available and fair weather; Home — observed with motion,
    someone visibly at home; Code — always). Current-evidence services have their own conditions in
    :func:`evidence`. :func:`feasible_all` gives every event's at once."""
    return bool(_feasible(SCOPES[stream.scope], stream.facts[t:t + 1], stream.observed[t:t + 1])[0])


def evidence(stream: Stream, t: int) -> int:
    """The service the current event (with the events just before it) supports on its own — ProactMem's ``A`` —
    as an index into the scope's services, or −1. Public: the same predicate the hand-written policies use.
    Sports: observed, feasible, still, low steps at midday or in the afternoon (``activity_break``); Home: a
    second consecutive observed motionless segment between 9:00 and 20:00 without the front door in the last
    five events (``checkin_inactivity``); Code: a failing CI run on the default branch (``ci_fix_help``), else a
    bug report with reproduction steps (``triage_help``). :func:`evidence_all` gives every event's at once."""
    lo = max(0, t - 4)
    return int(_evidence(SCOPES[stream.scope], stream.time[lo:t + 1], stream.facts[lo:t + 1],
                         stream.observed[lo:t + 1])[-1])


def feasible_all(stream: Stream) -> np.ndarray:
    """:func:`feasible` of every event, a bool array."""
    return _feasible(SCOPES[stream.scope], stream.facts, stream.observed)


def evidence_all(stream: Stream) -> np.ndarray:
    """:func:`evidence` of every event, an int64 array."""
    return _evidence(SCOPES[stream.scope], stream.time, stream.facts, stream.observed)


# ------------------------------------------------------------------------------------------------ Sports

_SLOT_TIMES = (480, 750, 930, 1110, 1260)
_SLOTS = ("slot=morning", "slot=midday", "slot=afternoon", "slot=evening", "slot=night")
_WEATHER = _Choice(("weather=clear", "weather=cloudy", "weather=rain", "weather=snow"), (0.45, 0.3, 0.2, 0.05))
_ACTIVITY = _Choice(("activity=still", "activity=walking", "activity=in_vehicle"), (0.8, 0.07, 0.13))
_SPORTS_TEMPLATES = {  # trigger, behaviour, window, weekdays
    "evening_walk": ("slot=evening", "steps=high", (1080, 1140)),
    "lunch_walk": ("location=work", "steps=high", (720, 780)),
    "weekend_ride": ("slot=morning", "activity=on_bicycle", (450, 510)),
}


def _draw_routines(rng, spec, templates, n_days, masks, skip, n_active, services):
    """Draw ``n_active`` routines from the templates; with probability 1/2 one of them stops at a drift day and, with
    probability 1/2 again, an unused template starts that day."""
    names = list(templates)
    order = rng.permutation(len(names))
    chosen = [names[i] for i in order[:n_active]]
    spare = [names[i] for i in order[n_active:]]
    spans = {n: [0, n_days] for n in chosen}
    if rng.random() < 0.5:
        drift = int(rng.integers(n_days * 3 // 7, n_days * 5 // 7))
        spans[chosen[int(rng.integers(len(chosen)))]][1] = drift
        if spare and rng.random() < 0.5:
            spans[spare[0]] = [drift, n_days]
    routines = []
    for name, (first, last) in spans.items():
        trig, beh, (a, b) = templates[name]
        routines.append(Routine(trigger=spec.fact(trig), behaviour=spec.fact(beh), start=a, end=b,
                                weekdays=masks[name](rng), first_day=first, last_day=last, skip_prob=skip[name],
                                service=spec.services.index(services[name])))
    return routines


def _fact_bits(spec: ScopeSpec, names) -> np.ndarray:
    return np.array([spec.bit(name) for name in names], np.int64)


SPORTS_SKIP = {"evening_walk": 0.25, "lunch_walk": 0.25, "weekend_ride": 0.2}
"""Per Sports routine template: the probability that a due routine is skipped in fair weather (0.85 in rain or
snow)."""


def _sports(rng, n_days, skip=SPORTS_SKIP):
    spec = SPORTS
    routines = _draw_routines(
        rng, spec, _SPORTS_TEMPLATES, n_days,
        masks={"evening_walk": lambda g: WORKDAYS if g.random() < 0.6 else ALL_DAYS,
               "lunch_walk": lambda g: WORKDAYS, "weekend_ride": lambda g: WEEKEND},
        skip=skip, n_active=2,
        services=dict.fromkeys(_SPORTS_TEMPLATES, "walk_suggestion"))
    works = rng.random() < 0.8
    time, facts, observed, values, need = _sports_days(
        rng, n_days, works, np.array([np.searchsorted(_SLOT_TIMES, r.start) for r in routines], np.int64),
        np.array([r.first_day for r in routines], np.int64), np.array([r.last_day for r in routines], np.int64),
        np.array([r.weekdays for r in routines], np.int64), np.array([r.skip_prob for r in routines]),
        np.array([spec.facts[r.behaviour] == "activity=on_bicycle" for r in routines]),
        np.array(_SLOT_TIMES, np.int64), _WEATHER.cdf, _ACTIVITY.cdf, _fact_bits(spec, _WEATHER.options),
        _fact_bits(spec, _ACTIVITY.options + ("activity=on_bicycle",)),
        _fact_bits(spec, ("location=work", "location=home", "location=other")),
        _fact_bits(spec, ("steps=low", "steps=mid", "steps=high")), _fact_bits(spec, _SLOTS), spec.bit("available"))
    n = time.size
    order = np.argsort(time, kind="stable")
    return {"time": time[order], "kind": np.zeros(n, np.int64), "facts": facts[order], "observed": observed[order],
            "values": np.clip(values[order], 0, 1).astype(np.float32), "object_id": np.full(n, -1, np.int64),
            "need": need[order], "a_key": [("day", int(day)) for day in time[order] // MINUTES_PER_DAY]}, routines


@numba.njit(cache=True)
def _sports_days(rng, n_days, works, routine_slot, first_day, last_day, weekdays, skip_prob, by_bicycle, slot_times,
                 weather_cdf, activity_cdf, weather_bits, activity_bits, location_bits, steps_bits, slot_bits,
                 available_bit):
    """The Sports decision points of every day, drawn in the order of the reference generator (five per day; the
    routines' due slots and skips drawn first each day). Activities: still, walking, in vehicle, on bicycle;
    locations: work, home, other; weather: clear, cloudy, rain, snow."""
    n = n_days * slot_times.size
    time = np.empty(n, np.int64)
    facts = np.zeros(n, np.int64)
    observed = np.empty(n, np.bool_)
    values = np.zeros((n, 3))
    need = np.empty(n, np.bool_)
    due = np.empty(slot_times.size + 1, np.int64)         # slot -> routine due there (−1 none); the last wins
    skipped = np.zeros(slot_times.size + 1, np.bool_)
    i = 0
    for day in range(n_days):
        wd = day % 7
        weather = np.searchsorted(weather_cdf, rng.random(), side="right")
        temp = rng.normal(18.0, 7.0)
        due[:] = -1
        for r in range(routine_slot.size):
            if first_day[r] <= day < last_day[r] and (weekdays[r] >> wd) & 1:
                skip_p = 0.85 if weather >= 2 else skip_prob[r]
                due[routine_slot[r]] = r
                skipped[routine_slot[r]] = rng.random() < skip_p
        for k in range(slot_times.size):
            t = day * MINUTES_PER_DAY + slot_times[k] + rng.integers(-15, 16)
            at_work = works and wd < 5 and (k == 1 or k == 2) and rng.random() < 0.9
            if at_work:
                location = 0
            elif (k == 0 or k == 3 or k == 4) and rng.random() < 0.8:
                location = 1
            else:
                location = 2
            activity = np.searchsorted(activity_cdf, rng.random(), side="right")
            steps30 = rng.lognormal(4.0, 1.0)
            if rng.random() < 0.08:
                steps30 = rng.uniform(900.0, 2500.0)
            if due[k] >= 0 and not skipped[k]:
                steps30 = rng.uniform(900.0, 2500.0)
                if by_bicycle[due[k]]:
                    activity = 3
                elif rng.random() < 0.6:
                    activity = 1
                if not at_work:
                    location = 2
            steps60 = steps30 + rng.lognormal(4.5, 1.0)
            available = activity != 2 and rng.random() < 0.88
            bucket = 0 if steps30 < 150 else (1 if steps30 < 900 else 2)
            need[i] = rng.random() < min(max(0.85 - steps60 / 400, 0.15), 0.85)
            observed[i] = rng.random() < 0.93
            time[i] = t
            if observed[i]:
                facts[i] = (activity_bits[activity] | location_bits[location] | weather_bits[weather]
                            | steps_bits[bucket] | slot_bits[k] | (available_bit if available else 0))
                values[i, 0], values[i, 1], values[i, 2] = steps30 / 2500, steps60 / 5000, (temp + 10) / 45
            i += 1
    return time, facts, observed, values, need


# -------------------------------------------------------------------------------------------------- Home

_SEGMENT_ENDS = tuple(list(range(50, 1401, 50)) + [1440])
_ROOMS = ("bedroom", "bathroom", "kitchen", "living", "entry")
_ROOM = _Choice(_ROOMS, (0.12, 0.14, 0.04, 0.66, 0.04))


def _part(tod):
    return "part=night" if tod < 360 or tod >= 1320 else (
        "part=morning" if tod < 720 else ("part=afternoon" if tod < 1080 else "part=evening"))


def _home(rng, n_days):
    spec = HOME
    wake = int(rng.integers(8, 10)) * 50               # usual wake segment end: 6:40 or 7:30
    templates = {
        "breakfast": ("room=bathroom", "room=kitchen", (wake, wake + 100)),
        "dinner": ("door=front", "room=kitchen", (1050, 1150)),
        "outing": ("room=kitchen", "door=front", (wake + 150, wake + 250)),
    }
    routines = _draw_routines(
        rng, spec, templates, n_days,
        masks={"breakfast": lambda g: WORKDAYS, "dinner": lambda g: ALL_DAYS, "outing": lambda g: WORKDAYS},
        skip={"breakfast": 0.2, "dinner": 0.2, "outing": 0.3}, n_active=3,
        services=dict.fromkeys(templates, "checkin_routine"))
    ends = np.array(_SEGMENT_ENDS, np.int64)
    room_of = {f"room={room}": i for i, room in enumerate(_ROOMS)}   # −1: the front door
    time, facts, observed, values, need, quiet = _home_days(
        rng, n_days, wake, np.array([room_of.get(spec.facts[r.trigger], -1) for r in routines], np.int64),
        np.array([room_of.get(spec.facts[r.behaviour], -1) for r in routines], np.int64),
        np.array([r.start for r in routines], np.int64), np.array([r.end for r in routines], np.int64),
        np.array([r.first_day for r in routines], np.int64), np.array([r.last_day for r in routines], np.int64),
        np.array([r.weekdays for r in routines], np.int64), np.array([r.skip_prob for r in routines]), ends,
        _ROOM.p, _fact_bits(spec, [f"room={room}" for room in _ROOMS]),
        _fact_bits(spec, [_part(end % MINUTES_PER_DAY) for end in _SEGMENT_ENDS]),
        _fact_bits(spec, ("motion=none", "motion=low", "motion=high")), spec.bit("door=front"),
        int(np.searchsorted(ends, 600)), int(np.searchsorted(ends, 1080)))
    n = time.size
    return {"time": time, "kind": np.zeros(n, np.int64), "facts": facts, "observed": observed,
            "values": np.clip(values, 0, 1).astype(np.float32), "object_id": np.full(n, -1, np.int64), "need": need,
            "a_key": [None if q < 0 else ("quiet", q) for q in quiet.tolist()]}, routines


@numba.njit(cache=True)
def _home_days(rng, n_days, wake, trigger_room, behaviour_room, start, end, first_day, last_day, weekdays,
               skip_prob, ends, room_p, room_bits, part_bits, motion_bits, door_bit, quiet_from, quiet_to):
    """The Home segments of every day, drawn in the order of the reference generator. Rooms: bedroom, bathroom,
    kitchen, living, entry (a routine's trigger or behaviour room, −1 the front door); motion: none, low, high.
    ``quiet``: the inactivity period a segment belongs to (−1 none)."""
    n_seg, n_rooms = ends.size, room_p.size
    n = n_days * n_seg
    time = np.empty(n, np.int64)
    facts = np.zeros(n, np.int64)
    observed = np.empty(n, np.bool_)
    values = np.zeros((n, n_rooms + 1))
    need = np.zeros(n, np.bool_)
    quiet = np.full(n, -1, np.int64)
    rooms = np.zeros((n_seg, n_rooms), np.int64)        # segment -> activations per room (0: none)
    door = np.zeros(n_seg, np.bool_)
    out = np.zeros(n_seg, np.bool_)
    quiet_id = np.zeros(n_seg, np.int64)
    found = np.empty(2, np.int64)
    inactivity_id = 0
    for day in range(n_days):
        wd = day % 7
        wake_t = wake - 50 + rng.integers(0, 3) * 25 + (100 if wd >= 5 else 0)
        sleep_t = rng.integers(1290, 1400)
        rooms[:] = 0
        door[:] = False
        out[:] = False
        quiet_id[:] = -1
        for s in range(n_seg):
            seg_start = ends[s] - (40 if ends[s] == MINUTES_PER_DAY else 50)
            if ends[s] <= wake_t or seg_start >= sleep_t:
                if rng.random() < 0.5:
                    rooms[s, 0] = rng.integers(1, 6)
            else:
                size = 1 + (rng.random() < 0.4)
                n_found = 0
                p = room_p.copy()
                while n_found < size:                     # rng.choice(rooms, size, replace=False, p=room_p)
                    x = np.empty(size - n_found)
                    for j in range(x.size):
                        x[j] = rng.random()
                    for j in range(n_found):
                        p[found[j]] = 0.0
                    cdf = np.cumsum(p)
                    cdf /= cdf[-1]
                    for j in range(x.size):
                        i = np.searchsorted(cdf, x[j], side="right")
                        new = True
                        for m in range(n_found):
                            new &= found[m] != i
                        if new:
                            found[n_found] = i
                            n_found += 1
                for j in range(n_found):
                    rooms[s, found[j]] = rng.integers(3, 30)
        w = np.searchsorted(ends, wake_t)
        rooms[w, 0] += 4
        rooms[w, 1] += rng.integers(4, 15)
        for r in range(start.size):
            if not (first_day[r] <= day < last_day[r] and (weekdays[r] >> wd) & 1):
                continue
            first_seg, last_seg = -1, -1                  # the segments ending inside the window
            for s in range(n_seg):
                if start[r] < ends[s] <= end[r]:
                    last_seg = s
                    if first_seg < 0:
                        first_seg = s
            for s in range(first_seg, last_seg + 1):      # the behaviour never happens inside the window on a skip day
                if behaviour_room[r] < 0:
                    door[s] = False
                else:
                    rooms[s, behaviour_room[r]] = 0
            t_seg = max(0, first_seg - 1)
            triggered = True
            if trigger_room[r] < 0:                       # coming home: the routine follows only on days it happens
                triggered = rng.random() < 0.7
                door[t_seg] = door[t_seg] or triggered
            elif not (rooms[:t_seg + 1, trigger_room[r]] > 0).any():
                rooms[t_seg, trigger_room[r]] = rng.integers(3, 12)
            if triggered and rng.random() >= skip_prob[r]:
                s = first_seg + rng.integers(0, last_seg - first_seg + 1)
                if behaviour_room[r] < 0:
                    door[s] = True
                    length = rng.integers(2, 5)
                    out[s + 1:min(s + 1 + length, n_seg)] = True
                    if s + 1 + length < n_seg:
                        door[s + 1 + length] = True
                else:
                    rooms[s, behaviour_room[r]] = rng.integers(5, 30)
        if rng.random() < 0.35:                           # a motionless daytime period at home
            first = rng.integers(quiet_from, quiet_to)
            quiet_need = rng.random() < 0.55
            for s in range(first, min(first + rng.integers(2, 5), n_seg)):
                if not out[s] and not door[s]:
                    rooms[s, :] = 0
                    quiet_id[s] = inactivity_id
                    need[day * n_seg + s] = quiet_need
            inactivity_id += 1
        for s in range(n_seg):
            i = day * n_seg + s
            time[i] = day * MINUTES_PER_DAY + ends[s]
            quiet[i] = quiet_id[s]
            observed[i] = rng.random() >= 0.03
            if not observed[i]:
                continue
            total = 3 if door[s] else 0
            bits = door_bit if door[s] else 0
            for room in range(n_rooms):
                count = 0 if out[s] else rooms[s, room]
                total += count
                values[i, room] = count / 40
                if count > 0:
                    bits |= room_bits[room]
            motion = 0 if total == 0 else (1 if total < 12 else 2)
            facts[i] = bits | motion_bits[motion] | part_bits[s]
            values[i, n_rooms] = total / 120
    return time, facts, observed, values, need, quiet


# -------------------------------------------------------------------------------------------------- Code


CODE_SKIP = 0.35
"""Probability that a Code routine does not respond to its trigger."""
_KIND = _Choice(CODE.kinds, (0.3, 0.1, 0.2, 0.05, 0.12, 0.13, 0.1))
_LABEL = _Choice(("label=bug", "label=feature", "label=docs"), (0.5, 0.3, 0.2))
_ACTORS = {p: _Choice(("actor=maintainer", "actor=contributor", "actor=bot"), (p, 0.9 - p, 0.1)) for p in (0.35, 0.2)}


CODE_TEMPLATES = {  # trigger, behaviour, window
    "same_day_review": ("kind=pr_opened", "kind=pr_review", (600, 1050)),
    "morning_triage": ("kind=issue_opened", "response=maintainer", (540, 780)),
    "afternoon_merge": ("kind=pr_review", "kind=pr_merged", (840, 1080)),
}


def _code(rng, n_days, skip=CODE_SKIP, templates=CODE_TEMPLATES):
    spec = CODE
    routines = _draw_routines(
        rng, spec, templates, n_days, masks=dict.fromkeys(templates, lambda g: WORKDAYS),
        skip=dict.fromkeys(templates, skip), n_active=2,
        services={"same_day_review": "review_help", "morning_triage": "triage_help", "afternoon_merge": "review_help"})
    kind_of = {f"kind={k}": i for i, k in enumerate(spec.kinds)}
    responses = ("kind=pr_review", "response=maintainer", "kind=pr_merged")
    actors = _ACTORS[0.35].options
    a = _code_days(
        rng, n_days, np.array([kind_of.get(spec.facts[r.trigger], -1) for r in routines], np.int64),
        np.array([responses.index(spec.facts[r.behaviour]) for r in routines], np.int64),
        np.array([r.start for r in routines], np.int64), np.array([r.end for r in routines], np.int64),
        np.array([r.first_day for r in routines], np.int64), np.array([r.last_day for r in routines], np.int64),
        np.array([r.weekdays for r in routines], np.int64), np.array([r.skip_prob for r in routines]),
        _KIND.cdf, _LABEL.cdf, _ACTORS[0.35].cdf, _ACTORS[0.2].cdf,
        _fact_bits(spec, [f"kind={k}" for k in spec.kinds]), _fact_bits(spec, _LABEL.options),
        _fact_bits(spec, actors), _fact_bits(spec, ("branch=default", "ci=failure", "ci=success", "repro=yes",
                                                    "response=maintainer")))
    time, kind, facts, values, object_id, need, key_kind, key_value = a
    order = np.argsort(time, kind="stable")
    keys = [None if k == 0 else ("ci" if k == 1 else "object", v)
            for k, v in zip(key_kind[order].tolist(), key_value[order].tolist())]
    return {"time": time[order], "kind": kind[order], "facts": facts[order], "observed": np.ones(time.size, bool),
            "values": np.clip(values[order], 0, 1).astype(np.float32), "object_id": object_id[order],
            "need": need[order], "a_key": keys}, routines


@numba.njit(cache=True)
def _grown(a, size):
    out = np.zeros((size,) + a.shape[1:], a.dtype)
    out[:a.shape[0]] = a
    return out


@numba.njit(cache=True)
def _code_days(rng, n_days, trigger_kind, response, start, end, first_day, last_day, weekdays, skip_prob, kind_cdf,
               label_cdf, actor_cdf, opener_cdf, kind_bits, label_bits, actor_bits, other_bits):
    """The Code events of every day, drawn in the order of the reference generator, in insertion order (the
    caller sorts by time). Kinds: push, issue_opened, issue_comment, issue_closed, pr_opened, pr_review, pr_merged;
    responses: review, maintainer comment, merge; actors: maintainer, contributor, bot; ``other_bits``: default
    branch, CI failure, CI success, reproduction steps, maintainer response. Intervention keys: (0 none, 1 CI run,
    2 object) and their value."""
    BRANCH, FAILURE, SUCCESS, REPRO, RESPONSE = 0, 1, 2, 3, 4
    cap = 64
    time = np.zeros(cap, np.int64)
    kind = np.zeros(cap, np.int64)
    facts = np.zeros(cap, np.int64)
    values = np.zeros((cap, 3))
    object_id = np.zeros(cap, np.int64)
    need = np.zeros(cap, np.bool_)
    key_kind = np.zeros(cap, np.int64)
    key_value = np.zeros(cap, np.int64)
    opened_at = np.full(cap, -1, np.int64)               # object number -> time it was opened
    pools = np.zeros((2, cap), np.int64)                 # open issues, open pull requests, in opening order
    pool_size = np.zeros(2, np.int64)
    n, next_number, ci_run = 0, 1, 0
    for day in range(n_days):
        wd = day % 7
        base = day * MINUTES_PER_DAY
        k = rng.poisson(6.0 if wd < 5 else 1.5)
        tods = np.empty(k)
        for j in range(k):
            tods[j] = rng.normal(800.0, 200.0)
        tods = np.sort(np.minimum(np.maximum(tods, 0.0), 1439.0))
        most = (1 + trigger_kind.size) * k + 1                # the day's events and their routine responses
        if n + most > time.size or next_number + most > opened_at.size:
            cap = 2 * (time.size + most)
            time, kind, facts, values = _grown(time, cap), _grown(kind, cap), _grown(facts, cap), _grown(values, cap)
            object_id, need, key_kind = _grown(object_id, cap), _grown(need, cap), _grown(key_kind, cap)
            key_value = _grown(key_value, cap)
            grown = np.full(cap, -1, np.int64)
            grown[:opened_at.size] = opened_at
            opened_at = grown
            pools = np.concatenate((pools, np.zeros((2, cap - pools.shape[1]), np.int64)), axis=1)
        for j in range(k):
            tod = int(tods[j])
            event_kind = np.searchsorted(kind_cdf, rng.random(), side="right")
            t = base + tod
            time[n], kind[n], values[n, 0], values[n, 1] = t, event_kind, 0.0, 0.0
            need[n], key_kind[n], key_value[n] = False, 0, 0
            if event_kind == 0:                          # push
                default = rng.random() < 0.5
                failing = rng.random() < 0.15
                if default and not failing:
                    ci_run += 1
                obj = 0 if default else -1
                who = np.searchsorted(actor_cdf, rng.random(), side="right")
                facts[n] = (kind_bits[0] | (other_bits[BRANCH] if default else 0) | actor_bits[who]
                            | (other_bits[FAILURE] if failing else other_bits[SUCCESS]))
                need[n] = default and failing and rng.random() < 0.7
                if default:
                    key_kind[n], key_value[n] = 1, ci_run
                values[n, 1] = rng.random() * 0.4
            elif event_kind == 1 or event_kind == 4:     # an issue or a pull request opened
                obj, next_number = next_number, next_number + 1
                opened_at[obj] = t
                p = 0 if event_kind == 1 else 1
                pools[p, pool_size[p]] = obj
                pool_size[p] += 1
                label = np.searchsorted(label_cdf, rng.random(), side="right")
                who = np.searchsorted(opener_cdf, rng.random(), side="right")
                facts[n] = kind_bits[event_kind] | label_bits[label] | actor_bits[who]
                if label == 0 and rng.random() < 0.4:
                    facts[n] |= other_bits[REPRO]
                need[n] = rng.random() < 0.8
                key_kind[n], key_value[n] = 2, obj
                values[n, 0] = rng.random() * 0.6
            else:
                p = 0 if event_kind == 2 or event_kind == 3 else 1
                if pool_size[p] == 0:
                    continue
                position = rng.integers(0, pool_size[p])
                obj = pools[p, position]
                who = np.searchsorted(actor_cdf, rng.random(), side="right")
                facts[n] = kind_bits[event_kind] | actor_bits[who]
                if who == 0 and (event_kind == 2 or event_kind == 5):
                    facts[n] |= other_bits[RESPONSE]
                values[n, 0] = rng.random() * 0.5
                if event_kind == 3 or event_kind == 6:   # closed or merged: leaves the pool
                    pools[p, position:pool_size[p] - 1] = pools[p, position + 1:pool_size[p]].copy()
                    pool_size[p] -= 1
            object_id[n] = obj
            values[n, 2] = (t - (opened_at[obj] if obj > 0 and opened_at[obj] >= 0 else t)) / (7 * MINUTES_PER_DAY)
            n += 1
            for r in range(trigger_kind.size):           # the routine's response to its trigger, unless skipped
                if not (first_day[r] <= day < last_day[r] and (weekdays[r] >> wd) & 1):
                    continue
                if trigger_kind[r] == event_kind and tod <= end[r] and rng.random() >= skip_prob[r]:
                    lo = max(tod, start[r]) + 20
                    if lo > end[r]:
                        continue
                    at = base + rng.integers(lo, end[r] + 1)
                    time[n], object_id[n], need[n], key_kind[n], key_value[n] = at, obj, False, 0, 0
                    values[n, 0], values[n, 1] = 0.0, 0.0
                    if response[r] == 0:
                        kind[n], facts[n] = 5, kind_bits[5] | actor_bits[0] | other_bits[RESPONSE]
                        values[n, 0] = rng.random() * 0.5
                    elif response[r] == 1:
                        kind[n], facts[n] = 2, kind_bits[2] | actor_bits[0] | other_bits[RESPONSE]
                        values[n, 0] = rng.random() * 0.5
                    else:
                        kind[n], facts[n] = 6, kind_bits[6] | actor_bits[0]
                    values[n, 2] = (at - (opened_at[obj] if obj > 0 and opened_at[obj] >= 0 else at)) / (
                        7 * MINUTES_PER_DAY)
                    n += 1
    return (time[:n], kind[:n], facts[:n], values[:n], object_id[:n], need[:n], key_kind[:n], key_value[:n])


_GENERATORS = {"sports": _sports, "home": _home, "code": _code}


# ------------------------------------------------------------------------------------------------ labels


def _label(stream: Stream, need: np.ndarray, a_keys: list) -> None:
    """Fill ``label``, ``support``, ``episode`` and ``service`` from the routines (B), the needs (A) and novelty."""
    spec = SCOPES[stream.scope]
    times, facts = stream.time.tolist(), stream.facts.tolist()
    tod = [time % MINUTES_PER_DAY for time in times]
    first = np.searchsorted(stream.time // MINUTES_PER_DAY, np.arange(stream.n_days + 1)).tolist()
    can = feasible_all(stream).tolist()
    episode_id = 0
    for r in stream.routines:
        for day in range(r.first_day, min(r.last_day, stream.n_days)):
            if not (r.weekdays >> (day % 7)) & 1:
                continue
            idx = range(first[day], first[day + 1])
            tg = next((t for t in idx if facts[t] >> r.trigger & 1 and tod[t] <= r.end), None)
            if tg is None:
                continue

            def seen(t, until, r=r, tg=tg):
                """The behaviour happened at or after the trigger, from the window's start up to ``until``."""
                return any(facts[i] >> r.behaviour & 1 and r.start <= tod[i] <= until for i in range(tg, t + 1))

            if "pending" in spec.actionable:
                window = [t for t in idx if t >= tg and r.start - spec.lead <= tod[t] <= r.end]
            else:
                if seen(first[day + 1] - 1, r.end):
                    continue
                close = day * MINUTES_PER_DAY + r.end
                window = range(max(tg, bisect_right(times, close)), bisect_right(times, close + spec.grace))
            # an event that shows the behaviour (late, for a deviation) offers no opportunity: the occurrence is
            # fulfilled, as current matching sees it
            candidates = [t for t in window if not seen(t, MINUTES_PER_DAY)]
            hit = next((t for t in candidates if can[t]), None)
            if hit is None:
                continue
            for t in window:
                if t >= hit and stream.episode[t] < 0:
                    stream.episode[t], stream.service[t] = episode_id, r.service
            stream.label[hit] = 1
            stream.support[hit] |= 2
            episode_id += 1
    labelled_keys = {}
    services = evidence_all(stream)
    for t in np.flatnonzero((services >= 0) & need).tolist():
        service = int(services[t])
        if a_keys[t] is None:
            continue
        key = a_keys[t]
        if key in labelled_keys:                     # covered by an earlier window of the same A-episode
            if stream.label[t] == 0:
                stream.episode[t], stream.service[t] = labelled_keys[key], service
            continue
        stream.support[t] |= 1
        if stream.label[t]:                          # already the first window of a B-episode: one opportunity
            labelled_keys[key] = int(stream.episode[t])
            continue
        labelled_keys[key] = episode_id
        stream.episode[t], stream.service[t] = episode_id, service
        stream.label[t] = 1
        episode_id += 1


def check_scope(scope, scopes=None) -> ScopeSpec:
    """The spec of ``scope`` among ``scopes`` (default :data:`SCOPES`, v0's)."""
    scopes = SCOPES if scopes is None else scopes
    check_known("scope", scope, scopes, sorted(scopes))
    return scopes[scope]


def generate_stream(seed=None, *, scope="sports", n_days=None, rng: np.random.Generator | None = None) -> Stream:
    """Draw one stream of ``scope`` (``sports``, ``home`` or ``code``) over ``n_days`` days (default
    ``DEFAULT_DAYS[scope]``). ``rng`` (the environment's ``np_random``) takes precedence over ``seed``."""
    seed = check_int("seed", seed, 0, none_ok=True)
    spec = check_scope(scope)
    n_days = DEFAULT_DAYS[scope] if n_days is None else n_days
    n_days = check_int("n_days", n_days, 14, MAX_DAYS)  # two weekly cycles at least
    rng = np.random.default_rng(seed) if rng is None else rng
    a, routines = _GENERATORS[scope](rng, n_days)
    stream = unlabelled_stream(scope, seed, a, routines)
    _label(stream, a["need"], a["a_key"])
    stream.validate(spec)
    return stream


def unlabelled_stream(scope: str, seed, a: dict, routines) -> Stream:
    """The :class:`Stream` of a generator's event arrays ``a`` and its routines, before :func:`_label` fills its
    labels (``label`` and ``support`` 0, ``episode`` and ``service`` -1)."""
    n = a["time"].size
    return Stream(scope=scope, stream_id=f"{scope}-{seed if seed is not None else 'rng'}", time=a["time"],
                  kind=a["kind"], facts=a["facts"], observed=a["observed"], values=a["values"],
                  object_id=a["object_id"], label=np.zeros(n, np.int64), support=np.zeros(n, np.int64),
                  episode=np.full(n, -1, np.int64), service=np.full(n, -1, np.int64), routines=tuple(routines))

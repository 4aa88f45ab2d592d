"""ProactMem memory hierarchy (envs/proactive/memory.py) on hand-built streams and daily records."""

import dataclasses

import numpy as np
import pytest

from membudget.envs.proactive.memory import (
    DailyRecord, Proposal, ProactiveMemory, Regularity, Segment, assess, day_outcome, event_window,
    fact_consistent, memory_trace, observe, occurrence_state, propose, replay, select, summarise_day,
)
from membudget.envs.proactive.schema import ALL_DAYS, WEEKEND, WORKDAYS, ScopeSpec, Stream

SPEC = ScopeSpec(
    name="toy", kinds=("sensor",), facts=("home", "walk", "tv", "wake"), values=(), triggers=("home", "wake"),
    behaviours=("walk", "tv"), actionable=("pending", "deviated"), services=("remind",), event_tokens=10,
    segment_tokens=20, regularity_tokens=30, matching_overhead_tokens=5, lead=30, grace=30, proposal_pad=30,
)
HOME, WALK, TV, WAKE = range(4)
DAY = 1440


def bit(fact):
    return 1 << fact


def make_stream(events, scope="toy"):
    """events: (absolute minute, facts bitmask, observed) in time order."""
    n = len(events)
    zeros = np.zeros(n, np.int64)
    return Stream(
        scope=scope, stream_id="s", time=np.array([e[0] for e in events], np.int64), kind=zeros.copy(),
        facts=np.array([e[1] for e in events], np.int64), observed=np.array([e[2] for e in events], bool),
        values=np.zeros((n, 0)), object_id=zeros - 1, label=zeros.copy(), support=zeros.copy(),
        episode=zeros - 1, service=zeros - 1,
    )


def routine_events(n_days, skipped=()):
    """Every day: wake at 07:00, an observed fact-less ping at 19:20, tv at 22:30. Monday to Friday: home at 18:00
    and a walk at 18:30 unless the day is skipped. One extra event on day ``n_days`` completes the last day."""
    events = []
    for day in range(n_days):
        t0 = day * DAY
        events.append((t0 + 420, bit(WAKE), True))
        if day % 7 < 5:
            events.append((t0 + 1080, bit(HOME), True))
            if day not in skipped:
                events.append((t0 + 1110, bit(WALK), True))
        events.append((t0 + 1160, 0, True))
        events.append((t0 + 1350, bit(TV), True))
    events.append((n_days * DAY + 420, bit(WAKE), True))
    return events


def event_at(stream, day, tod):
    return int(np.flatnonzero(stream.time == day * DAY + tod)[0])


def record(day, claims=(), gaps=(), observed=()):
    """A hand-built daily record: one accepted segment per (fact, time of day) claim; the claims' times are observed
    together with the extra ``observed`` times of day; ``gaps`` are times of day of unobserved events."""
    t0 = day * DAY
    segments = [Segment(day, t0 + tod, t0 + tod, bit(f), ((f, t0 + tod),), (0,)) for f, tod in claims]
    observed_times = sorted({t0 + tod for _, tod in claims} | {t0 + tod for tod in observed})
    return DailyRecord(day, segments, 0, tuple(t0 + g for g in gaps), tuple(observed_times))


# Regularity home → walk in [18:00, 19:00]; the kinds of day used below (17:50 home is a trigger before the window).
def fulfilled(day):
    return record(day, [(HOME, 1070), (WALK, 1110)])


def violated(day):
    return record(day, [(HOME, 1070)], observed=[1100])


def untriggered_walk(day):
    return record(day, [(WALK, 1110)])


def quiet(day):
    return record(day, observed=[1100])


def censored(day):
    return record(day, [(HOME, 1070)], gaps=[1100])


def walk_reg(weekdays=ALL_DAYS, **kw):
    return Regularity(0, HOME, WALK, 1080, 1140, weekdays, (), **kw)


# ---------------------------------------------------------------- event memory (eq. 4)

def test_event_window_horizon_and_capacity_both_bind():
    time = np.array([0, 60, 4320, 4380, 4381, 4381], np.int64)
    assert event_window(time, 0) == 0  # S_0 is empty
    assert event_window(time, 2) == 0  # event 0 is exactly Δ = 4320 minutes older: kept
    assert event_window(time, 3) == 1  # event 0 is Δ + 60 older: dropped
    assert event_window(time, 4) == 2  # event 1 is Δ + 1 older
    assert event_window(time, 5) == 2  # an event at the same minute is prior and kept
    assert event_window(time, 5, capacity=3) == 3  # K = 3: two prior events
    dense = np.arange(150, dtype=np.int64)  # one event a minute: Δ never binds
    assert event_window(dense, 149) == 50  # 99 prior events
    assert event_window(dense, 99) == 0 and event_window(dense, 100) == 1
    assert event_window(dense, 149, horizon=10) == 139


# ---------------------------------------------------------------- trajectory memory (eq. 5)

# Day 0: one event. Day 1 (indices 1..7): wake 07:00, ping 07:30, home 18:00, walk 18:30, walk 18:40,
# unobserved 19:00, tv 22:30.
DAY1 = [(DAY + 420, bit(WAKE), True), (DAY + 450, 0, True), (DAY + 1080, bit(HOME), True),
        (DAY + 1110, bit(WALK), True), (DAY + 1120, bit(WALK), True), (DAY + 1140, 0, False),
        (DAY + 1350, bit(TV), True)]
SUMMARY_STREAM = make_stream([(300, bit(HOME), True)] + DAY1)
DAY1_INDICES = range(1, 8)


def test_summarise_day_without_errors_reproduces_the_day():
    segments = summarise_day(SUMMARY_STREAM, 1, DAY1_INDICES, SPEC, np.random.default_rng(0), 0.0)
    # wake+ping (30 min apart, same behaviour facts) | home (630 min later) | walks (behaviour changed) | tv
    assert segments == [
        Segment(1, DAY + 420, DAY + 450, bit(WAKE), ((WAKE, DAY + 420),), (1, 2)),
        Segment(1, DAY + 1080, DAY + 1080, bit(HOME), ((HOME, DAY + 1080),), (3,)),
        Segment(1, DAY + 1110, DAY + 1120, bit(WALK), ((WALK, DAY + 1110), (WALK, DAY + 1120)), (4, 5)),
        Segment(1, DAY + 1350, DAY + 1350, bit(TV), ((TV, DAY + 1350),), (7,)),
    ]
    assert all(fact_consistent(s, SUMMARY_STREAM, DAY1_INDICES) for s in segments)


def test_summarise_day_at_rate_one_hallucinates_every_segment_and_validation_rejects_it():
    faithful = summarise_day(SUMMARY_STREAM, 1, DAY1_INDICES, SPEC, np.random.default_rng(0), 0.0)
    noisy = summarise_day(SUMMARY_STREAM, 1, DAY1_INDICES, SPEC, np.random.default_rng(0), 1.0)
    assert len(noisy) == len(faithful)
    for clean, seg in zip(faithful, noisy):
        invented = seg.facts & ~clean.facts
        assert bin(invented).count("1") == 1 and invented & (bit(WALK) | bit(TV))
        assert dict(seg.fact_times)[invented.bit_length() - 1] == seg.start
        assert seg.citations[:len(clean.citations)] == clean.citations
        assert all(c == 0 for c in seg.citations[len(clean.citations):])  # the only earlier-day event
        assert not fact_consistent(seg, SUMMARY_STREAM, DAY1_INDICES)
    assert noisy == summarise_day(SUMMARY_STREAM, 1, DAY1_INDICES, SPEC, np.random.default_rng(0), 1.0)


def test_fact_consistent_rejects_each_violation_of_eq5():
    walk = Segment(1, DAY + 1110, DAY + 1120, bit(WALK), ((WALK, DAY + 1110),), (4, 5))
    assert fact_consistent(walk, SUMMARY_STREAM, DAY1_INDICES)
    replace = dataclasses.replace
    bad = [
        replace(walk, facts=bit(WALK) | bit(TV), fact_times=((WALK, DAY + 1110), (TV, DAY + 1110))),  # unsupported
        replace(walk, citations=(4, 5, 0)),  # cites an event of another day
        replace(walk, citations=()),  # no sources
        replace(walk, citations=(4, 5, 99)),  # unresolved index
        replace(walk, start=DAY + 1100),  # interval not the cited events' span
        replace(walk, fact_times=((WALK, DAY + 1115),)),  # no cited walk at that minute
        replace(walk, fact_times=()),  # a claimed fact without a time
    ]
    assert not any(fact_consistent(s, SUMMARY_STREAM, DAY1_INDICES) for s in bad)
    # a citation outside the completed day's events, with the interval still the cited events' span
    assert not fact_consistent(walk, SUMMARY_STREAM, [5, 6, 7])
    assert fact_consistent(walk, SUMMARY_STREAM, [4, 5])


# ---------------------------------------------------------------- replay (eq. 6)

def test_replay_counts_confidence_and_lift_by_hand():
    days = [fulfilled(0), fulfilled(1), violated(2), untriggered_walk(3), censored(4), fulfilled(5)]
    reg = walk_reg()
    # outcomes F F V untriggered C F: n_f = 3, n_v = 1, conf = 3/4.
    # Observable days (an observed event in [18:00, 19:00], no gap there): all but the censored day = 5;
    # with a walk in the window: the 3 fulfilled days and the untriggered one = 4; base = 4/5, lift = 0.75/0.8.
    assert [day_outcome(reg, r) for r in days] == ["fulfilled", "fulfilled", "violated", "untriggered",
                                                   "censored", "fulfilled"]
    reg.n_f, reg.n_v, reg.base = replay(reg, days)
    assert (reg.n_f, reg.n_v, reg.base) == (3, 1, 0.8)
    assert reg.confidence == 0.75 and reg.lift == pytest.approx(0.9375)
    assert replay(reg, days + [fulfilled(0), violated(1)]) == (3, 1, 0.8)  # each date at most once
    # Day 5 is a Saturday: the workday mask drops it (n_f = 2, observable 4, with a walk 3).
    assert replay(walk_reg(WORKDAYS), days) == (2, 1, 0.75)
    assert day_outcome(walk_reg(WORKDAYS), days[5]) == "inapplicable"


def test_replay_zero_denominators_score_zero():
    reg = walk_reg()
    assert replay(reg, []) == (0, 0, 0.0)
    reg.n_f, reg.n_v, reg.base = replay(reg, [censored(0), record(1)])  # nothing observable, nothing triggered
    assert (reg.n_f, reg.n_v, reg.base, reg.confidence, reg.lift) == (0, 0, 0.0, 0.0, 0.0)


def test_day_outcome_trigger_rules():
    reg = walk_reg()
    assert day_outcome(reg, record(0, [(WALK, 1110), (HOME, 1120)])) == "violated"  # walk before the trigger
    assert day_outcome(reg, record(0, [(HOME, 1150), (WALK, 1155)])) == "untriggered"  # trigger after the window
    assert day_outcome(reg, record(0, [(HOME, 900), (WALK, 1000)], observed=[1100])) == "violated"  # walk too early
    assert day_outcome(reg, record(0, [(HOME, 1070)], gaps=[1150], observed=[1100])) == "violated"  # gap after end


# ---------------------------------------------------------------- lifecycle (§3.1, B.2)

def test_activation_thresholds():
    # 3 fulfilled + 1 violated + 2 quiet observable days: conf 3/4, base 3/6, lift 1.5 → active.
    reg = walk_reg()
    assert assess(reg, [fulfilled(0), fulfilled(1), fulfilled(2), violated(3), quiet(4), quiet(5)])
    assert (reg.state, reg.admitted, reg.n_f, reg.n_v) == ("active", True, 3, 1)
    assert reg.confidence == pytest.approx(4 / 6)  # smoothed after admission: (3+1)/(3+1+2)
    # n_f = 2 (conf 2/3, lift 2/3 / (2/5) > 1): stays a candidate.
    reg = walk_reg()
    assert not assess(reg, [fulfilled(0), fulfilled(1), violated(3), quiet(4), quiet(5)])
    assert (reg.state, reg.admitted, reg.n_f) == ("candidate", False, 2)
    # conf exactly 0.5 (3 F, 3 V), base 3/7, lift 7/6: active.
    reg = walk_reg()
    assert assess(reg, [fulfilled(d) for d in range(3)] + [violated(d) for d in range(3, 6)] + [quiet(6)])
    # conf 3/7 < 0.5 (lift exactly 1): stays a candidate.
    reg = walk_reg()
    assert not assess(reg, [fulfilled(d) for d in range(3)] + [violated(d) for d in range(3, 7)])
    assert reg.confidence == pytest.approx(3 / 7) and reg.lift == pytest.approx(1.0)
    # lift < 1 (the hand-counted replay above: conf 0.75, base 0.8).
    reg = walk_reg()
    assert not assess(reg, [fulfilled(0), fulfilled(1), violated(2), untriggered_walk(3), censored(4),
                            fulfilled(5)])
    assert reg.state == "candidate"


def test_online_lifecycle_weakening_recovery_and_dormancy():
    reg = walk_reg()
    assert assess(reg, [fulfilled(0), fulfilled(1), fulfilled(2), violated(3), quiet(4), quiet(5)])
    day = iter(range(10, 100))
    assert observe(reg, violated(next(day))) == "violated"
    assert (reg.state, reg.consecutive_violations, reg.n_v) == ("active", 1, 2)
    for neutral in (censored(next(day)), quiet(next(day)), untriggered_walk(next(day))):
        before = dataclasses.replace(reg)
        observe(reg, neutral)
        assert reg == before  # censored / untriggered days change nothing
    observe(reg, violated(next(day)))
    assert (reg.state, reg.consecutive_violations) == ("weakening", 2)
    assert reg.confidence == pytest.approx(4 / 8)
    observe(reg, fulfilled(next(day)))  # conf (4+1)/(4+3+2) = 5/9 >= 0.5
    assert (reg.state, reg.consecutive_violations, reg.n_f) == ("active", 0, 4)
    for expected in ("active", "weakening", "weakening", "dormant"):
        observe(reg, violated(next(day)))
        assert reg.state == expected
    n_v = reg.n_v
    observe(reg, violated(next(day)))  # dormant regularities do not learn online
    assert (reg.state, reg.n_v) == ("dormant", n_v)


def test_fulfilment_keeps_a_low_confidence_regularity_weakening():
    reg = walk_reg(n_f=1, n_v=5, state="weakening", consecutive_violations=3, admitted=True)
    observe(reg, fulfilled(0))  # conf (2+1)/(2+5+2) = 1/3
    assert (reg.state, reg.consecutive_violations, reg.n_f) == ("weakening", 0, 2)


def test_candidates_do_not_learn_online():
    reg = walk_reg()
    observe(reg, fulfilled(0))
    assert (reg.n_f, reg.state) == (0, "candidate")


# ---------------------------------------------------------------- current matching and selection (eq. 7)

def test_occurrence_state_each_state():
    reg = walk_reg()  # window [1080, 1140]; applicable [1050, 1170] with lead = grace = 30

    def state(now, *claims):
        return occurrence_state(reg, now, list(claims), SPEC)

    home, walk = (1090, bit(HOME), True), (1095, bit(WALK), True)
    assert state(1000) is None  # before start − lead
    assert state(1060) == "upcoming"
    assert state(1150) is None  # no trigger and the window has ended
    assert state(1100, home) == "pending"
    assert state(1100, home, walk) == "fulfilled"
    assert state(1160, home) == "deviated"
    assert state(1171, home) is None  # past end + grace
    assert state(1120, home, (1100, 0, False)) == "censored"
    assert state(1100, (1085, bit(WALK), True), home) == "pending"  # a walk before the trigger does not count
    assert state(1100, (1000, bit(HOME), True), (1040, bit(WALK), True)) == "pending"  # walk before the window
    assert state(1160, (1150, bit(HOME), True)) is None  # trigger after the window end
    assert state(1100, (1090, bit(HOME), False)) == "upcoming"  # an unobserved event claims nothing


def test_select_ranks_by_occurrence_lifecycle_confidence_distance():
    now = 1100  # Monday 18:20
    claims = [(1060, bit(HOME), True)]
    regs = [
        Regularity(0, HOME, WALK, 1080, 1140, ALL_DAYS, (), n_f=3, state="active", admitted=True),  # pending
        Regularity(1, HOME, WALK, 1090, 1150, ALL_DAYS, (), n_f=30, state="weakening", admitted=True),  # pending
        Regularity(2, WAKE, WALK, 1090, 1200, ALL_DAYS, (), n_f=30, state="active", admitted=True),  # upcoming
        Regularity(3, HOME, TV, 1000, 1090, ALL_DAYS, (), n_f=3, n_v=3, state="active", admitted=True),  # deviated
        Regularity(4, HOME, WALK, 1080, 1140, ALL_DAYS, (), n_f=30, state="candidate"),
        Regularity(5, HOME, WALK, 1080, 1140, ALL_DAYS, (), n_f=30, state="dormant"),
        Regularity(6, HOME, WALK, 1080, 1140, WEEKEND, (), n_f=30, state="active", admitted=True),
    ]
    matches = select(regs, now, claims, SPEC)
    assert [(m.rid, m.occurrence, m.state) for m in matches] == [
        (3, "deviated", "active"), (0, "pending", "active"), (1, "pending", "weakening")]
    assert (matches[0].distance, matches[0].confidence, matches[0].n_v) == (10, 0.5, 3)
    assert [m.rid for m in select(regs[2:], now, claims, SPEC)] == [3, 2]
    # Monday excluded the weekend-only regularity 6 although its confidence would rank it above 0; Saturday has it.
    assert [m.rid for m in select(regs, now + DAY * 5, claims, SPEC)] == [3, 6, 0]


def test_select_tie_breaks_confidence_then_distance_then_id():
    claims = [(1060, bit(HOME), True)]
    strong = Regularity(0, HOME, WALK, 1080, 1140, ALL_DAYS, (), n_f=9, state="active", admitted=True)
    near = Regularity(1, HOME, WALK, 1080, 1140, ALL_DAYS, (), n_f=3, state="active", admitted=True)
    far = Regularity(2, HOME, WALK, 1120, 1160, ALL_DAYS, (), n_f=3, state="active", admitted=True)
    twin = dataclasses.replace(near, rid=3)
    matches = select([twin, far, near, strong], 1100, claims, SPEC)
    assert [(m.rid, m.distance) for m in matches] == [(0, 0), (1, 0), (3, 0)]
    assert [m.rid for m in select([far, twin, near], 1100, claims, SPEC)] == [1, 3, 2]


# ---------------------------------------------------------------- proposals

def test_propose_on_a_hand_built_cycle():
    cycle = [
        record(0, [(HOME, 1080), (WALK, 1110)]),  # Monday
        record(1, [(HOME, 1080), (WALK, 1130), (WALK, 1200)]),  # Tuesday: 1200 lies outside the frequent window
        record(2, [(WALK, 1110)]),  # Wednesday: walk without trigger
        record(3, [(HOME, 600), (WALK, 1110)]),  # Thursday: walk 510 minutes after the trigger
        record(4), record(5, [(HOME, 700), (TV, 800)]),  # Saturday: home → tv once
        record(6, [(WAKE, 420)]),
    ]
    assert propose(cycle, SPEC) == [Proposal(HOME, WALK, 1080, 1160, WORKDAYS, (0, 1))]
    assert propose(cycle, SPEC, min_days=1) == [Proposal(HOME, WALK, 1080, 1160, WORKDAYS, (0, 1)),
                                                Proposal(HOME, WALK, 1170, 1230, WORKDAYS, (1,)),
                                                Proposal(HOME, TV, 770, 830, WEEKEND, (5,))]
    mixed = [record(4, [(WAKE, 10), (TV, 20)]), record(5, [(WAKE, 10), (TV, 40)])]  # Friday and Saturday
    assert propose(mixed, SPEC) == [Proposal(WAKE, TV, 0, 70, ALL_DAYS, (4, 5))]  # start clipped at 0


# ---------------------------------------------------------------- end to end

def test_routine_becomes_active_in_the_second_cycle_and_matches():
    stream = make_stream(routine_events(14, skipped={9}))
    trace = memory_trace(stream, SPEC, hallucination_rate=0.0)
    cycle2_start = event_at(stream, 7, 420)
    assert not trace.n_eligible[:cycle2_start].any() and not any(trace.matches[:cycle2_start])
    assert trace.n_eligible[cycle2_start] == 1
    [reg] = trace.regularities
    # Cycle 1 replay: 5 fulfilled weekdays, base 5/5, lift 1; window [18:30 − 30, 18:30 + 30].
    assert (reg.trigger, reg.behaviour, reg.start, reg.end, reg.weekdays) == (HOME, WALK, 1080, 1140, WORKDAYS)
    assert reg.sources == (0, 1, 2, 3, 4, 7, 8, 10, 11)  # cycle 2's proposal merged in (day 9 was skipped)
    # Day 9 (Wednesday) skipped: pending after the trigger, deviated after the window.
    [pending] = trace.matches[event_at(stream, 9, 1080)]
    # 5 replayed + Monday and Tuesday online = 7 fulfilled; smoothed confidence (7+1)/(7+2).
    assert (pending.occurrence, pending.state, pending.n_f, pending.n_v) == ("pending", "active", 7, 0)
    assert pending.confidence == pytest.approx(8 / 9)
    [deviated] = trace.matches[event_at(stream, 9, 1160)]
    assert (deviated.occurrence, deviated.distance) == ("deviated", 20)
    assert trace.matches[event_at(stream, 8, 1110)] == ()  # walk done: fulfilled, not retrieved
    assert trace.matches[event_at(stream, 8, 420)] == ()  # before start − lead
    [after] = trace.matches[event_at(stream, 10, 1080)]  # the violation was recorded online
    assert (after.n_f, after.n_v, after.confidence) == (7, 1, pytest.approx(8 / 10))
    # W_t: the current cycle's records, shared between the events of a day, reset at consolidation.
    tuesday = [t for t in range(len(stream)) if stream.day(t) == 8]  # second week
    assert {id(trace.cycle_records[t]) for t in tuesday} == {id(trace.cycle_records[tuesday[0]])}
    assert [r.day for r in trace.cycle_records[tuesday[0]]] == [7]
    assert trace.cycle_records[cycle2_start] == () and trace.n_segments[cycle2_start] == 0
    assert [r.day for r in trace.records] == list(range(14))
    assert trace.n_segments[event_at(stream, 8, 1080)] == len(trace.records[7].segments)


def test_dormancy_and_readmission_depend_on_the_replay_horizon():
    stream = make_stream(routine_events(28, skipped=set(range(14, 19))))  # week 3: home, no walk
    long = memory_trace(stream, SPEC, hallucination_rate=0.0)
    assert long.matches[event_at(stream, 15, 1080)][0].state == "active"  # one violation
    assert long.matches[event_at(stream, 16, 1080)][0].state == "weakening"  # two
    assert long.n_eligible[event_at(stream, 18, 420)] == 0  # four: dormant
    # Consolidation of cycle 3 re-replays it over the last 28 records (days 0-20): 10 F, 5 V, base 10/15, lift 1.
    monday = event_at(stream, 21, 420)
    assert long.n_eligible[monday] == 1
    short = memory_trace(stream, SPEC, hallucination_rate=0.0, replay_horizon_days=7)
    assert short.n_eligible[monday] == 0  # days 14-20 alone: no fulfilled day
    assert short.n_eligible[event_at(stream, 28, 420)] == 1  # week 4 resumed the routine
    [reg] = short.regularities
    assert (reg.state, reg.n_f, reg.n_v, reg.consecutive_violations) == ("active", 5, 0, 0)


def test_trace_is_deterministic():
    events = routine_events(21, skipped={9, 15})
    kwargs = dict(hallucination_rate=0.3, seed=5)
    first, second = memory_trace(make_stream(events), SPEC, **kwargs), memory_trace(make_stream(events), SPEC, **kwargs)
    assert first.matches == second.matches and first.records == second.records and first.rejected > 0
    assert first.regularities == second.regularities and first.cycle_records == second.cycle_records
    for name in ("event_lo", "n_eligible", "n_segments"):
        assert np.array_equal(getattr(first, name), getattr(second, name))
    assert first.records != memory_trace(make_stream(events), SPEC, hallucination_rate=0.3, seed=6).records
    memory = ProactiveMemory(make_stream(events), SPEC, **kwargs)
    assert memory.trace() is memory.trace()


@pytest.mark.parametrize("hallucination_rate", [0.0, 0.3])
def test_trace_is_causal(hallucination_rate):
    events = routine_events(21, skipped={9, 15})
    stream = make_stream(events)
    base = memory_trace(stream, SPEC, hallucination_rate=hallucination_rate)

    def outputs(trace, upto):
        return (trace.event_lo[:upto].tolist(), trace.matches[:upto], trace.cycle_records[:upto],
                trace.n_eligible[:upto].tolist(), trace.n_segments[:upto].tolist())

    t = event_at(stream, 10, 1110)  # Thursday's walk
    changed = list(events)
    changed[t] = (events[t][0], bit(TV), True)  # change e_t: no walk
    later = memory_trace(make_stream(changed), SPEC, hallucination_rate=hallucination_rate)
    assert outputs(later, t) == outputs(base, t)
    if hallucination_rate == 0.0:  # the regularity is active: the missing walk shows at t itself
        assert base.matches[t] == () and later.matches[t][0].occurrence == "pending"
    future = events[:t + 1] + [(time, bit(HOME) if facts else 0, seen) for time, facts, seen in events[t + 1:]]
    rewritten = memory_trace(make_stream(future), SPEC, hallucination_rate=hallucination_rate)
    assert outputs(rewritten, t + 1) == outputs(base, t + 1)
    assert rewritten.records[:10] == base.records[:10]  # days before day 10
    assert rewritten.records[10:] != base.records[10:]


def test_without_replay_gate_proposals_activate_at_once():
    stream = make_stream(routine_events(14, skipped={9}))
    trace = memory_trace(stream, SPEC, replay_gate=False, hallucination_rate=0.0)
    wednesday = event_at(stream, 2, 420)  # after Monday and Tuesday completed: two supporting days
    assert trace.n_eligible[event_at(stream, 1, 1350)] == 0 and trace.n_eligible[wednesday] == 1
    [match] = trace.matches[event_at(stream, 2, 1080)]
    assert (match.state, match.n_f, match.n_v, match.confidence, match.lift) == ("active", 0, 0, 0.5, 0.0)
    assert (match.start, match.end) == (1080, 1140)
    assert len(trace.regularities) == 1  # later proposals merge
    gated = memory_trace(stream, SPEC, hallucination_rate=0.0)
    assert gated.n_eligible[wednesday] == 0


def test_validation_drops_hallucinated_segments_and_the_ablation_keeps_them():
    stream = make_stream(routine_events(14))
    checked = memory_trace(stream, SPEC, hallucination_rate=0.5)
    unchecked = memory_trace(stream, SPEC, hallucination_rate=0.5, validate=False)
    clean = memory_trace(stream, SPEC, hallucination_rate=0.0)
    day_bounds = np.searchsorted(stream.time // DAY, np.arange(15))

    def consistent(rec):
        indices = range(day_bounds[rec.day], day_bounds[rec.day + 1])
        return [fact_consistent(s, stream, indices) for s in rec.segments]

    assert checked.rejected > 0 and unchecked.rejected == 0 and clean.rejected == 0
    assert all(all(consistent(r)) for r in checked.records)
    assert not all(all(consistent(r)) for r in unchecked.records)
    assert checked.records != unchecked.records
    assert sum(len(r.segments) for r in unchecked.records) == sum(len(r.segments) for r in clean.records)
    assert (sum(len(r.segments) for r in checked.records) + checked.rejected
            == sum(len(r.segments) for r in clean.records))


def test_unchecked_records_are_the_day_by_day_summaries_of_one_generator():
    # the memory draws its summaries in batches as days complete; the draws must be those of summarising every
    # day in order from one generator (30 days: batches of 7, 14 and 9)
    stream = make_stream(routine_events(30))
    trace = memory_trace(stream, SPEC, hallucination_rate=0.5, validate=False, seed=3)
    rng, day_bounds = np.random.default_rng(3), np.searchsorted(stream.time // DAY, np.arange(31))
    expected = [summarise_day(stream, day, range(day_bounds[day], day_bounds[day + 1]), SPEC, rng, 0.5)
                for day in range(30)]
    assert [r.segments for r in trace.records] == expected
    assert any(s.facts & ~stream.facts[list(s.citations[:1])][0] for r in trace.records for s in r.segments)


def test_empty_days_produce_records_and_advance_the_cycle():
    events = [(420, bit(WAKE), True), (3 * DAY + 420, bit(WAKE), True), (8 * DAY + 420, bit(WAKE), True)]
    trace = memory_trace(make_stream(events), SPEC)
    assert [r.day for r in trace.records] == list(range(8))
    assert [len(r.segments) for r in trace.records] == [1, 0, 0, 1, 0, 0, 0, 0]
    assert [len(w) for w in trace.cycle_records] == [0, 3, 1]  # days 0-2; consolidated after day 6, then day 7
    assert memory_trace(make_stream([]), SPEC).matches == []


def test_bad_arguments_raise():
    stream = make_stream(routine_events(3))
    with pytest.raises(ValueError, match="hallucination_rate"):
        ProactiveMemory(stream, SPEC, hallucination_rate=1.5)
    with pytest.raises(ValueError, match="hallucination_rate"):
        ProactiveMemory(stream, SPEC, hallucination_rate=-0.1)
    with pytest.raises(ValueError, match="replay_horizon_days"):
        ProactiveMemory(stream, SPEC, replay_horizon_days=6)
    with pytest.raises(ValueError, match="scope"):
        ProactiveMemory(make_stream(routine_events(3), scope="other"), SPEC)
    unsorted = make_stream([(100, 0, True), (50, 0, True)])
    with pytest.raises(ValueError, match="non-decreasing"):
        ProactiveMemory(unsorted, SPEC)
    with pytest.raises(ValueError, match="capacity"):
        event_window(stream.time, 0, capacity=0)
    with pytest.raises(ValueError, match="min_days"):
        propose([], SPEC, min_days=0)

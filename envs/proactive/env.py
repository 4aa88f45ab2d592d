"""``membudget/ProactiveStream-v0``: how deep to consult memory, then intervene or abstain, per event (ProactMem)."""

from __future__ import annotations

from bisect import bisect_left

import gymnasium as gym
import numba
import numpy as np
from gymnasium import spaces

from ..rendering import (C_BAD, C_FUTURE, C_GOOD, C_MISS, C_NEUTRAL, C_QUERIED, RENDER_MODES, Render, blank_frame,
                         check_render_mode, figure_array, new_figure)
from ..validation import MAX_REWARD_WEIGHT, check_discrete_action, check_int, check_number, check_options
from .memory import MemoryTrace, ProactiveMemory
from .schema import MAX_FACTS, MINUTES_PER_DAY, Stream
from .world import DEFAULT_DAYS, check_scope, evidence_all, feasible_all, generate_stream

DEPTHS = ("events", "trajectories", "regularities")
"""Memory depth actions: event memory only; + trajectory memory; + regularity memory (cumulative)."""
MODES = ("abstain", "immediate", "scheduled")
"""Decide actions."""
MEMORY_VARIANTS = ("full", "no_replay_gate", "no_validation")
MAX_KINDS, MAX_VALUES, N_BEHAVIOURS = 7, 6, 3
USUAL_NOW, USUAL_BEFORE = 30, 120
"""Minutes around now (a behaviour usually happens about now) and before now (it usually has happened by now)."""
TOKEN_SCALE = 20_000.0
FIRST_CHUNK_DAYS = 7
"""Days of events whose memory trace and features the reset builds; each later chunk, built when the episode
reaches it, spans twice the days of the one before (a handful of chunks per episode keeps their fixed cost small)."""


_OCCURRENCE_CODE = {"deviated": 0, "pending": 1, "upcoming": 2}


def _names(prefix, n):
    return [f"{prefix}{i}" for i in range(n)]


_REG_FIELDS = ("present", "confidence", "lift", "active", "deviated", "pending", "upcoming", "distance",
               "behaviour0", "behaviour1", "behaviour2")
FEATURE_NAMES = tuple(
    ["phase", "scope_sports", "scope_home", "scope_code", "time_sin", "time_cos", "progress"]
    + [f"weekday{i}" for i in range(7)]
    + ["observed"] + _names("kind", MAX_KINDS) + _names("fact", MAX_FACTS) + _names("value", MAX_VALUES)
    + ["evidence", "feasible"]
    + ["tokens_events", "tokens_trajectories", "tokens_regularities", "budget_left"]
    + ["intervened_today", "since_intervention", "duplicate"]
    + ["loaded_events", "loaded_trajectories", "loaded_regularities"]
    + ["ev_count"] + _names("ev_usual_now", N_BEHAVIOURS) + _names("ev_usual_before", N_BEHAVIOURS)
    + _names("ev_today", N_BEHAVIOURS)
    + ["tr_days", "tr_segments"] + _names("tr_usual_now", N_BEHAVIOURS) + _names("tr_usual_before", N_BEHAVIOURS)
    + ["rg_eligible", "rg_actionable"] + [f"rg{k}_{f}" for k in range(3) for f in _REG_FIELDS]
)
N_FEATURES = len(FEATURE_NAMES)
F = {name: i for i, name in enumerate(FEATURE_NAMES)}
RETRIEVED = slice(F["loaded_events"], N_FEATURES)
_PHASE, _BUDGET_LEFT, _DUPLICATE = F["phase"], F["budget_left"], F["duplicate"]
_INTERVENED_TODAY, _SINCE_INTERVENTION = F["intervened_today"], F["since_intervention"]
_EV = slice(F["ev_count"], F["tr_days"])
_TR = slice(F["tr_days"], F["rg_eligible"])
_RG = slice(F["rg_eligible"], N_FEATURES)
_INFO_NEUTRAL = {"event": 0, "sub_step": 0, "depth": -1, "tokens": 0, "downgraded": False, "proposed": False,
                 "mode": -1, "decision": False, "suppressed": False, "service": -1, "label": -1}
"""The keys of the per-step info, in order, with the values an entry keeps where a sub-step does not report it."""


@numba.njit(cache=True)
def _event_layer(tod, day, behaviour_bits, event_lo, t0, t1, out):
    """Event-layer features of events ``t0 <= t < t1`` into ``out[t − t0]``: context size / 99, then per behaviour the share of
    the previous days in the context (``event_lo[t] .. t − 1``; a day counts when it has any event there) with the
    behaviour within ±30 min of now, the same share within the last two hours, and whether today's events up to
    ``t`` show it within the last two hours."""
    n_b = behaviour_bits.shape[1]
    now = np.zeros(n_b, np.int64)
    before = np.zeros(n_b, np.int64)
    for t in range(t0, t1):
        m, d, lo = tod[t], day[t], event_lo[t]
        out[t - t0, 0] = (t - lo) / 99
        now[:], before[:] = 0, 0
        n_days, i = 0, lo
        while i < t and day[i] != d:                 # times are sorted: the previous days come first, each a run
            j, current = i, day[i]
            for b in range(n_b):
                seen_now = seen_before = False
                k = i
                while k < t and day[k] == current:
                    if behaviour_bits[k, b]:
                        seen_now |= m - USUAL_NOW <= tod[k] <= m + USUAL_NOW
                        seen_before |= m - USUAL_BEFORE <= tod[k] <= m - 1
                    k += 1
                now[b] += seen_now
                before[b] += seen_before
                j = k
            n_days += 1
            i = j
        for b in range(n_b):
            out[t - t0, 1 + b] = now[b] / n_days if n_days else 0.0
            out[t - t0, 1 + n_b + b] = before[b] / n_days if n_days else 0.0
            today = False
            for k in range(i, t + 1):
                today |= behaviour_bits[k, b] and m - USUAL_BEFORE <= tod[k] <= m
            out[t - t0, 1 + 2 * n_b + b] = today


@numba.njit(cache=True)
def _trajectory_layer(tod, view_of, view_ptr, view_records, occurrence_ptr, occurrence_tod, n_b, out):
    """Per event ``t``, the shares of the trajectory layer into ``out[t, 2:]``: per behaviour, the share of the
    records (with segments) of the event's cycle view ``view_of[t]`` that claim the behaviour within ±30 min of
    now, then the same share within the last two hours. Record ``r``'s claim times of behaviour ``b`` are
    ``occurrence_tod[occurrence_ptr[r * n_b + b]:occurrence_ptr[r * n_b + b + 1]]``."""
    for t in range(tod.size):
        m, v = tod[t], view_of[t]
        n_records = view_ptr[v + 1] - view_ptr[v]
        for b in range(n_b):
            now = before = 0
            for k in range(view_ptr[v], view_ptr[v + 1]):
                r = view_records[k]
                seen_now = seen_before = False
                for j in range(occurrence_ptr[r * n_b + b], occurrence_ptr[r * n_b + b + 1]):
                    seen_now |= m - USUAL_NOW <= occurrence_tod[j] <= m + USUAL_NOW
                    seen_before |= m - USUAL_BEFORE <= occurrence_tod[j] <= m - 1
                now += seen_now
                before += seen_before
            out[t, 2 + b] = now / n_records if n_records else 0.0
            out[t, 2 + n_b + b] = before / n_records if n_records else 0.0


class ProactiveStreamEnv(Render, gym.Env):
    """
    ## Description

    A proactive assistant follows one isolated event stream — a HeartSteps-like participant (``sports``), a
    CASAS-like home (``home``) or a GitHub repository (``code``) — and decides for every event whether to offer
    assistance (ProactMem). Its memory (:mod:`membudget.envs.proactive.memory`) holds three layers:
    bounded event memory (72 h, at most 99 prior events), source-validated daily trajectories of the current weekly
    cycle, and behavioural regularities assessed by historical replay and matched to the current conditions.
    Consulting deeper layers costs tokens. Per event there are two sub-steps: choose the memory depth, then — with
    what it retrieved in the observation — intervene or abstain. Intervention control (appendix B.3) turns an
    intervention whose key repeats an earlier allowed one into an abstention. Streams, memory construction and the
    reference labels (ProactMem eq. 9, :mod:`membudget.envs.proactive.world`) do not depend on the agent's actions;
    labels are never part of the observation.

    ## Action Space

    ``Discrete(3)`` in both sub-steps. Sub-step ``depth`` (observation ``phase`` = 0): 0 events, 1 + trajectories,
    2 + regularities. Sub-step ``decide`` (``phase`` = 1): 0 abstain, 1 intervene with an immediate service, 2
    intervene with a scheduled service. Seed 002 scores immediate and scheduled services alike as *intervene* at
    the decision event (§5.1). In Code the mode is part of the intervention-control key (appendix B.3: the most
    recent allowed intervention's mode), so there a scheduled service does not repeat an immediate one; Sports and
    Home keys do not contain it.

    ## Observation Space

    ``Box(0, 1, (125,), float32)`` (``N_FEATURES``); names in ``FEATURE_NAMES``: the sub-step, the scope, time of
    day (sin / cos scaled to [0, 1]), progress through the stream (day / the configured ``n_days``), weekday; the
    current event (observed flag, kind, fact bits, numeric values, the scope's public evidence and feasibility
    predicates); the token cost of each depth / 20,000 and the share of the token budget left; intervention-control
    state (an intervention allowed today, minutes since the last / 1440, whether an immediate intervention now would
    be suppressed as a duplicate — decide sub-step only); and, in the decide sub-step, what the consulted layers
    returned (zeros for layers not consulted):
    event layer — events in context and, for each tracked behaviour, the share of the previous days in context on
    which it happened about now (±30 min) and in the last two hours, and whether it happened today in the last two
    hours; trajectory layer — days and segments of the cycle and the same two shares over its daily records;
    regularity layer — eligible regularities, whether a matched active regularity is in an actionable occurrence
    state, and the top-3 matches (confidence, lift / 3, active or weakening, occurrence state, distance / 240 min,
    behaviour).

    ## Rewards

    Depth sub-step: ``−token_weight · tokens`` of the memory loaded. Decide sub-step: ``+1`` for an intervention on a
    reference opportunity, ``−intrusion_penalty`` for one on a reference negative, 0 for an abstention (suppressed
    duplicates are abstentions).

    ## Starting State

    ``reset(seed=s)`` draws stream ``s`` of the scope and builds the memory trace and features of its first week
    (the steps build the rest as the episode reaches it; ``env.trace`` is the whole stream's trace);
    ``options={"stream": Stream}`` replays a given stream instead.

    ## Episode End

    Terminates after the decision on the last event; never truncates. ``info`` at reset and after either sub-step
    has the same keys, fixed shapes and numeric dtypes: ``event``, ``sub_step`` (0 depth, 1 decide: the sub-step
    just taken; 0 at reset), ``depth`` (realised, after a budget downgrade; −1: the current event alone), ``tokens``
    (loaded by this depth sub-step; 0 after a decision), ``downgraded``; ``proposed``, ``mode`` (index in
    ``MODES``), ``service`` (index in the scope's services), ``decision``, ``suppressed``, ``label`` (after a
    decide sub-step; -1 / False after a depth sub-step); at the end
    ``info["episode_metrics"]``: the confusion counts, relevance, coverage, effectiveness, intrusion, balance,
    frequency, total tokens and return.

    ## Arguments

    - ``scope``: ``"sports"`` (default), ``"home"`` or ``"code"``.
    - ``n_days``: stream length in days (default 56 / 28 / 70 by scope).
    - ``memory``: ``"full"`` (default), ``"no_replay_gate"`` or ``"no_validation"`` (ProactMem's Table 4 ablations).
    - ``intrusion_penalty``: cost of a false intervention (0.5), in [0, ``MAX_REWARD_WEIGHT``] (1e6).
    - ``token_weight``: reward per memory token (2e-6), in [0, ``MAX_REWARD_WEIGHT``].
    - ``token_budget``: optional episode token budget; a depth the remaining budget cannot pay is downgraded to the
      deepest affordable one (to the current event alone, 0 tokens, when none is), so the budget is never exceeded.
    - ``hallucination_rate``: error rate of the deterministic trajectory summariser (0.1).
    - ``render_mode``: ``"ansi"``, ``"human"``, ``"rgb_array"`` (the stream so far as a picture: each event's
      memory depth and decision against the reference label, and the tokens spent) or None.

    ## Version History

    - v0: initial version.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 25}
    _name = "ProactiveStream-v0"
    _scopes = staticmethod(check_scope)
    _generate = staticmethod(generate_stream)
    _memory_options: dict = {}
    """Extra :class:`~.memory.ProactiveMemory` arguments of this version."""

    def __init__(self, scope="sports", n_days=None, memory="full", intrusion_penalty=0.5, token_weight=2e-6,
                 token_budget=None, hallucination_rate=0.1, render_mode=None):
        self.scope_spec = self._scopes(scope)
        if memory not in MEMORY_VARIANTS:
            raise ValueError(f"unknown memory variant {memory!r}; choose one of {MEMORY_VARIANTS}")
        check_number("intrusion_penalty", intrusion_penalty, 0, MAX_REWARD_WEIGHT)
        check_number("token_weight", token_weight, 0, MAX_REWARD_WEIGHT)
        check_number("hallucination_rate", hallucination_rate, 0, 1)
        check_int("token_budget", token_budget, 1, none_ok=True)
        check_render_mode(render_mode, self._name)
        if n_days is not None:
            self._generate(0, scope=scope, n_days=n_days)   # validates n_days with the generator's message
        self.scope, self.n_days, self.memory = scope, n_days, memory
        self.intrusion_penalty, self.token_weight = float(intrusion_penalty), float(token_weight)
        self.token_budget, self.hallucination_rate = token_budget, float(hallucination_rate)
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(3)
        self.observation_space = spaces.Box(0.0, 1.0, (N_FEATURES,), dtype=np.float32)
        self.stream: Stream | None = None
        self._drawn: np.ndarray | None = None

    # ------------------------------------------------------------------------------------------- precomputation

    def _precompute(self):
        """Everything that does not depend on the agent and needs no memory: per event the static features, the
        intervention-key parts and the labels; the rest (:meth:`_extend`) is built as the episode reaches it."""
        s, spec = self.stream, self.scope_spec
        n = len(s)
        tod = s.time % MINUTES_PER_DAY
        day = s.time // MINUTES_PER_DAY
        static = np.zeros((n, N_FEATURES), np.float32)
        retrieved = np.zeros((3, n, N_FEATURES - RETRIEVED.start), np.float32)   # the RETRIEVED columns
        bits = (s.facts[:, None] >> np.arange(MAX_FACTS)) & 1
        static[:, F["scope_" + s.scope]] = 1
        angle = 2 * np.pi * tod / MINUTES_PER_DAY
        static[:, F["time_sin"]], static[:, F["time_cos"]] = (np.sin(angle) + 1) / 2, (np.cos(angle) + 1) / 2
        static[:, F["progress"]] = np.minimum(1.0, day / (self.n_days or DEFAULT_DAYS[self.scope]))
        static[np.arange(n), F["weekday0"] + day % 7] = 1
        static[:, F["observed"]] = s.observed
        static[np.arange(n), F["kind0"] + s.kind] = 1
        static[:, F["fact0"]:F["fact0"] + MAX_FACTS] = bits
        static[:, F["value0"]:F["value0"] + s.values.shape[1]] = s.values
        static[:, _BUDGET_LEFT] = static[:, _SINCE_INTERVENTION] = 1.0   # before any spending / intervention
        self._evidence, self._feasible = evidence_all(s), feasible_all(s)
        static[:, F["evidence"]], static[:, F["feasible"]] = self._evidence >= 0, self._feasible
        retrieved[:, :, F["loaded_events"] - RETRIEVED.start] = 1
        retrieved[1:, :, F["loaded_trajectories"] - RETRIEVED.start] = 1
        retrieved[2, :, F["loaded_regularities"] - RETRIEVED.start] = 1
        self._tod, self._behaviour_bits = tod, bits[:, list(spec.behaviour_ids)].astype(np.bool_)
        self._static, self._retrieved, self._tokens = static, retrieved, np.zeros((n, 3), np.int64)
        self._reg_ids = [()] * n
        self._actionable_service = np.full(n, -1)
        self._token_rows, self._labels = [], s.label.tolist()
        self._key_state = self._episode_states()
        self._ready, self._chunk_days = 0, FIRST_CHUNK_DAYS

    def _extend(self):
        """Build the memory trace and the memory features (what each depth retrieves and costs) of the events of
        the next chunk of days: they depend only on the events before them, so the reset builds the first days
        (:data:`FIRST_CHUNK_DAYS`) and the steps the others as the episode reaches them, with the same results as
        building them all at once."""
        spec, t0 = self.scope_spec, self._ready
        t1 = bisect_left(self._day, self._day[t0] + self._chunk_days, t0)
        self._chunk_days *= 2
        trace = self._memory.advance(t1 - 1)
        tod, behaviours, retrieved, tokens = self._tod, spec.behaviour_ids, self._retrieved, self._tokens[t0:t1]
        lo = trace.event_lo[t0:t1]
        n_segments, n_matches = trace.n_segments[t0:t1], np.zeros(t1 - t0, np.int64)
        # event layer: the previous days in context, and today
        ev = np.zeros((t1 - t0, _EV.stop - _EV.start))
        _event_layer(tod, self._day_array, self._behaviour_bits, trace.event_lo, t0, t1, ev)
        retrieved[:, t0:t1, _EV.start - RETRIEVED.start:_EV.stop - RETRIEVED.start] = ev
        # trajectory layer: the accepted daily records of the current cycle
        tr = np.zeros((t1 - t0, _TR.stop - _TR.start))
        tr[:, 1] = np.minimum(1.0, n_segments / 60)
        _trajectory_layer(tod[t0:t1], *self._cycle_views(trace.cycle_records[t0:t1], tr[:, 0]), len(behaviours), tr)
        retrieved[1:, t0:t1, _TR.start - RETRIEVED.start:_TR.stop - RETRIEVED.start] = tr
        # regularity layer
        rg = np.zeros((t1 - t0, _RG.stop - _RG.start), np.float32)
        rg[:, 0] = np.minimum(1.0, trace.n_eligible[t0:t1] / 20)
        rows = []                                     # per match: event, rank, confidence, lift, distance, codes
        for t, matches in enumerate(trace.matches[t0:t1], t0):
            if not matches:
                continue
            n_matches[t - t0] = len(matches)
            service = -1
            for k, mt in enumerate(matches):
                active = mt.state == "active"
                rows.append((t - t0, k, mt.confidence, mt.lift, mt.distance, active, _OCCURRENCE_CODE[mt.occurrence],
                             behaviours.index(mt.behaviour)))
                if service < 0 and active and mt.occurrence in spec.actionable:
                    service = self._routine_service(mt.behaviour)
            rg[t - t0, 1] = service >= 0
            self._actionable_service[t] = service
            self._reg_ids[t] = tuple(sorted(mt.rid for mt in matches))
        if rows:
            t, k, confidence, lift, distance, active, occurrence, behaviour = np.array(rows).T
            t, o = t.astype(np.int64), 2 + k.astype(np.int64) * len(_REG_FIELDS)
            rg[t, o] = 1
            rg[t, o + 1], rg[t, o + 2], rg[t, o + 3] = confidence, np.minimum(1.0, lift / 3), active
            rg[t, o + 4 + occurrence.astype(np.int64)] = 1          # deviated, pending, upcoming
            rg[t, o + 7] = np.minimum(1.0, distance / 240)
            rg[t, o + 8 + behaviour.astype(np.int64)] = 1
        retrieved[2, t0:t1, _RG.start - RETRIEVED.start:] = rg
        tokens[:, 0] = (np.arange(t0, t1) - lo) * spec.event_tokens
        tokens[:, 1] = tokens[:, 0] + n_segments * spec.segment_tokens
        tokens[:, 2] = tokens[:, 1] + spec.matching_overhead_tokens + n_matches * spec.regularity_tokens
        self._static[t0:t1, F["tokens_events"]:F["tokens_events"] + 3] = np.minimum(1.0, tokens / TOKEN_SCALE)
        self._token_rows += tokens.tolist()
        self._ready = t1

    def _cycle_views(self, cycle_records, n_records_share) -> tuple:
        """The cycle views ``cycle_records`` (``W_t`` of a stretch of events, one tuple of records per run of
        events) as flat arrays for :func:`_trajectory_layer`; fills ``n_records_share`` with each event's
        records / 7."""
        behaviours = self.scope_spec.behaviour_ids
        view_of, view_ptr, view_records = np.empty(len(cycle_records), np.int64), [0], []
        occurrence_ptr, occurrence_tod, index = [0], [], {}
        previous, v = None, -1
        for t, records in enumerate(cycle_records):
            if records is not previous:
                previous, v = records, v + 1
                for r in records:
                    if not r.segments:
                        continue
                    if id(r) not in index:
                        index[id(r)] = len(index)
                        for b in behaviours:
                            occurrence_tod.extend(x % MINUTES_PER_DAY for x in r.occurrences(b))
                            occurrence_ptr.append(len(occurrence_tod))
                    view_records.append(index[id(r)])
                view_ptr.append(len(view_records))
                share = len(records) / 7
            view_of[t] = v
            n_records_share[t] = share
        return (view_of, np.array(view_ptr, np.int64), np.array(view_records, np.int64),
                np.array(occurrence_ptr, np.int64), np.array(occurrence_tod, np.int64))

    def _episode_states(self) -> list:
        """Per event, the scope's episode state in the intervention-control key (B.3): Sports — availability and
        activity; Home — active rooms and motion with the phase (1, 2, 3+ consecutive same-day events alike); Code —
        the CI failure run (green default-branch pushes so far)."""
        s, spec = self.stream, self.scope_spec
        facts = s.facts.astype(np.int64)
        if self.scope == "code":
            green = (facts & spec.bit("ci=success")).astype(bool) & (facts & spec.bit("branch=default")).astype(bool)
            return np.cumsum(green).tolist()
        prefixes = ("available", "activity=") if self.scope == "sports" else ("room=", "motion=")
        state = facts & sum(spec.bit(f) for f in spec.facts if f.startswith(prefixes))
        if self.scope == "sports":
            return state.tolist()
        day = s.time // MINUTES_PER_DAY
        fresh = np.ones(len(s), bool)                 # the event starts a run of one state within a day
        fresh[1:] = (state[1:] != state[:-1]) | (day[1:] != day[:-1])
        run_start = np.maximum.accumulate(np.where(fresh, np.arange(len(s)), 0))
        phases = np.minimum(3, np.arange(len(s)) - run_start + 1)
        return list(zip(state.tolist(), phases.tolist()))

    def _routine_service(self, behaviour: int) -> int:
        name = self.scope_spec.facts[behaviour]
        if self.scope == "code":
            return self.scope_spec.services.index("triage_help" if name == "response=maintainer" else "review_help")
        return 0

    # ------------------------------------------------------------------------------------ intervention control

    def _proposal(self, t: int, depth: int) -> tuple:
        """The service an intervention at event ``t`` proposes from the context of ``depth``, and its key (B.3)
        before the mode (:meth:`_key`)."""
        s, spec = self.stream, self.scope_spec
        routine_driven = depth == 2 and self._actionable_service[t] >= 0
        service = int(self._actionable_service[t]) if routine_driven else max(0, int(self._evidence[t]))
        reg_ids = self._reg_ids[t] if depth == 2 else ()
        d = self._day[t]
        if self.scope != "code":
            return service, (self.scope, d, self._key_state[t], service, reg_ids)
        if routine_driven:
            target, condition = ("regularity", reg_ids), d
        elif service == spec.services.index("ci_fix_help"):
            target, condition = ("object", int(s.object_id[t])), self._key_state[t]
        else:
            target, condition = ("object", int(s.object_id[t])), 0
        return service, ("code", target, service, condition)

    def _key(self, mode: int) -> tuple:
        """The current proposal's key for decide action ``mode`` (1 immediate, 2 scheduled): Code keys carry the
        mode (the most recent allowed intervention's mode, B.3), Sports and Home keys do not."""
        key = self._offer[1]
        return key + (mode,) if self.scope == "code" else key

    # ---------------------------------------------------------------------------------------------------- API

    def _obs(self) -> np.ndarray:
        t = min(self._t, self._n - 1)
        obs = self._static[t].copy()
        if self.token_budget is not None:
            obs[_BUDGET_LEFT] = max(0.0, 1 - self._spent / self.token_budget)
        if self._last_time is not None:
            obs[_INTERVENED_TODAY] = self._last_day == self._day[t]
            obs[_SINCE_INTERVENTION] = min(1.0, (self._time[t] - self._last_time) / MINUTES_PER_DAY)
        if self._phase == 1:
            obs[_PHASE] = 1
            if self._depth >= 0:
                obs[RETRIEVED] = self._retrieved[self._depth, t]
            obs[_DUPLICATE] = self._key(1) in self._allowed
        return obs

    def reset(self, *, seed=None, options=None):
        seed = check_int("seed", seed, 0, none_ok=True)
        options = check_options(options, ("stream",))
        stream = options.get("stream")
        if "stream" in options:
            if not isinstance(stream, Stream) or stream.scope != self.scope:
                raise ValueError(f"options['stream'] must be a Stream of scope {self.scope!r}")
            stream.validate(self.scope_spec)
            if len(stream) == 0:
                raise ValueError("options['stream'] has no events; a stream needs at least one")
        super().reset(seed=seed)  # after the checks: a refused reset leaves the generator as it was
        if "stream" not in options:
            stream = self._generate(scope=self.scope, n_days=self.n_days, rng=self.np_random)
        self.stream = stream
        self._memory = ProactiveMemory(stream, self.scope_spec, validate=self.memory != "no_validation",
                                       replay_gate=self.memory != "no_replay_gate",
                                       hallucination_rate=self.hallucination_rate,
                                       seed=int(self.np_random.integers(2**31)), **self._memory_options)
        self._n, self._time = len(stream), stream.time.tolist()
        self._day_array = stream.time // MINUTES_PER_DAY
        self._day = self._day_array.tolist()
        self._precompute()
        self._extend()
        self._t, self._phase, self._depth = 0, 0, 0
        self._spent, self._return = 0, 0.0
        self._allowed: set = set()
        self._last_day, self._last_time = None, None
        self._counts = dict(tp=0, fp=0, fn=0, tn=0, suppressed=0)
        if self._pictures:  # per event: depth, decision (0 abstain, 1 intervene, 2 suppressed), tokens
            self._drawn = np.zeros((self._n, 3), dtype=np.int64)
        return self._obs(), self._info()

    @staticmethod
    def _info(**values) -> dict:
        """The per-step info: the keys of :data:`_INFO_NEUTRAL`, in its order, after either sub-step; the entries
        that a sub-step does not report (the other sub-step's) keep their neutral values."""
        info = dict(_INFO_NEUTRAL)
        info.update(values)
        return info

    def step(self, action):
        if self.stream is None:
            raise RuntimeError("call reset() before step()")
        if self._t >= self._n:
            raise RuntimeError("the stream has ended; call reset()")
        a, t = check_discrete_action(action, 3), self._t
        if self._phase == 0:
            depth = a
            costs = self._token_rows[t]
            cost = costs[depth]
            if self.token_budget is not None:
                while depth >= 0 and self._spent + cost > self.token_budget:
                    depth -= 1
                    cost = costs[depth] if depth >= 0 else 0
            self._spent += cost
            self._depth, self._phase = depth, 1
            self._offer = self._proposal(t, depth)
            reward = -self.token_weight * cost
            self._return += reward
            if self._drawn is not None:
                self._drawn[t, 0], self._drawn[t, 2] = depth, cost
            return self._obs(), reward, False, False, self._info(event=t, depth=depth, tokens=cost,
                                                                 downgraded=depth != a)
        service, key = self._offer[0], self._key(a)
        suppressed = bool(a) and key in self._allowed
        decision = bool(a) and not suppressed
        label = self._labels[t]
        if decision:
            self._allowed.add(key)
            self._last_day, self._last_time = self._day[t], self._time[t]
        reward = (1.0 if label else -self.intrusion_penalty) if decision else 0.0
        self._counts["tp" if decision and label else "fp" if decision else "fn" if label else "tn"] += 1
        self._counts["suppressed"] += suppressed
        self._return += reward
        if self._drawn is not None:
            self._drawn[t, 1] = 2 if suppressed else decision
        self._t, self._phase = t + 1, 0
        terminated = self._t >= self._n
        if self._t == self._ready and not terminated:
            self._extend()
        info = self._info(event=t, sub_step=1, depth=self._depth, proposed=bool(a), mode=a, decision=decision,
                          suppressed=suppressed, service=int(service), label=label)
        if terminated:
            info["episode_metrics"] = dict(episode_metrics(**{k: self._counts[k] for k in ("tp", "fp", "fn", "tn")}),
                                           suppressed=self._counts["suppressed"], total_tokens=self._spent,
                                           n_events=len(self.stream), **{"return": self._return})
        return self._obs(), reward, terminated, False, info

    @property
    def trace(self) -> MemoryTrace:
        """The stream's memory trace, complete (the days the episode has not reached yet are built now)."""
        return self._memory.trace()

    @property
    def event_index(self) -> int:
        """Index of the event the next action is for."""
        return self._t

    def _text(self) -> str:
        if self.stream is None:
            return f"{self._name}: call reset() first"
        c = self._counts
        return (f"{self._name} ({self.scope}) event {self._t}/{len(self.stream)}  sub-step "
                f"{'depth' if self._phase == 0 else 'decide'}  tokens spent {self._spent}  "
                f"TP {c['tp']} FP {c['fp']} FN {c['fn']} TN {c['tn']} suppressed {c['suppressed']}")

    def _picture(self) -> np.ndarray:
        if self.stream is None:
            return blank_frame(f"{self._name}: call reset() first")
        t, n = self._t, self._n
        depth, decided, tokens = self._drawn[:t].T
        label = np.asarray(self._labels[:t], dtype=bool)
        day = self.stream.time / MINUTES_PER_DAY
        end = self.n_days or DEFAULT_DAYS[self.scope]
        x = day[:t]
        fig = new_figure()
        grid = fig.add_gridspec(3, 1, height_ratios=(2, 1.6, 1.3), left=0.19, right=0.98, top=0.84, bottom=0.16,
                                hspace=0.3)
        dax = fig.add_subplot(grid[0])
        cax = fig.add_subplot(grid[1], sharex=dax)
        tax = fig.add_subplot(grid[2], sharex=dax)
        dax.scatter(x, depth, s=10, c=C_QUERIED, marker="|", linewidths=1.2)
        dax.set_yticks(range(-1, len(DEPTHS)), ["current event only", *(f"+ {d}" if i else d for i, d in
                                                                       enumerate(DEPTHS))], fontsize=7)
        dax.set_ylim(len(DEPTHS) - 0.5, -1.5)
        dax.set_title("memory depth consulted", fontsize=8, loc="left", pad=2)
        rows = {"intervened": 0, "suppressed (duplicate)": 1, "abstained": 2}
        for name, mask, row, colour, marker in (
                ("TP: intervened on an opportunity", (decided == 1) & label, 0, C_GOOD, "o"),
                ("FP: intervened on a negative", (decided == 1) & ~label, 0, C_BAD, "X"),
                ("suppressed duplicate", decided == 2, 1, C_NEUTRAL, "s"),
                ("FN: missed opportunity", (decided != 1) & label, 2, C_MISS, "v")):
            cax.scatter(x[mask], np.full(int(mask.sum()), row), s=22, c=colour, marker=marker, linewidths=0,
                        label=name)
        cax.set_yticks(list(rows.values()), list(rows), fontsize=7)
        cax.set_ylim(2.6, -0.6)
        cax.set_title("decision against the reference label (true negatives not drawn)", fontsize=8, loc="left",
                      pad=2)
        fig.legend(*cax.get_legend_handles_labels(), fontsize=7, loc="lower center", ncol=4, frameon=False)
        cum = np.concatenate([[0], np.cumsum(tokens)])
        tax.step(np.concatenate([[0.0], x]), cum, where="post", color=C_QUERIED, linewidth=1.5)
        if self.token_budget is not None:
            tax.axhline(self.token_budget, color=C_BAD, linestyle="--", linewidth=1, label="token budget")
            tax.legend(fontsize=7, loc="upper left")
        tax.set_ylabel("tokens\nspent", fontsize=7)
        tax.set_xlabel("day", fontsize=8)
        for panel in (dax, cax, tax):
            panel.tick_params(labelsize=7)
            if t < n:
                panel.axvspan(day[t], max(end, day[-1]), color=C_FUTURE, zorder=0)
        for panel in (dax, cax):
            panel.tick_params(labelbottom=False)
        dax.set_xlim(0, max(end, day[-1]))
        c = self._counts
        m = episode_metrics(c["tp"], c["fp"], c["fn"], c["tn"])
        fig.suptitle(f"{self._name} ({self.scope}, memory {self.memory})  event {t}/{n}, next sub-step "
                     f"{'depth' if self._phase == 0 else 'decide'}\nTP {c['tp']}, FP {c['fp']}, FN {c['fn']}, "
                     f"TN {c['tn']}, suppressed {c['suppressed']}; effectiveness {m['effectiveness']:.3f}, "
                     f"tokens {self._spent:,}, return {self._return:.2f}", fontsize=9, x=0.02, ha="left", y=0.985)
        return figure_array(fig)

    @property
    def phase(self) -> int:
        """The sub-step the next action is for: 0 depth, 1 decide."""
        return self._phase


def episode_metrics(tp: int, fp: int, fn: int, tn: int) -> dict:
    """Seed 002's metrics (appendix B.4) from confusion counts; an empty denominator gives 0."""
    div = lambda a, b: a / b if b else 0.0
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "relevance": div(tp, tp + fp), "coverage": div(tp, tp + fn), "effectiveness": div(2 * tp, 2 * tp + fp + fn),
            "intrusion": div(fp, fp + tn), "balance": 0.5 * (div(tp, tp + fn) + div(tn, tn + fp)),
            "frequency": div(tp + fp, tp + fn)}


__all__ = ["DEPTHS", "FEATURE_NAMES", "MEMORY_VARIANTS", "MODES", "N_FEATURES", "ProactiveStreamEnv", "episode_metrics"]

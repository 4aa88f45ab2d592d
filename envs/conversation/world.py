"""The conversation world: one long user-agent conversation with GoodAI-LTM-style prospective-memory and
trigger-response tests, drawn at reset from the seed.

A :class:`Conversation` is everything that happens in one conversation, independent of the agent's actions: the
kind of every user message, the memories (one per test) and when each is live, the steps at which each memory
truly fires, the cheap similarity of every (message, memory) pair, the features the agent sees, and the semantic
verifier's answer on every candidate pair (a pair passing the similarity gate). :func:`generate_conversation` is a
pure function of ``(seed, config)``. :func:`to_pm_episode` states the same conversation as a
:class:`~membudget.envs.pm.Episode` of verifier resources, so that PMWeek-v0's executor and controller
(:class:`~membudget.envs.pm.core.PMWeekCore`) and its teachers run it unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..pm.world import KIND_CHANNEL, LURE, NEVER, POS, Episode
from ..validation import check_int, check_number

TEST_KINDS = ("prospective", "trigger")
PROSPECTIVE, TRIGGER = 0, 1
MESSAGE_KINDS = ("filler", "other_test", "pm_quote", "pm_instruction", "tr_setup", "tr_trigger", "tr_lure", "reset")
(M_FILLER, M_OTHER, M_QUOTE, M_INSTRUCTION, M_SETUP, M_TRIGGER, M_LURE, M_RESET) = range(len(MESSAGE_KINDS))
ACTIVATIONS = 3
"""Trigger activations per trigger-response test (GoodAI's ``trigger_activations``)."""
ACTIVATION_FRACTIONS = (0.3, 0.6, 0.9)
"""Each activation comes at least this fraction of the test's span after its setup (GoodAI's default waits)."""
GOODAI_FEATURE_NAMES = ("semantic_resource", "semantic_trigger_fraction", "token_similarity", "fuzzy_similarity",
                        "memory_age", "repeat_fraction", "active_memory_count")
MAX_HORIZON = 10_000
MAX_TESTS = 64


def _check_range(name, value, low, high):
    if not isinstance(value, tuple) or len(value) != 2:
        raise ValueError(f"{name} must be a range (lo, hi), got {value!r}")
    lo = check_int(f"{name}[0]", value[0], low, high)
    check_int(f"{name}[1]", value[1], lo, high)


@dataclass(frozen=True)
class ConversationConfig:
    """Parameters of the conversation generator (defaults: BudgetPM's GoodAI setting, see the env's page)."""

    horizon: int = 66
    """User messages per conversation (decision steps); BudgetPM's development-median horizon."""
    n_prospective: int = 3
    """Prospective-memory tests (GoodAI: 3 examples per dataset)."""
    n_trigger: int = 3
    """Trigger-response tests."""
    ordinal: tuple = (2, 8)
    """Range (inclusive) of n: the quote goes into the n-th reply, counting the reply to the instruction as 1st."""
    quote_gap: tuple = (3, 12)
    """Range (inclusive) of user messages from a quote to its instruction."""
    trigger_span: tuple = (24, 44)
    """Range (inclusive) of a trigger-response test's span in user messages (activations at >= 30/60/90 %)."""
    lures: float = 2.0
    """Mean number of lures per trigger-response test: other lines lexically close to its condition."""
    p_other_test: float = 0.5
    """Probability that a free step carries another (unscored) test's line rather than trivia filler."""
    p_overlap: float = 0.26
    """Probability that an unrelated message shares a content word with a live condition (passes the gate)."""
    gate: float = 0.05
    """Similarity gate: a (message, memory) pair is a candidate when its similarity is at least this."""
    p_miss_trigger: float = 0.03
    """Verifier error: P(answers "does not fire" | a trigger activation truly fires)."""
    p_miss_prospective: float = 0.01
    """Verifier error: P(answers "not the n-th reply" | it is)."""
    p_false_lure: float = 0.2
    """Verifier error: P(answers "fires" | the message is a lure of that memory)."""
    p_false: float = 0.02
    """Verifier error: P(answers "fires" | a trigger-response pair that neither fires nor is a lure)."""
    p_false_prospective: float = 0.003
    """Verifier error: P(answers "this is the n-th reply" | it is another reply)."""

    def __post_init__(self):
        for name in ("ordinal", "quote_gap", "trigger_span"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        check_int("horizon", self.horizon, 2, MAX_HORIZON)
        check_int("n_prospective", self.n_prospective, 1, MAX_TESTS)
        check_int("n_trigger", self.n_trigger, 1, MAX_TESTS)
        _check_range("ordinal", self.ordinal, 1, MAX_HORIZON)
        _check_range("quote_gap", self.quote_gap, 1, MAX_HORIZON)
        _check_range("trigger_span", self.trigger_span, 4, MAX_HORIZON)
        check_number("lures", self.lures, 0, 100)
        for name in ("p_other_test", "p_overlap", "p_miss_trigger", "p_miss_prospective", "p_false_lure", "p_false",
                     "p_false_prospective"):
            check_number(name, getattr(self, name), 0, 1)
        check_number("gate", self.gate, 0, 1, low_open=True)

    @property
    def resources(self) -> tuple:
        """Names of the memory slots (one queryable verifier resource per test)."""
        return tuple(f"pm{j + 1}" for j in range(self.n_prospective)) + \
            tuple(f"tr{j + 1}" for j in range(self.n_trigger))


@dataclass(eq=False)
class Conversation:
    """One frozen conversation. Per-test fields are parallel arrays (test ``j`` is memory slot / resource ``j``);
    per-pair fields are ``(T, R)`` arrays.

    - ``message_kind[t]`` indexes :data:`MESSAGE_KINDS`; ``message_test[t]`` is the test a line belongs to
      (-1 for filler and other tests' lines).
    - ``test_kind[j]`` indexes :data:`TEST_KINDS`; the memory is stored at ``stored[j]`` (the quote, or the
      trigger-response setup) and live — queryable — over ``live_from[j]..live_until[j]``; ``ordinal[j]`` is n
      of a prospective test (0 for a trigger test); ``fires[j]`` are the steps at which it truly fires (one
      for prospective memory: the n-th reply; three activations for trigger response).
    - ``token_similarity``, ``fuzzy_similarity``, ``repeat_fraction``: what a cheap lexical matcher sees (zero
      where the memory is not live); a pair is a candidate when live and ``token_similarity >= gate``.
    - ``verifier[t, r]``: 1 if the semantic verifier answers "fires" on candidate pair (t, r), else 0 (and 0 on
      every non-candidate pair: the verifier is never asked there).
    """

    horizon: int
    gate: float
    message_kind: np.ndarray
    message_test: np.ndarray
    test_ids: tuple
    test_kind: np.ndarray
    stored: np.ndarray
    live_from: np.ndarray
    live_until: np.ndarray
    ordinal: np.ndarray
    fires: tuple
    token_similarity: np.ndarray
    fuzzy_similarity: np.ndarray
    repeat_fraction: np.ndarray
    verifier: np.ndarray
    meta: dict = field(default_factory=dict)

    @property
    def n_resources(self) -> int:
        return len(self.test_ids)

    def live(self) -> np.ndarray:
        """``(T, R)`` bool: memory ``r`` is live at step ``t``."""
        t = np.arange(self.horizon)[:, None]
        return (self.live_from[None, :] <= t) & (t <= self.live_until[None, :])

    def candidates(self) -> np.ndarray:
        """``(T, R)`` bool: the pair passes the similarity gate while the memory is live."""
        return self.live() & (self.token_similarity >= self.gate)

    def truth(self) -> np.ndarray:
        """``(T, R)`` bool: the message truly fires the memory."""
        out = np.zeros((self.horizon, self.n_resources), dtype=bool)
        for j, steps in enumerate(self.fires):
            out[list(steps), j] = True
        return out

    def goodai_features(self) -> np.ndarray:
        """``(T + 1, R, 7)`` float32: BudgetPM's seven GoodAI features per step (row ``T``: the terminal step,
        zeros). Names in :data:`GOODAI_FEATURE_NAMES`."""
        T = self.horizon
        live = self.live()
        out = np.zeros((T + 1, self.n_resources, len(GOODAI_FEATURE_NAMES)), dtype=np.float32)
        out[:T, :, 0] = live
        out[:T, :, 1] = live & (self.test_kind == TRIGGER)[None, :]
        out[:T, :, 2] = self.token_similarity
        out[:T, :, 3] = self.fuzzy_similarity
        age = (np.arange(T)[:, None] - self.stored[None, :]) / T
        out[:T, :, 4] = np.where(live, np.clip(age, 0.0, 1.0), 0.0)
        out[:T, :, 5] = self.repeat_fraction
        out[:T, :, 6] = (live.sum(axis=1) / self.n_resources)[:, None] * live
        return out


def world_for(conv: Conversation) -> ConversationConfig:
    """The default configuration with ``conv``'s numbers of tests: its environment takes ``conv`` (budget levels
    and the target fraction are those of that world's development conversations)."""
    n_pm = int(np.sum(conv.test_kind == PROSPECTIVE))
    return ConversationConfig(n_prospective=n_pm, n_trigger=conv.n_resources - n_pm)


def _place(taken, target, T):
    """First free step at or after ``target`` (waits are minimum distances), marked taken; -1 past the horizon."""
    t = max(0, int(target))
    while t < T and taken[t]:
        t += 1
    if t >= T:
        return -1
    taken[t] = True
    return t


def _schedule(rng, config: ConversationConfig):
    """Steps of every scripted line. Tests are placed one after another in a random order; a test that does not
    fit is redrawn (bounded tries)."""
    T = config.horizon
    n_pm, n_tr = config.n_prospective, config.n_trigger
    taken = np.zeros(T, dtype=bool)
    kind = np.full(T, M_FILLER, dtype=np.int64)
    owner = np.full(T, -1, dtype=np.int64)
    stored = np.zeros(n_pm + n_tr, dtype=np.int64)
    live = np.zeros((n_pm + n_tr, 2), dtype=np.int64)
    ordinal = np.zeros(n_pm + n_tr, dtype=np.int64)
    fires = [()] * (n_pm + n_tr)
    g0, g1 = config.quote_gap
    o0, o1 = config.ordinal
    s0, s1 = config.trigger_span
    for j in rng.permutation(n_pm + n_tr).tolist():
        for _ in range(1000):
            trial = taken.copy()
            u = rng.random(5)  # one call per try: scalar draws are slow
            if j < n_pm:
                n = o0 + int(u[0] * (o1 - o0 + 1))
                gap = g0 + int(u[1] * (g1 - g0 + 1))
                q = _place(trial, int(u[2] * max(1, T - gap - n)), T)
                i = _place(trial, q + gap, T) if q >= 0 else -1
                due = i + n - 1
                if i < 0 or due >= T:
                    continue
                lines = ((q, M_QUOTE), (i, M_INSTRUCTION))
                reset = _place(trial, due + 1, T) if due + 1 < T else -1
                stored[j], live[j], ordinal[j], fires[j] = q, (i, due), n, (due,)
            else:
                span = s0 + int(u[0] * (s1 - s0 + 1))
                last = math.ceil(ACTIVATION_FRACTIONS[-1] * span)
                s = _place(trial, int(u[1] * max(1, T - last - 1)), T)
                acts = []
                prev = s
                for f, v in zip(ACTIVATION_FRACTIONS, u[2:]):
                    a = _place(trial, max(prev + 1, s + math.ceil(f * span) + int(3 * v)), T) if prev >= 0 else -1
                    acts.append(a)
                    prev = a
                if min(acts) < 0 or s < 0:
                    continue
                lines = ((s, M_SETUP),) + tuple((a, M_TRIGGER) for a in acts)
                reset = _place(trial, acts[-1] + 1, T)
                stored[j], live[j], fires[j] = s, (s + 1, acts[-1]), tuple(acts)
            break
        else:
            raise RuntimeError(f"test {j} does not fit into a conversation of {T} messages; raise the horizon")
        taken = trial
        for t, k in lines:
            kind[t], owner[t] = k, j
        if reset >= 0:
            kind[reset], owner[reset] = M_RESET, j
    return taken, kind, owner, stored, live, ordinal, tuple(fires)


def generate_conversation(seed=None, config: ConversationConfig | None = None, *,
                          rng: np.random.Generator | None = None) -> Conversation:
    """The conversation a ``ConversationPM-v0`` environment with this seed and configuration plays. Draws come from
    ``rng`` when given (``seed`` is then only recorded in ``meta``), else from a generator seeded like
    ``env.reset(seed=seed)``."""
    config = config or ConversationConfig()
    if rng is None:
        from gymnasium.utils import seeding

        rng, _ = seeding.np_random(seed)
    T, n_pm = config.horizon, config.n_prospective
    R = n_pm + config.n_trigger
    taken, kind, owner, stored, live, ordinal, fires = _schedule(rng, config)
    free = np.flatnonzero(~taken)
    kind[free] = np.where(rng.random(free.size) < config.p_other_test, M_OTHER, M_FILLER)
    is_live = (live[None, :, 0] <= np.arange(T)[:, None]) & (np.arange(T)[:, None] <= live[None, :, 1])
    # Lures: unscored lines lexically close to a live trigger condition, on free steps of its live period.
    lure_of = np.full(T, -1, dtype=np.int64)
    n_lures = rng.poisson(config.lures, size=R - n_pm)
    order = rng.random((R - n_pm, T))
    for j in range(n_pm, R):
        spots = np.flatnonzero(~taken[live[j, 0]: live[j, 1] + 1] & (lure_of[live[j, 0]: live[j, 1] + 1] < 0))
        pick = spots[np.argsort(order[j - n_pm, spots], kind="stable")[: n_lures[j - n_pm]]] + live[j, 0]
        kind[pick], lure_of[pick] = M_LURE, j
    # Similarities: what a cheap lexical matcher between the message and the stored condition sees.
    u = rng.random((5, T, R))
    tok = np.where(u[0] < config.p_overlap, 0.05 + 0.1 * u[1], 0.05 * u[1])
    fuzzy = 0.05 + 0.3 * u[2]
    rep = 0.1 * u[3]
    t_act = np.array(fires[n_pm:], dtype=np.int64).ravel()  # paraphrased activations, test by test
    c_act = np.repeat(np.arange(n_pm, R), ACTIVATIONS)
    t_lure = np.flatnonzero(lure_of >= 0)
    c_lure = lure_of[t_lure]
    v = rng.random((3, t_act.size + t_lure.size))
    va, vl = v[:, : t_act.size], v[:, t_act.size:]
    tok[t_act, c_act] = 0.04 + 0.56 * va[0]
    fuzzy[t_act, c_act] = 0.5 * tok[t_act, c_act] + 0.2 + 0.3 * va[1]
    rep[t_act, c_act] = np.where(np.arange(t_act.size) % ACTIVATIONS > 0, 0.2 + 0.5 * va[2], 0.3 * va[2])
    tok[t_lure, c_lure] = 0.05 + 0.4 * vl[0]
    fuzzy[t_lure, c_lure] = 0.5 * tok[t_lure, c_lure] + 0.1 + 0.35 * vl[1]
    rep[t_lure, c_lure] = 0.4 * vl[2]
    # a prospective memory is matched by the reply counter: proximity of the k-th reply to n
    k = np.arange(T)[:, None] - live[None, :n_pm, 0] + 1
    tok[:, :n_pm] = fuzzy[:, :n_pm] = 1.0 / (1.0 + np.abs(ordinal[None, :n_pm] - k))
    rep[:, :n_pm] = 0.0
    tok *= is_live
    fuzzy *= is_live
    rep *= is_live
    truth = np.zeros((T, R), dtype=bool)
    truth[t_act, c_act] = True
    truth[live[:n_pm, 1], np.arange(n_pm)] = True
    lure = np.zeros((T, R), dtype=bool)
    lure[t_lure, c_lure] = True
    is_pm = np.arange(R) < n_pm
    p_yes = np.where(truth, 1.0 - np.where(is_pm, config.p_miss_prospective, config.p_miss_trigger),
                     np.where(lure, config.p_false_lure, np.where(is_pm, config.p_false_prospective, config.p_false)))
    verifier = (is_live & (tok >= config.gate) & (u[4] < p_yes)).astype(np.int8)
    test_kind = np.array([PROSPECTIVE] * n_pm + [TRIGGER] * config.n_trigger, dtype=np.int64)
    message_test = np.where(lure_of >= 0, lure_of, owner)
    return Conversation(horizon=T, gate=config.gate, message_kind=kind, message_test=message_test,
                        test_ids=config.resources, test_kind=test_kind, stored=stored, live_from=live[:, 0].copy(),
                        live_until=live[:, 1].copy(), ordinal=ordinal, fires=fires, token_similarity=tok,
                        fuzzy_similarity=fuzzy, repeat_fraction=rep, verifier=verifier, meta={"seed": seed})


def to_pm_episode(conv: Conversation) -> Episode:
    """The conversation as a PM week of verifier resources, for PMWeek-v0's executor, controller and teachers.

    One stored intention per candidate pair (t, r), active, declared and due at step t only: a pair the verifier
    confirms and that truly fires is a positive (querying it at t executes the memory: a hit); a confirmed pair
    that does not fire is a lure (querying it executes the memory wrongly: a false fire); a pair the verifier
    rejects never triggers (querying it resolves nothing). Intentions are ordered by (t, r)."""
    T, R = conv.horizon, conv.n_resources
    t_idx, r_idx = np.nonzero(conv.candidates())
    yes = conv.verifier[t_idx, r_idx].astype(bool)
    fire = conv.truth()[t_idx, r_idx]
    n = t_idx.size
    when = np.where(yes, t_idx, NEVER).astype(np.int64)
    zeros = np.zeros(n, dtype=np.int64)
    return Episode(
        horizon=T, step_day=np.zeros(T, dtype=np.int64), step_hour=np.zeros(T), weekday=np.zeros(T, dtype=np.int64),
        resource_names=tuple(conv.test_ids), resource_classes=("snapshot",) * R, costs=np.ones(R, dtype=np.int64),
        cost_profile="unit", ids=tuple(f"{conv.test_ids[r]}@{t}" for t, r in zip(t_idx.tolist(), r_idx.tolist())),
        kind=np.full(n, KIND_CHANNEL, dtype=np.int64), resource=r_idx.astype(np.int64),
        active_from=t_idx.astype(np.int64), active_until=t_idx.astype(np.int64),
        declared_start=t_idx.astype(np.int64), declared_end=t_idx.astype(np.int64), onset=when, deadline=when.copy(),
        polarity=np.where(yes & fire, POS, LURE).astype(np.int64),
        priority=np.where(conv.test_kind[r_idx] == PROSPECTIVE, 3, 1).astype(np.int64), miss_cost=np.ones(n),
        cross_day=np.zeros(n, dtype=bool), update_sensitive=np.zeros(n, dtype=bool), version=zeros,
        registered=np.ones(n, dtype=bool), visible_outcome=zeros.copy(),
        hints=conv.token_similarity.astype(np.float64), meta=dict(conv.meta))

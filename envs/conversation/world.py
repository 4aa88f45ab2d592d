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

import functools
import math
from dataclasses import dataclass, field

import numba
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
PAIR_KINDS = ("not_candidate", "pm_due", "pm_other", "activation", "lure", "distractor")
"""What a (message, memory) pair is (:meth:`Conversation.pair_kinds`): not a candidate; a prospective memory at its
n-th reply or at another reply; a trigger memory on one of its activations, on one of its lures, or on any other
message that passes the gate (a distractor)."""
GOODAI_FEATURE_NAMES = ("semantic_resource", "semantic_trigger_fraction", "token_similarity", "fuzzy_similarity",
                        "memory_age", "repeat_fraction", "active_memory_count")
BASE_PARAMETERS = ("p_base_due", "p_base_early", "p_base_trigger", "base_trigger_decay", "p_base_lure",
                   "p_base_false")
"""The world parameters of the agent's base response (all 0: the agent acts only through verified calls, v0)."""
MAX_HORIZON = 10_000
MAX_TESTS = 64


def _check_range(name, value, low, high):
    if not isinstance(value, tuple) or len(value) != 2:
        raise ValueError(f"{name} must be a range (lo, hi), got {value!r}")
    lo = check_int(f"{name}[0]", value[0], low, high)
    return lo, check_int(f"{name}[1]", value[1], lo, high)


@dataclass(frozen=True)
class ConversationConfig:
    """Parameters of the conversation generator (defaults: :data:`WORLD_V1`, BudgetPM's GoodAI setting calibrated
    on the development conversations; :data:`WORLD_V0` is the earlier world without base responses)."""

    horizon: int = 66
    """User messages per conversation (decision steps); BudgetPM's development-median horizon. At least
    :attr:`shortest_horizon` (refused below it)."""
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
    p_overlap: float = 0.28
    """Probability that an unrelated message shares a content word with a live condition (passes the gate)."""
    gate: float = 0.05
    """Similarity gate: a (message, memory) pair is a candidate when its similarity is at least this."""
    p_miss_trigger: float = 0.043
    """Verifier error: P(answers "does not fire" | a trigger activation truly fires)."""
    p_miss_prospective: float = 0.00448
    """Verifier error: P(answers "not the n-th reply" | it is)."""
    p_false_lure: float = 0.2
    """Verifier error: P(answers "fires" | the message is a lure of that memory)."""
    p_false: float = 0.02
    """Verifier error: P(answers "fires" | a trigger-response pair that neither fires nor is a lure)."""
    p_false_prospective: float = 0.00134
    """Verifier error: P(answers "this is the n-th reply" | it is another reply)."""
    p_base_due: float = 0.263
    """Base response: P(the agent's reply n carries the quote without any verifier call)."""
    p_base_early: float = 0.0204
    """Base response: P(the agent recites the quote unasked in an earlier counted reply k < n) is this times the
    reply counter's similarity ``1 / (1 + n - k)`` (misplaced quotes cluster next to reply n)."""
    p_base_trigger: float = 0.853
    """Base response: P(the agent says the response on an activation without any verifier call), for an
    activation right after its setup."""
    base_trigger_decay: float = 0.0029
    """Base response: how much that probability falls per user message between the setup and the activation
    (GoodAI: trigger-response accuracy falls as the memory span grows)."""
    p_base_lure: float = 0.2
    """Base response: P(the agent says a memory's response, unasked, on one of that memory's lures)."""
    p_base_false: float = 0.02
    """Base response: P(the agent says a memory's response, unasked, on another message passing the gate)."""

    def __post_init__(self):
        for name in ("ordinal", "quote_gap", "trigger_span"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        # each number is stored as the int or float it was checked as: the generator's numba kernel is compiled per
        # argument type (an int given for a float field would compile it anew, seconds, on a first reset)
        _set = functools.partial(object.__setattr__, self)
        _set("horizon", check_int("horizon", self.horizon, 2, MAX_HORIZON))
        _set("n_prospective", check_int("n_prospective", self.n_prospective, 1, MAX_TESTS))
        _set("n_trigger", check_int("n_trigger", self.n_trigger, 1, MAX_TESTS))
        _set("ordinal", _check_range("ordinal", self.ordinal, 1, MAX_HORIZON))
        _set("quote_gap", _check_range("quote_gap", self.quote_gap, 1, MAX_HORIZON))
        _set("trigger_span", _check_range("trigger_span", self.trigger_span, 4, MAX_HORIZON))
        _set("lures", check_number("lures", self.lures, 0, 100))
        for name in ("p_other_test", "p_overlap", "p_miss_trigger", "p_miss_prospective", "p_false_lure", "p_false",
                     "p_false_prospective", *BASE_PARAMETERS):
            _set(name, check_number(name, getattr(self, name), 0, 1))
        _set("gate", check_number("gate", self.gate, 0, 1, low_open=True))
        if self.horizon < self.shortest_horizon:
            raise ValueError(f"horizon {self.horizon} cannot hold the tests: {self.n_prospective} prospective and "
                             f"{self.n_trigger} trigger tests with ordinal {self.ordinal}, quote_gap "
                             f"{self.quote_gap} and trigger_span {self.trigger_span} need at least "
                             f"{self.shortest_horizon} messages")

    @property
    def shortest_horizon(self) -> int:
        """The fewest messages any conversation of this world needs: every test at its shortest (a prospective test
        from its quote to its due reply, ``quote_gap[0] + ordinal[0]`` messages; a trigger test from its setup to
        its last activation, ``ceil(0.9 trigger_span[0]) + 1``), and two distinct messages per prospective test,
        four per trigger test. A horizon below it is refused; one just above it can still fail to place a crowded
        world's tests at reset (``RuntimeError``)."""
        pm = self.quote_gap[0] + self.ordinal[0]
        trigger = max(math.ceil(ACTIVATION_FRACTIONS[-1] * self.trigger_span[0]), ACTIVATIONS) + 1
        return max(pm, trigger, 2 * self.n_prospective + (ACTIVATIONS + 1) * self.n_trigger)

    @property
    def resources(self) -> tuple:
        """Names of the memory slots (one queryable verifier resource per test)."""
        return tuple(f"pm{j + 1}" for j in range(self.n_prospective)) + \
            tuple(f"tr{j + 1}" for j in range(self.n_trigger))


WORLD_V1 = ConversationConfig()
"""``membudget/ConversationPM-v1``'s world (the defaults; calibrated on the development conversations 2000-2011:
``python -m membudget.envs.conversation calibrate``)."""
WORLD_V0 = ConversationConfig(p_miss_trigger=0.03, p_miss_prospective=0.01, p_false_lure=0.2, p_false=0.02,
                              p_false_prospective=0.003, **{name: 0.0 for name in BASE_PARAMETERS})
"""``membudget/ConversationPM-v0``'s world: no base response (the agent acts only through verified calls) and
v0's verifier errors."""


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
    - ``base[t, r]``: 1 if the agent's base response to message ``t`` — its reply without any verifier call —
      executes memory ``r`` (appends the quote, says the response), else 0 (0 wherever ``r`` is not live).

    The reply to message ``t`` (BudgetPM's frozen recomposition): for each live memory ``r``, a verified pair
    follows the verifier's answer — it adds the memory's action to the reply or removes it — and an unverified pair
    keeps the base response. :func:`executed` states it.
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
    base: np.ndarray | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.base is None:  # a conversation without base responses: the agent acts only through the verifier
            self.base = np.zeros((self.horizon, len(self.test_ids)), dtype=np.int8)

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
        out[[t for steps in self.fires for t in steps], [j for j, steps in enumerate(self.fires) for _ in steps]] = True
        return out

    def executed(self, queried) -> np.ndarray:
        """``(T, R)`` bool: the reply to message ``t`` executes memory ``r`` when the verifier is called on the
        candidate pairs ``queried`` (``(T, R)`` bool): the verifier's answer on a verified pair, the base response
        on every other live pair."""
        verified = np.asarray(queried, dtype=bool) & self.candidates()
        return np.where(verified, self.verifier > 0, self.base > 0) & self.live()

    def pair_kinds(self) -> np.ndarray:
        """``(T, R)`` int64 index into :data:`PAIR_KINDS` of every pair (for diagnostics; the agent never sees it)."""
        truth, pm = self.truth(), (self.test_kind == PROSPECTIVE)[None, :]
        lure = (self.message_kind == M_LURE)[:, None] & (self.message_test[:, None] == np.arange(self.n_resources))
        kinds = np.where(pm, np.where(truth, 1, 2), np.where(truth, 3, np.where(lure, 4, 5)))
        return np.where(self.candidates(), kinds, 0).astype(np.int64)

    def goodai_features(self) -> np.ndarray:
        """``(T + 1, R, 7)`` float32: BudgetPM's seven GoodAI features per step (row ``T``: the terminal step,
        zeros). Names in :data:`GOODAI_FEATURE_NAMES`."""
        out = np.zeros((self.horizon + 1, self.n_resources, len(GOODAI_FEATURE_NAMES)), dtype=np.float32)
        _goodai_kernel(self.live_from, self.live_until, self.test_kind == TRIGGER, self.stored, self.token_similarity,
                       self.fuzzy_similarity, self.repeat_fraction, out)
        return out


@numba.njit(cache=True)
def _goodai_kernel(live_from, live_until, trigger, stored, token, fuzzy, repeat, out):
    """:meth:`Conversation.goodai_features` into ``out`` (zeros, ``(T + 1, R, 7)``): per step ``t < T`` and memory
    ``r``, live, live trigger-response memory, token and fuzzy similarity, the memory's age (steps since it was
    stored / T, clipped to [0, 1]) while live, repeat fraction, and the share of live memories while live."""
    T, R = token.shape
    for t in range(T):
        n_live = 0
        for r in range(R):
            n_live += live_from[r] <= t <= live_until[r]
        for r in range(R):
            if live_from[r] <= t <= live_until[r]:
                out[t, r, 0] = 1.0
                out[t, r, 1] = 1.0 if trigger[r] else 0.0
                out[t, r, 4] = min(max((t - stored[r]) / T, 0.0), 1.0)
                out[t, r, 6] = n_live / R
            out[t, r, 2] = token[t, r]
            out[t, r, 3] = fuzzy[t, r]
            out[t, r, 5] = repeat[t, r]


def world_for(conv: Conversation) -> ConversationConfig:
    """The default configuration with ``conv``'s numbers of tests: its environment takes ``conv`` (budget levels
    and the target fraction are those of that world's development conversations)."""
    n_pm = int(np.sum(conv.test_kind == PROSPECTIVE))
    return ConversationConfig(n_prospective=n_pm, n_trigger=conv.n_resources - n_pm)


@numba.njit(cache=True)
def _place(taken, target, T):
    """First free step at or after ``target`` (waits are minimum distances), marked taken; -1 past the horizon."""
    t = max(0, target)
    while t < T and taken[t]:
        t += 1
    if t >= T:
        return -1
    taken[t] = True
    return t


@numba.njit(cache=True)
def _draw(rng, T, n_pm, n_tr, ranges, probs, base_probs):
    """Every random draw of a conversation, in a fixed order. Tests are placed one after another in a random order
    (a test that does not fit is redrawn, at most 1000 times; ``ok`` is False if one never fits); then filler and
    other tests' lines, lures, similarities and the verifier's answers; last the base responses (drawn after
    everything else, so that a world without them draws the same conversation as one with them)."""
    o0, o1, g0, g1, s0, s1 = ranges
    p_other, lures, p_overlap, gate = probs[0], probs[1], probs[2], probs[3]
    R = n_pm + n_tr
    taken = np.zeros(T, dtype=np.bool_)
    kind = np.full(T, M_FILLER, dtype=np.int64)
    owner = np.full(T, -1, dtype=np.int64)
    stored = np.zeros(R, dtype=np.int64)
    live = np.zeros((R, 2), dtype=np.int64)
    ordinal = np.zeros(R, dtype=np.int64)
    fires = np.full((R, ACTIVATIONS), -1, dtype=np.int64)
    for j in rng.permutation(R):
        placed = False
        for _ in range(1000):
            trial = taken.copy()
            u = rng.random(5)
            if j < n_pm:
                n = o0 + int(u[0] * (o1 - o0 + 1))
                gap = g0 + int(u[1] * (g1 - g0 + 1))
                q = _place(trial, int(u[2] * max(1, T - gap - n)), T)
                i = _place(trial, q + gap, T) if q >= 0 else -1
                due = i + n - 1
                if i < 0 or due >= T:
                    continue
                reset = _place(trial, due + 1, T) if due + 1 < T else -1
                kind[q], kind[i], owner[q], owner[i] = M_QUOTE, M_INSTRUCTION, j, j
                stored[j], live[j, 0], live[j, 1], ordinal[j], fires[j, 0] = q, i, due, n, due
            else:
                span = s0 + int(u[0] * (s1 - s0 + 1))
                s = _place(trial, int(u[1] * max(1, T - math.ceil(ACTIVATION_FRACTIONS[2] * span) - 1)), T)
                prev = s
                for k in range(ACTIVATIONS):
                    a = -1
                    if prev >= 0:
                        a = _place(trial, max(prev + 1, s + math.ceil(ACTIVATION_FRACTIONS[k] * span)
                                              + int(3 * u[2 + k])), T)
                    fires[j, k] = a
                    prev = a
                if s < 0 or fires[j].min() < 0:
                    continue
                reset = _place(trial, fires[j, 2] + 1, T)
                kind[s], owner[s] = M_SETUP, j
                for k in range(ACTIVATIONS):
                    kind[fires[j, k]], owner[fires[j, k]] = M_TRIGGER, j
                stored[j], live[j, 0], live[j, 1] = s, s + 1, fires[j, 2]
            if reset >= 0:
                kind[reset], owner[reset] = M_RESET, j
            taken = trial
            placed = True
            break
        if not placed:
            return False, kind, owner, stored, live, ordinal, fires, np.zeros((T, R)), np.zeros((T, R)), \
                np.zeros((T, R)), np.zeros((T, R), dtype=np.int8), np.zeros((T, R), dtype=np.int8)
    for t in range(T):
        if not taken[t]:
            kind[t] = M_OTHER if rng.random() < p_other else M_FILLER
    # Lures: unscored lines lexically close to a live trigger condition, on free steps of its live period.
    lure = np.zeros((T, R), dtype=np.bool_)
    spots = np.empty(T, dtype=np.int64)
    for j in range(n_pm, R):
        m = 0
        for t in range(live[j, 0], live[j, 1] + 1):
            if not taken[t] and kind[t] != M_LURE:
                spots[m] = t
                m += 1
        k = min(m, rng.poisson(lures))
        for c in range(k):  # partial Fisher-Yates: a uniform sample without replacement
            x = c + rng.integers(0, m - c)
            spots[c], spots[x] = spots[x], spots[c]
            kind[spots[c]], owner[spots[c]] = M_LURE, j
            lure[spots[c], j] = True
    # Similarities (what a cheap lexical matcher sees) and the verifier's answers.
    tok = np.zeros((T, R))
    fuzzy = np.zeros((T, R))
    rep = np.zeros((T, R))
    verifier = np.zeros((T, R), dtype=np.int8)
    for j in range(R):
        pm = j < n_pm
        for t in range(live[j, 0], live[j, 1] + 1):
            u = rng.random(5)
            truth = False
            if pm:  # matched by the reply counter: proximity of the k-th reply to n
                tok[t, j] = fuzzy[t, j] = reply_similarity(ordinal[j], t - live[j, 0] + 1)
                truth = t == fires[j, 0]
            else:
                act = -1
                for k in range(ACTIVATIONS):
                    if fires[j, k] == t:
                        act = k
                if act >= 0:  # a paraphrased activation
                    truth = True
                    tok[t, j] = trigger_token_similarity(True, False, u[0], False)
                    fuzzy[t, j] = 0.5 * tok[t, j] + 0.2 + 0.3 * u[1]
                    rep[t, j] = 0.2 + 0.5 * u[2] if act > 0 else 0.3 * u[2]
                elif lure[t, j]:
                    tok[t, j] = trigger_token_similarity(False, True, u[0], False)
                    fuzzy[t, j] = 0.5 * tok[t, j] + 0.1 + 0.35 * u[1]
                    rep[t, j] = 0.4 * u[2]
                else:
                    tok[t, j] = trigger_token_similarity(False, False, u[0], u[3] < p_overlap)
                    fuzzy[t, j] = 0.05 + 0.3 * u[1]
                    rep[t, j] = 0.1 * u[2]
            p_yes, _ = _probabilities(pm, truth, lure[t, j], tok[t, j], t - stored[j], gate, probs, base_probs)
            if tok[t, j] >= gate and u[4] < p_yes:
                verifier[t, j] = 1
    # The base responses, last.
    base = np.zeros((T, R), dtype=np.int8)
    for j in range(R):
        for t in range(live[j, 0], live[j, 1] + 1):
            fire = fires[j, 0] == t or fires[j, 1] == t or fires[j, 2] == t
            _, p_base = _probabilities(j < n_pm, fire, lure[t, j], tok[t, j], t - stored[j], gate, probs, base_probs)
            if rng.random() < p_base:
                base[t, j] = 1
    return True, kind, owner, stored, live, ordinal, fires, tok, fuzzy, rep, verifier, base


@numba.njit(cache=True)
def _probabilities(pm, fire, lure, tok, distance, gate, probs, base_probs):
    """``(P(the verifier answers "fires"), P(the base response executes the memory))`` of one live pair: a
    prospective memory at its n-th reply (``fire``) or another reply (``tok``: the reply counter's similarity), a
    trigger memory on an activation ``distance`` messages after its setup, on a lure, or on another message."""
    miss_pm, miss_tr, false_lure, false_tr, false_pm = probs[4], probs[5], probs[6], probs[7], probs[8]
    due, early, trigger, decay, base_lure, base_false = base_probs
    if pm:
        return (1.0 - miss_pm, due) if fire else (false_pm, early * tok)
    if fire:
        return 1.0 - miss_tr, max(0.0, trigger - decay * distance)
    if lure:
        return false_lure, base_lure
    return false_tr, base_false if tok >= gate else 0.0


@numba.njit(cache=True)
def reply_similarity(n, k):
    """The reply counter's similarity of the ``k``-th counted reply to a prospective test whose quote goes into
    reply ``n`` (1 at reply n)."""
    return 1.0 / (1.0 + abs(n - k))


@numba.njit(cache=True)
def trigger_token_similarity(fire, lure, u, overlap):
    """A trigger pair's token similarity from a uniform draw ``u``: on an activation (``fire``), a lure, or another
    message (``overlap``: it shares a content word with the condition, passing the gate)."""
    if fire:
        return 0.04 + 0.56 * u
    if lure:
        return 0.05 + 0.4 * u
    return 0.05 + 0.1 * u if overlap else 0.05 * u


def kernel_ranges(config: ConversationConfig) -> np.ndarray:
    """The generator's integer ranges (n, quote gap, trigger span; each inclusive) as its kernel takes them."""
    return np.array([*config.ordinal, *config.quote_gap, *config.trigger_span], dtype=np.int64)


def _kernel_arguments(config: ConversationConfig) -> tuple:
    probs = np.array([config.p_other_test, config.lures, config.p_overlap, config.gate, config.p_miss_prospective,
                      config.p_miss_trigger, config.p_false_lure, config.p_false, config.p_false_prospective])
    return probs, np.array([getattr(config, name) for name in BASE_PARAMETERS])


def pair_probabilities(conv: Conversation, config: ConversationConfig) -> tuple:
    """``(p_verifier, p_base)``, ``(T, R)`` each: the probabilities with which ``config``'s world draws the
    verifier's "fires" (on candidates; 0 elsewhere) and the base response (0 where the memory is not live) given
    ``conv``'s messages and similarities: the calibration's expectations over the draws."""
    probs, base_probs = _kernel_arguments(config)
    truth, cand, live = conv.truth(), conv.candidates(), conv.live()
    lure = (conv.message_kind == M_LURE)[:, None] & (conv.message_test[:, None] == np.arange(conv.n_resources))
    p_ver, p_base = np.zeros(truth.shape), np.zeros(truth.shape)
    for t, j in np.argwhere(live).tolist():
        v, b = _probabilities(bool(conv.test_kind[j] == PROSPECTIVE), bool(truth[t, j]), bool(lure[t, j]),
                              float(conv.token_similarity[t, j]), float(t - conv.stored[j]), conv.gate, probs,
                              base_probs)
        p_ver[t, j], p_base[t, j] = v if cand[t, j] else 0.0, b
    return p_ver, p_base


def generate_conversation(seed=None, config: ConversationConfig | None = None, *,
                          rng: np.random.Generator | None = None) -> Conversation:
    """The conversation a ``ConversationPM-v1`` environment (``-v0`` with :data:`WORLD_V0`) with this seed and
    configuration plays. Draws come from
    ``rng`` when given (``seed`` is then only recorded in ``meta``), else from a generator seeded like
    ``env.reset(seed=seed)``."""
    seed = check_int("seed", seed, 0, none_ok=True)
    config = config or ConversationConfig()
    if rng is None:
        from gymnasium.utils import seeding

        rng, _ = seeding.np_random(seed)
    n_pm, n_tr = config.n_prospective, config.n_trigger
    ranges = kernel_ranges(config)
    probs, base_probs = _kernel_arguments(config)
    ok, kind, owner, stored, live, ordinal, fires, tok, fuzzy, rep, verifier, base = _draw(
        rng, config.horizon, n_pm, n_tr, ranges, probs, base_probs)
    if not ok:
        raise RuntimeError(f"a test did not fit into a conversation of {config.horizon} messages in 1000 draws "
                           f"(seed {seed}; this world needs at least {config.shortest_horizon}, and its tests crowd "
                           f"a horizon near that); raise the horizon")
    return Conversation(horizon=config.horizon, gate=config.gate, message_kind=kind, message_test=owner,
                        test_ids=config.resources, test_kind=np.array([PROSPECTIVE] * n_pm + [TRIGGER] * n_tr),
                        stored=stored, live_from=live[:, 0].copy(), live_until=live[:, 1].copy(), ordinal=ordinal,
                        fires=tuple(tuple(int(t) for t in f[: 1 if j < n_pm else ACTIVATIONS])
                                    for j, f in enumerate(fires.tolist())),
                        token_similarity=tok, fuzzy_similarity=fuzzy, repeat_fraction=rep, verifier=verifier,
                        base=base, meta={"seed": seed})


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
        cost_profile="unit", ids=tuple([f"{conv.test_ids[r]}@{t}" for t, r in zip(t_idx.tolist(), r_idx.tolist())]),
        kind=np.full(n, KIND_CHANNEL, dtype=np.int64), resource=r_idx.astype(np.int64),
        active_from=t_idx.astype(np.int64), active_until=t_idx.astype(np.int64),
        declared_start=t_idx.astype(np.int64), declared_end=t_idx.astype(np.int64), onset=when, deadline=when.copy(),
        polarity=np.where(yes & fire, POS, LURE).astype(np.int64),
        priority=np.where(conv.test_kind[r_idx] == PROSPECTIVE, 3, 1).astype(np.int64), miss_cost=np.ones(n),
        cross_day=np.zeros(n, dtype=bool), update_sensitive=np.zeros(n, dtype=bool), version=zeros,
        registered=np.ones(n, dtype=bool), visible_outcome=zeros.copy(),
        hints=conv.token_similarity.astype(np.float64), meta=dict(conv.meta))

"""An online teacher for ``ConversationPM``: a posterior sampler over conversations and hindsight optimisation over
its draws.

**What the agent has seen** (:class:`ConversationView`). At message ``t`` an agent has the observations of
messages ``0..t``: per memory whether it is live, its age (hence the step it was stored), and the lexical matcher's
token / fuzzy similarity and repeat fraction (the GoodAI features; ``ConversationPMEnv``'s observation carries them
as float32). From these follow, exactly, each test that has started (a prospective memory is live from its
instruction, a trigger memory from the message after its setup), where it was stored, when a finished one stopped
(a trigger memory stops after its third activation) and a prospective test's n (its reply counter's similarity at
the first live reply is 1 / n). The view also holds the agent's own past verifier calls, read from the
environment step by step. It holds neither the verifier's answers nor the replies: the observation does not
carry them (the planner below is a policy on the observation, with a record of its own actions).

**The posterior** (:class:`ConversationPosterior`): sequential importance sampling over the generator's own
draws (:func:`membudget.envs.conversation.generate_conversation`). A particle follows the generator: the tests in
a uniform random order, each placed as the generator places it (every target a first free message at or after
it); for each test every discrete choice the generator can make (a prospective test's n, quote gap and quote
target; a trigger test's span, setup target and the three activation waits) is enumerated, those that do not fit
(the generator redraws them) or contradict the view are dropped, and one is drawn in proportion to its prior
probability times, for a started trigger test, the exact likelihood of the observed features of its past live
messages (its activations' density at the messages it puts them on; every other live message the lure / other
mixture). The lures of each trigger memory are drawn on its free live messages, each with the probability that
mixture gives it (a future one: the mixture's lure share). The weight of a particle is the exact ratio of the
generator's probability times the features' likelihood to the proposal's probability: per test the share of the
fitting choices that agree with the view (likelihood-weighted), and per trigger memory the lure set's exact
probability under the generator (``min(Poisson(lures), free messages)`` of them, uniform) over its proposal's,
times the lure / other likelihood over the mixture's. Everything else of a drawn conversation (the future
similarities, the verifier's answers, the base responses) is independent of the view given the messages' kinds,
and its rates are exact (:func:`~membudget.envs.conversation.world.pair_probabilities`). The only approximation
is the Monte-Carlo error of the weights (effective sample size reported).

**The planner** (:class:`ConversationPlanner`): at each message, ``K`` conversations resampled from the weighted
particles; for each, the informed optimum's dynamic program (:class:`~membudget.teachers.conversation.
InformedOptimum`: exact over the verifier's answers and base responses given the messages' kinds) from this
message on; every affordable subset of the current candidates valued by its mean over the ``K`` draws, and the
best taken (ties: fewer calls). Hindsight optimisation over the messages' kinds, exact expectation over the rest.
It is an online policy, so its expected score is a lower bound on the online optimum; the informed optimum is an
upper bound.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numba
import numpy as np

from membudget.envs.conversation import ConversationConfig
from membudget.envs.conversation.env import FALSE_FIRE_PENALTY, ConversationPMEnv
from membudget.envs.conversation.world import (ACTIVATION_FRACTIONS, ACTIVATIONS, _kernel_arguments, _probabilities,
                                               kernel_ranges, reply_similarity, trigger_token_similarity)
from membudget.envs.jit import njit_leaf
from membudget.envs.validation import check_int, constructor_repr

from .conversation import (MAX_INFORMED_CANDIDATES, MAX_INFORMED_TESTS, ConversationSchedule, _informed_tables,
                           _option, _Teacher, score_weights)
from .posterior import systematic_resample

DEFAULT_SAMPLES = 4
"""The planner's default ``K`` (posterior conversations per decision, with ``4 K`` weighted particles): the setting
``python -m membudget.evaluate conversation-ceiling`` chose on the validation conversations 3000-3059 at v1 B60
(K = 4, 16 and 64 scored the same there; docs/conversation_ceiling.md)."""
SUPPORT_TOLERANCE = 1e-5
"""The feature densities' supports are widened by this much: the observation rounds the similarities to float32."""


@dataclass
class ConversationView:
    """What an agent has seen of a conversation up to and including message ``t`` (module docstring). Per memory
    ``j`` (prospective tests first): ``started`` / ``ended``; ``stored``, ``live_from``, ``live_until`` (-1 where
    unknown); ``ordinal`` (a started prospective test's n, else 0). ``tok``, ``fuzzy``, ``rep``: ``(t + 1, R)``
    the observed features (0 where the memory is not live). ``called``: ``(t, R)`` bool, the agent's verifier
    calls on the earlier messages."""

    t: int
    started: np.ndarray
    ended: np.ndarray
    stored: np.ndarray
    live_from: np.ndarray
    live_until: np.ndarray
    ordinal: np.ndarray
    tok: np.ndarray
    fuzzy: np.ndarray
    rep: np.ndarray
    called: np.ndarray

    @classmethod
    def from_features(cls, goodai, *, horizon: int, n_prospective: int, called=None) -> ConversationView:
        """The view from the GoodAI features of messages ``0..t`` (``(t + 1, R, 7)``, the observation's last seven
        columns, message by message) of a conversation of ``horizon`` messages whose first ``n_prospective``
        memories are prospective, and the agent's earlier calls (``(t, R)`` bool; None: none)."""
        g = np.asarray(goodai, dtype=np.float64)
        if g.ndim != 3 or g.shape[2] != 7 or g.shape[0] < 1:
            raise ValueError(f"goodai features must be (t + 1, R, 7), got shape {g.shape}")
        if not np.isfinite(g).all() or g.min() < 0 or g.max() > 1:
            raise ValueError("goodai features must be finite and within [0, 1]")
        t1, R = g.shape[:2]
        check_int("horizon", horizon, t1)
        check_int("n_prospective", n_prospective, 0, R)
        t = t1 - 1
        live = g[:, :, 0] > 0.5
        started, ended = live.any(axis=0), np.zeros(R, dtype=bool)
        stored, lf, lu = (np.full(R, -1, dtype=np.int64) for _ in range(3))
        ordinal = np.zeros(R, dtype=np.int64)
        for j in np.flatnonzero(started).tolist():
            steps = np.flatnonzero(live[:, j])
            lf[j] = steps[0]
            stored[j] = lf[j] - int(round(float(g[lf[j], j, 4]) * horizon))  # the age is (t - stored) / T
            if not live[t, j]:
                ended[j], lu[j] = True, steps[-1]
            if j < n_prospective:
                ordinal[j] = int(round(1.0 / float(g[lf[j], j, 2])))
        called = np.zeros((t, R), dtype=bool) if called is None else np.asarray(called, dtype=bool)
        if called.shape != (t, R):
            raise ValueError(f"called must be ({t}, {R}), got shape {called.shape}")
        return cls(t=t, started=started, ended=ended, stored=stored, live_from=lf, live_until=lu, ordinal=ordinal,
                   tok=g[:, :, 2].copy(), fuzzy=g[:, :, 3].copy(), rep=g[:, :, 5].copy(), called=called)


# ------------------------------------------------------------------------------------------ feature likelihood
@njit_leaf
def _uniform(x, lo, hi):
    if x < lo - SUPPORT_TOLERANCE or x > hi + SUPPORT_TOLERANCE:
        return 0.0
    return 1.0 / (hi - lo)


@njit_leaf
def trigger_densities(tok, fuzzy, rep, p_overlap):
    """The generator's joint densities of a trigger pair's (token similarity, fuzzy similarity, repeat fraction):
    ``(first activation, later activation, lure, other message)``."""
    act = _uniform(tok, 0.04, 0.6) * _uniform(fuzzy, 0.5 * tok + 0.2, 0.5 * tok + 0.5)
    lure = _uniform(tok, 0.05, 0.45) * _uniform(fuzzy, 0.5 * tok + 0.1, 0.5 * tok + 0.45) * _uniform(rep, 0.0, 0.4)
    other = (p_overlap * _uniform(tok, 0.05, 0.15) + (1.0 - p_overlap) * _uniform(tok, 0.0, 0.05)) \
        * _uniform(fuzzy, 0.05, 0.35) * _uniform(rep, 0.0, 0.1)
    return act * _uniform(rep, 0.0, 0.3), act * _uniform(rep, 0.2, 0.7), lure, other


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(x)


def _likelihood_tables(view: ConversationView, n_pm: int, T: int, p_overlap: float, share: float):
    """Per message ``<= t`` and trigger memory, the log densities of its observed features as a first / later
    activation, a lure, another message, and the guide's lure / other mixture (``share`` lures); prefix sums of the
    mixture's finite logs and counts of its zeros (so a placement's guide costs O(1))."""
    t1, R = view.tok.shape
    dens = np.zeros((4, T, R))
    for tau in range(t1):
        for j in range(n_pm, R):
            if view.live_from[j] >= 0 and view.live_from[j] <= tau and (not view.ended[j] or tau <= view.live_until[j]):
                dens[:, tau, j] = trigger_densities(view.tok[tau, j], view.fuzzy[tau, j], view.rep[tau, j], p_overlap)
    mix = share * dens[2] + (1.0 - share) * dens[3]
    la0, la1, ll, lo, lref = _log(dens[0]), _log(dens[1]), _log(dens[2]), _log(dens[3]), _log(mix)
    zero = np.isneginf(lref)
    Lc = np.zeros((T + 1, R))
    Zc = np.zeros((T + 1, R), dtype=np.int64)
    Lc[1:] = np.cumsum(np.where(zero, 0.0, lref), axis=0)
    Zc[1:] = np.cumsum(zero, axis=0)
    return la0, la1, ll, lo, lref, Lc, Zc


# ----------------------------------------------------------------------------------------------- the sampler
@numba.njit(cache=True)
def _next_free(taken):
    T = taken.size
    nf = np.empty(T, dtype=np.int64)
    nxt = -1
    for t in range(T - 1, -1, -1):
        if not taken[t]:
            nxt = t
        nf[t] = nxt
    return nf


@njit_leaf
def _at(nf, target):
    """The generator's placement: the first free message at or after ``target``; -1 past the horizon."""
    if target >= nf.size:
        return -1
    return nf[max(0, target)]


@njit_leaf
def _mine(owner, step, j):
    """Whether test ``j`` may take ``step`` (-1: nothing placed): no other started test was seen there."""
    return step < 0 or owner[step] < 0 or owner[step] == j


@njit_leaf
def _pick(rng, logw, m):
    """An index below ``m`` drawn in proportion to ``exp(logw)``, and the log of the weights' sum."""
    top = logw[0]
    for k in range(1, m):
        top = max(top, logw[k])
    total = 0.0
    for k in range(m):
        total += math.exp(logw[k] - top)
    u = rng.random() * total
    acc = 0.0
    for k in range(m):
        acc += math.exp(logw[k] - top)
        if u < acc:
            return k, top + math.log(total)
    return m - 1, top + math.log(total)


@njit_leaf
def _place_prospective(rng, nf, j, T, ranges, t, started, stored, live_from, ordinal, owner, lw, code):
    """Test ``j`` (prospective) placed as the generator places it, given the view; ``(log weight, q, i, due,
    reset)``, the weight the share of the fitting choices that agree with the view (-inf: none does)."""
    o0, o1, g0, g1 = ranges[0], ranges[1], ranges[2], ranges[3]
    n_o, n_g = o1 - o0 + 1, g1 - g0 + 1
    fit = 0.0
    m = 0
    for n in range(o0, o1 + 1):
        for gap in range(g0, g1 + 1):
            W = max(1, T - gap - n)
            pr = 1.0 / (n_o * n_g * W)
            for qt in range(W):
                q = _at(nf, qt)
                if q < 0:
                    continue
                i = _at(nf, q + gap)
                if i < 0 or i + n - 1 >= T:
                    continue
                fit += pr
                due = i + n - 1
                if started[j]:
                    if q != stored[j] or i != live_from[j] or n != ordinal[j]:
                        continue
                elif i <= t:
                    continue
                reset = _at(nf, due + 1)
                if not (_mine(owner, q, j) and _mine(owner, i, j) and _mine(owner, reset, j)):
                    continue
                lw[m] = math.log(pr)
                code[m, 0], code[m, 1], code[m, 2], code[m, 3] = q, i, due, reset
                m += 1
    if m == 0:
        return -np.inf, -1, -1, -1, -1
    k, lz = _pick(rng, lw, m)
    return lz - math.log(fit), code[k, 0], code[k, 1], code[k, 2], code[k, 3]


@njit_leaf
def _guide(j, s, a0, a1, a2, t, la0, la1, lref, Lc, Zc):
    """Log-likelihood of trigger memory ``j``'s observed features with its setup at ``s`` and activations at
    ``a0 < a1 < a2`` (every other live message the lure / other mixture)."""
    hi = min(a2, t)
    if hi < s + 1:
        return 0.0
    zeros = Zc[hi + 1, j] - Zc[s + 1, j]
    out = Lc[hi + 1, j] - Lc[s + 1, j]
    for k in range(ACTIVATIONS):
        a = a0 if k == 0 else (a1 if k == 1 else a2)
        if a > t:
            break
        if np.isinf(lref[a, j]):
            zeros -= 1
        else:
            out -= lref[a, j]
        la = la0[a, j] if k == 0 else la1[a, j]
        if np.isinf(la):
            return -np.inf
        out += la
    return -np.inf if zeros > 0 else out


@njit_leaf
def _place_trigger(rng, nf, j, T, ranges, t, started, ended, stored, live_until, owner, la0, la1, lref, Lc, Zc, lw,
                   code):
    """Test ``j`` (trigger response) placed as the generator places it, given the view; ``(log weight, s, a0, a1,
    a2, reset)``, the weight the likelihood-weighted share of the fitting choices that agree with the view."""
    s0, s1 = ranges[4], ranges[5]
    n_s = s1 - s0 + 1
    fit = 0.0
    m = 0
    for span in range(s0, s1 + 1):
        c0 = math.ceil(ACTIVATION_FRACTIONS[0] * span)
        c1 = math.ceil(ACTIVATION_FRACTIONS[1] * span)
        c2 = math.ceil(ACTIVATION_FRACTIONS[2] * span)
        W = max(1, T - c2 - 1)
        pr = 1.0 / (n_s * W * 27)
        for st in range(W):
            s = _at(nf, st)
            if s < 0:
                continue
            for d0 in range(3):
                a0 = _at(nf, max(s + 1, s + c0 + d0))
                if a0 < 0:
                    continue
                for d1 in range(3):
                    a1 = _at(nf, max(a0 + 1, s + c1 + d1))
                    if a1 < 0:
                        continue
                    for d2 in range(3):
                        a2 = _at(nf, max(a1 + 1, s + c2 + d2))
                        if a2 < 0:
                            continue
                        fit += pr
                        if started[j]:
                            if s != stored[j] or (a2 != live_until[j] if ended[j] else a2 < t):
                                continue
                        elif s < t:
                            continue
                        reset = _at(nf, a2 + 1)
                        if not (_mine(owner, s, j) and _mine(owner, a0, j) and _mine(owner, a1, j)
                                and _mine(owner, a2, j) and _mine(owner, reset, j)):
                            continue
                        g = _guide(j, s, a0, a1, a2, t, la0, la1, lref, Lc, Zc) if started[j] else 0.0
                        if np.isinf(g):
                            continue
                        lw[m] = math.log(pr) + g
                        code[m, 0], code[m, 1], code[m, 2], code[m, 3], code[m, 4] = s, a0, a1, a2, reset
                        m += 1
    if m == 0:
        return -np.inf, -1, -1, -1, -1, -1
    k, lz = _pick(rng, lw, m)
    return lz - math.log(fit), code[k, 0], code[k, 1], code[k, 2], code[k, 3], code[k, 4]


@njit_leaf
def _log_count_prob(k, m, lam):
    """log P(min(m, Poisson(lam)) = k)."""
    if lam <= 0.0:
        return 0.0 if k == 0 else -np.inf
    if k < m:
        return k * math.log(lam) - lam - math.lgamma(k + 1.0)
    below = 0.0
    for i in range(m):
        below += math.exp(i * math.log(lam) - lam - math.lgamma(i + 1.0))
    return math.log(max(1.0 - below, 1e-300))


@njit_leaf
def _log_choose(m, k):
    return math.lgamma(m + 1.0) - math.lgamma(k + 1.0) - math.lgamma(m - k + 1.0)


@numba.njit(cache=True)
def _lures(rng, j, lo, hi, t, taken, lure, lam, share, ll, lo_other, lref, fires_j, spots):
    """The lures of trigger memory ``j`` (live ``lo..hi``) drawn into ``lure``; the log weight. The past free
    messages each a lure with the mixture's posterior share, the future ones from the generator's law given the
    past ones (``min(Poisson(lam), m)`` lures, a uniform subset), so the weight is the past subset's marginal
    probability over its proposal's, times the features' likelihood over the mixture's."""
    m = 0
    m_past = 0
    for tau in range(lo, hi + 1):
        if not taken[tau] and not lure[tau].any():
            spots[m] = tau
            m += 1
            if tau <= t:
                m_past += 1
    logw = 0.0
    k_past = 0
    for c in range(m_past):  # the spots are in message order: the past ones first
        tau = spots[c]
        pl, po = share * math.exp(ll[tau, j]), (1.0 - share) * math.exp(lo_other[tau, j])
        if pl + po <= 0.0:
            return -np.inf
        rho = pl / (pl + po)
        if rng.random() < rho:
            lure[tau, j] = True
            k_past += 1
            logw -= math.log(rho)
        else:
            logw -= math.log(1.0 - rho)
    # the past subset's marginal, and the number of future lures from its conditional law
    m_f = m - m_past
    terms = np.empty(m_f + 1)
    for k_f in range(m_f + 1):
        k = k_past + k_f
        terms[k_f] = _log_choose(m_f, k_f) + _log_count_prob(k, m, lam) - _log_choose(m, k)
    k_f, lz = _pick(rng, terms, m_f + 1)
    if np.isinf(lz):
        return -np.inf
    logw += lz
    for c in range(k_f):  # partial Fisher-Yates over the future spots
        x = m_past + c + rng.integers(0, m_f - c)
        spots[m_past + c], spots[x] = spots[x], spots[m_past + c]
        lure[spots[m_past + c], j] = True
    for tau in range(lo, min(hi, t) + 1):  # the likelihood of the past non-activation messages
        if tau == fires_j[0] or tau == fires_j[1] or tau == fires_j[2]:
            continue
        logw += (ll[tau, j] if lure[tau, j] else lo_other[tau, j]) - lref[tau, j]
    return logw


@numba.njit(cache=True)
def _particles(rng, N, T, n_pm, n_tr, ranges, lam, share, t, started, ended, stored, live_from, live_until, ordinal,
               la0, la1, ll, lo_other, lref, Lc, Zc):
    """``N`` weighted particles (module docstring): per particle and memory the stored step, live span, n and true
    fires, the lures, and the log weight."""
    R = n_pm + n_tr
    owner = np.full(T, -1, dtype=np.int64)  # the started test seen at a message
    for j in range(R):
        if started[j]:
            owner[stored[j]] = j
            if j < n_pm:
                owner[live_from[j]] = j
            elif ended[j]:
                owner[live_until[j]] = j
    size = max((ranges[1] - ranges[0] + 1) * (ranges[3] - ranges[2] + 1) * T, (ranges[5] - ranges[4] + 1) * T * 27)
    lw = np.empty(size)
    code = np.empty((size, 5), dtype=np.int64)
    spots = np.empty(T, dtype=np.int64)
    out_stored = np.full((N, R), -1, dtype=np.int64)
    out_from = np.full((N, R), -1, dtype=np.int64)
    out_until = np.full((N, R), -1, dtype=np.int64)
    out_ordinal = np.zeros((N, R), dtype=np.int64)
    out_fires = np.full((N, R, ACTIVATIONS), -1, dtype=np.int64)
    out_lure = np.zeros((N, T, R), dtype=np.bool_)
    logw = np.zeros(N)
    for p in range(N):
        taken = np.zeros(T, dtype=np.bool_)
        for j in rng.permutation(R):
            nf = _next_free(taken)
            if j < n_pm:
                w, q, i, due, reset = _place_prospective(rng, nf, j, T, ranges, t, started, stored, live_from,
                                                         ordinal, owner, lw, code)
                if np.isinf(w):
                    logw[p] = -np.inf
                    break
                taken[q] = taken[i] = True
                out_stored[p, j], out_from[p, j], out_until[p, j] = q, i, due
                out_ordinal[p, j], out_fires[p, j, 0] = due - i + 1, due
            else:
                w, s, a0, a1, a2, reset = _place_trigger(rng, nf, j, T, ranges, t, started, ended, stored, live_until,
                                                         owner, la0, la1, lref, Lc, Zc, lw, code)
                if np.isinf(w):
                    logw[p] = -np.inf
                    break
                taken[s] = taken[a0] = taken[a1] = taken[a2] = True
                out_stored[p, j], out_from[p, j], out_until[p, j] = s, s + 1, a2
                out_fires[p, j, 0], out_fires[p, j, 1], out_fires[p, j, 2] = a0, a1, a2
            if reset >= 0:
                taken[reset] = True
            logw[p] += w
        if np.isinf(logw[p]):
            continue
        for j in range(n_pm, R):
            w = _lures(rng, j, out_from[p, j], out_until[p, j], t, taken, out_lure[p], lam, share, ll, lo_other, lref,
                       out_fires[p, j], spots)
            logw[p] += w
            if np.isinf(w):
                break
    return out_stored, out_from, out_until, out_ordinal, out_fires, out_lure, logw


@numba.njit(cache=True)
def _suffix(rng, t, T, n_pm, stored, live_from, live_until, ordinal, fires, lure, tok_now, called, gate, p_overlap,
            probs, base_probs):
    """One drawn conversation from message ``t`` on, as the informed optimum's arrays (``live``, ``cand``,
    ``truth``, ``p_ver``, ``p_base``, ``due`` relative to ``t``): the future similarities drawn by kind (message
    ``t``'s observed), and the prospective tests already spoiled (a bit set) drawn from the recitations' rates
    of the earlier replies (the agent's own call where it made one, else its base response)."""
    R = stored.size
    L = T - t
    live = np.zeros((L, R), dtype=np.bool_)
    cand = np.zeros((L, R), dtype=np.bool_)
    truth = np.zeros((L, R), dtype=np.bool_)
    p_ver = np.zeros((L, R))
    p_base = np.zeros((L, R))
    due = np.full(R, -1, dtype=np.int64)
    spoiled = 0
    for j in range(R):
        pm = j < n_pm
        if pm:
            due[j] = fires[j, 0] - t
            for tau in range(live_from[j], min(t, fires[j, 0])):  # recitations before reply n, already made
                x = reply_similarity(ordinal[j], tau - live_from[j] + 1)
                pv, pb = _probabilities(True, False, False, x, tau - stored[j], gate, probs, base_probs)
                if rng.random() < (pv if called[tau, j] and x >= gate else pb):
                    spoiled |= 1 << j
        for tau in range(max(t, live_from[j]), live_until[j] + 1):
            k = tau - t
            fire = tau == fires[j, 0] or tau == fires[j, 1] or tau == fires[j, 2]
            is_lure = lure[tau, j]
            if tau == t:
                x = tok_now[j]
            elif pm:
                x = reply_similarity(ordinal[j], tau - live_from[j] + 1)
            else:
                u = rng.random()
                x = trigger_token_similarity(fire, is_lure, u, not (fire or is_lure) and rng.random() < p_overlap)
            live[k, j], truth[k, j], cand[k, j] = True, fire, x >= gate
            pv, pb = _probabilities(pm, fire, is_lure, x, tau - stored[j], gate, probs, base_probs)
            p_ver[k, j] = pv if x >= gate else 0.0
            p_base[k, j] = pb
    return live, cand, truth, p_ver, p_base, due, spoiled


@numba.njit(cache=True)
def _action_values(masks, counts, budget, spoiled, live, truth, pm_bit, due, p_ver, p_base, w_pm, w_act, pen, V):
    """The expected score of each first action ``masks`` (bit sets of memories, ``counts`` calls each) at the
    first message of a drawn conversation with ``budget`` calls left, then the informed optimum (``V``)."""
    S = V.shape[2]
    outcome_p = np.empty(S)
    outcome_s = np.empty(S, dtype=np.int64)
    out = np.empty(masks.size)
    for a in range(masks.size):
        imm, n_out = _option(0, masks[a], spoiled, live, truth, pm_bit, due, p_ver, p_base, w_pm, w_act, pen,
                             outcome_p, outcome_s)
        nxt = 0.0
        for o in range(n_out):
            nxt += outcome_p[o] * V[1, budget - counts[a], outcome_s[o]]
        out[a] = imm + nxt
    return out


@dataclass
class ConversationParticles:
    """Weighted draws of a conversation's hidden structure (arrays over particles first): per memory the stored
    step, live span, n (prospective) and true fires (-1 padded), the lures ``(N, T, R)``; normalised weights and
    their effective sample size."""

    stored: np.ndarray
    live_from: np.ndarray
    live_until: np.ndarray
    ordinal: np.ndarray
    fires: np.ndarray
    lure: np.ndarray
    weights: np.ndarray
    ess: float

    def __len__(self) -> int:
        return len(self.weights)

    def subset(self, idx) -> ConversationParticles:
        """The draws ``idx``, equally weighted."""
        idx = np.asarray(idx)
        return ConversationParticles(self.stored[idx], self.live_from[idx], self.live_until[idx], self.ordinal[idx],
                                     self.fires[idx], self.lure[idx], np.full(idx.size, 1.0 / idx.size),
                                     float(idx.size))


class ConversationPosterior:
    """Posterior sampler of a ``ConversationPM`` world (module docstring): keyword arguments stored as given and
    checked by :meth:`fit` (scikit-learn's convention; no ``get_params``).

    Parameters
    ----------
    world : ConversationConfig, optional
        The world the conversations are drawn from (None: ``ConversationPM-v1``'s).
    n_particles : int
        Weighted particles per call of :meth:`weighted` (and behind :meth:`sample`'s draws).
    """

    def __init__(self, *, world=None, n_particles=64):
        self.world = world
        self.n_particles = n_particles

    def __repr__(self):
        return constructor_repr(self)

    def fit(self, X=None, y=None):
        """Check the settings (``X``, ``y`` ignored)."""
        world = ConversationConfig() if self.world is None else self.world
        if not isinstance(world, ConversationConfig):
            raise TypeError(f"world must be a ConversationConfig, got {type(world).__name__}")
        check_int("n_particles", self.n_particles, 1, 10**6)
        self.world_ = world
        self.ranges_ = kernel_ranges(world)
        self.probs_, self.base_probs_ = _kernel_arguments(world)
        mean_live = ACTIVATION_FRACTIONS[2] * 0.5 * (world.trigger_span[0] + world.trigger_span[1])
        self.lure_share_ = float(np.clip(world.lures / mean_live, 0.01, 0.5))
        return self

    def _check_view(self, view):
        if not hasattr(self, "world_"):
            raise RuntimeError("this ConversationPosterior is not fitted yet; call fit() first")
        if not isinstance(view, ConversationView):
            raise TypeError(f"view must be a ConversationView, got {type(view).__name__}")
        R = self.world_.n_prospective + self.world_.n_trigger
        if view.tok.shape != (view.t + 1, view.tok.shape[1]) or view.called.shape != (view.t, view.tok.shape[1]):
            raise ValueError(f"the view's features must be (t + 1, R) and its calls (t, R) at message {view.t}")
        if view.tok.shape[1] != R or not 0 <= view.t < self.world_.horizon:
            raise ValueError(f"the view has {view.tok.shape[1]} memories at message {view.t}; the world has {R} "
                             f"memories and {self.world_.horizon} messages")

    def weighted(self, view: ConversationView, rng=None) -> ConversationParticles:
        """``n_particles`` weighted draws given ``view``; raises ``ValueError`` when none agrees with it."""
        self._check_view(view)
        rng = np.random.default_rng(rng)
        w = self.world_
        tables = _likelihood_tables(view, w.n_prospective, w.horizon, w.p_overlap, self.lure_share_)
        out = _particles(rng, self.n_particles, w.horizon, w.n_prospective, w.n_trigger, self.ranges_, float(w.lures),
                         self.lure_share_, view.t, view.started, view.ended, view.stored, view.live_from,
                         view.live_until, view.ordinal, *tables)
        logw = out[-1]
        if not np.isfinite(logw).any():
            raise ValueError("no draw is consistent with the view")
        weights = np.exp(logw - logw.max())
        weights /= weights.sum()
        return ConversationParticles(*out[:-1], weights=weights, ess=float(1.0 / np.sum(weights ** 2)))

    def sample(self, view: ConversationView, n_samples: int, rng=None) -> ConversationParticles:
        """``n_samples`` equally weighted draws: :meth:`weighted`'s particles, systematically resampled (``ess``: the
        weighted particles' effective sample size)."""
        check_int("n_samples", n_samples, 1, 10**6)
        rng = np.random.default_rng(rng)
        particles = self.weighted(view, rng)
        out = particles.subset(systematic_resample(particles.weights, n_samples, rng))
        out.ess = particles.ess
        return out


class ConversationPlanner(_Teacher):
    """Online planner for ``ConversationPM`` by hindsight optimisation over posterior conversations (module
    docstring). It reads, at each message, the GoodAI features the observations carried so far and the
    environment's record of its own calls (the query history), never the conversation's hidden fields.

    Parameters: ``budget``, ``per_step_cap``, ``false_fire_penalty`` those of the environment it plays; ``world``
    the world it assumes (None: the environment's); ``n_samples`` ``K``, posterior conversations per decision;
    ``n_particles`` weighted draws behind them (None: ``4 K``); ``seed`` its own random stream.

    Attributes (after :meth:`fit`): ``sampler_``; after each decision ``last_`` (the step, the actions compared as
    bit sets of memories, their mean values, the particles' effective sample size and ``p_resolve``: per memory,
    the share of the ``K`` draws in which the current message truly fires it and it is a candidate — the posterior
    probability that a call now verifies a true fire, estimated; None where there was nothing to decide);
    ``retries_`` (decisions sampled again with 8x the particles because no draw agreed with the view) and
    ``fallbacks_`` (decisions where none did then either: the planner proposes nothing, counted).
    """

    def __init__(self, *, budget=None, per_step_cap=2, false_fire_penalty=FALSE_FIRE_PENALTY, world=None,
                 n_samples=DEFAULT_SAMPLES, n_particles=None, seed=0):
        super().__init__(budget=budget, per_step_cap=per_step_cap, false_fire_penalty=false_fire_penalty)
        self.world = world
        self.n_samples = n_samples
        self.n_particles = n_particles
        self.seed = seed

    def fit(self, X=None, y=None):
        """Check the settings and build the sampler (``X``, ``y`` ignored)."""
        self._check()
        check_int("n_samples", self.n_samples, 1, 100_000)
        particles = 4 * self.n_samples if self.n_particles is None else self.n_particles
        check_int("n_particles", particles, 1, 10**6)
        check_int("seed", self.seed, 0, None)
        if self.world is not None and not isinstance(self.world, ConversationConfig):
            raise TypeError(f"world must be a ConversationConfig, got {type(self.world).__name__}")
        world = ConversationConfig() if self.world is None else self.world
        if world.n_prospective > MAX_INFORMED_TESTS:
            raise ValueError(f"the planner takes at most {MAX_INFORMED_TESTS} prospective tests")
        self.sampler_ = ConversationPosterior(world=self.world, n_particles=particles).fit()
        self.rng_ = np.random.default_rng(self.seed)
        self.last_ = None
        self.retries_ = 0
        self.fallbacks_ = 0
        self._record = None
        self._features = None
        return self

    def _calls(self, e, t: int) -> np.ndarray:
        """The agent's calls on messages ``0..t-1``, kept from the query history the environment shows step by step
        (``last_q``: each memory's latest call); a decision not at the message after the previous one starts a new
        record (a fresh episode at message 0; otherwise the skipped messages count as without calls)."""
        R = e.core.n_resources
        rec = self._record
        if rec is None or t == 0 or rec[0] != t - 1 or rec[1] is not e:
            calls = np.zeros((e.conversation.horizon, R), dtype=bool)
        else:
            calls = rec[2]
        if t > 0:
            calls[t - 1] = e.core.last_q[0] == t - 1
        self._record = (t, e, calls)
        return calls[:t]

    def act(self, env) -> np.ndarray:
        """The planner's binary action at ``env``'s current message (``env``: a ConversationPM environment with the
        planner's budget, per-step cap and false-fire penalty, possibly wrapped)."""
        if not hasattr(self, "sampler_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet; call fit() first")
        e = getattr(env, "unwrapped", env)
        if not isinstance(e, ConversationPMEnv):
            raise TypeError(f"env must be a ConversationPM environment, got {type(e).__name__}")
        if (e.budget, e.per_step_cap, e.false_fire_penalty) != (self.budget, self.per_step_cap,
                                                                 self.false_fire_penalty):
            raise ValueError("the environment's budget, per-step cap and false-fire penalty must be the planner's")
        if self.world is None and e.world != self.sampler_.world_:  # the environment's world
            self.sampler_ = ConversationPosterior(world=e.world, n_particles=self.sampler_.n_particles).fit()
        world = self.sampler_.world_
        conv, core = e.conversation, e.core
        t = int(core.t[0])
        R = core.n_resources
        calls = self._calls(e, t)
        action = np.zeros(R, dtype=np.int8)
        left = None if e.budget is None else int(core.remaining[0])
        mask = np.flatnonzero(core.mask_state[0])
        cap = R if self.per_step_cap is None else self.per_step_cap
        most = min(cap, mask.size, mask.size if left is None else left)
        self.last_ = None
        if most == 0:
            return action
        if mask.size > MAX_INFORMED_CANDIDATES:
            raise ValueError(f"the planner compares every subset of at most {MAX_INFORMED_CANDIDATES} candidates")
        if self._features is None or self._features[0] is not conv:  # what the observations carry, message by message
            self._features = (conv, conv.goodai_features())
        view = ConversationView.from_features(self._features[1][:t + 1], horizon=conv.horizon,
                                              n_prospective=world.n_prospective, called=calls)
        draws = self._draws(view)
        if draws is None:
            self.fallbacks_ += 1
            return action
        masks, counts = [], []
        for k in range(1, most + 1):
            for subset in itertools.combinations(mask.tolist(), k):
                masks.append(sum(1 << r for r in subset))
                counts.append(k)
        masks, counts = np.array([0] + masks, dtype=np.int64), np.array([0] + counts, dtype=np.int64)
        budget = (conv.horizon - t) * cap if left is None else left  # no budget: as many calls as the cap allows
        values, p_fire = self._values(view, draws, masks, counts, budget, world)
        best = int(np.flatnonzero(values >= values.max() - 1e-12)[0])  # ties: the fewest calls, first in order
        self.last_ = {"step": t, "masks": masks, "values": values, "ess": draws.ess, "p_resolve": p_fire}
        action[[r for r in range(R) if (masks[best] >> r) & 1]] = 1
        return action

    def _draws(self, view):
        sampler = self.sampler_
        n = sampler.n_particles
        for mult in (1, 8):
            sampler.n_particles = n * mult
            try:
                return sampler.sample(view, self.n_samples, self.rng_)
            except ValueError as err:
                if "no draw is consistent" not in str(err):
                    raise
                self.retries_ += mult == 1
            finally:
                sampler.n_particles = n
        return None

    def _values(self, view, draws, masks, counts, budget, world) -> np.ndarray:
        n_pm = world.n_prospective
        R = view.tok.shape[1]
        w_pm, w_act, pen = score_weights(n_pm, R - n_pm, self.false_fire_penalty)
        pm_bit = np.where(np.arange(R) < n_pm, np.arange(R), -1).astype(np.int64)
        cap = R if self.per_step_cap is None else self.per_step_cap
        total = np.zeros(masks.size)
        fires_now = np.zeros(R)
        tok_now = view.tok[view.t].copy()
        for i in range(len(draws)):
            live, cand, truth, p_ver, p_base, due, spoiled = _suffix(
                self.rng_, view.t, world.horizon, n_pm, draws.stored[i], draws.live_from[i], draws.live_until[i],
                draws.ordinal[i], draws.fires[i], draws.lure[i], tok_now, view.called, world.gate, world.p_overlap,
                self.sampler_.probs_, self.sampler_.base_probs_)
            V, _ = _informed_tables(cand, live, truth, pm_bit, due, p_ver, p_base, w_pm, w_act, pen, budget, cap)
            total += _action_values(masks, counts, budget, spoiled, live, truth, pm_bit, due, p_ver, p_base, w_pm,
                                    w_act, pen, V)
            fires_now += truth[0] & cand[0]
        return total / len(draws), fires_now / len(draws)

    def solve(self, conv) -> ConversationSchedule:
        """Play ``conv`` (the planner's own draws seeded by ``seed``, afresh at every call: the same planner
        solves the same conversation alike); its schedule and score."""
        if not hasattr(self, "sampler_"):
            self.fit()
        self.rng_ = np.random.default_rng(self.seed)
        return self._played(conv, ConversationPMEnv(budget=self.budget, per_step_cap=self.per_step_cap,
                                                    false_fire_penalty=self.false_fire_penalty,
                                                    world=self.sampler_.world_))

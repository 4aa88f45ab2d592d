"""Posterior sampler for ``PMWeek-v0``: complete weeks drawn from the world's own generator, conditioned on what
the agent has seen (:class:`~membudget.teachers.observed.Observed`).

The generator (:func:`membudget.envs.pm.world.generate_episode`) draws Poisson numbers of time tasks, channel
tasks and channel lures with independent attributes, thins them by registration, picks a uniform subset of the
registered tasks for the user's updates, adds visible intentions and the retriever's hints (uniform and Gaussian
noise plus a bump around every hidden onset, clipped to [0, 1]). Given the agent's observations the rows split
into (a) the agent's ledger entries, whose public fields are known and whose type (task or lure), onset, deadline
and update status are hidden, and (b) rows the agent has not seen — unregistered tasks, intentions stated later,
new versions of unseen updates — which form independent Poisson processes under the generator. The sampler is
sequential importance sampling over one week (:func:`_sample`):

1. each ledger entry draws (type, onset, update status, deadline) from the product of its exact prior given its
   public fields and the exact likelihood of the observations it touches: the constraints of the agent's queries
   (a query resolved it, or it was open then), its presence in the ledger, the hints its onset's bump changes
   (given the bumps placed so far) and a guide for the miss counters;
2. new versions of unseen updates, hint-informed likewise;
3. unseen rows whose bump reaches the observed hints: per resource and onset step a Poisson count, drawn from its
   prior times the exact hint likelihood; every other unseen row from its exact prior;
4. the update subset: pool members are proposed independently and the exact subset probability of the generator
   (``min(Poisson(n_updates), pool)`` uniform) enters the weight;
5. the miss counters ``info["fn"]``: visible misses per step are Poisson, so the counter's exact likelihood given
   the hidden misses placed is a Poisson term per step (its guide above only steers the proposals);
6. visible outcomes of the past are then determined by the counters (exact), future ones drawn from their prior.

Each draw carries its importance weight (target over proposal, exact up to one constant per observation); weights
are normalised across the particles and :meth:`PosteriorSampler.sample` resamples. The only approximations: the
weights' Monte-Carlo error (effective sample size reported with every draw), at most :data:`MAX_PER_SLOT` unseen
rows per (resource, onset step) in the hint window, and the hint density read from a table (linear interpolation,
< 1e-6 in log; 1.25e-7 measured).

Tests (``tests/test_posterior.py``): ``test_hint_table_matches_the_exact_density``, the table against the noise
model's exact log-density (atoms at 0 and 1 included);
``test_draws_with_nothing_observed_have_the_generators_marginals``, the draws with nothing observed against
``generate_episode``'s weeks (about 30 week statistics, two-sample tests);
``test_posterior_on_a_tiny_world_matches_rejection_sampling``, the draws given an agent's record on a tiny world
against exact rejection sampling from the generator. ``tests/test_online_teacher.py``: every drawn week replays to
the agent's record.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from membudget.envs.jit import njit_kernel, njit_leaf
from membudget.envs.pm.world import (COST_PROFILES, KIND_CHANNEL, KIND_TIME, KIND_VISIBLE, LURE, NEVER, OUTCOME, POS,
                                     STALE, UPDATE_KINDS, Episode, WorldConfig, _numbered, _world_constants, calendar,
                                     named_indices, resource_costs)
from membudget.envs.validation import check_int, check_known, constructor_repr

from .hindsight_dp import _cap, _rest_solve, kernel_budgets, variant_f1
from .observed import EVENT_ON_TIME, EVENT_POSITIVE, Observed
from .problem import Problem, f1_of_counts

ROW_FIELDS = ("origin", "kind", "res", "af", "au", "ds", "de", "onset", "deadline", "polarity", "registered",
              "version", "ledger", "cross", "prio", "targeted", "u", "upd_kind", "upd_reg", "parent")
RW = named_indices("RowField", ROW_FIELDS)
"""Columns of a particle's row table."""
ORIGINS = ("time", "channel", "lure", "new_version")
O_TT, O_CT, O_CL, O_V2 = range(4)
MAX_PER_SLOT = 4
"""Most unseen rows drawn per (resource, onset step) whose bumps reach the observed hints."""
CLUSTER_MAX = 6
"""Most ledger entries drawn jointly (a cluster: entries of one resource that can explain the same hint bumps)."""
MU_FLOOR = 1e-3
"""Floor of the visible-miss rate in the miss guide and the intermediate targets (the final weight uses the exact
rate)."""
PLAUSIBLE_LLR = 3.0
"""An onset is plausible for an entry when a bump there alone raises the hints' log-likelihood by more than this."""
SLOT_ROWS = 64
"""Room per resource for the unseen rows of the hint window in one draw (at least)."""
CLUSTER_COMBOS = 4096
"""Most joint combinations of a cluster's plausible onsets; a larger cluster is split."""
N_BUMP = 8  # a bump covers steps onset-6 .. onset+1

# the integer and float world parameters passed to the kernel, by name
_WI = named_indices("WorldInt", ("T", "n_res", "clock", "n_ds", "w0", "w1", "g0", "g1", "s0", "s1", "expiry", "nch"))
_WF = named_indices("WorldFloat", ("p_in", "p_lure_in", "p_unreg", "p_reg", "lam_T", "lam_C", "lam_L", "lam_u",
                                   "rho", "lam_v", "lam_vl", "p_hit", "p_fa"))
# ledger entry columns passed to the kernel
_LE = named_indices("LedgerColumn", ("kind", "res", "af", "ds", "de", "version", "parent", "cancel_u", "left_at",
                                     "event", "lo", "hi", "pol_req", "dl_req", "dl_q", "prio", "cross"))


# ---------------------------------------------------------------------------------------------------------- hints
SQRT2 = math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
U_WIDTH = 0.1  # the hint's uniform noise is 0.1 * U(0, 1)


@njit_kernel
def _psi(z):
    """∫ Φ: z Φ(z) + φ(z)."""
    return z * 0.5 * math.erfc(-z / SQRT2) + INV_SQRT_2PI * math.exp(-0.5 * z * z)


@njit_kernel
def hint_loglik(h, b, sigma):
    """Log-likelihood of an observed hint ``h`` given the sum ``b`` of the bumps at that step and resource: the
    generator's hint is ``clip01(0.1 U + N(0, sigma²) + b)``, so the density of ``X = 0.1 U + N(0, sigma²)`` at
    ``h - b`` inside (0, 1), and ``P(X <= -b)`` / ``P(X >= 1 - b)`` at the clipped values 0 / 1."""
    if h <= 0.0:
        c = -b
        p = sigma / U_WIDTH * (_psi(c / sigma) - _psi((c - U_WIDTH) / sigma))
    elif h >= 1.0:
        c = 1.0 - b
        p = sigma / U_WIDTH * (_psi(-(c - U_WIDTH) / sigma) - _psi(-c / sigma))
    else:
        x = h - b
        a, z = x / sigma, (x - U_WIDTH) / sigma
        if x > 0.5 * U_WIDTH:  # upper tails, where erfc is accurate
            p = 0.5 * (math.erfc(z / SQRT2) - math.erfc(a / SQRT2)) / U_WIDTH
        else:
            p = 0.5 * (math.erfc(-a / SQRT2) - math.erfc(-z / SQRT2)) / U_WIDTH
    return math.log(p) if p > 0.0 else -np.inf


def hint_bump(world: WorldConfig) -> np.ndarray:
    """The bump the generator adds to a resource's hints at steps onset-6 .. onset+1 of each hidden trigger."""
    return np.array([0.7 * np.exp(-0.5 * (k / world.hint_width) ** 2) for k in range(-6, 2)])


@njit_kernel
def _ll_tables(sigma, x_lo, x_hi, dx):
    n = int((x_hi - x_lo) / dx) + 2
    inner = np.empty(n)
    zero = np.empty(n)
    one = np.empty(n)
    for i in range(n):
        x = x_lo + i * dx
        inner[i] = hint_loglik(0.5, 0.5 - x, sigma)  # interior density at h - b = x
        b = -x  # clipped cases by bump sum b = -x (x <= 0)
        zero[i] = hint_loglik(0.0, b, sigma)
        one[i] = hint_loglik(1.0, b, sigma)
    return inner, zero, one


@njit_leaf
def _interp(tab, x0, dx, x):
    f = (x - x0) / dx
    i = int(f)
    w = f - i
    return tab[i] * (1.0 - w) + tab[i + 1] * w


@njit_leaf
def _ll(h, b, sigma, tabs, x0, dx, x_hi):
    """:func:`hint_loglik` read from its tables (linear interpolation), exact outside them."""
    inner, zero, one = tabs
    if h <= 0.0 or h >= 1.0:
        x = -b
        if x < x0 or x > 0.0:
            return hint_loglik(h, b, sigma)
        return _interp(zero if h <= 0.0 else one, x0, dx, x)
    x = h - b
    if x < x0 or x > x_hi:
        return hint_loglik(h, b, sigma)
    return _interp(inner, x0, dx, x)


# ---------------------------------------------------------------------------------------------- small draws
@njit_leaf
def _log_pois(k, lam):
    if k < 0:
        return -np.inf
    if lam <= 0.0:
        return 0.0 if k == 0 else -np.inf
    return k * math.log(lam) - lam - math.lgamma(k + 1.0)


@njit_leaf
def _log_subset(k, P, lam):
    """Log-probability of one given subset of size ``k`` of a pool of ``P`` under the generator's update draw
    (``min(Poisson(lam), P)`` targets, uniform)."""
    if k > P:
        return -np.inf
    log_choose = math.lgamma(P + 1.0) - math.lgamma(k + 1.0) - math.lgamma(P - k + 1.0)
    if k < P:
        return _log_pois(k, lam) - log_choose
    below = 0.0
    for j in range(P):
        below += math.exp(_log_pois(j, lam))
    tail = 1.0 - below
    return math.log(tail) if tail > 0.0 else -np.inf


@njit_kernel
def _categorical(rng, logp, n):
    """Index drawn with probabilities ∝ exp(logp[:n]) and the log normaliser (-inf, -1 if every entry is -inf)."""
    mx = -np.inf
    for i in range(n):
        if logp[i] > mx:
            mx = logp[i]
    if mx == -np.inf:
        return -1, -np.inf
    ex = np.empty(n)  # each term once: the scan below adds the same values
    tot = 0.0
    for i in range(n):
        ex[i] = math.exp(logp[i] - mx)
        tot += ex[i]
    u = rng.random() * tot
    acc = 0.0
    pick = n - 1
    for i in range(n):
        if logp[i] == -np.inf:
            continue
        acc += ex[i]
        if u < acc:
            pick = i
            break
    while logp[pick] == -np.inf:  # rounding at the end of the scan
        pick -= 1
    return pick, mx + math.log(tot)


@njit_leaf
def _randint(rng, lo, hi):
    """Uniform integer in [lo, hi] (inclusive)."""
    return lo + int(rng.random() * (hi - lo + 1)) if hi > lo else lo


@njit_kernel
def _poisson(rng, lam):
    return rng.poisson(lam) if lam > 0.0 else 0


@njit_leaf
def _trigger(ds, de, p_in, last, onsets, probs):
    """The onset distribution of a channel trigger with declared window [ds, de] (``_channel_trigger``): onsets
    (NEVER merged) and probabilities into the buffers; returns their number."""
    n = 0
    width = de - ds + 1
    if p_in > 0.0:
        for o in range(ds, de + 1):
            onsets[n] = o
            probs[n] = p_in / width
            n += 1
    if p_in < 1.0:
        never = 0.0
        for k in range(1, 9):
            o = de + k
            if o > last:
                never += (1.0 - p_in) / 8.0
            else:
                onsets[n] = o
                probs[n] = (1.0 - p_in) / 8.0
                n += 1
        if never > 0.0:
            onsets[n] = NEVER
            probs[n] = never
            n += 1
    return n


@njit_leaf
def _trigger_prob(o, ds, de, p_in, last):
    """P(onset = o) of a channel trigger with window [ds, de] (o = NEVER for a trigger past the horizon)."""
    p = 0.0
    if o != NEVER and ds <= o <= de:
        p += p_in / (de - ds + 1)
    for k in range(1, 9):
        ok = de + k
        if (ok > last and o == NEVER) or (ok <= last and ok == o):
            p += (1.0 - p_in) / 8.0
    return p


# ------------------------------------------------------------------------------------------ the sampler kernel
@njit_leaf
def _hint_inc(st, r, o, n):
    """Change of the hint log-likelihood if ``n`` more bumps at onset ``o`` were placed on resource ``r``."""
    t, hints, Bm, LL, bump, sigma, tabs, x0, dx, x_hi = st
    if o >= NEVER or n == 0:
        return 0.0
    inc = 0.0
    for s in range(max(0, o - 6), min(t, o + 1) + 1):
        inc += _ll(hints[s, r], Bm[s, r] + n * bump[s - o + 6], sigma, tabs, x0, dx, x_hi) - LL[s, r]
    return inc


@njit_leaf
def _hint_inc1(st, r, o, inc1_tab):
    """:func:`_hint_inc` of one bump at ``o``, read from ``inc1_tab`` (the increment with no bump placed, per onset)
    when no bump lies in its reach yet: the same value, since the terms it sums are then those of the table."""
    t, hints, Bm, LL, bump, sigma, tabs, x0, dx, x_hi = st
    if o >= NEVER:
        return 0.0
    for s in range(max(0, o - 6), min(t, o + 1) + 1):
        if Bm[s, r] != 0.0:
            return _hint_inc(st, r, o, 1)
    return inc1_tab[o]


@njit_leaf
def _add_bumps(st, r, o, n):
    t, hints, Bm, LL, bump, sigma, tabs, x0, dx, x_hi = st
    if o >= NEVER or n == 0:
        return
    for s in range(max(0, o - 6), min(t, o + 1) + 1):
        Bm[s, r] += n * bump[s - o + 6]
        LL[s, r] = _ll(hints[s, r], Bm[s, r], sigma, tabs, x0, dx, x_hi)


@njit_leaf
def _fn_guide(fn, Mfn, mu_fn, t, d):
    """Guide (not the likelihood) for a hidden miss at step ``d``: (fn - misses placed) / visible-miss rate (``fn``
    may be the counters less the misses other resources are expected to take)."""
    if d >= t or d < 0:
        return 1.0
    x = fn[d] - Mfn[d]
    if x <= 0:
        return 0.0
    return x / max(mu_fn[d], MU_FLOOR)


@njit_leaf
def _deadline_excluded(d, dl_req, dl_q):
    """Whether the deadline constraint (``dl_req`` 1: at or after ``dl_q``, 2: before it) excludes deadline ``d``."""
    return (dl_req == 1 and d < dl_q) or (dl_req == 2 and d >= dl_q)


@njit_leaf
def _slack_weight(d, dl_req, dl_q, miss, fn, Mfn, mu_fn, t):
    """The weight of deadline ``d``: 0 where the deadline constraint excludes it, else the miss guide if the row is
    a positive that misses (1 otherwise)."""
    if _deadline_excluded(d, dl_req, dl_q):
        return 0.0
    return _fn_guide(fn, Mfn, mu_fn, t, d) if miss else 1.0


@njit_leaf
def _slack_sum(o, lo, hi, last, dl_req, dl_q, miss, fn, Mfn, mu_fn, t):
    """Σ over slack κ in [lo, hi] (deadline min(last, o + κ)) of P(κ)·[deadline constraint]·[miss guide if the
    row is a positive that misses]."""
    tot = 0.0
    for k in range(lo, hi + 1):
        tot += _slack_weight(min(last, o + k), dl_req, dl_q, miss, fn, Mfn, mu_fn, t) / (hi - lo + 1)
    return tot


@njit_leaf
def _sum_reads_counters(o, lo, miss, t):
    """Whether :func:`_slack_sum` from onset ``o`` (slack from ``lo``) can depend on the miss counters: only a
    positive that misses with a deadline before ``t`` reads them; any other sum is the same at every onset and
    counter."""
    return miss and o + lo < t


@njit_leaf
def _add_miss(d, fn, Mfn, mu_fn, t, G):
    """A miss placed at step ``d``: its counter and its guide in the draw's table ``G``."""
    Mfn[d] += 1
    G[d] = _fn_guide(fn, Mfn, mu_fn, t, d)


@njit_leaf
def _guide_sum(o, lo, hi, last, dl_req, dl_q, G, t):
    """:func:`_slack_sum` of a positive that misses, its guides (:func:`_fn_guide`) read from ``G``."""
    tot = 0.0
    for k in range(lo, hi + 1):
        d = min(last, o + k)
        if _deadline_excluded(d, dl_req, dl_q):
            g = 0.0
        else:
            g = G[d] if d < t else 1.0
        tot += g / (hi - lo + 1)
    return tot


@njit_leaf
def _draw_slack(rng, o, lo, hi, last, dl_req, dl_q, miss, fn, Mfn, mu_fn, t):
    """Slack drawn ∝ the terms of :func:`_slack_sum`; returns (deadline, log of its miss guide)."""
    tot = _slack_sum(o, lo, hi, last, dl_req, dl_q, miss, fn, Mfn, mu_fn, t)
    u = rng.random() * tot
    acc = 0.0
    chosen = -1
    for k in range(lo, hi + 1):
        d = min(last, o + k)
        g = _slack_weight(d, dl_req, dl_q, miss, fn, Mfn, mu_fn, t)
        if g <= 0.0:
            continue
        acc += g / (hi - lo + 1)
        chosen = d
        if u < acc:
            break
    g = _fn_guide(fn, Mfn, mu_fn, t, chosen) if miss else 1.0
    return chosen, math.log(g)


@njit_leaf
def _draw_ds_w(rng, o, typ, dsw_cdf, w0, w1, last):
    """(ds, de) of an unseen channel row given its onset ``o`` from the call's table (``typ`` 0 unregistered task,
    1 task stated after t, 2 lure stated after t): ∝ P(ds) P(w) P(o | ds, de) [P(af > t | ds)]."""
    nw = w1 - w0 + 1
    row = dsw_cdf[typ, o if o < NEVER else dsw_cdf.shape[1] - 1]
    i = np.searchsorted(row, rng.random() * row[-1], side="right")
    i = min(i, row.size - 1)
    ds = i // nw
    return ds, min(last, ds + w0 + i % nw)


@njit_leaf
def _draw_af(rng, ds, future, af_cdf):
    """(af, cross) of a row stated for window start ``ds`` (``future``: given af > t) from the call's table."""
    row = af_cdf[1 if future else 0, ds]
    i = np.searchsorted(row, rng.random() * row[-1], side="right")
    i = min(i, row.size - 1)
    return i // 2, i % 2


@njit_kernel(inline="always")
def _world_scalars(wi, wf):
    """The world's scalars both stages of a draw read, from its integer / float parameters (:data:`_WI`,
    :data:`_WF`): ``(T, R, clock, n_ds, w0, w1, g0, g1, s0, s1, expiry, nch, p_in, p_lure_in, p_unreg, p_reg,
    lam_T, lam_C, lam_L, lam_u, rho, lam_v, lam_vl, p_hit, p_fa, log rho, log (1 - rho))``."""
    rho = wf[_WF.rho]
    return (wi[_WI.T], wi[_WI.n_res], wi[_WI.clock], wi[_WI.n_ds], wi[_WI.w0], wi[_WI.w1], wi[_WI.g0], wi[_WI.g1],
            wi[_WI.s0], wi[_WI.s1], wi[_WI.expiry], wi[_WI.nch], wf[_WF.p_in], wf[_WF.p_lure_in], wf[_WF.p_unreg],
            wf[_WF.p_reg], wf[_WF.lam_T], wf[_WF.lam_C], wf[_WF.lam_L], wf[_WF.lam_u], rho, wf[_WF.lam_v],
            wf[_WF.lam_vl], wf[_WF.p_hit], wf[_WF.p_fa], math.log(rho) if rho > 0.0 else -np.inf,
            math.log(1.0 - rho) if rho < 1.0 else -np.inf)


@njit_leaf
def _new_row(rows, mc, m, j, origin, kind, res, af, au, ds, de, onset, deadline, pol, reg, version, ledger, cross,
             prio, mcv):
    row = rows[m, j]
    row[RW.origin], row[RW.kind], row[RW.res], row[RW.af], row[RW.au] = origin, kind, res, af, au
    row[RW.ds], row[RW.de], row[RW.onset], row[RW.deadline], row[RW.polarity] = ds, de, onset, deadline, pol
    row[RW.registered], row[RW.version], row[RW.ledger], row[RW.cross], row[RW.prio] = reg, version, ledger, cross, prio
    row[RW.targeted], row[RW.u], row[RW.upd_kind], row[RW.upd_reg], row[RW.parent] = 0, -1, -1, 0, -1
    mc[m, j] = mcv



@njit_leaf
def _entry_prior_options(e, led, t, last, expiry, p_in, p_lure_in, lam_C, lam_L, p_unreg, p_reg, log_rho, log_1rho,
                         s0, s1, o_buf, p_buf, opt_o, opt_origin, opt_state, opt_sc, opt_lo, opt_hi, opt_miss):
    """The options (origin, onset, update state) of ledger entry ``e`` allowed by its observations, each with its
    log prior weight (``opt_sc``) and the arguments of its deadline sum (:func:`_slack_sum`: slack ``opt_lo`` to
    ``opt_hi``, -1 for an onset past the horizon, whose sum is 1; ``opt_miss``: a positive that misses, whose sum
    carries the miss guide), without the sum and the hints. Update states: 0 none, 1 an unregistered update, 2 a
    registered update after ``t``, 3 the registered update seen. Pool members carry the proposal's rate ``rho`` per
    state (corrected by the exact subset probability later). Nothing here depends on a draw: a call computes the
    options once (:func:`_entry_options`)."""
    kind, af, ds, de = led[e, _LE.kind], led[e, _LE.af], led[e, _LE.ds], led[e, _LE.de]
    version, cancel_u, left_at, event = led[e, _LE.version], led[e, _LE.cancel_u], led[e, _LE.left_at], \
        led[e, _LE.event]
    lo, hi, pol_req, dl_req = led[e, _LE.lo], led[e, _LE.hi], led[e, _LE.pol_req], led[e, _LE.dl_req]
    au_nat = min(last, de + expiry)
    hit = event == 1
    resolved = event != 0
    n_opt = 0
    for origin in range(4):
        if version > 0:
            if origin != O_V2:
                continue
        elif kind == KIND_TIME:
            if origin != O_TT:
                continue
        elif origin != O_CT and origin != O_CL:
            continue
        if origin == O_CL and cancel_u >= 0:
            continue
        if kind == KIND_TIME:
            n_on = 1
            o_buf[0] = ds
            p_buf[0] = 1.0
        else:
            n_on = _trigger(ds, de, p_lure_in if origin == O_CL else p_in, last, o_buf, p_buf)
        log_type = 0.0
        if origin == O_CT:
            log_type = math.log(lam_C * (1.0 - p_unreg)) if lam_C * (1.0 - p_unreg) > 0 else -np.inf
        elif origin == O_CL:
            log_type = math.log(lam_L) if lam_L > 0 else -np.inf
        for j in range(n_on):
            o = o_buf[j]
            if not (o > lo and (o <= hi or (o == NEVER and hi == NEVER))):
                continue
            if cancel_u >= 0 and o < cancel_u:
                continue
            lim = min(o, last)
            in_pool = (origin == O_TT or origin == O_CT) and version == 0 and lim - af >= 2
            L = lim - af
            for state in range(4):
                if cancel_u >= 0:
                    if state != 3 or not in_pool:
                        continue
                elif state == 3:
                    continue
                if state != 0 and not in_pool:
                    continue
                n_gt = lim - max(af, t)
                if state == 2 and n_gt <= 0:
                    continue
                positive = state == 0 and origin != O_CL
                if (pol_req == 1 and not positive) or (pol_req == 2 and positive):
                    continue
                au = au_nat
                if state == 3:
                    au = cancel_u - 1
                if not resolved:
                    if left_at < 0:
                        if state != 2 and au < t:
                            continue
                    elif state == 2 or au != left_at - 1:
                        continue
                sc = log_type + math.log(p_buf[j])
                if in_pool:
                    if state == 0:
                        sc += log_1rho
                    elif state == 1:
                        sc += (log_rho + math.log(1.0 - p_reg)) if p_reg < 1.0 else -np.inf
                    elif state == 2:
                        sc += (log_rho + math.log(p_reg * n_gt / L)) if p_reg > 0.0 else -np.inf
                    else:
                        sc += (log_rho + math.log(p_reg / L)) if p_reg > 0.0 else -np.inf
                if sc == -np.inf:
                    continue
                if o < NEVER:
                    opt_miss[n_opt] = positive and not hit
                    opt_lo[n_opt], opt_hi[n_opt] = (de - o, de - o) if kind == KIND_TIME else (s0, s1)
                elif dl_req != 0:
                    continue
                else:
                    opt_miss[n_opt], opt_lo[n_opt], opt_hi[n_opt] = False, -1, -1
                opt_sc[n_opt] = sc
                opt_o[n_opt] = o
                opt_origin[n_opt] = origin
                opt_state[n_opt] = state
                n_opt += 1
    return n_opt


@njit_leaf
def _entry_options(p, dl_req, dl_q, last, t, G, pr_n, pr_o, pr_origin, pr_state, pr_sc, pr_S, pr_lo, pr_hi,
                   opt_o, opt_origin, opt_state, opt_score, opt_S):
    """The options of a draw's ``p``-th ledger entry of the resource (its prior options ``pr_*`` from
    :func:`_entry_prior_options`), each with its log prior weight times the deadline sum (``opt_S``) at the draw's
    miss guides ``G`` (:func:`_guide_sum`); options whose sum is 0 dropped. ``pr_S``: the sum where no
    draw can change it (only a positive that misses, with a deadline before ``t``, reads the counters), and then
    ``pr_sc`` already holds the log weight times it; else -1."""
    n_opt = 0
    for j in range(pr_n[p]):
        S = pr_S[p, j]
        if S < 0.0:
            S = _guide_sum(pr_o[p, j], pr_lo[p, j], pr_hi[p, j], last, dl_req, dl_q, G, t)
            if S <= 0.0:
                continue
            opt_score[n_opt] = pr_sc[p, j] + math.log(S)
        else:
            opt_score[n_opt] = pr_sc[p, j]
        opt_S[n_opt] = S
        opt_o[n_opt], opt_origin[n_opt], opt_state[n_opt] = pr_o[p, j], pr_origin[p, j], pr_state[p, j]
        n_opt += 1
    return n_opt


@njit_leaf
def _place_entry(rng, e, slot, o, origin, state, S_old, led, led_mc, t, last, expiry, s0, s1, fn, Mfn, mu_fn, G,
                 rows, mc, m):
    """Ledger entry ``e``'s row for its drawn option: its deadline (with the miss guide at the current misses),
    update step and fields; a miss it places enters ``Mfn`` and the guide table ``G``. Returns the log-weight
    increment (deadline sum now over then)."""
    kind, af, ds, de = led[e, _LE.kind], led[e, _LE.af], led[e, _LE.ds], led[e, _LE.de]
    cancel_u, event, dl_req, dl_q = led[e, _LE.cancel_u], led[e, _LE.event], led[e, _LE.dl_req], led[e, _LE.dl_q]
    positive = state == 0 and origin != O_CL
    deadline = NEVER
    lw = 0.0
    if o < NEVER:
        miss = positive and event != 1
        lo_k, hi_k = (de - o, de - o) if kind == KIND_TIME else (s0, s1)
        S_new = _slack_sum(o, lo_k, hi_k, last, dl_req, dl_q, miss, fn, Mfn, mu_fn, t)
        if S_new <= 0.0:  # an entry drawn earlier in its cluster took the counters this one needed
            return -np.inf
        # the miss guide stays in the weight: stage one targets its resource's posterior times its guide
        deadline, lg = _draw_slack(rng, o, lo_k, hi_k, last, dl_req, dl_q, miss, fn, Mfn, mu_fn, t)
        lw = math.log(S_new) - math.log(S_old)
        if miss and deadline < t:
            _add_miss(deadline, fn, Mfn, mu_fn, t, G)
    lim = min(o, last)
    au = min(last, de + expiry)
    u = -1
    if state == 1:
        u = _randint(rng, af + 1, lim)
    elif state == 2:
        u = _randint(rng, max(af, t) + 1, lim)
        au = u - 1
    elif state == 3:
        u = cancel_u
        au = cancel_u - 1
    pol = POS if positive else (LURE if origin == O_CL else STALE)
    _new_row(rows, mc, m, slot, origin, kind, led[e, _LE.res], af, au, ds, de, o, deadline, pol, 1,
             led[e, _LE.version], e, led[e, _LE.cross], led[e, _LE.prio], led_mc[e])
    row = rows[m, slot]
    row[RW.parent] = led[e, _LE.parent]
    if state != 0:
        row[RW.targeted], row[RW.u], row[RW.upd_reg] = 1, u, 0 if state == 1 else 1
    return lw


@njit_leaf
def _joint_inc(st, r, ch_o, digit, k, add):
    """Hint log-likelihood change of placing, on resource ``r``, one bump at each chosen onset of a combination
    (``ch_o[ki, digit[ki]]``; -1: none) together."""
    t, hints, Bm, LL, bump, sigma, tabs, x0, dx, x_hi = st
    lo = 1 << 30
    hi = -1
    for ki in range(k):
        o = ch_o[ki, digit[ki]]
        if o >= 0:
            lo = min(lo, max(0, o - 6))
            hi = max(hi, min(t, o + 1))
    if hi < lo:
        return 0.0
    for s in range(lo, hi + 1):
        add[s] = 0.0
    for ki in range(k):
        o = ch_o[ki, digit[ki]]
        if o >= 0:
            for s in range(max(0, o - 6), min(t, o + 1) + 1):
                add[s] += bump[s - o + 6]
    inc = 0.0
    for s in range(lo, hi + 1):
        if add[s] != 0.0:
            inc += _ll(hints[s, r], Bm[s, r] + add[s], sigma, tabs, x0, dx, x_hi) - LL[s, r]
    return inc


@njit_kernel
def _hint_state(t, R):
    """Buffers of one draw's state on the observed steps: the bumps placed on each resource's hints, the hints'
    log-likelihood under them, and the misses placed per step."""
    tw = max(t + 1, 1)
    return np.zeros((tw, R)), np.zeros((tw, R)), np.zeros(max(t, 1), dtype=np.int64)


@njit_kernel
def _scratch_size(T, n_ds, w0, w1, nch, cap):
    """The largest table a draw's helpers fill in the scratch buffer of either stage (``cap``: rows per week)."""
    width = max(w1 - w0 + 1, 1)
    return max(n_ds * width, 2 * T, (nch + 1) * (T + 1) + 1, 13 * width * (w1 + 12), cap + 1)


@njit_kernel
def _sample_resource(rng, M, r, wi, wf, arrays, t, hints, fn, led, led_mc, led_order, cl_start, c_first, c_last,
                     plaus, slot_of, n_led_r, out_rows, out_mc, out_n, out_logw, out_B, out_miss, out_sel, parts):
    """Stage one of a draw, resource ``r`` alone: ``M`` weighted draws of its ledger entries (clusters
    ``c_first..c_last - 1``, entry ``e`` into row ``slot_of[e]``) and of its unseen rows whose bumps reach the
    observed hints; their bumps (``out_B``), misses (``out_miss``) and proposal rates of the update subset
    (``out_sel``). ``fn[m]``: the miss counters less the misses of the resources drawn before into draw ``m``
    (their exact likelihood ratio is the miss guide, which stays in the weight). ``wi``/``wf``: the world's
    integer / float parameters (:data:`_WI`, :data:`_WF`); ``arrays``: its tables; ``led``: the ledger
    (:data:`_LE` columns)."""
    (channels, bump, stated, p_af_gt, margC, margL, margT, mu_fn, tabs, x0, dx, x_hi, sigma, dsw_cdf, af_cdf, Po_cache,
     Po_done) = arrays
    (T, R, clock, n_ds, w0, w1, g0, g1, s0, s1, expiry, nch, p_in, p_lure_in, p_unreg, p_reg, lam_T, lam_C, lam_L,
     lam_u, rho, lam_v, lam_vl, p_hit, p_fa, log_rho, log_1rho) = _world_scalars(wi, wf)
    last = T - 1
    cap = out_rows.shape[1]
    tw = max(t + 1, 1)
    Bm, LL, Mfn = _hint_state(t, R)
    n_opt_max = 4 * (w1 + 12) * 2 + 4
    o_buf = np.zeros(w1 + 12, dtype=np.int64)
    p_buf = np.zeros(w1 + 12)
    opt_score = np.zeros(CLUSTER_MAX * n_opt_max)
    opt_S = np.zeros(CLUSTER_MAX * n_opt_max)
    opt_o = np.zeros(CLUSTER_MAX * n_opt_max, dtype=np.int64)
    opt_origin = np.zeros(CLUSTER_MAX * n_opt_max, dtype=np.int64)
    opt_state = np.zeros(CLUSTER_MAX * n_opt_max, dtype=np.int64)
    opt_lo = np.zeros(CLUSTER_MAX, dtype=np.int64)
    opt_hi = np.zeros(CLUSTER_MAX, dtype=np.int64)
    ch_o = np.zeros((CLUSTER_MAX, w1 + 14), dtype=np.int64)
    ch_w = np.zeros((CLUSTER_MAX, w1 + 14))
    ch_lw = np.zeros((CLUSTER_MAX, w1 + 14))  # their logs
    n_choice = np.zeros(CLUSTER_MAX, dtype=np.int64)
    digit = np.zeros(CLUSTER_MAX, dtype=np.int64)
    chosen = np.zeros(CLUSTER_MAX, dtype=np.int64)
    add_buf = np.zeros(tw)
    big = np.zeros(max(_scratch_size(T, n_ds, w0, w1, nch, cap), CLUSTER_COMBOS, CLUSTER_MAX * n_opt_max) + 4)
    # per cluster of this resource: its entries' plausible onsets then "the rest" (chf), and the joint hint term of
    # every combination with no other bump in reach (H_tab), shared by all the draws
    n_cl = max(c_last - c_first, 0)
    chf = np.full((max(n_cl, 1), CLUSTER_MAX, w1 + 14), -1, dtype=np.int64)
    nchf = np.zeros((max(n_cl, 1), CLUSTER_MAX), dtype=np.int64)
    win_lo = np.zeros(max(n_cl, 1), dtype=np.int64)
    win_hi = np.zeros(max(n_cl, 1), dtype=np.int64)
    tab_off = np.zeros(n_cl + 1, dtype=np.int64)
    for i_cl in range(n_cl):
        c_lo, c_hi = cl_start[c_first + i_cl], cl_start[c_first + i_cl + 1]
        k = c_hi - c_lo
        comb = 1
        win_lo[i_cl], win_hi[i_cl] = T, -1
        if k > 1:
            for ki in range(k):
                e = led_order[c_lo + ki]
                cnt = 0
                for o in range(T):
                    if plaus[e, o]:
                        chf[i_cl, ki, cnt] = o
                        cnt += 1
                        win_lo[i_cl] = min(win_lo[i_cl], o)
                        win_hi[i_cl] = max(win_hi[i_cl], o)
                chf[i_cl, ki, cnt] = -1
                nchf[i_cl, ki] = cnt + 1
                comb *= cnt + 1
        tab_off[i_cl + 1] = tab_off[i_cl] + (comb if k > 1 else 0)
    # each entry's prior options and, where no draw can change it, its deadline sum and their log weight (entry
    # c_lo + ki at position c_lo + ki - e_first)
    e_first = cl_start[c_first] if n_cl > 0 else 0
    n_ent = cl_start[c_last] - e_first if n_cl > 0 else 0
    pr_n = np.zeros(max(n_ent, 1), dtype=np.int64)
    pr_o = np.zeros((max(n_ent, 1), n_opt_max), dtype=np.int64)
    pr_origin = np.zeros((max(n_ent, 1), n_opt_max), dtype=np.int64)
    pr_state = np.zeros((max(n_ent, 1), n_opt_max), dtype=np.int64)
    pr_sc = np.zeros((max(n_ent, 1), n_opt_max))
    pr_S = np.zeros((max(n_ent, 1), n_opt_max))
    pr_lo = np.zeros((max(n_ent, 1), n_opt_max), dtype=np.int64)
    pr_hi = np.zeros((max(n_ent, 1), n_opt_max), dtype=np.int64)
    pr_miss = np.zeros(n_opt_max, dtype=np.bool_)
    G = np.zeros(max(t, 1))  # a draw's miss guides per observed step (_fn_guide at its misses placed)
    for p in range(n_ent):
        e = led_order[e_first + p]
        dl_req, dl_q = led[e, _LE.dl_req], led[e, _LE.dl_q]
        n_pr = _entry_prior_options(e, led, t, last, expiry, p_in, p_lure_in, lam_C, lam_L, p_unreg, p_reg, log_rho,
                                    log_1rho, s0, s1, o_buf, p_buf, pr_o[p], pr_origin[p], pr_state[p], pr_sc[p],
                                    pr_lo[p], pr_hi[p], pr_miss)
        n_kept = 0
        for j in range(n_pr):
            o, lo_k, hi_k = pr_o[p, j], pr_lo[p, j], pr_hi[p, j]
            if lo_k < 0:
                S = 1.0
            elif _sum_reads_counters(o, lo_k, pr_miss[j], t):
                S = -1.0
            else:
                S = _slack_sum(o, lo_k, hi_k, last, dl_req, dl_q, pr_miss[j], fn[0], Mfn, mu_fn, t)
                if S <= 0.0:
                    continue
            pr_o[p, n_kept], pr_origin[p, n_kept], pr_state[p, n_kept] = o, pr_origin[p, j], pr_state[p, j]
            pr_sc[p, n_kept] = pr_sc[p, j] + math.log(S) if S > 0.0 else pr_sc[p, j]
            pr_S[p, n_kept], pr_lo[p, n_kept], pr_hi[p, n_kept] = S, lo_k, hi_k
            n_kept += 1
        pr_n[p] = n_kept
    H_tab = np.zeros(max(tab_off[n_cl], 1))
    inc1_tab = np.zeros(T)  # one bump at each onset with no other bump in reach (the unseen rows' first term)
    ex_inc1 = np.ones(T)  # its exponential
    # the unseen rows' prior rates per onset: unregistered task, task and lure stated after t (the same in every draw)
    hi_o = min(last, t + 6)
    u_rU, u_rF, u_rL = np.zeros(T), np.zeros(T), np.zeros(T)
    sl_lo, sl_hi = (g0, g1) if r == clock else (s0, s1)
    for o in range(0, hi_o + 1):
        if r == clock:
            u_rU[o] = lam_T * p_unreg / T
            u_rF[o] = lam_T * (1.0 - p_unreg) * margT[t + 1, o]
        elif nch > 0:
            u_rU[o] = lam_C * p_unreg / nch * margC[0, o]
            u_rF[o] = lam_C * (1.0 - p_unreg) / nch * margC[t + 1, o]
            u_rL[o] = lam_L / nch * margL[t + 1, o]
    u_rate = u_rU + u_rF + u_rL
    if t >= 0:
        for s in range(tw):
            Bm[s, r] = 0.0
            LL[s, r] = _ll(hints[s, r], 0.0, sigma, tabs, x0, dx, x_hi)
        st0 = (t, hints, Bm, LL, bump, sigma, tabs, x0, dx, x_hi)
        for o in range(min(T, t + 7)):
            inc1_tab[o] = _hint_inc(st0, r, o, 1)
            ex_inc1[o] = math.exp(inc1_tab[o])
        for i_cl in range(n_cl):
            k = cl_start[c_first + i_cl + 1] - cl_start[c_first + i_cl]
            if k <= 1:
                continue
            for ki in range(k):
                digit[ki] = 0
            for cidx in range(tab_off[i_cl + 1] - tab_off[i_cl]):
                H_tab[tab_off[i_cl] + cidx] = _joint_inc(st0, r, chf[i_cl], digit, k, add_buf)
                ki = 0
                while ki < k:
                    digit[ki] += 1
                    if digit[ki] < nchf[i_cl, ki]:
                        break
                    digit[ki] = 0
                    ki += 1
    LL0 = LL[:, r].copy()  # every draw starts from no bump: the hints' log-likelihood at b = 0 (0 if t < 0)
    for m in range(M):
        fnm = fn[m]
        for s in range(tw):
            Bm[s, r] = 0.0
            LL[s, r] = LL0[s]
        Mfn[:] = 0
        for d in range(t):  # in the loop itself: the same loop as a helper of its own made this kernel 1.6x slower
            G[d] = _fn_guide(fnm, Mfn, mu_fn, t, d)
        st = (t, hints, Bm, LL, bump, sigma, tabs, x0, dx, x_hi)
        logw = 0.0
        log_sel = 0.0
        n_rows = 0
        # ---- 1. ledger entries, cluster by cluster (a cluster: entries of one resource whose plausible bumps
        # overlap, drawn jointly; see _clusters)
        ok = True
        for ci in range(c_first, c_last):
            c_lo, c_hi = cl_start[ci], cl_start[ci + 1]
            k = c_hi - c_lo
            # options of each entry of the cluster, without their hint terms
            n_opt_tot = 0
            for ki in range(k):
                e = led_order[c_lo + ki]
                opt_lo[ki] = n_opt_tot
                n_o = _entry_options(c_lo + ki - e_first, led[e, _LE.dl_req], led[e, _LE.dl_q], last, t, G, pr_n,
                                     pr_o, pr_origin, pr_state, pr_sc, pr_S, pr_lo, pr_hi, opt_o[n_opt_tot:],
                                     opt_origin[n_opt_tot:], opt_state[n_opt_tot:], opt_score[n_opt_tot:],
                                     opt_S[n_opt_tot:])
                n_opt_tot += n_o
                opt_hi[ki] = n_opt_tot
                if n_o == 0:
                    ok = False
            if not ok:
                break
            if k == 1:
                # one entry: its options with their exact hint increments
                e = led_order[c_lo]
                r = led[e, _LE.res]
                for j in range(opt_lo[0], opt_hi[0]):
                    big[j] = opt_score[j] + _hint_inc1(st, r, opt_o[j], inc1_tab)
                jj, logz = _categorical(rng, big[opt_lo[0]:opt_hi[0]], opt_hi[0] - opt_lo[0])
                if jj < 0:
                    ok = False
                    break
                chosen[0] = opt_lo[0] + jj
                logw += logz
                parts[m, 0] += logz
                _add_bumps(st, r, opt_o[chosen[0]], 1)
            else:
                # joint over (plausible onset or the rest) per entry, choices fixed per call (chf): W_e(o) = Σ of
                # its options at o
                r = led[led_order[c_lo], _LE.res]
                i_cl = ci - c_first
                for ki in range(k):
                    e = led_order[c_lo + ki]
                    n_choice[ki] = nchf[i_cl, ki]
                    for q in range(n_choice[ki]):
                        ch_w[ki, q] = 0.0
                        ch_o[ki, q] = chf[i_cl, ki, q]
                    for j in range(opt_lo[ki], opt_hi[ki]):
                        o = opt_o[j]
                        q = n_choice[ki] - 1  # the rest
                        if o < NEVER and plaus[e, o]:
                            for qq in range(n_choice[ki] - 1):
                                if ch_o[ki, qq] == o:
                                    q = qq
                        ch_w[ki, q] += math.exp(opt_score[j])
                # the hint terms from the call's table unless a bump already lies in the cluster's reach
                clean = True
                for s in range(max(0, win_lo[i_cl] - 6), min(t, win_hi[i_cl] + 1) + 1):
                    if Bm[s, r] != 0.0:
                        clean = False
                # odometer over the combinations
                n_comb = 1
                for ki in range(k):
                    n_comb *= n_choice[ki]
                for ki in range(k):
                    digit[ki] = 0
                    for q in range(n_choice[ki]):
                        wv = ch_w[ki, q]
                        ch_lw[ki, q] = math.log(wv) if wv > 0.0 else -np.inf
                for cidx in range(n_comb):
                    sc = 0.0
                    for ki in range(k):
                        sc += ch_lw[ki, digit[ki]]
                    if sc > -np.inf:
                        if clean:
                            sc += H_tab[tab_off[i_cl] + cidx]
                        else:
                            sc += _joint_inc(st, r, ch_o, digit, k, add_buf)
                    big[cidx] = sc
                    ki = 0
                    while ki < k:
                        digit[ki] += 1
                        if digit[ki] < n_choice[ki]:
                            break
                        digit[ki] = 0
                        ki += 1
                cidx, logz = _categorical(rng, big, n_comb)
                if cidx < 0:
                    ok = False
                    break
                logw += logz
                parts[m, 0] += logz
                for ki in range(k):
                    digit[ki] = cidx % n_choice[ki]
                    cidx //= n_choice[ki]
                for ki in range(k):  # the plausible bumps first
                    o = ch_o[ki, digit[ki]]
                    if o >= 0:
                        _add_bumps(st, r, o, 1)
                for ki in range(k):
                    e = led_order[c_lo + ki]
                    o_pick = ch_o[ki, digit[ki]]
                    if o_pick >= 0:  # an option at that onset, ∝ its weight
                        n_b = 0
                        for j in range(opt_lo[ki], opt_hi[ki]):
                            big[n_b] = opt_score[j] if opt_o[j] == o_pick else -np.inf
                            n_b += 1
                        jj, _ = _categorical(rng, big, n_b)
                    else:  # an option off the plausible onsets, ∝ its weight and exact hint increment
                        n_b = 0
                        for j in range(opt_lo[ki], opt_hi[ki]):
                            o = opt_o[j]
                            if o < NEVER and plaus[e, o]:
                                big[n_b] = -np.inf
                            else:
                                big[n_b] = opt_score[j] + _hint_inc1(st, r, o, inc1_tab)
                            n_b += 1
                        jj, logz = _categorical(rng, big, n_b)
                        if jj < 0:
                            ok = False
                            break
                        _d = logz - math.log(ch_w[ki, digit[ki]])
                        logw += _d
                        parts[m, 0] += _d
                        _add_bumps(st, r, opt_o[opt_lo[ki] + jj], 1)
                    chosen[ki] = opt_lo[ki] + jj
                if not ok:
                    break
            # deadlines, rows
            for ki in range(k):
                e = led_order[c_lo + ki]
                j = chosen[ki]
                _d = _place_entry(rng, e, slot_of[e], opt_o[j], opt_origin[j], opt_state[j], opt_S[j], led, led_mc,
                                  t, last, expiry, s0, s1, fnm, Mfn, mu_fn, G, out_rows, out_mc, m)
                logw += _d
                parts[m, 0] += _d
                row = out_rows[m, slot_of[e]]
                if (row[RW.origin] == O_TT or row[RW.origin] == O_CT) and row[RW.version] == 0 and \
                        min(row[RW.onset], last) - row[RW.af] >= 2:
                    log_sel += log_1rho if row[RW.targeted] == 0 else log_rho
        n_rows = n_led_r
        if not ok:  # the buffers are reused across calls: what the next stages read is written in every draw
            out_logw[m] = -np.inf
            out_n[m] = n_rows
            out_sel[m] = 0.0
            for s in range(tw):
                out_B[m, s] = 0.0
            for s in range(max(t, 1)):
                out_miss[m, s] = 0
            continue
        # ---- 3. unseen rows whose bumps reach the observed hints: per resource and onset a birth process (one
        # more row or stop, each with its prior, exact hint increment and miss guide), at most MAX_PER_SLOT rows
        for o in range(0, hi_o + 1):
            rate = u_rate[o]
            if rate <= 0.0:
                continue
            rU, rF, rL = u_rU[o], u_rF[o], u_rL[o]
            _d = -rate  # Poisson: e^-rate, then rate / (j + 1) per row
            clean = True
            for s in range(max(0, o - 6), min(t, o + 1) + 1):
                if Bm[s, r] != 0.0:
                    clean = False
            for j in range(MAX_PER_SLOT):
                FU = _guide_sum(o, sl_lo, sl_hi, last, 0, 0, G, t)
                w_add = (rU * FU + rF + rL) / (j + 1)  # one more row against stopping, before its hint term
                first = j == 0 and clean
                inc1 = inc1_tab[o] if first else _hint_inc(st, r, o, 1)
                # one more row with probability A / (1 + A), A = w_add e^inc1; log(1 + A) is the step's normaliser
                if inc1 <= 600.0:
                    A = w_add * (ex_inc1[o] if first else math.exp(inc1))
                    _d += math.log1p(A)
                    stop = rng.random() * (1.0 + A) >= A
                else:  # e^inc1 would overflow: the same in logs
                    la = math.log(w_add) + inc1 if w_add > 0.0 else -np.inf
                    z = la + math.log1p(math.exp(-la)) if w_add > 0.0 else 0.0
                    _d += z
                    stop = rng.random() >= math.exp(la - z)
                if stop:
                    break
                u_ = rng.random() * (rU * FU + rF + rL)
                typ = 0 if u_ < rU * FU else (1 if u_ < rU * FU + rF else 2)
                if n_rows >= cap:
                    raise ValueError("particle row capacity exceeded")
                if typ == 0:
                    deadline, lg = _draw_slack(rng, o, sl_lo, sl_hi, last, 0, 0, True, fnm, Mfn, mu_fn, t)
                    if deadline < t:
                        _add_miss(deadline, fnm, Mfn, mu_fn, t, G)
                else:
                    deadline = min(last, o + _randint(rng, sl_lo, sl_hi))
                n_rows = _unseen_row(rng, out_rows, out_mc, m, n_rows, r, o, deadline, typ, t, wi, wf,
                                     dsw_cdf, af_cdf)
                _add_bumps(st, r, o, 1)
            logw += _d
            parts[m, 2] += _d
        out_logw[m] = logw
        out_n[m] = n_rows
        out_sel[m] = log_sel
        for s in range(tw):
            out_B[m, s] = Bm[s, r]
        for s in range(max(t, 1)):
            out_miss[m, s] = Mfn[s]


@njit_kernel
def _complete(rng, M, wi, wf, arrays, t, hints, fn, led, B_in, miss_in, sel_in, out_rows, out_mc, out_n, out_logw,
              out_vis, parts):
    """Stage two: each of the ``M`` weeks whose resources were drawn in stage one (rows of the ledger at their
    index, then the unseen rows of the hint window, ``out_n`` of them; bumps ``B_in``, misses ``miss_in``, proposal
    rates ``sel_in``) gets the new versions of its ledger entries' unseen updates, its unseen rows past the hint
    window, the update subset of the rows stated after ``t``, the exact likelihood of the miss counters and its
    visible outcomes; ``out_logw``: the log-weight of this stage."""
    (channels, bump, stated, p_af_gt, margC, margL, margT, mu_fn, tabs, x0, dx, x_hi, sigma, dsw_cdf, af_cdf, Po_cache,
     Po_done) = arrays
    (T, R, clock, n_ds, w0, w1, g0, g1, s0, s1, expiry, nch, p_in, p_lure_in, p_unreg, p_reg, lam_T, lam_C, lam_L,
     lam_u, rho, lam_v, lam_vl, p_hit, p_fa, log_rho, log_1rho) = _world_scalars(wi, wf)
    last = T - 1
    n_led = led.shape[0]
    cap = out_rows.shape[1]
    tw = max(t + 1, 1)
    Bm, LL, Mfn = _hint_state(t, R)
    big = np.zeros(_scratch_size(T, n_ds, w0, w1, nch, cap) + 4)
    big_o = np.zeros(big.size, dtype=np.int64)
    big_r = np.zeros(big.size, dtype=np.int64)
    P_o = np.zeros(T + 1)
    pool = np.zeros(out_rows.shape[1], dtype=np.int64)
    LL0 = np.zeros((tw, R))  # the hints' log-likelihood where no bump lies (most steps of most draws)
    if t >= 0:
        for s in range(tw):
            for r in range(R):
                LL0[s, r] = _ll(hints[s, r], 0.0, sigma, tabs, x0, dx, x_hi)
    for m in range(M):
        for s in range(tw):
            for r in range(R):
                Bm[s, r] = B_in[m, s, r]
                if Bm[s, r] == 0.0 or t < 0:
                    LL[s, r] = LL0[s, r]
                else:
                    LL[s, r] = _ll(hints[s, r], Bm[s, r], sigma, tabs, x0, dx, x_hi)
        for s in range(max(t, 0)):
            Mfn[s] = miss_in[m, s]
        fn_join = 0.0
        for s in range(max(t, 0)):
            fn_join += _log_pois(fn[s] - Mfn[s], max(mu_fn[s], MU_FLOOR))
        st = (t, hints, Bm, LL, bump, sigma, tabs, x0, dx, x_hi)
        logw = 0.0
        log_sel = sel_in[m]
        n_rows = out_n[m]
        # ---- 2. new versions of the unseen updates of ledger entries
        for i in range(n_led):
            row = out_rows[m, i]
            if row[RW.targeted] == 0:
                continue
            if led[i, _LE.cancel_u] >= 0:
                continue  # seen: its new version (if any) is a ledger entry
            n_rows, lw = _new_version(rng, st, out_rows, out_mc, m, i, n_rows, wi, wf, channels, big, big_o, big_r,
                                      P_o, fn, Mfn, mu_fn, t, cap, (Po_cache, Po_done))
            _d = lw
            logw += _d
            parts[m, 1] += _d
        hi_o = min(last, t + 6)
        # ---- 4. unseen rows past the hint window, from their prior
        n_rows = _prior_rows(rng, out_rows, out_mc, m, n_rows, t, hi_o, wi, wf, channels, dsw_cdf, af_cdf, margC,
                             margL, margT, big, cap)
        # ---- 5. the update subset: ledger members were proposed with rate rho (log_sel); the members stated after
        # t are drawn from their exact conditional given those (the subset's size, then a uniform subset)
        P = 0
        k = 0
        n_future = 0
        n_base = n_rows
        for i in range(n_base):
            row = out_rows[m, i]
            if row[RW.origin] == O_V2 or row[RW.origin] == O_CL or row[RW.registered] == 0:
                continue
            if min(row[RW.onset], last) - row[RW.af] < 2:
                continue
            P += 1
            if row[RW.ledger] >= 0:
                k += row[RW.targeted]
            else:
                pool[n_future] = i
                n_future += 1
        for kf in range(n_future + 1):
            big[kf] = _log_subset(k + kf, P, lam_u) + math.lgamma(n_future + 1.0) - math.lgamma(kf + 1.0) - \
                math.lgamma(n_future - kf + 1.0)
        kf, logz = _categorical(rng, big, n_future + 1)
        _d = logz - log_sel
        logw += _d
        parts[m, 3] += _d
        for j in range(kf):  # partial Fisher-Yates: a uniform subset
            jj = j + _randint(rng, 0, n_future - 1 - j)
            pool[j], pool[jj] = pool[jj], pool[j]
        for j in range(kf):
            i = pool[j]
            row = out_rows[m, i]
            row[RW.targeted] = 1
            row[RW.u] = _randint(rng, row[RW.af] + 1, min(row[RW.onset], last))
            row[RW.upd_reg] = 1 if rng.random() < p_reg else 0
            row[RW.polarity] = STALE
            if row[RW.upd_reg]:
                row[RW.au] = row[RW.u] - 1
        for j in range(kf):
            n_rows, lw = _new_version(rng, st, out_rows, out_mc, m, pool[j], n_rows, wi, wf, channels, big, big_o,
                                      big_r, P_o, fn, Mfn, mu_fn, t, cap, (Po_cache, Po_done))
            _d = lw
            logw += _d
            parts[m, 4] += _d
        # ---- 6. the miss counters and the visible outcomes
        _d = -fn_join  # the joined misses' counter likelihood is in the join's weight
        logw += _d
        parts[m, 5] += _d
        for s in range(t):
            _d = _log_pois(fn[s] - Mfn[s], mu_fn[s])
            logw += _d
            parts[m, 5] += _d
            out_vis[m, s, 2] = fn[s] - Mfn[s]
        for s in range(max(t, 0), T):
            out_vis[m, s, 0] = _poisson(rng, lam_v * p_hit / T)
            out_vis[m, s, 1] = _poisson(rng, lam_vl * p_fa / T)
            out_vis[m, s, 2] = _poisson(rng, mu_fn[s])
        out_logw[m] = logw
        out_n[m] = n_rows


@njit_kernel
def _new_version(rng, st, rows, mc, m, i, n_rows, wi, wf, channels, big, big_o, big_r, P_o, fn, Mfn, mu_fn, t, cap,
                 cache, blind=False):
    """The kind of row ``i``'s unseen update and the new version it creates (hint-informed unless ``blind``: drawn
    from the prior, the hint likelihood then entering the weight). Returns (n_rows, log-weight increment)."""
    T = wi[_WI.T]
    last = T - 1
    nch = wi[_WI.nch]
    w0, w1, g0, g1, s0, s1, expiry = wi[_WI.w0], wi[_WI.w1], wi[_WI.g0], wi[_WI.g1], wi[_WI.s0], wi[_WI.s1], \
        wi[_WI.expiry]
    p_in = wf[_WF.p_in]
    row = rows[m, i]
    u, reg, ds, r_p, kind = row[RW.u], row[RW.upd_reg], row[RW.ds], row[RW.res], row[RW.kind]
    if u >= last:
        row[RW.upd_kind] = _randint(rng, 0, 2)
        return n_rows, 0.0
    miss = reg == 0  # a registered new version is stated at u > t: it cannot have been missed yet
    lw = 0.0
    # P(onset) of the new version over (delta, w): P_o[T] is NEVER; cached per (ds, u) for channel rows
    nw = w1 - w0 + 1
    Po_cache, Po_done = cache
    if kind != KIND_TIME and Po_done[ds, u]:
        P_o[:] = Po_cache[ds, u]
        loop_hi = 2
    else:
        P_o[:] = 0.0
        loop_hi = 13
    for delta in range(2, loop_hi):
        ds2 = min(last, max(u, ds + delta))
        if kind == KIND_TIME:
            P_o[ds2] += 1.0 / 11.0
        else:
            for w in range(w0, w1 + 1):
                de2 = min(last, ds2 + w)
                for o in range(ds2, min(last, de2 + 8) + 1):
                    P_o[o] += _trigger_prob(o, ds2, de2, p_in, last) / (11.0 * nw)
                P_o[T] += _trigger_prob(NEVER, ds2, de2, p_in, last) / (11.0 * nw)
    if kind != KIND_TIME and not Po_done[ds, u]:
        Po_cache[ds, u] = P_o
        Po_done[ds, u] = True
    sl_lo, sl_hi = (g0, g1) if kind == KIND_TIME else (s0, s1)
    if blind:
        # prior draw: kind, then res and onset
        kd = _randint(rng, 0, 2)
        if kd == 0:
            row[RW.upd_kind] = 0
            return n_rows, 0.0
        n = 0
        for o in range(T + 1):
            big[n] = math.log(P_o[o]) if P_o[o] > 0.0 else -np.inf
            n += 1
        j, _ = _categorical(rng, big, n)
        o = NEVER if j == T else j
        r2 = r_p if (kind == KIND_TIME or kd == 2) else channels[_randint(rng, 0, nch - 1)]
        if o < NEVER:
            lw += _hint_inc(st, r2, o, 1)
    else:
        # hint-informed: options (cancel) + (res, onset)
        big[0] = math.log(1.0 / 3.0)
        big_o[0] = -1
        big_r[0] = -1
        n = 1
        n_r = 1 if kind == KIND_TIME else nch
        # the deadline sum of an onset whose deadlines all lie at or after t, or of a row that cannot miss (every
        # term 1): the same for every onset
        log_sl1 = math.log(_slack_sum(0, sl_lo, sl_hi, last, 0, 0, False, fn, Mfn, mu_fn, t))
        for jr in range(n_r):
            r2 = r_p if kind == KIND_TIME else channels[jr]
            if kind == KIND_TIME:
                pr = 2.0 / 3.0
            else:
                pr = (1.0 / 3.0) * ((1.0 if r2 == r_p else 0.0) + 1.0 / nch)
            for j in range(T + 1):
                if P_o[j] <= 0.0:
                    continue
                o = NEVER if j == T else j
                sc = math.log(pr * P_o[j])
                if o < NEVER:
                    if o <= t + 6:  # a bump in reach of the observed hints
                        sc += _hint_inc(st, r2, o, 1)
                    if _sum_reads_counters(o, sl_lo, miss, t):
                        sl = _slack_sum(o, sl_lo, sl_hi, last, 0, 0, miss, fn, Mfn, mu_fn, t)
                        sc += math.log(sl) if sl > 0.0 else -np.inf
                    else:
                        sc += log_sl1
                big[n] = sc
                big_o[n] = o
                big_r[n] = r2
                n += 1
        j, logz = _categorical(rng, big, n)
        lw += logz
        if j == 0:
            row[RW.upd_kind] = 0
            return n_rows, lw
        o, r2 = big_o[j], big_r[j]
        if kind == KIND_TIME:
            kd = _randint(rng, 1, 2)
        else:
            p_res = (1.0 / 3.0) * (1.0 if r2 == r_p else 0.0)
            kd = 2 if rng.random() * (p_res + 1.0 / (3.0 * nch)) < p_res else 1
    row[RW.upd_kind] = kd
    # (delta, w) given the onset, exactly
    n = 0
    for delta in range(2, 13):
        ds2 = min(last, max(u, ds + delta))
        if kind == KIND_TIME:
            big[n] = 0.0 if ds2 == o else -np.inf
            n += 1
        else:
            for w in range(w0, w1 + 1):
                p = _trigger_prob(o, ds2, min(last, ds2 + w), p_in, last)
                big[n] = math.log(p) if p > 0.0 else -np.inf
                n += 1
    j, _ = _categorical(rng, big, n)
    if kind == KIND_TIME:
        ds2 = min(last, max(u, ds + 2 + j))
        de2 = -1
    else:
        ds2 = min(last, max(u, ds + 2 + j // nw))
        de2 = min(last, ds2 + w0 + j % nw)
    deadline = NEVER
    lg = 0.0
    if o < NEVER:
        if blind:
            deadline = min(last, o + _randint(rng, sl_lo, sl_hi))
        else:
            deadline, lg = _draw_slack(rng, o, sl_lo, sl_hi, last, 0, 0, miss, fn, Mfn, mu_fn, t)
            if miss and deadline < t:
                Mfn[deadline] += 1
        _add_bumps(st, r2, o, 1)
    if kind == KIND_TIME:
        de2 = deadline
    lw -= lg
    if n_rows >= cap:
        raise ValueError("particle row capacity exceeded")
    _new_row(rows, mc, m, n_rows, O_V2, kind, r2, u, min(last, de2 + expiry), ds2, de2, o, deadline, POS, reg,
             row[RW.version] + 1, -1, row[RW.cross], row[RW.prio], mc[m, i])
    rows[m, n_rows, RW.parent] = i
    return n_rows + 1, lw


@njit_leaf
def _unseen_row(rng, rows, mc, m, n_rows, r, o, deadline, typ, t, wi, wf, dsw_cdf, af_cdf):
    """An unseen row on resource ``r`` with onset ``o``: ``typ`` 0 unregistered task, 1 task stated after ``t``,
    2 lure stated after ``t``; the rest of its fields from their exact conditional prior."""
    T = wi[_WI.T]
    last = T - 1
    future = typ != 0
    if r == wi[_WI.clock]:
        kind, origin, ds, de = KIND_TIME, O_TT, o, deadline
        pol = POS
    else:
        kind = KIND_CHANNEL
        origin = O_CL if typ == 2 else O_CT
        pol = LURE if typ == 2 else POS
        ds, de = _draw_ds_w(rng, o, typ, dsw_cdf, wi[_WI.w0], wi[_WI.w1], last)
    af, cross = _draw_af(rng, ds, future, af_cdf)
    _new_row(rows, mc, m, n_rows, origin, kind, r, af, min(last, de + wi[_WI.expiry]), ds, de, o, deadline, pol,
             1 if future else 0, 0, -1, cross, _randint(rng, 1, 3), 0.5 + 2.5 * rng.random())
    return n_rows + 1


@njit_kernel
def _prior_rows(rng, rows, mc, m, n_rows, t, hi_o, wi, wf, channels, dsw_cdf, af_cdf, margC, margL, margT, buf,
                cap):
    """Unseen rows with onsets past the hint window (or never), drawn from their prior."""
    T = wi[_WI.T]
    last = T - 1
    nch = wi[_WI.nch]
    clock = wi[_WI.clock]
    lam_T, lam_C, lam_L, p_unreg = wf[_WF.lam_T], wf[_WF.lam_C], wf[_WF.lam_L], wf[_WF.p_unreg]
    g0, g1, s0, s1 = wi[_WI.g0], wi[_WI.g1], wi[_WI.s0], wi[_WI.s1]
    for typ in range(5):
        # 0 unregistered time, 1 future time, 2 unregistered channel, 3 future channel task, 4 future lure
        n = 0
        for o in range(hi_o + 1, T + 1):
            if typ <= 1:
                if o == T:
                    p = 0.0
                else:
                    p = 1.0 / T if typ == 0 else margT[t + 1, o]
            elif nch == 0:
                p = 0.0
            elif typ == 2:
                p = margC[0, o]
            elif typ == 3:
                p = margC[t + 1, o]
            else:
                p = margL[t + 1, o]
            buf[n] = p
            n += 1
        tot = 0.0
        for j in range(n):
            tot += buf[j]
        lam = (lam_T * p_unreg, lam_T * (1.0 - p_unreg), lam_C * p_unreg, lam_C * (1.0 - p_unreg), lam_L)[typ]
        count = _poisson(rng, lam * tot)
        for _ in range(count):
            u_ = rng.random() * tot
            acc = 0.0
            j = 0
            for j in range(n):
                acc += buf[j]
                if u_ < acc and buf[j] > 0.0:
                    break
            o = hi_o + 1 + j
            o = NEVER if o == T else o
            if typ <= 1:
                r = clock
                deadline = min(last, o + _randint(rng, g0, g1))
            else:
                r = channels[_randint(rng, 0, nch - 1)]
                deadline = NEVER if o == NEVER else min(last, o + _randint(rng, s0, s1))
            if n_rows >= cap:
                raise ValueError("particle row capacity exceeded")
            n_rows = _unseen_row(rng, rows, mc, m, n_rows, r, o, deadline, (0, 1, 0, 1, 2)[typ], t, wi, wf, dsw_cdf,
                                 af_cdf)
    return n_rows


# ------------------------------------------------------------------------------------------------ the estimator
def _stated_table(config: WorldConfig) -> np.ndarray:
    """``P[ds, af, cross]``: how the generator's ``_stated`` places the statement of a window starting at ds."""
    T = config.horizon
    step_day, _, _ = calendar(config)
    day_first = np.searchsorted(step_day, np.arange(config.n_days))
    out = np.zeros((T, T, 2))
    for ds in range(T):
        day = step_day[ds]
        p_cross = config.p_cross_day if day >= 1 else 0.0
        if p_cross > 0.0:
            lo, hi = day_first[max(0, day - 2)], day_first[day]
            out[ds, lo:hi, 1] += p_cross / (hi - lo)
        for k in range(1, 7):
            out[ds, max(0, ds - k), 0] += (1.0 - p_cross) / 6.0
    return out


@dataclass
class Particles:
    """Weeks drawn from the posterior: the rows of each (:data:`ROW_FIELDS`), visible outcome counts per step,
    and the observation they were drawn for. Equal weights after :meth:`PosteriorSampler.sample`."""

    rows: np.ndarray
    miss_cost: np.ndarray
    n_rows: np.ndarray
    visible: np.ndarray
    """``(n, T, 3)``: visible TP, FP and FN counted at each step."""
    weights: np.ndarray
    ess: float
    """Effective sample size of the weighted draws before resampling (Kish; of the last stage, the resources'
    own in ``PosteriorSampler.ess_resources_``)."""
    log_weights: np.ndarray
    source: np.ndarray
    """Index of each week among the weighted draws it was resampled from (equal: the same week)."""
    observed: Observed | None
    sampler: PosteriorSampler

    def __len__(self) -> int:
        return int(self.n_rows.size)

    def table(self, i: int) -> np.ndarray:
        """Rows of week ``i``."""
        return self.rows[i, : self.n_rows[i]]

    def problem(self, i: int, *, budget_left, per_step_cap, per_step_cost_cap=None, t0=None,
                last_query=None) -> Problem:
        """The rest of week ``i`` from the observation's step (``t0``, default ``observed.t``) as the DP's problem:
        its stored rows, what is already resolved (the observed events) and the Set F1 terms no query changes."""
        s = self.sampler
        obs = self.observed
        t = 0 if obs is None else obs.t
        (tp_fixed,), (fp_fixed,), (due,) = self._fixed_counts(np.array([i]))
        res, start, until, deadline, positive, cand_lo, cand_hi = _registered_rows(self.rows[i], self.n_rows[i],
                                                                                   s.world_.lookahead)
        return Problem(
            horizon=s.world_.horizon, costs=s.costs_, t0=t if t0 is None else int(t0),
            last_query=(np.full(s.costs_.size, -1, dtype=np.int64) if obs is None else obs.last_query)
            if last_query is None else np.asarray(last_query, dtype=np.int64),
            budget_left=budget_left, n_max=per_step_cap, cost_cap=per_step_cost_cap,
            late_execute=s.late_policy == "execute", tp_fixed=int(tp_fixed), fp_fixed=int(fp_fixed), due=int(due),
            res=res, start=start, until=until, deadline=deadline, positive=positive, cand_lo=cand_lo,
            cand_hi=cand_hi)

    def _fixed_counts(self, weeks: np.ndarray) -> tuple:
        """Per week in ``weeks``, the Set F1 terms no query from the observation on changes: TP and FP fixed
        (visible outcomes and the observed events) and the due positives (visible and hidden)."""
        hits = fps = 0
        if self.observed is not None:
            ev = self.observed.ledger.event
            hits, fps = int(np.sum(ev == 1)), int(np.sum((ev == 2) | (ev == 4)))
        rows = self.rows
        pos = (rows[:, :, RW.polarity][weeks] == POS) & (rows[:, :, RW.onset][weeks] < NEVER)
        valid = np.arange(rows.shape[1])[None, :] < self.n_rows[weeks][:, None]
        vis = self.visible[weeks].sum(axis=1)
        return vis[:, 0] + hits, vis[:, 1] + fps, vis[:, 0] + vis[:, 2] + np.sum(valid & pos, axis=1)

    def rest_values(self, weeks, *, t0, budget_left, per_step_cap, per_step_cost_cap=None, last_queries, budgets,
                    tp_add, fp_add) -> np.ndarray:
        """``(len(weeks), V)``: for drawn week ``weeks[i]`` and variant ``v``, the optimum Set F1 of its rest from
        step ``t0`` (:func:`~membudget.teachers.hindsight_dp.rest_values`, exactly) with the last queries
        ``last_queries[v]``, the budget ``budgets[v]`` (None: none) and ``tp_add[i, v]`` / ``fp_add[i, v]``
        resolutions added to what is already resolved — the rests of the weeks after different first actions,
        with one kernel call for all the weeks. ``budget_left`` and the caps are :meth:`problem`'s; its rests are
        built only for a week with a variant that needs the branch and bound."""
        s = self.sampler
        weeks = np.asarray(weeks, dtype=np.int64)
        R, T = s.costs_.size, s.world_.horizon
        P0 = np.ascontiguousarray(np.asarray(last_queries, dtype=np.int64).reshape(-1, R))
        tp_fixed, fp_fixed, due = self._fixed_counts(weeks)
        tpf = tp_fixed[:, None] + np.asarray(tp_add, dtype=np.int64)
        fpf = fp_fixed[:, None] + np.asarray(fp_add, dtype=np.int64)
        if t0 >= T:
            return f1_of_counts(tpf, fpf, due[:, None])
        status, tp, fp = _rests(self.rows, self.n_rows, weeks, T, int(t0), s.costs_.astype(np.int64),
                                s.late_policy == "execute", s.world_.lookahead, _cap(per_step_cap),
                                _cap(per_step_cost_cap), P0, kernel_budgets(budgets), tpf, fpf, due)
        out = f1_of_counts(tpf + tp, fpf + fp, due[:, None])
        for i in np.flatnonzero((status != 0).any(axis=1)):
            problem = functools.partial(self.problem, int(weeks[i]), budget_left=budget_left,
                                        per_step_cap=per_step_cap, per_step_cost_cap=per_step_cost_cap, t0=t0)
            out[i] = variant_f1(problem, P0, budgets, tpf[i], fpf[i], int(due[i]), status[i], tp[i], fp[i])
        return out

    def episode(self, i: int, rng=None) -> Episode:
        """Week ``i`` as a complete :class:`Episode` (ids and row order as the generator writes them; the parts no
        observation touches — visible intentions' fields, future hints, unseen update kinds — drawn from their
        exact conditional prior with ``rng``)."""
        return _episode(self, i, np.random.default_rng(rng))


@njit_kernel
def _registered_rows(rows, n, lookahead):
    """The registered rows among a drawn week's first ``n`` as the DP reads them: resource, start (onset), until
    (active until), deadline, positive, and the steps a query may be a candidate (``cand_lo``, ``cand_hi``)."""
    m = 0
    for j in range(n):
        if rows[j, RW.registered] == 1:
            m += 1
    res, start, until = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    deadline, lo, hi = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    positive = np.empty(m, dtype=np.bool_)
    m = 0
    for j in range(n):
        row = rows[j]
        if row[RW.registered] == 1:
            res[m], start[m], until[m], deadline[m] = row[RW.res], row[RW.onset], row[RW.au], row[RW.deadline]
            positive[m] = row[RW.polarity] == POS
            lo[m] = max(row[RW.af], row[RW.ds] - lookahead)
            hi[m] = min(row[RW.au], row[RW.de])
            m += 1
    return res, start, until, deadline, positive, lo, hi


@njit_kernel
def _rests(rows, n_rows, weeks, T, t0, costs, late_execute, lookahead, n_max, cost_cap, P0, budgets, tpf, fpf, due):
    """:func:`~membudget.teachers.hindsight_dp._rest_solve` of each drawn week in ``weeks`` on its registered rows
    (the rest :meth:`Particles.problem` describes): per week and variant ``(status, tp, fp)``."""
    R = costs.size
    W, V = weeks.size, P0.shape[0]
    status = np.zeros((W, V), dtype=np.int64)
    tp = np.zeros((W, V), dtype=np.int64)
    fp = np.zeros((W, V), dtype=np.int64)
    for i in range(W):
        k = weeks[i]
        res, start, until, deadline, positive, lo, hi = _registered_rows(rows[k], n_rows[k], lookahead)
        status[i], tp[i], fp[i] = _rest_solve(T, R, t0, res, start, until, deadline, positive, late_execute, lo, hi,
                                              costs, n_max, cost_cap, P0, budgets, tpf[i], fpf[i], due[i])
    return status, tp, fp


@dataclass
class _ResourceDraws:
    """Stage one's draws per resource (first axis) and draw (second): rows (ledger entries at their slot, then the
    unseen rows of the hint window), their miss costs and number, log-weights, bumps on the observed hints, misses
    per observed step and proposal rates of the update subset. The steps' axes span the horizon (the buffers are kept
    from call to call, :meth:`PosteriorSampler._draws_buffers`); a call reads and writes its observed steps only."""

    rows: np.ndarray
    mc: np.ndarray
    n: np.ndarray
    logw: np.ndarray
    B: np.ndarray
    miss: np.ndarray
    sel: np.ndarray

    @classmethod
    def zeros(cls, R: int, M: int, cap: int, tw: int, tl: int) -> _ResourceDraws:
        return cls(rows=np.zeros((R, M, cap, len(ROW_FIELDS)), dtype=np.int64), mc=np.zeros((R, M, cap)),
                   n=np.zeros((R, M), dtype=np.int64), logw=np.zeros((R, M)), B=np.zeros((R, M, tw)),
                   miss=np.zeros((R, M, tl), dtype=np.int64), sel=np.zeros((R, M)))

    def of(self, r: int, m: int) -> tuple:
        """Resource ``r``'s buffers of draws ``0..m-1`` in :func:`_sample_resource`'s order."""
        return (self.rows[r, :m], self.mc[r, :m], self.n[r, :m], self.logw[r, :m], self.B[r, :m], self.miss[r, :m],
                self.sel[r, :m])


@dataclass
class _Call:
    """One call of :meth:`PosteriorSampler.weighted`: ``M`` draws for the observation up to step ``t`` (-1:
    nothing observed) — its hints, miss counters (``fn_row``: padded to at least one step), ledger (:data:`_LE`
    columns) with miss costs and entries per resource, the order and clusters the entries are drawn in
    (:func:`_clusters`), the call's tables and base miss rates, and the buffers of the draws."""

    M: int
    t: int
    hints: np.ndarray
    fn: np.ndarray
    fn_row: np.ndarray
    led: np.ndarray
    led_mc: np.ndarray
    n_led_r: np.ndarray
    order: np.ndarray
    starts: np.ndarray
    plaus: np.ndarray
    tables: tuple
    mu: np.ndarray
    draws: _ResourceDraws
    slot_of: np.ndarray
    clusters_of: np.ndarray
    """``(R, 2)``: each resource's clusters, ``first, last + 1`` (0, 0: none)."""
    parts: np.ndarray


def _seen_visible(observed: Observed) -> np.ndarray:
    """``(t, 2)``: the visible TP and FP of the observed steps, the counters less the ledger's own hits and false
    alarms."""
    t = observed.t
    ev, at = observed.ledger.event, observed.ledger.resolved_at
    hits = np.bincount(at[ev == 1], minlength=t)[:t]
    fps = np.bincount(at[(ev == 2) | (ev == 4)], minlength=t)[:t]
    return np.stack([observed.tp - hits, observed.fp - fps], axis=1)


@functools.lru_cache(maxsize=8)
def _world_tables(world: WorldConfig, cost_profile: str, table_step: float) -> dict:
    """The fitted attributes of a :class:`PosteriorSampler` for a world (its tables of the generator's
    distributions), built once per process and world: every planner of a study fits a sampler per week, and the
    tables, with the caches that fill as calls need them (``_call_cache_``, ``_po_cache_``: their entries depend
    on the world and the step only), are the same for all of them."""
    w = _world_constants(world)
    costs = resource_costs(w["classes"], cost_profile)
    T = world.horizon
    last = T - 1
    w0, w1 = world.channel_window
    g0, g1 = world.time_grace
    s0, s1 = world.channel_slack
    nch = int(w["channels"].size)
    n_ds = max(1, T - 3)
    lam_T, lam_C, lam_u = world.n_time, world.n_channel if nch else 0.0, world.n_updates
    lam_L = world.n_channel_lures if nch else 0.0
    stated = _stated_table(world)
    cum = np.cumsum(stated.sum(axis=2), axis=1)  # P(af <= x | ds)
    p_af_gt = np.ones((T, T + 1))
    p_af_gt[:, 1:] = np.clip(1.0 - cum, 0.0, 1.0)
    base = {}
    for name, p in (("C", world.p_onset_in_window), ("L", world.p_lure_in_window)):
        b = np.zeros((n_ds, T + 1))
        for ds in range(n_ds):
            for wv in range(w0, w1 + 1):
                de = min(last, ds + wv)
                for o in range(ds, T + 1):
                    b[ds, o] += _trigger_prob(NEVER if o == T else o, ds, de, p, last) / (n_ds * (w1 - w0 + 1))
        base[name] = b
    trig = np.zeros((2, n_ds, w1 - w0 + 1, T + 1))
    for k, p in enumerate((world.p_onset_in_window, world.p_lure_in_window)):
        for ds in range(n_ds):
            for j, wv in enumerate(range(w0, w1 + 1)):
                de = min(last, ds + wv)
                for o in range(ds, T + 1):
                    trig[k, ds, j, o] = _trigger_prob(NEVER if o == T else o, ds, de, p, last)
    margC = p_af_gt[:n_ds].T @ base["C"]
    margL = p_af_gt[:n_ds].T @ base["L"]
    margT = p_af_gt.T / T
    vis_fn = np.zeros(T)
    for o in range(T):
        for d in range(3):
            vis_fn[min(last, o + d)] += 1.0 / (3 * T)
    mu_fn = world.n_visible * (1 - world.p_visible_hit) * vis_fn
    # expected pool (registered tasks whose trigger is at least 2 steps after their statement)
    p_af_le = np.concatenate([np.zeros((T, 1)), cum], axis=1)  # p_af_le[ds, x + 1] = P(af <= x | ds)
    pool_t = sum(p_af_le[ds, max(0, ds - 2) + 1] for ds in range(T) if ds >= 2) / T
    pool_c = 0.0
    for ds in range(n_ds):
        for o in range(T + 1):
            lim = min(o, last)
            if lim >= 2:
                pool_c += base["C"][ds, o] * p_af_le[ds, lim - 2 + 1]
    expected_pool = (lam_T * pool_t + lam_C * pool_c) * (1 - world.p_unregistered)
    rho = 0.0 if lam_u <= 0 else float(np.clip(lam_u / max(expected_pool, 1e-9), 1e-3, 0.99))
    sigma = float(world.hint_noise)
    dx = table_step * sigma
    x0, x_hi = -3.05, 1.05
    tabs = _ll_tables(sigma, x0, x_hi, dx)
    bump = hint_bump(world)
    wi = np.array([T, len(w["names"]), w["clock"], n_ds, w0, w1, g0, g1, s0, s1, world.ledger_expiry, nch],
                  dtype=np.int64)
    wf = np.array([world.p_onset_in_window, world.p_lure_in_window, world.p_unregistered, world.p_update_registered,
                   lam_T, lam_C, lam_L, lam_u, rho, world.n_visible, world.n_visible_lures, world.p_visible_hit,
                   world.p_visible_false_alarm])
    # a rough rate of hidden misses per step, for the first pass's miss guide (about half the hidden
    # positives end missed); any positive value keeps the sampler exact, only its efficiency depends on it
    background = 0.5 * (lam_T + lam_C) * (1 - world.p_unregistered / 2) / T
    return dict(costs_=costs, trig_=trig, stated_=stated, expected_pool_=expected_pool, rho_=rho, wi_=wi, wf_=wf,
                tables_=(w["channels"], bump, stated, p_af_gt, margC, margL, margT, mu_fn, tabs, x0, dx, x_hi, sigma),
                capacity_=lam_T + lam_C + lam_L + 2 * lam_u, background_=background, _call_cache_={},
                _po_cache_=(np.zeros((T, T, T + 1)), np.zeros((T, T), dtype=np.bool_)))


class PosteriorSampler:
    """Exact-model posterior over ``PMWeek-v0`` weeks given what the agent has seen (module docstring).

    Parameters
    ----------
    world : WorldConfig, optional
        The world the agent plays (default ``WorldConfig()``); ``load`` must be 0.
    cost_profile : str
        Prices of the resources (as ``PMWeekEnv``).
    late_policy : str
        ``"expire"`` or ``"execute"`` (only what the DP problems of the draws need).
    n_particles : int
        Weighted draws per call of :meth:`sample`, resampled to the number asked for (at least that number).
    table_step : float
        Step of the hint log-density table, in units of the hint noise's standard deviation.

    Attributes (after :meth:`fit`): ``world_``, ``costs_``, ``rho_`` (the proposal's update rate per pool member),
    ``expected_pool_``, ``tables_``.
    """

    def __init__(self, *, world=None, cost_profile="unit", late_policy="expire", load=0, n_particles=256,
                 table_step=1e-3):
        self.world = world
        self.cost_profile = cost_profile
        self.late_policy = late_policy
        self.load = load
        self.n_particles = n_particles
        self.table_step = table_step

    @classmethod
    def from_env(cls, env, **kwargs):
        e = env.unwrapped
        return cls(world=e.world, cost_profile=e.cost_profile, late_policy=e.late_policy, load=e.load, **kwargs)

    def __repr__(self):
        return constructor_repr(self)

    def fit(self, X=None, y=None):
        """Check the settings and tabulate the generator's distributions for the world (``X``, ``y`` ignored)."""
        world = WorldConfig() if self.world is None else self.world
        if not isinstance(world, WorldConfig):
            raise TypeError(f"world must be a WorldConfig, got {type(world).__name__}")
        if self.load != 0:
            raise ValueError(f"the posterior covers load 0 only, got load={self.load!r}")
        if self.late_policy not in ("expire", "execute"):
            raise ValueError(f"late_policy must be 'expire' or 'execute', got {self.late_policy!r}")
        check_int("n_particles", self.n_particles, 1, 10**7)
        if not (isinstance(self.table_step, float) and 0 < self.table_step <= 0.01):
            raise ValueError(f"table_step must be a float in (0, 0.01], got {self.table_step!r}")
        if not world.hint_noise > 0:
            raise ValueError("the posterior needs hint noise > 0 (the hints' density)")
        check_known("cost_profile", self.cost_profile, COST_PROFILES, sorted(COST_PROFILES))
        self.world_ = world
        for name, value in _world_tables(world, self.cost_profile, self.table_step).items():
            setattr(self, name, value)
        return self

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_draws_buffers_", None)  # scratch space (:meth:`_draws_buffers`), made again by the next call
        return state

    # -------------------------------------------------------------------------------------------------- draws
    def _call_tables(self, t: int):
        """Tables of one call (step ``t``): cumulative weights of (ds, w) given the onset of an unseen channel row
        (unregistered task, task or lure stated after ``t``), of (af, cross) given ds (any, after ``t``), and the
        new versions' onset cache. The first two depend on ``t`` only and the cache on the world only (it holds
        the onset distribution of a new version per (ds, u), computed the same way whenever first needed), so
        all are kept for later calls."""
        cached = self._call_cache_.get(t)
        if cached is None:
            cached = self._call_cache_[t] = self._call_tables_new(t)[:2] + self._po_cache_
        return cached

    def _call_tables_new(self, t: int):
        T = self.world_.horizon
        p_gt = self.tables_[3][:, t + 1]
        n_ds = self.trig_.shape[1]
        w = np.stack([self.trig_[0], self.trig_[0] * p_gt[:n_ds, None, None], self.trig_[1] * p_gt[:n_ds, None, None]])
        dsw = np.ascontiguousarray(np.cumsum(w.transpose(0, 3, 1, 2).reshape(3, T + 1, -1), axis=2))
        st = self.stated_.copy()
        later = st.copy()
        later[:, : t + 1, :] = 0.0
        af = np.ascontiguousarray(np.cumsum(np.stack([st, later]).reshape(2, T, 2 * T), axis=2))
        return dsw, af, np.zeros((T, T, T + 1)), np.zeros((T, T), dtype=np.bool_)

    def _ledger_table(self, obs: Observed):
        t = obs.t
        L = obs.ledger
        n = len(L)
        led = np.zeros((n, len(_LE)), dtype=np.int64)
        led[:, _LE.kind], led[:, _LE.res], led[:, _LE.af] = L.kind, L.resource, L.active_from
        led[:, _LE.ds], led[:, _LE.de], led[:, _LE.version] = L.declared_start, L.declared_end, L.version
        led[:, _LE.parent], led[:, _LE.cancel_u], led[:, _LE.left_at] = L.parent, L.cancelled_at, L.left_at
        led[:, _LE.event], led[:, _LE.prio], led[:, _LE.cross] = L.event, L.priority, L.cross_day
        q = obs.queried
        queried_at = {}
        for e in range(n):
            r, af = int(L.resource[e]), int(L.active_from[e])
            steps = queried_at.get(r)
            if steps is None:
                steps = queried_at[r] = np.flatnonzero(q[:, r])
            if L.event[e]:
                qs = int(L.resolved_at[e])
                before = steps[steps < qs]
                led[e, _LE.lo] = int(before[-1]) if before.size else -1
                led[e, _LE.hi] = qs
                led[e, _LE.pol_req] = 1 if L.event[e] in EVENT_POSITIVE else 2
                led[e, _LE.dl_req] = 1 if L.event[e] in EVENT_ON_TIME else 2
                led[e, _LE.dl_q] = qs
            else:
                end = t - 1 if L.left_at[e] < 0 else int(L.left_at[e]) - 1
                inside = steps[(steps >= af) & (steps <= end)]
                led[e, _LE.lo] = int(inside[-1]) if inside.size else -1
                led[e, _LE.hi] = NEVER
        return led, np.asarray(L.miss_cost, dtype=np.float64)

    def weighted(self, observed: Observed | None, n_particles=None, rng=None, expected_misses=None,
                 shuffle=False) -> Particles:
        """``n_particles`` (default ``self.n_particles``) weighted draws for ``observed`` (None: nothing observed,
        the generator's prior). ``expected_misses`` (``(R, steps)``, e.g. ``expected_misses_`` of the previous
        step's call) replaces the small first pass that estimates each resource's misses for the miss guide; it
        steers the proposals only (any value leaves the draws exact). ``shuffle``: the resources in a random order
        (those with a seen hidden miss still first) instead of the default one — any order leaves the draws exact;
        another one can succeed where the default's proposals miss the observations."""
        if not hasattr(self, "world_"):
            raise RuntimeError("this PosteriorSampler is not fitted yet; call fit() first")
        rng = np.random.default_rng(rng)
        M = self.n_particles if n_particles is None else check_int("n_particles", n_particles, 1, 10**7)
        call = self._call(observed, M)
        res_order = self._resource_order(call, shuffle, rng)
        expected = self._expected_misses(call, res_order, expected_misses, rng)
        idx, logW, ess_r = self._stage_one(call, res_order, expected, rng)
        rows, mc, n_rows, vis, logw = self._stage_two(call, idx, rng)
        logw += logW
        self.parts_ = call.parts
        w = _normalise(logw)
        self.expected_misses_ = np.stack([w @ call.draws.miss[r, idx[r], : call.fn_row.size]
                                          for r in range(idx.shape[0])])
        self.ess_resources_ = ess_r
        if observed is not None and call.t > 0:
            vis[:, : call.t, :2] = _seen_visible(observed)
        return Particles(rows=rows, miss_cost=mc, n_rows=n_rows, visible=vis, weights=w,
                         ess=float(1.0 / np.sum(w ** 2)), log_weights=logw, source=np.arange(M), observed=observed,
                         sampler=self)

    def _call(self, observed: Observed | None, M: int) -> _Call:
        """The observation as the kernels read it, its ledger's clusters, the call's tables and empty buffers for
        ``M`` draws."""
        T = self.world_.horizon
        R = self.costs_.size
        if observed is None:
            t = -1
            hints = np.zeros((0, R))
            fn = np.zeros(0, dtype=np.int64)
            led = np.zeros((0, len(_LE)), dtype=np.int64)
            led_mc = np.zeros(0)
        else:
            if not isinstance(observed, Observed):
                raise TypeError(f"observed must be an Observed (an AgentView's .observed) or None, got "
                                f"{type(observed).__name__}")
            if observed.horizon != T or observed.costs.size != R:
                raise ValueError("the observation is of another world (horizon or resources differ)")
            t = observed.t
            if not 0 <= t < T:
                raise ValueError(f"observations up to a decision step 0..{T - 1} only, got t={t}")
            hints = np.ascontiguousarray(observed.hints[: t + 1], dtype=np.float64)
            fn = np.asarray(observed.fn, dtype=np.int64)
            led, led_mc = self._ledger_table(observed)
        order, starts, plaus = _clusters(led, hints, t, self)
        res_of = led[:, _LE.res]
        n_led_r = np.bincount(res_of, minlength=R) if led.shape[0] else np.zeros(R, dtype=np.int64)
        # each entry's slot among its resource's entries (by index), and each resource's clusters (consecutive)
        by_res = np.argsort(res_of, kind="stable")
        slot_of = np.empty(led.shape[0], dtype=np.int64)
        slot_of[by_res] = np.arange(led.shape[0]) - np.searchsorted(res_of[by_res], res_of[by_res])
        cl_res = res_of[order[starts[:-1]]]
        clusters_of = np.zeros((R, 2), dtype=np.int64)
        for r in np.unique(cl_res):
            cs = np.flatnonzero(cl_res == r)
            clusters_of[r] = cs[0], cs[-1] + 1
        tl = max(t, 1)
        fn_row = np.zeros(tl, dtype=np.int64)
        if t > 0:
            fn_row[:t] = fn
        return _Call(
            M=M, t=t, hints=hints, fn=fn, fn_row=fn_row, led=led, led_mc=led_mc, n_led_r=n_led_r, order=order,
            starts=starts, plaus=plaus, tables=self.tables_ + self._call_tables(t),
            mu=np.maximum(self.tables_[7], MU_FLOOR)[:tl],
            draws=self._draws_buffers(R, M, int(n_led_r.max(initial=0)) + SLOT_ROWS),
            slot_of=slot_of, clusters_of=clusters_of, parts=np.zeros((M, 6)))

    def _draws_buffers(self, R: int, M: int, cap: int) -> _ResourceDraws:
        """Stage one's buffers for ``M`` draws of at least ``cap`` rows per resource and the whole horizon's steps,
        kept for the next calls of ``M`` draws while they have the rows (the ledger grows slowly, so most calls of a
        week reuse them: fresh pages cost more than the kernel's writes). Every entry a later stage reads is written
        by the call first (:func:`_sample_resource`)."""
        buf = getattr(self, "_draws_buffers_", None)
        if buf is None or buf.rows.shape[:2] != (R, M) or buf.rows.shape[2] < cap:
            T = self.world_.horizon
            buf = self._draws_buffers_ = _ResourceDraws.zeros(R, M, cap + SLOT_ROWS // 2, T, T)
        return buf

    def _resource_order(self, call: _Call, shuffle: bool, rng) -> list:
        """The order stage one draws the resources in: those whose ledger shows a hidden miss (a late miss or late
        execution: the counter took it at the entry's deadline) first, so that the resources before them do not
        use up the counters it needs; then the clock and the rest by ledger size, or (``shuffle``) at random."""
        R = self.costs_.size
        forced = np.zeros(R, dtype=np.int64)
        if call.led.shape[0]:
            np.add.at(forced, call.led[:, _LE.res], (call.led[:, _LE.event] == 3) | (call.led[:, _LE.event] == 4))
        if shuffle:
            perm = rng.permutation(R)
            return sorted(range(R), key=lambda r: (forced[r] == 0, int(perm[r])))
        clock = int(self.wi_[_WI.clock])
        return sorted(range(R), key=lambda r: (-int(forced[r]), r != clock, -int(call.n_led_r[r]), r))

    def _expected_misses(self, call: _Call, res_order: list, expected_misses, rng) -> np.ndarray:
        """``(R, steps)``: each resource's expected misses per observed step, which the intermediate targets of
        stage one treat as Poisson noise while the resource is still to come: ``expected_misses`` where given,
        else a small first pass of each resource alone."""
        R, tl = self.costs_.size, call.fn_row.size
        expected = np.zeros((R, tl))
        if expected_misses is not None:
            em = np.asarray(expected_misses, dtype=np.float64)
            n = min(tl, em.shape[1]) if em.ndim == 2 and em.shape[0] == R else 0
            expected[:, :n] = em[:, :n]
        elif call.t > 0:
            M1 = min(call.M, max(16, call.M // 8))  # the first pass writes into the first M1 of the M rows
            tables = call.tables[:7] + (call.mu + self.background_,) + call.tables[8:]
            fn = np.tile(call.fn_row.astype(np.float64), (M1, 1))
            for r in res_order:
                self._draw_resource(call, r, M1, tables, fn, rng)
                expected[r] = _normalise(call.draws.logw[r, :M1]) @ call.draws.miss[r, :M1, :tl]
        return expected

    def _stage_one(self, call: _Call, res_order: list, expected: np.ndarray, rng):
        """Resources one after the other (``res_order``), as the steps of a sequential Monte Carlo: draw m of each
        resource continues week m, then the weeks are resampled (ancestors keep their resources' draws). The
        intermediate targets include the miss counters' likelihood with the misses of the resources still to come
        treated as Poisson noise (their ``expected`` misses), so that a resource explains a counter in proportion
        to its share rather than whenever it can; the last target is exact. The miss guide is that likelihood's
        ratio and stays in the weight. ``(idx, log-weights, ess per resource)``: week m takes draw ``idx[r, m]``
        of resource r."""
        M, t = call.M, call.t
        R = self.costs_.size
        cur = np.zeros((M, call.fn_row.size), dtype=np.int64)
        logW = np.zeros(M)
        idx = np.zeros((R, M), dtype=np.int64)
        ess_r = np.full(R, float(M))
        lam_prev = call.mu + expected.sum(axis=0)
        for k, r in enumerate(res_order):
            lam = call.mu + expected[res_order[k + 1:]].sum(axis=0)
            tables = call.tables[:7] + (lam,) + call.tables[8:]
            self._draw_resource(call, r, M, tables, (call.fn_row[None, :] - cur).astype(np.float64), rng)
            if t > 0:
                logW += _rate_correction(cur, call.fn_row[:t], lam[:t], lam_prev[:t])
            logW += call.draws.logw[r]
            lam_prev = lam
            cur += call.draws.miss[r, :, : cur.shape[1]]
            idx[r] = np.arange(M)
            w = _normalise(logW)
            ess_r[r] = 1.0 / np.sum(w ** 2)
            if k < R - 1:
                anc = systematic_resample(w, M, rng)
                idx, cur, logW = idx[:, anc], cur[anc], np.zeros(M)
        return idx, logW, ess_r

    def _draw_resource(self, call: _Call, r: int, m: int, tables: tuple, fn: np.ndarray, rng):
        """Stage one for resource ``r`` alone (:func:`_sample_resource`): ``m`` weighted draws into ``call.draws``;
        ``fn[j]``: the miss counters left to explain in draw ``j``."""
        _sample_resource(rng, m, r, self.wi_, self.wf_, tables, call.t, call.hints, fn, call.led, call.led_mc,
                         call.order, call.starts, int(call.clusters_of[r, 0]), int(call.clusters_of[r, 1]),
                         call.plaus, call.slot_of, int(call.n_led_r[r]), *call.draws.of(r, m), call.parts)

    def _stage_two(self, call: _Call, idx: np.ndarray, rng):
        """The weeks stage one's draws make up (``idx``, :func:`_join`) completed (:func:`_complete`): ``(rows,
        miss costs, row counts, visible outcome counts, log-weights of stage two)``."""
        M, t = call.M, call.t
        T, R = self.world_.horizon, self.costs_.size
        lam = self.capacity_
        cap = call.led.shape[0] + int(lam + 12 * math.sqrt(lam) + 40)
        rows = np.zeros((M, cap, len(ROW_FIELDS)), dtype=np.int64)
        mc = np.zeros((M, cap))
        n_rows = np.zeros(M, dtype=np.int64)
        B_in = np.zeros((M, max(t + 1, 1), R))
        miss_in = np.zeros((M, max(t, 1)), dtype=np.int64)
        sel_in = np.zeros(M)
        d = call.draws
        _join(idx, d.rows, d.mc, d.n, d.B, d.miss, d.sel, call.led.shape[0], rows, mc, n_rows, B_in, miss_in, sel_in)
        logw = np.zeros(M)
        vis = np.zeros((M, T, 3), dtype=np.int64)
        _complete(rng, M, self.wi_, self.wf_, call.tables, t, call.hints, call.fn, call.led, B_in, miss_in, sel_in,
                  rows, mc, n_rows, logw, vis, call.parts)
        return rows, mc, n_rows, vis, logw

    def sample(self, observed: Observed | None, n_samples: int, rng=None, expected_misses=None,
               shuffle=False) -> Particles:
        """``n_samples`` equally weighted weeks: ``max(n_particles, n_samples)`` weighted draws, resampled
        systematically (``expected_misses``, ``shuffle``: see :meth:`weighted`)."""
        check_int("n_samples", n_samples, 1, 10**7)
        rng = np.random.default_rng(rng)
        p = self.weighted(observed, max(self.n_particles, n_samples), rng, expected_misses, shuffle)
        idx = systematic_resample(p.weights, n_samples, rng)
        return Particles(rows=p.rows[idx], miss_cost=p.miss_cost[idx], n_rows=p.n_rows[idx], visible=p.visible[idx],
                         weights=np.full(n_samples, 1.0 / n_samples), ess=p.ess, log_weights=p.log_weights[idx],
                         source=idx, observed=observed, sampler=self)


@njit_kernel
def _plausible_onsets(led, hints, t, T, bump, sigma):
    """``(n_entries, T)``: the onsets each ledger entry's observations allow within the hint window whose bump the
    hints favour alone (log-likelihood ratio > :data:`PLAUSIBLE_LLR` against no bump)."""
    last = T - 1
    n = led.shape[0]
    out = np.zeros((n, T), dtype=np.bool_)
    onsets = np.zeros(64 + T, dtype=np.int64)
    probs = np.zeros(64 + T)
    for e in range(n):
        r, ds, de, lo, hi = led[e, _LE.res], led[e, _LE.ds], led[e, _LE.de], led[e, _LE.lo], led[e, _LE.hi]
        if led[e, _LE.kind] == KIND_TIME:
            n_on = 1
            onsets[0] = ds
        else:
            n_on = _trigger(ds, de, 0.5, last, onsets, probs)  # the support, in window and after
        for j in range(n_on):
            o = onsets[j]
            if o >= NEVER or o > t + 6 or o <= lo or o > hi or o < led[e, _LE.cancel_u]:
                continue
            inc = 0.0
            for st in range(max(0, o - 6), min(t, o + 1) + 1):
                inc += hint_loglik(hints[st, r], bump[st - o + 6], sigma) - hint_loglik(hints[st, r], 0.0, sigma)
            out[e, o] = inc > PLAUSIBLE_LLR
    return out


def _clusters(led: np.ndarray, hints, t, sampler):
    """The order in which the sampler draws the ledger entries and its clusters (``cl_start``: the first position
    of each cluster, then the end). Entries of one resource whose plausible onsets (:func:`_plausible_onsets`) lie
    within a bump's reach of each other can explain the same hint bumps: they are drawn jointly, at most
    :data:`CLUSTER_MAX` and :data:`CLUSTER_COMBOS` combinations together (a larger group is split). Fixed onsets
    come first, then clusters by how few onsets their entries leave plausible, so that an entry that can explain
    only one bump claims it before a looser one (sequential importance sampling is only as good as its order)."""
    n = led.shape[0]
    T = sampler.world_.horizon
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros((0, T), dtype=bool)
    if t >= 0:
        plaus = _plausible_onsets(led, hints, t, T, sampler.tables_[1], float(sampler.world_.hint_noise))
    else:
        plaus = np.zeros((n, T), dtype=bool)
    n_pl = plaus.sum(axis=1)
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    steps = [np.flatnonzero(plaus[e]) for e in range(n)]
    chan = [e for e in range(n) if led[e, _LE.kind] != KIND_TIME and n_pl[e] > 0]
    for a_i, a in enumerate(chan):
        for b in chan[a_i + 1:]:
            if led[a, _LE.res] == led[b, _LE.res] and np.abs(steps[a][:, None] - steps[b][None, :]).min() <= 7:
                parent[find(a)] = find(b)
    groups = {}
    for e in range(n):
        groups.setdefault(find(e), []).append(e)
    clusters = []
    for members in groups.values():
        # a group too large to enumerate is cut in time (by the middle of each entry's plausible onsets), so that
        # entries that compete for the same bumps stay together
        members.sort(key=lambda e: (float(np.mean(steps[e])) if n_pl[e] else -1.0, e))
        cur, comb = [], 1
        for e in members:
            if cur and (len(cur) >= CLUSTER_MAX or comb * (n_pl[e] + 1) > CLUSTER_COMBOS):
                clusters.append(cur)
                cur, comb = [], 1
            cur.append(e)
            comb *= n_pl[e] + 1
        clusters.append(cur)
    # grouped by resource (each resource is drawn on its own), fixed onsets first, then the most constrained
    clusters.sort(key=lambda c: (led[c[0], _LE.res], 0 if led[c[0], _LE.kind] == KIND_TIME else 1,
                                 min(n_pl[e] for e in c), c[0]))
    order = np.array([e for c in clusters for e in c], dtype=np.int64)
    starts = np.cumsum([0] + [len(c) for c in clusters]).astype(np.int64)
    return order, starts, plaus


def _normalise(logw) -> np.ndarray:
    finite = np.isfinite(logw)
    if not finite.any():
        raise ValueError("no draw is consistent with the observation (is it from this world and settings?)")
    w = np.where(finite, np.exp(logw - logw[finite].max()), 0.0)
    return w / w.sum()


@njit_kernel
def _rate_correction(cur, fn, lam_new, lam_old):
    """Per week, log Π_s Pois(fn_s - cur_s; lam_new_s) / Pois(fn_s - cur_s; lam_old_s) over the observed steps
    (each step's terms for the counts 0..fn_s tabulated once, shared by the weeks)."""
    M, tl = cur.shape
    k_max = 0
    for s in range(fn.size):
        k_max = max(k_max, fn[s])
    tab = np.empty((fn.size, k_max + 1))
    for s in range(fn.size):
        for k in range(fn[s] + 1):
            tab[s, k] = _log_pois(k, lam_new[s]) - _log_pois(k, lam_old[s])
    out = np.zeros(M)
    for m in range(M):
        for s in range(fn.size):
            k = fn[s] - cur[m, s]
            if k >= 0:
                out[m] += tab[s, k]
            else:
                out[m] += _log_pois(k, lam_new[s]) - _log_pois(k, lam_old[s])
    return out


@njit_kernel
def _join(idx, rows_r, mc_r, n_r, B_r, miss_r, sel_r, n_led, rows, mc, n_rows, B_in, miss_in, sel_in):
    """Week ``m`` from draw ``idx[r, m]`` of each resource ``r``: ledger rows at their index, then unseen rows."""
    R, M = idx.shape
    cap = rows.shape[1]
    for m in range(M):
        n = n_led
        for r in range(R):
            i = idx[r, m]
            for j in range(n_r[r, i]):
                e = rows_r[r, i, j, RW.ledger]
                if e >= 0:
                    dst = e
                else:
                    if n >= cap:
                        raise ValueError("particle row capacity exceeded")
                    dst = n
                    n += 1
                rows[m, dst] = rows_r[r, i, j]
                mc[m, dst] = mc_r[r, i, j]
            for s in range(B_in.shape[1]):
                B_in[m, s, r] = B_r[r, i, s]
            for s in range(miss_in.shape[1]):
                miss_in[m, s] += miss_r[r, i, s]
            sel_in[m] += sel_r[r, i]
        n_rows[m] = n


def systematic_resample(weights, n: int, rng) -> np.ndarray:
    """Indices of ``n`` draws by systematic resampling of normalised ``weights``."""
    c = np.cumsum(weights)
    c[-1] = 1.0
    return np.searchsorted(c, (rng.random() + np.arange(n)) / n, side="right").clip(0, len(weights) - 1)


# --------------------------------------------------------------------------------------------- complete weeks
_HIDDEN_COLUMNS = {"kind": RW.kind, "resource": RW.res, "active_from": RW.af, "active_until": RW.au,
                   "declared_start": RW.ds, "declared_end": RW.de, "onset": RW.onset, "deadline": RW.deadline,
                   "polarity": RW.polarity, "priority": RW.prio, "version": RW.version}
"""The :class:`Episode` columns a drawn row fills, by its field."""


def _episode(p: Particles, i: int, rng: np.random.Generator) -> Episode:
    s = p.sampler
    world = s.world_
    wc = _world_constants(world)
    obs = p.observed
    rows = p.table(i)
    order, targets, children = _generator_order(rows)
    ids = _row_ids(rows, order, targets, children)
    updates = _updates(rows, targets, children, dict(zip(order, ids)), world.horizon - 1,
                       int(wc["channels"].size), rng)
    vis, n_pos = _visible_intentions(p.visible[i], world, rng)
    ids += _numbered("V", len(vis))
    hidden = rows[order]
    columns = _hidden_columns(hidden, p.miss_cost[i, : p.n_rows[i]][order], len(vis))
    _fill_visible(columns, len(order), vis, n_pos, s.tables_[2], world, rng)
    hints = _hints(hidden, world, s.tables_[1], len(wc["names"]), rng)
    if obs is not None and obs.t >= 0:
        hints[: obs.t + 1] = obs.hints[: obs.t + 1]
    return Episode(horizon=world.horizon, step_day=wc["step_day"], step_hour=wc["step_hour"], weekday=wc["weekday"],
                   resource_names=wc["names"], resource_classes=wc["classes"], costs=s.costs_.copy(),
                   cost_profile=s.cost_profile, ids=tuple(ids), hints=hints, updates=tuple(updates),
                   meta={"seed": None, "load": 0, "posterior_draw": True}, **columns)


def _generator_order(rows: np.ndarray):
    """``(order, targets, children)``: the order the generator writes the rows in (base rows by origin — time,
    channel, lure — then the new versions in their targets' order), the base rows an update targets and each new
    version's row by its target's."""
    base = np.flatnonzero(rows[:, RW.origin] != O_V2)
    base = base[np.argsort(rows[base, RW.origin], kind="stable")]
    children = {int(rows[j, RW.parent]): int(j) for j in np.flatnonzero(rows[:, RW.origin] == O_V2)}
    targets = [int(j) for j in base if rows[j, RW.targeted]]
    return list(base) + [children[j] for j in targets if j in children], targets, children


def _row_ids(rows: np.ndarray, order: list, targets: list, children: dict) -> list:
    """The ids of the rows in generator ``order``: numbered per origin, a new version its target's id and ``v2``."""
    counts = [int(np.sum(rows[:, RW.origin] == o)) for o in (O_TT, O_CT, O_CL)]
    ids = _numbered("T", counts[0]) + _numbered("C", counts[1]) + _numbered("L", counts[2])
    pos = {j: k for k, j in enumerate(order)}
    return ids + [ids[pos[j]] + "v2" for j in targets if j in children]


def _updates(rows, targets, children, id_of, last, nch, rng) -> list:
    """The week's updates in their targets' order (``id_of``: each row's id)."""
    updates = []
    for j in targets:
        child = children.get(j)
        kind = _update_kind(rows, j, child, last, nch, rng)
        updates.append({"step": int(rows[j, RW.u]), "kind": UPDATE_KINDS[kind], "target": id_of[j],
                        "registered": bool(rows[j, RW.upd_reg]), "new_id": None if child is None else id_of[child]})
    return updates


def _update_kind(rows, j, child, last, nch, rng) -> int:
    """The kind of the update of row ``j`` (``child``: its new version's row, or None): the drawn one, or for a
    seen update the kind as its new version shows it, drawn from its exact conditional prior."""
    kind = int(rows[j, RW.upd_kind])
    if kind >= 0:
        return kind
    if child is None:
        return 0 if rows[j, RW.u] < last else int(rng.integers(0, 3))
    if rows[j, RW.kind] == KIND_TIME:
        return int(rng.integers(1, 3))
    p_res = 1.0 / 3.0 if rows[child, RW.res] == rows[j, RW.res] else 0.0
    return 2 if rng.random() * (p_res + 1.0 / (3.0 * nch)) < p_res else 1


def _visible_intentions(counts, world: WorldConfig, rng):
    """``(intentions, n_pos)``: the visible intentions as ``(onset, deadline, outcome)``, the ``n_pos`` positives
    (hits and misses) then the lures (false alarms and the look-alike cues no one acted on), each part in a random
    order. ``counts``: visible TP, FP and FN per step; the intentions' other fields are drawn from their prior."""
    T = world.horizon
    last = T - 1
    vis = []
    for step in range(T):
        for _ in range(int(counts[step, 0])):
            vis.append((step, min(last, step + int(rng.integers(0, 3))), "tp"))
        for _ in range(int(counts[step, 2])):
            pairs = [(o, d) for o in range(T) for d in range(3) if min(last, o + d) == step]
            o, d = pairs[int(rng.integers(0, len(pairs)))]
            vis.append((o, min(last, o + d), "fn"))
    lures = []
    for step in range(T):
        for _ in range(int(counts[step, 1])):
            lures.append((step, min(last, step + int(rng.integers(0, 3))), "fp"))
    for _ in range(int(rng.poisson(world.n_visible_lures * (1 - world.p_visible_false_alarm)))):
        o = int(rng.integers(0, T))
        lures.append((o, min(last, o + int(rng.integers(0, 3))), "tn"))
    return [vis[k] for k in rng.permutation(len(vis))] + [lures[k] for k in rng.permutation(len(lures))], len(vis)


def _hidden_columns(hidden: np.ndarray, miss_cost: np.ndarray, n_visible: int) -> dict:
    """The :class:`Episode` columns of the ``hidden`` rows (in order, with their miss costs) followed by
    ``n_visible`` visible intentions, those left zero."""
    n_h = hidden.shape[0]
    n = n_h + n_visible
    columns = {name: np.zeros(n, dtype=np.int64) for name in (*_HIDDEN_COLUMNS, "visible_outcome")}
    columns.update({name: np.zeros(n, dtype=bool) for name in ("cross_day", "update_sensitive", "registered")})
    columns["miss_cost"] = np.zeros(n)
    for name, field in _HIDDEN_COLUMNS.items():
        columns[name][:n_h] = hidden[:, field]
    columns["visible_outcome"][:n_h] = OUTCOME.none
    columns["cross_day"][:n_h] = hidden[:, RW.cross] == 1
    columns["registered"][:n_h] = hidden[:, RW.registered] == 1
    columns["update_sensitive"][:n_h] = (hidden[:, RW.targeted] == 1) | (hidden[:, RW.origin] == O_V2)
    columns["miss_cost"][:n_h] = miss_cost
    return columns


def _fill_visible(columns: dict, n_h: int, vis: list, n_pos: int, stated, world: WorldConfig, rng):
    """The visible intentions ``vis`` (:func:`_visible_intentions`) into ``columns`` after the ``n_h`` hidden rows;
    their statement (``stated``: :func:`_stated_table`), priority and miss cost drawn from the prior."""
    last = world.horizon - 1
    for k, (o, d, outcome) in enumerate(vis):
        j = n_h + k
        probs = stated[o].ravel()
        a = int(rng.choice(probs.size, p=probs / probs.sum()))
        columns["kind"][j] = KIND_VISIBLE
        columns["resource"][j] = -1
        columns["active_from"][j], columns["cross_day"][j] = a // 2, bool(a % 2)
        columns["active_until"][j] = min(last, d + world.ledger_expiry)
        columns["declared_start"][j], columns["declared_end"][j] = o, d
        columns["onset"][j], columns["deadline"][j] = o, d
        columns["polarity"][j] = POS if k < n_pos else LURE
        columns["priority"][j] = int(rng.integers(1, 4))
        columns["visible_outcome"][j] = getattr(OUTCOME, outcome)
        columns["registered"][j] = True
        columns["miss_cost"][j] = rng.uniform(0.5, 3.0)


def _hints(hidden: np.ndarray, world: WorldConfig, bump, n_res: int, rng) -> np.ndarray:
    """The retriever's hints of the week: noise plus every ``hidden`` onset's ``bump``, clipped to [0, 1]."""
    T = world.horizon
    hints = 0.1 * rng.random((T, n_res)) + rng.normal(0.0, world.hint_noise, (T, n_res))
    for j in range(hidden.shape[0]):
        o = int(hidden[j, RW.onset])
        if o >= NEVER:
            continue
        for st in range(max(0, o - 6), min(T, o + 2)):
            hints[st, hidden[j, RW.res]] += bump[st - o + 6]
    return np.clip(hints, 0.0, 1.0)

"""An upper bound on ``PMWeek-v0``'s online optimum tighter than the hindsight DP: an information relaxation with a
penalty (Brown, Smith & Sun 2010, "Information relaxations and duality in stochastic dynamic programs").

The hindsight DP, which sees the whole week, bounds every online policy from above. A penalty ``Z`` that has mean
zero under every policy that decides on what the agent has seen gives another bound, ``E[max over schedules of
(Set F1 - Z)]``; a good penalty charges the hindsight optimiser for what it knows and the agent does not.

**The penalty.** For each penalised intention ``i`` (a stored channel task or lure that no update touched, and
every stored new version) and each query of its resource at step ``q`` whose previous query was at ``p``, the term

    ``1{start_i > p} · (x_i - π_i)``,   ``x_i = 1{p < start_i <= q, q <= deadline_i, q <= active_until_i}``

(``start = max(active_from, onset)``; a true positive for a task, a false one for a lure), weighted ``c_tp`` for
tasks and ``c_fp`` for lures. ``π_i = E[x_i | H]`` with ``H`` everything in the week except intention ``i``'s
type (task or lure) and onset: its stated fields, every other row, ``1{start_i > p}``, whether the miss counter
already showed ``i`` missed (and when), the update subset and the hints of ``i``'s resource up to ``q``. ``H``
holds everything the agent knows when it takes that query, so each term has mean zero under every
non-anticipative policy. ``π_i`` is the exact conditional of the world's generator
(:func:`membudget.envs.pm.world.generate_episode`): each stored entry is a task or a lure in the ratio of their
stored rates, its onset is uniform in the declared window with the type's in-window probability (else 1-8 steps
after it, or never), its deadline 1-4 steps after the onset, the update subset's probability enters through the
size of the update pool, and the hints through the exact density of the retriever's noise
(:func:`~membudget.teachers.posterior.hint_loglik`) around the bumps of every other row.

**The inner problem.** For one week, ``max over schedules of Set F1(TP, FP) - Z`` is bounded from above, for any
``(α, β)``, by ``max over counts (x, y) of [Set F1(x, y) - α x - β y]`` plus ``max over schedules of the sum over
its queries of (α tp + β fp - Z)``; the second is the hindsight DP's per-resource chains joined by a knapsack
over the budget, without the per-step caps (a relaxation: the bound stays a bound). A pattern search over ``(α,
β)`` lowers it. With ``c_tp = c_fp = 0`` the bound lies at or above the DP's optimum (the split and the caps
cost 0.0001 on average on the validation weeks).

The bound holds in expectation over weeks drawn by ``generate_episode`` from the default world (unit prices, no
load, the late policy ``"expire"``): a week's value may lie below what a policy scores on that week, and the
mean over many weeks is what bounds the online optimum's mean. docs/online_teacher.md has the measurements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from membudget.envs.pm.episode_io import validate_episode
from membudget.envs.pm.world import KIND_CHANNEL, KIND_VISIBLE, LURE, MAX_BUDGET, NEVER, POS, Episode, WorldConfig
from membudget.envs.validation import check_int, check_number, constructor_repr

from .hindsight_dp import _rest_tables
from .posterior import _log_subset, _trigger, hint_bump, hint_loglik
from .problem import problem_from_episode

DEFAULT_C_TP = 0.0075
DEFAULT_C_FP = -0.005
"""The penalty's weights, chosen on the validation weeks 4000-4029 at B10 (the lowest mean bound among a grid;
docs/online_teacher.md)."""
NEG = -1e300


@dataclass(frozen=True)
class DualBound:
    """One week's bound and the split ``(alpha, beta)`` that gave it."""

    value: float
    alpha: float
    beta: float


def other_bumps(ep: Episode, skip: int, bump: np.ndarray) -> np.ndarray:
    """``(T, R)``: the hint bumps of every hidden row with an onset except row ``skip``."""
    T = ep.horizon
    b = np.zeros((T, ep.n_resources))
    for i in np.flatnonzero((ep.kind != KIND_VISIBLE) & (ep.onset < NEVER)):
        if i != skip:
            o = int(ep.onset[i])
            lo, hi = max(0, o - 6), min(T, o + 2)
            b[lo:hi, ep.resource[i]] += bump[lo - o + 6:hi - o + 6]
    return b


def penalised_rows(ep: Episode) -> np.ndarray:
    """Rows the penalty covers: stored channel rows that are original and untouched by updates, or new versions."""
    channel = (ep.kind == KIND_CHANNEL) & ep.registered
    return np.flatnonzero(channel & (((ep.version == 0) & ~ep.update_sensitive) | (ep.version > 0)))


def _update_pool(ep: Episode) -> tuple[np.ndarray, int]:
    """The generator's update pool (stored original tasks stated two or more steps before their trigger) and the
    number of updates drawn from it."""
    last = ep.horizon - 1
    original_task = (ep.kind != KIND_VISIBLE) & (ep.version == 0) & (ep.polarity != LURE) & ep.registered
    return original_task & (np.minimum(ep.onset, last) - ep.active_from >= 2), len(ep.updates)


def resolution_probabilities(ep: Episode, i: int, world: WorldConfig, base=None, pool=None):
    """``(π_tp, π_fp)``, each ``(T, T + 1)``: at ``[q, p + 1]``, the probability given ``H`` (module docstring)
    that a query at ``q`` after one at ``p`` resolves stored row ``i`` on time as a task / as a lure, on the
    event ``start_i > p``. ``base``, ``pool``: :func:`other_bumps` and :func:`_update_pool` when already built."""
    T, last = ep.horizon, ep.horizon - 1
    s0, s1 = world.channel_slack
    n_slack = s1 - s0 + 1
    bump = hint_bump(world)
    base = other_bumps(ep, i, bump) if base is None else base
    pool, k_upd = _update_pool(ep) if pool is None else pool
    r = ep.resource[i]
    af, au, dl = int(ep.active_from[i]), int(ep.active_until[i]), int(ep.deadline[i])
    new_version = ep.version[i] > 0  # updates make positive new versions, outside the update pool
    n_other = int(pool.sum()) - int(pool[i])
    h, b = ep.hints[:, r], base[:, r]
    ll0 = np.array([hint_loglik(h[t], b[t], world.hint_noise) for t in range(T)])
    kinds = [(False, world.n_channel * (1 - world.p_unregistered), world.p_onset_in_window)]
    if not new_version:
        kinds.append((True, world.n_channel_lures, world.p_lure_in_window))
    ds, de = int(ep.declared_start[i]), int(ep.declared_end[i])
    onsets, probs = np.empty(de - ds + 10, dtype=np.int64), np.empty(de - ds + 10)
    options = []  # (is lure, onset, start, log of prior x update likelihood)
    for lure, rate, p_in in kinds:
        for j in range(_trigger(ds, de, p_in, last, onsets, probs)):
            o = int(onsets[j])
            in_pool = not lure and not new_version and min(o, last) - af >= 2
            log_lik = 0.0 if new_version else _log_subset(k_upd, n_other + int(in_pool), world.n_updates)
            if log_lik > -np.inf:
                options.append((lure, o, NEVER if o == NEVER else max(af, o),
                                math.log(rate * probs[j]) + log_lik))
    lure_of = np.array([opt[0] for opt in options])
    start = np.array([opt[2] for opt in options])
    pi_tp = np.zeros((T, T + 1))
    pi_fp = np.zeros((T, T + 1))
    for q in range(min(au, last) + 1):
        missed = ep.polarity[i] == POS and dl < q  # the miss counter has shown a task missed at its deadline
        lw = np.full(len(options), -np.inf)
        on_time = np.zeros(len(options))
        for j, (lure, o, _, log_prior) in enumerate(options):
            if o == NEVER:
                seen, p_on = (0.0 if missed else 1.0), 1.0
            else:
                ds_ = [min(last, o + s) for s in range(s0, s1 + 1)]
                p_on = sum(d >= q for d in ds_) / n_slack
                seen = sum((d == dl) if missed else (d >= q) for d in ds_) / n_slack
            if lure:  # a lure never shows in the miss counter
                seen = 0.0 if missed else 1.0
            if seen <= 0:
                continue
            v = log_prior + math.log(seen)
            if o != NEVER:
                for t in range(max(0, o - 6), min(q, o + 1) + 1):
                    v += hint_loglik(h[t], b[t] + bump[t - o + 6], world.hint_noise) - ll0[t]
            lw[j] = v
            # a task seen missed is late; one not seen missed is on time at q; a lure is on time with p_on
            on_time[j] = p_on if lure else float(not missed)
        if not np.isfinite(lw).any():
            continue
        w = np.exp(lw - lw.max())
        for p in range(-1, q):
            alive = start > p
            den = w[alive].sum()
            if den > 0:
                hit = alive & (start <= q)
                pi_tp[q, p + 1] = (w * on_time)[hit & ~lure_of].sum() / den
                pi_fp[q, p + 1] = (w * on_time)[hit & lure_of].sum() / den
    return pi_tp, pi_fp


def resolutions(ep: Episode, i: int) -> np.ndarray:
    """``x[q, p + 1]``: 1 where a query at ``q`` after one at ``p`` resolves row ``i`` on time (``p < start <= q``,
    ``q <= deadline``, ``q <= active_until``)."""
    T = ep.horizon
    x = np.zeros((T, T + 1))
    if ep.onset[i] < NEVER:
        s = max(int(ep.active_from[i]), int(ep.onset[i]))
        x[s:min(int(ep.deadline[i]), int(ep.active_until[i]), T - 1) + 1, :s + 1] = 1.0
    return x


def penalty_tables(ep: Episode, world: WorldConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(Z_tp, Z_fp)``, each ``(R, T, T + 1)``: per resource and link ``[q, p + 1]``, the sum over its penalised
    tasks / lures of ``1{start > p} (x - π)`` (module docstring; weighted by ``c_tp`` / ``c_fp`` in the bound)."""
    R, T = ep.n_resources, ep.horizon
    z_tp, z_fp = np.zeros((R, T, T + 1)), np.zeros((R, T, T + 1))
    bump, pool = hint_bump(world), _update_pool(ep)
    for i in penalised_rows(ep):
        pi_tp, pi_fp = resolution_probabilities(ep, i, world, other_bumps(ep, i, bump), pool)
        s = NEVER if ep.onset[i] >= NEVER else max(int(ep.active_from[i]), int(ep.onset[i]))
        alive = (np.arange(-1, T) < s)[None, :]
        x = resolutions(ep, i)
        task = ep.polarity[i] == POS
        z_tp[ep.resource[i]] += alive * (x * task - pi_tp)
        z_fp[ep.resource[i]] += alive * (x * (not task) - pi_fp)
    return z_tp, z_fp


@numba.njit(cache=True)
def _chain_values(val, m, k_max):
    """``best[k]``: the largest sum of link values ``val[q, p + 1]`` over exactly ``k`` queries of one resource
    (a query at ``q`` only where ``m[q] > p``, ``p`` the previous query), ``k = 0..k_max``."""
    T = m.size
    f = np.full((k_max + 1, T), NEG)
    best = np.full(k_max + 1, NEG)
    best[0] = 0.0
    for q in range(T):
        if m[q] > -1:
            f[1, q] = val[q, 0]
    for k in range(2, k_max + 1):
        for q in range(k - 1, T):
            bv = NEG
            for p in range(k - 2, min(q, m[q])):
                if f[k - 1, p] > NEG and f[k - 1, p] + val[q, p + 1] > bv:
                    bv = f[k - 1, p] + val[q, p + 1]
            f[k, q] = bv
    for k in range(1, k_max + 1):
        for q in range(T):
            best[k] = max(best[k], f[k, q])
    return best


@numba.njit(cache=True)
def _schedule_max(tp, fp, z_tp, z_fp, ms, alpha, beta, c_tp, c_fp, k_max, budget):
    """The largest sum over a schedule's queries of ``alpha tp + beta fp - c_tp z_tp - c_fp z_fp`` with at most
    ``budget`` queries (unit prices), without the per-step caps."""
    R = ms.shape[0]
    g = np.full(budget + 1, NEG)
    g[0] = 0.0
    for r in range(R):
        vals = _chain_values(alpha * tp[r] + beta * fp[r] - c_tp * z_tp[r] - c_fp * z_fp[r], ms[r], k_max[r])
        ng = np.full(budget + 1, NEG)
        for c in range(budget + 1):
            if g[c] > NEG:
                for k in range(min(k_max[r], budget - c) + 1):
                    if vals[k] > NEG and g[c] + vals[k] > ng[c + k]:
                        ng[c + k] = g[c] + vals[k]
        g = ng
    return g.max()


class InformationRelaxationBound:
    """Upper bound on the online optimum of ``PMWeek-v0`` weeks (module docstring).

    Parameters
    ----------
    budget : int
        The week's budget in price units (as :class:`~membudget.teachers.HindsightDP`'s; B10 is 21).
    c_tp, c_fp : float
        The penalty's weights on tasks' and lures' resolutions (defaults :data:`DEFAULT_C_TP`,
        :data:`DEFAULT_C_FP`; any finite values give a valid bound, ``0, 0`` one at or above the DP's optimum).

    :meth:`solve` takes weeks of the default world (``generate_episode(seed)``, unit prices, no load) and gives a
    :class:`DualBound`; the late policy is ``"expire"`` and the per-step caps are relaxed.
    """

    def __init__(self, *, budget, c_tp=DEFAULT_C_TP, c_fp=DEFAULT_C_FP):
        self.budget = budget
        self.c_tp = c_tp
        self.c_fp = c_fp

    def __repr__(self):
        return constructor_repr(self)

    def fit(self, X=None, y=None):
        """Check the settings (``X``, ``y`` ignored)."""
        check_int("budget", self.budget, 1, MAX_BUDGET)
        check_number("c_tp", self.c_tp)
        check_number("c_fp", self.c_fp)
        self.world_ = WorldConfig()
        return self

    def _check_week(self, ep: Episode):
        if not hasattr(self, "world_"):
            raise RuntimeError("this InformationRelaxationBound is not fitted yet; call fit() first")
        validate_episode(ep)
        w = self.world_
        names = tuple(n for n, _ in w.resources)
        if (ep.horizon != w.horizon or ep.resource_names != names or ep.cost_profile != "unit"
                or ep.meta.get("load", 0) != 0):
            raise ValueError("the bound's penalty is the default world's generator: it takes weeks of "
                             "generate_episode(seed) with the default world, unit prices and no load")

    def solve(self, episode: Episode, start=(0.008, -0.005), step=0.002) -> DualBound:
        """The week's bound: the Lagrangian split lowered by a pattern search over ``(alpha, beta)``, first for the
        bound without penalty from ``start`` (first step ``step``), then from where that ended for the penalised
        one (every point is a valid bound; the searches only lower it)."""
        self._check_week(episode)
        if not isinstance(start, (tuple, list)) or len(start) != 2:
            raise ValueError(f"start must be a pair (alpha, beta), got {start!r}")
        start = (check_number("start[0]", start[0]), check_number("start[1]", start[1]))
        step = check_number("step", step, 0, low_open=True)
        prob = problem_from_episode(episode, budget=self.budget, per_step_cap=None, per_step_cost_cap=None,
                                    late_policy="expire", lookahead=self.world_.lookahead)
        T, R = episode.horizon, episode.n_resources
        tp, fp, ms = _rest_tables(T, R, 0, prob.res, prob.start, prob.until, prob.deadline, prob.positive, False,
                                  prob.cand_lo, prob.cand_hi)
        tp, fp = tp.astype(float), fp.astype(float)
        z_tp, z_fp = penalty_tables(episode, self.world_)
        k_max = np.minimum((ms > -2).sum(axis=1), self.budget).astype(np.int64)
        x = np.arange(int(prob.positive.sum()) + 1)[:, None]
        y = np.arange(int((~prob.positive).sum()) + 1)[None, :]
        tp_all, fp_all = prob.tp_fixed + x, prob.fp_fixed + y
        den = tp_all + fp_all + prob.due
        f1 = np.where(den > 0, 2.0 * tp_all / np.maximum(den, 1), 0.0)

        def value(a, b, c_tp, c_fp):
            return float((f1 - a * x - b * y).max()) + _schedule_max(tp, fp, z_tp, z_fp, ms, float(a), float(b),
                                                                     float(c_tp), float(c_fp), k_max,
                                                                     int(self.budget))

        v, a, b = _pattern_search(lambda a_, b_: value(a_, b_, 0.0, 0.0), *start, step)
        if self.c_tp != 0 or self.c_fp != 0:
            v, a, b = _pattern_search(lambda a_, b_: value(a_, b_, self.c_tp, self.c_fp), a, b, step)
        return DualBound(value=v, alpha=a, beta=b)


_MOVES = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, -1), (1, -1), (-1, 1), (2, 1), (-2, -1), (1, 2), (-1, -2),
          (2, -1), (-2, 1), (1, -2), (-1, 2))


def _pattern_search(f, a, b, step):
    """A local minimum of ``f(a, b)`` by compass steps, halving the step until 2e-6: ``(f, a, b)``."""
    v = f(a, b)
    while step > 2e-6:
        for da, db in _MOVES:
            w = f(a + da * step, b + db * step)
            if w < v - 1e-12:
                v, a, b = w, a + da * step, b + db * step
                break
        else:
            step /= 2
    return v, float(a), float(b)

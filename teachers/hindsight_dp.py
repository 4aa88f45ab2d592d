"""Exact hindsight dynamic programming for PMWeek-v0 (BudgetPM §3.3, exact under the environment's dynamics).

Set F1 = 2TP / (2TP + FP + FN) is a ratio; Dinkelbach's method maximises it through a sequence of linear
objectives ``(2 - λ)·TP - λ·FP`` with ``λ = n/d`` kept as an exact fraction, i.e. the integer objective
``(2d - n)·TP - n·FP``. Each linear problem is solved exactly:

1. per resource, a chain DP over query times (see :mod:`membudget.teachers.problem`) gives the best value with
   exactly ``k`` queries, for every ``k``;
2. a knapsack over resources joins them under the episode budget (or an exact total cost);
3. the joined schedule ignores the per-step caps ``N_max`` / ``L``; where it violates them, branch and bound
   forbids one of the clashing (resource, step) pairs per branch (every feasible schedule avoids at least one of
   them), re-solving only that resource's chain. Resources priced above the per-step cost cap never enter (no
   step can afford them). Once the search grows past a few nodes, a node's bound is tightened by Lagrangian
   relaxation of the caps and the budget (:func:`_lagrangian`), and feasible schedules built from the
   Lagrangian solutions (:func:`_repair`, :func:`_pack`) serve as incumbents; the search ends when no bound can
   beat the incumbent. Without that, settings where most steps clash (cost caps that let one resource query per
   step, opportunity load 3) needed millions of nodes, since every clash costs a little and the caps-free bound
   counts none of them. Large searches also take optimal multipliers from the LP relaxation
   (:func:`_lp_multipliers`). A guard hands a linear problem that still needs more than :data:`MAX_NODES` nodes,
   or whose LP bound stays :data:`LP_GAP` grains above the incumbent, to the exact MILP
   (:mod:`membudget.teachers.milp`); ``python -m membudget.bench.dp_grid`` counts how often. The search is
   :class:`_BranchAndBound`; after a solve, ``HindsightDP.stats_`` (:class:`SearchStats`) tells what it took.
"""

from __future__ import annotations

import functools
import heapq
import math
from dataclasses import astuple, dataclass, replace
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from membudget.envs.jit import njit_kernel
from membudget.envs.validation import check_int

from .milp import linear_milp
from .problem import (
    PMTeacher,
    Problem,
    Schedule,
    f1_of_counts,
    problem_from_env,
    problem_from_episode,
)

NEG = -(1 << 60)
EAGER_NODES = 8
"""Branch-and-bound nodes searched with the caps-free relaxation alone before Lagrangian bounds are added."""
LAGRANGE_ITERS = 5
"""Subgradient steps per Lagrangian bound. Few: each node starts from its parent's multipliers, so the steps add
up along the search, and cheap nodes beat tighter ones (measured on the grid's slowest weeks)."""
BUDGET_SCALE = 1.0
"""Scale of the budget row against the per-step rows in the subgradient, per unit of mean price."""
HEUR_EVERY = 8
"""After the first four tightened nodes, every how many the packing heuristic looks for an incumbent."""
LP_NODES = 100
"""Tightened nodes after which the root's LP multipliers (:func:`_lp_multipliers`) also seed every bound."""
LP_GAP = 16
"""If then the root's LP bound lies this many grains (the objective's smallest step) or more above the
incumbent, the linear problem goes to the MILP at once: closing such a gap by branching on clashes takes longer
than the MILP (measured at opportunity load 8)."""
MAX_NODES = 1000
"""Past this many branch-and-bound nodes a linear problem is handed to the exact MILP (a guard; see
docs/speed.md for how often it fires)."""
MAX_TABLE_BYTES = 8 << 30
"""The most memory the DP's per-resource tables may take (:func:`table_bytes`); a larger problem is refused with a
``MemoryError`` before any is allocated, instead of the machine running out of memory while they fill (they grow
with horizon² × resources: about 1 GiB at horizon 2,000 with PMWeek-v0's 11 resources, where a solve peaked at
1.34 GB). Raise it on a machine with more memory."""


def table_bytes(horizon: int, n_resources: int) -> int:
    """Bytes of the DP's tables for a problem of ``horizon`` steps and ``n_resources`` resources: per resource, the
    TP and FP of every (previous query, query) pair and the values the branch and bound builds from them
    (``(horizon + 1) × horizon`` entries of 8 bytes each)."""
    return 3 * 8 * int(n_resources) * (int(horizon) + 1) * int(horizon)


@njit_kernel
def _link_effects(T, start, until, deadline, positive, late_execute, weight):
    """``tp[p + 1, q]``, ``fp[p + 1, q]``: what a query at ``q`` resolves after the previous one at ``p`` (TP
    summed with the intentions' ``weight``)."""
    tp = np.zeros((T + 1, T), dtype=np.int64)
    fp = np.zeros((T + 1, T), dtype=np.int64)
    for i in range(start.size):
        s = start[i]
        if s >= T:
            continue
        for q in range(s, min(until[i], T - 1) + 1):
            on_time = q <= deadline[i]
            if positive[i]:
                if on_time:
                    for p in range(-1, s):
                        tp[p + 1, q] += weight[i]
                elif late_execute:
                    for p in range(-1, s):
                        fp[p + 1, q] += 1
            elif on_time:
                for p in range(-1, s):
                    fp[p + 1, q] += 1
    return tp, fp


@njit_kernel
def _latest_start(T, start, lo, hi):
    """``M[q]``: the largest start among intentions that make the resource a candidate at ``q`` (-2 if none);
    the resource is a candidate at ``q`` after a query at ``p`` iff ``M[q] > p``."""
    m = np.full(T, -2, dtype=np.int64)
    for i in range(start.size):
        for q in range(max(0, lo[i]), min(hi[i], T - 1) + 1):
            if start[i] > m[q]:
                m[q] = start[i]
    return m


@njit_kernel
def _chain(val_t, m, t0, p0, k_max, forbidden):
    """Best value of exactly ``k`` queries of one resource for ``k = 0..k_max``, with back-pointers. ``val_t[q, p +
    1]``: the value of a query at ``q`` after the previous one at ``p`` (the link values transposed, so that the
    inner loop over ``p`` reads contiguous memory when ``val_t`` is C-ordered).

    A link's value changes with ``p`` only where ``p`` passes an intention's start, so the previous queries ``p``
    fall into runs (``seg``) over which every link into a later query has one value. The best previous query of
    each run is its first best chain value (a running maximum, restarted at each run), and ``f[k, q]`` is the best
    over the runs: the same maximum and the same first ``p`` as a scan over every ``p``, in fewer steps."""
    T = m.size
    f = np.full((k_max + 1, T), NEG, dtype=np.int64)
    par = np.full((k_max + 1, T), -3, dtype=np.int64)
    best = np.full(k_max + 1, NEG, dtype=np.int64)
    end = np.full(k_max + 1, -1, dtype=np.int64)
    best[0] = 0
    if k_max == 0:
        return best, end, par
    for q in range(t0, T):
        if not forbidden[q] and m[q] > p0:
            f[1, q] = val_t[q, p0 + 1]
            par[1, q] = p0
    # seg[p]: the first previous query of p's run (links after p read column p + 1, read only for q > p)
    seg = np.empty(T, dtype=np.int64)
    first = t0
    for p in range(t0, T):
        if p > t0:
            for q in range(p + 1, T):
                if val_t[q, p + 1] != val_t[q, p]:
                    first = p
                    break
        seg[p] = first
    run_v = np.empty(T, dtype=np.int64)  # the best f[k - 1] from the start of p's run (or lo) to p, and where
    run_p = np.empty(T, dtype=np.int64)
    for k in range(2, k_max + 1):
        lo = t0 + k - 2
        for p in range(lo, T):
            v = f[k - 1, p]
            if p > lo and seg[p] == seg[p - 1] and run_v[p - 1] >= v:
                run_v[p] = run_v[p - 1]
                run_p[p] = run_p[p - 1]
            else:
                run_v[p] = v
                run_p[p] = p
        for q in range(t0 + k - 1, T):
            if forbidden[q]:
                continue
            hi = min(q, m[q])  # previous queries p < hi
            bv = NEG
            bp = -3
            p = hi - 1
            while p >= lo:  # the runs from the last one back: the earliest of equal values is kept
                s0 = max(seg[p], lo)
                if run_v[p] > NEG:
                    v = run_v[p] + val_t[q, s0 + 1]
                    if v >= bv:
                        bv = v
                        bp = run_p[p]
                p = s0 - 1
            if bp != -3:
                f[k, q] = bv
                par[k, q] = bp
    for k in range(1, k_max + 1):
        for q in range(t0, T):
            if f[k, q] > best[k]:
                best[k] = f[k, q]
                end[k] = q
    return best, end, par


@njit_kernel
def _knapsack(values, costs, cap):
    """``g[j, c]``: best total of the first ``j`` resources at total cost exactly ``c``; ``pick[j, c]``: the
    number of queries of resource ``j - 1``. ``values[r, k]`` is NEG where ``k`` queries are impossible."""
    R, K = values.shape
    g = np.full((R + 1, cap + 1), NEG, dtype=np.int64)
    pick = np.zeros((R + 1, cap + 1), dtype=np.int64)
    g[0, 0] = 0
    for j in range(1, R + 1):
        c_r = costs[j - 1]
        for c in range(cap + 1):
            bv = NEG
            bk = 0
            for k in range(K):
                cc = c - k * c_r
                if cc < 0:
                    break
                v = values[j - 1, k]
                if v == NEG or g[j - 1, cc] == NEG:
                    continue
                if g[j - 1, cc] + v > bv:
                    bv = g[j - 1, cc] + v
                    bk = k
            g[j, c] = bv
            pick[j, c] = bk
    return g, pick


@njit_kernel
def _free_chain(val, m, t0, p0, pen, forbidden):
    """Best chain of one resource with any number of queries, each query at ``q`` charged ``pen[q]`` on top of
    the link values (no count dimension: used where the budget is not enforced exactly). Returns the value (0:
    no query) and the query steps."""
    T = m.size
    f = np.full(T, -np.inf)
    par = np.full(T, -3, dtype=np.int64)
    best, end = 0.0, -1
    for q in range(t0, T):
        if forbidden[q]:
            continue
        bv = -np.inf
        bp = -3
        if m[q] > p0:
            bv = val[p0 + 1, q]
            bp = p0
        for p in range(t0, min(q, m[q])):
            if f[p] > -np.inf and f[p] + val[p + 1, q] > bv:
                bv = f[p] + val[p + 1, q]
                bp = p
        if bp != -3:
            f[q] = bv - pen[q]
            par[q] = bp
            if f[q] > best:
                best, end = f[q], q
    n = 0
    q = end
    while q >= t0:
        n += 1
        q = par[q]
    steps = np.empty(n, dtype=np.int64)
    q = end
    while q >= t0:
        n -= 1
        steps[n] = q
        q = par[q]
    return best, steps


@njit_kernel
def _step_load(z, t, costs):
    """Queries and their cost at step ``t`` of the schedule mask ``z (R, T)``."""
    cnt = 0
    cst = 0
    for r in range(z.shape[0]):
        if z[r, t]:
            cnt += 1
            cst += costs[r]
    return cnt, cst


@njit_kernel
def _spend(z, t0, costs):
    """Cost of every query of ``z`` from step ``t0`` on."""
    used = 0
    for r in range(z.shape[0]):
        for t in range(t0, z.shape[1]):
            if z[r, t]:
                used += costs[r]
    return used


@njit_kernel
def _lagrangian(vals, ms, costs, p0s, t0, forbidden, n_max, cost_cap, budget, exact, mu, nu, beta, target, stop,
                grain, iters, scale):
    """Upper bound on the best schedule under the per-step caps and the budget (or exact cost), by Lagrangian
    relaxation of all three: every multiplier vector ``mu, nu >= 0`` (per step: query count, query cost) and
    ``beta`` (>= 0 for a budget, free for an exact cost) gives a valid bound, and subgradient steps (Polyak,
    towards ``target``, a feasible value) lower it; ``scale`` weighs the budget row against the per-step rows.
    ``-1`` marks an absent cap or budget. Stops once the bound is below ``stop + grain`` (``stop``: the
    incumbent's value; every value is a multiple of ``grain``). Returns the lowest bound, its multipliers and its
    schedule as a (resource, step) mask."""
    R, T = ms.shape
    best_bound = np.inf
    best_mu, best_nu, best_beta = mu.copy(), nu.copy(), beta
    z = np.zeros((R, T), dtype=np.bool_)
    best_z = z.copy()
    for _ in range(iters):
        z[:, :] = False
        bound = 0.0
        for t in range(t0, T):
            if n_max >= 0:
                bound += mu[t] * n_max
            if cost_cap >= 0:
                bound += nu[t] * cost_cap
        if budget >= 0:
            bound += beta * budget
        for r in range(R):
            pen = mu + nu * costs[r] + beta * costs[r]
            v, steps = _free_chain(vals[r], ms[r], t0, p0s[r], pen, forbidden[r])
            bound += v
            for q in steps:
                z[r, q] = True
        if bound < best_bound:
            best_bound = bound
            best_mu, best_nu, best_beta = mu.copy(), nu.copy(), beta
            best_z[:, :] = z
        if best_bound < stop + grain - 1e-6:
            break
        g_mu = np.zeros(T)
        g_nu = np.zeros(T)
        norm = 0.0
        for t in range(t0, T):
            cnt, cst = _step_load(z, t, costs)
            if n_max >= 0:
                g_mu[t] = n_max - cnt
                if mu[t] > 0 or g_mu[t] < 0:
                    norm += g_mu[t] ** 2
            if cost_cap >= 0:
                g_nu[t] = cost_cap - cst
                if nu[t] > 0 or g_nu[t] < 0:
                    norm += g_nu[t] ** 2
        g_beta = 0.0
        if budget >= 0:
            used = _spend(z, t0, costs)
            g_beta = (budget - used) * scale
            if exact or beta > 0 or g_beta < 0:
                norm += g_beta ** 2
        if norm == 0.0:  # the relaxed schedule meets every relaxed constraint with slack only where free
            break
        step = max(bound - target, 1.0) / norm
        mu = np.maximum(mu - step * g_mu, 0.0)
        nu = np.maximum(nu - step * g_nu, 0.0)
        beta = beta - step * g_beta
        if not exact:
            beta = max(beta, 0.0)
    return best_bound, best_mu, best_nu, best_beta, best_z


@njit_kernel
def _repair(vals, costs, p0s, t0, z, n_max, cost_cap, budget):
    """A feasible schedule from ``z`` (chains valid for candidacy) by dropping queries — dropping one keeps every
    later query a candidate — cheapest loss first: at each step over a cap, then while over the budget. Returns
    the schedule mask and its value."""
    R, T = z.shape
    z = z.copy()

    def loss(r, q):
        p = p0s[r]
        for pp in range(q - 1, t0 - 1, -1):
            if z[r, pp]:
                p = pp
                break
        s = -1
        for ss in range(q + 1, T):
            if z[r, ss]:
                s = ss
                break
        out = vals[r, p + 1, q]
        if s >= 0:
            out += vals[r, q + 1, s] - vals[r, p + 1, s]
        return out

    for t in range(t0, T):
        while True:
            cnt, cst = _step_load(z, t, costs)
            if not ((n_max >= 0 and cnt > n_max) or (cost_cap >= 0 and cst > cost_cap)):
                break
            br, bl = -1, np.inf
            for r in range(R):
                if z[r, t]:
                    lo = loss(r, t)
                    if lo < bl:
                        br, bl = r, lo
            z[br, t] = False
    if budget >= 0:
        used = _spend(z, t0, costs)
        while used > budget:
            br, bt, bl = -1, -1, np.inf
            for r in range(R):
                for t in range(t0, T):
                    if z[r, t]:
                        lo = loss(r, t)
                        if lo < bl:
                            br, bt, bl = r, t, lo
            z[br, bt] = False
            used -= costs[br]
    value = 0.0
    for r in range(R):
        p = p0s[r]
        for q in range(t0, T):
            if z[r, q]:
                value += vals[r, p + 1, q]
                p = q
    return z, value


@njit_kernel
def _pack(vals, ms, costs, p0s, t0, forbidden, n_max, cost_cap, mu, nu, beta, order):
    """A schedule meeting the per-step caps: resources in ``order`` each take their best chain (at the
    Lagrangian prices ``mu, nu, beta``) among the steps the earlier ones left room in. The budget is not
    enforced (see :func:`_repair`)."""
    R, T = ms.shape
    z = np.zeros((R, T), dtype=np.bool_)
    cnt = np.zeros(T, dtype=np.int64)
    cst = np.zeros(T, dtype=np.int64)
    for r in order:
        mask = forbidden[r].copy()
        for t in range(t0, T):
            if (n_max >= 0 and cnt[t] + 1 > n_max) or (cost_cap >= 0 and cst[t] + costs[r] > cost_cap):
                mask[t] = True
        pen = mu + nu * costs[r] + beta * costs[r]
        _, steps = _free_chain(vals[r], ms[r], t0, p0s[r], pen, mask)
        for q in steps:
            z[r, q] = True
            cnt[q] += 1
            cst[q] += costs[r]
    return z


def _cap(x) -> int:
    """A per-step cap or budget as the kernels take it: -1 where absent."""
    return -1 if x is None else int(x)


class _Relaxation(NamedTuple):
    """A linear problem as the bounding kernels take it."""

    vals: np.ndarray
    """Float link values ``vals[r, p + 1, q]`` (``w_tp·TP - w_fp·FP`` of a query at ``q`` after one at ``p``)."""
    ms: np.ndarray
    """Per resource, :func:`_latest_start` (candidacy)."""
    costs: np.ndarray
    p0s: np.ndarray
    """Per resource, the step of its last query before ``t0`` (-1: never)."""
    t0: int
    n_max: int
    """Per-step query cap (-1: none)."""
    cost_cap: int
    """Per-step cost cap (-1: none)."""
    budget: int
    """The budget, or the exact cost when ``exact`` (-1: none)."""
    exact: bool


def _lp_multipliers(rel: _Relaxation, forbidden):
    """Optimal Lagrange multipliers ``(mu, nu, beta)`` of the per-step caps and the budget (as in
    :func:`_lagrangian`): the duals of the linear relaxation of the chain (arc) formulation — one arc per link
    ``p -> q`` of a resource, flow kept along each chain — whose value equals the best Lagrangian bound, since each
    chain problem is a longest path. Subgradient steps alone can stall far above it. ``forbidden``: an (R, T) mask
    of pairs no arc enters. Also returns the relaxation's (resource, step) pairs queried with weight above one
    half. None if the relaxation has no solution."""
    R, T = rel.ms.shape
    steps = np.arange(T)
    rows, cols, coef, obj, qs, rs = [], [], [], [], [], []
    n = 0
    n_flow = R * T
    for r in range(R):
        m, p0 = rel.ms[r], rel.p0s[r]
        ok = ~forbidden[r] & (steps >= rel.t0)
        q1 = np.flatnonzero(ok & (m > p0))
        p2, q2 = np.nonzero(ok[:, None] & ok[None, :] & (steps[:, None] < steps[None, :])
                            & (steps[:, None] < m[None, :]))
        p = np.concatenate([np.full(q1.size, p0), p2])
        q = np.concatenate([q1, q2])
        k = np.arange(n, n + q.size)
        obj.append(rel.vals[r, p + 1, q])
        qs.append(q)
        rs.append(np.full(q.size, r))
        start = p < rel.t0  # the first query: at most one
        rows += [np.full(int(start.sum()), R * T + r), r * T + p[~start], r * T + q]
        cols += [k[start], k[~start], k]
        coef += [np.ones(int(start.sum())), np.ones(int((~start).sum())), -np.ones(q.size)]
        n += q.size
    if n == 0:
        return None
    q, r = np.concatenate(qs), np.concatenate(rs)
    k = np.arange(n)
    base = n_flow + R
    ub = [np.zeros(n_flow), np.ones(R)]
    if rel.n_max >= 0:
        rows.append(base + q)
        cols.append(k)
        coef.append(np.ones(n))
        ub.append(np.full(T, float(rel.n_max)))
        base += T
    if rel.cost_cap >= 0:
        rows.append(base + q)
        cols.append(k)
        coef.append(rel.costs[r].astype(np.float64))
        ub.append(np.full(T, float(rel.cost_cap)))
        base += T
    a_ub = sparse.csr_array((np.concatenate(coef), (np.concatenate(rows), np.concatenate(cols))), shape=(base, n))
    price = rel.costs[r].astype(np.float64)[None, :]
    kw = {"A_eq": price, "b_eq": [rel.budget]} if rel.exact else {}
    if rel.budget >= 0 and not rel.exact:
        a_ub = sparse.vstack([a_ub, sparse.csr_array(price)])
        ub.append([float(rel.budget)])
    res = linprog(-np.concatenate(obj), A_ub=a_ub, b_ub=np.concatenate(ub), bounds=(0, 1), method="highs", **kw)
    if res.status != 0:
        return None
    mu, nu, beta = np.zeros(T), np.zeros(T), 0.0
    dual = -res.ineqlin.marginals
    at = n_flow + R
    if rel.n_max >= 0:
        mu = np.maximum(dual[at: at + T], 0.0)
        at += T
    if rel.cost_cap >= 0:
        nu = np.maximum(dual[at: at + T], 0.0)
        at += T
    if rel.budget >= 0:
        beta = float(-res.eqlin.marginals[0]) if rel.exact else max(float(dual[at]), 0.0)
    queried = np.zeros((R, T))
    np.add.at(queried, (r, q), res.x)
    return (mu, nu, beta), queried > 0.5


@dataclass
class SearchStats:
    """What the branch and bound did: for one linear problem (``_LinearSolver.stats_``), or summed over a solve's
    Dinkelbach iterations (``HindsightDP.stats_``)."""

    nodes: int = 0
    """Nodes queued (a node queued again under a tightened bound counts again)."""
    expanded: int = 0
    """Nodes branched on: one child per resource of the node's first clash."""
    bounds: int = 0
    """Lagrangian bounds computed (:func:`_lagrangian`; one per tightened node)."""
    milp_handovers: int = 0
    """Linear problems handed to the exact MILP (:mod:`membudget.teachers.milp`)."""

    def __add__(self, other: SearchStats) -> SearchStats:
        return SearchStats(*(a + b for a, b in zip(astuple(self), astuple(other))))


class _LinearSolver:
    """Exact maximiser of ``w_tp·TP - w_fp·FP`` over the feasible schedules of a problem; ``stats_``: the
    :class:`SearchStats` of the last :meth:`solve`."""

    def __init__(self, prob: Problem):
        self.prob = prob
        T, R = prob.horizon, prob.n_resources
        self.m, self.tp, self.fp, self.k_max = [], [], [], []
        budget = prob.budget_left
        for r in range(R):
            sel = prob.res == r
            weight = np.ones(int(sel.sum()), dtype=np.int64) if prob.weight is None else prob.weight[sel]
            tp, fp = _link_effects(T, prob.start[sel], prob.until[sel], prob.deadline[sel], prob.positive[sel],
                                   prob.late_execute, weight.astype(np.int64))
            m = _latest_start(T, prob.start[sel], prob.cand_lo[sel], prob.cand_hi[sel])
            k = int(np.sum(m[prob.t0:] > -2))
            if budget is not None:
                k = min(k, budget // int(prob.costs[r]))
            if prob.cost_cap is not None and int(prob.costs[r]) > prob.cost_cap:
                k = 0  # priced above the per-step cost cap: never affordable
            self.m.append(m)
            self.tp.append(tp)
            self.fp.append(fp)
            self.k_max.append(k)
        self.cap = int(sum(k * int(c) for k, c in zip(self.k_max, prob.costs)))
        if budget is not None:
            self.cap = min(self.cap, budget)
        self.ms = np.stack(self.m) if R else np.zeros((0, T), dtype=np.int64)
        self.never = np.zeros((R, T), dtype=np.bool_)
        self.never[np.asarray(self.k_max) == 0] = True

    def solve(self, w_tp: int, w_fp: int, exact_cost=None, hint=None):
        """``(value, schedule as {r: [steps]}, tp, fp, cost)`` of the best feasible schedule (by
        :class:`_BranchAndBound`), or None. ``hint``: a feasible schedule ({r: [steps]}), the first incumbent."""
        search = _BranchAndBound(self, w_tp, w_fp, exact_cost)
        plan = search.run(hint)
        self.stats_ = search.stats
        if plan is None:
            return None
        tp, fp, cost = self.outcome(plan)
        return w_tp * tp - w_fp * fp, plan, tp, fp, cost

    def outcome(self, plan):
        """``(tp, fp, cost)`` of a schedule {r: [steps]} from ``t0`` on (TP weighted as the problem's)."""
        tp = fp = cost = 0
        p = self.prob
        for r, steps in plan.items():
            prev = int(p.last_query[r])
            for q in steps:
                tp += int(self.tp[r][prev + 1, q])
                fp += int(self.fp[r][prev + 1, q])
                prev = q
            cost += len(steps) * int(p.costs[r])
        return tp, fp, cost


class _BranchAndBound:
    """Best-first branch and bound of one linear problem, ``max w_tp·TP - w_fp·FP`` (exactly ``exact_cost`` if
    given), over forbidden (resource, step) pairs; :meth:`run` returns the best schedule, :attr:`stats` what it
    took.

    A node's key is an upper bound on every schedule in it: the relaxation without the per-step caps (solved
    exactly, budget included, :meth:`relax`), and, once the search goes past :data:`EAGER_NODES` nodes, the lower
    Lagrangian bound of :func:`_lagrangian` (computed when the node reaches the top of the queue; past
    :data:`LP_NODES` bounds also from the root's LP multipliers). Feasible schedules found on the way (relaxations
    that meet the caps, repaired and packed Lagrangian schedules, the rounded LP) are incumbents; the search stops
    when no key can beat the incumbent by one grain (every value is a multiple of ``gcd(w_tp, w_fp)``). Past
    :data:`MAX_NODES` nodes, or when the LP bound lies :data:`LP_GAP` grains above the incumbent, the linear
    problem goes to the exact MILP (:mod:`membudget.teachers.milp`).
    """

    def __init__(self, solver: _LinearSolver, w_tp: int, w_fp: int, exact_cost=None):
        prob = solver.prob
        self.solver, self.prob, self.w_tp, self.w_fp, self.exact_cost = solver, prob, w_tp, w_fp, exact_cost
        self.vals = [w_tp * tp - w_fp * fp for tp, fp in zip(solver.tp, solver.fp)]
        self.p0s = prob.last_query.astype(np.int64)
        # no budget: chains need no count dimension (_free_chain) and no knapsack joins them
        self.free = prob.budget_left is None and exact_cost is None
        self.costs = prob.costs.tolist()
        # absent caps as caps that never bind, for :meth:`violation`
        self.n_max = prob.n_resources if prob.n_max is None else prob.n_max
        self.cost_cap = sum(self.costs) if prob.cost_cap is None else prob.cost_cap
        self.grain = math.gcd(w_tp, w_fp) or 1  # every schedule's value is a multiple of it
        self.value = self.plan = None  # the incumbent
        self.chains = {}  # (r, forbidden steps) -> the resource's chain
        self.float_vals = {}  # per resource, made only where used (large arrays cost page faults)
        self.zero_pen = np.zeros(prob.horizon)
        self.heap = []  # (-key, order queued, forbidden, relaxed value, relaxed plan, multipliers, tightened)
        self.seen = {frozenset()}  # the forbidden pairs of every node queued
        self.lp_tried = False
        self.lp_mult = None  # the root's LP multipliers, once the search is large
        self.wide = False  # the root's LP bound lies LP_GAP grains or more above the incumbent
        self.stats = SearchStats()

    @functools.cached_property
    def relaxation(self) -> _Relaxation:
        prob, (R, T) = self.prob, self.solver.never.shape
        vals = np.stack(self.vals).astype(np.float64) if R else np.zeros((0, T + 1, T))
        exact = self.exact_cost is not None
        return _Relaxation(vals, self.solver.ms, prob.costs, self.p0s, prob.t0, _cap(prob.n_max), _cap(prob.cost_cap),
                           _cap(self.exact_cost if exact else prob.budget_left), exact)

    def run(self, hint=None):
        """The best feasible schedule ({r: [steps]}), or None. ``hint``: a feasible schedule, the first incumbent."""
        if self.exact_cost is not None and (self.exact_cost < 0 or self.exact_cost > self.solver.cap):
            return None
        if hint is not None:
            tp, fp, _ = self.solver.outcome(hint)
            self.offer(self.w_tp * tp - self.w_fp * fp, hint)
        root = self.relax({})
        if root is None:
            return None
        T = self.prob.horizon
        self.queue(root[0], {}, root, (np.zeros(T), np.zeros(T), 0.0), False)
        while self.heap:
            neg_key, _, forbidden, value, plan, mult, tightened = heapq.heappop(self.heap)
            key = -neg_key
            if self.value is not None and key < self.value + self.grain - 1e-6:
                break
            clash = self.violation(plan)
            if clash is None:
                self.offer(value, plan)
                continue
            if not tightened and self.stats.nodes > EAGER_NODES:
                bound, mult = self.tighten(forbidden, plan, mult)
                if bound < key:
                    self.queue(bound, forbidden, (value, plan), mult, True)
                    continue
            if self.stats.nodes > MAX_NODES or self.wide:
                return self.milp()
            self.branch(clash, forbidden, key, mult)
        return self.plan

    def queue(self, key, forbidden, relaxed, mult, tightened):
        heapq.heappush(self.heap, (-key, self.stats.nodes, forbidden, *relaxed, mult, tightened))
        self.stats.nodes += 1

    def branch(self, clash, forbidden, key, mult):
        """Queues the children of a node: each forbids one resource of the ``clash`` its step (every feasible
        schedule avoids at least one of them)."""
        self.stats.expanded += 1
        t, rs = clash
        for r in rs:
            child = dict(forbidden)
            child[r] = forbidden.get(r, frozenset()) | {t}
            pairs = frozenset((rr, tt) for rr, ts in child.items() for tt in ts)
            if pairs in self.seen:
                continue
            self.seen.add(pairs)
            relaxed = self.relax(child)
            if relaxed is not None:
                self.queue(min(relaxed[0], key), child, relaxed, mult, False)

    def offer(self, value, plan):
        if self.value is None or value > self.value:
            self.value, self.plan = value, plan

    def violation(self, plan):
        """The first step where ``plan`` breaks a per-step cap and the resources it queries there, or None."""
        T = self.prob.horizon
        count, cost = [0] * T, [0] * T
        for r, steps in plan.items():
            for t in steps:
                count[t] += 1
                cost[t] += self.costs[r]
        for t in range(T):
            if count[t] > self.n_max or cost[t] > self.cost_cap:
                return t, [r for r, steps in plan.items() if t in steps]
        return None

    def relax(self, forbidden):
        """``(value, plan)`` of the relaxation without the per-step caps with ``forbidden`` {r: steps}, or None."""
        return self.join([self.chain(r, forbidden.get(r, frozenset())) for r in range(self.prob.n_resources)])

    def relax_masked(self, mask):
        """The same with an (R, T) mask of forbidden pairs."""
        return self.join([self.chain_masked(r, mask[r]) for r in range(self.prob.n_resources)])

    def chain(self, r, steps):
        """Resource ``r``'s chain with ``steps`` forbidden (memoised)."""
        key = (r, steps)
        if key not in self.chains:
            mask = self.solver.never[r].copy()
            mask[list(steps)] = True
            self.chains[key] = self.chain_masked(r, mask)
        return self.chains[key]

    def chain_masked(self, r, mask):
        """Without a budget, the value and steps of resource ``r``'s best chain avoiding ``mask``; else its best
        value and back-pointers per number of queries (:func:`_chain`)."""
        solver, t0, p0 = self.solver, self.prob.t0, int(self.p0s[r])
        if self.free:
            if r not in self.float_vals:
                self.float_vals[r] = self.vals[r].astype(np.float64)
            v, steps = _free_chain(self.float_vals[r], solver.m[r], t0, p0, self.zero_pen, mask)
            return round(v), steps.tolist()
        return _chain(self.vals[r].T, solver.m[r], t0, p0, solver.k_max[r], mask)

    def join(self, chains):
        """``(value, plan)`` of the best schedule of the resources' ``chains`` under the budget (or of exactly
        the exact cost), by :func:`_knapsack`; None if there is none."""
        if self.free:
            return sum(v for v, _ in chains), {r: steps for r, (_, steps) in enumerate(chains) if steps}
        R = len(chains)
        values = np.full((R, max(self.solver.k_max) + 1), NEG, dtype=np.int64)
        for r, (best, _, _) in enumerate(chains):
            values[r, : best.size] = best
        cap = self.solver.cap if self.exact_cost is None else int(self.exact_cost)
        g, pick = _knapsack(values, self.prob.costs, cap)
        last = g[-1]
        c = int(np.argmax(last)) if self.exact_cost is None else cap  # ties: the cheaper schedule
        if last[c] == NEG:
            return None
        value = int(last[c])
        plan = {}
        for j in range(R, 0, -1):
            k = int(pick[j, c])
            c -= k * self.costs[j - 1]
            if k:
                _, end, par = chains[j - 1]
                steps, q = [], int(end[k])
                for kk in range(k, 0, -1):
                    steps.append(q)
                    q = int(par[kk, q])
                plan[j - 1] = steps[::-1]
        return value, plan

    def tighten(self, forbidden, plan, mult):
        """A Lagrangian bound of the node that forbids ``forbidden`` (its relaxation's schedule: ``plan``), from
        the parent's multipliers ``mult`` and, past :data:`LP_NODES` bounds, the root's LP multipliers; offers
        the incumbents found on the way. Returns the bound and its multipliers."""
        mask = self.solver.never.copy()
        for r, ts in forbidden.items():
            mask[r, list(ts)] = True
        if self.value is None:
            z = np.zeros(mask.shape, dtype=np.bool_)
            for r, steps in plan.items():
                z[r, steps] = True
            target = self.repaired(z)
        stop = -np.inf if self.value is None else float(self.value)
        if self.value is not None:
            target = stop
        if not self.lp_tried and self.stats.bounds >= LP_NODES:
            self.root_lp()
        bound = np.inf
        for start in [mult] if self.lp_mult is None else [mult, self.lp_mult]:
            out = self.lagrangian(mask, start, target, stop, LAGRANGE_ITERS,
                                  BUDGET_SCALE / float(np.mean(self.prob.costs)))
            if out[0] < bound:
                bound, mu, nu, beta, z = out
        self.repaired(z)
        self.stats.bounds += 1
        if self.stats.bounds <= 4 or self.stats.bounds % HEUR_EVERY == 0:
            self.pack(mask, z, (mu, nu, beta))
        return bound, (mu, nu, beta)

    def lagrangian(self, mask, mult, target, stop, iters, scale):
        rel = self.relaxation
        return _lagrangian(rel.vals, rel.ms, rel.costs, rel.p0s, rel.t0, mask, rel.n_max, rel.cost_cap, rel.budget,
                           rel.exact, *mult, target, stop, self.grain, iters, scale)

    def root_lp(self):
        """Once: the root's LP multipliers (:func:`_lp_multipliers`) for every later bound, the LP's pairs trimmed
        to the caps as an incumbent, and whether the LP's bound lies :data:`LP_GAP` grains or more above the
        incumbent."""
        self.lp_tried = True
        rel, never = self.relaxation, self.solver.never
        lp = _lp_multipliers(rel, never)
        if lp is None:
            return
        self.lp_mult, queried = lp
        allowed, _ = _repair(rel.vals, rel.costs, rel.p0s, rel.t0, queried, rel.n_max, rel.cost_cap, -1)
        relaxed = self.relax_masked(never | ~allowed)
        if relaxed is not None:
            self.offer(*relaxed)
        root_bound = self.lagrangian(never.copy(), self.lp_mult, 0.0, -np.inf, 1, 1.0)[0]
        self.wide = self.value is not None and root_bound - self.value >= LP_GAP * self.grain

    def repaired(self, z):
        """Offers the repair of ``z`` (:func:`_repair`) as an incumbent; its value."""
        rel, prob = self.relaxation, self.prob
        z, value = _repair(rel.vals, rel.costs, rel.p0s, rel.t0, z, rel.n_max, rel.cost_cap, _cap(prob.budget_left))
        if (self.value is None or round(value) > self.value) and (
                self.exact_cost is None or int(np.sum(z * prob.costs[:, None])) == self.exact_cost):
            self.offer(round(value), {r: np.flatnonzero(z[r]).tolist() for r in range(prob.n_resources) if z[r].any()})
        return value

    def pack(self, mask, z, mult):
        """Offers the best schedule (budget exact) using only the pairs :func:`_pack` gives the resources, most
        queried in the Lagrangian schedule ``z`` first: it meets the caps."""
        rel = self.relaxation
        order = np.argsort(-z.sum(axis=1), kind="stable")
        packed = _pack(rel.vals, rel.ms, rel.costs, rel.p0s, rel.t0, mask, rel.n_max, rel.cost_cap, *mult, order)
        relaxed = self.relax_masked(mask | ~packed)
        if relaxed is not None:
            self.offer(*relaxed)

    def milp(self):
        """The best schedule by the exact MILP, or None."""
        self.stats.milp_handovers += 1
        res = linear_milp(self.prob, self.w_tp, self.w_fp, self.exact_cost)
        if res is None:
            return None
        plan = {}
        for t, r in res[0]:
            plan.setdefault(int(r), []).append(int(t))
        return plan


def _dinkelbach(prob: Problem, exact_cost=None):
    """Dinkelbach iterations over exact linear solves: the optimum schedule or None (no schedule costs exactly
    ``exact_cost``), and the :class:`SearchStats` of the linear solves together."""
    need = table_bytes(prob.horizon, prob.n_resources)
    if need > MAX_TABLE_BYTES:
        raise MemoryError(f"the hindsight DP's tables for a week of {prob.horizon} steps and {prob.n_resources} "
                          f"resources need {need / 2**30:.1f} GiB, more than MAX_TABLE_BYTES "
                          f"({MAX_TABLE_BYTES / 2**30:.1f} GiB; membudget.teachers.hindsight_dp): solve shorter "
                          f"weeks, or raise it on a machine with the memory")
    solver = _LinearSolver(prob)
    lam = Fraction(0)
    best = None
    stats = SearchStats()
    while True:
        n, d = lam.numerator, lam.denominator
        res = solver.solve(2 * d - n, n, exact_cost, None if best is None else best[0])
        stats += solver.stats_
        if res is None:
            best = None
            break
        _, plan, tp, fp, cost = res
        tp_all, fp_all, fn_all = prob.counts(tp, fp)
        denom = 2 * tp_all + fp_all + fn_all
        ratio = Fraction(2 * tp_all, denom) if denom else Fraction(0)
        if best is not None and ratio <= lam:
            break
        best = (plan, tp, fp, cost, ratio)
        if ratio == lam:
            break
        lam = ratio
    if best is None:
        return None, stats
    plan, tp, fp, cost, _ = best
    tp_all, fp_all, fn_all = prob.counts(tp, fp)
    schedule = sorted((t, r) for r, steps in plan.items() for t in steps)
    return Schedule(schedule=schedule, f1=prob.f1(tp, fp), tp=tp_all, fp=fp_all, fn=fn_all, cost=cost,
                    tp_future=tp, fp_future=fp), stats


def solve_problem(prob: Problem, exact_cost=None) -> Schedule | None:
    """The optimum schedule of ``prob`` (Dinkelbach iterations over exact linear solves), or None (no schedule
    costs exactly ``exact_cost``)."""
    return _dinkelbach(prob, exact_cost)[0]


class HindsightDP(PMTeacher):
    """The hindsight teacher: the schedule that maximises episode Set F1 under the budget and per-step caps,
    seeing the whole frozen week — exact under PMWeek-v0's dynamics, for both late policies and any prices.

    Parameters mirror :class:`~membudget.envs.pm.PMWeekEnv` (``budget`` is an int or None here; resolve level
    names with :func:`membudget.envs.pm.budget_levels`). ``lookahead`` is the candidate rule of the environment
    the schedule is for (its ``WorldConfig.lookahead``): a week does not record it, since the same week may be
    played under another rule, so a schedule solved with another lookahead than the environment's queries
    resources that are no candidates there. :meth:`from_env` takes every argument from an environment. After
    each solve ``stats_`` holds its :class:`SearchStats`.

    Time: about 1 ms per default week; without a budget it grows steeply with the opportunity load (0.5-0.8 s at
    load 16, about a minute at load 30; docs/teachers.md), and a solve does not return to Python before it ends.
    """

    def solve(self, episode, exact_cost=None) -> Schedule | None:
        """The optimal schedule of ``episode``; with ``exact_cost`` the optimum among schedules costing exactly
        that much (None when there is none)."""
        self._check(episode)
        if exact_cost is not None:
            if isinstance(exact_cost, bool) or not isinstance(exact_cost, (int, np.integer)):
                raise TypeError(f"exact_cost must be an int or None, got {exact_cost!r}")
            check_int("exact_cost", exact_cost, 0, None)
        prob = problem_from_episode(episode, budget=self.budget, per_step_cap=self.per_step_cap,
                                    per_step_cost_cap=self.per_step_cost_cap, late_policy=self.late_policy,
                                    lookahead=self.lookahead)
        schedule, self.stats_ = _dinkelbach(prob, exact_cost)
        return schedule

    def continuation(self, env, slot: int = 0) -> Schedule:
        """The optimal continuation from the environment's current state (step, remaining budget, what is
        already resolved, counts so far); ``slot``: which week of a ``PMWeekVectorEnv``. Uses the environment's
        own budget, caps and late policy."""
        schedule, self.stats_ = _dinkelbach(problem_from_env(env, slot))
        return schedule


# ---------------------------------------------------------------------------------------- many first actions
@njit_kernel
def _rest_tables(T, R, t0, res, start, until, deadline, positive, late_execute, lo, hi):
    """Per resource the link effects of a query at ``q >= t0`` after the previous one at ``p``: ``tp[r, q - t0, p +
    1]``, ``fp[r, q - t0, p + 1]`` (:func:`_link_effects` transposed and from ``t0`` on, TP unweighted), and the
    latest starts ``m[r, q]`` (:func:`_latest_start`), of all the rows at once."""
    tp = np.zeros((R, T - t0, T + 1), dtype=np.int64)
    fp = np.zeros((R, T - t0, T + 1), dtype=np.int64)
    m = np.full((R, T), -2, dtype=np.int64)
    for i in range(start.size):
        r = res[i]
        s = start[i]
        if s < T:
            for q in range(max(s, t0), min(until[i], T - 1) + 1):
                on_time = q <= deadline[i]
                if positive[i]:
                    if on_time:
                        for p in range(-1, s):
                            tp[r, q - t0, p + 1] += 1
                    elif late_execute:
                        for p in range(-1, s):
                            fp[r, q - t0, p + 1] += 1
                elif on_time:
                    for p in range(-1, s):
                        fp[r, q - t0, p + 1] += 1
        for q in range(max(0, lo[i]), min(hi[i], T - 1) + 1):
            if s > m[r, q]:
                m[r, q] = s
    return tp, fp, m


@njit_kernel
def _rest_root(TP, FP, MS, kmax, costs, cap, t0, n_max, cost_cap, p0s, w_tp, w_fp, cache):
    """The linear problem ``max w_tp·TP - w_fp·FP`` of one rest without the per-step caps (chains joined by
    the knapsack, as :meth:`_BranchAndBound.relax`). Returns ``(status, tp, fp)``: status 0, its schedule meets
    the caps (so it is the linear optimum); 1, it breaks a cap; 2, no schedule. ``cache``: each resource's last
    chain and its key (previous query, most queries, weights), reused for the same previous query and weights
    and at most as many queries (the variants of one rest share most resources' chains). A resource without
    false positives in the rest (``tp_only``) keeps its chain of ``TP`` alone under any weights: ``w_tp > 0``
    scales every sum and keeps every comparison, so only the values are scaled."""
    ckey, cbest, cend, cpar, vals, free, tp_only = cache
    R, T = MS.shape
    K1 = 1
    for r in range(R):
        K1 = max(K1, kmax[r] + 1)
    values = np.full((R, K1), NEG, dtype=np.int64)
    for r in range(R):
        k = kmax[r]
        p0 = p0s[r]
        # a chain computed for more queries holds this one's: _chain's rows for k queries do not depend on
        # the most it was asked for
        wt, wf, scale = (1, 0, w_tp) if tp_only[r] else (w_tp, w_fp, 1)
        if not (ckey[r, 0] == p0 and ckey[r, 1] >= k and ckey[r, 2] == wt and ckey[r, 3] == wf):
            for j in range(cbest.shape[1]):
                cbest[r, j] = NEG
            cbest[r, 0] = 0
            if k > 0:
                # the link values _chain reads, transposed (vals[b, a]: a query at b after one at a - 1): after
                # the previous query p0, and after a query at t0 or later and before b
                for b in range(t0, T):
                    vals[b, p0 + 1] = wt * TP[r, b - t0, p0 + 1] - wf * FP[r, b - t0, p0 + 1]
                    for a in range(t0 + 1, b + 1):
                        vals[b, a] = wt * TP[r, b - t0, a] - wf * FP[r, b - t0, a]
                best, end, par = _chain(vals, MS[r], t0, p0, k, free)
                for j in range(k + 1):
                    cbest[r, j] = best[j]
                    cend[r, j] = end[j]
                    for q in range(T):
                        cpar[r, j, q] = par[j, q]
            ckey[r, 0], ckey[r, 1], ckey[r, 2], ckey[r, 3] = p0, k, wt, wf
        for j in range(k + 1):
            values[r, j] = cbest[r, j] * scale if cbest[r, j] > NEG else NEG
    g, pick = _knapsack(values, costs, cap)
    c = 0
    for cc in range(cap + 1):  # np.argmax: the first (cheapest) of the best
        if g[R, cc] > g[R, c]:
            c = cc
    if g[R, c] == NEG:
        return 2, 0, 0
    count = np.zeros(T, dtype=np.int64)
    spent = np.zeros(T, dtype=np.int64)
    steps = np.empty(T, dtype=np.int64)
    tp = 0
    fp = 0
    for j in range(R, 0, -1):
        k = pick[j, c]
        r = j - 1
        c -= k * costs[r]
        q = cend[r, k]
        for kk in range(k, 0, -1):
            steps[kk - 1] = q
            q = cpar[r, kk, q]
        prev = p0s[r]
        for kk in range(k):
            q = steps[kk]
            tp += TP[r, q - t0, prev + 1]
            fp += FP[r, q - t0, prev + 1]
            prev = q
            count[q] += 1
            spent[q] += costs[r]
    for q in range(T):
        if (n_max >= 0 and count[q] > n_max) or (cost_cap >= 0 and spent[q] > cost_cap):
            return 1, tp, fp
    return 0, tp, fp


@njit_kernel
def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


@njit_kernel
def _rest_dinkelbach(TP, FP, MS, costs, t0, n_max, cost_cap, P0, budgets, tp_fixed, fp_fixed, due):
    """Dinkelbach's iterations (as :func:`_dinkelbach`, ``λ`` an exact fraction) over :func:`_rest_root` for
    each variant ``v`` of one rest (last queries ``P0[v]``, budget ``budgets[v]`` (-1: none), fixed TP and FP).
    Returns per variant ``(status, tp, fp)`` of the optimum: status 0, exact; 1, a linear problem's relaxation
    broke a per-step cap (solve that variant with the branch and bound); 2, no schedule."""
    R, T = MS.shape
    V = P0.shape[0]
    status = np.zeros(V, dtype=np.int64)
    out_tp = np.zeros(V, dtype=np.int64)
    out_fp = np.zeros(V, dtype=np.int64)
    kcand = np.zeros(R, dtype=np.int64)
    for r in range(R):
        for q in range(t0, T):
            if MS[r, q] > -2:
                kcand[r] += 1
    kmax = np.zeros(R, dtype=np.int64)
    KC = 1
    for r in range(R):
        KC = max(KC, kcand[r] + 1)
    cache = (np.full((R, 4), -(1 << 62), dtype=np.int64), np.full((R, KC), NEG, dtype=np.int64),
             np.full((R, KC), -1, dtype=np.int64), np.full((R, KC, T), -3, dtype=np.int64),
             np.zeros((T, T + 1), dtype=np.int64), np.zeros(T, dtype=np.bool_), np.empty(R, dtype=np.bool_))
    tp_only = cache[6]
    for r in range(R):
        tp_only[r] = not FP[r].any()
    n_last, d_last = 0, 1
    for v in range(V):
        budget = budgets[v]
        cap = 0
        for r in range(R):
            k = kcand[r]
            if budget >= 0:
                k = min(k, budget // costs[r])
            if cost_cap >= 0 and costs[r] > cost_cap:
                k = 0
            kmax[r] = k
            cap += k * costs[r]
        if budget >= 0:
            cap = min(cap, budget)
        # Dinkelbach from the previous variant's optimum: any start gives the optimum (until a solution's ratio
        # is reached, the first iteration only supplies one), and variants of one rest often share it
        n, d = n_last, d_last
        have = False
        best_tp = best_fp = 0
        st = 0
        while True:
            st, tp, fp = _rest_root(TP, FP, MS, kmax, costs, cap, t0, n_max, cost_cap, P0[v], 2 * d - n, n, cache)
            if st != 0:
                break
            tp_all = tp_fixed[v] + tp
            fp_all = fp_fixed[v] + fp
            den = 2 * tp_all + fp_all + (due - tp_all)
            rn, rd = (0, 1) if den == 0 else (2 * tp_all, den)
            g = _gcd(rn, rd)
            rn, rd = rn // g, rd // g
            if have and rn * d <= n * rd:
                break
            have = True
            best_tp, best_fp = tp, fp
            if rn * d == n * rd:
                break
            n, d = rn, rd
        if st == 0:
            n_last, d_last = n, d
        status[v] = st
        out_tp[v] = best_tp
        out_fp[v] = best_fp
    return status, out_tp, out_fp


@njit_kernel
def _rest_solve(T, R, t0, res, start, until, deadline, positive, late_execute, lo, hi, costs, n_max, cost_cap, P0,
                budgets, tp_fixed, fp_fixed, due):
    """:func:`_rest_tables` of one rest's registered rows, then :func:`_rest_dinkelbach` over its variants."""
    TP, FP, MS = _rest_tables(T, R, t0, res, start, until, deadline, positive, late_execute, lo, hi)
    return _rest_dinkelbach(TP, FP, MS, costs, t0, n_max, cost_cap, P0, budgets, tp_fixed, fp_fixed, due)


def rest_values(prob: Problem, last_queries, budgets, tp_fixed, fp_fixed) -> np.ndarray:
    """The optimum Set F1 (as :func:`solve_problem`, exactly) of ``prob`` under each of several variants ``v``:
    the last queries ``last_queries[v]``, the budget ``budgets[v]`` (None: none) and the fixed counts
    ``tp_fixed[v]``, ``fp_fixed[v]`` replacing ``prob``'s — the rests of one week after different first actions.
    The link tables are built once; a variant whose caps-free relaxation meets the per-step caps at every
    Dinkelbach iteration is solved there (it is then the optimum), any other by :func:`solve_problem`."""
    if prob.weight is not None:
        raise ValueError("rest_values counts TP unweighted (prob.weight must be None)")
    R = prob.n_resources
    P0 = np.ascontiguousarray(np.asarray(last_queries, dtype=np.int64).reshape(-1, R))
    V = P0.shape[0]
    tpf = np.asarray(tp_fixed, dtype=np.int64).reshape(V)
    fpf = np.asarray(fp_fixed, dtype=np.int64).reshape(V)
    found = _rest_solve(prob.horizon, R, int(prob.t0), prob.res, prob.start, prob.until, prob.deadline, prob.positive,
                        prob.late_execute, prob.cand_lo, prob.cand_hi, np.asarray(prob.costs, dtype=np.int64),
                        _cap(prob.n_max), _cap(prob.cost_cap), P0, kernel_budgets(budgets), tpf, fpf, int(prob.due))
    return variant_f1(lambda: prob, P0, budgets, tpf, fpf, int(prob.due), *found)


def kernel_budgets(budgets) -> np.ndarray:
    """Each variant's budget as :func:`_rest_dinkelbach` takes it (-1: none)."""
    return np.array([_cap(b) for b in budgets], dtype=np.int64)


def variant_f1(problem, P0, budgets, tp_fixed, fp_fixed, due, status, tp, fp) -> np.ndarray:
    """The Set F1 of each variant from :func:`_rest_dinkelbach`'s ``(status, tp, fp)``: exact where its status is
    0, else solved by :func:`solve_problem` on ``problem()`` (the rest, built only when some variant needs it) with
    the variant's last queries, budget and fixed counts."""
    out = np.empty(P0.shape[0])
    prob = None
    for v in range(out.size):
        if status[v] == 0:
            out[v] = f1_of_counts(int(tp_fixed[v] + tp[v]), int(fp_fixed[v] + fp[v]), due)
        else:
            prob = problem() if prob is None else prob
            sol = solve_problem(replace(prob, last_query=P0[v], budget_left=budgets[v], tp_fixed=int(tp_fixed[v]),
                                        fp_fixed=int(fp_fixed[v])))
            if sol is None:
                raise ValueError("no feasible schedule for a variant")
            out[v] = sol.f1
    return out

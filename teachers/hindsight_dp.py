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
   (:mod:`membudget.teachers.milp`); ``python -m membudget.bench.dp_grid`` counts how often.
"""

from __future__ import annotations

import heapq
import math
from fractions import Fraction

import numba
import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from .milp import linear_milp
from .problem import (
    PMTeacher,
    Problem,
    Schedule,
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
MILP_HANDOVERS = 0
"""Linear problems handed to the MILP in this process so far (read by ``python -m membudget.bench.dp_grid``)."""


@numba.njit(cache=True)
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


@numba.njit(cache=True)
def _latest_start(T, start, lo, hi):
    """``M[q]``: the largest start among intentions that make the resource a candidate at ``q`` (-2 if none);
    the resource is a candidate at ``q`` after a query at ``p`` iff ``M[q] > p``."""
    m = np.full(T, -2, dtype=np.int64)
    for i in range(start.size):
        for q in range(max(0, lo[i]), min(hi[i], T - 1) + 1):
            if start[i] > m[q]:
                m[q] = start[i]
    return m


@numba.njit(cache=True)
def _chain(val, m, t0, p0, k_max, forbidden):
    """Best value of exactly ``k`` queries of one resource for ``k = 0..k_max``, with back-pointers."""
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
            f[1, q] = val[p0 + 1, q]
            par[1, q] = p0
    for k in range(2, k_max + 1):
        for q in range(t0 + k - 1, T):
            if forbidden[q]:
                continue
            mq = m[q]
            bv = NEG
            bp = -3
            for p in range(t0 + k - 2, min(q, mq)):
                if f[k - 1, p] > NEG:
                    v = f[k - 1, p] + val[p + 1, q]
                    if v > bv:
                        bv = v
                        bp = p
            f[k, q] = bv
            par[k, q] = bp
    for k in range(1, k_max + 1):
        for q in range(t0, T):
            if f[k, q] > best[k]:
                best[k] = f[k, q]
                end[k] = q
    return best, end, par


@numba.njit(cache=True)
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


@numba.njit(cache=True)
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


@numba.njit(cache=True)
def _step_load(z, t, costs):
    """Queries and their cost at step ``t`` of the schedule mask ``z (R, T)``."""
    cnt = 0
    cst = 0
    for r in range(z.shape[0]):
        if z[r, t]:
            cnt += 1
            cst += costs[r]
    return cnt, cst


@numba.njit(cache=True)
def _spend(z, t0, costs):
    """Cost of every query of ``z`` from step ``t0`` on."""
    used = 0
    for r in range(z.shape[0]):
        for t in range(t0, z.shape[1]):
            if z[r, t]:
                used += costs[r]
    return used


@numba.njit(cache=True)
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


@numba.njit(cache=True)
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


@numba.njit(cache=True)
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


def _lp_multipliers(vals, ms, costs, p0s, t0, forbidden, n_max, cost_cap, budget, exact):
    """Optimal Lagrange multipliers ``(mu, nu, beta)`` of the per-step caps and the budget (as in
    :func:`_lagrangian`): the duals of the linear relaxation of the chain (arc) formulation — one arc per link
    ``p -> q`` of a resource, flow kept along each chain — whose value equals the best Lagrangian bound, since each
    chain problem is a longest path. Subgradient steps alone can stall far above it. Also returns the relaxation's
    (resource, step) pairs queried with weight above one half. None if the relaxation has no solution."""
    R, T = ms.shape
    steps = np.arange(T)
    rows, cols, coef, obj, qs, rs = [], [], [], [], [], []
    n = 0
    n_flow = R * T
    for r in range(R):
        m, p0 = ms[r], p0s[r]
        ok = ~forbidden[r] & (steps >= t0)
        q1 = np.flatnonzero(ok & (m > p0))
        p2, q2 = np.nonzero(ok[:, None] & ok[None, :] & (steps[:, None] < steps[None, :])
                            & (steps[:, None] < m[None, :]))
        p = np.concatenate([np.full(q1.size, p0), p2])
        q = np.concatenate([q1, q2])
        k = np.arange(n, n + q.size)
        obj.append(vals[r, p + 1, q])
        qs.append(q)
        rs.append(np.full(q.size, r))
        start = p < t0  # the first query: at most one
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
    if n_max >= 0:
        rows.append(base + q)
        cols.append(k)
        coef.append(np.ones(n))
        ub.append(np.full(T, float(n_max)))
        base += T
    if cost_cap >= 0:
        rows.append(base + q)
        cols.append(k)
        coef.append(costs[r].astype(np.float64))
        ub.append(np.full(T, float(cost_cap)))
        base += T
    a_ub = sparse.csr_array((np.concatenate(coef), (np.concatenate(rows), np.concatenate(cols))), shape=(base, n))
    price = costs[r].astype(np.float64)[None, :]
    kw = {"A_eq": price, "b_eq": [budget]} if exact else {}
    if budget >= 0 and not exact:
        a_ub = sparse.vstack([a_ub, sparse.csr_array(price)])
        ub.append([float(budget)])
    res = linprog(-np.concatenate(obj), A_ub=a_ub, b_ub=np.concatenate(ub), bounds=(0, 1), method="highs", **kw)
    if res.status != 0:
        return None
    mu, nu, beta = np.zeros(T), np.zeros(T), 0.0
    dual = -res.ineqlin.marginals
    at = n_flow + R
    if n_max >= 0:
        mu = np.maximum(dual[at: at + T], 0.0)
        at += T
    if cost_cap >= 0:
        nu = np.maximum(dual[at: at + T], 0.0)
        at += T
    if budget >= 0:
        beta = float(-res.eqlin.marginals[0]) if exact else max(float(dual[at]), 0.0)
    queried = np.zeros((R, T))
    np.add.at(queried, (r, q), res.x)
    return (mu, nu, beta), queried > 0.5


class _LinearSolver:
    """Exact maximiser of ``w_tp·TP - w_fp·FP`` over the feasible schedules of a problem."""

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
        """``(value, schedule as {r: [steps]}, tp, fp, cost)`` of the best feasible schedule, or None. ``hint``: a
        feasible schedule ({r: [steps]}), the first incumbent.

        Best-first branch and bound over forbidden (resource, step) pairs. A node's key is an upper bound on
        every schedule in it: the relaxation without the per-step caps (solved exactly, budget included), and,
        once the search goes past :data:`EAGER_NODES` nodes, the lower Lagrangian bound of
        :func:`_lagrangian` (computed when the node reaches the top of the queue; past :data:`LP_NODES`
        tightened nodes also from the root's LP multipliers). Feasible schedules found on the way (relaxations
        that meet the caps, repaired and packed Lagrangian schedules, the rounded LP) are incumbents; the search
        stops when no key can beat the incumbent by one grain (every value is a multiple of
        ``gcd(w_tp, w_fp)``). Past :data:`MAX_NODES` nodes, or when the LP bound lies :data:`LP_GAP` grains
        above the incumbent, the linear problem goes to the exact MILP (:mod:`membudget.teachers.milp`).
        """
        prob = self.prob
        T, R = prob.horizon, prob.n_resources
        vals = [w_tp * tp - w_fp * fp for tp, fp in zip(self.tp, self.fp)]
        # float link values, per resource and stacked, made only where used (large arrays cost page faults)
        fval = {}
        stacked = []

        def fvals():
            if not stacked:
                stacked.append(np.stack(vals).astype(np.float64) if R else np.zeros((0, T + 1, T)))
            return stacked[0]

        p0s = prob.last_query.astype(np.int64)
        free = prob.budget_left is None and exact_cost is None
        if exact_cost is not None and (exact_cost < 0 or exact_cost > self.cap):
            return None
        cache = {}
        zero_pen = np.zeros(T)

        def chain_masked(r, mask):
            if free:
                if r not in fval:
                    fval[r] = vals[r].astype(np.float64)
                v, steps = _free_chain(fval[r], self.m[r], prob.t0, int(p0s[r]), zero_pen, mask)
                return round(v), steps.tolist()
            return _chain(vals[r], self.m[r], prob.t0, int(p0s[r]), self.k_max[r], mask)

        def chain(r, forb):
            key = (r, forb)
            if key not in cache:
                mask = self.never[r].copy()
                mask[list(forb)] = True
                cache[key] = chain_masked(r, mask)
            return cache[key]

        def evaluate(forbidden, masks=None):
            """The relaxation without the per-step caps, with ``forbidden`` {r: steps} (or a full mask)."""
            if masks is None:
                chains = [chain(r, forbidden.get(r, frozenset())) for r in range(R)]
            else:
                chains = [chain_masked(r, masks[r]) for r in range(R)]
            if free:
                return sum(v for v, _ in chains), {r: steps for r, (_, steps) in enumerate(chains) if steps}
            K = max(self.k_max) + 1
            values = np.full((R, K), NEG, dtype=np.int64)
            for r, (best, _, _) in enumerate(chains):
                values[r, : best.size] = best
            cap = self.cap if exact_cost is None else int(exact_cost)
            g, pick = _knapsack(values, prob.costs, cap)
            last = g[-1]
            c = int(np.argmax(last)) if exact_cost is None else cap  # ties: the cheaper schedule
            if last[c] == NEG:
                return None
            value = int(last[c])
            plan = {}
            for j in range(R, 0, -1):
                k = int(pick[j, c])
                c -= k * int(prob.costs[j - 1])
                if k:
                    best, end, par = chains[j - 1]
                    steps, q = [], int(end[k])
                    for kk in range(k, 0, -1):
                        steps.append(q)
                        q = int(par[kk, q])
                    plan[j - 1] = steps[::-1]
            return value, plan

        costs = prob.costs.tolist()
        n_max = R if prob.n_max is None else prob.n_max
        cost_cap = sum(costs) if prob.cost_cap is None else prob.cost_cap

        def violation(plan):
            """The first step where ``plan`` breaks a per-step cap and the resources it queries there, or None."""
            count, cost = [0] * T, [0] * T
            for r, steps in plan.items():
                for t in steps:
                    count[t] += 1
                    cost[t] += costs[r]
            for t in range(T):
                if count[t] > n_max or cost[t] > cost_cap:
                    return t, [r for r, steps in plan.items() if t in steps]
            return None

        neg1 = lambda x: -1 if x is None else int(x)
        budget = neg1(exact_cost if exact_cost is not None else prob.budget_left)
        incumbent = [None, None]  # value, plan
        grain = math.gcd(w_tp, w_fp) or 1  # every schedule's value is a multiple of it

        def offer(value, plan):
            if incumbent[0] is None or value > incumbent[0]:
                incumbent[0], incumbent[1] = value, plan

        def tighten(forbidden, plan, mult):
            mask = self.never.copy()
            for r, ts in forbidden.items():
                mask[r, list(ts)] = True
            if incumbent[0] is None:
                z = np.zeros((R, T), dtype=np.bool_)
                for r, steps in plan.items():
                    z[r, steps] = True
                target = repaired(z)
            stop = -np.inf if incumbent[0] is None else float(incumbent[0])
            if incumbent[0] is not None:
                target = stop
            if not lp_mult and tightenings[0] >= LP_NODES:
                lp = _lp_multipliers(fvals(), self.ms, prob.costs, p0s, prob.t0, self.never, neg1(prob.n_max),
                                     neg1(prob.cost_cap), budget, exact_cost is not None)
                lp_mult.append(None if lp is None else lp[0])
                if lp is not None:  # an incumbent from the relaxation's pairs, trimmed to the caps
                    allowed, _ = _repair(fvals(), prob.costs, p0s, prob.t0, lp[1], neg1(prob.n_max),
                                         neg1(prob.cost_cap), -1)
                    ev = evaluate(None, self.never | ~allowed)
                    if ev is not None:
                        offer(*ev)
                    root_bound = _lagrangian(fvals(), self.ms, prob.costs, p0s, prob.t0, self.never.copy(),
                                             neg1(prob.n_max), neg1(prob.cost_cap), budget, exact_cost is not None,
                                             *lp[0], 0.0, -np.inf, grain, 1, 1.0)[0]
                    wide[0] = incumbent[0] is not None and root_bound - incumbent[0] >= LP_GAP * grain
            bound = np.inf
            for start in [mult] + [m for m in lp_mult if m is not None]:
                out = _lagrangian(fvals(), self.ms, prob.costs, p0s, prob.t0, mask, neg1(prob.n_max),
                                  neg1(prob.cost_cap), budget, exact_cost is not None, *start, max(target, stop),
                                  stop, grain, LAGRANGE_ITERS, BUDGET_SCALE / float(np.mean(prob.costs)))
                if out[0] < bound:
                    bound, mu, nu, beta, z = out
            repaired(z)
            tightenings[0] += 1
            if tightenings[0] <= 4 or tightenings[0] % HEUR_EVERY == 0:
                order = np.argsort(-z.sum(axis=1), kind="stable")
                packed = _pack(fvals(), self.ms, prob.costs, p0s, prob.t0, mask, neg1(prob.n_max),
                               neg1(prob.cost_cap), mu, nu, beta, order)
                # the best schedule (budget exact) using only the packed (resource, step) pairs meets the caps
                ev = evaluate(None, mask | ~packed)
                if ev is not None:
                    offer(*ev)
            return bound, (mu, nu, beta)

        def repaired(z):
            """Offers the repair of ``z`` as an incumbent; its value."""
            z, value = _repair(fvals(), prob.costs, p0s, prob.t0, z, neg1(prob.n_max), neg1(prob.cost_cap),
                               neg1(prob.budget_left))
            if (incumbent[0] is None or round(value) > incumbent[0]) and (
                    exact_cost is None or int(np.sum(z * prob.costs[:, None])) == exact_cost):
                offer(round(value), {r: np.flatnonzero(z[r]).tolist() for r in range(R) if z[r].any()})
            return value

        if hint is not None:
            _, _, tp, fp, _ = self._result(0, hint)
            offer(w_tp * tp - w_fp * fp, hint)
        tightenings = [0]
        lp_mult = []  # the root's LP multipliers, once the search is large
        wide = [False]  # the root's LP bound lies LP_GAP grains or more above the incumbent
        root = evaluate({})
        if root is None:
            return None
        mult0 = (np.zeros(T), np.zeros(T), 0.0)
        # (-key, order, forbidden, relaxed value, relaxed plan, multipliers, tightened)
        heap = [(-root[0], 0, {}, root[0], root[1], mult0, False)]
        seen = {frozenset()}
        counter = 1
        while heap:
            neg_key, _, forbidden, value, plan, mult, tightened = heapq.heappop(heap)
            if incumbent[0] is not None and -neg_key < incumbent[0] + grain - 1e-6:
                break
            clash = violation(plan)
            if clash is None:
                offer(value, plan)
                continue
            if not tightened and counter > EAGER_NODES:
                bound, mult = tighten(forbidden, plan, mult)
                if bound < -neg_key:
                    heapq.heappush(heap, (-bound, counter, forbidden, value, plan, mult, True))
                    counter += 1
                    continue
            if counter > MAX_NODES or wide[0]:
                return self._milp(w_tp, w_fp, exact_cost)
            t, rs = clash
            for r in rs:
                child = dict(forbidden)
                child[r] = forbidden.get(r, frozenset()) | {t}
                key = frozenset((rr, tt) for rr, ts in child.items() for tt in ts)
                if key in seen:
                    continue
                seen.add(key)
                ev = evaluate(child)
                if ev is not None:
                    heapq.heappush(heap, (-min(ev[0], -neg_key), counter, child, ev[0], ev[1], mult, False))
                    counter += 1
        if incumbent[0] is None:
            return None
        return self._result(incumbent[0], incumbent[1])

    def _milp(self, w_tp, w_fp, exact_cost):
        global MILP_HANDOVERS
        MILP_HANDOVERS += 1
        res = linear_milp(self.prob, w_tp, w_fp, exact_cost)
        if res is None:
            return None
        plan = {}
        for t, r in res[0]:
            plan.setdefault(int(r), []).append(int(t))
        out = self._result(0, plan)
        return (w_tp * out[2] - w_fp * out[3],) + out[1:]

    def _result(self, value, plan):
        tp = fp = cost = 0
        p = self.prob
        for r, steps in plan.items():
            prev = int(p.last_query[r])
            for q in steps:
                tp += int(self.tp[r][prev + 1, q])
                fp += int(self.fp[r][prev + 1, q])
                prev = q
            cost += len(steps) * int(p.costs[r])
        return value, plan, tp, fp, cost


def solve_problem(prob: Problem, exact_cost=None) -> Schedule | None:
    """Dinkelbach iterations over exact linear solves; the optimum schedule or None (no schedule costs exactly
    ``exact_cost``)."""
    solver = _LinearSolver(prob)
    lam = Fraction(0)
    best = None
    while True:
        n, d = lam.numerator, lam.denominator
        res = solver.solve(2 * d - n, n, exact_cost, None if best is None else best[0])
        if res is None:
            return None
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
    plan, tp, fp, cost, _ = best
    tp_all, fp_all, fn_all = prob.counts(tp, fp)
    schedule = sorted((t, r) for r, steps in plan.items() for t in steps)
    return Schedule(schedule=schedule, f1=prob.f1(tp, fp), tp=tp_all, fp=fp_all, fn=fn_all, cost=cost,
                    tp_future=tp, fp_future=fp)


class HindsightDP(PMTeacher):
    """The hindsight teacher: the schedule that maximises episode Set F1 under the budget and per-step caps,
    seeing the whole frozen week — exact under PMWeek-v0's dynamics, for both late policies and any prices.

    Parameters mirror :class:`~membudget.envs.pm.PMWeekEnv` (``budget`` is an int or None here; resolve level
    names with :func:`membudget.envs.pm.budget_levels`). ``lookahead`` must equal the world's
    (``WorldConfig.lookahead``) because it defines the candidates.
    """

    def solve(self, episode, exact_cost=None) -> Schedule | None:
        """The optimal schedule of ``episode``; with ``exact_cost`` the optimum among schedules costing exactly
        that much (None when there is none)."""
        self._check(episode)
        if exact_cost is not None and (isinstance(exact_cost, bool) or not isinstance(exact_cost, (int, np.integer))):
            raise TypeError(f"exact_cost must be an int or None, got {exact_cost!r}")
        prob = problem_from_episode(episode, budget=self.budget, per_step_cap=self.per_step_cap,
                                    per_step_cost_cap=self.per_step_cost_cap, late_policy=self.late_policy,
                                    lookahead=self.lookahead)
        return solve_problem(prob, exact_cost)

    def continuation(self, env, slot: int = 0) -> Schedule:
        """The optimal continuation from the environment's current state (step, remaining budget, what is
        already resolved, counts so far); ``slot``: which week of a ``PMWeekVectorEnv``. Uses the environment's
        own budget, caps and late policy."""
        return solve_problem(problem_from_env(env, slot))

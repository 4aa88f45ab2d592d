"""Exact hindsight dynamic programming for PMWeek-v0 (BudgetPM §3.3, exact under the environment's dynamics).

Set F1 = 2TP / (2TP + FP + FN) is a ratio; Dinkelbach's method maximises it through a sequence of linear
objectives ``(2 - λ)·TP - λ·FP`` with ``λ = n/d`` kept as an exact fraction, i.e. the integer objective
``(2d - n)·TP - n·FP``. Each linear problem is solved exactly:

1. per resource, a chain DP over query times (see :mod:`membudget.teachers.problem`) gives the best value with
   exactly ``k`` queries, for every ``k``;
2. a knapsack over resources joins them under the episode budget (or an exact total cost);
3. the joined schedule ignores the per-step caps ``N_max`` / ``L``; where it violates them, branch and bound
   forbids one of the clashing (resource, step) pairs per branch (every feasible schedule avoids at least one of
   them), re-solving only that resource's chain. The relaxed value bounds every branch, so the first feasible
   schedule popped from the best-first queue is optimal.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from fractions import Fraction

import numba
import numpy as np

from .problem import PMTeacher, Problem, problem_from_env, problem_from_episode

NEG = -(1 << 60)


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


@dataclass
class Schedule:
    """A teacher's schedule and the episode counts it produces."""

    schedule: list
    """``(step, resource)`` pairs in step order."""
    f1: float
    tp: int
    fp: int
    fn: int
    cost: int
    """Cost of the schedule (from ``t0`` on for a continuation)."""
    tp_future: int = field(default=0, repr=False)
    fp_future: int = field(default=0, repr=False)

    def queries_at(self, t: int) -> list:
        return [r for s, r in self.schedule if s == t]


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
            self.m.append(m)
            self.tp.append(tp)
            self.fp.append(fp)
            self.k_max.append(k)
        self.cap = int(sum(k * int(c) for k, c in zip(self.k_max, prob.costs)))
        if budget is not None:
            self.cap = min(self.cap, budget)

    def solve(self, w_tp: int, w_fp: int, exact_cost=None):
        """``(value, schedule as {r: [steps]}, tp, fp, cost)`` of the best feasible schedule, or None."""
        prob = self.prob
        vals = [w_tp * tp - w_fp * fp for tp, fp in zip(self.tp, self.fp)]
        cache = {}

        def chain(r, forb):
            key = (r, forb)
            if key not in cache:
                mask = np.zeros(prob.horizon, dtype=np.bool_)
                mask[list(forb)] = True
                cache[key] = _chain(vals[r], self.m[r], prob.t0, int(prob.last_query[r]), self.k_max[r], mask)
            return cache[key]

        def evaluate(forbidden):
            chains = [chain(r, forbidden.get(r, frozenset())) for r in range(prob.n_resources)]
            K = max(self.k_max) + 1
            values = np.full((prob.n_resources, K), NEG, dtype=np.int64)
            for r, (best, _, _) in enumerate(chains):
                values[r, : best.size] = best
            cap = self.cap if exact_cost is None else int(exact_cost)
            if exact_cost is not None and (exact_cost < 0 or exact_cost > self.cap):
                return None
            g, pick = _knapsack(values, prob.costs, cap)
            last = g[-1]
            if exact_cost is None:
                c = int(np.argmax(last))  # ties: the cheaper schedule
            else:
                c = cap
            if last[c] == NEG:
                return None
            plan = {}
            for j in range(prob.n_resources, 0, -1):
                k = int(pick[j, c])
                c -= k * int(prob.costs[j - 1])
                if k:
                    best, end, par = chains[j - 1]
                    steps, q = [], int(end[k])
                    for kk in range(k, 0, -1):
                        steps.append(q)
                        q = int(par[kk, q])
                    plan[j - 1] = steps[::-1]
            return int(last.max() if exact_cost is None else last[cap]), plan

        def violation(plan):
            by_step = {}
            for r, steps in plan.items():
                for t in steps:
                    by_step.setdefault(t, []).append(r)
            for t in sorted(by_step):
                rs = by_step[t]
                if (prob.n_max is not None and len(rs) > prob.n_max) or \
                        (prob.cost_cap is not None and sum(int(prob.costs[r]) for r in rs) > prob.cost_cap):
                    return t, rs
            return None

        root = evaluate({})
        if root is None:
            return None
        heap = [(-root[0], 0, {}, root[1])]
        seen = {frozenset()}
        counter = 1
        while heap:
            neg_value, _, forbidden, plan = heapq.heappop(heap)
            clash = violation(plan)
            if clash is None:
                return self._result(-neg_value, plan)
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
                    heapq.heappush(heap, (-ev[0], counter, child, ev[1]))
                    counter += 1
        return None

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
        res = solver.solve(2 * d - n, n, exact_cost)
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
        self._check()
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

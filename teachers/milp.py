"""An independent formulation of the hindsight problem as a mixed-integer program (scipy's HiGHS).

It does not use the chain decomposition of :mod:`membudget.teachers.hindsight_dp`: binary ``z[r, t]`` (query
``r`` at ``t``) and ``u[i, q]`` (intention ``i`` is resolved at ``q``, i.e. ``q`` is the first query of its
resource inside ``[start_i, active_until_i]``), candidacy written as "some intention in its window is still
unresolved", the budget and the per-step caps as linear rows. Set F1 is maximised by the same Dinkelbach
iteration over linear objectives. Used to cross-check the DP in tests and as the speed reference in
``python -m membudget.bench.teachers``. HiGHS runs with presolve off and ``mip_rel_gap=0`` (presolve once
returned a non-optimal "optimal" point on a tiny instance).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from .problem import Problem, Schedule


def linear_milp(prob: Problem, w_tp: int, w_fp: int, exact_cost=None):
    """The best schedule for the linear objective ``w_tp·TP - w_fp·FP``: ``(schedule, tp, fp, cost)`` or None."""
    T, R, t0 = prob.horizon, prob.n_resources, prob.t0
    steps = list(range(t0, T))
    zi = {(r, t): j for j, (r, t) in enumerate((r, t) for r in range(R) for t in steps)}
    n = len(zi)
    ui = {}
    for i in range(prob.start.size):
        s = int(prob.start[i])
        for q in range(max(s, t0), min(int(prob.until[i]), T - 1) + 1):
            ui[(i, q)] = n + len(ui)
    n_var = n + len(ui)
    c = np.zeros(n_var)
    rows, cols, vals, lo, hi = [], [], [], [], []
    k = 0

    def row(entries, lb, ub):
        nonlocal k
        for j, v in entries:
            rows.append(k)
            cols.append(j)
            vals.append(v)
        lo.append(lb)
        hi.append(ub)
        k += 1

    for (i, q), j in ui.items():
        r = int(prob.res[i])
        on_time = q <= prob.deadline[i]
        if prob.positive[i]:
            c[j] = w_tp if on_time else (-w_fp if prob.late_execute else 0)
        elif on_time:
            c[j] = -w_fp
        earlier = [zi[(r, qq)] for qq in range(max(int(prob.start[i]), t0), q)]
        row([(j, 1), (zi[(r, q)], -1)], -np.inf, 0)  # u <= z_q
        for jj in earlier:
            row([(j, 1), (jj, 1)], -np.inf, 1)  # u <= 1 - z_q'
        row([(j, 1), (zi[(r, q)], -1)] + [(jj, 1) for jj in earlier], 0, np.inf)  # u >= z_q - sum z_q'
    for (r, t), j in zi.items():
        # candidate: some intention whose candidacy window contains t is unresolved before t
        entries, const = [(j, 1)], 0
        for i in np.flatnonzero((prob.res == r) & (prob.cand_lo <= t) & (prob.cand_hi >= t)):
            const += 1
            entries += [(ui[(i, q)], 1) for q in range(max(int(prob.start[i]), t0), t) if (i, q) in ui]
        row(entries, -np.inf, const)
    cost = [(j, float(prob.costs[r])) for (r, t), j in zi.items()]
    if prob.budget_left is not None:
        row(cost, -np.inf, prob.budget_left)
    if exact_cost is not None:
        row(cost, exact_cost, exact_cost)
    for t in steps:
        if prob.n_max is not None:
            row([(zi[(r, t)], 1) for r in range(R)], -np.inf, prob.n_max)
        if prob.cost_cap is not None:
            row([(zi[(r, t)], float(prob.costs[r])) for r in range(R)], -np.inf, prob.cost_cap)
    A = sparse.csr_array((vals, (rows, cols)), shape=(k, n_var))
    res = milp(-c, integrality=np.ones(n_var), bounds=Bounds(0, 1), constraints=LinearConstraint(A, lo, hi),
               options={"presolve": False, "mip_rel_gap": 0})
    if res.status != 0:
        return None
    x = np.round(res.x).astype(int)
    tp = fp = 0
    for (i, q), j in ui.items():
        if x[j]:
            on_time = q <= prob.deadline[i]
            tp += bool(prob.positive[i] and on_time)
            fp += bool((not prob.positive[i] and on_time) or (prob.positive[i] and not on_time and prob.late_execute))
    schedule = sorted((t, r) for (r, t), j in zi.items() if x[j])
    return schedule, tp, fp, int(sum(prob.costs[r] for _, r in schedule))


def solve_milp(prob: Problem, exact_cost=None) -> Schedule | None:
    """The Set-F1 optimum by Dinkelbach iterations over MILPs."""
    lam, best = Fraction(0), None
    while True:
        res = linear_milp(prob, 2 * lam.denominator - lam.numerator, lam.numerator, exact_cost)
        if res is None:
            return None
        schedule, tp, fp, cost = res
        tp_all, fp_all, fn_all = prob.counts(tp, fp)
        d = 2 * tp_all + fp_all + fn_all
        ratio = Fraction(2 * tp_all, d) if d else Fraction(0)
        if best is not None and ratio <= lam:
            break
        best = Schedule(schedule=schedule, f1=prob.f1(tp, fp), tp=tp_all, fp=fp_all, fn=fn_all, cost=cost,
                        tp_future=tp, fp_future=fp)
        if ratio == lam:
            break
        lam = ratio
    return best

"""Structural quantities of BudgetPM appendix C.3.3 / C.4 over frozen weeks: :func:`headroom` (exact-cost
hindsight DP against current-greedy at the greedy's realized cost) and :func:`open_after_exhaustion` (positive
opportunities still open after the greedy oracle exhausts its cap). The report built from them is
:func:`membudget.studies.budgetpm_reproduction.structure_report` (``python -m membudget.evaluate structure``)."""

from __future__ import annotations

import numpy as np

from membudget.envs.pm.world import KIND_VISIBLE, NEVER, POS

from .current_greedy import CurrentGreedy
from .hindsight_dp import HindsightDP

def headroom(weeks, budget):
    """Per week: greedy F1, exact-cost DP F1 at the greedy's cost, greedy cost and greedy schedule."""
    greedy, dp = CurrentGreedy(budget=budget), HindsightDP(budget=budget)
    rows = []
    for ep in weeks:
        g = greedy.solve(ep)
        d = dp.solve(ep, exact_cost=g.cost)
        rows.append((g.f1, d.f1, g.cost, g))
    return rows


def open_after_exhaustion(ep, greedy, budget, lookahead=2):
    """Positive opportunities (registered hidden positives with an on-time candidate step) that the greedy oracle
    left unhit and that are still catchable after it exhausted its cap, by quarter of their last on-time step."""
    spent, exhausted = 0, None
    for t, r in greedy.schedule:
        spent += int(ep.costs[r])
        if budget - spent < int(ep.costs.min()):
            exhausted = t
            break
    out = np.zeros(4, dtype=int)
    if exhausted is None:
        return out
    hidden = (ep.kind != KIND_VISIBLE) & (ep.polarity == POS) & ep.registered & (ep.onset < NEVER)
    first = np.maximum.reduce([ep.active_from, ep.onset, ep.declared_start - lookahead])
    last = np.minimum.reduce([ep.active_until, ep.deadline, ep.declared_end])
    hit = {(t, r) for t, r in greedy.schedule}
    for i in np.flatnonzero(hidden & (first <= last) & (last > exhausted)):
        caught = any((t, int(ep.resource[i])) in hit for t in range(first[i], last[i] + 1))
        if not caught:
            out[min(3, 4 * int(last[i]) // ep.horizon)] += 1
    return out

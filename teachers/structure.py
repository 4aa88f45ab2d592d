"""Structural results of BudgetPM appendix C.3.3 / C.4 on our world (``python -m membudget.teachers structure``).

- current-greedy Set F1 at B5/B10/B15/B20 on the boundary weeks 9000-9029 beside the published values;
- exact-cost hindsight DP minus current-greedy at the greedy's realized cost, per budget, with paired bootstrap
  95% intervals over complete weeks;
- the same at B10 for opportunity load k=0 and k=3 on the controlled-load test weeks 21000-21239 (paired by base
  seed), and the k=3 minus k=0 difference;
- positive opportunities still open after the greedy oracle exhausts its cap, by episode quarter.
"""

from __future__ import annotations

import numpy as np

from membudget.envs.pm import budget_levels, generate_episode
from membudget.envs.pm.world import KIND_VISIBLE, NEVER, POS

from .current_greedy import CurrentGreedy
from .hindsight_dp import HindsightDP

PUBLISHED_GREEDY = {"B5": 0.6714, "B10": 0.7832, "B15": 0.8305, "B20": 0.8310}
PUBLISHED_HEADROOM = {"B5": 0.00737, "B10": 0.00367, "B15": 0.0, "B20": 0.0}
PUBLISHED_LOAD = {0: 0.0, 3: 0.0065}


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


def report(n_resamples: int = 100_000, n_boundary: int = 30, n_load: int = 240) -> str:
    from membudget.evaluate import bootstrap_ci

    levels = budget_levels()
    boundary = [generate_episode(s) for s in range(9000, 9000 + n_boundary)]
    lines = [f"Boundary weeks 9000-{8999 + n_boundary} (unit costs, N_max = 2, late policy expire)", "",
             f"{'budget':>6} {'greedy F1':>10} {'published':>10} {'cost':>7} | "
             f"{'DP - greedy at exact cost [95% CI]':<38}{'published':>10} | open after exhaustion by quarter"]
    for name in ("B5", "B10", "B15", "B20"):
        rows = headroom(boundary, levels[name])
        g = np.array([r[0] for r in rows])
        diff = np.array([r[1] - r[0] for r in rows])
        mean, lo, hi = bootstrap_ci(diff, n_resamples)
        opened = sum(open_after_exhaustion(ep, r[3], levels[name]) for ep, r in zip(boundary, rows))
        lines.append(f"{name:>6} {g.mean():>10.4f} {PUBLISHED_GREEDY[name]:>10.4f} "
                     f"{np.mean([r[2] for r in rows]):>7.2f} | {mean:+.5f} [{lo:+.5f}, {hi:+.5f}]{'':<10}"
                     f"{PUBLISHED_HEADROOM[name]:>+10.5f} | {'/'.join(str(int(x)) for x in opened)}")
    lines += ["", f"Controlled load at B10, test weeks 21000-{20999 + n_load} (paired by base seed)", ""]
    per_load = {}
    for k in (0, 3):
        weeks = [generate_episode(s, load=k) for s in range(21000, 21000 + n_load)]
        rows = headroom(weeks, levels["B10"])
        per_load[k] = np.array([r[1] - r[0] for r in rows])
        mean, lo, hi = bootstrap_ci(per_load[k], n_resamples)
        lines.append(f"k={k}: DP - greedy at exact cost {mean:+.5f} [{lo:+.5f}, {hi:+.5f}]   (published "
                     f"{PUBLISHED_LOAD[k]:+.4f}); greedy F1 {np.mean([r[0] for r in rows]):.4f}")
    mean, lo, hi = bootstrap_ci(per_load[3] - per_load[0], n_resamples)
    lines.append(f"k=3 minus k=0: {mean:+.5f} [{lo:+.5f}, {hi:+.5f}]")
    return "\n".join(lines)

"""The information-relaxation bound on ``PMWeek-v0``'s online optimum
(:class:`~membudget.teachers.dual_bound.InformationRelaxationBound`) beside the hindsight DP, per week and paired.

For each budget: the DP's mean Set F1 (the bound every online policy already had), the bound without penalty
(the same relaxation's split of Set F1 and its dropped per-step caps, at or above the DP), the bound with the
penalty, its paired difference to the DP with a percentile bootstrap 95% interval over the weeks (2,000
resamples), the weeks where it lies below the DP and the seconds per week. Each line is a mean over weeks: only
that mean bounds the online optimum's mean (a week's bound may lie below what a policy scores on it).

``python -m membudget.bench.dual_bound [--weeks 8000-8029,9000-9029] [--budgets B5 B10 B20] [--c-tp 0.0075]
[--c-fp -0.005]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from membudget.envs.validation import number_flag, parse_seeds, seeds_flag
from membudget.studies.cli import plain
from membudget.teachers.dual_bound import DEFAULT_C_FP, DEFAULT_C_TP


def week_bounds(weeks, budget: str, c_tp: float, c_fp: float) -> dict:
    """Per week: the DP's Set F1, the bound without and with the penalty, and the seconds of both bounds."""
    from membudget.envs.pm import budget_levels, generate_episode
    from membudget.teachers import HindsightDP
    from membudget.teachers.dual_bound import InformationRelaxationBound

    cap = budget_levels()[budget]
    free = InformationRelaxationBound(budget=cap, c_tp=0.0, c_fp=0.0).fit()
    penalised = InformationRelaxationBound(budget=cap, c_tp=c_tp, c_fp=c_fp).fit()
    out = {"dp": [], "free": [], "bound": [], "secs": []}
    for w in weeks:
        ep = generate_episode(w)
        out["dp"].append(HindsightDP(budget=cap, per_step_cap=2).solve(ep).f1)
        t0 = time.perf_counter()
        out["free"].append(free.solve(ep).value)
        out["bound"].append(penalised.solve(ep).value)
        out["secs"].append(time.perf_counter() - t0)
    return {k: np.array(v) for k, v in out.items()}


def main(argv=None):
    from membudget.envs.pm import budget_levels
    from membudget.studies.protocol import bootstrap_ci, machine_line

    p = argparse.ArgumentParser(prog="python -m membudget.bench.dual_bound", description=plain(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weeks", type=seeds_flag("--weeks"), default=parse_seeds("8000-8029,9000-9029", "--weeks"))
    p.add_argument("--budgets", nargs="+", choices=sorted(budget_levels()), default=["B5", "B10", "B20"],
                   metavar="BUDGET")
    p.add_argument("--c-tp", type=number_flag(), default=DEFAULT_C_TP, help="the penalty's weight on tasks")
    p.add_argument("--c-fp", type=number_flag(), default=DEFAULT_C_FP, help="the penalty's weight on lures")
    a = p.parse_args(argv)
    print(f"weeks {a.weeks[0]}..{a.weeks[-1]} ({len(a.weeks)}), c_tp {a.c_tp}, c_fp {a.c_fp}")
    print("| budget | hindsight DP | bound without penalty | bound | bound - DP (95% interval) | weeks below the DP "
          "| s per week, both bounds (median) |")
    print("|---|---|---|---|---|---|---|")
    for b in a.budgets:
        r = week_bounds(a.weeks, b, a.c_tp, a.c_fp)
        d = r["bound"] - r["dp"]
        _, lo, hi = bootstrap_ci(d, n_resamples=2000)
        print(f"| {b} | {r['dp'].mean():.4f} | {r['free'].mean():.4f} | {r['bound'].mean():.4f} | "
              f"{d.mean():+.4f} [{lo:+.4f}, {hi:+.4f}] | {int((d < -1e-9).sum())} of {d.size} | "
              f"{np.median(r['secs']):.2f} |")
    print(machine_line())


if __name__ == "__main__":
    main()

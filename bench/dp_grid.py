"""Worst case of the hindsight DP over a grid of settings, with the HiGHS MILP as the anchor of the same run.

``python -m membudget.bench.dp_grid [--quick]`` solves every week of the grid — weeks 9000-9009 × cost profile
unit / mild / skewed × ``N_max`` 1 / 2 / none × per-step cost cap none / 1 / 2 / 4 / 8 × opportunity load 0 / 3 ×
budget B5 / B20 / none (levels of the week's cost profile) × late policy expire / execute — with
:class:`~membudget.teachers.HindsightDP` and prints the median, p99 and max milliseconds per week (overall and per
cost profile), the slowest cells, how often the DP handed a linear problem to the MILP guard, and the process's
peak resident memory (``getrusage``; also its growth over the grid). Then both solvers take the default setting
(unit prices, load 0, B10, ``N_max`` 2, no cost cap, late policy expire) on the same weeks, interleaved, and the
script prints the MILP/DP ratio of medians and the grid's figures as multiples of the MILP's default median.
Goals: grid median <= 5 ms and max <= 250 ms per week, peak memory <= 300 MB, DP >= 10x the MILP on the defaults.
``--quick``: weeks 9000-9001 only. ``--beyond``: also the same weeks at opportunity load 8 (outside the grid),
skewed prices, B20, ``N_max`` 1 — a setting where the MILP guard takes over.
"""

from __future__ import annotations

import argparse
import itertools
import resource
import time

import numpy as np

from membudget.studies.cli import plain

PROFILES = ("unit", "mild", "skewed")
N_MAX = (1, 2, None)
COST_CAPS = (None, 1, 2, 4, 8)
LOADS = (0, 3)
BUDGETS = ("B5", "B20", None)
LATE = ("expire", "execute")


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def grid(seeds):
    """``[(cell, seed, seconds)]`` over the whole grid and the number of MILP hand-overs."""
    from membudget.envs.pm import budget_levels, generate_episode
    from membudget.teachers import HindsightDP

    rows, handed = [], 0
    for profile, load in itertools.product(PROFILES, LOADS):
        levels = budget_levels(cost_profile=profile)
        weeks = [generate_episode(s, cost_profile=profile, load=load) for s in seeds]
        for n_max, cost_cap, budget, late in itertools.product(N_MAX, COST_CAPS, BUDGETS, LATE):
            dp = HindsightDP(budget=None if budget is None else levels[budget], per_step_cap=n_max,
                             per_step_cost_cap=cost_cap, late_policy=late)
            cell = (profile, load, n_max, cost_cap, budget, late)
            for s, ep in zip(seeds, weeks):
                start = time.perf_counter()
                dp.solve(ep)
                rows.append((cell, s, time.perf_counter() - start))
                handed += dp.stats_.milp_handovers
    return rows, handed


def defaults(seeds, repeats=3):
    """DP and MILP seconds per week on the default setting, interleaved; the DP's best of ``repeats``."""
    from membudget.envs.pm import budget_levels, generate_episode
    from membudget.teachers import HindsightDP
    from membudget.teachers.milp import solve_milp
    from membudget.teachers.problem import problem_from_episode

    kw = {"budget": budget_levels()["B10"], "per_step_cap": 2, "per_step_cost_cap": None, "late_policy": "expire"}
    dp, t_dp, t_milp = HindsightDP(**kw), [], []
    for s in seeds:
        ep = generate_episode(s)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            dp.solve(ep)
            times.append(time.perf_counter() - start)
        t_dp.append(min(times))
        start = time.perf_counter()
        solve_milp(problem_from_episode(ep, lookahead=2, **kw))
        t_milp.append(time.perf_counter() - start)
    return np.array(t_dp), np.array(t_milp)


def _warm_up():
    """Loads or compiles every numba kernel the DP uses (the Lagrangian ones on a hard cell)."""
    from membudget.envs.pm import generate_episode
    from membudget.teachers import HindsightDP

    HindsightDP(budget=10).solve(generate_episode(1))
    HindsightDP(budget=None).solve(generate_episode(1))
    HindsightDP(budget=None, per_step_cap=None, per_step_cost_cap=2, late_policy="execute").solve(
        generate_episode(9003, cost_profile="mild", load=3))
    HindsightDP(budget=102, per_step_cap=None, per_step_cost_cap=2, late_policy="execute").solve(
        generate_episode(9003, cost_profile="mild", load=3))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.dp_grid", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="weeks 9000-9001 instead of 9000-9009")
    parser.add_argument("--beyond", action="store_true", help="also load 8, skewed prices, B20, N_max 1")
    args = parser.parse_args(argv)
    seeds = list(range(9000, 9002 if args.quick else 9010))

    _warm_up()
    rss0 = _rss_mb()
    rows, handed = grid(seeds)
    rss1 = _rss_mb()
    t_dp, t_milp = defaults(seeds)
    ms = np.array([t for _, _, t in rows]) * 1e3
    milp_ms = float(np.median(t_milp)) * 1e3

    print(f"grid: weeks {seeds[0]}-{seeds[-1]}, {len(rows)} solves ({len(rows) // len(seeds)} settings)")
    print(f"{'':>8} {'median ms':>10} {'p99 ms':>8} {'max ms':>8}")
    for name, sel in [("all", slice(None))] + [(p, np.array([c[0] == p for c, _, _ in rows])) for p in PROFILES]:
        x = ms[sel]
        print(f"{name:>8} {np.median(x):>10.2f} {np.percentile(x, 99):>8.1f} {x.max():>8.1f}")
    print("slowest weeks (profile, load, N_max, cost cap, budget, late policy; seed; ms):")
    for i in np.argsort(-ms)[:5]:
        print(f"  {rows[i][0]} {rows[i][1]} {ms[i]:.1f}")
    print(f"weeks over 250 ms: {int(np.sum(ms > 250))}; linear problems handed to the MILP guard: {handed}")
    print(f"peak RSS {rss1:.0f} MB (after warm-up {rss0:.0f} MB; growth over the grid {rss1 - rss0:.0f} MB)")
    ratio = np.median(t_milp) / np.median(t_dp)
    print(f"default setting (unit, load 0, B10, N_max 2, no cost cap, expire): DP median "
          f"{np.median(t_dp) * 1e3:.2f} ms, MILP median {milp_ms:.1f} ms, MILP/DP {ratio:.1f}x (goal >= 10x)")
    print(f"grid as multiples of the MILP's default median: median {np.median(ms) / milp_ms:.3f}x, "
          f"max {ms.max() / milp_ms:.2f}x")
    print(f"goals: median <= 5 ms {'met' if np.median(ms) <= 5 else 'NOT met'}; max <= 250 ms "
          f"{'met' if ms.max() <= 250 else 'NOT met'}; peak memory <= 300 MB {'met' if rss1 <= 300 else 'NOT met'}; "
          f">= 10x MILP {'met' if ratio >= 10 else 'NOT met'}")
    if args.beyond:
        beyond(seeds)


def beyond(seeds):
    """Seconds per week at load 8, skewed prices, B20, ``N_max`` 1 (outside the grid), with MILP hand-overs."""
    from membudget.envs.pm import budget_levels, generate_episode
    from membudget.teachers import HindsightDP

    dp = HindsightDP(budget=budget_levels(cost_profile="skewed")["B20"], per_step_cap=1)
    handed, times = 0, []
    for s in seeds:
        ep = generate_episode(s, cost_profile="skewed", load=8)
        start = time.perf_counter()
        dp.solve(ep)
        times.append(time.perf_counter() - start)
        handed += dp.stats_.milp_handovers
    print(f"beyond the grid (load 8, skewed, B20, N_max 1): median {np.median(times) * 1e3:.0f} ms, max "
          f"{max(times) * 1e3:.0f} ms per week; linear problems handed to the MILP guard: "
          f"{handed}")


if __name__ == "__main__":
    main()

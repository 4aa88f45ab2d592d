"""Speed of the hindsight DP against the HiGHS MILP on the same default weeks.

``python -m membudget.bench.teachers`` prints median and max seconds per week at B10 and B20 for both late
policies, per continuation (from a random mid-week state), and the MILP's times on the same weeks with the
speed ratio. Targets (default late policy): median <= 20 ms per week and >= 5x faster than the MILP.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from membudget.envs.validation import int_flag
from membudget.studies.cli import plain


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.teachers", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--first-seed", type=int_flag(0), default=9000)
    parser.add_argument("--n-weeks", type=int_flag(1), default=30)
    parser.add_argument("--milp-weeks", type=int_flag(0), default=10, help="weeks also solved by the MILP")
    args = parser.parse_args(argv)

    from membudget.envs.pm import PMWeekEnv, budget_levels, generate_episode
    from membudget.teachers import HindsightDP
    from membudget.teachers.milp import solve_milp
    from membudget.teachers.problem import problem_from_episode

    levels = budget_levels()
    weeks = [generate_episode(s) for s in range(args.first_seed, args.first_seed + args.n_weeks)]
    HindsightDP(budget=10).solve(weeks[0])  # JIT warm-up (cached on disk after the first run)
    rng = np.random.default_rng(0)
    print(f"weeks {args.first_seed}-{args.first_seed + args.n_weeks - 1}; MILP on the first {args.milp_weeks}")
    print(f"{'budget':>6} {'late policy':>11} | {'DP median ms':>12} {'DP max ms':>10} | {'cont. median ms':>15} "
          f"{'cont. max ms':>12} | {'MILP median ms':>14} {'MILP/DP':>8}")
    for name in ("B10", "B20"):
        budget = levels[name]
        for late in ("expire", "execute"):
            dp = HindsightDP(budget=budget, late_policy=late)
            times = [_timed(dp.solve, ep)[0] for ep in weeks]
            cont = []
            env = PMWeekEnv(budget=budget, late_policy=late)
            for ep in weeks:
                obs, _ = env.reset(options={"episode": ep})
                for _ in range(int(rng.integers(0, ep.horizon))):
                    obs, *_ = env.step(obs["mask"] * rng.integers(0, 2, obs["mask"].size))
                cont.append(_timed(dp.continuation, env)[0])
            kw = dict(budget=budget, per_step_cap=2, per_step_cost_cap=None, late_policy=late, lookahead=2)
            milp = [_timed(solve_milp, problem_from_episode(ep, **kw))[0] for ep in weeks[: args.milp_weeks]]
            ratio = np.median(milp) / np.median(times[: args.milp_weeks])
            print(f"{name:>6} {late:>11} | {np.median(times) * 1e3:>12.2f} {max(times) * 1e3:>10.2f} | "
                  f"{np.median(cont) * 1e3:>15.2f} {max(cont) * 1e3:>12.2f} | {np.median(milp) * 1e3:>14.1f} "
                  f"{ratio:>7.0f}x")


if __name__ == "__main__":
    main()

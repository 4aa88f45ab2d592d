"""Overhead of the :class:`~membudget.wrappers.HindsightTeacher` wrapper on ``PMWeek-v0``, as a ratio to the
unwrapped environment in the same run.

Both play the same weeks with the same actions — a student that follows the teacher's label with probability
``--follow`` and otherwise proposes random candidates (so the wrapper re-solves the DP continuation whenever the
student leaves the plan) — and every step is timed. Reports the median and maximum per-step time of each, the
wrapper's overhead per step (median and max of wrapped − unwrapped on the same step) and DP solves per week.

``python -m membudget.bench.teacher [--weeks N] [--follow P]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from membudget.envs.validation import int_flag
from membudget.studies.cli import plain


def run(weeks, follow: float, budget="B10"):
    from membudget.envs.pm import PMWeekEnv
    from membudget.wrappers import TEACHER_KEY, HindsightTeacher

    plain, wrapped = PMWeekEnv(budget=budget, action_mode="scores"), HindsightTeacher(
        PMWeekEnv(budget=budget, action_mode="scores"))
    rng = np.random.default_rng(0)
    t_plain, t_wrapped = [], []
    for w in weeks:
        t0 = time.perf_counter()
        obs, _ = plain.reset(seed=int(w))
        t1 = time.perf_counter()
        _, info = wrapped.reset(seed=int(w))
        t2 = time.perf_counter()
        t_plain.append(t1 - t0)
        t_wrapped.append(t2 - t1)
        done = False
        while not done:
            if rng.uniform() < follow:
                a = info[TEACHER_KEY]
            else:
                a = np.where(obs["mask"] > 0, rng.uniform(-1, 1, obs["mask"].size), -1).astype(np.float32)
            t0 = time.perf_counter()
            obs, _, done, _, _ = plain.step(a)
            t1 = time.perf_counter()
            _, _, _, _, info = wrapped.step(a)
            t2 = time.perf_counter()
            t_plain.append(t1 - t0)
            t_wrapped.append(t2 - t1)
    return np.array(t_plain), np.array(t_wrapped), wrapped.teacher_solves / len(weeks)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.teacher", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weeks", type=int_flag(1), default=30, help="weeks 8000 onwards")
    parser.add_argument("--follow", type=float, default=0.7, help="probability the student takes the label")
    args = parser.parse_args(argv)
    run(range(7000, 7002), args.follow)  # compile and warm up
    unwrapped, wrapped, solves = run(range(8000, 8000 + args.weeks), args.follow)
    over = (wrapped - unwrapped) * 1e3
    print(f"{args.weeks} weeks, student follows the label with probability {args.follow}; per step (reset included):")
    print(f"  unwrapped  median {np.median(unwrapped) * 1e3:.3f} ms   max {unwrapped.max() * 1e3:.2f} ms")
    print(f"  wrapped    median {np.median(wrapped) * 1e3:.3f} ms   max {wrapped.max() * 1e3:.2f} ms   "
          f"(ratio of medians {np.median(wrapped) / np.median(unwrapped):.1f}x)")
    print(f"  overhead   median {np.median(over):.3f} ms   max {over.max():.2f} ms   (goal: median <= 1 ms, "
          f"max <= 20 ms); DP solves per week {solves:.1f}")
    return over


if __name__ == "__main__":
    main()

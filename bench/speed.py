"""Stepping speed of the single PMWeek-v0 environment as a ratio against CartPole-v1 measured in the same process
(the native vector env has its own script, :mod:`membudget.bench.vector`).

``python -m membudget.bench.speed`` prints, for several interleaved rounds, steps/s of the single environment
(unwrapped) against gymnasium's ``CartPoleEnv`` (unwrapped), target >= 0.35x (autoresets included in both), the
reset time per week (generation + loading), and the median ratio over rounds. Actions are drawn uniformly at
random in advance.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from membudget.envs.validation import int_flag
from membudget.studies.cli import plain


def _single_rate(env, actions, seconds):
    env.reset(seed=0)
    n, i, start = 0, 0, time.perf_counter()
    while True:
        for _ in range(1000):
            _, _, term, trunc, _ = env.step(actions[i])
            i = (i + 1) % len(actions)
            if term or trunc:
                env.reset()
        n += 1000
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.speed", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int_flag(1), default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per environment per round")
    args = parser.parse_args(argv)

    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    from membudget.envs.pm import PMWeekEnv

    rng = np.random.default_rng(0)
    pm, cp = PMWeekEnv(), CartPoleEnv()
    n_res = pm.action_space.n
    pm_actions = rng.integers(0, 2, (4096, n_res)).astype(np.int8)
    cp_actions = rng.integers(0, 2, 4096)
    _single_rate(pm, pm_actions, 0.2)  # warm-up (JIT compilation is cached on disk after the first run)

    single = []
    print(f"{'round':>5} {'CartPole':>12} {'PMWeek':>12} {'ratio':>7} | {'reset ms/week':>13}")
    for r in range(args.rounds):
        c1 = _single_rate(cp, cp_actions, args.seconds)
        p1 = _single_rate(pm, pm_actions, args.seconds)
        start = time.perf_counter()
        for s in range(200):
            pm.reset(seed=s)
        reset_ms = (time.perf_counter() - start) / 200 * 1e3
        single.append(p1 / c1)
        print(f"{r:>5} {c1:>12,.0f} {p1:>12,.0f} {p1 / c1:>7.3f} | {reset_ms:>13.3f}")
    print(f"\nmedian ratio, single env vs CartPole-v1: {np.median(single):.3f}  (target >= 0.35)")
    return np.median(single)


if __name__ == "__main__":
    main()

"""Stepping speed of the native PMWeek-v0 vector env as a ratio against gymnasium's CartPole vector env, measured
in the same process, with where a PMWeek vector step spends its time.

``python -m membudget.bench.vector`` prints, for several interleaved rounds, week-steps/s of
:class:`~membudget.envs.pm.PMWeekVectorEnv` and env-steps/s of ``CartPoleVectorEnv``, both with ``--num-envs``
(default 1024) sub-environments, random actions drawn in advance and autoresets included (target ratio >= 0.06),
and per PMWeek vector step the milliseconds spent in the step-and-observe kernel, in drawing and loading the
weeks that start at autoreset, and in the rest (checking the action, building the returned arrays and infos).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from .speed import _vector_rate


class _Timed:
    """A callable that adds the time spent in ``fn`` to ``self.seconds``."""

    def __init__(self, fn):
        self.fn, self.seconds = fn, 0.0

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def _breakdown(env, actions, seconds):
    """Week-steps/s of ``env`` and its time per step (ms): in all, in the kernel and in autoreset draws."""
    core = env.unwrapped._core
    env.reset(seed=0)
    kernel, draws = _Timed(core.advance), _Timed(core.draw_into)
    core.advance, core.draw_into = kernel, draws
    try:
        n, i, start = 0, 0, time.perf_counter()
        while True:
            for _ in range(10):
                env.step(actions[i])
                i = (i + 1) % len(actions)
            n += 10
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
    finally:
        del core.advance, core.draw_into
    return n * env.num_envs / elapsed, 1e3 * elapsed / n, 1e3 * kernel.seconds / n, 1e3 * draws.seconds / n


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.vector", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per environment per round")
    parser.add_argument("--num-envs", type=int, default=1024)
    args = parser.parse_args(argv)

    from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

    from membudget.envs.pm import PMWeekVectorEnv

    rng = np.random.default_rng(0)
    pmv, cpv = PMWeekVectorEnv(num_envs=args.num_envs), CartPoleVectorEnv(num_envs=args.num_envs)
    pm_actions = rng.integers(0, 2, (64, args.num_envs, pmv.single_action_space.n)).astype(np.int8)
    cp_actions = rng.integers(0, 2, (64, args.num_envs))
    _vector_rate(pmv, pm_actions, 0.2)  # warm-up (JIT compilation is cached on disk after the first run)
    _vector_rate(cpv, cp_actions, 0.2)

    ratios = []
    print(f"{'round':>5} {'CartPole vec':>13} {'PMWeek vec':>12} {'ratio':>7} | ms per PMWeek vector step: "
          f"{'kernel':>7} {'autoreset':>9} {'rest':>6} {'total':>6}")
    for r in range(args.rounds):
        cp = _vector_rate(cpv, cp_actions, args.seconds)
        pm, total_ms, kernel_ms, draw_ms = _breakdown(pmv, pm_actions, args.seconds)
        ratios.append(pm / cp)
        print(f"{r:>5} {cp:>13,.0f} {pm:>12,.0f} {pm / cp:>7.3f} | {'':>27}{kernel_ms:>7.3f} {draw_ms:>9.3f} "
              f"{total_ms - kernel_ms - draw_ms:>6.3f} {total_ms:>6.3f}")
    print(f"\nmedian ratio, vector env ({args.num_envs}) vs CartPole vector env: {np.median(ratios):.3f}  "
          f"(target >= 0.06)")
    return float(np.median(ratios))


if __name__ == "__main__":
    main()

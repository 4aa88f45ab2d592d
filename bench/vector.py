"""Stepping speed of the native PMWeek-v0 vector env as a ratio against gymnasium's CartPole vector env, measured
in the same process, with where a PMWeek vector step spends its time.

``python -m membudget.bench.vector`` prints, for several rounds, week-steps/s of
:class:`~membudget.envs.pm.PMWeekVectorEnv` and env-steps/s of ``CartPoleVectorEnv``, both with ``--num-envs``
(default 1024) sub-environments, random actions drawn in advance and autoresets included (target ratio >= 0.06),
and per PMWeek vector step the milliseconds spent in the step-and-observe kernel, in drawing and loading the
weeks that start at autoresets and in the rest (checking the action, building the returned arrays and infos).
Within a round the two environments take turns in ``--slices`` short slices, so that both meet the same load
on a shared machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from membudget.envs.validation import int_flag
from membudget.studies.cli import plain


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


class _Stepper:
    """Steps a vector env with actions drawn in advance, adding up steps and seconds over calls of :meth:`run`."""

    def __init__(self, env, actions):
        self.env, self.actions, self.i, self.steps, self.seconds = env, actions, 0, 0, 0.0
        env.reset(seed=0)

    def run(self, seconds):
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(10):
                self.env.step(self.actions[self.i])
                self.i = (self.i + 1) % len(self.actions)
            self.steps += 10
        self.seconds += time.perf_counter() - start

    @property
    def rate(self):
        return self.steps * self.env.num_envs / self.seconds


def _round(pmv, cpv, pm_actions, cp_actions, seconds, slices):
    """One round: (CartPole rate, PMWeek rate, PMWeek ms per step in all, in the kernel, in autoreset draws)."""
    cp, pm = _Stepper(cpv, cp_actions), _Stepper(pmv, pm_actions)
    core = pmv.unwrapped.core
    kernel, draws = _Timed(core.advance), _Timed(core.draw_into)
    core.advance, core.draw_into = kernel, draws
    try:
        for _ in range(slices):
            cp.run(seconds / slices)
            pm.run(seconds / slices)
    finally:
        del core.advance, core.draw_into
    per_step = 1e3 / pm.steps
    return cp.rate, pm.rate, pm.seconds * per_step, kernel.seconds * per_step, draws.seconds * per_step


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.vector", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int_flag(1), default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per environment per round")
    parser.add_argument("--slices", type=int_flag(1), default=10, help="turns per environment per round")
    parser.add_argument("--num-envs", type=int_flag(1), default=1024)
    args = parser.parse_args(argv)

    from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

    from membudget.envs.pm import PMWeekVectorEnv

    rng = np.random.default_rng(0)
    pmv, cpv = PMWeekVectorEnv(num_envs=args.num_envs), CartPoleVectorEnv(num_envs=args.num_envs)
    pm_actions = rng.integers(0, 2, (64, args.num_envs, pmv.single_action_space.n)).astype(np.int8)
    cp_actions = rng.integers(0, 2, (64, args.num_envs))
    _round(pmv, cpv, pm_actions, cp_actions, 0.4, 2)  # warm-up (JIT compilation is cached on disk after a first run)

    ratios = []
    print(f"{'round':>5} {'CartPole vec':>13} {'PMWeek vec':>12} {'ratio':>7} | ms per PMWeek vector step: "
          f"{'kernel':>7} {'autoreset':>9} {'rest':>6} {'total':>6}")
    for r in range(args.rounds):
        cp, pm, total_ms, kernel_ms, draw_ms = _round(pmv, cpv, pm_actions, cp_actions, args.seconds, args.slices)
        ratios.append(pm / cp)
        print(f"{r:>5} {cp:>13,.0f} {pm:>12,.0f} {pm / cp:>7.3f} | {'':>27}{kernel_ms:>7.3f} {draw_ms:>9.3f} "
              f"{total_ms - kernel_ms - draw_ms:>6.3f} {total_ms:>6.3f}")
    print(f"\nmedian ratio, vector env ({args.num_envs}) vs CartPole vector env: {np.median(ratios):.3f}  "
          f"(target >= 0.06)")
    return float(np.median(ratios))


if __name__ == "__main__":
    main()

"""Stepping speed of ConversationPM-v1 (single environment, unwrapped, resets included) against gymnasium's
``CartPoleEnv`` measured in the same process, interleaved over rounds; target >= 0.3x. The earlier world
ConversationPM-v0 and PMWeek-v0's single environment (the same executor and controller kernels) are measured beside
it.
``python -m membudget.bench.conversation``."""

from __future__ import annotations

import argparse

import numpy as np

from membudget.bench.speed import _single_rate
from membudget.envs.validation import int_flag
from membudget.studies.cli import plain


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.conversation", description=plain(__doc__))
    parser.add_argument("--rounds", type=int_flag(1), default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per environment per round")
    args = parser.parse_args(argv)

    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    from membudget.envs.conversation import ConversationPMEnv, ConversationPMv0Env
    from membudget.envs.pm import PMWeekEnv

    rng = np.random.default_rng(0)
    conv, conv0, pm, cp = ConversationPMEnv(), ConversationPMv0Env(), PMWeekEnv(), CartPoleEnv()
    conv_actions = rng.integers(0, 2, (4096, conv.action_space.n)).astype(np.int8)
    pm_actions = rng.integers(0, 2, (4096, pm.action_space.n)).astype(np.int8)
    cp_actions = rng.integers(0, 2, 4096)
    _single_rate(conv, conv_actions, 0.2)  # warm-up (JIT compilation is cached on disk after the first run)
    _single_rate(conv0, conv_actions, 0.2)
    _single_rate(pm, pm_actions, 0.2)
    ratios, v0_ratios, pm_ratios = [], [], []
    print(f"{'round':>5} {'CartPole':>12} {'Conversation':>13} {'ratio':>7} {'v0 ratio':>9} {'PMWeek ratio':>13}")
    for r in range(args.rounds):
        c = _single_rate(cp, cp_actions, args.seconds)
        p = _single_rate(conv, conv_actions, args.seconds)
        p0 = _single_rate(conv0, conv_actions, args.seconds)
        w = _single_rate(pm, pm_actions, args.seconds)
        ratios.append(p / c)
        v0_ratios.append(p0 / c)
        pm_ratios.append(w / c)
        print(f"{r:>5} {c:>12,.0f} {p:>13,.0f} {p / c:>7.3f} {p0 / c:>9.3f} {w / c:>13.3f}")
    print(f"\nmedian ratio vs CartPole-v1: ConversationPM-v1 {np.median(ratios):.3f} (target >= 0.3), "
          f"ConversationPM-v0 {np.median(v0_ratios):.3f}, PMWeek-v0 {np.median(pm_ratios):.3f}")
    return float(np.median(ratios))


if __name__ == "__main__":
    main()

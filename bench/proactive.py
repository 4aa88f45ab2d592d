"""Speed of ProactiveStream-v0 as ratios against CartPole-v1 measured in the same process.

``python -m membudget.bench.proactive`` prints, per scope and for several interleaved rounds, steps/s of the
unwrapped environment under uniformly random actions (resets included: a reset draws the stream, builds its memory
trace and precomputes every event's features) against gymnasium's unwrapped ``CartPoleEnv``, the reset time per
stream split into generation and memory trace, and the median over rounds. The issue sets no speed target; the
figures say what a training run costs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from membudget.bench.speed import _single_rate


def _reset_ms(scope, n=10):
    from membudget.envs.proactive import SCOPES, ProactiveStreamEnv, generate_stream
    from membudget.envs.proactive.memory import memory_trace

    env = ProactiveStreamEnv(scope=scope)
    start = time.perf_counter()
    for s in range(n):
        env.reset(seed=s)
    total = (time.perf_counter() - start) / n
    start = time.perf_counter()
    streams = [generate_stream(s, scope=scope) for s in range(n)]
    generation = (time.perf_counter() - start) / n
    start = time.perf_counter()
    for stream in streams:
        memory_trace(stream, SCOPES[scope])
    trace = (time.perf_counter() - start) / n
    return 1e3 * total, 1e3 * generation, 1e3 * trace


def main(argv=None):
    from gymnasium.envs.classic_control import CartPoleEnv

    from membudget.envs.proactive import ProactiveStreamEnv

    parser = argparse.ArgumentParser(prog="python -m membudget.bench.proactive", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per rate")
    args = parser.parse_args(argv)
    actions = np.random.default_rng(0).integers(0, 3, size=100_000)
    cart_actions = np.random.default_rng(0).integers(0, 2, size=100_000)
    for scope in ("sports", "home", "code"):
        ratios = []
        for r in range(args.rounds):
            cart = _single_rate(CartPoleEnv(), cart_actions, args.seconds)
            ours = _single_rate(ProactiveStreamEnv(scope=scope), actions, args.seconds)
            ratios.append(ours / cart)
            print(f"{scope:6s} round {r}: {ours:9.0f} steps/s vs CartPole {cart:9.0f} -> {ours / cart:.3f}x")
        total, generation, trace = _reset_ms(scope)
        print(f"{scope:6s} median {np.median(ratios):.3f}x CartPole-v1; reset {total:.1f} ms per stream "
              f"(generation {generation:.1f} ms, memory trace {trace:.1f} ms, features the rest)")


if __name__ == "__main__":
    main()

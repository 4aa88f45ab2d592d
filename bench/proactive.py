"""Speed of ProactiveStream-v0 (``--env-version 1``: v1) as ratios against CartPole-v1 measured in the same process.

``python -m membudget.bench.proactive`` prints, per scope and for several interleaved rounds, steps/s of the
unwrapped environment under uniformly random actions (resets included: a reset draws the stream and builds the memory
trace and the features of its first week, the steps the rest as the episode reaches it) against gymnasium's
unwrapped ``CartPoleEnv`` (target >= 0.3x), the reset time per stream at the default length (target <= 5 ms), the
whole stream's generation (with the labels) and memory trace built at once, and a whole episode (reset and every
step under random actions), and the medians over rounds; then the reset and episode times at several stream lengths
(``--days``): the episode time grows linearly in the days. Reset and episode times are CPU time of this process
(``time.process_time``), so that other load on the machine does not inflate them; the step rates are wall-clock
rates, as CartPole's. A warm-up reset per scope compiles (or loads) the numba kernels first.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from membudget.bench.speed import _single_rate
from membudget.envs.validation import int_flag
from membudget.studies.cli import plain

SCOPES = ("sports", "home", "code")


def _env_class(version):
    from membudget.envs.proactive import ProactiveStreamEnv
    from membudget.envs.proactive.env_v1 import ProactiveStreamV1Env

    return ProactiveStreamV1Env if version == 1 else ProactiveStreamEnv


def _reset_ms(scope, n_days=None, n=10, actions=None, version=0):
    """CPU milliseconds per reset (seeds 0 .. n − 1); per stream for its generation and its whole memory trace;
    per episode (reset and steps under ``actions``, cycled); on ProactiveStream-v``version``."""
    from membudget.envs.proactive.memory import memory_trace

    cls = _env_class(version)
    env = cls(scope=scope, n_days=n_days)
    start = time.process_time()
    for s in range(n):
        env.reset(seed=s)
    total = (time.process_time() - start) / n
    start = time.process_time()
    streams = [cls._generate(s, scope=scope, n_days=n_days) for s in range(n)]
    generation = (time.process_time() - start) / n
    start = time.process_time()
    for stream in streams:
        memory_trace(stream, env.scope_spec, **cls._memory_options)
    trace = (time.process_time() - start) / n
    actions = np.random.default_rng(0).integers(0, 3, size=1000).tolist() if actions is None else actions
    start, i = time.process_time(), 0
    for s in range(n):
        env.reset(seed=s)
        done = False
        while not done:
            done = env.step(actions[i % len(actions)])[2]
            i += 1
    episode = (time.process_time() - start) / n
    return 1e3 * total, 1e3 * generation, 1e3 * trace, 1e3 * episode


def main(argv=None):
    from gymnasium.envs.classic_control import CartPoleEnv
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.proactive", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int_flag(1), default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per rate")
    parser.add_argument("--days", type=int_flag(14), nargs="*", default=[14, 56, 182, 365, 730],
                        help="stream lengths of the reset- and episode-time lines (empty: skip them)")
    parser.add_argument("--env-version", type=int, choices=(0, 1), default=0, help="ProactiveStream version")
    args = parser.parse_args(argv)
    env_class, version = _env_class(args.env_version), args.env_version
    actions = np.random.default_rng(0).integers(0, 3, size=100_000)
    cart_actions = np.random.default_rng(0).integers(0, 2, size=100_000)
    for scope in SCOPES:
        env_class(scope=scope).reset(seed=0)
    ratios, resets = {s: [] for s in SCOPES}, {s: [] for s in SCOPES}
    print(f"{'scope':6s} {'round':>5} {'steps/s':>9} {'CartPole':>9} {'ratio':>6} | {'reset ms':>8} "
          f"{'generation':>10} {'memory':>7} {'episode ms':>10}")
    for r in range(args.rounds):
        for scope in SCOPES:
            cart = _single_rate(CartPoleEnv(), cart_actions, args.seconds)
            ours = _single_rate(env_class(scope=scope), actions, args.seconds)
            total, generation, trace, episode = _reset_ms(scope, version=version)
            ratios[scope].append(ours / cart)
            resets[scope].append(total)
            print(f"{scope:6s} {r:>5} {ours:>9.0f} {cart:>9.0f} {ours / cart:>6.3f} | {total:>8.2f} "
                  f"{generation:>10.2f} {trace:>7.2f} {episode:>10.2f}")
    for scope in SCOPES:
        ratio, reset = np.median(ratios[scope]), np.median(resets[scope])
        print(f"{scope:6s} median {ratio:.3f}x CartPole-v1 (target >= 0.3x: {'met' if ratio >= 0.3 else 'NOT met'}); "
              f"reset {reset:.2f} ms per stream (target <= 5 ms: {'met' if reset <= 5 else 'NOT met'})")
    if args.days:
        print("reset ms, episode ms (episode ms per day) at n_days = " + ", ".join(map(str, args.days)))
        for scope in SCOPES:
            cells = []
            for days in args.days:
                total, _, _, episode = _reset_ms(scope, n_days=days, n=3, version=version)
                cells.append(f"{days}: {total:.1f}, {episode:.1f} ({episode / days:.3f})")
            print(f"{scope:6s} " + "  ".join(cells))


if __name__ == "__main__":
    main()

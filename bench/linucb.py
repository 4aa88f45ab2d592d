"""``python -m membudget.bench.linucb``: select + update cost of LinUCB against MABWiser's LinUCB, same run.

Measures microseconds per task (select the action for the task's features, then learn from its outcome) on a
ReplayStream-v0 stream (d = 12 features, 12 actions) for membudget's two-head ``LinUCB``, its ``SingleHeadLinUCB``
and MABWiser's ``LearningPolicy.LinUCB`` (``predict`` + ``partial_fit``), interleaved over rounds after a warm-up
run (numba compiles the fast path once), reports the median over rounds of MABWiser / two-head (target >= 80x), and
checks that the single-head variant makes the same choices as MABWiser's on the same stream (same alpha and
regularisation, no intercept, reward = correct − w · cost). MABWiser is a test/dev dependency only
(``pip install mabwiser``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from membudget.envs.validation import int_flag
from membudget.studies.cli import check_extras, optional_extras, plain


def stream_data(seed=42, family="db", profile="mid", n_tasks=500):
    """Features of every task and the counterfactual (correct, normalised-by-max tokens) table of one stream."""
    from membudget.agents.replay_ppo import make_env

    env = make_env(family, profile, version=0, n_tasks=n_tasks)  # v0's stream, as in docs/speed.md's figures
    obs, _ = env.reset(seed=seed)
    X = [obs]
    done = False
    while not done:  # the prompt / retrieval features do not depend on the actions; play action 0
        obs, _, done, _, _ = env.step(0)
        X.append(obs)
    s = env.unwrapped.stream
    return np.array(X[:-1], dtype=np.float64), s.correct.astype(float), s.tokens / s.tokens.max()


def run_ours(agent, X, correct, cost, w, two_heads):
    acts = np.empty(len(X), dtype=np.int64)
    for t, x in enumerate(X):
        a = agent.select(x)
        if two_heads:
            agent.update(x, a, correct[t, a], cost[t, a])
        else:
            agent.update(x, a, correct[t, a] - w * cost[t, a])
        acts[t] = a
    return acts


def run_mabwiser(X, correct, cost, w, alpha, l2_lambda, n_actions):
    from mabwiser.mab import MAB, LearningPolicy

    mab = MAB(arms=list(range(n_actions)), learning_policy=LearningPolicy.LinUCB(alpha=alpha, l2_lambda=l2_lambda),
              seed=0)
    acts = np.empty(len(X), dtype=np.int64)
    for t, x in enumerate(X):
        xr = x[None, :]
        a = 0 if t == 0 else int(mab.predict(xr))  # before any data every arm scores alike: arm 0 (argmax rule)
        r = correct[t, a] - w * cost[t, a]
        if t == 0:
            mab.fit([a], [r], xr)
        else:
            mab.partial_fit([a], [r], xr)
        acts[t] = a
    return acts


def main(argv=None):
    from membudget.agents.linucb import LinUCB, SingleHeadLinUCB

    parser = argparse.ArgumentParser(prog="python -m membudget.bench.linucb", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int_flag(1), default=3)
    parser.add_argument("--n-tasks", type=int_flag(1), default=500)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--l2-lambda", type=float, default=1.0)
    parser.add_argument("--cost-weight", type=float, default=0.5)
    parser.add_argument("--seeds", nargs="+", type=int_flag(0), default=[42, 43, 44])
    args = parser.parse_args(argv)
    with optional_extras(parser.prog):  # the comparison's reference implementation, before any work
        check_extras(["mabwiser"])
    w, K = args.cost_weight, 12
    data = {s: stream_data(s, n_tasks=args.n_tasks) for s in args.seeds}
    X0 = data[args.seeds[0]][0]
    run_ours(LinUCB(alpha=args.alpha, l2_lambda=args.l2_lambda, cost_weight=w), X0[:20], *data[args.seeds[0]][1:], w,
             True)  # warm-up: compiles (or loads) the numba kernels
    run_ours(SingleHeadLinUCB(alpha=args.alpha, l2_lambda=args.l2_lambda), X0[:20], *data[args.seeds[0]][1:], w, False)
    print(f"LinUCB select + update, d = {X0.shape[1]} features, {K} actions, {args.n_tasks}-task ReplayStream-v0 "
          f"streams (db, mid), alpha={args.alpha}, lambda={args.l2_lambda}")
    print(f"{'round':>5} {'two-head us/task':>17} {'single-head us/task':>20} {'MABWiser us/task':>17} "
          f"{'MABWiser / two-head':>20}")
    best = {"two": np.inf, "one": np.inf, "mab": np.inf}
    ratios = []
    for r in range(args.rounds):
        X, c, k = data[args.seeds[r % len(args.seeds)]]
        t0 = time.perf_counter()
        run_ours(LinUCB(alpha=args.alpha, l2_lambda=args.l2_lambda, cost_weight=w, fit_intercept=False), X, c, k, w,
                 True)
        t1 = time.perf_counter()
        run_ours(SingleHeadLinUCB(alpha=args.alpha, l2_lambda=args.l2_lambda), X, c, k, w, False)
        t2 = time.perf_counter()
        run_mabwiser(X, c, k, w, args.alpha, args.l2_lambda, K)
        t3 = time.perf_counter()
        two, one, mab = ((b - a) / len(X) * 1e6 for a, b in ((t0, t1), (t1, t2), (t2, t3)))
        ratios.append(mab / two)
        best = {"two": min(best["two"], two), "one": min(best["one"], one), "mab": min(best["mab"], mab)}
        print(f"{r:>5} {two:>17.1f} {one:>20.1f} {mab:>17.1f} {mab / two:>19.0f}x")
    print(f"best: two-head {best['two']:.1f} us/task, single-head {best['one']:.1f} us/task, MABWiser "
          f"{best['mab']:.0f} us/task; median ratio of the rounds {np.median(ratios):.0f}x "
          f"(target >= 80x: {'met' if np.median(ratios) >= 80 else 'NOT met'})")
    for s in args.seeds:
        X, c, k = data[s]
        ours = run_ours(SingleHeadLinUCB(alpha=args.alpha, l2_lambda=args.l2_lambda), X, c, k, w, False)
        theirs = run_mabwiser(X, c, k, w, args.alpha, args.l2_lambda, K)
        same = ours == theirs
        first = int(np.argmin(same)) if not same.all() else None
        print(f"seed {s}: single-head LinUCB and MABWiser LinUCB choose the same action on {same.sum()}/{len(same)} "
              f"tasks" + ("" if first is None else f" (first difference at task {first})"))


if __name__ == "__main__":
    main()

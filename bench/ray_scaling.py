"""Scaling of the Ray backend against the single-process local backend, in one run.

``python -m membudget.bench.ray_scaling [--workers 2]`` measures, on a local Ray cluster of ``--workers`` 1-CPU
worker processes (warmed up: membudget imported, kernels loaded):

1. the DP label set of weeks 2000-2239 (240 weeks, B5/B10/B15/B20, tasks of 10 weeks) — local, then Ray;
2. a 60-week × 10-policy evaluation at B10 (weeks 9000-9059, one task per policy) — local, then Ray;

and prints each throughput ratio (target >= 1.6x with 2 workers), checks that both backends give identical
results, and prints the per-task overhead of the Ray run: ``(workers × wall − Σ task seconds) / tasks`` as a share
of the mean task time (target <= 5%). ``--kill`` then runs the label set again on Ray and kills a random busy
worker process at a random point; it checks the result against the local one and counts the tasks run more than
once (target: at most one). Last, the projected wall time of the full RL-versus-distillation study on 8 and 64
cores from the per-task times of its committed run (``docs/rl_vs_distillation.json``).
"""

from __future__ import annotations

import argparse
import functools
import heapq
import json
import os
import random
import tempfile
import threading
import time

import numpy as np

EVAL_POLICIES = ("AllRelevant", "RandomFeasible", "Relevance", "Static", "MatchedDue", "Boosted", "Myopic",
                 "Sequential", "DeadlineOutcome", "PacingLB")


class _Logged:
    """``fn`` that appends one byte per start of a task to ``log_dir/<task index>`` (attempt counts)."""

    def __init__(self, fn, log_dir):
        self.fn, self.log_dir = fn, log_dir

    def __call__(self, item):
        index, value = item
        with open(os.path.join(self.log_dir, str(index)), "a") as f:
            f.write("x")
        return self.fn(value)


def _import(module):
    """Import ``module`` in a worker (then hold it a moment, so that the warm-up tasks reach every worker)."""
    import importlib

    importlib.import_module(module)
    time.sleep(1.0)


def _timed_map(executor, times):
    """A ``map`` over ``executor`` that records each task's own seconds in ``times``."""
    from membudget.studies.execution import timed

    def map_(fn, items):
        out = executor.map(timed(fn), items)
        times.extend(t for _, t in out)
        return [r for r, _ in out]

    return map_


def _logged_map(executor, log_dir):
    def map_(fn, items):
        return executor.map(_Logged(fn, log_dir), list(enumerate(items)))

    return map_


def _measure(name, run, executor_local, executor_ray, workers, same):
    t_local, t_ray = [], []
    start = time.perf_counter()
    a = run(_timed_map(executor_local, t_local))
    wall_local = time.perf_counter() - start
    start = time.perf_counter()
    b = run(_timed_map(executor_ray, t_ray))
    wall_ray = time.perf_counter() - start
    overhead = (workers * wall_ray - sum(t_ray)) / len(t_ray)
    print(f"{name}: {len(t_ray)} tasks (mean {np.mean(t_ray):.2f} s); local {wall_local:.1f} s, Ray with {workers} "
          f"workers {wall_ray:.1f} s: {wall_local / wall_ray:.2f}x; per-task overhead {overhead:.3f} s = "
          f"{100 * overhead / np.mean(t_ray):.1f}% of the task time; identical results: {same(a, b)}", flush=True)
    return a, wall_ray


def _same_dataset(a, b):
    import dataclasses

    return all(np.array_equal(getattr(a, f.name), getattr(b, f.name)) if f.name != "meta"
               else a.meta == b.meta for f in dataclasses.fields(a))


def _same_table(a, b):
    return all(np.array_equal(x[k], y[k], equal_nan=True) for x, y in zip(a, b)
               for k in ("set_f1", "on_time_recall", "realized_cost", "spend_per_quarter")) and len(a) == len(b)


def _kill_random_worker(delay, killed):
    import psutil

    time.sleep(delay)
    busy = [p for p in psutil.process_iter(["pid", "cmdline"])
            if p.info["cmdline"] and p.info["cmdline"][0].startswith("ray::_call")]
    if busy:
        victim = random.choice(busy)
        victim.kill()
        killed.append(victim.info["pid"])


def projection(path="docs/rl_vs_distillation.json", cores=(2, 8, 64)):
    """Projected wall time of the RL-versus-distillation study: its two task phases (imitation students, then
    PPO / distil-then-RL / ablations) list-scheduled longest first on ``cores`` workers with the per-task times of
    the committed run, plus the serial rest of that run (references and the gate fit)."""
    with open(path) as f:
        res = json.load(f)
    seeds = len(res["learner_seeds"])
    phase1, phase2 = [], []
    for key, t in res["training"].items():
        kind = key.split("|")[0]
        (phase1 if kind in ("BC", "DAgger") else phase2).extend([t["job_seconds"]] * seeds)

    def makespan(times, p):
        loads = [0.0] * p
        for t in sorted(times, reverse=True):
            heapq.heapreplace(loads, loads[0] + t)
        return max(loads)

    workers = int(res["params"]["workers"])
    serial = res["seconds"] - makespan(phase1, workers) - makespan(phase2, workers)
    out = {p: makespan(phase1, p) + makespan(phase2, p) + serial for p in cores}
    return out, len(phase1) + len(phase2), sum(phase1) + sum(phase2), serial, res["seconds"], workers


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.ray_scaling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--label-weeks", type=int, default=240)
    parser.add_argument("--eval-weeks", type=int, default=60)
    parser.add_argument("--budgets", nargs="+", default=["B5", "B10", "B15", "B20"])
    parser.add_argument("--kill", action="store_true", help="also kill a random worker during a label run")
    args = parser.parse_args(argv)

    import ray

    from membudget.envs.pm import WorldConfig
    from membudget.studies import budgetpm
    from membudget.studies.execution import Executor, RayExecutor
    from membudget.studies.suite import fit_suite
    from membudget.teachers import build_label_dataset
    from membudget.teachers.labels import label_weeks

    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    local, remote = Executor(), RayExecutor()
    remote.map(_import, ["membudget.studies.budgetpm"] * (2 * args.workers))  # imports on every worker
    warm = functools.partial(label_weeks, budgets=["B10"], world=WorldConfig(), cost_profile="unit",
                             per_step_cap=2, late_policy="expire", load=0)
    remote.map(warm, [(1999,)] * (2 * args.workers))  # load the compiled kernels on every worker
    warm((1999,))
    print(f"Ray {ray.__version__}, {args.workers} workers; {os.cpu_count()} CPUs on this machine", flush=True)

    weeks = range(2000, 2000 + args.label_weeks)
    labels = functools.partial(build_label_dataset, weeks, args.budgets)
    reference, wall = _measure(f"DP label set, {args.label_weeks} weeks x {len(args.budgets)} budgets",
                         lambda m: labels(map=m), local, remote, args.workers, _same_dataset)

    suite = fit_suite(temporal_budgets=("B10",), map=remote.map)
    cfg = budgetpm.EvalConfig(policies=list(EVAL_POLICIES), budgets=["B10"], first_seed=9000,
                              n_weeks=args.eval_weeks)

    def evaluate(m):
        class _Map:
            backend = "bench"
            map = staticmethod(m)
        return budgetpm.run(cfg, suite=suite, executor=_Map())[0]

    _measure(f"evaluation, {args.eval_weeks} weeks x {len(EVAL_POLICIES)} policies", evaluate, local, remote,
             args.workers, _same_table)

    if args.kill:
        with tempfile.TemporaryDirectory() as log_dir:
            killed = []
            timer = threading.Thread(target=_kill_random_worker, args=(random.uniform(0.1, 0.7) * wall, killed))
            timer.start()
            ds = labels(map=_logged_map(remote, log_dir))
            timer.join()
            attempts = [os.path.getsize(os.path.join(log_dir, f)) for f in os.listdir(log_dir)]
            print(f"killed worker {killed or 'none (no busy worker found)'}: the label set completed, identical to "
                  f"the local one: {_same_dataset(ds, reference)}; tasks run more than once: "
                  f"{sum(a > 1 for a in attempts)} of {len(attempts)}", flush=True)

    if os.path.exists("docs/rl_vs_distillation.json"):
        walls, n, total, serial, measured, workers = projection()
        print(f"RL versus distillation (full): {n} training tasks, {total:.0f} task-seconds, serial rest "
              f"{serial:.0f} s; measured {measured:.0f} s with {workers} workers; projected "
              + ", ".join(f"{p} cores {w:.0f} s" for p, w in walls.items()))
    ray.shutdown()


if __name__ == "__main__":
    main()

"""Scaling of the Ray backend against the single-process local backend, in one run.

``python -m membudget.bench.ray_scaling [--workers 2] [--repeats 3]`` measures, on a local Ray cluster of
``--workers`` 1-CPU worker processes (warmed up: membudget imported, kernels loaded):

1. the DP label set of weeks 2000-2239 (240 weeks, B5/B10/B15/B20, tasks of 10 weeks);
2. a 60-week × 10-policy evaluation at B10 (weeks 9000-9059; on Ray the default split, two tasks of every other
   row, each with its own evaluation of the reference and its rows' paired intervals; locally one task, so that
   the reference is evaluated once), after one untimed run on each backend;

each run ``--repeats`` times on the local backend and on Ray, alternately. It prints the ratio of the median walls
(target >= 1.6x with 2 workers), checks that both backends give identical results, compares the tasks' summed
time on Ray with their time in the single process (two busy processes on two cores each run slower than one
alone), runs the evaluation once more on a plain process pool as the control, and splits the Ray runs'
worker-seconds (``workers × wall``) into the task functions' own time, the backend's **per-task overhead** (from a
map's start to a worker's first task, between a worker's consecutive tasks, and from the last task's end to the
map's end: sending a task, fetching its function, returning its result; target <= 5% of the mean task time),
workers idle for lack of tasks (the task split's imbalance) and the driver's own work between maps (see
:func:`breakdown`). ``--kill`` then runs the label set again on Ray and kills a random busy worker process at a
random point; it checks the result against the local one and counts the tasks run more than once (target: at most
one). Last, the projected wall time of the full RL-versus-distillation study on 8 and 64 cores from the per-task
times of its committed run (``docs/rl_vs_distillation.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import heapq
import itertools
import json
import os
import random
import tempfile
import threading
import time

import numpy as np

from membudget.envs.validation import int_flag
from membudget.studies.cli import check_extras, optional_extras, plain

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


class _ProcessPool:
    """``workers`` plain worker processes (``concurrent.futures``, spawned, warmed up like Ray's) behind the
    executor interface: the control for Ray's per-task cost and for the machine's own parallel slowdown."""

    def __init__(self, workers):
        import concurrent.futures
        import multiprocessing

        self.pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        list(self.pool.map(_import, ["membudget.studies.budgetpm"] * (2 * workers)))

    def map(self, fn, items):
        return list(self.pool.map(fn, items))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.pool.shutdown()


def _import(module):
    """Import ``module`` in a worker (then hold it a moment, so that the warm-up tasks reach every worker)."""
    import importlib

    importlib.import_module(module)
    time.sleep(1.0)


def _timed_map(executor, maps):
    """A ``map`` over ``executor`` that records, per call, ``(start, end, [(task start, task end, process id)])``
    in ``maps`` (wall-clock seconds)."""
    from membudget.studies.execution import timed

    def map_(fn, items):
        start = time.time()
        out = executor.map(timed(fn), items)
        maps.append((start, time.time(), [stamp for _, stamp in out]))
        return [r for r, _ in out]

    return map_


def _logged_map(executor, log_dir):
    def map_(fn, items):
        return executor.map(_Logged(fn, log_dir), list(enumerate(items)))

    return map_


def breakdown(maps, workers, wall):
    """Where ``workers`` worker processes spent a run of ``wall`` seconds whose executor maps are ``maps``
    (``[(start, end, [(task start, task end, pid), ...]), ...]``), in worker-seconds: ``tasks`` (inside the task
    functions), ``overhead`` (the backend's own cost: from a map's start to each worker's first task, between a
    worker's consecutive tasks, and from the last task's end to the map's end on the worker that ran it),
    ``idle`` (a worker with no task left while others still run) and ``driver`` (every worker while the driver
    works outside the maps). The four add up to ``workers × wall``."""
    out = {"tasks": 0.0, "overhead": 0.0, "idle": 0.0, "driver": workers * wall}
    for start, end, stamps in maps:
        out["driver"] -= workers * (end - start)
        per_worker = {}
        for s, e, pid in stamps:
            per_worker.setdefault(pid, []).append((s, e))
            out["tasks"] += e - s
        last = max(e for _, e, _ in stamps)
        for runs in per_worker.values():
            runs.sort()
            out["overhead"] += runs[0][0] - start + sum(b[0] - a[1] for a, b in itertools.pairwise(runs))
            out["overhead" if runs[-1][1] == last else "idle"] += end - runs[-1][1]
        out["idle"] += (workers - len(per_worker)) * (end - start)
    return out


def _measure(name, run, executor_local, executor_ray, workers, same, repeats, warmup, parallel="Ray"):
    """Local and parallel (Ray, or ``parallel``'s executor) runs of ``run(map, side)`` alternated ``repeats`` times
    (after one untimed run each if ``warmup``); prints the median walls, their ratio and the parallel runs' median
    breakdown per task."""
    if warmup:
        run(executor_local.map, "local")
        run(executor_ray.map, "parallel")
    walls, shares, results = {"local": [], "parallel": []}, [], {}
    for _ in range(repeats):
        task_seconds = {}
        for label, executor in (("local", executor_local), ("parallel", executor_ray)):
            maps = []
            start = time.time()
            results[label] = run(_timed_map(executor, maps), label)
            walls[label].append(time.time() - start)
            task_seconds[label] = sum(b - a for _, _, stamps in maps for a, b, _ in stamps)
        parts = breakdown(maps, workers, walls["parallel"][-1])
        n = sum(len(stamps) for _, _, stamps in maps)
        slowdown = task_seconds["parallel"] / task_seconds["local"]
        shares.append({k: v / n for k, v in parts.items()} | {"n": n, "mean": parts["tasks"] / n, "slowdown": slowdown})
    med = {k: float(np.median([s[k] for s in shares])) for k in shares[0]}
    local, ray = float(np.median(walls["local"])), float(np.median(walls["parallel"]))
    print(f"{name}: {med['n']:.0f} tasks (mean {med['mean']:.3f} s on {parallel}); median of {repeats}: local "
          f"{local:.2f} s, {parallel} with {workers} workers {ray:.2f} s: {local / ray:.2f}x; per task: backend "
          f"overhead {1000 * med['overhead']:.1f} ms = {100 * med['overhead'] / med['mean']:.1f}% of the task time, workers "
          f"idle for lack of tasks {1000 * med['idle']:.1f} ms, driver between maps {1000 * med['driver']:.1f} ms "
          f"(all idle worker time: {100 * (med['overhead'] + med['idle'] + med['driver']) / med['mean']:.0f}%); "
          f"task seconds on {parallel} / locally: {med['slowdown']:.2f} (at most {workers / med['slowdown']:.2f}x with "
          f"{workers} workers and no idle time); identical results: {same(results['local'], results['parallel'])}",
          flush=True)
    return results["local"], ray


def _same_dataset(a, b):
    import dataclasses

    return all(np.array_equal(getattr(a, f.name), getattr(b, f.name)) if f.name != "meta"
               else a.meta == b.meta for f in dataclasses.fields(a))


def _same_table(a, b):
    return len(a) == len(b) and all(
        np.array_equal(x[k], y[k], equal_nan=True) for x, y in zip(a, b)
        for k in ("set_f1", "on_time_recall", "realized_cost", "spend_per_quarter")) and all(
        x.get("diff_vs_reference") == y.get("diff_vs_reference") for x, y in zip(a, b))


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
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.ray_scaling", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int_flag(1), default=2)
    parser.add_argument("--label-weeks", type=int_flag(1), default=240)
    parser.add_argument("--eval-weeks", type=int_flag(1), default=60)
    parser.add_argument("--budgets", nargs="+", default=["B5", "B10", "B15", "B20"])
    parser.add_argument("--repeats", type=int_flag(1), default=3, help="local and Ray runs of each workload (medians)")
    parser.add_argument("--kill", action="store_true", help="also kill a random worker during a label run")
    args = parser.parse_args(argv)
    with optional_extras(parser.prog):  # the ray extra, before any work
        check_extras(["ray"])

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
                               lambda m, _: labels(map=m), local, remote, args.workers, _same_dataset, args.repeats,
                               warmup=False)

    suite = fit_suite(temporal_budgets=("B10",), map=remote.map)
    cfg = budgetpm.EvalConfig(policies=list(EVAL_POLICIES), budgets=["B10"], first_seed=9000,
                              n_weeks=args.eval_weeks)

    def evaluate(m, side):
        class _Map:
            backend = "bench"
            map = staticmethod(m)
        # the single process at its best split: one task, the reference evaluated once
        split = cfg if side == "parallel" else dataclasses.replace(cfg, rows_per_task=len(EVAL_POLICIES))
        return budgetpm.run(split, suite=suite, executor=_Map())[0]

    _measure(f"evaluation, {args.eval_weeks} weeks x {len(EVAL_POLICIES)} policies", evaluate, local, remote,
             args.workers, _same_table, args.repeats, warmup=True)
    with _ProcessPool(args.workers) as pool:  # the same tasks in plain processes: what the machine allows
        _measure("  the same without Ray", evaluate, local, pool, args.workers, _same_table, args.repeats,
                 warmup=True, parallel="a process pool")

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

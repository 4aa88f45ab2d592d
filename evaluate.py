"""Evaluation protocol (DESIGN §5): policies on held-out weeks, paired by seed, with bootstrap 95% intervals.

``python -m membudget.evaluate`` (or ``python evaluate.py``) runs the reference benchmark: All-relevant (no
budget, no caps) and Random-feasible at B5...B80 on the confirmation weeks 6000-6029, and prints Set F1,
on-time recall and realized cost per policy.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import sys
import time
from dataclasses import dataclass, field

import numpy as np


@dataclass
class EvalConfig:
    """Configuration of one evaluation run (every field is a command-line flag of the same name)."""

    first_seed: int = 6000
    """First held-out week (BudgetPM confirmation weeks: 6000-6029)."""
    n_weeks: int = 30
    """Number of consecutive held-out weeks."""
    budgets: list = field(default_factory=lambda: ["B5", "B10", "B20", "B40", "B60", "B80"])
    """Budgets for the budgeted policies: levels (B5...B80), integers, or none."""
    per_step_cap: int = 2
    """Per-step query cap N_max of the budgeted policies."""
    cost_profile: str = "unit"
    """Cost profile (unit, mild, skewed)."""
    late_policy: str = "expire"
    """Late policy of the controller (expire, execute)."""
    load: int = 0
    """Opportunity load k (extra hidden-channel triggers per day)."""
    repetitions: int = 3
    """Repetitions of stochastic policies per week (their seeds 0..repetitions-1); results are averaged per week."""
    bootstrap: int = 10000
    """Bootstrap resamples over complete weeks for the 95% intervals (BudgetPM uses 100000)."""
    out: str = ""
    """If set, a directory that receives results.json with the resolved config, command and package versions."""


def rollout(policy, seeds, **env_kwargs) -> dict:
    """Run ``policy`` (policy protocol) once on each week in ``seeds`` with the native vector env; returns
    ``{metric: array over weeks}`` of the end-of-episode metrics."""
    from membudget.envs.pm import PMWeekVectorEnv

    seeds = list(seeds)
    env = PMWeekVectorEnv(num_envs=len(seeds), **env_kwargs)
    obs, _ = env.reset(seed=seeds)
    done = np.zeros(len(seeds), dtype=bool)
    out = {}
    state, episode_start = None, np.ones(len(seeds), dtype=bool)
    while not done.all():
        action, state = policy.predict(obs, state=state, episode_start=episode_start, deterministic=True)
        obs, _, terminated, truncated, info = env.step(action)
        episode_start = terminated | truncated
        if "episode" in info:
            first = info["_episode"] & ~done
            for k, v in info["episode"].items():
                out.setdefault(k, np.zeros(len(seeds)))[first] = v[first]
            done |= info["_episode"]
    env.close()
    return out


def bootstrap_ci(values, n_resamples: int = 10000, seed: int = 0, level: float = 0.95):
    """Mean and percentile bootstrap interval over the entries of ``values`` (complete weeks). For a paired
    comparison pass the per-week differences."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("values must be a non-empty 1-D array")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_resamples, x.size))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    return float(x.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha))


def run(cfg: EvalConfig) -> list[dict]:
    """All-relevant and Random-feasible per budget; one row per (policy, budget) with per-week arrays."""
    from membudget.baselines import AllRelevant, RandomFeasible

    seeds = range(cfg.first_seed, cfg.first_seed + cfg.n_weeks)
    common = dict(cost_profile=cfg.cost_profile, late_policy=cfg.late_policy, load=cfg.load)
    rows = [{"policy": "AllRelevant", "budget": "none",
             **rollout(AllRelevant(), seeds, budget=None, per_step_cap=None, **common)}]
    for b in cfg.budgets:
        budget = None if b == "none" else int(b) if str(b).isdigit() else b
        reps = [rollout(RandomFeasible(per_step_cap=cfg.per_step_cap, seed=r), seeds, budget=budget,
                        per_step_cap=cfg.per_step_cap, **common) for r in range(cfg.repetitions)]
        rows.append({"policy": "RandomFeasible", "budget": b,
                     **{k: np.mean([rep[k] for rep in reps], axis=0) for k in reps[0]}})
    return rows


def format_table(rows, n_resamples: int) -> str:
    head = f"{'policy':<16}{'budget':>7}  {'Set F1 [95% CI]':<24}{'on-time recall':>15}{'realized cost':>15}"
    lines = [head, "-" * len(head)]
    for row in rows:
        f1, lo, hi = bootstrap_ci(row["set_f1"], n_resamples)
        lines.append(f"{row['policy']:<16}{row['budget']:>7}  {f1:.3f} [{lo:.3f}, {hi:.3f}]{'':<4}"
                     f"{np.nanmean(row['on_time_recall']):>15.3f}{row['realized_cost'].mean():>15.2f}")
    return "\n".join(lines)


def package_versions() -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("membudget", "numpy", "gymnasium", "numba", "stable-baselines3", "torch", "scikit-learn",
                 "pettingzoo"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def parse_args(argv=None) -> EvalConfig:
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in dataclasses.fields(EvalConfig):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        kw = {"nargs": "+", "type": str} if isinstance(default, list) else {"type": type(default)}
        parser.add_argument(f"--{f.name.replace('_', '-')}", default=default, **kw)
    return EvalConfig(**vars(parser.parse_args(argv)))


def main(argv=None) -> list[dict]:
    cfg = parse_args(argv)
    start = time.perf_counter()
    rows = run(cfg)
    command = "python -m membudget.evaluate " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None
                                                                                  else argv))
    print(f"PMWeek-v0 reference benchmark: weeks {cfg.first_seed}-{cfg.first_seed + cfg.n_weeks - 1}, "
          f"cost profile {cfg.cost_profile}, late policy {cfg.late_policy}, load {cfg.load}, "
          f"N_max {cfg.per_step_cap} for budgeted rows, RandomFeasible averaged over {cfg.repetitions} seeds/week")
    print(format_table(rows, cfg.bootstrap))
    print(f"\ncommand: {command.strip()}   ({time.perf_counter() - start:.1f} s)")
    if cfg.out:
        os.makedirs(cfg.out, exist_ok=True)
        with open(os.path.join(cfg.out, "results.json"), "w") as f:
            json.dump({"config": dataclasses.asdict(cfg), "command": command, "versions": package_versions(),
                       "rows": [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()}
                                for r in rows]}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()

"""Training entry point (``python -m membudget.train`` or ``python train.py``).

Subcommands:
- ``ppo``: Stable-Baselines3 PPO (``MultiInputPolicy``) on ``membudget/PMWeek-v0``.
- ``replay-ppo``: Stable-Baselines3 PPO (``MlpPolicy``) on ``membudget/ReplayStream-v0``
  (:func:`membudget.agents.replay_runner.train_ppo`); metrics.csv holds accuracy, total tokens and mean reward
  per evaluation stream (seeds 42, 43, 44 by default).

Each run writes ``<out>/<name>/`` with ``config.json`` (resolved config, command, seed, package versions),
``model.zip`` and ``metrics.csv`` (Set F1 / on-time recall / realized cost on held-out weeks after training).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import shlex
import sys
from dataclasses import dataclass

import numpy as np


@dataclass
class PPOConfig:
    """PPO on PMWeek-v0 (every field is a command-line flag of the same name)."""

    total_timesteps: int = 20000
    """Environment steps to train for."""
    seed: int = 0
    """Seeds the policy, the training weeks (reset(seed=seed) then unseeded resets) and nothing else."""
    budget: str = "B10"
    """Episode budget: a level (B5...B80) or an integer."""
    per_step_cap: int = 2
    """Per-step query cap N_max."""
    cost_profile: str = "unit"
    """Cost profile (unit, mild, skewed)."""
    late_policy: str = "expire"
    """Late policy of the controller (expire, execute)."""
    n_steps: int = 512
    """PPO rollout length per update."""
    batch_size: int = 64
    """PPO minibatch size."""
    learning_rate: float = 3e-4
    """Adam learning rate."""
    eval_first_seed: int = 4000
    """First held-out week for the final evaluation (analysis weeks 4000-4029)."""
    eval_weeks: int = 30
    """Number of held-out weeks for the final evaluation."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: ppo-<budget>-seed<seed>)."""
    progress_bar: str = "auto"
    """Show a progress bar: on, off or auto (on when attached to a terminal)."""


@dataclass
class ReplayPPOConfig:
    """PPO on ReplayStream-v0 (every field is a command-line flag of the same name)."""

    family: str = "db"
    """Task family (db, os)."""
    profile: str = "mid"
    """Backbone profile (strong, mid, weak)."""
    total_timesteps: int = 20000
    """Environment steps (tasks) to train for."""
    seed: int = 0
    """Seeds the policy and the training streams (reset(seed=seed) then unseeded resets)."""
    n_tasks: int = 500
    """Stream length."""
    cost_weight: float = 0.5
    """w in the reward correct - w * cost."""
    n_steps: int = 500
    """PPO rollout length per update."""
    batch_size: int = 100
    """PPO minibatch size."""
    learning_rate: float = 3e-4
    """Adam learning rate."""
    eval_seeds: str = "42,43,44"
    """Comma-separated evaluation streams for metrics.csv (LIMBO's seeds)."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: replay-ppo-<family>-<profile>-seed<seed>)."""


def train_replay_ppo(cfg: ReplayPPOConfig, command: str = "") -> str:
    """Train PPO on ReplayStream-v0, evaluate it on the evaluation streams and save; returns the run directory."""
    from membudget.agents.replay_runner import run_policy, train_ppo as replay_train_ppo
    from membudget.evaluate import package_versions

    try:
        eval_seeds = [int(x) for x in cfg.eval_seeds.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--eval-seeds must be comma-separated integers, got {cfg.eval_seeds!r}") from None
    if not eval_seeds:
        raise ValueError("--eval-seeds must name at least one seed")
    env_kwargs = dict(n_tasks=cfg.n_tasks, cost_weight=cfg.cost_weight)
    run_dir = os.path.join(cfg.out, cfg.name or f"replay-ppo-{cfg.family}-{cfg.profile}-seed{cfg.seed}")
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump({"subcommand": "replay-ppo", "config": dataclasses.asdict(cfg), "command": command,
                   "seed": cfg.seed, "versions": package_versions()}, f, indent=1)
    model = replay_train_ppo(family=cfg.family, profile=cfg.profile, total_timesteps=cfg.total_timesteps,
                             seed=cfg.seed, n_steps=cfg.n_steps, batch_size=cfg.batch_size,
                             learning_rate=cfg.learning_rate, **env_kwargs)
    model.save(os.path.join(run_dir, "model.zip"))
    rows = []
    for s in eval_seeds:
        res = run_policy(model, family=cfg.family, profile=cfg.profile, seed=s, **env_kwargs)
        rows.append((s, res["accuracy"], res["total_tokens"], res["mean_reward"]))
    with open(os.path.join(run_dir, "metrics.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["seed", "accuracy", "total_tokens", "mean_reward"])
        w.writerows(rows)
    print(f"{run_dir}: accuracy {np.mean([r[1] for r in rows]):.3f}, total tokens per stream "
          f"{np.mean([r[2] for r in rows]) / 1e3:.1f}k, mean reward {np.mean([r[3] for r in rows]):.3f} "
          f"(seeds {', '.join(map(str, eval_seeds))})")
    return run_dir


def _budget(value: str):
    return int(value) if value.lstrip("-").isdigit() else value


def train_ppo(cfg: PPOConfig, command: str = "") -> str:
    """Train, evaluate and save; returns the run directory."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    import membudget  # noqa: F401  (registers the ids)
    from membudget.evaluate import package_versions, rollout

    env_kwargs = dict(budget=_budget(cfg.budget), per_step_cap=cfg.per_step_cap, cost_profile=cfg.cost_profile,
                      late_policy=cfg.late_policy)
    run_dir = os.path.join(cfg.out, cfg.name or f"ppo-{cfg.budget}-seed{cfg.seed}")
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump({"subcommand": "ppo", "config": dataclasses.asdict(cfg), "command": command, "seed": cfg.seed,
                   "versions": package_versions()}, f, indent=1)
    env = gym.make("membudget/PMWeek-v0", **env_kwargs)
    env.reset(seed=cfg.seed)
    model = PPO("MultiInputPolicy", env, n_steps=cfg.n_steps, batch_size=cfg.batch_size,
                learning_rate=cfg.learning_rate, seed=cfg.seed, verbose=0, device="cpu")
    bar = sys.stderr.isatty() if cfg.progress_bar == "auto" else cfg.progress_bar == "on"
    model.learn(total_timesteps=cfg.total_timesteps, progress_bar=bar)
    model.save(os.path.join(run_dir, "model.zip"))
    res = rollout(model, range(cfg.eval_first_seed, cfg.eval_first_seed + cfg.eval_weeks), **env_kwargs)
    with open(os.path.join(run_dir, "metrics.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["seed", "set_f1", "on_time_recall", "realized_cost"])
        for i in range(cfg.eval_weeks):
            w.writerow([cfg.eval_first_seed + i, res["set_f1"][i], res["on_time_recall"][i],
                        res["realized_cost"][i]])
    print(f"{run_dir}: held-out Set F1 {np.mean(res['set_f1']):.3f}, on-time recall "
          f"{np.nanmean(res['on_time_recall']):.3f}, realized cost {np.mean(res['realized_cost']):.1f}")
    return run_dir


def _add_fields(parser, cls):
    for f in dataclasses.fields(cls):
        kw = {"type": type(f.default), "default": f.default, "help": (f.metadata or {}).get("help")}
        choices = {"progress_bar": ("on", "off", "auto"), "family": ("db", "os"),
                   "profile": ("strong", "mid", "weak")}
        if f.name in choices:
            kw["choices"] = choices[f.name]
        parser.add_argument(f"--{f.name.replace('_', '-')}", **kw)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_fields(sub.add_parser("ppo", help="SB3 PPO on PMWeek-v0"), PPOConfig)
    _add_fields(sub.add_parser("replay-ppo", help="SB3 PPO on ReplayStream-v0"), ReplayPPOConfig)
    args = vars(parser.parse_args(argv))
    which = args.pop("command")
    argv = sys.argv[1:] if argv is None else argv
    command = "python -m membudget.train " + " ".join(shlex.quote(a) for a in argv)
    if which == "replay-ppo":
        return train_replay_ppo(ReplayPPOConfig(**args), command)
    return train_ppo(PPOConfig(**args), command)


if __name__ == "__main__":
    main()

"""Training entry point (``python -m membudget.train`` or ``python train.py``).

Subcommands (PMWeek-v0 learners: :mod:`membudget.agents.rl`, :mod:`membudget.agents.imitation`):
- ``ppo``: Stable-Baselines3 PPO (``MultiInputPolicy``) at one budget, on the native vector env;
- ``maskable-ppo``: sb3-contrib MaskablePPO (candidate mask) at one budget;
- ``ppo-conditioned``: one PPO trained across B5/B10/B15/B20 at once (the target-fraction feature tells it the
  budget);
- ``bc`` / ``dagger``: the per-resource student imitating the hindsight DP (behaviour cloning / DAgger);
- ``replay-ppo``: Stable-Baselines3 PPO (``MlpPolicy``) on ``membudget/ReplayStream-v0``
  (:func:`membudget.agents.replay_runner.train_ppo`); metrics.csv holds accuracy, total tokens and mean reward
  per evaluation stream (seeds 42, 43, 44 by default);
- ``tiers``: the PPO tier router on ``membudget/TierRouting-v0`` (:func:`membudget.agents.tier_router.train_router`:
  one λ, or ``--lam-conditioned on``; optional behaviour-cloning warm start from the hindsight oracle, then PPO);
  metrics.csv holds r_task, cost and the applied tiers per held-out query (seeds 50000 onwards);
- ``proactive-ppo``: Stable-Baselines3 PPO on ``membudget/ProactiveStream-v0`` choosing the memory depth and the
  decision per event (:func:`membudget.agents.proactive_runner.train_ppo`); metrics.csv holds seed 002's metrics
  and tokens per held-out stream (seeds 10000 onwards).

Configuration: flags, and optionally ``--config FILE`` (JSON, or YAML when the name ends in .yaml/.yml) whose keys
are the flag names (dashes or underscores); flags given on the command line override the file; unknown keys
are an error. Files are parsed as data only (json / yaml.safe_load), never evaluated.

Each PMWeek run writes ``<out>/<name>/`` with the model (``model.zip`` for SB3, ``model.npz`` for a student),
``config.json`` (resolved config, command, seed, package versions), ``metrics.csv`` (Set F1 / on-time recall /
realized cost per held-out week after training), and ``learning_curve.csv`` / ``learning_curve.png`` (env steps,
training wall clock, mean Set F1 on validation weeks 4000-4009). ``python -m membudget.evaluate --model DIR``
evaluates the result like any other policy.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import json
import os
import shlex
import sys
from dataclasses import dataclass

import numpy as np


@dataclass
class _PPOSettings:
    """Settings shared by the PPO subcommands (every field is a command-line flag of the same name)."""

    per_step_cap: int = 2
    """Per-step query cap N_max."""
    cost_profile: str = "unit"
    """Cost profile (unit, mild, skewed)."""
    late_policy: str = "expire"
    """Late policy of the controller (expire, execute)."""
    n_steps: int = 128
    """PPO rollout length per environment per update."""
    batch_size: int = 512
    """PPO minibatch size."""
    n_epochs: int = 5
    """PPO epochs per update."""
    learning_rate: float = 3e-4
    """Adam learning rate."""
    gamma: float = 1.0
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    ent_coef: float = 0.0
    """Entropy bonus."""
    net_arch: str = "128,128"
    """Hidden layer sizes of the policy and value networks, comma-separated."""
    torch_threads: int = 1
    """torch.set_num_threads for training (0: leave torch's default)."""
    eval_first_seed: int = 4010
    """First week of the final evaluation (after the validation weeks 4000-4009, never trained on)."""
    eval_weeks: int = 20
    """Number of weeks of the final evaluation (at every budget)."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: <subcommand>-<budget>-seed<seed>)."""
    progress_bar: str = "auto"
    """Show a progress bar: on, off or auto (on when attached to a terminal)."""
    learning_curve: str = "on"
    """Write learning_curve.csv / learning_curve.png (on, off)."""


@dataclass
class PPOConfig(_PPOSettings):
    """PPO / MaskablePPO on PMWeek-v0 at one budget."""

    total_timesteps: int = 20000
    """Environment steps to train for."""
    seed: int = 0
    """Seeds the policy, the order of the training weeks (development seeds 2000-3999) and everything else."""
    budget: str = "B10"
    """Episode budget: a level (B5...B80), an integer or none."""
    n_envs: int = 16
    """Weeks stepped together in the native vector env."""
    eval_every: int = 20000
    """Learning-curve point every this many environment steps (Set F1 on validation weeks 4000-4009)."""


@dataclass
class ConditionedPPOConfig(_PPOSettings):
    """One budget-conditioned PPO trained across several budgets at once."""

    total_timesteps: int = 40000
    """Environment steps to train for (over all budgets together)."""
    seed: int = 0
    """Seeds the policy, the order of the training weeks (development seeds 2000-3999) and everything else."""
    budgets: str = "B5,B10,B15,B20"
    """Comma-separated budget levels trained at once (the target-fraction feature tells the policy which)."""
    envs_per_budget: int = 8
    """Weeks per budget stepped together."""
    eval_every: int = 40000
    """Learning-curve point every this many environment steps (validation weeks 4000-4009, every budget)."""


@dataclass
class ImitationConfig:
    """Behaviour cloning / DAgger from the hindsight DP (membudget.agents.imitation; every field is a flag)."""

    budget: str = "B10"
    """Budget level (B5...B80)."""
    seed: int = 0
    """Seeds the student's initialisation and minibatch order."""
    train_first_seed: int = 2000
    """First training week (development range 2000-3999)."""
    train_weeks: int = 40
    """Number of consecutive training weeks."""
    epochs: int = 60
    """Training epochs per fit."""
    hidden: int = 64
    """Hidden units of the per-resource student."""
    iterations: int = 4
    """DAgger iterations (dagger only)."""
    eval_first_seed: int = 4010
    """First week of the final evaluation (after the validation weeks 4000-4009, never trained on)."""
    eval_weeks: int = 20
    """Number of weeks of the final evaluation."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: <subcommand>-<budget>-seed<seed>)."""
    progress_bar: str = "auto"
    """Show a progress bar (tqdm): on, off or auto."""
    learning_curve: str = "on"
    """Write learning_curve.csv / learning_curve.png (on, off)."""


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

    try:
        eval_seeds = [int(x) for x in cfg.eval_seeds.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--eval-seeds must be comma-separated integers, got {cfg.eval_seeds!r}") from None
    if not eval_seeds:
        raise ValueError("--eval-seeds must name at least one seed")
    env_kwargs = dict(n_tasks=cfg.n_tasks, cost_weight=cfg.cost_weight)
    run_dir = _start_run("replay-ppo", cfg, command, f"replay-ppo-{cfg.family}-{cfg.profile}-seed{cfg.seed}")
    model = replay_train_ppo(family=cfg.family, profile=cfg.profile, total_timesteps=cfg.total_timesteps,
                             seed=cfg.seed, n_steps=cfg.n_steps, batch_size=cfg.batch_size,
                             learning_rate=cfg.learning_rate, **env_kwargs)
    model.save(os.path.join(run_dir, "model.zip"))
    rows = []
    for s in eval_seeds:
        res = run_policy(model, family=cfg.family, profile=cfg.profile, seed=s, **env_kwargs)
        rows.append((s, res["accuracy"], res["total_tokens"], res["mean_reward"]))
    _write_metrics(run_dir, ["seed", "accuracy", "total_tokens", "mean_reward"], rows)
    print(f"{run_dir}: accuracy {np.mean([r[1] for r in rows]):.3f}, total tokens per stream "
          f"{np.mean([r[2] for r in rows]) / 1e3:.1f}k, mean reward {np.mean([r[3] for r in rows]):.3f} "
          f"(seeds {', '.join(map(str, eval_seeds))})")
    return run_dir


@dataclass
class TiersConfig:
    """PPO tier router on TierRouting-v0 (membudget.agents.tier_router.train_router; every field is a flag)."""

    strategy: str = "capacity"
    """Tiering strategy (implementation, reasoning, capacity)."""
    population: str = "locomo"
    """Query population (locomo, longmemeval, hotpotqa)."""
    backbone: str = "llama"
    """Price / capability family (llama, qwen)."""
    lam: float = 0.3
    """λ of seed 001's §5.5 reward r_task + λ·β·r_cost (ignored with --lam-conditioned on)."""
    lam_conditioned: str = "off"
    """on: one router for every λ (λ in the observation, drawn per query from 0, 0.1, 0.3, 0.5, 1.0)."""
    use_beta: str = "on"
    """off: the β ablation (β = 1 in the §5.5 reward)."""
    max_cost_per_query: float = 0.0
    """Hard per-query budget in dollars (0: none)."""
    total_timesteps: int = 20000
    """PPO environment steps (5 per query)."""
    seed: int = 0
    """Seeds the policy and the training queries (reset(seed=seed) then unseeded resets; BC queries from seed + 10000)."""
    bc_queries: int = 3000
    """Oracle queries for the behaviour-cloning warm start of the actor before PPO (0: PPO from scratch)."""
    bc_teacher: str = "expected"
    """Oracle of the warm start: expected (best combination before judge noise) or hindsight (after it)."""
    bc_epochs: int = 30
    """Epochs of the behaviour-cloning warm start."""
    n_steps: int = 500
    """PPO rollout length per update."""
    batch_size: int = 100
    """PPO minibatch size."""
    n_epochs: int = 4
    """PPO epochs per update."""
    learning_rate: float = 1e-3
    """Adam learning rate of PPO."""
    ent_coef: float = 0.01
    """Entropy bonus."""
    net_arch: str = "64,64"
    """Hidden layer sizes of the policy and value networks, comma-separated."""
    normalize_reward: str = "off"
    """on: SB3 VecNormalize of the reward during training (observations are already in [0, 1])."""
    eval_first_seed: int = 50000
    """First held-out query of the final evaluation (held-out queries start at 50000)."""
    eval_queries: int = 300
    """Number of held-out queries of the final evaluation."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: tiers-<strategy>-lam<lam>|conditioned-seed<seed>)."""


def train_tiers(cfg: TiersConfig, command: str = "") -> str:
    """Train one PPO tier router, evaluate it on the held-out queries and save; returns the run directory."""
    from membudget.agents.tier_router import HELD_OUT_FIRST_SEED, rollout, train_router

    if cfg.eval_queries < 1 or cfg.eval_first_seed < HELD_OUT_FIRST_SEED:
        raise ValueError(f"--eval-queries must be positive and --eval-first-seed ≥ {HELD_OUT_FIRST_SEED} "
                         "(the held-out queries)")
    if cfg.bc_queries < 0 or cfg.total_timesteps < 0:
        raise ValueError("--bc-queries and --total-timesteps must be ≥ 0")
    conditioned = cfg.lam_conditioned == "on"
    cap = cfg.max_cost_per_query or None
    tag = "conditioned" if conditioned else f"lam{cfg.lam:g}"
    run_dir = _start_run("tiers", cfg, command, f"tiers-{cfg.strategy}-{tag}-seed{cfg.seed}")
    env_kwargs = dict(strategy=cfg.strategy, population=cfg.population, backbone=cfg.backbone,
                      max_cost_per_query=cap)
    model, info = train_router(lam=cfg.lam, lam_conditioned=conditioned, use_beta=cfg.use_beta == "on",
                               total_timesteps=cfg.total_timesteps, seed=cfg.seed, n_steps=cfg.n_steps,
                               batch_size=cfg.batch_size, n_epochs=cfg.n_epochs, learning_rate=cfg.learning_rate,
                               ent_coef=cfg.ent_coef, bc_queries=cfg.bc_queries, bc_epochs=cfg.bc_epochs,
                               bc_teacher=cfg.bc_teacher,
                               normalize_reward=cfg.normalize_reward == "on", net_arch=_net_arch(cfg.net_arch),
                               return_info=True, **env_kwargs)
    model.save(os.path.join(run_dir, "model.zip"))
    seeds = range(cfg.eval_first_seed, cfg.eval_first_seed + cfg.eval_queries)
    lams = [0.0, 0.1, 0.3, 0.5, 1.0] if conditioned else [cfg.lam]
    rows, summary = [], []
    for lam in lams:
        kw = dict(env_kwargs, lam_conditioned=True) if conditioned else env_kwargs
        run = rollout(model, seeds, lam=lam if conditioned else None, **kw)
        for i, s in enumerate(seeds):
            rows.append([lam, s, run["r_task"][i], run["cost"][i], "".join(map(str, run["tiers"][i])),
                         int(run["downgrades"][i])])
        summary.append(f"λ {lam:g}: r_task {run['r_task'].mean():.3f}, cost {run['cost'].mean() * 1e3:.4f} m$, "
                       f"LOW share {(run['tiers'] == 0).mean():.2f}")
    _write_metrics(run_dir, ["lam", "seed", "r_task", "cost", "tiers", "downgrades"], rows)
    _record_training(run_dir, info["train_seconds"], model.num_timesteps,
                     **{k: v for k, v in info.items() if k != "train_seconds"})
    print(f"{run_dir}: " + "; ".join(summary) + f" on held-out queries {seeds.start}-{seeds.stop - 1} "
          f"(training {info['train_seconds']:.1f} s)")
    return run_dir


@dataclass
class ProactivePPOConfig:
    """PPO on ProactiveStream-v0 (membudget.agents.proactive_runner.train_ppo; every field is a flag)."""

    scope: str = "sports"
    """Scope of the streams (sports, home, code)."""
    memory: str = "full"
    """Memory variant (full, no_replay_gate, no_validation)."""
    total_timesteps: int = 200_000
    """Environment steps (two per event: depth, then decision)."""
    seed: int = 0
    """Seeds the policy and the training streams (copy i starts at stream seed + i, then unseeded resets)."""
    n_envs: int = 4
    """Training environment copies (SB3 DummyVecEnv)."""
    n_steps: int = 1024
    """PPO rollout length per copy and update."""
    batch_size: int = 256
    """PPO minibatch size."""
    learning_rate: float = 3e-4
    """Adam learning rate."""
    ent_coef: float = 0.01
    """Entropy bonus."""
    gamma: float = 0.9
    """Discount (rewards follow the decision that earns them within one or two steps)."""
    net_arch: str = "64,64"
    """Hidden layer sizes of the policy and value networks, comma-separated."""
    intrusion_penalty: float = 0.5
    """Reward of a false intervention is minus this."""
    token_weight: float = 2e-6
    """Reward per memory token loaded is minus this."""
    eval_streams: int = 20
    """Held-out streams (seeds 10000 onwards) of the final evaluation."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: proactive-ppo-<scope>-seed<seed>)."""


def train_proactive_ppo(cfg: ProactivePPOConfig, command: str = "") -> str:
    """Train PPO on ProactiveStream-v0, evaluate it on held-out streams and save; returns the run directory."""
    from membudget.agents.proactive_runner import HELD_OUT_FIRST_SEED, pooled, run_policy, train_ppo

    if cfg.eval_streams < 1 or cfg.total_timesteps < 1:
        raise ValueError("--eval-streams and --total-timesteps must be positive")
    run_dir = _start_run("proactive-ppo", cfg, command, f"proactive-ppo-{cfg.scope}-seed{cfg.seed}")
    env_kwargs = dict(memory=cfg.memory, intrusion_penalty=cfg.intrusion_penalty, token_weight=cfg.token_weight)
    model = train_ppo(scope=cfg.scope, total_timesteps=cfg.total_timesteps, seed=cfg.seed, n_envs=cfg.n_envs,
                      n_steps=cfg.n_steps, batch_size=cfg.batch_size, learning_rate=cfg.learning_rate,
                      ent_coef=cfg.ent_coef, gamma=cfg.gamma, net_arch=_net_arch(cfg.net_arch), **env_kwargs)
    model.save(os.path.join(run_dir, "model.zip"))
    runs = run_policy(model, cfg.scope, range(HELD_OUT_FIRST_SEED, HELD_OUT_FIRST_SEED + cfg.eval_streams),
                      **env_kwargs)
    fields = ["seed", "tp", "fp", "fn", "tn", "relevance", "coverage", "effectiveness", "intrusion", "balance",
              "frequency", "total_tokens", "n_events", "return"]
    _write_metrics(run_dir, fields, [[r[k] for k in fields] for r in runs])
    _record_training(run_dir, model.train_seconds, model.num_timesteps)
    m = pooled(runs)
    print(f"{run_dir}: effectiveness {m['effectiveness']:.3f}, relevance {m['relevance']:.3f}, coverage "
          f"{m['coverage']:.3f}, intrusion {m['intrusion']:.4f}, {m['tokens_per_event']:.0f} tokens per event on "
          f"held-out streams {HELD_OUT_FIRST_SEED}-{HELD_OUT_FIRST_SEED + cfg.eval_streams - 1} "
          f"(training {model.train_seconds:.1f} s)")
    return run_dir


def _budget(value: str):
    """A budget flag: ``none``, an integer or a level name such as ``B10``."""
    if value == "none":
        return None
    return int(value) if value.lstrip("-").isdigit() else value


def _bar(setting: str) -> bool:
    return sys.stderr.isatty() if setting == "auto" else setting == "on"


def _net_arch(text) -> tuple:
    try:
        arch = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--net-arch must be comma-separated integers, got {text!r}") from None
    if not arch or min(arch) <= 0:
        raise ValueError(f"--net-arch must name at least one positive layer size, got {text!r}")
    return arch


def _start_run(subcommand: str, cfg, command: str, default_name: str) -> str:
    from membudget.evaluate import package_versions

    run_dir = os.path.join(cfg.out, cfg.name or default_name)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump({"subcommand": subcommand, "config": dataclasses.asdict(cfg), "command": command, "seed": cfg.seed,
                   "versions": package_versions()}, f, indent=1)
    return run_dir


def _write_metrics(run_dir, header, rows) -> None:
    """``metrics.csv`` of a run directory: one header row, then ``rows``."""
    with open(os.path.join(run_dir, "metrics.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def _record_training(run_dir, wall_clock_s, env_steps, **extra) -> None:
    """Add the training totals (and ``extra``) to the run's ``config.json`` written by :func:`_start_run`."""
    path = os.path.join(run_dir, "config.json")
    with open(path) as f:
        meta = json.load(f)
    meta["training"] = {"wall_clock_s": float(wall_clock_s), "env_steps": int(env_steps), **extra}
    with open(path, "w") as f:
        json.dump(meta, f, indent=1)


def _finish_run(run_dir, subcommand, cfg, history, train_seconds, env_steps, policy, budgets, env_kwargs):
    """Held-out metrics.csv, learning curves, a line on stdout; adds training totals to config.json."""
    from membudget.evaluate import rollout

    seeds = range(cfg.eval_first_seed, cfg.eval_first_seed + cfg.eval_weeks)
    rows, summary = [], []
    for b in budgets:
        res = rollout(policy, seeds, budget=_budget(b), per_step_cap=getattr(cfg, "per_step_cap", 2), **env_kwargs)
        for i, s in enumerate(seeds):
            rows.append([b, s, res["set_f1"][i], res["on_time_recall"][i], res["realized_cost"][i]])
        summary.append(f"{b}: held-out Set F1 {np.mean(res['set_f1']):.3f}, on-time recall "
                       f"{np.nanmean(res['on_time_recall']):.3f}, realized cost {np.mean(res['realized_cost']):.1f}")
    _write_metrics(run_dir, ["budget", "seed", "set_f1", "on_time_recall", "realized_cost"], rows)
    if cfg.learning_curve == "on":
        write_learning_curve(history, run_dir, title=f"{subcommand} ({', '.join(map(str, budgets))})")
    _record_training(run_dir, train_seconds, env_steps)
    print(f"{run_dir}: " + "; ".join(summary) + f" (training {train_seconds:.1f} s, {env_steps} env steps)")
    return run_dir


def write_learning_curve(history, run_dir, title=""):
    """``learning_curve.csv`` (every key of the history rows) and ``learning_curve.png`` in ``run_dir``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(dict.fromkeys(k for row in history for k in row))
    with open(os.path.join(run_dir, "learning_curve.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(history)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    x = [r["env_steps"] for r in history]
    per_budget = [k for k in keys if k.startswith("val_set_f1_")]
    for k in per_budget if len(per_budget) > 1 else ["val_set_f1"]:
        ax.plot(x, [r.get(k, np.nan) for r in history], marker="o", label=k.replace("val_set_f1_", "") or k)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("Set F1, validation weeks 4000-4009")
    ax.set_title(title, fontsize=9)
    if len(per_budget) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(run_dir, "learning_curve.png"), dpi=110)
    plt.close(fig)


def train_ppo(cfg: PPOConfig, command: str = "", algo: str = "ppo") -> str:
    """Train PPO (``algo="ppo"``) or MaskablePPO (``"maskable_ppo"``) at one budget, evaluate and save; returns the
    run directory."""
    from membudget.agents.rl import as_policy, train_ppo_allocator

    sub = "ppo" if algo == "ppo" else "maskable-ppo"
    run_dir = _start_run(sub, cfg, command, f"{sub}-{cfg.budget}-seed{cfg.seed}")
    env_kwargs = dict(cost_profile=cfg.cost_profile, late_policy=cfg.late_policy)
    model, history = train_ppo_allocator(
        _budget(cfg.budget), algo=algo, total_timesteps=cfg.total_timesteps, seed=cfg.seed, n_envs=cfg.n_envs,
        n_steps=cfg.n_steps, batch_size=cfg.batch_size, n_epochs=cfg.n_epochs, learning_rate=cfg.learning_rate,
        gamma=cfg.gamma, gae_lambda=cfg.gae_lambda, ent_coef=cfg.ent_coef, net_arch=_net_arch(cfg.net_arch),
        eval_every=cfg.eval_every, per_step_cap=cfg.per_step_cap, progress_bar=_bar(cfg.progress_bar),
        torch_threads=cfg.torch_threads, **env_kwargs)
    model.save(os.path.join(run_dir, "model.zip"))
    return _finish_run(run_dir, sub, cfg, history, history[-1]["wall_clock"], model.num_timesteps, as_policy(model),
                       [cfg.budget], env_kwargs)


def train_conditioned(cfg: ConditionedPPOConfig, command: str = "") -> str:
    """Train one budget-conditioned PPO across ``cfg.budgets``, evaluate at each budget and save."""
    from membudget.agents.rl import train_conditioned_ppo

    budgets = [_budget(b.strip()) for b in cfg.budgets.split(",") if b.strip()]
    if not budgets:
        raise ValueError("--budgets must name at least one budget level")
    run_dir = _start_run("ppo-conditioned", cfg, command, f"ppo-conditioned-seed{cfg.seed}")
    env_kwargs = dict(cost_profile=cfg.cost_profile, late_policy=cfg.late_policy)
    model, history = train_conditioned_ppo(
        budgets, total_timesteps=cfg.total_timesteps, seed=cfg.seed, envs_per_budget=cfg.envs_per_budget,
        n_steps=cfg.n_steps, batch_size=cfg.batch_size, n_epochs=cfg.n_epochs, learning_rate=cfg.learning_rate,
        gamma=cfg.gamma, gae_lambda=cfg.gae_lambda, ent_coef=cfg.ent_coef, net_arch=_net_arch(cfg.net_arch),
        eval_every=cfg.eval_every, per_step_cap=cfg.per_step_cap, progress_bar=_bar(cfg.progress_bar),
        torch_threads=cfg.torch_threads, **env_kwargs)
    model.save(os.path.join(run_dir, "model.zip"))
    return _finish_run(run_dir, "ppo-conditioned", cfg, history, history[-1]["wall_clock"], model.num_timesteps,
                       model, budgets, env_kwargs)


def train_imitation(cfg: ImitationConfig, command: str = "", method: str = "bc") -> str:
    """Behaviour cloning (``method="bc"``) or DAgger (``"dagger"``) from the hindsight DP; returns the run
    directory."""
    from membudget.agents.imitation import fit_bc, fit_dagger

    if method not in ("bc", "dagger"):
        raise ValueError(f"method must be 'bc' or 'dagger', got {method!r}")
    if cfg.train_weeks < 1:
        raise ValueError("--train-weeks must be positive")
    if cfg.train_first_seed < 2000 or cfg.train_first_seed + cfg.train_weeks > 4000:
        raise ValueError("training weeks must lie in the development range 2000-3999")
    run_dir = _start_run(method, cfg, command, f"{method}-{cfg.budget}-seed{cfg.seed}")
    seeds = list(range(cfg.train_first_seed, cfg.train_first_seed + cfg.train_weeks))
    bar = None
    if _bar(cfg.progress_bar):
        from tqdm import tqdm

        bar = tqdm(total=1 if method == "bc" else cfg.iterations, desc=method)

    def progress(msg):
        if bar is not None:
            bar.set_postfix_str(msg)
            bar.update(1)

    if method == "bc":
        policy, history = fit_bc(seeds, _budget(cfg.budget), epochs=cfg.epochs, hidden=cfg.hidden, seed=cfg.seed,
                                 progress=progress)
    else:
        policy, history = fit_dagger(seeds, _budget(cfg.budget), iterations=cfg.iterations, epochs=cfg.epochs,
                                     hidden=cfg.hidden, seed=cfg.seed, progress=progress)
    if bar is not None:
        bar.close()
    policy.save(os.path.join(run_dir, "model.npz"))
    return _finish_run(run_dir, method, cfg, history, history[-1]["wall_clock"], history[-1]["env_steps"], policy,
                       [cfg.budget], {"action_mode": "scores"})


CHOICES = {"progress_bar": ("on", "off", "auto"), "learning_curve": ("on", "off"), "family": ("db", "os"),
           "profile": ("strong", "mid", "weak"), "strategy": ("implementation", "reasoning", "capacity"),
           "population": ("locomo", "longmemeval", "hotpotqa"), "backbone": ("llama", "qwen"),
           "lam_conditioned": ("on", "off"), "use_beta": ("on", "off"), "normalize_reward": ("on", "off"),
           "scope": ("sports", "home", "code"), "memory": ("full", "no_replay_gate", "no_validation"),
           "bc_teacher": ("expected", "hindsight")}


def _add_fields(parser, cls, suppress=False, defaults=None):
    defaults = defaults or {}
    for f in dataclasses.fields(cls):
        default = defaults.get(f.name, f.default)
        kw = {"type": type(f.default), "default": argparse.SUPPRESS if suppress else default,
              "help": f"(default: {default})"}
        if f.name in CHOICES:
            kw["choices"] = CHOICES[f.name]
        parser.add_argument(f"--{f.name.replace('_', '-')}", **kw)
    if suppress:
        parser.add_argument("--config", default=argparse.SUPPRESS,
                            help="JSON or YAML file of flag values (flags on the command line override it)")


def load_config_file(path: str) -> dict:
    """Flag values from a JSON or YAML file (data only: json.load / yaml.safe_load); keys may use dashes."""
    with open(path) as f:
        text = f.read()
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:  # pragma: no cover - PyYAML ships with most stacks
            raise ImportError("reading a YAML config needs PyYAML (pip install pyyaml); or use JSON") from None
        data = yaml.safe_load(text)
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e}); YAML files must end in .yaml or .yml") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the config must be a mapping of flag names to values")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def resolve_config(cls, given: dict, file_values: dict, defaults=None, source="config"):
    """Dataclass defaults < subcommand defaults < file < flags; file values are type-checked."""
    values = {f.name: f.default for f in dataclasses.fields(cls)}
    values.update(defaults or {})
    types = {f.name: type(f.default) for f in dataclasses.fields(cls)}
    unknown = sorted(set(file_values) - set(types))
    if unknown:
        raise ValueError(f"{source}: unknown keys {unknown}; known: {sorted(types)}")
    for k, v in file_values.items():
        t = types[k]
        if t is str and isinstance(v, list):  # e.g. budgets: [B5, B10] or net_arch: [64, 64]
            v = ",".join(str(x) for x in v)
        if t is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if t is float and isinstance(v, str):  # YAML 1.1 reads 1e-3 as a string
            try:
                v = float(v)
            except ValueError:
                pass
        if t is str and isinstance(v, int) and not isinstance(v, bool):  # e.g. budget: 42
            v = str(v)
        if not isinstance(v, t) or isinstance(v, bool):
            raise ValueError(f"{source}: {k} must be {t.__name__}, got {v!r}")
        if k in CHOICES and v not in CHOICES[k]:
            raise ValueError(f"{source}: {k} must be one of {CHOICES[k]}, got {v!r}")
        values[k] = v
    values.update(given)
    return cls(**values)


SUBCOMMANDS = {
    "ppo": (PPOConfig, "SB3 PPO (MultiInputPolicy) on PMWeek-v0 at one budget", {},
            functools.partial(train_ppo, algo="ppo")),
    "maskable-ppo": (PPOConfig, "sb3-contrib MaskablePPO (candidate mask) on PMWeek-v0 at one budget", {},
                     functools.partial(train_ppo, algo="maskable_ppo")),
    "ppo-conditioned": (ConditionedPPOConfig, "one budget-conditioned PPO across B5-B20", {}, train_conditioned),
    "bc": (ImitationConfig, "behaviour cloning of the hindsight DP", {"iterations": 0},
           functools.partial(train_imitation, method="bc")),
    "dagger": (ImitationConfig, "DAgger from the hindsight DP", {},
               functools.partial(train_imitation, method="dagger")),
    "tiers": (TiersConfig, "SB3 PPO tier router on TierRouting-v0 (BC warm start from an oracle)", {}, train_tiers),
    "proactive-ppo": (ProactivePPOConfig, "SB3 PPO (memory depth and decision) on ProactiveStream-v0", {},
                      train_proactive_ppo),
}
"""``python -m membudget.train <name>``: (config class, help text, default overrides, ``runner(cfg, command)``);
every field of the config is a flag and a key of ``--config FILE``."""


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (cls, text, defaults, _) in SUBCOMMANDS.items():
        _add_fields(sub.add_parser(name, help=text, description=text), cls, suppress=True, defaults=defaults)
    _add_fields(sub.add_parser("replay-ppo", help="SB3 PPO on ReplayStream-v0"), ReplayPPOConfig)
    args = vars(parser.parse_args(argv))
    which = args.pop("command")
    argv = sys.argv[1:] if argv is None else argv
    command = "python -m membudget.train " + " ".join(shlex.quote(a) for a in argv)
    if which == "replay-ppo":
        return train_replay_ppo(ReplayPPOConfig(**args), command)
    cls, _, defaults, runner = SUBCOMMANDS[which]
    config_path = args.pop("config", None)
    file_values = load_config_file(config_path) if config_path else {}
    return runner(resolve_config(cls, args, file_values, defaults, source=config_path or "config"), command)

if __name__ == "__main__":
    main()

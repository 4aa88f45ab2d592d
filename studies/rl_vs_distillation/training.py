"""The runs behind the PMWeek training subcommands (``TRAIN_COMMANDS`` of
:mod:`~membudget.studies.rl_vs_distillation.configs`): each trains one learner, saves its model, ``config.json``,
``metrics.csv`` and learning curves in a run directory and returns that directory."""

from __future__ import annotations

import dataclasses
import functools
import os

import torch

from membudget.agents.imitation import fit_bc, fit_dagger
from membudget.agents.ppo import PPOConfig
from membudget.agents.rl import (ConditionedPPOAllocatorConfig, PPOAllocatorConfig, as_policy, train_conditioned_ppo,
                                 train_ppo_allocator)
from membudget.agents.tasks import TASKS
from membudget.studies.rl_vs_distillation.configs import (ConditionedPPOConfig, ImitationConfig, NativePPOConfig,
                                                          SB3PPOConfig, initial_student)
from membudget.studies.runs import finish_run, parse_budget, show_bar, start_run


def task_run_name(subcommand: str, cfg) -> str:
    """The default run directory name of a learner that trains on either task: ``<subcommand>-<budget>-seed<seed>``,
    the task named after the subcommand when it is not pmweek (so that a conversation run does not take a PMWeek
    run's directory)."""
    task = "" if cfg.task == "pmweek" else f"{cfg.task}-"
    return f"{subcommand}-{task}{cfg.budget}-seed{cfg.seed}"


def train_native(cfg: NativePPOConfig, command: str = "") -> str:
    """PPO with the per-resource actor on the native vector env (optionally from a student); returns the run
    directory."""
    from membudget.agents.imitation import dp_demonstrations
    from membudget.agents.ppo import train_ppo as native_ppo

    task = TASKS[cfg.task]
    budget = parse_budget(cfg.budget, task.levels)
    env_kwargs = task.env_kwargs(per_step_cap=cfg.per_step_cap, cost_profile=cfg.cost_profile,
                                 late_policy=cfg.late_policy)
    init = None if not cfg.init_from else initial_student(cfg).net
    bc_data = (dp_demonstrations(list(task.train_seeds)[: cfg.bc_weeks], budget, task=task).arrays()
               if cfg.bc_coef > 0 else None)
    settings = PPOConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(PPOConfig)})
    run_dir = start_run("ppo", cfg, command, task_run_name("ppo", cfg))
    def progress(row):
        print(f"{row['env_steps']} steps: validation {task.quality} {row[f'val_{task.quality}']:.4f}", flush=True)

    policy, history = native_ppo(budget, settings, seed=cfg.seed, task=task, init=init, bc_data=bc_data,
                                 report=progress if show_bar(cfg.progress_bar) else None)
    policy.save(os.path.join(run_dir, "model.npz"))
    # what engine="auto", critic_dtype="auto" and compiled_backend="auto" resolved to on this machine (results are
    # reproducible per engine, dtype and backend), and the env steps of the actor kept by keep_best
    resolved = {k: policy.config[k] for k in ("engine", "critic_dtype", "compiled_backend", "selected_env_steps")}
    return finish_run(run_dir, "ppo", cfg, history, policy, [cfg.budget], {"action_mode": "scores", **env_kwargs},
                      task=task, training=resolved)


def train_sb3_ppo(cfg: SB3PPOConfig, command: str = "", algo: str = "ppo") -> str:
    """Train SB3 PPO (``algo="ppo"``) or MaskablePPO (``"maskable_ppo"``) at one budget, evaluate and save; returns
    the run directory."""
    sub = "sb3-ppo" if algo == "ppo" else "sb3-maskable-ppo"
    run_dir = start_run(sub, cfg, command, f"{sub}-{cfg.budget}-seed{cfg.seed}")
    settings = PPOAllocatorConfig.of(cfg)
    model, history = train_ppo_allocator(parse_budget(cfg.budget), settings, algo=algo, seed=cfg.seed,
                                         progress_bar=show_bar(cfg.progress_bar))
    model.save(os.path.join(run_dir, "model.zip"))
    return finish_run(run_dir, sub, cfg, history, as_policy(model), [cfg.budget], settings.env_kwargs())


def train_conditioned(cfg: ConditionedPPOConfig, command: str = "") -> str:
    """Train one budget-conditioned PPO across ``cfg.budgets``, evaluate at each budget and save."""
    budgets = [parse_budget(b) for b in cfg.budget_names()]
    if not budgets:
        raise ValueError("--budgets must name at least one budget level")
    run_dir = start_run("sb3-ppo-conditioned", cfg, command, f"sb3-ppo-conditioned-seed{cfg.seed}")
    settings = ConditionedPPOAllocatorConfig.of(cfg)
    model, history = train_conditioned_ppo(budgets, settings, seed=cfg.seed, progress_bar=show_bar(cfg.progress_bar))
    model.save(os.path.join(run_dir, "model.zip"))
    return finish_run(run_dir, "sb3-ppo-conditioned", cfg, history, model, budgets, settings.env_kwargs())


def train_imitation(cfg: ImitationConfig, command: str = "", method: str = "bc") -> str:
    """Behaviour cloning (``method="bc"``) or DAgger (``"dagger"``) from the hindsight DP; returns the run
    directory."""
    if method not in ("bc", "dagger"):
        raise ValueError(f"method must be 'bc' or 'dagger', got {method!r}")
    if method == "dagger" and not isinstance(cfg, ImitationConfig):  # its iterations (>= 1) checked when made
        raise TypeError(f"dagger takes a DAggerConfig (with iterations), got {type(cfg).__name__}")
    task = TASKS[cfg.task]  # the config checked its settings and training range
    run_dir = start_run(method, cfg, command, task_run_name(method, cfg))
    seeds = list(range(cfg.train_first_seed, cfg.train_first_seed + cfg.train_weeks))
    bar = None
    if show_bar(cfg.progress_bar):
        from tqdm import tqdm

        bar = tqdm(total=1 if method == "bc" else cfg.iterations, desc=method)

    def progress(msg):
        if bar is not None:
            bar.set_postfix_str(msg)
            bar.update(1)

    if cfg.torch_threads:
        torch.set_num_threads(int(cfg.torch_threads))
    fit = fit_bc if method == "bc" else functools.partial(fit_dagger, iterations=cfg.iterations)
    policy, history = fit(seeds, parse_budget(cfg.budget, task.levels), epochs=cfg.epochs, hidden=cfg.hidden,
                          context=cfg.context == "on", seed=cfg.seed, progress=progress, task=task)
    if bar is not None:
        bar.close()
    policy.save(os.path.join(run_dir, "model.npz"))
    return finish_run(run_dir, method, cfg, history, policy, [cfg.budget], {"action_mode": "scores"}, task=task)


def train_sb3(cfg: SB3PPOConfig, command: str = "") -> str:
    """``python -m membudget.train sb3-ppo``."""
    return train_sb3_ppo(cfg, command, algo="ppo")


def train_sb3_maskable(cfg: SB3PPOConfig, command: str = "") -> str:
    """``python -m membudget.train sb3-maskable-ppo``."""
    return train_sb3_ppo(cfg, command, algo="maskable_ppo")


def train_bc(cfg: ImitationConfig, command: str = "") -> str:
    """``python -m membudget.train bc``."""
    return train_imitation(cfg, command, method="bc")


def train_dagger(cfg: ImitationConfig, command: str = "") -> str:
    """``python -m membudget.train dagger``."""
    return train_imitation(cfg, command, method="dagger")

"""RL versus distillation on ``PMWeek-v0``: PPO, MaskablePPO, budget-conditioned PPO, BC and DAgger trained on
identical dynamics and compared with the hindsight DP, current-greedy and BudgetPM's gates.

- the training runs behind ``python -m membudget.train ppo | sb3-ppo | sb3-maskable-ppo | sb3-ppo-conditioned |
  bc | dagger``
  (:data:`TRAIN_COMMANDS`): one config dataclass each, a run directory with the model, ``config.json``,
  ``metrics.csv`` and learning curves;
- :func:`run_benchmark`, :func:`format_benchmark`, :func:`plot_curves` and :func:`benchmark_main`
  (``python -m membudget.evaluate rl-vs-distillation [--quick]``), which writes ``docs/rl_vs_distillation.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass

import numpy as np

from membudget.agents.imitation import DEFAULTS as IMITATION, fit_bc, fit_dagger
from membudget.agents.ppo import PPOConfig
from membudget.agents.rl import (CONDITIONED_BUDGETS, TRAIN_SEEDS, ConditionedPPOAllocatorConfig,
                                 PPOAllocatorConfig, as_policy, train_conditioned_ppo, train_ppo_allocator)
from membudget.agents.tasks import TASKS
from membudget.envs.pm import budget_levels, generate_episode
from membudget.envs.pm.world import WorldConfig
from membudget.studies.cli import run_folder
from membudget.studies.execution import add_backend_flags, executor_beside_pool
from membudget.studies.protocol import bootstrap_ci, evaluate_policy, rollout, write_page
from membudget.studies.runs import TrainCommand, parse_budget, finish_run, show_bar, start_run
from membudget.studies.suite import fit_suite
from membudget.teachers import CurrentGreedy, HindsightDP, SchedulePolicy


@dataclass(frozen=True)
class _RunOutput:
    """Settings every PMWeek training subcommand shares (every field is a command-line flag of the same name)."""

    eval_first_seed: int = 4010
    """First week of the final evaluation (never trained on; 4010-4029 lie in the validation range of
    docs/protocol.md: the held-out weeks 8000-8029 / 9000-9029 are for a study's final figures)."""
    eval_weeks: int = 20
    """Number of weeks of the final evaluation (at every budget)."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: <subcommand>-<budget>-seed<seed>)."""
    progress_bar: str = "auto"
    """Show progress: on, off or auto (on when attached to a terminal)."""
    learning_curve: str = "on"
    """Write learning_curve.csv / learning_curve.png (on, off)."""


@dataclass(frozen=True)
class SB3PPOConfig(_RunOutput, PPOAllocatorConfig):
    """Stable-Baselines3 PPO / sb3-contrib MaskablePPO on PMWeek-v0 at one budget (membudget.agents.rl; every field
    is a flag): :class:`~membudget.agents.rl.PPOAllocatorConfig`'s fields beside the run's own."""

    budget: str = "B10"
    """Episode budget: a level (B5...B80), an integer or none."""
    seed: int = 0
    """Seeds the policy, the order of the training weeks (development seeds 2000-3999) and everything else."""


@dataclass(frozen=True)
class ConditionedPPOConfig(_RunOutput, ConditionedPPOAllocatorConfig):
    """One budget-conditioned PPO trained across several budgets at once (membudget.agents.rl; every field is a
    flag): :class:`~membudget.agents.rl.ConditionedPPOAllocatorConfig`'s fields beside the run's own."""

    budgets: str = ",".join(CONDITIONED_BUDGETS)
    """Comma-separated budget levels trained at once (the target-fraction feature tells the policy which)."""
    seed: int = 0
    """Seeds the policy, the order of the training weeks (development seeds 2000-3999) and everything else."""


@dataclass(frozen=True)
class ImitationConfig(_RunOutput):
    """Behaviour cloning / DAgger from the hindsight DP (membudget.agents.imitation; every field is a flag). The
    defaults are :data:`membudget.agents.imitation.DEFAULTS`, the settings chosen on validation weeks; the learning
    rate, minibatch and input standardisation are always theirs."""

    budget: str = "B10"
    """Budget level (B5...B80)."""
    seed: int = 0
    """Seeds the student's initialisation and minibatch order."""
    train_first_seed: int = 2000
    """First training week (development range 2000-3999)."""
    train_weeks: int = IMITATION.weeks
    """Number of consecutive training weeks."""
    epochs: int = IMITATION.epochs
    """Training epochs per fit."""
    hidden: int = IMITATION.width
    """Width of both hidden layers of the per-resource network."""
    context: str = "on" if IMITATION.context else "off"
    """on: the resources see the candidates' mean first-layer activation (off: independent resources)."""
    iterations: int = IMITATION.iterations
    """DAgger iterations (dagger only)."""
    task: str = "pmweek"
    """Environment: pmweek (PMWeek-v0; training weeks in 2000-3999) or conversation (ConversationPM-v0, from its
    exact hindsight optimum; training conversations in 2000-2999, budget levels B20...B80)."""


@dataclass(frozen=True)
class NativePPOConfig(_RunOutput, PPOConfig):
    """PPO with the per-resource actor on the native vector env (membudget.agents.ppo; every field is a flag): the
    PPO settings are :class:`~membudget.agents.ppo.PPOConfig`'s fields with its validated defaults (the study's
    PPO), beside the run's own."""

    budget: str = "B10"
    """Episode budget: a level (B5...B80), an integer or none."""
    seed: int = 0
    """Seeds the networks, the proposals and the order of the training weeks (development seeds 2000-3999)."""
    init_from: str = ""
    """Start the actor from a fitted student (a bc / dagger run directory or its model.npz): distil-then-RL
    (validated there with learning rate 3e-4 and critic warm-up 20)."""
    bc_weeks: int = 40
    """Development weeks whose DP schedules the behaviour-cloning loss uses (with bc_coef > 0)."""
    task: str = "pmweek"
    """Environment: pmweek (PMWeek-v0) or conversation (ConversationPM-v0: the 12 development conversations,
    validation conversations from 3000, budget levels B20...B80; unit costs, no counts for the critic; engine
    autograd)."""


def train_native(cfg: NativePPOConfig, command: str = "") -> str:
    """PPO with the per-resource actor on the native vector env (optionally from a student); returns the run
    directory."""
    from membudget.agents.imitation import dp_demonstrations
    from membudget.agents.per_resource import StudentPolicy
    from membudget.agents.ppo import train_ppo as native_ppo

    task = TASKS[cfg.task]
    budget = parse_budget(cfg.budget, task.levels)
    env_kwargs = task.env_kwargs(per_step_cap=cfg.per_step_cap, cost_profile=cfg.cost_profile,
                                 late_policy=cfg.late_policy)
    init = None
    if cfg.init_from:
        path = os.path.join(cfg.init_from, "model.npz") if os.path.isdir(cfg.init_from) else cfg.init_from
        init = StudentPolicy.load(path).net
    bc_data = (dp_demonstrations(list(task.train_seeds)[: cfg.bc_weeks], budget, task=task).arrays()
               if cfg.bc_coef > 0 else None)
    settings = PPOConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(PPOConfig)})
    run_dir = start_run("ppo", cfg, command, f"ppo-{cfg.budget}-seed{cfg.seed}")
    def progress(row):
        print(f"{row['env_steps']} steps: validation {task.quality} {row[f'val_{task.quality}']:.4f}", flush=True)

    policy, history = native_ppo(budget, settings, seed=cfg.seed, task=task, init=init, bc_data=bc_data,
                                 report=progress if show_bar(cfg.progress_bar) else None)
    policy.save(os.path.join(run_dir, "model.npz"))
    return finish_run(run_dir, "ppo", cfg, history, policy, [cfg.budget], {"action_mode": "scores", **env_kwargs},
                      task=task)


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
    budgets = [parse_budget(b.strip()) for b in cfg.budgets.split(",") if b.strip()]
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
    if cfg.train_weeks < 1:
        raise ValueError("--train-weeks must be positive")
    task = TASKS[cfg.task]
    first, end = task.train_range
    if cfg.train_first_seed < first or cfg.train_first_seed + cfg.train_weeks > end:
        raise ValueError(f"training episodes of {task.name} must lie in its development range {first}-{end - 1}")
    run_dir = start_run(method, cfg, command, f"{method}-{cfg.budget}-seed{cfg.seed}")
    seeds = list(range(cfg.train_first_seed, cfg.train_first_seed + cfg.train_weeks))
    bar = None
    if show_bar(cfg.progress_bar):
        from tqdm import tqdm

        bar = tqdm(total=1 if method == "bc" else cfg.iterations, desc=method)

    def progress(msg):
        if bar is not None:
            bar.set_postfix_str(msg)
            bar.update(1)

    if method == "bc":
        policy, history = fit_bc(seeds, parse_budget(cfg.budget, task.levels), epochs=cfg.epochs, hidden=cfg.hidden,
                                 context=cfg.context == "on", seed=cfg.seed, progress=progress, task=task)
    else:
        policy, history = fit_dagger(seeds, parse_budget(cfg.budget, task.levels), iterations=cfg.iterations, epochs=cfg.epochs,
                                     hidden=cfg.hidden, context=cfg.context == "on", seed=cfg.seed,
                                     progress=progress, task=task)
    if bar is not None:
        bar.close()
    policy.save(os.path.join(run_dir, "model.npz"))
    return finish_run(run_dir, method, cfg, history, policy, [cfg.budget], {"action_mode": "scores"}, task=task)




TRAIN_COMMANDS = {
    "ppo": TrainCommand(NativePPOConfig, "PPO with the per-resource actor on the native vector env: the study's "
                                         "learner and settings (distil-then-RL with --init-from)", train_native),
    "sb3-ppo": TrainCommand(SB3PPOConfig, "Stable-Baselines3 PPO on PMWeek-v0 at one budget (per-resource actor; "
                                          "--policy mlp: SB3's flat MultiInputPolicy)",
                            functools.partial(train_sb3_ppo, algo="ppo"), {"total_timesteps": 20_000}),
    "sb3-maskable-ppo": TrainCommand(SB3PPOConfig, "sb3-contrib MaskablePPO (candidate mask) on PMWeek-v0 at one "
                                                   "budget", functools.partial(train_sb3_ppo, algo="maskable_ppo"),
                                     {"total_timesteps": 20_000}),
    "sb3-ppo-conditioned": TrainCommand(ConditionedPPOConfig, "one budget-conditioned SB3 PPO across B5-B20",
                                        train_conditioned, {"total_timesteps": 40_000}),
    "bc": TrainCommand(ImitationConfig, "behaviour cloning of the hindsight DP",
                       functools.partial(train_imitation, method="bc"), {"iterations": 0}),
    "dagger": TrainCommand(ImitationConfig, "DAgger from the hindsight DP",
                           functools.partial(train_imitation, method="dagger")),
}
"""The PMWeek learners' ``python -m membudget.train`` subcommands. The SB3 ones train a short run unless
``--total-timesteps`` says otherwise (the library's defaults, :class:`~membudget.agents.rl.PPOAllocatorConfig`'s
200,000 steps and :class:`~membudget.agents.rl.ConditionedPPOAllocatorConfig`'s 400,000, were never tuned
either: the SB3 path is not a tuned arm)."""



BENCH_FULL = dict(
    budgets=("B5", "B10", "B20"), learner_seeds=(0, 1, 2),
    eval_seeds=tuple(range(8000, 8030)) + tuple(range(9000, 9030)), val_seeds=tuple(range(4000, 4030)),
    ppo=PPOConfig(),
    finetune=PPOConfig(total_timesteps=1_000_000, learning_rate=3e-4, critic_warmup=20),
    counts_steps=1_000_000, sb3_steps=300_000, imitation_weeks=IMITATION.weeks, epochs=IMITATION.epochs,
    dagger_iterations=IMITATION.iterations,
    bootstrap=100_000, workers=2, suite=None)
"""The full comparison. PPO's settings (``ppo``: :class:`~membudget.agents.ppo.PPOConfig`'s defaults; ``finetune``,
distil-then-RL's) were chosen on validation weeks 4000-4029 only (docs/studies.md lists the trials)."""
BENCH_QUICK = dict(
    budgets=("B10",), learner_seeds=(0, 1), eval_seeds=(8000, 8001, 9000, 9001), val_seeds=(4000, 4001),
    ppo=PPOConfig(total_timesteps=2 * 8 * 80, n_envs=8, n_minibatches=2, eval_every=8 * 80),
    finetune=PPOConfig(total_timesteps=8 * 80, n_envs=8, n_minibatches=2, learning_rate=3e-4, critic_warmup=1,
                       eval_every=8 * 80),
    counts_steps=8 * 80, sb3_steps=256, imitation_weeks=2, epochs=3, dagger_iterations=1, bootstrap=1000,
    workers=1, suite=dict(dev_seeds=range(2000, 2005), temporal_budgets=("B10",), analysis_seeds=range(4000, 4002)))
REFERENCES = ("HindsightDP", "CurrentGreedy", "Sequential", "Myopic", "Static")
LEARNERS = ("PPO", "DAgger→PPO", "BC", "DAgger", "PPO + counts critic", "PPO, flat MLP", "SB3 PPO")
"""Every learner uses the per-resource network (:class:`~membudget.agents.per_resource.PerResourceNet`) but the
architecture ablation. PPO: :func:`membudget.agents.ppo.train_ppo`; DAgger→PPO: the same PPO started from the
DAgger student; PPO + counts critic: its critic also reads the running TP / FP / FN; PPO, flat MLP: the same PPO
loop and settings with a flat MLP actor (:class:`~membudget.agents.per_resource.FlatMLPNet`, the architecture
ablation); SB3 PPO: Stable-Baselines3 with the per-resource actor (binary proposals, SB3's own settings and a
small step budget: the SB3 path, not a tuned arm). The last three at B10 only."""
B10_ONLY = ("PPO + counts critic", "PPO, flat MLP", "SB3 PPO")


def _paired(x, ref, n):
    d = np.asarray(x, float) - np.asarray(ref, float)
    d = d[~np.isnan(d)]
    return bootstrap_ci(d, n) if d.size else (float("nan"),) * 3


def _job(spec):
    """One training run of the comparison (picklable, seeded by its own key; runs in a worker process):
    ``(kind, budget, seed, params, init)`` -> ``{per_week, history, training, net}``."""
    import torch

    from membudget.agents.ppo import train_ppo as native_ppo

    kind, budget, seed, P, init = spec
    torch.set_num_threads(1)
    test = list(P["eval_seeds"])
    train_weeks = list(TRAIN_SEEDS)[: P["imitation_weeks"]]
    start = time.perf_counter()
    calls, net = 0, None
    if kind in ("PPO", "DAgger→PPO", "PPO + counts critic", "PPO, flat MLP"):
        kw = {}
        if kind == "PPO + counts critic":
            kw.update(total_timesteps=P["counts_steps"], critic_counts=True)
        if kind == "PPO, flat MLP":
            kw.update(actor="flat-mlp", engine="autograd")  # the compiled engine trains the per-resource actor only
        policy, history = native_ppo(budget, P["finetune"] if kind == "DAgger→PPO" else P["ppo"], seed=seed,
                                     eval_seeds=P["val_seeds"], test_seeds=test, init=init["net"] if init else None,
                                     **kw)
        if init:  # distil-then-RL's curve starts where its student's training ended
            for row in history:
                row["env_steps"] += init["env_steps"]
        steps = history[-1]["env_steps"]
        calls = init["teacher_calls"] if init else 0
        per_week = rollout(policy, test, budget=budget, per_step_cap=2, action_mode="scores")
        wall = history[-1]["wall_clock"]
    elif kind in ("BC", "DAgger"):
        fit = fit_bc if kind == "BC" else functools.partial(fit_dagger, iterations=P["dagger_iterations"])
        policy, history = fit(train_weeks, budget, epochs=P["epochs"], seed=seed)
        steps, calls, wall = history[-1]["env_steps"], policy.config["teacher_calls"], history[-1]["wall_clock"]
        per_week = rollout(policy, test, budget=budget, per_step_cap=2, action_mode="scores")
        history[-1]["test_set_f1"] = float(per_week["set_f1"].mean())
        net = {"net": policy.net, "env_steps": steps, "teacher_calls": calls}  # torch modules pickle to workers
    else:
        model, history = train_ppo_allocator(budget, total_timesteps=P["sb3_steps"], seed=seed, eval_every=0)
        policy = as_policy(model)
        steps, wall = int(model.num_timesteps), history[-1]["wall_clock"]
        per_week = rollout(policy, test, budget=budget, per_step_cap=2)
        history[-1]["test_set_f1"] = float(per_week["set_f1"].mean())
    return {"key": (kind, budget, seed), "per_week": per_week, "history": history, "net": net,
            "training": {"env_steps": int(steps), "teacher_calls": int(calls), "wall_clock": float(wall),
                         "job_seconds": time.perf_counter() - start}}


def _run_jobs(specs, workers, say):
    if workers <= 1 or len(specs) <= 1:
        return [_job(s) for s in specs]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    out = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
        for r in ex.map(_job, specs):
            say(f"done {r['key']}")
            out.append(r)
    return out


def run_benchmark(quick: bool = False, progress=None, executor=None, **overrides) -> dict:
    """Train every learner at every budget and learner seed, evaluate everything on the held-out weeks; returns
    the results dict (``executor``: a study executor, e.g. Ray; default: ``workers`` local processes):
    ``per_seed[(budget, method)]`` (one rollout-metrics dict per learner seed),
    ``per_week[(budget, method)]`` (per-week metrics averaged over learner seeds; references once),
    ``training[(method, budget)]`` (mean env steps, teacher calls, wall clock over seeds), ``curves[(method,
    budget)]`` (one history per seed) and the settings."""
    P = dict(BENCH_QUICK if quick else BENCH_FULL)
    P.update(overrides)
    say = progress or (lambda msg: None)
    jobs = functools.partial(executor.map, _job) if executor else lambda specs: _run_jobs(specs, P["workers"], say)
    budgets, seeds, lseeds = list(P["budgets"]), list(P["eval_seeds"]), list(P["learner_seeds"])
    levels = budget_levels()
    t_start = time.perf_counter()
    say("imitation students (BC, DAgger)")
    first = jobs([(k, b, s, P, None) for b in budgets for s in lseeds for k in ("BC", "DAgger")])
    dagger = {r["key"][1:]: r["net"] for r in first if r["key"][0] == "DAgger"}
    say("PPO, distil-then-RL, ablations")
    specs = [(k, b, s, P, dagger[(b, s)] if k == "DAgger→PPO" else None) for b in budgets for s in lseeds
             for k in ("PPO", "DAgger→PPO")]
    specs += [(k, "B10", s, P, None) for s in lseeds for k in B10_ONLY if "B10" in budgets]
    results = first + jobs(specs)
    per_seed, curves, training = {}, {}, {}
    for r in results:
        kind, b, _ = r["key"]
        per_seed.setdefault((b, kind), []).append(r["per_week"])
        curves.setdefault((kind, b), []).append(r["history"])
        training.setdefault((kind, b), []).append(r["training"])
    training = {k: {f: float(np.mean([t[f] for t in v])) for f in v[0]} for k, v in training.items()}
    per_week = {k: {m: np.mean([run[m] for run in v], axis=0) for m in v[0]} for k, v in per_seed.items()}
    say("teachers and references")
    suite = fit_suite(**(P["suite"] or {}), progress=lambda m: say(f"fit: {m}"),
                      **({"map": executor.map} if executor else {}))
    n_res = len(WorldConfig().resources)
    for b in budgets:
        weeks = [generate_episode(s) for s in seeds]
        dp = [HindsightDP(budget=levels[b], per_step_cap=2).solve(w) for w in weeks]
        per_week[(b, "HindsightDP")] = rollout(SchedulePolicy([s.schedule for s in dp], n_res), seeds,
                                               budget=b, per_step_cap=2)
        gap = float(np.max(np.abs(per_week[(b, "HindsightDP")]["set_f1"] - np.array([s.f1 for s in dp]))))
        if gap > 1e-9:
            raise RuntimeError(f"replaying the DP's schedules does not reproduce its Set F1 at {b} (gap {gap})")
        greedy = [CurrentGreedy(budget=levels[b], per_step_cap=2).solve(w) for w in weeks]
        per_week[(b, "CurrentGreedy")] = rollout(SchedulePolicy([s.schedule for s in greedy], n_res), seeds,
                                                 budget=b, per_step_cap=2)
        for name in ("Sequential", "Myopic", "Static"):
            if name == "Static" or (name.lower(), b) in suite.temporal:
                per_week[(b, name)] = evaluate_policy(suite, name, b, seeds)
    params = {k: dataclasses.asdict(v) if isinstance(v, PPOConfig) else v for k, v in P.items()}
    return {"params": params, "quick": quick, "budgets": budgets, "seeds": seeds, "learner_seeds": lseeds,
            "per_week": per_week, "per_seed": per_seed, "training": training, "curves": curves,
            "seconds": time.perf_counter() - t_start}


def _key(k):
    return "|".join(map(str, k))


def save_results(res, path) -> None:
    """The results of :func:`run_benchmark` as JSON (per-week arrays as lists), so the page and figure can be
    rendered again without training (``--render``)."""
    def arrays(d):
        return {m: np.asarray(v).tolist() for m, v in d.items()}

    data = {"params": {k: (v if not isinstance(v, range) else list(v)) for k, v in res["params"].items()},
            "quick": res["quick"], "budgets": res["budgets"], "seeds": res["seeds"],
            "learner_seeds": res["learner_seeds"], "seconds": res["seconds"], "command": res.get("command", ""),
            "per_week": {_key(k): arrays(v) for k, v in res["per_week"].items()},
            "per_seed": {_key(k): [arrays(r) for r in v] for k, v in res["per_seed"].items()},
            "training": {_key(k): v for k, v in res["training"].items()},
            "curves": {_key(k): v for k, v in res["curves"].items()}}
    with open(path, "w") as f:
        json.dump(data, f, default=lambda o: list(o) if isinstance(o, (range, tuple)) else str(o))


def load_results(path) -> dict:
    """Inverse of :func:`save_results`."""
    with open(path) as f:
        data = json.load(f)

    def arrays(d):
        return {m: np.asarray(v, dtype=np.float64) for m, v in d.items()}

    data["per_week"] = {tuple(k.split("|")): arrays(v) for k, v in data["per_week"].items()}
    data["per_seed"] = {tuple(k.split("|")): [arrays(r) for r in v] for k, v in data["per_seed"].items()}
    data["training"] = {tuple(k.split("|")): v for k, v in data["training"].items()}
    data["curves"] = {tuple(k.split("|")): v for k, v in data["curves"].items()}
    return data


def mean_curve(histories, key="test_set_f1"):
    """``[(env_steps, mean over seeds)]`` at the checkpoints every seed's history has."""
    common = sorted(set.intersection(*({r["env_steps"] for r in h if key in r} for h in histories)))
    return [(x, float(np.mean([next(r[key] for r in h if r["env_steps"] == x) for h in histories])))
            for x in common]


def steps_to_reach(res, method, budget, target) -> float | None:
    """First checkpoint at which the seed-mean held-out Set F1 of ``method`` reaches ``target`` (None: never)."""
    for x, y in mean_curve(res["curves"][(method, budget)]):
        if y >= target:
            return x
    return None


def goal_check(res) -> dict:
    """The issue's goals: PPO (seed mean) ≥ Sequential at B10 and within 0.01 of it at B5 / B20; distil-then-RL ≥
    max(BC, DAgger) at B10 with a paired 95% interval (over weeks, seed-averaged) that excludes a loss."""
    pw, n = res["per_week"], res["params"]["bootstrap"]
    out = {}
    for b in res["budgets"]:
        if (b, "PPO") in pw and (b, "Sequential") in pw:
            gap = float(pw[(b, "PPO")]["set_f1"].mean() - pw[(b, "Sequential")]["set_f1"].mean())
            out[f"ppo_vs_sequential_{b}"] = {"gap": gap, "met": gap >= 0 if b == "B10" else gap >= -0.01}
    if ("B10", "DAgger→PPO") in pw:
        best = max(("BC", "DAgger"), key=lambda m: pw[("B10", m)]["set_f1"].mean())
        d = _paired(pw[("B10", "DAgger→PPO")]["set_f1"], pw[("B10", best)]["set_f1"], n)
        out["distil_then_rl_B10"] = {"vs": best, "diff": d, "met": d[1] >= 0}
    return out


def format_benchmark(res, command: str = "") -> str:
    pw, ps, n_boot = res["per_week"], res["per_seed"], res["params"]["bootstrap"]
    seeds, lseeds = res["seeds"], res["learner_seeds"]
    ranges = ", ".join(f"{lo}-{hi}" for lo, hi in _ranges(seeds))
    L = ["# RL versus distillation on PMWeek-v0", "",
         f"Held-out weeks {ranges} ({len(seeds)} weeks), unit prices, N_max 2, late policy expire; learner seeds "
         f"{', '.join(map(str, lseeds))}. Every learner but the flat-MLP ablation uses the same policy class, the "
         "per-resource network (`membudget.agents.per_resource.PerResourceNet`: one shared MLP over each resource's "
         "27 features, the 9 budget features and its candidate bit, with the candidates' mean first-layer activation "
         "as context), and the same observation; learners train on development weeks from 2000 upward; PPO's "
         "settings were chosen on validation weeks 4000-4029, and PPO and DAgger→PPO keep the learning-curve point "
         "with the best Set F1 on those validation weeks (early stopping; no held-out week is read). Set F1 is the "
         "mean over learner seeds ± their standard deviation; differences are paired against Sequential over the "
         "same weeks (per-week Set F1 averaged over learner seeds), percentile bootstrap 95% intervals "
         f"({n_boot:,} resamples). The hindsight DP replays its "
         "optimal schedule (an upper bound that sees the whole week); current-greedy replays the future-blind "
         "greedy oracle's schedule; Sequential, Myopic and Static are BudgetPM's gates (development weeks "
         "2000-2019)." + (" **Quick mode: tiny training budgets, not a result.**" if res["quick"] else ""), ""]
    L += ["| budget | method | Set F1 (seeds) | vs Sequential [95% CI] | on-time recall | realized cost | "
          "env steps | teacher calls | wall clock (s) |", "|" + "---|" * 9]
    for b in res["budgets"]:
        ref = pw.get((b, "Sequential"))
        for m in REFERENCES[:2] + LEARNERS + REFERENCES[2:]:
            if (b, m) not in pw:
                continue
            r = pw[(b, m)]
            if m in LEARNERS:
                per = [float(run["set_f1"].mean()) for run in ps[(b, m)]]
                f1 = f"{np.mean(per):.4f} ± {np.std(per):.4f} ({len(per)})"
                t = res["training"][(m, b)]
                cost = f"{t['env_steps']:,.0f} | {t['teacher_calls']:,.0f} | {t['wall_clock']:.0f}"
            else:
                f1, cost = f"{r['set_f1'].mean():.4f}", "| |"
            if ref is None or m == "Sequential":
                ci = "reference" if m == "Sequential" else ""
            else:
                d, lo, hi = _paired(r["set_f1"], ref["set_f1"], n_boot)
                ci = f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]"
            L.append(f"| {b} | {m} | {f1} | {ci} | {np.nanmean(r['on_time_recall']):.4f} | "
                     f"{r['realized_cost'].mean():.2f} | {cost} |")
    L += ["", "Environment steps needed to reach a reference's held-out Set F1 (first learning-curve checkpoint at "
          "which the seed-mean reaches it; PPO-style learners only, curves every "
          f"{res['params']['ppo'].get('eval_every', res['params'].get('eval_every')):,} steps):", "",
          "| method | budget | Static | Sequential | 95% of the hindsight DP |", "|---|---|---|---|---|"]
    for (m, b), hist in res["curves"].items():
        if len(hist[0]) < 2 or (b, "Static") not in pw:
            continue
        cells = []
        for target in (pw[(b, "Static")]["set_f1"].mean(), pw[(b, "Sequential")]["set_f1"].mean()
                       if (b, "Sequential") in pw else np.inf, 0.95 * pw[(b, "HindsightDP")]["set_f1"].mean()):
            x = steps_to_reach(res, m, b, target)
            cells.append("not reached" if x is None else f"{x:,}")
        L.append(f"| {m} | {b} | " + " | ".join(cells) + " |")
    stopped = [(m, b) for (m, b) in res["curves"] if m in ("PPO", "DAgger→PPO") and (b, "Sequential") in pw
               and all("test_set_f1" in r for h in res["curves"][(m, b)] for r in h)]
    if stopped and res["params"]["ppo"].get("keep_best"):
        L += ["", "**Early stopping.** PPO and DAgger→PPO keep the learning-curve point with the best validation "
              "Set F1. The points kept and what the last point would have scored on the held-out weeks instead "
              "(seed means):", "", "| method | budget | env steps kept (per seed) | kept | last point | last point "
              "vs Sequential |", "|---|---|---|---|---|---|"]
        for m, b in stopped:
            hist = res["curves"][(m, b)]
            kept = [max(range(len(h)), key=lambda i, h=h: (h[i]["val_set_f1"], -i)) for h in hist]
            sel = np.mean([h[i]["test_set_f1"] for h, i in zip(hist, kept)])
            last = np.mean([h[-1]["test_set_f1"] for h in hist])
            steps = ", ".join(f"{h[i]['env_steps']:,}" for h, i in zip(hist, kept))
            L.append(f"| {m} | {b} | {steps} | "
                     f"{sel:.4f} | {last:.4f} | {last - pw[(b, 'Sequential')]['set_f1'].mean():+.4f} |")
    if ("PPO + counts critic", "B10") in res["curves"] and ("PPO", "B10") in res["curves"]:
        counts = mean_curve(res["curves"][("PPO + counts critic", "B10")])[-1]
        same = dict(mean_curve(res["curves"][("PPO", "B10")])).get(counts[0])
        if same is not None:
            L += ["", f"**The critic's view** (B10, seed means on held-out weeks, both at {counts[0]:,} env steps): "
                  f"PPO {same:.4f}, PPO whose critic also reads the running TP / FP / FN {counts[1]:.4f} "
                  f"({counts[1] - same:+.4f})."]
    if ("B10", "PPO") in ps and ("B10", "Sequential") in pw:
        per = [float(run["set_f1"].mean()) for run in ps[("B10", "PPO")]]
        gap = np.mean(per) - pw[("B10", "Sequential")]["set_f1"].mean()
        last_gap = mean_curve(res["curves"][("PPO", "B10")])[-1][1] - pw[("B10", "Sequential")]["set_f1"].mean()
        best = max(("BC", "DAgger"), key=lambda m: pw[("B10", m)]["set_f1"].mean()) if ("B10", "BC") in pw else None
        L += ["", f"**What would change the conclusion.** At B10 PPO's mean over {len(per)} learner seeds lies "
              f"{gap:+.4f} from Sequential; the learner seeds spread by {np.std(per):.4f} (s.d.) and the weeks' "
              "paired interval above is the uncertainty from the week sample alone, so a difference smaller than "
              "both is not a ranking. PPO's curve is still "
              + ("rising" if len(mean_curve(res["curves"][("PPO", "B10")])) > 1 and
                 mean_curve(res["curves"][("PPO", "B10")])[-1][1] > mean_curve(res["curves"][("PPO", "B10")])[-2][1]
                 else "not rising") + " at its last checkpoint"
              + (f" and its last points score {last_gap:+.4f} against Sequential on the held-out weeks, so at "
                 "B10 the ranking rests on early stopping (the table above)"
                 if res["params"]["ppo"].get("keep_best") else "")
              + "; a larger step budget could move it; the distilled "
              f"students see {res['params']['imitation_weeks']} development weeks"
              + (f" (the best of them here: {best})" if best else "")
              + " and would gain from more teacher-labelled weeks; every learner shares one network and one "
              "observation, so a change of architecture or observation (e.g. the running counts) would have to be "
              "given to all of them to keep the comparison fair."]
    g = {} if res["quick"] else goal_check(res)  # a smoke run's numbers carry no verdict
    L += ["", "**Goals**", ""] if g else ["", "**Smoke run** (`--quick`): tiny training budgets; the goals are judged "
                                          "on the full comparison only.", ""]
    for b in res["budgets"]:
        k = f"ppo_vs_sequential_{b}"
        if k in g:
            need = "≥ Sequential" if b == "B10" else "within 0.01 of Sequential"
            L.append(f"- PPO {need} at {b}: PPO − Sequential = {g[k]['gap']:+.4f} — "
                     f"**{'met' if g[k]['met'] else 'not met'}**")
    if "distil_then_rl_B10" in g:
        d = g["distil_then_rl_B10"]["diff"]
        L.append(f"- DAgger→PPO ≥ max(BC, DAgger) at B10 with a paired 95% interval excluding a loss: "
                 f"DAgger→PPO − {g['distil_then_rl_B10']['vs']} = {d[0]:+.4f} [{d[1]:+.4f}, {d[2]:+.4f}] — "
                 + ("**met**" if g["distil_then_rl_B10"]["met"] else
                    "**not met**: a negative result, with its learning curve in the figure below"))
    L += ["", "![held-out Set F1 against environment steps](rl_vs_distillation_curves.png)", "",
          f"command: `{command.strip()}`   ({res['seconds']:.0f} s)", ""]
    return "\n".join(L)


def _ranges(seeds):
    out, start, prev = [], None, None
    for s in seeds:
        if start is None:
            start = prev = s
        elif s == prev + 1:
            prev = s
        else:
            out.append((start, prev))
            start = prev = s
    out.append((start, prev))
    return out


def plot_curves(res, path):
    """Held-out Set F1 (seed mean) against environment steps (log axis) of every learner, one panel per budget,
    with the hindsight DP, Sequential and Static as lines; BC / DAgger are points at their demonstration steps
    (DAgger→PPO's curve starts at DAgger's point), a learner's untrained start is drawn at one step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = res["budgets"]
    fig, axes = plt.subplots(1, len(budgets), figsize=(4.6 * len(budgets), 3.8), squeeze=False)
    for ax, b in zip(axes[0], budgets):
        for (m, mb), hist in res["curves"].items():
            if mb != b:
                continue
            pts = [(max(x, 1), y) for x, y in mean_curve(hist)]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=m)
        for name, style in (("HindsightDP", "--"), ("Sequential", ":"), ("Static", "-.")):
            if (b, name) in res["per_week"]:
                ax.axhline(res["per_week"][(b, name)]["set_f1"].mean(), color="k", ls=style, lw=0.8, label=name)
        ax.set_xscale("log")
        ax.set_title(b)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("held-out Set F1 (mean over learner seeds)")
    max(axes[0], key=lambda ax: len(ax.get_legend_handles_labels()[0])).legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def benchmark_main(argv=None):
    """``python -m membudget.evaluate rl-vs-distillation [--quick] [--workers N] [--out FILE.md]``."""
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate rl-vs-distillation",
                                     description="PPO, distil-then-RL, BC and DAgger with one per-resource policy "
                                                 "class against the hindsight DP, current-greedy and BudgetPM's "
                                                 "gates (3 learner seeds, B5 / B10 / B20)")
    parser.add_argument("--quick", action="store_true", help="tiny training budgets (a smoke run, not a result)")
    parser.add_argument("--workers", type=int, default=None,
                        help="local worker processes (default: 2, quick: 1); --backend ray uses the cluster's")
    add_backend_flags(parser)
    parser.add_argument("--out", default=None,
                        help="Markdown file (default docs/rl_vs_distillation.md; with --quick: none)")
    parser.add_argument("--progress-bar", choices=("on", "off", "auto"), default="auto")
    parser.add_argument("--render", default=None, metavar="JSON",
                        help="render the page and figure from saved results (rl_vs_distillation.json) instead of "
                             "training")
    args = parser.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else ["rl-vs-distillation", *argv])
    command = "python -m membudget.evaluate " + " ".join(shlex.quote(a) for a in argv)
    if args.render:
        res = load_results(args.render)
        command = res.get("command", command)
    else:
        show = sys.stderr.isatty() if args.progress_bar == "auto" else args.progress_bar == "on"
        say = (lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", file=sys.stderr, flush=True)) if show else None
        overrides = {} if args.workers is None else {"workers": args.workers}
        with executor_beside_pool(args, progress=say) as executor:
            res = run_benchmark(quick=args.quick, progress=say, executor=executor, **overrides)
        res["command"] = command
    text = format_benchmark(res, command)
    print(text)
    out = args.out if args.out is not None else os.path.join(run_folder("rl-vs-distillation"),
                                                             "rl_vs_distillation.md")
    if out:
        folder = write_page(out, text)
        plot_curves(res, os.path.join(folder, "rl_vs_distillation_curves.png"))
        if not args.render:
            save_results(res, os.path.join(folder, "rl_vs_distillation.json"))
    return res

"""RL versus distillation on ``PMWeek-v0``: PPO, MaskablePPO, budget-conditioned PPO, BC and DAgger trained on
identical dynamics and compared with the hindsight DP, current-greedy and BudgetPM's gates.

- the training runs behind ``python -m membudget.train ppo | maskable-ppo | ppo-conditioned | bc | dagger``
  (:data:`TRAIN_COMMANDS`): one config dataclass each, a run directory with the model, ``config.json``,
  ``metrics.csv`` and learning curves;
- :func:`run_benchmark`, :func:`format_benchmark`, :func:`plot_curves` and :func:`benchmark_main`
  (``python -m membudget.evaluate rl-vs-distillation [--quick]``), which writes ``docs/rl_vs_distillation.md``.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import sys
import time
from dataclasses import dataclass

import numpy as np

from membudget.agents.imitation import fit_bc, fit_dagger
from membudget.agents.rl import (CONDITIONED_BUDGETS, TRAIN_SEEDS, as_policy, train_conditioned_ppo,
                                 train_ppo_allocator)
from membudget.envs.pm import budget_levels, generate_episode
from membudget.envs.pm.world import WorldConfig
from membudget.studies.protocol import bootstrap_ci, evaluate_policy, rollout
from membudget.studies.runs import TrainCommand, budget_flag, finish_run, net_arch, show_bar, start_run
from membudget.studies.suite import fit_suite
from membudget.teachers import CurrentGreedy, HindsightDP, SchedulePolicy


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


def train_ppo(cfg: PPOConfig, command: str = "", algo: str = "ppo") -> str:
    """Train PPO (``algo="ppo"``) or MaskablePPO (``"maskable_ppo"``) at one budget, evaluate and save; returns the
    run directory."""
    sub = "ppo" if algo == "ppo" else "maskable-ppo"
    run_dir = start_run(sub, cfg, command, f"{sub}-{cfg.budget}-seed{cfg.seed}")
    env_kwargs = dict(cost_profile=cfg.cost_profile, late_policy=cfg.late_policy)
    model, history = train_ppo_allocator(
        budget_flag(cfg.budget), algo=algo, total_timesteps=cfg.total_timesteps, seed=cfg.seed, n_envs=cfg.n_envs,
        n_steps=cfg.n_steps, batch_size=cfg.batch_size, n_epochs=cfg.n_epochs, learning_rate=cfg.learning_rate,
        gamma=cfg.gamma, gae_lambda=cfg.gae_lambda, ent_coef=cfg.ent_coef, net_arch=net_arch(cfg.net_arch),
        eval_every=cfg.eval_every, per_step_cap=cfg.per_step_cap, progress_bar=show_bar(cfg.progress_bar),
        torch_threads=cfg.torch_threads, **env_kwargs)
    model.save(os.path.join(run_dir, "model.zip"))
    return finish_run(run_dir, sub, cfg, history, history[-1]["wall_clock"], model.num_timesteps, as_policy(model),
                       [cfg.budget], env_kwargs)


def train_conditioned(cfg: ConditionedPPOConfig, command: str = "") -> str:
    """Train one budget-conditioned PPO across ``cfg.budgets``, evaluate at each budget and save."""
    budgets = [budget_flag(b.strip()) for b in cfg.budgets.split(",") if b.strip()]
    if not budgets:
        raise ValueError("--budgets must name at least one budget level")
    run_dir = start_run("ppo-conditioned", cfg, command, f"ppo-conditioned-seed{cfg.seed}")
    env_kwargs = dict(cost_profile=cfg.cost_profile, late_policy=cfg.late_policy)
    model, history = train_conditioned_ppo(
        budgets, total_timesteps=cfg.total_timesteps, seed=cfg.seed, envs_per_budget=cfg.envs_per_budget,
        n_steps=cfg.n_steps, batch_size=cfg.batch_size, n_epochs=cfg.n_epochs, learning_rate=cfg.learning_rate,
        gamma=cfg.gamma, gae_lambda=cfg.gae_lambda, ent_coef=cfg.ent_coef, net_arch=net_arch(cfg.net_arch),
        eval_every=cfg.eval_every, per_step_cap=cfg.per_step_cap, progress_bar=show_bar(cfg.progress_bar),
        torch_threads=cfg.torch_threads, **env_kwargs)
    model.save(os.path.join(run_dir, "model.zip"))
    return finish_run(run_dir, "ppo-conditioned", cfg, history, history[-1]["wall_clock"], model.num_timesteps,
                       model, budgets, env_kwargs)


def train_imitation(cfg: ImitationConfig, command: str = "", method: str = "bc") -> str:
    """Behaviour cloning (``method="bc"``) or DAgger (``"dagger"``) from the hindsight DP; returns the run
    directory."""
    if method not in ("bc", "dagger"):
        raise ValueError(f"method must be 'bc' or 'dagger', got {method!r}")
    if cfg.train_weeks < 1:
        raise ValueError("--train-weeks must be positive")
    if cfg.train_first_seed < 2000 or cfg.train_first_seed + cfg.train_weeks > 4000:
        raise ValueError("training weeks must lie in the development range 2000-3999")
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
        policy, history = fit_bc(seeds, budget_flag(cfg.budget), epochs=cfg.epochs, hidden=cfg.hidden, seed=cfg.seed,
                                 progress=progress)
    else:
        policy, history = fit_dagger(seeds, budget_flag(cfg.budget), iterations=cfg.iterations, epochs=cfg.epochs,
                                     hidden=cfg.hidden, seed=cfg.seed, progress=progress)
    if bar is not None:
        bar.close()
    policy.save(os.path.join(run_dir, "model.npz"))
    return finish_run(run_dir, method, cfg, history, history[-1]["wall_clock"], history[-1]["env_steps"], policy,
                       [cfg.budget], {"action_mode": "scores"})




TRAIN_COMMANDS = {
    "ppo": TrainCommand(PPOConfig, "SB3 PPO (MultiInputPolicy) on PMWeek-v0 at one budget",
                        functools.partial(train_ppo, algo="ppo")),
    "maskable-ppo": TrainCommand(PPOConfig, "sb3-contrib MaskablePPO (candidate mask) on PMWeek-v0 at one budget",
                                 functools.partial(train_ppo, algo="maskable_ppo")),
    "ppo-conditioned": TrainCommand(ConditionedPPOConfig, "one budget-conditioned PPO across B5-B20",
                                    train_conditioned),
    "bc": TrainCommand(ImitationConfig, "behaviour cloning of the hindsight DP",
                       functools.partial(train_imitation, method="bc"), {"iterations": 0}),
    "dagger": TrainCommand(ImitationConfig, "DAgger from the hindsight DP",
                           functools.partial(train_imitation, method="dagger")),
}
"""The PMWeek learners' ``python -m membudget.train`` subcommands."""


BENCH_FULL = dict(budgets=("B5", "B10", "B20"), eval_seeds=tuple(range(8000, 8030)) + tuple(range(9000, 9030)),
                  ppo_steps=200_000, maskable_steps=60_000, conditioned_steps=400_000, ppo_eval_every=40_000,
                  maskable_eval_every=20_000, conditioned_eval_every=80_000, n_envs=16, n_steps=128,
                  imitation_weeks=40, epochs=60, dagger_iterations=3, bootstrap=100_000, suite=None)
BENCH_QUICK = dict(budgets=("B10",), eval_seeds=(8000, 8001, 9000, 9001), ppo_steps=512, maskable_steps=512,
                   conditioned_steps=512, ppo_eval_every=0, maskable_eval_every=0, conditioned_eval_every=0,
                   n_envs=4, n_steps=32, imitation_weeks=2, epochs=3, dagger_iterations=1, bootstrap=1000,
                   suite=dict(dev_seeds=range(2000, 2005), temporal_budgets=("B10",),
                              analysis_seeds=range(4000, 4002)))
BASELINES = ("Sequential", "Myopic", "Static", "DeadlineOutcome")
LEARNED = ("PPO", "MaskablePPO", "PPO-conditioned", "BC", "DAgger")


def _paired(x, ref, n):
    d = np.asarray(x, float) - np.asarray(ref, float)
    d = d[~np.isnan(d)]
    return bootstrap_ci(d, n) if d.size else (float("nan"),) * 3


def run_benchmark(quick: bool = False, seed: int = 0, progress=None, **overrides) -> dict:
    """Train every learned allocator, evaluate everything on the held-out weeks; returns the results dict
    (``per_week``: ``{(budget, method): rollout metrics}``, ``training``, ``curves``, settings)."""
    P = dict(BENCH_QUICK if quick else BENCH_FULL)
    P.update(overrides)
    say = progress or (lambda msg: None)
    budgets, seeds = list(P["budgets"]), list(P["eval_seeds"])
    levels = budget_levels()
    t_start = time.perf_counter()
    say("fit the gates (development weeks)")
    suite = fit_suite(**(P["suite"] or {}), progress=lambda m: say(f"fit: {m}"))
    per_week, training, curves = {}, {}, {}
    cond_budgets = list(budgets) if quick else list(CONDITIONED_BUDGETS)
    ppo_kw = dict(n_steps=P["n_steps"], seed=seed, batch_size=min(512, P["n_envs"] * P["n_steps"]))

    say(f"train PPO-conditioned on {cond_budgets}")
    per_budget = max(1, P["n_envs"] // 2)
    model, hist = train_conditioned_ppo(cond_budgets, total_timesteps=P["conditioned_steps"],
                                        envs_per_budget=per_budget, eval_every=P["conditioned_eval_every"],
                                        **{**ppo_kw, "batch_size": min(512, per_budget * len(cond_budgets)
                                                                       * P["n_steps"])})
    training["PPO-conditioned"] = {"budgets": "/".join(cond_budgets), "env_steps": int(model.num_timesteps),
                                   "wall_clock": hist[-1]["wall_clock"]}
    curves["PPO-conditioned"] = hist
    conditioned = model
    for b in budgets:
        ep_seeds = seeds
        for name, algo, steps, every in (("PPO", "ppo", P["ppo_steps"], P["ppo_eval_every"]),
                                         ("MaskablePPO", "maskable_ppo", P["maskable_steps"], P["maskable_eval_every"])):
            say(f"train {name} at {b}")
            model, hist = train_ppo_allocator(b, algo=algo, total_timesteps=steps, n_envs=P["n_envs"],
                                              eval_every=every, **ppo_kw)
            training[(name, b)] = {"env_steps": int(model.num_timesteps), "wall_clock": hist[-1]["wall_clock"]}
            curves[(name, b)] = hist
            per_week[(b, name)] = rollout(as_policy(model), ep_seeds, budget=b, per_step_cap=2)
        per_week[(b, "PPO-conditioned")] = rollout(conditioned, ep_seeds, budget=b, per_step_cap=2)
        train_seeds = list(TRAIN_SEEDS)[: P["imitation_weeks"]]
        for name, fit in (("BC", lambda: fit_bc(train_seeds, b, epochs=P["epochs"], seed=seed)),
                          ("DAgger", lambda: fit_dagger(train_seeds, b, iterations=P["dagger_iterations"],
                                                        epochs=P["epochs"], seed=seed))):
            say(f"train {name} at {b}")
            student, hist = fit()
            training[(name, b)] = {"env_steps": int(hist[-1]["env_steps"]), "wall_clock": hist[-1]["wall_clock"]}
            curves[(name, b)] = hist
            per_week[(b, name)] = rollout(student, ep_seeds, budget=b, per_step_cap=2, action_mode="scores")
        say(f"teachers and baselines at {b}")
        weeks = [generate_episode(s) for s in ep_seeds]
        n_res = len(WorldConfig().resources)
        dp = [HindsightDP(budget=levels[b], per_step_cap=2).solve(w) for w in weeks]
        per_week[(b, "HindsightDP")] = rollout(SchedulePolicy([s.schedule for s in dp], n_res), ep_seeds,
                                               budget=b, per_step_cap=2)
        replay_gap = float(np.max(np.abs(per_week[(b, "HindsightDP")]["set_f1"] - np.array([s.f1 for s in dp]))))
        if replay_gap > 1e-9:
            raise RuntimeError(f"replaying the DP's schedules does not reproduce its Set F1 at {b} (gap {replay_gap})")
        greedy = [CurrentGreedy(budget=levels[b], per_step_cap=2).solve(w) for w in weeks]
        per_week[(b, "CurrentGreedy")] = rollout(SchedulePolicy([s.schedule for s in greedy], n_res), ep_seeds,
                                                 budget=b, per_step_cap=2)
        for name in BASELINES:
            if name in ("Myopic", "Sequential") and (name.lower(), b) not in suite.temporal:
                continue
            per_week[(b, name)] = evaluate_policy(suite, name, b, ep_seeds)
    return {"params": P, "quick": quick, "seed": seed, "budgets": budgets, "seeds": seeds, "per_week": per_week,
            "training": training, "curves": curves, "conditioned_budgets": cond_budgets,
            "seconds": time.perf_counter() - t_start}


ORDER = ("HindsightDP", "CurrentGreedy", "PPO", "MaskablePPO", "PPO-conditioned", "BC", "DAgger", "Sequential",
         "Myopic", "Static", "DeadlineOutcome")


def goal_check(res, budget="B10", share=0.95) -> dict:
    """Best learned allocator's mean Set F1 against ``share`` of the hindsight DP's at ``budget``."""
    pw = res["per_week"]
    if (budget, "HindsightDP") not in pw:
        return {"budget": budget, "available": False}
    dp = float(pw[(budget, "HindsightDP")]["set_f1"].mean())
    best = max(LEARNED, key=lambda m: pw[(budget, m)]["set_f1"].mean() if (budget, m) in pw else -1)
    f1 = float(pw[(budget, best)]["set_f1"].mean())
    return {"budget": budget, "available": True, "best": best, "best_f1": f1, "dp_f1": dp, "ratio": f1 / dp,
            "met": f1 >= share * dp, "share": share}


def format_benchmark(res, command: str = "") -> str:
    pw, n_boot = res["per_week"], res["params"]["bootstrap"]
    seeds = res["seeds"]
    ranges = ", ".join(f"{lo}-{hi}" for lo, hi in _ranges(seeds))
    L = ["# RL versus distillation on PMWeek-v0", "",
         f"Held-out weeks {ranges} ({len(seeds)} weeks), unit prices, N_max 2, late policy expire. Learned "
         "allocators train on development weeks from 2000 upward (validation weeks 4000-4009 for the learning "
         "curves); gates fitted on development weeks 2000-2019. Differences are paired against Sequential over the "
         f"same weeks, percentile bootstrap 95% intervals ({n_boot:,} resamples; on-time recall over weeks with a due "
         "positive). The hindsight DP replays its optimal schedule per week (an upper bound that sees the whole "
         "week); current-greedy replays the future-blind greedy oracle's schedule."
         + (" **Quick mode: tiny training budgets, not a result.**" if res["quick"] else ""), ""]
    L += ["| budget | method | Set F1 | vs Sequential [95% CI] | on-time recall | vs Sequential [95% CI] | "
          "realized cost | vs Sequential [95% CI] |", "|" + "---|" * 8]
    for b in res["budgets"]:
        ref = pw.get((b, "Sequential"))
        for m in ORDER:
            if (b, m) not in pw:
                continue
            r = pw[(b, m)]
            cells = []
            for k in ("set_f1", "on_time_recall", "realized_cost"):
                mean = np.nanmean(r[k])
                if ref is None or m == "Sequential":
                    ci = "reference" if m == "Sequential" else ""
                else:
                    d, lo, hi = _paired(r[k], ref[k], n_boot)
                    fmt = "+.2f" if k == "realized_cost" else "+.4f"
                    ci = f"{d:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"
                cells += [f"{mean:.2f}" if k == "realized_cost" else f"{mean:.4f}", ci]
            L.append(f"| {b} | {m} | " + " | ".join(cells) + " |")
    L += ["", "Training (wall clock excludes the learning-curve evaluations; env steps: environment transitions used "
          "for training — for BC / DAgger the DP-demonstration and student-rollout steps):", "",
          "| method | budget | env steps | wall clock (s) | final validation Set F1 |", "|---|---|---|---|---|"]
    for key, t in res["training"].items():
        name, b = (key, t["budgets"]) if isinstance(key, str) else key
        hist = res["curves"][key]
        L.append(f"| {name} | {b} | {t['env_steps']:,} | {t['wall_clock']:.1f} | {hist[-1]['val_set_f1']:.4f} |")
    g = goal_check(res)
    if g["available"]:
        L += ["", f"**Goal check** (best learned allocator ≥ {g['share']:.0%} of the hindsight DP's Set F1 at B10 on "
              f"held-out weeks): best learned = {g['best']} {g['best_f1']:.4f}, hindsight DP {g['dp_f1']:.4f}, "
              f"ratio {g['ratio']:.3f} — **{'met' if g['met'] else 'not met'}**."]
    L += ["", "![learning curves](rl_vs_distillation_curves.png)", "",
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
    """Validation Set F1 against environment steps of every learned method, one panel per budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = res["budgets"]
    fig, axes = plt.subplots(1, len(budgets), figsize=(4.4 * len(budgets), 3.6), squeeze=False)
    for ax, b in zip(axes[0], budgets):
        for key, hist in res["curves"].items():
            name = key if isinstance(key, str) else key[0]
            if not isinstance(key, str) and key[1] != b:
                continue
            col = f"val_set_f1_{b}" if isinstance(key, str) else "val_set_f1"
            pts = [(max(r["env_steps"], 1), r.get(col, r.get("val_set_f1"))) for r in hist]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=name)
        if (b, "HindsightDP") in res["per_week"]:
            ax.axhline(res["per_week"][(b, "HindsightDP")]["set_f1"].mean(), color="k", ls="--", lw=0.8,
                       label="hindsight DP (held-out)")
        ax.set_xscale("log")
        ax.set_title(b)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("Set F1, validation weeks 4000-4009")
    axes[0][0].legend(fontsize=7)
    g = goal_check(res)
    if g["available"]:
        fig.suptitle(f"goal (best learned ≥ 95% of DP at B10): {g['best']} {g['best_f1']:.3f} / DP {g['dp_f1']:.3f}"
                     f" = {g['ratio']:.3f} — {'met' if g['met'] else 'not met'}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def benchmark_main(argv=None):
    """``python -m membudget.evaluate rl-vs-distillation [--quick] [--seed S] [--out FILE.md]``."""
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate rl-vs-distillation",
                                     description="PPO, MaskablePPO, budget-conditioned PPO, BC and DAgger against "
                                                 "the hindsight DP, current-greedy and BudgetPM's gates")
    parser.add_argument("--quick", action="store_true", help="tiny training budgets (for tests)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None,
                        help="Markdown file (default docs/rl_vs_distillation.md; with --quick: none)")
    parser.add_argument("--progress-bar", choices=("on", "off", "auto"), default="auto")
    args = parser.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else ["rl-vs-distillation", *argv])
    command = "python -m membudget.evaluate " + " ".join(shlex.quote(a) for a in argv)
    show = sys.stderr.isatty() if args.progress_bar == "auto" else args.progress_bar == "on"
    say = (lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", file=sys.stderr, flush=True)) if show else None
    res = run_benchmark(quick=args.quick, seed=args.seed, progress=say)
    text = format_benchmark(res, command)
    print(text)
    out = args.out if args.out is not None else ("" if args.quick else "docs/rl_vs_distillation.md")
    if out:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w") as f:
            f.write(text)
        plot_curves(res, os.path.join(os.path.dirname(out) or ".", "rl_vs_distillation_curves.png"))
    return res

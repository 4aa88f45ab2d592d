"""Evaluation protocol (DESIGN §5): policies on held-out weeks, paired by seed, with bootstrap 95% intervals.

``python -m membudget.evaluate --quick`` (the README's main job) fits every BudgetPM gate on the development
weeks 2000-2019 and prints the headline table on the boundary weeks 9000-9029: Set F1 with the paired
difference to a reference policy and its 95% interval, on-time recall, realized cost, exhaustion progress and
spend per quarter. Without ``--quick`` any policies × budgets × seed range can be chosen, ``--sweep`` adds the
cap sweep (20 caps from 5 to 210) of the natural schedules with the cost each needs to match a policy, and
``--out DIR`` writes ``results.json``, ``results.md`` and ``frontiers.png``.

``python -m membudget.evaluate report`` regenerates ``docs/reproduction.md``, every finding of BudgetPM
re-measured in our world beside the published figure.

``python -m membudget.evaluate replay [...]`` runs LIMBO's comparison on ``ReplayStream-v0`` (every baseline,
LinUCB, optionally PPO and the hindsight oracle per family × profile over seeds 42, 43, 44) and prints the results
table; ``--out DIR`` writes ``results.json``, ``results.md`` and the cost–accuracy frontier ``replay_frontier.png``.

``--model PATH`` (or a policy named ``model:PATH``) evaluates a model trained by ``python -m membudget.train``
(its run directory, an SB3 ``.zip`` or an imitation ``.npz``) like any other policy.

``python -m membudget.evaluate rl-vs-distillation [--quick]`` trains PPO, MaskablePPO, budget-conditioned PPO, BC
and DAgger and compares them with the hindsight DP, current-greedy and BudgetPM's gates at B5/B10/B20 on weeks
8000-8029 and 9000-9029 (:mod:`membudget.agents.rl`); writes ``docs/rl_vs_distillation.md`` and the learning
curves figure.

``python -m membudget.evaluate shared-budget`` runs the shared-quota comparison (2, 3, 5 agents) and writes
``docs/shared_budget.md``; ``python -m membudget.evaluate tiers`` trains and evaluates the BudgetMem tier routers;
``python -m membudget.evaluate proactive [--ppo-timesteps N]`` runs seed 002's memory-layer comparison on
``ProactiveStream-v0`` and writes ``docs/proactive_stream.md`` (:mod:`membudget.agents.proactive_runner`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import platform
import shlex
import sys
import time
from dataclasses import dataclass, field

import numpy as np

SWEEP_CAPS = tuple(int(c) for c in np.round(np.linspace(5, 210, 20)))


@dataclass
class EvalConfig:
    """Configuration of one evaluation run (every field is a command-line flag of the same name)."""

    quick: bool = False
    """The README's main job: fit the gates, evaluate the headline policies at B5/B10/B20/B60 on 9000-9029."""
    policies: list = field(default_factory=lambda: ["AllRelevant", "RandomFeasible", "Static", "Myopic",
                                                    "Sequential", "DeadlineOutcome", "PacingLB"])
    """Policies (names in membudget.agents.suite.POLICIES, or model:PATH for a trained model)."""
    model: list = field(default_factory=list)
    """Trained models to evaluate as well (run directories of membudget.train, .zip or .npz files); each is added
    to the policies as model:PATH."""
    budgets: list = field(default_factory=lambda: ["B5", "B10", "B20", "B60"])
    """Budgets: levels (B5...B80), integers, or none."""
    first_seed: int = 9000
    """First held-out week."""
    n_weeks: int = 30
    """Number of consecutive held-out weeks."""
    reference: str = "Static"
    """Policy the paired differences are taken against."""
    load: int = 0
    """Opportunity load k of the evaluation weeks."""
    repetitions: int = 3
    """Seeds of stochastic policies (RandomFeasible) per week, averaged per week."""
    bootstrap: int = 100_000
    """Paired bootstrap resamples over complete weeks."""
    sweep: bool = False
    """Also sweep the natural schedules over 20 caps from 5 to 210 and report the cost to match each policy."""
    out: str = ""
    """If set, a directory for results.json, results.md and frontiers.png (config, command, versions included)."""
    progress_bar: str = "auto"
    """on, off or auto (on when attached to a terminal)."""


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
        if "episode_metrics" in info:
            first = info["_episode_metrics"] & ~done
            for k, v in info["episode_metrics"].items():
                out.setdefault(k, np.zeros(len(seeds)))[first] = v[first]
            done |= info["_episode_metrics"]
    env.close()
    horizon = env.world.horizon
    ex = out["exhaustion_step"]
    out["exhaustion_progress"] = np.where(ex > 0, ex / horizon, np.nan)
    return out


def bootstrap_ci(values, n_resamples: int = 10000, seed: int = 0, level: float = 0.95):
    """Mean and percentile bootstrap interval over the entries of ``values`` (complete weeks). For a paired
    comparison pass the per-week differences."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("values must be a non-empty 1-D array")
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    for lo in range(0, n_resamples, 10000):  # bounded memory for 100,000 resamples
        hi = min(n_resamples, lo + 10000)
        means[lo:hi] = x[rng.integers(0, x.size, size=(hi - lo, x.size))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    return float(x.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha))


def parse_budget(b):
    if b is None or b == "none":
        return None
    return int(b) if str(b).isdigit() else b


def evaluate_policy(suite, name, budget, seeds, load=0, repetitions=3):
    """Per-week metrics of one policy at one budget (stochastic policies averaged over ``repetitions``)."""
    reps = []
    for r in range(repetitions if name == "RandomFeasible" else 1):
        if name.startswith("model:"):  # a trained model by path (membudget.agents.rl.load_policy)
            from membudget.agents.rl import load_policy

            policy, kw = load_policy(name[len("model:"):])
        else:
            policy, kw = suite.policy(name, budget, seed=r)
        env_kw = {"budget": budget, "per_step_cap": 2, "load": load, **kw}
        reps.append(rollout(policy, seeds, **env_kw))
    return {k: np.mean([rep[k] for rep in reps], axis=0) for k in reps[0]}


def available(name, budget, suite) -> bool:
    if name.startswith("model:"):
        return True
    if name in ("Myopic", "Sequential"):
        return any(k == (name.lower(), budget) for k in suite.temporal)
    if name == "PacingLB":
        return budget in suite.pacing_lb
    if budget is None and name in ("PeriodicOutcome", "DeadlineOutcome", "DeadlineBackoffOutcome", "Pacing"):
        return False  # a cadence needs a finite cap
    return True


def cost_to_match(sweep_rows, target_f1, target_recall):
    """Smallest mean realized cost over the sweep whose mean Set F1 and on-time recall both reach the targets
    (None if no cap does)."""
    ok = [r["cost"] for r in sweep_rows if r["f1"] >= target_f1 and r["recall"] >= target_recall]
    return min(ok) if ok else None


def sweep(suite, name, seeds, caps=SWEEP_CAPS, load=0):
    """Mean Set F1 / on-time recall / realized cost of a natural schedule at each cap."""
    rows = []
    for cap in caps:
        res = evaluate_policy(suite, name, int(cap), seeds, load)
        rows.append({"cap": int(cap), "f1": float(res["set_f1"].mean()),
                     "recall": float(np.nanmean(res["on_time_recall"])), "cost": float(res["realized_cost"].mean())})
    return rows


def run(cfg: EvalConfig, suite=None, progress=None):
    from membudget.agents.suite import fit_suite

    if cfg.quick:
        cfg = dataclasses.replace(cfg, policies=EvalConfig().policies, budgets=EvalConfig().budgets,
                                  first_seed=9000, n_weeks=30, load=0, sweep=False)
    say = progress or (lambda msg: None)
    if cfg.model:
        cfg = dataclasses.replace(cfg, policies=list(cfg.policies) + [f"model:{p}" for p in cfg.model
                                                                      if f"model:{p}" not in cfg.policies])
    if suite is None:
        suite = fit_suite(progress=lambda m: say(f"fit: {m}"))
    seeds = list(range(cfg.first_seed, cfg.first_seed + cfg.n_weeks))
    results = []
    for b in map(parse_budget, cfg.budgets):
        per = {}
        for name in cfg.policies:
            if available(name, b, suite):
                say(f"evaluate {name} at {b}")
                per[name] = evaluate_policy(suite, name, b, seeds, cfg.load, cfg.repetitions)
        ref = per.get(cfg.reference)
        for name, res in per.items():
            row = {"budget": b, "policy": name, "set_f1": res["set_f1"],
                   "on_time_recall": res["on_time_recall"], "realized_cost": res["realized_cost"],
                   "exhaustion_progress": res["exhaustion_progress"],
                   "spend_per_quarter": np.stack([res[f"spend_q{q}"] for q in range(1, 5)], axis=1)}
            if ref is not None and name != cfg.reference:
                row["diff_vs_reference"] = bootstrap_ci(res["set_f1"] - ref["set_f1"], cfg.bootstrap)
            results.append(row)
    sweeps = {}
    if cfg.sweep:
        for name in ("PeriodicOutcome", "DeadlineOutcome", "DeadlineBackoffOutcome"):
            say(f"sweep {name}")
            sweeps[name] = sweep(suite, name, seeds, load=cfg.load)
    return results, sweeps


def format_table(results, reference, sweeps=None) -> str:
    head = (f"| budget | policy | Set F1 | vs {reference} [95% CI] | on-time recall | realized cost | "
            f"exhausted (progress) | spend by quarter |")
    lines = [head, "|" + "---|" * 8]
    for r in results:
        d = r.get("diff_vs_reference")
        diff = f"{d[0]:+.4f} [{d[1]:+.4f}, {d[2]:+.4f}]" if d else "reference" if r["policy"] == reference else ""
        ex = r["exhaustion_progress"]
        n_ex = int(np.sum(~np.isnan(ex)))
        exs = f"{n_ex}/{ex.size} ({np.nanmean(ex):.3f})" if n_ex else f"0/{ex.size}"
        q = "/".join(f"{v:.2f}" for v in r["spend_per_quarter"].mean(axis=0))
        lines.append(f"| {r['budget']} | {r['policy']} | {r['set_f1'].mean():.4f} | {diff} | "
                     f"{np.nanmean(r['on_time_recall']):.4f} | {r['realized_cost'].mean():.2f} | {exs} | {q} |")
    if sweeps:
        lines += ["", "Cost to match (smallest swept cost reaching both the policy's mean Set F1 and on-time recall):",
                  "", "| budget | policy | cost | " + " | ".join(sweeps) + " |", "|" + "---|" * (3 + len(sweeps))]
        for r in results:
            cells = []
            for name, rows in sweeps.items():
                c = cost_to_match(rows, r["set_f1"].mean(), np.nanmean(r["on_time_recall"]))
                cells.append("not reached" if c is None else f"{c:.1f} ({c / max(r['realized_cost'].mean(), 1e-9):.2f}x)")
            lines.append(f"| {r['budget']} | {r['policy']} | {r['realized_cost'].mean():.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_frontiers(sweeps, results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name, rows in sweeps.items():
        c = [r["cost"] for r in rows]
        axes[0].plot(c, [r["f1"] for r in rows], marker=".", label=name)
        axes[1].plot(c, [r["recall"] for r in rows], marker=".", label=name)
    for r in results:
        if r["policy"] in ("Sequential", "Myopic", "Static"):
            for ax, key in ((axes[0], "set_f1"), (axes[1], "on_time_recall")):
                ax.scatter([r["realized_cost"].mean()], [np.nanmean(r[key])], marker="x")
                ax.annotate(f"{r['policy']} {r['budget']}", (r["realized_cost"].mean(), np.nanmean(r[key])),
                            fontsize=7)
    for ax, lab in zip(axes, ("Set F1", "on-time recall")):
        ax.set_xlabel("realized observation cost")
        ax.set_ylabel(lab)
        ax.set_xscale("log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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


def _progress(enabled: str):
    if enabled == "off" or (enabled == "auto" and not sys.stderr.isatty()):
        return None
    from tqdm import tqdm

    bar = tqdm(total=0, bar_format="{desc} [{elapsed}]")
    return lambda msg: (bar.set_description_str(msg), bar.refresh())


def parse_args(argv=None) -> EvalConfig:
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in dataclasses.fields(EvalConfig):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true")
        elif isinstance(default, list):
            parser.add_argument(flag, nargs="+", type=str, default=default)
        else:
            parser.add_argument(flag, type=type(default), default=default,
                                choices=("on", "off", "auto") if f.name == "progress_bar" else None)
    return EvalConfig(**vars(parser.parse_args(argv)))


def plot_replay_frontier(rows, path):
    """Cost–accuracy plane per (family, profile) of ReplayStream-v0: every agent's mean total tokens per stream
    against its mean accuracy, the empirical Pareto frontier (oracle excluded) drawn as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from membudget.agents.replay_runner import pareto_front

    settings = sorted({(r["family"], r["profile"]) for r in rows},
                      key=lambda fp: (fp[0], ("strong", "mid", "weak").index(fp[1])))
    ncol = min(3, len(settings))
    nrow = -(-len(settings) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.6 * nrow), squeeze=False)
    for ax, (family, profile) in zip(axes.flat, settings):
        pts = {r["agent"]: (np.mean([run["total_tokens"] for run in r["runs"]]),
                            np.mean([run["accuracy"] for run in r["runs"]]))
               for r in rows if (r["family"], r["profile"]) == (family, profile)}
        front = sorted((pts[n] for n in pareto_front({n: p for n, p in pts.items() if n != "oracle"})))
        ax.plot([p[0] for p in front], [p[1] for p in front], color="0.7", zorder=0, label="frontier")
        for name, (c, a) in pts.items():
            marker = "*" if name == "linucb" else "D" if name == "oracle" else "o"
            ax.scatter([c], [a], marker=marker, s=80 if name == "linucb" else 25, zorder=2)
            ax.annotate(name, (c, a), fontsize=6, xytext=(3, 2), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_title(f"{family} × {profile}", fontsize=9)
        ax.set_xlabel("total tokens per 500-task stream")
        ax.set_ylabel("accuracy")
    for ax in list(axes.flat)[len(settings):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def replay_main(argv=None):
    """``python -m membudget.evaluate replay``: thin over :func:`membudget.agents.replay_runner.evaluate` and
    :func:`~membudget.agents.replay_runner.format_results`."""
    from membudget.agents.replay_runner import PAPER_SEEDS, SELECTED_ALPHA, evaluate, format_results, summarize

    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate replay",
                                     description="LIMBO's comparison on ReplayStream-v0: accuracy and total tokens "
                                                 "of every agent per family x profile, with intervals")
    parser.add_argument("--families", nargs="+", default=["db", "os"], choices=("db", "os"))
    parser.add_argument("--profiles", nargs="+", default=["strong", "mid", "weak"], choices=("strong", "mid", "weak"))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(PAPER_SEEDS))
    parser.add_argument("--alpha", type=float, default=SELECTED_ALPHA,
                        help="LinUCB exploration scale (default: chosen on development seeds 0-9)")
    parser.add_argument("--l2-lambda", type=float, default=1.0)
    parser.add_argument("--cost-weight", type=float, default=0.5)
    parser.add_argument("--ppo-timesteps", type=int, default=0, help="train and add PPO (0: skip)")
    parser.add_argument("--ppo-seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=10000)
    parser.add_argument("--out", default="", help="directory for results.json, results.md, replay_frontier.png")
    args = parser.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else ["replay", *argv])
    command = "python -m membudget.evaluate " + " ".join(shlex.quote(a) for a in argv)
    start = time.perf_counter()
    rows = evaluate(args.families, args.profiles, args.seeds, alpha=args.alpha, l2_lambda=args.l2_lambda,
                    cost_weight=args.cost_weight, ppo_timesteps=args.ppo_timesteps, ppo_seed=args.ppo_seed)
    n_tasks = rows[0]["runs"][0]["tokens"].size
    text = (f"ReplayStream-v0, seeds {args.seeds}, {n_tasks}-task streams, LinUCB alpha={args.alpha} "
            f"lambda={args.l2_lambda} w={args.cost_weight}; intervals: 95% bootstrap over the pooled tasks\n"
            + format_results(rows, args.bootstrap))
    print(text)
    print(f"\ncommand: {command.strip()}   ({time.perf_counter() - start:.1f} s)")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        out_rows = []
        for r in rows:
            s = summarize(r, args.bootstrap)
            out_rows.append({"family": r["family"], "profile": r["profile"], "agent": r["agent"],
                             "accuracy": s["accuracy"], "total_tokens": s["total_tokens"],
                             "seed_accuracy": s["seed_accuracy"],
                             "seed_total_tokens": [run["total_tokens"] for run in r["runs"]],
                             "seed_actions": [run["actions"].tolist() for run in r["runs"]]})
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump({"config": vars(args), "command": command, "versions": package_versions(),
                       "seeds": args.seeds, "rows": out_rows}, f, indent=1)
        with open(os.path.join(args.out, "results.md"), "w") as f:
            f.write("```\n" + text + "\n```\n\ncommand: `" + command.strip() + "`\n")
        plot_replay_frontier(rows, os.path.join(args.out, "replay_frontier.png"))
    return rows


SUBCOMMANDS = {"report": "membudget.agents.report:main", "replay": ":replay_main",
               "shared-budget": "membudget.agents.multiagent:main",
               "rl-vs-distillation": "membudget.agents.rl:benchmark_main",
               "proactive": "membudget.agents.proactive_runner:main", "tiers": "membudget.agents.tier_router:main"}
"""``python -m membudget.evaluate <name> ...``: the entry point (``module:function``, imported on use; no module:
this one) that takes the remaining arguments."""


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in SUBCOMMANDS:
        module, function = SUBCOMMANDS[argv[0]].split(":")
        entry = getattr(importlib.import_module(module), function) if module else globals()[function]
        return entry(argv[1:])
    cfg = parse_args(argv)
    start = time.perf_counter()
    results, sweeps = run(cfg, progress=_progress(cfg.progress_bar))
    command = "python -m membudget.evaluate " + " ".join(shlex.quote(a) for a in argv)
    text = (f"PMWeek-v0, weeks {cfg.first_seed}-{cfg.first_seed + cfg.n_weeks - 1}, unit prices, N_max 2, "
            f"late policy expire, load {cfg.load}; gates fitted on development weeks 2000-2019; paired bootstrap "
            f"with {cfg.bootstrap} resamples\n\n" + format_table(results, cfg.reference, sweeps))
    print(text)
    print(f"\ncommand: {command.strip()}   ({time.perf_counter() - start:.1f} s)")
    if cfg.out:
        os.makedirs(cfg.out, exist_ok=True)
        with open(os.path.join(cfg.out, "results.json"), "w") as f:
            json.dump({"config": dataclasses.asdict(cfg), "command": command, "versions": package_versions(),
                       "rows": [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()}
                                for r in results], "sweeps": sweeps}, f, indent=1)
        with open(os.path.join(cfg.out, "results.md"), "w") as f:
            f.write(text + f"\n\ncommand: `{command.strip()}`\n")
        if sweeps:
            plot_frontiers(sweeps, results, os.path.join(cfg.out, "frontiers.png"))
    return results


if __name__ == "__main__":
    main()

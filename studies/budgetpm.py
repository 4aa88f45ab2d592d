"""BudgetPM's headline comparison on ``PMWeek-v0`` (BudgetPM §4; the README's main job).

``python -m membudget.evaluate --quick`` fits every BudgetPM gate on the development weeks 2000-2019 and prints
the headline table on the boundary weeks 9000-9029: Set F1 with the paired difference to a reference policy and
its 95% interval, on-time recall, realized cost, exhaustion progress and spend per quarter. Without ``--quick``
any policies × budgets × seed range can be chosen, ``--sweep`` adds the cap sweep (20 caps from 5 to 210) of the
natural schedules with the cost each needs to match a policy, and ``--out DIR`` writes ``results.json``,
``results.md`` and ``frontiers.png``. ``--model PATH`` (or a policy named ``model:PATH``) evaluates a model trained
by ``python -m membudget.train`` (its run directory, an SB3 ``.zip`` or an imitation ``.npz``) like any other
policy. An SB3 ``.zip`` is loaded without running code from it (its weights and plain data only; docs/security.md);
``--trust-model`` unpickles it as SB3 does, which runs whatever code the file holds: only for files you trust.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from membudget.agents.sb3_files import model_file
from membudget.envs.pm.world import MAX_LOAD
from membudget.envs.validation import check_int
from membudget.studies.cli import Progress, evaluate_command, make_folder, plain, user_input
from membudget.studies.execution import BACKENDS, chunks, make_executor
from membudget.studies.protocol import (available, bootstrap_ci, cap_sweeps, check_model_settings, cost_to_match,
                                        evaluate_policy, parse_budget, provenance, save_figure, study_subplots)
from membudget.studies.runs import flag_help
from membudget.studies.suite import POLICIES, fit_suite


@dataclass
class EvalConfig:
    """Configuration of one evaluation run (every field is a command-line flag of the same name)."""

    quick: bool = False
    """The README's main job: fit the gates, evaluate the headline policies at B5/B10/B20/B60 on 9000-9029."""
    policies: list = field(default_factory=lambda: ["AllRelevant", "RandomFeasible", "Static", "Myopic",
                                                    "Sequential", "DeadlineOutcome", "PacingLB"])
    """Policies (names in membudget.studies.suite.POLICIES, or model:PATH for a trained model)."""
    model: list = field(default_factory=list)
    """Trained models to evaluate as well (run directories of membudget.train, .zip or .npz files); each is added
    to the policies as model:PATH."""
    trust_model: bool = False
    """Load SB3 .zip models with SB3's full load, which unpickles them and so runs any code they hold (default: the
    safe load, weights and plain data only). Only for files you trust."""
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
    """If set, a directory for results.json and results.md (config, command, versions included), and with ``sweep``
    frontiers.png."""
    progress_bar: str = "auto"
    """on (a live line), plain (a line per stage and every 5 s), off, or auto (on when attached to a terminal,
    plain otherwise)."""
    quiet: bool = False
    """No progress output (the table only)."""
    backend: str = "local"
    """local (tasks in this process) or ray (Ray tasks; a local cluster unless --address): docs/ray.md."""
    address: str = ""
    """An existing Ray cluster (auto, or ray://host:10001); empty starts a local one."""
    num_cpus: int = 0
    """CPUs of the local Ray cluster (0: all)."""
    chunk_weeks: int = 0
    """Weeks per evaluation task (0: the whole week range, tasks of rows_per_task rows). Part of the
    configuration: RandomFeasible draws one generator per task."""
    rows_per_task: int = 5
    """Without chunk_weeks: at most this many rows of a budget per task (every k-th row of the budget's table),
    each task with its own evaluation of the reference and its rows' paired intervals. The numbers do not depend
    on it: fewer rows per task keep more workers busy, more rows per task amortise the backend's cost per task."""
    checkpoint_dir: str = ""
    """One file per finished task (gate fits, label chunks, evaluations); a restarted run loads them."""


def evaluate_task(suite, load, repetitions, item, trust_model=False):
    """One evaluation task: per-week metrics of policy ``name`` at ``budget`` on the weeks ``seeds``."""
    name, budget, seeds = item
    return evaluate_policy(suite, name, budget, list(seeds), load, repetitions, trust_model)


def rows_task(suite, load, repetitions, n_resamples, item, trust_model=False):
    """Rows of the table as one task: ``[(per-week metrics, paired interval or None), ...]`` of the policies
    ``names`` at ``budget`` on the weeks ``seeds``, each interval of its per-week Set F1 minus the reference's
    (evaluated in the task unless it is one of ``names``; None when ``reference`` is None or for the reference's
    own row). An evaluation seeds itself from its key, so a reference evaluated in several tasks is the same."""
    budget, names, seeds, reference = item

    def evaluate(name):
        return evaluate_task(suite, load, repetitions, (name, budget, seeds), trust_model)

    per = {name: evaluate(name) for name in names}
    if reference is not None and reference not in per:
        per[reference] = evaluate(reference)
    return [(per[name], None if reference in (None, name) else
             bootstrap_ci(per[name]["set_f1"] - per[reference]["set_f1"], n_resamples)) for name in names]


def _evaluate_rows(cfg, suite, executor, seeds, budgets):
    """``({(policy, budget): per-week metrics}, {(policy, budget): paired interval})`` in table order, computed as
    tasks:

    - without ``chunk_weeks``, one map: per budget ``k = ceil(rows / rows_per_task)`` tasks of every k-th row
      (:func:`rows_task`: the rows, the reference and the rows' intervals), none waiting for another;
    - with ``chunk_weeks``, a map of one task per (policy, budget, week chunk), then a map of one task per paired
      interval (100,000 resamples cost about as much as a policy on 60 weeks).

    Every evaluation and interval seeds itself from its key, so the numbers do not depend on the backend or on
    ``rows_per_task``."""
    keys = [(name, b) for b in budgets for name in cfg.policies if available(name, b, suite)]
    if cfg.chunk_weeks:
        items = [(name, b, weeks) for name, b in keys for weeks in chunks(seeds, cfg.chunk_weeks)]
        merged = {}
        for (name, b, _), part in zip(items, executor.map(
                functools.partial(evaluate_task, suite, cfg.load, cfg.repetitions, trust_model=cfg.trust_model),
                items)):
            merged.setdefault((name, b), []).append(part)
        per = {k: {m: np.concatenate([p[m] for p in merged[k]]) for m in merged[k][0]} for k in keys}
        paired = [(name, b) for name, b in keys if name != cfg.reference and (cfg.reference, b) in per]
        return per, dict(zip(paired, executor.map(
            functools.partial(bootstrap_ci, n_resamples=cfg.bootstrap),
            [per[(name, b)]["set_f1"] - per[(cfg.reference, b)]["set_f1"] for name, b in paired])))
    items = []
    for b in budgets:
        names = [name for name, kb in keys if kb == b]
        reference = cfg.reference if cfg.reference in names else None
        n_tasks = -(-len(names) // cfg.rows_per_task)
        items += [(b, tuple(names[i::n_tasks]), tuple(seeds), reference) for i in range(n_tasks)]
    per, intervals = {}, {}
    for (b, names, _, _), out in zip(items, executor.map(
            functools.partial(rows_task, suite, cfg.load, cfg.repetitions, cfg.bootstrap,
                              trust_model=cfg.trust_model), items)):
        for name, (res, ci) in zip(names, out):
            per[(name, b)] = res
            if ci is not None:
                intervals[(name, b)] = ci
    return {k: per[k] for k in keys}, {k: intervals[k] for k in keys if k in intervals}


SWEPT = ("PeriodicOutcome", "DeadlineOutcome", "DeadlineBackoffOutcome")
"""The natural schedules of ``--sweep``."""


def check(cfg: EvalConfig) -> EvalConfig:
    """``cfg`` resolved (``quick``'s settings, ``model`` added to the policies) and checked before any work — counts,
    budgets (levels, integers or none), policy names, models (loaded once) and ``out``; a mistake is a ``ValueError``
    (``FileNotFoundError`` for a model path) naming the field."""
    if cfg.quick:  # the README's main job: its own policies, budgets, weeks, load and no sweep
        default = EvalConfig()
        flags = {f: "--" + f.replace("_", "-") for f in ("policies", "budgets", "first_seed", "n_weeks", "load",
                                                          "sweep")}
        changed = [flag for f, flag in flags.items() if getattr(cfg, f) != getattr(default, f)]
        if changed:
            raise ValueError(f"--quick runs the README's main job with the default {', '.join(flags.values())}; "
                             f"drop --quick to set {', '.join(changed)}")
    for name, low in (("n_weeks", 1), ("bootstrap", 1), ("chunk_weeks", 0), ("rows_per_task", 1),
                      ("repetitions", 1), ("first_seed", 0), ("num_cpus", 0)):
        check_int(name, getattr(cfg, name), low)
    check_int("load", cfg.load, 0, MAX_LOAD)
    if cfg.model:
        cfg = dataclasses.replace(cfg, policies=list(cfg.policies) + [f"model:{p}" for p in cfg.model
                                                                      if f"model:{p}" not in cfg.policies])
    for b in cfg.budgets:
        parse_budget(b)
    for name in cfg.policies:  # checked before the gates are fitted (about a minute), not after
        if name.startswith("model:"):
            model_file(name[len("model:"):])  # a wrong path is refused before the heavy imports of a model check
            check_model_settings(name[len("model:"):])
            from membudget.agents.rl import load_policy

            load_policy(name[len("model:"):], trust_remote_code=cfg.trust_model)
        elif name not in POLICIES:
            raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICIES)} or model:PATH")
    if cfg.reference not in cfg.policies:  # the paired differences need the reference's row
        raise ValueError(f"reference {cfg.reference!r} is not among the policies evaluated "
                         f"({', '.join(cfg.policies)}); add it to --policies or choose another --reference")
    if cfg.out:
        make_folder("out", cfg.out)
    return cfg


def run(cfg: EvalConfig, suite=None, progress=None, executor=None):
    """The evaluation of ``cfg`` (checked first, :func:`check`): ``(results, sweeps)``."""
    return _run(check(cfg), suite, progress, executor)


def _run(cfg: EvalConfig, suite=None, progress=None, executor=None):
    say = progress or (lambda msg: None)
    budgets = [parse_budget(b) for b in cfg.budgets]
    owned = (make_executor(cfg.backend, cfg.address or None, cfg.checkpoint_dir or None, cfg.num_cpus or None,
                           progress=progress) if executor is None else contextlib.nullcontext(executor))
    with owned as ex:
        if suite is None:
            suite = fit_suite(progress=lambda m: say(f"fit: {m}"), map=ex.map)
        seeds = list(range(cfg.first_seed, cfg.first_seed + cfg.n_weeks))
        say(f"evaluate ({ex.backend} backend)")
        per, intervals = _evaluate_rows(cfg, suite, ex, seeds, budgets)
        sweeps = {}
        if cfg.sweep:
            say(f"sweep ({ex.backend} backend)")
            sweeps = cap_sweeps(suite, SWEPT, seeds, load=cfg.load, map=ex.map)
    results = []
    for (name, b), res in per.items():
        row = {"budget": b, "policy": name, "set_f1": res["set_f1"], "on_time_recall": res["on_time_recall"],
               "realized_cost": res["realized_cost"], "exhaustion_progress": res["exhaustion_progress"],
               "spend_per_quarter": res["spend_per_quarter"]}
        if (name, b) in intervals:
            row["diff_vs_reference"] = intervals[(name, b)]
        results.append(row)
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
    fig, axes = study_subplots(1, 2, figsize=(10, 4))
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
    save_figure(fig, path)


def parse_args(argv=None) -> EvalConfig:
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in dataclasses.fields(EvalConfig):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true", help=flag_help(EvalConfig, f.name))
        elif isinstance(default, list):
            parser.add_argument(flag, nargs="+", type=str, default=default,
                                help=flag_help(EvalConfig, f.name, default))
        else:
            parser.add_argument(flag, type=type(default), default=default, help=flag_help(EvalConfig, f.name, default),
                                choices={"progress_bar": ("on", "off", "plain", "auto"),
                                         "backend": BACKENDS}.get(f.name))
    return EvalConfig(**vars(parser.parse_args(argv)))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = parse_args(argv)
    with user_input("python -m membudget.evaluate"):
        cfg = check(cfg)
    start = time.perf_counter()
    with Progress("off" if cfg.quiet else cfg.progress_bar) as progress:
        results, sweeps = _run(cfg, progress=progress)
    command = evaluate_command("", argv)
    text = (f"PMWeek-v0, weeks {cfg.first_seed}-{cfg.first_seed + cfg.n_weeks - 1}, unit prices, N_max 2, "
            f"late policy expire, load {cfg.load}; gates fitted on development weeks 2000-2019; paired bootstrap "
            f"with {cfg.bootstrap} resamples\n\n" + format_table(results, cfg.reference, sweeps))
    print(text)
    print(f"\ncommand: {command.strip()}   ({time.perf_counter() - start:.1f} s)")
    if cfg.out:
        os.makedirs(cfg.out, exist_ok=True)
        with open(os.path.join(cfg.out, "results.json"), "w") as f:
            json.dump({"config": dataclasses.asdict(cfg), "command": command, **provenance(),
                       "rows": [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()}
                                for r in results], "sweeps": sweeps}, f, indent=1)
        with open(os.path.join(cfg.out, "results.md"), "w") as f:
            f.write(text + f"\n\ncommand: `{command.strip()}`\n")
        if sweeps:
            plot_frontiers(sweeps, results, os.path.join(cfg.out, "frontiers.png"))
    return results

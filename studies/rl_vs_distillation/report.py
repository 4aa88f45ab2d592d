"""The comparison's page and figure: :func:`format_benchmark` (``docs/rl_vs_distillation.md``, one function per
section), :func:`plot_curves` and :func:`benchmark_main` (``python -m membudget.evaluate rl-vs-distillation``)."""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from membudget.envs.validation import int_flag
from membudget.studies.cli import evaluate_command, run_folder
from membudget.studies.execution import add_backend_flags, executor_beside_pool
from membudget.studies.protocol import machine_line, save_figure, seed_ranges, study_subplots, write_page
from membudget.studies.rl_vs_distillation.configs import LEARNERS, REFERENCES
from membudget.studies.rl_vs_distillation.jobs import run_benchmark
from membudget.studies.rl_vs_distillation.results import Results, goal_check, mean_curve, paired, steps_to_reach


def format_benchmark(res: Results, command: str = "") -> str:
    """The page ``docs/rl_vs_distillation.md`` of ``res``."""
    L = []
    for section in (_intro, _results_table, _steps_table, _early_stopping, _critic_view, _what_would_change, _goals):
        L += section(res)
    L += ["", "![held-out Set F1 against environment steps](rl_vs_distillation_curves.png)", "",
          f"command: `{command.strip()}`   ({res.seconds:.0f} s)", "",
          f"{machine_line()} (this process's; the learners repeat exactly only on the same kind of CPU: "
          "docs/speed.md, \"Same seed, another CPU\")", ""]
    return "\n".join(L)


def _intro(res: Results) -> list:
    """The title and the protocol paragraph."""
    seeds, lseeds = res.seeds, res.learner_seeds
    n_boot = res.params["bootstrap"]
    ranges = seed_ranges(seeds)
    L = []
    L += ["# RL versus distillation on PMWeek-v0", "",
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
         "2000-2019)." + (" **Quick mode: tiny training budgets, not a result.**" if res.quick else ""), ""]
    return L


def _results_table(res: Results) -> list:
    """Every method's held-out figures, paired against Sequential."""
    pw = res.per_week
    ps = res.per_seed
    n_boot = res.params["bootstrap"]
    L = []
    L += ["| budget | method | Set F1 (seeds) | vs Sequential [95% CI] | on-time recall | realized cost | "
          "env steps | teacher calls | wall clock (s) |", "|" + "---|" * 9]
    for b in res.budgets:
        ref = pw.get((b, "Sequential"))
        for m in REFERENCES[:2] + LEARNERS + REFERENCES[2:]:
            if (b, m) not in pw:
                continue
            r = pw[(b, m)]
            if m in LEARNERS:
                per = [float(run["set_f1"].mean()) for run in ps[(b, m)]]
                f1 = f"{np.mean(per):.4f} ± {np.std(per):.4f} ({len(per)})"
                t = res.training[(m, b)]
                cost = f"{t['env_steps']:,.0f} | {t['teacher_calls']:,.0f} | {t['wall_clock']:.0f}"
            else:
                f1, cost = f"{r['set_f1'].mean():.4f}", "| |"
            if ref is None or m == "Sequential":
                ci = "reference" if m == "Sequential" else ""
            else:
                d, lo, hi = paired(r["set_f1"], ref["set_f1"], n_boot)
                ci = f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]"
            L.append(f"| {b} | {m} | {f1} | {ci} | {np.nanmean(r['on_time_recall']):.4f} | "
                     f"{r['realized_cost'].mean():.2f} | {cost} |")
    return L


def _steps_table(res: Results) -> list:
    """Environment steps each PPO-style learner needed to reach each reference."""
    pw = res.per_week
    L = []
    L += ["", "Environment steps needed to reach a reference's held-out Set F1 (first learning-curve checkpoint at "
          "which the seed-mean reaches it; PPO-style learners only, curves every "
          f"{res.params['ppo'].get('eval_every', res.params.get('eval_every')):,} steps):", "",
          "| method | budget | Static | Sequential | 95% of the hindsight DP |", "|---|---|---|---|---|"]
    for (m, b), hist in res.curves.items():
        if len(hist[0]) < 2 or (b, "Static") not in pw:
            continue
        cells = []
        for target in (pw[(b, "Static")]["set_f1"].mean(), pw[(b, "Sequential")]["set_f1"].mean()
                       if (b, "Sequential") in pw else np.inf, 0.95 * pw[(b, "HindsightDP")]["set_f1"].mean()):
            x = steps_to_reach(res, m, b, target)
            cells.append("not reached" if x is None else f"{x:,}")
        L.append(f"| {m} | {b} | " + " | ".join(cells) + " |")
    return L


def _early_stopping(res: Results) -> list:
    """The points PPO and DAgger→PPO kept and what their last points would have scored."""
    pw = res.per_week
    L = []
    stopped = [(m, b) for (m, b) in res.curves if m in ("PPO", "DAgger→PPO") and (b, "Sequential") in pw
               and all("test_set_f1" in r for h in res.curves[(m, b)] for r in h)]
    if stopped and res.params["ppo"].get("keep_best"):
        L += ["", "**Early stopping.** PPO and DAgger→PPO keep the learning-curve point with the best validation "
              "Set F1. The points kept and what the last point would have scored on the held-out weeks instead "
              "(seed means):", "", "| method | budget | env steps kept (per seed) | kept | last point | last point "
              "vs Sequential |", "|---|---|---|---|---|---|"]
        for m, b in stopped:
            hist = res.curves[(m, b)]
            kept = [max(range(len(h)), key=lambda i, h=h: (h[i]["val_set_f1"], -i)) for h in hist]
            sel = np.mean([h[i]["test_set_f1"] for h, i in zip(hist, kept)])
            last = np.mean([h[-1]["test_set_f1"] for h in hist])
            steps = ", ".join(f"{h[i]['env_steps']:,}" for h, i in zip(hist, kept))
            L.append(f"| {m} | {b} | {steps} | "
                     f"{sel:.4f} | {last:.4f} | {last - pw[(b, 'Sequential')]['set_f1'].mean():+.4f} |")
    return L


def _critic_view(res: Results) -> list:
    """PPO against PPO whose critic reads the running counts, at B10."""
    L = []
    if ("PPO + counts critic", "B10") in res.curves and ("PPO", "B10") in res.curves:
        counts = mean_curve(res.curves[("PPO + counts critic", "B10")])[-1]
        same = dict(mean_curve(res.curves[("PPO", "B10")])).get(counts[0])
        if same is not None:
            L += ["", f"**The critic's view** (B10, seed means on held-out weeks, both at {counts[0]:,} env steps): "
                  f"PPO {same:.4f}, PPO whose critic also reads the running TP / FP / FN {counts[1]:.4f} "
                  f"({counts[1] - same:+.4f})."]
    return L


def _what_would_change(res: Results) -> list:
    """What would change the conclusion at B10."""
    pw = res.per_week
    ps = res.per_seed
    L = []
    if ("B10", "PPO") in ps and ("B10", "Sequential") in pw:
        per = [float(run["set_f1"].mean()) for run in ps[("B10", "PPO")]]
        gap = np.mean(per) - pw[("B10", "Sequential")]["set_f1"].mean()
        last_gap = mean_curve(res.curves[("PPO", "B10")])[-1][1] - pw[("B10", "Sequential")]["set_f1"].mean()
        best = max(("BC", "DAgger"), key=lambda m: pw[("B10", m)]["set_f1"].mean()) if ("B10", "BC") in pw else None
        L += ["", f"**What would change the conclusion.** At B10 PPO's mean over {len(per)} learner seeds lies "
              f"{gap:+.4f} from Sequential; the learner seeds spread by {np.std(per):.4f} (s.d.) and the weeks' "
              "paired interval above is the uncertainty from the week sample alone, so a difference smaller than "
              "both is not a ranking. PPO's curve is still "
              + ("rising" if len(mean_curve(res.curves[("PPO", "B10")])) > 1 and
                 mean_curve(res.curves[("PPO", "B10")])[-1][1] > mean_curve(res.curves[("PPO", "B10")])[-2][1]
                 else "not rising") + " at its last checkpoint"
              + (f" and its last points score {last_gap:+.4f} against Sequential on the held-out weeks, so at "
                 "B10 the ranking rests on early stopping (the table above)"
                 if res.params["ppo"].get("keep_best") else "")
              + "; a larger step budget could move it; the distilled "
              f"students see {res.params['imitation_weeks']} development weeks"
              + (f" (the best of them here: {best})" if best else "")
              + " and would gain from more teacher-labelled weeks; every learner shares one network and one "
              "observation, so a change of architecture or observation (e.g. the running counts) would have to be "
              "given to all of them to keep the comparison fair."]
    return L


def _goals(res: Results) -> list:
    """The goals' verdicts (none on a smoke run)."""
    L = []
    g = {} if res.quick else goal_check(res)  # a smoke run's numbers carry no verdict
    L += ["", "**Goals**", ""] if g else ["", "**Smoke run** (`--quick`): tiny training budgets; the goals are judged "
                                          "on the full comparison only.", ""]
    for b in res.budgets:
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
    return L


def plot_curves(res: Results, path) -> None:
    """Held-out Set F1 (seed mean) against environment steps (log axis) of every learner, one panel per budget,
    with the hindsight DP, Sequential and Static as lines; BC / DAgger are points at their demonstration steps
    (DAgger→PPO's curve starts at DAgger's point), a learner's untrained start is drawn at one step."""
    budgets = res.budgets
    fig, axes = study_subplots(1, len(budgets), figsize=(4.6 * len(budgets), 3.8), squeeze=False)
    for ax, b in zip(axes[0], budgets):
        for (m, mb), hist in res.curves.items():
            if mb != b:
                continue
            pts = [(max(x, 1), y) for x, y in mean_curve(hist)]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=m)
        for name, style in (("HindsightDP", "--"), ("Sequential", ":"), ("Static", "-.")):
            if (b, name) in res.per_week:
                ax.axhline(res.per_week[(b, name)]["set_f1"].mean(), color="k", ls=style, lw=0.8, label=name)
        ax.set_xscale("log")
        ax.set_title(b)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("held-out Set F1 (mean over learner seeds)")
    max(axes[0], key=lambda ax: len(ax.get_legend_handles_labels()[0])).legend(fontsize=6)
    save_figure(fig, path)


def benchmark_main(argv=None) -> Results:
    """``python -m membudget.evaluate rl-vs-distillation [--quick] [--workers N] [--out FILE.md]``."""
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate rl-vs-distillation",
                                     description="PPO, distil-then-RL, BC and DAgger with one per-resource policy "
                                                 "class against the hindsight DP, current-greedy and BudgetPM's "
                                                 "gates (3 learner seeds, B5 / B10 / B20)")
    parser.add_argument("--quick", action="store_true", help="tiny training budgets (a smoke run, not a result)")
    parser.add_argument("--workers", type=int_flag(1), default=None,
                        help="local worker processes (default: 2, quick: 1); --backend ray uses the cluster's")
    add_backend_flags(parser)
    parser.add_argument("--out", default=None,
                        help="Markdown file, written with its .json and .png beside it (default: "
                             "runs/rl-vs-distillation/<time>/rl_vs_distillation.md)")
    parser.add_argument("--progress-bar", choices=("on", "off", "auto"), default="auto")
    parser.add_argument("--render", default=None, metavar="JSON",
                        help="render the page and figure from saved results (rl_vs_distillation.json) instead of "
                             "training")
    args = parser.parse_args(argv)
    command = evaluate_command("rl-vs-distillation", argv)
    if args.render:
        res = Results.load(args.render)
        command = res.command or command
    else:
        show = sys.stderr.isatty() if args.progress_bar == "auto" else args.progress_bar == "on"
        say = (lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", file=sys.stderr, flush=True)) if show else None
        overrides = {} if args.workers is None else {"workers": args.workers}
        with executor_beside_pool(args, progress=say) as executor:
            res = run_benchmark(quick=args.quick, progress=say, executor=executor, **overrides)
        res.command = command
    text = format_benchmark(res, command)
    print(text)
    out = args.out if args.out is not None else os.path.join(run_folder("rl-vs-distillation"),
                                                             "rl_vs_distillation.md")
    if out:
        folder = write_page(out, text)
        beside = [os.path.join(folder, "rl_vs_distillation_curves.png")]
        plot_curves(res, beside[0])
        if not args.render:
            beside.append(os.path.join(folder, "rl_vs_distillation.json"))
            res.save(beside[-1])
        print(f"wrote {out} ({' and '.join(os.path.basename(p) for p in beside)} beside it)", flush=True)
    return res

"""The BudgetPM reproduction report: every finding of BudgetPM re-measured in our world beside the published figure.

``python -m membudget.evaluate report [--out docs/reproduction.md]`` regenerates it (about two minutes on 2 cores);
``python -m membudget.evaluate structure`` prints its structural part alone (:func:`structure_report`).

Both take ``--backend ray`` (and ``--checkpoint-dir``, :mod:`membudget.studies.execution`): the suite's fits, every
policy evaluation (one task per policy, budget, week range and load, :func:`membudget.studies.budgetpm.evaluate_task`),
every cap sweep of a natural schedule and every exact-cost DP headroom (one task per week range, load, world and
budget) run as tasks; each seeds itself from its key, so the report's numbers do not depend on the backend.
"""

from __future__ import annotations

import argparse
import functools
import time
from dataclasses import dataclass

import numpy as np

from membudget.envs.pm import WorldConfig, budget_levels, generate_episode
from membudget.envs.validation import int_flag
from membudget.studies.cli import add_page_flag, evaluate_command, page_path
from membudget.studies.budgetpm import evaluate_task
from membudget.studies.execution import Executor, add_backend_flags, executor_from_flags, run_with_flags
from membudget.studies.protocol import bootstrap_ci, cost_to_match, sweep, write_page
from membudget.studies.suite import Suite, fit_suite
from membudget.teachers.structure import headroom, open_after_exhaustion

PUBLISHED_SPEND = {  # BudgetPM appendix C.2, severe-scarcity weeks 8000-8029
    ("Static", "B5"): "7.47/2.53/0.00/0.00", ("Myopic", "B5"): "5.67/3.70/0.13/0.50",
    ("Sequential", "B5"): "3.70/5.30/1.00/0.00", ("Static", "B10"): "8.13/7.90/4.50/0.47",
    ("Myopic", "B10"): "6.17/6.80/5.97/1.97", ("Sequential", "B10"): "5.43/6.43/5.67/3.13",
}

PUBLISHED_GREEDY = {"B5": 0.6714, "B10": 0.7832, "B15": 0.8305, "B20": 0.8310}
PUBLISHED_HEADROOM = {"B5": 0.00737, "B10": 0.00367, "B15": 0.0, "B20": 0.0}
PUBLISHED_LOAD = {0: 0.0, 3: 0.0065}
STRUCTURE_BUDGETS = ("B5", "B10", "B15", "B20")
REPETITIONS = 3
"""Seeds of RandomFeasible per week (:func:`~membudget.studies.protocol.evaluate_policy`'s default)."""
ANALYSIS, SEVERE, BOUNDARY, LOAD_WEEKS = range(4000, 4030), range(8000, 8030), range(9000, 9030), range(21000, 21240)
NATURAL = ("PeriodicOutcome", "DeadlineOutcome", "DeadlineBackoffOutcome", "Pacing", "PacingLB")


def evaluation_keys() -> list:
    """``(policy, budget, weeks, load)`` of every evaluation the report reads, in report order."""
    keys = [("AllRelevant", None, ANALYSIS, 0)]
    keys += [(n, b, ANALYSIS, 0) for b in ("B20", "B40", "B60", "B80") for n in ("Static", "MatchedDue", "Boosted")]
    for seeds in (SEVERE, BOUNDARY):
        keys += [(n, b, seeds, 0) for b in ("B5", "B10", "B15", "B20") for n in ("Myopic", "Sequential")]
        keys += [("DeadlineOutcome", b, seeds, 0) for b in ("B5", "B10")]
    keys += [(n, "B5", SEVERE, 0) for n in NATURAL]
    keys += [(n, b, SEVERE, 0) for b in ("B5", "B10") for n in ("Static", "Myopic", "Sequential")]
    keys += [(n, "B10", LOAD_WEEKS, k) for k in (0, 3) for n in ("Myopic", "Sequential")]
    return list(dict.fromkeys(keys))


def report_task(suite, item):
    """One independent unit of the report as a task: ``("policy", name, budget, weeks, load)`` -> per-week
    metrics (:func:`~membudget.studies.budgetpm.evaluate_task`); ``("sweep", name, weeks)`` -> the natural
    schedule's cap sweep; ``("headroom", weeks, load, n_time, budget)`` -> :func:`headroom_task`."""
    kind, *key = item
    if kind == "policy":
        name, budget, seeds, load = key
        return evaluate_task(suite, load, REPETITIONS, (name, budget, seeds))
    if kind == "sweep":
        name, seeds = key
        return sweep(suite, name, list(seeds))
    return headroom_task(tuple(key))


def headroom_task(item) -> dict:
    """Exact-cost DP minus current-greedy as a task: ``(weeks, load, n_time, budget)`` (``n_time`` None: the default
    world) -> per-week ``greedy`` Set F1, ``dp`` Set F1 at the greedy's realized ``cost``, and ``opened``
    (positive opportunities still open after the greedy exhausts its cap, by quarter; one row per week)."""
    seeds, load, n_time, budget = item
    world = WorldConfig() if n_time is None else WorldConfig(n_time=n_time)
    weeks = [generate_episode(s, world, load=load) for s in seeds]
    rows = headroom(weeks, budget)
    return {"greedy": np.array([r[0] for r in rows]), "dp": np.array([r[1] for r in rows]),
            "cost": np.array([r[2] for r in rows]),
            "opened": np.array([open_after_exhaustion(ep, r[3], budget) for ep, r in zip(weeks, rows)])}


@dataclass
class _Measured:
    """What the report reads: the fitted suite and the results of its tasks."""

    suite: Suite
    evaluations: dict
    """``(policy, budget, weeks, load)`` -> per-week metrics."""
    sweeps: dict
    """``(natural schedule, weeks)`` -> its cap sweep."""
    headrooms: dict
    """:func:`headroom_task` item -> its per-week headroom."""
    n_resamples: int

    def get(self, name, budget, seeds, load=0):
        return self.evaluations[(name, budget, seeds, load)]

    def ci(self, x):
        """Paired bootstrap mean and 95% interval of per-week differences ``x``."""
        m, lo, hi = bootstrap_ci(x, self.n_resamples)
        return f"{m:+.4f} [{lo:+.4f}, {hi:+.4f}]"


def _measure(n_resamples: int = 100_000, progress=print, executor=None) -> _Measured:
    """Fits the suite, then runs the report's evaluations, cap sweeps and DP headrooms as tasks of ``executor``
    (default: this process)."""
    executor = executor or Executor()
    suite = fit_suite(progress=lambda m: progress(f"fit: {m}"), map=executor.map)
    policy_keys = evaluation_keys()
    sweep_keys = [(n, seeds) for seeds in (SEVERE, BOUNDARY) for n in ("DeadlineOutcome", "PeriodicOutcome")]
    # the time-trigger ablation's headrooms and section 7's (structure_items), each computed once
    headroom_keys = list(dict.fromkeys([(BOUNDARY, 0, n_time, c) for n_time in (None, 0.0) for c in (10, 21)]
                                       + structure_items()))
    items = ([("policy", *k) for k in policy_keys] + [("sweep", *k) for k in sweep_keys]
             + [("headroom", *k) for k in headroom_keys])
    progress(f"{len(items)} evaluations, sweeps and headrooms ({executor.backend} backend)")
    out = executor.map(functools.partial(report_task, suite), items)
    return _Measured(suite, dict(zip(policy_keys, out)), dict(zip(sweep_keys, out[len(policy_keys):])),
                     dict(zip(headroom_keys, out[len(policy_keys) + len(sweep_keys):])), n_resamples)


def _preamble(r: _Measured) -> list:
    suite = r.suite
    return ["# BudgetPM reproduction report", "",
            "Every comparison of BudgetPM re-measured on `membudget/PMWeek-v0` (unit prices, N_max = 2, "
            "late policy expire). Gates are fitted on development weeks 2000-2019; intervals are paired bootstrap "
            f"95% intervals over complete weeks ({r.n_resamples:,} resamples). Regenerate with "
            "`python -m membudget.evaluate report`.", "",
            f"Fitted: Static thresholds {', '.join(f'{b} {v:.4f}' for b, v in suite.static.thresholds_.items())}; "
            f"Deadline+Backoff parameters (initial, factor, max) = {suite.backoff} (BudgetPM: (2, 1.5, 4)); "
            f"Pacing-LB knots {suite.pacing_lb} (BudgetPM: 0.99 at B5, 0.925 at B10); Myopic / Sequential thresholds "
            + ", ".join(f"{b} {suite.temporal[('myopic', b)].thresholds_[b]:.3f} / "
                        f"{suite.temporal[('sequential', b)].thresholds_[b]:.3f}" for b in ("B5", "B10"))
            + " (BudgetPM: B5 0.950 / 0.250, B10 0.850 / 0.875).", ""]


def _static_against_all_relevant(r: _Measured) -> list:
    L = ["## 1. Static keeps All-relevant quality with fewer queries (analysis weeks 4000-4029)", "",
         "| budget | Static Set F1 | All-relevant Set F1 | share kept | queries saved | published |",
         "|---|---|---|---|---|---|"]
    ar = r.get("AllRelevant", None, ANALYSIS)
    for b in ("B60", "B80"):
        st = r.get("Static", b, ANALYSIS)
        L.append(f"| {b} | {st['set_f1'].mean():.4f} | {ar['set_f1'].mean():.4f} | "
                 f"{100 * st['set_f1'].mean() / ar['set_f1'].mean():.1f}% | "
                 f"{100 * (1 - st['realized_cost'].mean() / ar['realized_cost'].mean()):.1f}% | "
                 "99.9-100% kept, 42-54% fewer |")
    return L


def _outcome_supervision_and_scorer_capacity(r: _Measured) -> list:
    L = ["", "## 2. Outcome supervision and scorer capacity (analysis weeks 4000-4029)", "",
         "| budget | Static F1 / cost | Matched-Due F1 / cost | Static - Due [95% CI] | Boosted F1 / cost | "
         "Static - Boosted [95% CI] |", "|---|---|---|---|---|---|"]
    for b in ("B20", "B40", "B60", "B80"):
        st, du, bo = (r.get(n, b, ANALYSIS) for n in ("Static", "MatchedDue", "Boosted"))
        L.append(f"| {b} | {st['set_f1'].mean():.4f} / {st['realized_cost'].mean():.1f} | "
                 f"{du['set_f1'].mean():.4f} / {du['realized_cost'].mean():.1f} | "
                 f"{r.ci(st['set_f1'] - du['set_f1'])} | "
                 f"{bo['set_f1'].mean():.4f} / {bo['realized_cost'].mean():.1f} | "
                 f"{r.ci(st['set_f1'] - bo['set_f1'])} |")
    return L + ["", "BudgetPM: at B20 Outcome reaches 0.760 with 5.76 fewer queries than Due and improves F1 at "
                "B40-B80; LambdaMART / ensemble scorers give no consistent gain over the logistic gate."]


def _sequential_against_myopic(r: _Measured) -> list:
    L = ["", "## 3. Future-aware supervision: Sequential - Myopic", "",
         "| weeks | budget | Myopic F1 / cost | Sequential F1 / cost | Sequential - Myopic [95% CI] |",
         "|---|---|---|---|---|"]
    for seeds, label in ((SEVERE, "8000-8029"), (BOUNDARY, "9000-9029")):
        for b in ("B5", "B10", "B15", "B20"):
            my, sq = r.get("Myopic", b, seeds), r.get("Sequential", b, seeds)
            L.append(f"| {label} | {b} | {my['set_f1'].mean():.4f} / {my['realized_cost'].mean():.2f} | "
                     f"{sq['set_f1'].mean():.4f} / {sq['realized_cost'].mean():.2f} | "
                     f"{r.ci(sq['set_f1'] - my['set_f1'])} |")
    ident = []
    for b in ("B15", "B20"):
        m, s = r.suite.temporal[("myopic", b)], r.suite.temporal[("sequential", b)]
        same = np.array_equal(m.coef_, s.coef_) and m.thresholds_[b] == s.thresholds_[b]
        ident.append(f"{b}: {'identical' if same else 'not identical'}")
    return L + ["", f"Fitted Myopic and Sequential gates at B15/B20 — {'; '.join(ident)} (BudgetPM: identical, "
                "because its two teachers agree on every development step at B15/B20; ours disagree on a few rows, "
                "see `python -m membudget.evaluate structure`)."]


def _sequential_against_natural_schedules(r: _Measured) -> list:
    L = ["", "## 4. Sequential against natural schedules", "",
         "| weeks | budget | Sequential F1 / recall / cost | Sequential - Deadline-Outcome [95% CI] | "
         "cost for Deadline-Outcome to match | cost for Periodic-Outcome to match |", "|---|---|---|---|---|---|"]
    for seeds, label in ((SEVERE, "8000-8029"), (BOUNDARY, "9000-9029")):
        for b in ("B5", "B10"):
            sq, dl = r.get("Sequential", b, seeds), r.get("DeadlineOutcome", b, seeds)
            f1, rec, cost = sq["set_f1"].mean(), np.nanmean(sq["on_time_recall"]), sq["realized_cost"].mean()
            cells = []
            for n in ("DeadlineOutcome", "PeriodicOutcome"):
                c = cost_to_match(r.sweeps[(n, seeds)], f1, rec)
                cells.append("not reached up to cap 210" if c is None else f"{c:.1f} ({c / cost:.2f}x)")
            L.append(f"| {label} | {b} | {f1:.4f} / {rec:.4f} / {cost:.2f} | "
                     f"{r.ci(sq['set_f1'] - dl['set_f1'])} | {cells[0]} | {cells[1]} |")
    L += ["", "BudgetPM: Sequential exceeds the strongest natural schedule (Deadline-Outcome) by 1.92-2.58 Set F1 "
          "points at B5/B10; Deadline-Outcome needs 1.19-1.50x and Periodic-Outcome 3.49-4.70x Sequential's "
          "observations to match both its Set F1 and on-time recall."]
    b5 = {n: r.get(n, "B5", SEVERE)["set_f1"].mean() for n in NATURAL}
    return L + ["", "Natural schedules at B5 on 8000-8029 (Set F1): "
                + ", ".join(f"{n} {v:.4f}" for n, v in b5.items()) + "."]


def _spend_profiles(r: _Measured) -> list:
    L = ["", "## 5. Spend profiles and exhaustion (severe-scarcity weeks 8000-8029)", "",
         "| budget | policy | spend by quarter | published | exhausted weeks (mean progress) |",
         "|---|---|---|---|---|"]
    for b in ("B5", "B10"):
        for n in ("Static", "Myopic", "Sequential"):
            e = r.get(n, b, SEVERE)
            q = "/".join(f"{v:.2f}" for v in e["spend_per_quarter"].mean(axis=0))
            ex = e["exhaustion_progress"]
            k = int(np.sum(~np.isnan(ex)))
            L.append(f"| {b} | {n} | {q} | {PUBLISHED_SPEND[(n, b)]} | {k}/30"
                     + (f" ({np.nanmean(ex):.3f})" if k else "") + " |")
    return L + ["", "BudgetPM: Sequential moves mean cap exhaustion from 0.311 (Static) to 0.519 of the episode at "
                "B5; at B10 Static exhausts in every week at 0.653, Sequential in 25/30 weeks at 0.862."]


def _load_intervention(r: _Measured) -> list:
    L = ["", "## 6. Opportunity-load intervention at B10 (test weeks 21000-21239, paired by base seed)", ""]
    gains = {}
    for k in (0, 3):
        my, sq = r.get("Myopic", "B10", LOAD_WEEKS, k), r.get("Sequential", "B10", LOAD_WEEKS, k)
        gains[k] = sq["set_f1"] - my["set_f1"]
        L.append(f"- k={k}: Myopic {my['set_f1'].mean():.4f}, Sequential {sq['set_f1'].mean():.4f}; learned gain "
                 f"Sequential - Myopic {r.ci(gains[k])} (published {0.00407 if k == 0 else 0.00836:+.5f})")
    L.append(f"- interaction (gain at k=3 minus gain at k=0): {r.ci(gains[3] - gains[0])}")
    return L + ["", "Simplification: our Myopic / Sequential gates are fitted on k=0 development weeks only (BudgetPM "
                "pools 50 paired k=0/k=3 development weeks with reweighting)."]


def _structural_headroom(r: _Measured) -> list:
    return ["", "## 7. Teachers: structural headroom", "", "```",
            structure_report(r.n_resamples, headrooms=r.headrooms).rstrip(), "```"]


def _rl_versus_distillation() -> list:
    return ["", "## 8. RL versus distillation", "",
            "Trained allocators (PPO, DAgger→PPO, BC and DAgger from the hindsight DP, one policy class) "
            "against the teachers and BudgetPM's gates at B5/B10/B20 on weeks 8000-8029 and 9000-9029 live in "
            "[rl_vs_distillation.md](rl_vs_distillation.md), regenerated by "
            "`python -m membudget.evaluate rl-vs-distillation` (about 17 minutes on 2 cores: it trains every learner)."]


def _time_trigger_ablation(r: _Measured):
    """Mean exact-cost DP - greedy headroom on the boundary weeks at 10 and 21 queries, in the default world and
    without time-based tasks; the mean number of pairs of time triggers per week that fall due on the same step."""
    base, abl = ({c: float(np.mean(r.headrooms[(BOUNDARY, 0, n_time, c)]["dp"]
                                   - r.headrooms[(BOUNDARY, 0, n_time, c)]["greedy"])) for c in (10, 21)}
                 for n_time in (None, 0.0))
    weeks = [generate_episode(x) for x in BOUNDARY]
    collisions = float(np.mean([sum(n * (n - 1) // 2 for n in np.bincount(
        ep.declared_start[(ep.kind == 0) & ep.registered & (ep.polarity == 0)], minlength=ep.horizon))
        for ep in weeks]))
    return base, abl, collisions


def _agreement(r: _Measured) -> list:
    base, abl, collisions = _time_trigger_ablation(r)
    return [
        "", "## Where our world agrees and where it differs", "",
        "- **Agrees:** Static keeps All-relevant Set F1 at B60/B80 with 41-54% fewer queries; Sequential beats "
        "Myopic at B5/B10 on both disjoint week ranges and the difference is indistinguishable from 0 at B15/B20 "
        "(the scarcity boundary); Sequential beats every natural schedule at B5/B10; the learned gain grows under "
        "opportunity load; the greedy oracle's Set F1 is within 0.01 of the published values.",
        "- **Outcome = Due.** On the All-relevant reference trajectory a query with a positive singleton effect is, "
        "in our world, exactly one that resolves a trigger due now (channel lures rarely show inside their windows, "
        "`p_lure_in_window` = 0.05), so the two label sets nearly coincide and Static equals Matched-Due; BudgetPM "
        "finds Outcome better. A world where look-alike states overlap real triggers more often would separate them.",
        "- **Larger gains from timing.** Exact-cost DP - greedy, Sequential - Myopic and Sequential - "
        "Deadline-Outcome at B5/B10 are 1.5-3x the published values, and the natural schedules need more "
        f"observations to match Sequential. The cause is the clock: {collisions:.1f} pairs of time triggers per "
        "week fall due on the same step, so one clock check executes two; the DP saves scarce budget for those "
        "steps while the greedy oracle spends it on the first single triggers. Without time-based tasks "
        f"(`WorldConfig(n_time=0)`, same weeks) the exact-cost DP - greedy headroom drops to {abl[10]:+.4f} at "
        f"10 queries and {abl[21]:+.4f} at 21 (default world: {base[10]:+.4f} / {base[21]:+.4f}).",
        "- **Teachers disagree slightly at B15/B20**, so our fitted Myopic and Sequential gates are not identical "
        "there (their Set F1 differences are indistinguishable from 0)."]


def build(n_resamples: int = 100_000, progress=print, executor=None) -> str:
    """The report's text; the suite's fits, the evaluations, sweeps and DP headrooms run as tasks of ``executor``
    (default: this process; :func:`_measure`)."""
    t0 = time.perf_counter()
    r = _measure(n_resamples, progress, executor)
    L = _preamble(r)
    for title, section in (("1. Static against All-relevant", _static_against_all_relevant),
                           ("2. Static against Matched-Due and the boosted scorer",
                            _outcome_supervision_and_scorer_capacity),
                           ("3. Sequential against Myopic", _sequential_against_myopic),
                           ("4. natural schedules", _sequential_against_natural_schedules),
                           ("5. spend profiles", _spend_profiles),
                           ("6. load intervention", _load_intervention),
                           ("7. structural results and the time-trigger ablation", _structural_headroom)):
        progress(title)
        L += section(r)
    L += _rl_versus_distillation() + _agreement(r) + ["", f"Generated in {time.perf_counter() - t0:.0f} s."]
    return "\n".join(L) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate report")
    add_page_flag(parser, "report", "reproduction.md")
    parser.add_argument("--resamples", type=int_flag(1), default=100_000)
    add_backend_flags(parser)
    args = parser.parse_args(argv)
    args.out = page_path(args.out, "report", "reproduction.md")
    write_page(args.out, run_with_flags(args, functools.partial(build, args.resamples)))
    print(f"wrote {args.out}")


def structure_items(n_boundary: int = 30, n_load: int = 240) -> list:
    """The :func:`headroom_task` items of :func:`structure_report`: the boundary weeks at B5/B10/B15/B20, then the
    controlled-load weeks at B10 for k=0 and k=3."""
    levels = budget_levels()
    boundary, load_weeks = range(9000, 9000 + n_boundary), range(21000, 21000 + n_load)
    return ([(boundary, 0, None, levels[name]) for name in STRUCTURE_BUDGETS]
            + [(load_weeks, k, None, levels["B10"]) for k in (0, 3)])


def structure_report(n_resamples: int = 100_000, n_boundary: int = 30, n_load: int = 240, executor=None,
                     headrooms=None) -> str:
    """Structural results of BudgetPM appendix C.3.3 / C.4 on our world:

    - current-greedy Set F1 at B5/B10/B15/B20 on the boundary weeks 9000-9029 beside the published values;
    - exact-cost hindsight DP minus current-greedy at the greedy's realized cost, per budget, with paired bootstrap
      95% intervals over complete weeks;
    - the same at B10 for opportunity load k=0 and k=3 on the controlled-load test weeks 21000-21239 (paired by
      base seed), and the k=3 minus k=0 difference;
    - positive opportunities still open after the greedy oracle exhausts its cap, by episode quarter.

    Each headroom (week range, load, budget; :func:`structure_items`) is a task of ``executor``
    (:func:`headroom_task`; default: this process), unless ``headrooms`` (``{item: headroom}``) already holds them.
    """
    levels = budget_levels()
    boundary, load_weeks = range(9000, 9000 + n_boundary), range(21000, 21000 + n_load)
    items = structure_items(n_boundary, n_load)
    out = headrooms if headrooms is not None else dict(zip(items, (executor or Executor()).map(headroom_task, items)))
    lines = [f"Boundary weeks 9000-{8999 + n_boundary} (unit costs, N_max = 2, late policy expire)", "",
             f"{'budget':>6} {'greedy F1':>10} {'published':>10} {'cost':>7} | "
             f"{'DP - greedy at exact cost [95% CI]':<38}{'published':>10} | open after exhaustion by quarter"]
    for name in STRUCTURE_BUDGETS:
        h = out[(boundary, 0, None, levels[name])]
        mean, lo, hi = bootstrap_ci(h["dp"] - h["greedy"], n_resamples)
        opened = h["opened"].sum(axis=0)
        lines.append(f"{name:>6} {h['greedy'].mean():>10.4f} {PUBLISHED_GREEDY[name]:>10.4f} "
                     f"{h['cost'].mean():>7.2f} | {mean:+.5f} [{lo:+.5f}, {hi:+.5f}]{'':<10}"
                     f"{PUBLISHED_HEADROOM[name]:>+10.5f} | {'/'.join(str(int(x)) for x in opened)}")
    lines += ["", f"Controlled load at B10, test weeks 21000-{20999 + n_load} (paired by base seed)", ""]
    per_load = {}
    for k in (0, 3):
        h = out[(load_weeks, k, None, levels["B10"])]
        per_load[k] = h["dp"] - h["greedy"]
        mean, lo, hi = bootstrap_ci(per_load[k], n_resamples)
        lines.append(f"k={k}: DP - greedy at exact cost {mean:+.5f} [{lo:+.5f}, {hi:+.5f}]   (published "
                     f"{PUBLISHED_LOAD[k]:+.4f}); greedy F1 {h['greedy'].mean():.4f}")
    mean, lo, hi = bootstrap_ci(per_load[3] - per_load[0], n_resamples)
    lines.append(f"k=3 minus k=0: {mean:+.5f} [{lo:+.5f}, {hi:+.5f}]")
    return "\n".join(lines)


def structure_main(argv=None):
    """``python -m membudget.evaluate structure [--resamples N]``: :func:`structure_report` alone."""
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate structure",
                                     description="greedy Set F1, exact-cost DP headroom, load intervention")
    parser.add_argument("--resamples", type=int_flag(1), default=100_000, help="paired bootstrap resamples")
    add_backend_flags(parser)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with executor_from_flags(args) as executor:
        text = structure_report(args.resamples, executor=executor)
    print(text)
    print(f"\ncommand: {evaluate_command('structure', argv)}   ({time.perf_counter() - start:.1f} s)")
    return text

"""The imitation gap at equal data and class, for a student that sees one observation and for one that sees its
history (issue 31, items 4 and the distillation goal): on ``PMWeek-v0``, the same development weeks are labelled
by the online planner (:class:`~membudget.teachers.online.HindsightPlanner`, which decides from what the agent has
seen) and by the hindsight DP (which sees the whole week), each teacher labelling its own rollouts; one student of
each class is fitted to each teacher's labels with the same settings and learner seeds, and all are played on the
held-out weeks 8000-8029 + 9000-9029, paired over the weeks.

- ``one observation``: :class:`~membudget.agents.per_resource.PerResourceNet` on the current observation (BC,
  the package's :data:`~membudget.agents.configs.DEFAULTS`, uncalibrated): the online-ceiling study's student.
- ``learned recurrence``: :func:`~membudget.agents.history.fit_gru_student` (a GRU cell shared by the resources
  and a ``PerResourceNet`` reading its state, fitted together through time): the history-students study's
  deployable student, at its size and epochs.

A teacher's labels are imitable when they depend only on what the student can know. The DP's depend on the hidden
onsets and deadlines; the planner's on the agent's history, which only the history-aware student reads. The page
also gives each teacher's own Set F1 on the held-out weeks (how much of its teacher each student keeps) and the
CPU time of the planner's labels.

The planner's labels are the online-ceiling study's tasks (:func:`~membudget.studies.online_ceiling.planner_labels`,
each development week one task, seed = the week) and are checkpointed with this study's tasks under
``runs/online-ceiling/cache`` by default (``--checkpoint-dir``). ``--quick``: two development weeks, two held-out
weeks, small ``K``, one learner seed (a check that the study runs).

``python -m membudget.evaluate imitation-gap [--quick] [--out docs/imitation_gap.md]``
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from membudget.studies.online_ceiling import (CACHE, FULL as CEILING, minutes_per_1000_weeks, page_study_main,
                                              paired_ci, planner_labels, planner_week, references, seed_mean,
                                              student_task)
from membudget.studies.history_students import FULL as HISTORY, gru_student

CLASSES = ("one observation", "learned recurrence")
TEACHERS = ("online", "dp")


@dataclasses.dataclass(frozen=True)
class GapConfig:
    held_out: tuple = CEILING.held_out
    planner: tuple = (32, 64)
    """``(K, particles)`` of the planner whose labels are fitted (the online-ceiling study's choice)."""
    runs: tuple = (("B10", 200), ("B5", 200), ("B20", 200), ("B10", 1000))
    """``(budget, n)``: every student fitted on development weeks 2000..2000+n-1 at ``budget``."""
    learner_seeds: tuple = (0, 1, 2)
    gru: tuple = HISTORY.gru
    """``(hidden, epochs)`` of the learned-recurrence student (the history-students study's)."""


FULL = GapConfig()
QUICK = GapConfig(held_out=(8000, 9000), planner=(2, 8), runs=(("B10", 2),), learner_seeds=(0,), gru=(8, 2))


def dp_labels(item):
    """Task: the hindsight DP's labels of its own rollout of one development week; one Demonstrations.
    ``item = (budget, week)``."""
    from membudget.agents.imitation import dp_demonstrations

    budget, week = item
    return dp_demonstrations([week], budget)


def measure(cfg: GapConfig, progress=print, executor=None) -> dict:
    """Every figure of the page (module docstring), as arrays per week."""
    from membudget.agents.imitation import Demonstrations

    run = executor.map
    out = {"runs": {}, "teachers": {}}
    for budget in dict.fromkeys(b for b, _ in cfg.runs):
        progress(f"the teachers on the held-out weeks at {budget}")
        ref = run(references, [(budget, cfg.held_out)])[0]
        out["teachers"][budget] = {"Sequential": ref["Sequential"], "dp": ref["HindsightDP"], "dp_cpu": ref["dp_cpu"],
                                   "online": np.array([r["set_f1"] for r in run(planner_week, [
                                       (budget, *cfg.planner, w) for w in cfg.held_out])])}
    for budget, n in cfg.runs:
        weeks = range(2000, 2000 + n)
        progress(f"the planner's labels at {budget} ({n} development weeks)")
        before, t0 = executor.computed, time.perf_counter()
        labels = run(planner_labels, [(budget, *cfg.planner, w) for w in weeks])
        wall = (time.perf_counter() - t0, executor.computed - before)
        episodes = {"online": [x["demos"] for x in labels], "dp": run(dp_labels, [(budget, w) for w in weeks])}
        r = {"label_cpu": np.array([x["cpu"] for x in labels]), "label_wall": wall,
             "states": {t: int(sum(len(e.labels) for e in episodes[t])) for t in TEACHERS}}
        for t in TEACHERS:
            progress(f"students of the {t} teacher at {budget} ({n} weeks)")
            both = Demonstrations.concatenate(episodes[t])
            r[("one observation", t)] = run(student_task, [(both, budget, s, cfg.held_out)
                                                           for s in cfg.learner_seeds])
            r[("learned recurrence", t)] = run(gru_student, [(episodes[t], budget, cfg.gru, s, cfg.held_out)
                                                             for s in cfg.learner_seeds])
        out["runs"][(budget, n)] = r
    return out


def _wall_clock(seconds: float, computed: int, n: int) -> str:
    """A label stage's wall clock over the ``computed`` of its ``n`` weeks this run labelled (the rest loaded)."""
    if not computed:
        return "every week loaded from checkpoints"
    loaded = f", {n - computed} loaded" if computed < n else ""
    per_1000 = 1000 * seconds / computed / 60
    return f"{seconds:.0f} s for the {computed} weeks computed ({per_1000:.1f} min per 1,000){loaded}"


def render(cfg: GapConfig, res: dict, command: str) -> str:
    k, m = cfg.planner
    seeds = ", ".join(map(str, cfg.learner_seeds))
    lines = ["# The imitation gap at equal data and class (PMWeek-v0)", "",
             f"Generated by `{command}` (tasks checkpointed under `{CACHE}` by default; a re-run loads them). "
             "Module: `membudget.studies.imitation_gap`.", "",
             f"The same development weeks (2000..2000+n-1) labelled by the online planner (K = {k}, {m} particles, "
             "seed = the week; it decides from what the agent has seen) and by the hindsight DP (it sees the whole "
             "week), each teacher labelling its own rollouts. One student of each class is fitted to each teacher's "
             f"labels with the same settings and learner seeds ({seeds}): *one observation* is `PerResourceNet` on "
             "the current observation (BC, the package's `DEFAULTS`, uncalibrated); *learned recurrence* is "
             f"`fit_gru_student` (a GRU cell of {cfg.gru[0]} units shared by the resources and a `PerResourceNet` "
             f"reading its state, {cfg.gru[1]} epochs: the history-students study's deployable student). Held-out "
             f"weeks ({len(cfg.held_out)}): a student's Set F1 per week is the mean over the learner seeds; paired "
             "95% percentile-bootstrap intervals over the weeks.", "",
             "## The teachers on the held-out weeks", "",
             "| budget | Sequential | planner | hindsight DP | planner - Sequential |", "|---|---|---|---|---|"]
    for b, t in res["teachers"].items():
        seq = np.asarray(t["Sequential"])
        lines.append(f"| {b} | {seq.mean():.4f} | {t['online'].mean():.4f} | {np.mean(t['dp']):.4f} | "
                     f"{paired_ci(t['online'] - seq)[0]} |")
    lines += ["", "## Students of the planner against students of the DP", "",
              "| budget | n weeks | class | student of the planner | student of the DP | planner's - DP's | "
              "planner's - Sequential | DP's - Sequential | per seed (planner's / DP's) |",
              "|---|---|---|---|---|---|---|---|---|"]
    goals = []
    for (b, n), r in res["runs"].items():
        seq = np.asarray(res["teachers"][b]["Sequential"])
        for c in CLASSES:
            on, dp = seed_mean(r[(c, "online")]), seed_mean(r[(c, "dp")])
            gap, lo, _ = paired_ci(on - dp)
            per = "; ".join(f"{np.mean(a['set_f1']):.4f} / {np.mean(d['set_f1']):.4f}"
                            for a, d in zip(r[(c, "online")], r[(c, "dp")]))
            lines.append(f"| {b} | {n} | {c} | {on.mean():.4f} | {dp.mean():.4f} | {gap} | "
                         f"{paired_ci(on - seq)[0]} | {paired_ci(dp - seq)[0]} | {per} |")
            goals.append(f"- Distilling the online teacher beats distilling the DP at equal data and class ({c}, "
                         f"{b}, {n} weeks): {gap} — {'met' if lo > 0 else 'not met'}.")
    lines += ["", "## The planner's labels", "",
              "| budget | n weeks | states (planner / DP) | CPU s per week, median (mean, max) | 1,000 weeks on 2 "
              "cores at the median | wall clock of the labels | DP's CPU per week |", "|---|---|---|---|---|---|---|"]
    for (b, n), r in res["runs"].items():
        cpu = r["label_cpu"]
        lines.append(f"| {b} | {n} | {r['states']['online']:,} / {r['states']['dp']:,} | {np.median(cpu):.2f} "
                     f"({cpu.mean():.2f}, {cpu.max():.2f}) | {minutes_per_1000_weeks(cpu):.1f} min | "
                     f"{_wall_clock(*r['label_wall'], n)} | "
                     f"{1e3 * res['teachers'][b]['dp_cpu']:.1f} ms |")
    lines += ["", "The first task of each worker includes the kernels' compilation. The wall clock is the labels "
              "stage's own in the run that wrote this page, with every worker busy, over the weeks it computed "
              "(weeks labelled by an earlier stage or run are loaded from the checkpoints).", "",
              "## The issue's goal, measured", "", *goals]
    return "\n".join(lines) + "\n"


def main(argv=None):
    return page_study_main(argv, study="imitation-gap", page="imitation_gap.md", doc=__doc__,
                           quick_help="two development weeks, two held-out weeks, small K, one learner seed",
                           configs=(FULL, QUICK), measure=measure, render=render)

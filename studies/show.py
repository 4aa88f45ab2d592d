"""``python -m membudget.evaluate show``: one PMWeek-v0 week played by a policy, drawn beside the hindsight DP's
schedule of the same week.

``python -m membudget.evaluate show --policy Static --budget B10 --week 9000`` writes a PNG of two timelines
(resources × steps: candidates, queries, on-time executions, false executions, misses, and the budget left), the
policy's above the DP's, each titled with its Set F1, queries and budget use. ``--policy`` is one of BudgetPM's
allocators (:data:`membudget.studies.suite.POLICIES`); ``--model PATH`` plays a model trained by
``python -m membudget.train`` instead (a run directory, an SB3 ``.zip`` or an imitation ``.npz``; loaded safely
unless ``--trust-model``). Only what the chosen policy needs is fitted on the development weeks 2000-2019:
nothing for AllRelevant and RandomFeasible, the label dataset and one gate for the others (plus the backoff
parameters of DeadlineBackoffOutcome or the Pacing-LB knot). Environment settings are the evaluation's:
N_max 2, unit prices, late policy expire, load 0. The default output is ``runs/show/<policy>-<budget>-week<week>.png``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

import numpy as np

from membudget.envs.pm import PMWeekEnv, budget_levels
from membudget.envs.pm.env import spent_so_far, week_title, week_view
from membudget.envs.rendering import DPI, new_figure, timeline_legend
from membudget.studies.cli import plain
from membudget.studies.protocol import check_model_settings, parse_budget
from membudget.studies.suite import DEV_SEEDS, POLICIES, TEMPORAL_BUDGETS, Suite

SHOW_SIZE = (960, 1000)
"""``(height, width)`` of the picture in pixels."""
FITTED_AT = {"Myopic": TEMPORAL_BUDGETS, "Sequential": TEMPORAL_BUDGETS, "PacingLB": ("B5", "B10")}
"""Policies fitted per budget, and the budgets the suite fits them at (:func:`membudget.studies.suite.fit_suite`)."""
GATE_OF = {"Static": "static", "MatchedDue": "due", "Boosted": "boosted", "Relevance": "relevance",
           "PeriodicOutcome": "static", "DeadlineOutcome": "static", "DeadlineBackoffOutcome": "static",
           "Pacing": "static", "PacingLB": "static"}
"""The suite's gate each policy is built on (Myopic and Sequential: their temporal gate at the budget)."""


class _Parser(argparse.ArgumentParser):
    """Refuses bad arguments in one line (exit status 2), before any work."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _policy_name(text: str) -> str:
    if text not in POLICIES:
        raise argparse.ArgumentTypeError(f"unknown policy {text!r}; choose one of {', '.join(POLICIES)}")
    return text


def _budget(text: str):
    try:
        budget = parse_budget(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if budget is None:
        raise argparse.ArgumentTypeError("a week is shown under a budget: a level or an integer, not none")
    return budget


def _week(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be an integer >= 0 (a week seed), got {text!r}")
    return int(text)


def parse_args(argv=None) -> argparse.Namespace:
    parser = _Parser(prog="python -m membudget.evaluate show", description=plain(__doc__),
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--policy", type=_policy_name, help=f"one of {', '.join(POLICIES)}")
    who.add_argument("--model", metavar="PATH", help="a trained model: run directory, SB3 .zip or imitation .npz")
    parser.add_argument("--trust-model", action="store_true",
                        help="load an SB3 .zip with SB3's full load, which runs any code it holds (trusted files only)")
    parser.add_argument("--budget", type=_budget, default="B10", help="a level (B5...B80) or an integer (default B10)")
    parser.add_argument("--week", type=_week, default=9000, help="the week's seed (default 9000, a held-out week)")
    parser.add_argument("--out", default="",
                        help="the PNG to write (default runs/show/<policy>-<budget>-week<week>.png)")
    args = parser.parse_args(argv)
    if args.policy in FITTED_AT and args.budget not in FITTED_AT[args.policy]:
        parser.error(f"argument --budget: {args.policy} is fitted at {', '.join(FITTED_AT[args.policy])} only, "
                     f"got {args.budget}")
    if args.out and not args.out.lower().endswith(".png"):
        parser.error(f"argument --out: must name a .png file, got {args.out!r}")
    if args.model is not None:
        from membudget.agents.rl import load_policy

        try:
            check_model_settings(args.model)
            args.loaded = load_policy(args.model, trust_remote_code=args.trust_model)
        except (OSError, ValueError) as e:
            parser.error(f"argument --model: {e}")
    return args


def fit_policy(name: str, budget, say=print):
    """``(policy, env_kwargs)`` of the suite's policy ``name`` at ``budget``, fitting on the development weeks only
    what it needs."""
    from membudget.studies.suite import fit_gate, select_backoff, select_pacing_threshold
    from membudget.teachers import build_label_dataset

    levels = budget_levels()
    suite = Suite(levels=levels, static=None, due=None, boosted=None, relevance=None)
    gate = GATE_OF.get(name, (name.lower(), budget) if name in FITTED_AT else None)
    if gate is not None:
        start = time.perf_counter()
        dataset = build_label_dataset(DEV_SEEDS, list(TEMPORAL_BUDGETS))
        fitted = fit_gate(dataset, levels, gate)
        if isinstance(gate, tuple):
            suite.temporal[gate] = fitted
        else:
            setattr(suite, gate, fitted)
        if name == "DeadlineBackoffOutcome":
            suite.backoff = select_backoff(suite.static)
        elif name == "PacingLB":
            suite.pacing_lb[budget] = select_pacing_threshold(suite.static, budget, levels[budget])
        say(f"fitted {name} on the development weeks {DEV_SEEDS.start}-{DEV_SEEDS.stop - 1} "
            f"({time.perf_counter() - start:.1f} s)")
    return suite.policy(name, budget)


def play(policy, week: int, **env_kwargs) -> PMWeekEnv:
    """Week ``week`` played by ``policy`` (policy protocol, given batches of one observation) in a PMWeek-v0
    that records its picture; returns the finished environment."""
    env = PMWeekEnv(render_mode="rgb_array", **env_kwargs)
    obs, _ = env.reset(seed=week)
    state, done, first = None, False, True
    while not done:
        action, state = policy.predict({k: v[None] for k, v in obs.items()}, state=state,
                                       episode_start=np.array([first]), deterministic=True)
        obs, _, done, _, _ = env.step(np.asarray(action)[0])
        first = False
    return env


def draw(played: PMWeekEnv, dp: PMWeekEnv, name: str, budget, path: str):
    """The two weeks, ``played`` (by the policy ``name``) above ``dp``, as a PNG of :data:`SHOW_SIZE` at ``path``."""
    fig = new_figure(SHOW_SIZE)
    grid = fig.add_gridspec(2, 1, left=0.15, right=0.985, top=0.9, bottom=0.09, hspace=0.3)
    for spec, env, who in ((grid[0], played, name), (grid[1], dp, "hindsight DP")):
        title = f"{who}, " + week_title(env.core, 0, env.budget)
        week_view(fig, spec, env.episode, env.budget).update(env.timeline, int(env.core.t[0]),
                                                             spent_so_far(env.core, 0), title)
    level = f"{budget} = {dp.budget}" if isinstance(budget, str) else str(budget)
    fig.suptitle(f"PMWeek-v0 week {played.episode.meta['seed']}, budget {level}, N_max 2: the policy's week (top), "
                 "the hindsight DP's optimal schedule (bottom)", fontsize=10, x=0.02, ha="left", y=0.985)
    timeline_legend(fig)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=DPI)


def main(argv=None):
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    from membudget.teachers import HindsightDP, SchedulePolicy

    if args.model is not None:
        policy, kw = args.loaded
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(os.path.normpath(args.model)))
        name = f"model {stem}"
    else:
        policy, kw = fit_policy(args.policy, args.budget)
        name = stem = args.policy
    if kw.get("budget", 0) is None:
        name += " (the unconstrained reference: no budget, no per-step cap)"
    path = args.out or os.path.join("runs", "show", f"{stem}-{args.budget}-week{args.week}.png")
    played = play(policy, args.week, **{"budget": args.budget, "per_step_cap": 2, **kw})
    budget = budget_levels()[args.budget] if isinstance(args.budget, str) else args.budget
    schedule = HindsightDP(budget=budget, per_step_cap=2).solve(played.episode)
    dp = play(SchedulePolicy([schedule.schedule], played.core.n_resources), args.week, budget=budget,
              per_step_cap=2)
    draw(played, dp, name, args.budget, path)
    for who, env in ((name, played), ("hindsight DP", dp)):
        print(f"{who}: " + week_title(env.core, 0, env.budget).replace("\n", "; "))
    print(f"wrote {path}")
    return path

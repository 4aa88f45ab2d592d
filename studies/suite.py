"""BudgetPM's allocators assembled for evaluation: fit every gate on the development weeks once, then build any
policy at any budget (with the environment arguments it needs)."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field

import numpy as np

from membudget.agents.gates import THRESHOLD_GRID, BoostedGate, StaticGate, TemporalGate
from membudget.baselines import AllRelevant, RandomFeasible
from membudget.baselines.schedules import (DeadlineBackoffOutcome, DeadlineOutcome, Pacing, PeriodicOutcome,
                                           RelevanceGate)
from membudget.envs.pm import budget_levels
from membudget.envs.pm.rollout import rollout
from membudget.teachers import build_label_dataset

DEV_SEEDS = range(2000, 2020)
ANALYSIS_SEEDS = range(4000, 4030)
TEMPORAL_BUDGETS = ("B5", "B10", "B15", "B20")
BACKOFF_GRID = tuple(itertools.product((1, 2), (1.5, 2.0), (4, 8)))
POLICIES = ("AllRelevant", "RandomFeasible", "Relevance", "Static", "MatchedDue", "Boosted", "Myopic", "Sequential",
            "PeriodicOutcome", "DeadlineOutcome", "DeadlineBackoffOutcome", "Pacing", "PacingLB")


@dataclass
class Suite:
    """Fitted gates and selected schedule parameters."""

    levels: dict
    static: StaticGate
    due: StaticGate
    boosted: BoostedGate
    relevance: RelevanceGate
    temporal: dict = field(default_factory=dict)
    """``{(teacher, budget): TemporalGate}``."""
    backoff: tuple = (2, 1.5, 4)
    pacing_lb: dict = field(default_factory=dict)
    """``{budget: threshold}`` of Pacing-LB."""

    def policy(self, name: str, budget, seed: int = 0):
        """``(policy, env_kwargs)`` for ``name`` at ``budget`` (a level name, an int, or None)."""
        cap = self.levels[budget] if isinstance(budget, str) else budget
        scores = {"action_mode": "scores"}
        if name == "AllRelevant":
            return AllRelevant(), {"budget": None, "per_step_cap": None}
        if name == "RandomFeasible":
            return RandomFeasible(per_step_cap=2, seed=seed), {}
        if name in ("Static", "MatchedDue", "Boosted", "Relevance"):
            gate = {"Static": self.static, "MatchedDue": self.due, "Boosted": self.boosted,
                    "Relevance": self.relevance}[name]
            return _Bound(gate, self.nearest_level(budget)), scores
        if name in ("Myopic", "Sequential"):
            return self.temporal[(name.lower(), budget)], scores
        if cap is None and name in ("PeriodicOutcome", "DeadlineOutcome", "DeadlineBackoffOutcome", "Pacing"):
            raise ValueError(f"{name} spreads a finite cap over the episode; it needs a budget, got None")
        if name == "PeriodicOutcome":
            return PeriodicOutcome(scorer=self.static, cap=cap), scores
        if name == "DeadlineOutcome":
            return DeadlineOutcome(scorer=self.static, cap=cap), scores
        if name == "DeadlineBackoffOutcome":
            i, f, m = self.backoff
            return DeadlineBackoffOutcome(scorer=self.static, cap=cap, initial=i, factor=f, max_interval=m), scores
        if name == "Pacing":
            return Pacing(scorer=self.static, threshold=self.static.threshold_for("B20")), scores
        if name == "PacingLB":
            return Pacing(scorer=self.static, threshold=self.pacing_lb[budget]), scores
        raise KeyError(f"unknown policy {name!r}; known: {POLICIES}")


    def nearest_level(self, budget):
        """The level whose thresholds a Static-calibrated gate uses at ``budget``: the level itself, the level
        with the nearest query count for an int, and the largest calibrated level for no budget."""
        if isinstance(budget, str):
            return budget
        if budget is None:
            return max(self.static.thresholds_, key=lambda b: self.levels[b])
        return min(self.levels, key=lambda b: (abs(self.levels[b] - budget), self.levels[b]))


class _Bound:
    """A Static-calibrated gate bound to one budget's threshold."""

    def __init__(self, gate, budget):
        self.gate, self.threshold = gate, gate.threshold_for(budget)

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        return self.gate.action_for(observation, self.threshold), state


def _backoff_score(static, seeds, params_cap):
    """Mean Set F1 and realized cost of DeadlineBackoffOutcome ``(i, f, m)`` at one cap (one task)."""
    (i, f, m), cap = params_cap
    res = rollout(DeadlineBackoffOutcome(scorer=static, cap=cap, initial=i, factor=f, max_interval=m), seeds,
                  budget=cap, action_mode="scores")
    return float(res["set_f1"].mean()), float(res["realized_cost"].mean())


def select_backoff(static, seeds=ANALYSIS_SEEDS, caps=(10, 21), map=map):
    """BudgetPM's rule: maximise mean Set F1 across caps 10 and 21 on the analysis weeks; ties to lower cost, then
    simpler parameters (smaller initial interval, factor, max interval). One task per (parameters, cap)."""
    items = [(params, cap) for params in BACKOFF_GRID for cap in caps]
    scores = dict(zip(items, map(functools.partial(_backoff_score, static, tuple(seeds)), items)))
    best = None
    for params in BACKOFF_GRID:
        f1s, costs = zip(*(scores[(params, cap)] for cap in caps))
        key = (-round(float(np.mean(f1s)), 12), float(np.mean(costs)), params)
        if best is None or key < best[0]:
            best = (key, params)
    return best[1]


def _pacing_score(static, seeds, cap_thr):
    cap, thr = cap_thr
    res = rollout(Pacing(scorer=static, threshold=thr), seeds, budget=cap, action_mode="scores")
    return float(res["set_f1"].mean()), float(res["realized_cost"].mean())


def select_pacing_threshold(static, budget, cap, seeds=DEV_SEEDS, map=map):
    """Pacing-LB's low-budget knot: 0.05 ... 0.95, 0.975, 0.99 maximising mean week Set F1 on the development
    weeks; ties to lower cost, then the higher threshold. One task per threshold."""
    grid = list(THRESHOLD_GRID) + [0.975, 0.99]
    best = None
    for thr, (f1, cost) in zip(grid, map(functools.partial(_pacing_score, static, tuple(seeds)),
                                         [(cap, thr) for thr in grid])):
        key = (-round(f1, 12), cost, -thr)
        if best is None or key < best[0]:
            best = (key, thr)
    return float(best[1])


def fit_gate(dataset, levels, spec):
    """One gate of the suite fitted on the label dataset (one task): ``spec`` is a name or (teacher, budget)."""
    if isinstance(spec, tuple):
        return TemporalGate(teacher=spec[0], budget=spec[1]).fit(dataset, levels)
    gate = {"static": StaticGate, "due": functools.partial(StaticGate, label="due"), "boosted": BoostedGate,
            "relevance": RelevanceGate}[spec]()
    return gate.fit(dataset, levels)


def fit_suite(dev_seeds=DEV_SEEDS, temporal_budgets=TEMPORAL_BUDGETS, analysis_seeds=ANALYSIS_SEEDS,
              progress=None, map=map) -> Suite:
    """Fit every gate on the development weeks and select the schedule parameters (unit prices, N_max = 2).

    ``map`` (``map(fn, items)`` -> results in order; a study executor's ``map``) runs the independent parts as
    tasks: the label dataset by week chunks, one task per gate, per backoff candidate and per Pacing-LB knot."""
    levels = budget_levels()
    step = progress or (lambda msg: None)
    step("label dataset")
    ds = build_label_dataset(dev_seeds, list(temporal_budgets), map=map)
    step("gates (Static, Matched-Due, Boosted, Relevance, Myopic and Sequential per budget)")
    specs = ["static", "due", "boosted", "relevance"] + [(teacher, b) for b in temporal_budgets
                                                           for teacher in ("myopic", "sequential")]
    gates = dict(zip(specs, map(functools.partial(fit_gate, ds, levels), specs)))
    suite = Suite(levels=levels, static=gates["static"], due=gates["due"], boosted=gates["boosted"],
                  relevance=gates["relevance"], temporal={k: v for k, v in gates.items() if isinstance(k, tuple)})
    step("backoff parameters")
    suite.backoff = select_backoff(suite.static, analysis_seeds, map=map)
    for b in ("B5", "B10"):
        step(f"Pacing-LB knot at {b}")
        suite.pacing_lb[b] = select_pacing_threshold(suite.static, b, levels[b], dev_seeds, map=map)
    return suite

"""Measured statistics of the default week beside PM-Bench / BudgetPM targets (``python -m membudget.envs.pm
calibrate``)."""

from __future__ import annotations

import numpy as np

from .levels import DEV_SEEDS, all_relevant_costs, budget_levels
from .world import KIND_CHANNEL, KIND_TIME, KIND_VISIBLE, LURE, NEVER, POS, Episode, WorldConfig, \
    generate_episode


def resolvable_opportunities(ep: Episode, lookahead: int) -> int:
    """Positive stored intentions that some allowed query (candidate, active, triggered, on time) executes."""
    hidden = (ep.kind != KIND_VISIBLE) & (ep.polarity == POS) & ep.registered & (ep.onset < NEVER)
    first = np.maximum.reduce([ep.active_from, ep.onset, ep.declared_start - lookahead])
    last = np.minimum.reduce([ep.active_until, ep.deadline, ep.declared_end])
    return int(np.sum(hidden & (first <= last)))


def week_statistics(ep: Episode, lookahead: int) -> dict:
    task = (ep.version == 0) & (ep.polarity != LURE)
    return {
        "steps": ep.horizon,
        "days": int(ep.step_day.max()) + 1,
        "resources": ep.n_resources,
        "intentions": int(task.sum()),
        "time_based": int(np.sum(task & (ep.kind == KIND_TIME))),
        "hidden_channel": int(np.sum(task & (ep.kind == KIND_CHANNEL))),
        "visible": int(np.sum(task & (ep.kind == KIND_VISIBLE))),
        "cross_day": int(np.sum(task & ep.cross_day)),
        "updates": len(ep.updates),
        "lures": int(np.sum(ep.polarity == LURE)),
        "resolvable_opportunities": resolvable_opportunities(ep, lookahead),
    }


TARGETS = {
    "steps": ("80", lambda v: v == 80),
    "days": ("7", lambda v: v == 7),
    "resources": ("11 incl. clock", lambda v: v == 11),
    "intentions": ("~83", lambda v: abs(v - 83) <= 8),
    "time_based": ("~26", lambda v: abs(v - 26) <= 4),
    "hidden_channel": ("~15", lambda v: abs(v - 15) <= 3),
    "visible": ("~42 (the rest)", lambda v: abs(v - 42) <= 6),
    "cross_day": ("~7", lambda v: abs(v - 7) <= 3),
    "updates": ("~11", lambda v: abs(v - 11) <= 3),
    "lures": ("~74", lambda v: abs(v - 74) <= 8),
    "resolvable_opportunities": ("[22, 32] (BudgetPM ~26.7)", lambda v: 22 <= v <= 32),
    "all_relevant_cost": ("[190, 230] (BudgetPM 209.4)", lambda v: 190 <= v <= 230),
    "all_relevant_set_f1": ("0.82 +- 0.04 (BudgetPM 0.820)", lambda v: abs(v - 0.82) <= 0.04),
}


def calibrate(seeds=DEV_SEEDS, config: WorldConfig | None = None) -> dict:
    """Mean statistics over ``seeds`` (default: development weeks 2000-2019)."""
    config = config or WorldConfig()
    stats = [week_statistics(generate_episode(s, config), config.lookahead) for s in seeds]
    out = {k: float(np.mean([s[k] for s in stats])) for k in stats[0]}
    costs, metrics = all_relevant_costs(seeds, config)
    out["all_relevant_cost"] = float(costs.mean())
    out["all_relevant_set_f1"] = float(metrics[:, 0].mean())
    return out


def report(seeds=DEV_SEEDS, config: WorldConfig | None = None) -> str:
    seeds = list(seeds)
    stats = calibrate(seeds, config)
    lines = [f"PMWeek-v0 default world, mean over seeds {seeds[0]}-{seeds[-1]} ({len(seeds)} weeks)", "",
             f"{'statistic':<28}{'measured':>10}  {'target':<32}{'met':>4}"]
    for k, (target, ok) in TARGETS.items():
        lines.append(f"{k:<28}{stats[k]:>10.3f}  {target:<32}{'yes' if ok(stats[k]) else 'NO':>4}")
    lines += ["", "budget levels (unit costs): " + ", ".join(f"{k}={v}" for k, v in budget_levels(config).items()),
              "BudgetPM:                    B5=10, B10=21, B15=31, B20=42, B40=84, B60=126, B80=168"]
    return "\n".join(lines)

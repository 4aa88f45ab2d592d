"""Budget levels B5...B80: q% of the mean All-relevant query cost over the development weeks (BudgetPM §4)."""

from __future__ import annotations

import functools
import re

import numpy as np

from ..validation import check_int
from .world import MAX_BUDGET, WorldConfig, generate_episode

DEV_SEEDS = range(2000, 2020)
LEVELS = (5, 10, 15, 20, 40, 60, 80)
_LEVEL_RE = re.compile(r"^B(\d+)$")


CALIBRATION_CELLS = 1 << 22
"""Most per-step cells (steps × resources, summed over the weeks) that :func:`all_relevant_costs` steps at once:
every week of the default world together, a few weeks at a time at long horizons or with many resources (all
twenty development weeks of a 10,000-step, 1,000-resource world held at once took 4 GB)."""


def all_relevant_costs(seeds, config: WorldConfig | None = None, cost_profile: str = "unit", load: int = 0):
    """Realised cost of the All-relevant reference (every candidate, every step, no caps) on each seed, and each
    week's episode metrics."""
    config = config or WorldConfig()
    seeds = list(seeds)
    chunk = max(1, CALIBRATION_CELLS // (config.horizon * len(config.resources)))
    parts = [_all_relevant(seeds[lo:lo + chunk], config, cost_profile, load)
             for lo in range(0, max(1, len(seeds)), chunk)]
    return np.concatenate([c for c, _ in parts]), np.concatenate([m for _, m in parts])


def _all_relevant(seeds, config: WorldConfig, cost_profile: str, load: int):
    """:func:`all_relevant_costs` of weeks stepped together in one core."""
    from .core import PMWeekCore

    n, n_res = len(seeds), len(config.resources)
    core = PMWeekCore(n, n_res, budget=None, per_step_cap=None, per_step_cost_cap=None, late_policy="expire",
                      b_frac=1.0)
    for i, s in enumerate(seeds):
        core.load(i, generate_episode(s, config, cost_profile, load), config.lookahead)
    rows = np.arange(n)
    res = np.zeros((n, n_res, 27), dtype=np.float32)
    bud = np.zeros((n, 9), dtype=np.float32)
    mask = np.zeros((n, n_res), dtype=np.int8)
    sel = np.zeros((n, n_res), dtype=np.int8)
    skipped = np.zeros((n, 4), dtype=np.int64)
    reward = np.zeros(n)
    events = np.zeros((n, 7), dtype=np.int64)
    metrics = np.zeros((n, core.metrics.shape[1]))
    for _ in range(config.horizon):
        core.observe(rows, res, bud, mask)
        core.step(rows, mask.astype(np.float64), sel, skipped, reward, events, metrics)
    return core.counters[:, 3].astype(np.float64), metrics


@functools.lru_cache(maxsize=32)
def mean_all_relevant_cost(config: WorldConfig | None = None, cost_profile: str = "unit") -> float:
    """Mean All-relevant cost over development weeks 2000-2019 (load 0), in the profile's integer units."""
    costs, _ = all_relevant_costs(DEV_SEEDS, config or WorldConfig(), cost_profile)
    return float(costs.mean())


def budget_levels(config: WorldConfig | None = None, cost_profile: str = "unit") -> dict:
    """``{"B5": int, ..., "B80": int}`` for a world and cost profile."""
    mean = mean_all_relevant_cost(config or WorldConfig(), cost_profile)
    return {f"B{q}": int(round(q / 100.0 * mean)) for q in LEVELS}


def resolve_budget(budget, config: WorldConfig, cost_profile: str):
    """``(B, target_fraction)`` from an int, a level name of :data:`LEVELS` such as ``"B10"`` or None (no episode
    budget)."""
    return resolve_budget_from_mean(budget, lambda: mean_all_relevant_cost(config, cost_profile), LEVELS)


def budget_argument(env):
    """The ``budget`` argument that gives another environment ``env``'s budget and target fraction (what the budget
    features read): its level name where it was built from one, else its integer budget (or None)."""
    e = env.unwrapped
    if e.budget is None:
        return None
    q = round(100 * e.target_fraction)
    level = f"B{q}"
    if q in LEVELS and resolve_budget(level, e.world, e.cost_profile) == (e.budget, e.target_fraction):
        return level
    return int(e.budget)


def check_level(budget: str, levels=LEVELS, none: str | None = "None") -> int:
    """The ``q`` of a level name ``"Bq"`` among ``levels``; anything else raises ``ValueError`` naming the accepted
    levels (the levels the package calibrates its gates for; another budget is an integer number of queries).
    ``none``: how the message names no budget: ``"None"`` (Python's, the default), ``"none"`` (the command lines'
    word), or None where a budget is needed."""
    m = _LEVEL_RE.match(budget)
    if not m or int(m.group(1)) not in levels:
        hint = f" (did you mean {budget.upper()!r}?)" if budget.upper() != budget and _LEVEL_RE.match(
            budget.upper()) and int(budget[1:]) in levels else ""
        if none and budget != none and budget.lower() == none.lower():
            hint = f" (did you mean {none}?)" if none == "None" else f" (did you mean {none!r}?)"
        raise ValueError(f"budget {budget!r} is not a level{hint}; the levels are "
                         f"{', '.join(f'B{q}' for q in levels)} (or give an integer budget"
                         f"{f', or {none}' if none else ''})")
    return int(m.group(1))


def parse_budget(text, levels=LEVELS, *, none_ok: bool = True):
    """A budget as the command lines and config files give it, checked before any work: ``none`` (or None) → no
    budget (unless not ``none_ok``), an integer (``"21"``) → that many queries, in ``[1, MAX_BUDGET]``, else a level
    name among ``levels`` (default PMWeek-v0's; :func:`check_level` names the accepted ones). Anything else raises
    ``ValueError``."""
    if (text is None or text == "none") and not none_ok:
        raise ValueError(f"budget {text!r} is not accepted here: give a level ({', '.join(f'B{q}' for q in levels)}) "
                         "or a positive integer")
    if text is None or text == "none":
        return None
    if isinstance(text, (bool, np.bool_)):
        raise ValueError(f"budget must be none, a positive integer or a level name, got {text!r}")
    if isinstance(text, (int, np.integer)) or re.fullmatch(r"-?[0-9]+", str(text)):  # "-5" too: an integer < 1
        return check_int("budget", int(text), 1, MAX_BUDGET)
    check_level(str(text), levels, none="none" if none_ok else None)
    return str(text)


def resolve_budget_from_mean(budget, mean_cost, levels=LEVELS):
    """``(B, target_fraction)`` of a budget against a reference mean cost (``mean_cost()``, called only when
    needed): an int, a level name ``"Bq"`` of ``levels`` (round(q% of the mean)) or None (no episode budget)."""
    if budget is None:
        return None, 1.0
    if isinstance(budget, str):
        q = check_level(budget, levels)
        value = int(round(q / 100.0 * mean_cost()))
        if value <= 0:
            raise ValueError(f"budget {budget!r} rounds to {value} <= 0 for this world")
        return value, q / 100.0
    if isinstance(budget, (bool, np.bool_)) or not isinstance(budget, (int, np.integer)):
        raise TypeError(f"budget must be an int, None or a level like 'B10', got {budget!r}")
    if not 0 < budget <= MAX_BUDGET:
        raise ValueError(f"budget must be an int in 1..{MAX_BUDGET}, got {budget}")
    mean = mean_cost()
    return int(budget), int(budget) / mean if mean > 0 else 1.0

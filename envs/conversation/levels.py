"""Budget levels of ConversationPM-v0: q% of the mean All-semantic cost (every candidate pair verified, no caps)
over the 12 development conversations 2000-2011 (BudgetPM §4: 51.5 on GoodAI gives B20/B40/B60/B80 =
10/21/31/41)."""

from __future__ import annotations

import functools

import numpy as np

from ..pm.levels import resolve_budget_from_mean
from .world import ConversationConfig, generate_conversation

DEV_SEEDS = range(2000, 2012)
LEVELS = (10, 20, 30, 40, 50, 60, 70, 80)
"""The budget level names ``"Bq"`` the environment accepts: BudgetPM's GoodAI budgets B20-B80, its interpolation
budgets B30/B50/B70, and B10 (5 calls)."""


@functools.lru_cache(maxsize=32)
def mean_all_semantic_cost(config: ConversationConfig | None = None) -> float:
    """Mean number of candidate pairs per development conversation: All-semantic's cost."""
    config = config or ConversationConfig()
    return float(np.mean([generate_conversation(s, config).candidates().sum() for s in DEV_SEEDS]))


def budget_levels(config: ConversationConfig | None = None) -> dict:
    """``{"B10": int, ..., "B80": int}`` of :data:`LEVELS` (B30/B50/B70 included: BudgetPM's interpolation
    budgets)."""
    mean = mean_all_semantic_cost(config or ConversationConfig())
    return {f"B{q}": int(round(q / 100.0 * mean)) for q in LEVELS}


def resolve_budget(budget, config: ConversationConfig):
    """``(B, target_fraction)`` from an int, a level name of :data:`LEVELS` such as ``"B60"`` or None."""
    return resolve_budget_from_mean(budget, lambda: mean_all_semantic_cost(config), LEVELS)

"""Query-aware LOW / MID / HIGH routing of memory-extraction modules (BudgetMem, ``membudget/TierRouting-v0``)."""

from .env import DEFAULT_LAMBDAS, TierRoutingEnv, feature_names, query_for_seed
from .world import (BACKBONES, COMBOS, MODULES, N_COMBOS, N_MODULES, N_TIERS, POPULATIONS, PROFILES, STRATEGIES,
                    TIERS, Outcomes, Query, combo_index, floor_cost_bound, generate_query, outcomes, reference_costs)
from .wrappers import BudgetMemReward, CostNormalizer

__all__ = [
    "BACKBONES", "COMBOS", "DEFAULT_LAMBDAS", "MODULES", "N_COMBOS", "N_MODULES", "N_TIERS", "POPULATIONS",
    "PROFILES", "STRATEGIES", "TIERS", "BudgetMemReward", "CostNormalizer", "Outcomes", "Query", "TierRoutingEnv",
    "combo_index", "feature_names", "floor_cost_bound", "generate_query", "outcomes", "query_for_seed",
    "reference_costs",
]

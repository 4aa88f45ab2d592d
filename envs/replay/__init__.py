"""The lifelong replay stream of LIMBO (``membudget/ReplayStream-v0``)."""

from .env import FEATURE_NAMES, N_FEATURES, ReplayStreamEnv
from .world import (ACTIONS, BUDGET_CAPS, BUDGETS, FAMILIES, MODES, N_ACTIONS, PROFILE_PARAMS, PROFILES, RECENT_KS,
                    Stream, action_index, generate_stream)

__all__ = [
    "ACTIONS", "BUDGETS", "BUDGET_CAPS", "FAMILIES", "FEATURE_NAMES", "MODES", "N_ACTIONS", "N_FEATURES",
    "PROFILES", "PROFILE_PARAMS", "RECENT_KS", "ReplayStreamEnv", "Stream", "action_index", "generate_stream",
]

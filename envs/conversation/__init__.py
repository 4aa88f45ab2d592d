"""The budgeted semantic-verifier conversation (``membudget/ConversationPM-v1``; ``-v0`` the earlier world): BudgetPM's
GoodAI LTM setting."""

from .env import (ConversationPMEnv, ConversationPMv0Env, Scorecard, ceiling_calls, conversation_score,
                  leave_one_out_effects)
from .episode_io import conversation_from_dict, conversation_to_dict, load_conversation, save_conversation, \
    validate_conversation
from .levels import DEV_SEEDS, budget_levels, mean_all_semantic_cost
from .world import (GOODAI_FEATURE_NAMES, WORLD_V0, WORLD_V1, Conversation, ConversationConfig, generate_conversation,
                    to_pm_episode)

__all__ = [
    "Conversation", "ConversationConfig", "ConversationPMEnv", "ConversationPMv0Env", "DEV_SEEDS",
    "GOODAI_FEATURE_NAMES", "Scorecard", "WORLD_V0", "WORLD_V1", "budget_levels", "ceiling_calls",
    "conversation_from_dict", "conversation_score", "conversation_to_dict", "generate_conversation",
    "leave_one_out_effects", "load_conversation",
    "mean_all_semantic_cost", "save_conversation", "to_pm_episode", "validate_conversation",
]

"""The budgeted semantic-verifier conversation (``membudget/ConversationPM-v0``): BudgetPM's GoodAI LTM setting."""

from .env import ConversationPMEnv, Scorecard
from .episode_io import conversation_from_dict, conversation_to_dict, load_conversation, save_conversation, \
    validate_conversation
from .levels import DEV_SEEDS, budget_levels, mean_all_semantic_cost
from .world import GOODAI_FEATURE_NAMES, Conversation, ConversationConfig, generate_conversation, to_pm_episode

__all__ = [
    "Conversation", "ConversationConfig", "ConversationPMEnv", "DEV_SEEDS", "GOODAI_FEATURE_NAMES", "Scorecard",
    "budget_levels", "conversation_from_dict", "conversation_to_dict", "generate_conversation", "load_conversation",
    "mean_all_semantic_cost", "save_conversation", "to_pm_episode", "validate_conversation",
]

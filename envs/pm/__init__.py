"""The budgeted prospective-memory week (``membudget/PMWeek-v0``)."""

from .core import BUDGET_FEATURE_NAMES, RESOURCE_FEATURE_NAMES
from .env import PMWeekEnv
from .episode_io import EpisodeFormatError, episode_from_dict, episode_to_dict, load_episode, save_episode, \
    validate_episode
from .levels import DEV_SEEDS, budget_levels, mean_all_relevant_cost
from .vector import PMWeekVectorEnv
from .world import COST_PROFILES, NEVER, Episode, WorldConfig, generate_episode

__all__ = [
    "BUDGET_FEATURE_NAMES", "COST_PROFILES", "DEV_SEEDS", "Episode", "EpisodeFormatError", "NEVER", "PMWeekEnv",
    "PMWeekVectorEnv", "RESOURCE_FEATURE_NAMES", "WorldConfig", "budget_levels", "episode_from_dict",
    "episode_to_dict", "generate_episode", "load_episode", "mean_all_relevant_cost", "save_episode",
    "validate_episode",
]

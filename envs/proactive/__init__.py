"""Proactive intervene / abstain decisions over event streams with budgeted hierarchical memory
(``membudget/ProactiveStream-v0``, ProactMem)."""

from .env import DEPTHS, FEATURE_NAMES, MEMORY_VARIANTS, N_FEATURES, ProactiveStreamEnv, episode_metrics
from .schema import Routine, ScopeSpec, Stream
from .world import CODE, DEFAULT_DAYS, HOME, SCOPES, SPORTS, evidence, feasible, generate_stream

__all__ = [
    "CODE", "DEFAULT_DAYS", "DEPTHS", "FEATURE_NAMES", "HOME", "MEMORY_VARIANTS", "N_FEATURES", "ProactiveStreamEnv",
    "Routine", "SCOPES", "SPORTS", "ScopeSpec", "Stream", "episode_metrics", "evidence", "feasible", "generate_stream",
]

"""Hand-written allocators. Every policy follows the policy protocol of DESIGN §6:
``predict(observation, state=None, episode_start=None, deterministic=True) -> (action, state)``."""

from .pm import AllRelevant, RandomFeasible

__all__ = ["AllRelevant", "RandomFeasible"]

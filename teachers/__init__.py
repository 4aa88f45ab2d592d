"""Teachers: oracles that see the frozen week and label data for imitation."""

from .current_greedy import CurrentGreedy
from .hindsight_dp import HindsightDP, Schedule

__all__ = ["CurrentGreedy", "HindsightDP", "Schedule"]

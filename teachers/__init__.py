"""Teachers: oracles that see the frozen week and label data for imitation."""

from .hindsight_dp import HindsightDP, Schedule

__all__ = ["HindsightDP", "Schedule"]

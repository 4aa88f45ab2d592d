"""Teachers: oracles that see the frozen week and label data for imitation."""

from .current_greedy import CurrentGreedy
from .hindsight_dp import HindsightDP, Schedule
from .labels import LabelDataset, build_label_dataset
from .policy import SchedulePolicy

__all__ = ["CurrentGreedy", "HindsightDP", "LabelDataset", "Schedule", "SchedulePolicy", "build_label_dataset"]

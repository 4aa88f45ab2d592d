"""Teachers: the oracles that see the frozen week (the hindsight DP, current-greedy, their labels) and, imported
when first named, the online planners that see only what the agent sees (``HindsightPlanner``,
``RolloutPlanner``, ``BayesFeatureGate``, with ``AgentView`` and ``PosteriorSampler``) and the upper bound
``InformationRelaxationBound``."""

from importlib import import_module

from .current_greedy import CurrentGreedy
from .hindsight_dp import HindsightDP, Schedule
from .labels import LabelDataset, build_label_dataset
from .policy import SchedulePolicy

_LAZY = {"AgentView": ".observed", "BayesFeatureGate": ".online", "HindsightPlanner": ".online",
         "InformationRelaxationBound": ".dual_bound", "PosteriorSampler": ".posterior", "RolloutPlanner": ".online"}

__all__ = ["CurrentGreedy", "HindsightDP", "LabelDataset", "Schedule", "SchedulePolicy", "build_label_dataset",
           *_LAZY]


def __getattr__(name):
    # the online modules compile their kernels' dispatchers on import: loaded only when a user names them
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

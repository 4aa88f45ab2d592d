"""RL versus distillation on ``PMWeek-v0``: PPO, DAgger→PPO, BC and DAgger (and, at B10, PPO with a counts critic, a
flat-MLP PPO and SB3's PPO) trained on identical dynamics and compared with the hindsight DP, current-greedy and
BudgetPM's gates.

- :mod:`~membudget.studies.rl_vs_distillation.configs` (torch-free): the run configs of ``python -m
  membudget.train ppo | sb3-ppo | sb3-maskable-ppo | sb3-ppo-conditioned | bc | dagger`` (``TRAIN_COMMANDS``), the
  comparison's settings (``BENCH_FULL``, ``BENCH_QUICK``) and its learners (``LEARNER_SPECS``);
- :mod:`~membudget.studies.rl_vs_distillation.training`: the runs behind those subcommands (a run directory with
  the model, ``config.json``, ``metrics.csv`` and learning curves);
- :mod:`~membudget.studies.rl_vs_distillation.jobs`: ``run_benchmark``, every learner at every budget and seed;
- :mod:`~membudget.studies.rl_vs_distillation.results`: the typed ``Results``, saved and loaded as JSON, and the
  goals;
- :mod:`~membudget.studies.rl_vs_distillation.report`: the page and figure, ``benchmark_main`` (``python -m
  membudget.evaluate rl-vs-distillation [--quick]``).

Importing this package loads the configs only; every other name is imported from its module on first use.
"""

import importlib

from membudget.studies.rl_vs_distillation.configs import (  # noqa: F401 (the package's names)
    B10_ONLY, BENCH_FULL, BENCH_QUICK, LEARNER_SPECS, LEARNERS, PER_STEP_CAP, REFERENCES, TRAIN_COMMANDS,
    ConditionedPPOConfig, ImitationConfig, Learner, NativePPOConfig, RunOutput, SB3PPOConfig)

_LAZY = {
    "training": ("train_native", "train_sb3_ppo", "train_conditioned", "train_imitation", "train_sb3",
                 "train_sb3_maskable", "train_bc", "train_dagger"),
    "jobs": ("run_benchmark", "training_job", "run_jobs"),
    "results": ("Results", "goal_check", "mean_curve", "paired", "steps_to_reach"),
    "report": ("format_benchmark", "plot_curves", "benchmark_main"),
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))

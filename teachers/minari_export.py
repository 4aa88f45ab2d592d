"""The hindsight DP's demonstrations on ``PMWeek-v0`` as a Minari dataset
(``python -m membudget.teachers export-minari``): each week is played by the DP's optimal schedule, so the
dataset's rewards sum to the DP's Set F1 per week."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from membudget.envs.recording import record_minari

from .hindsight_dp import HindsightDP


def export_dp_demonstrations(dataset_id: str, seeds, *, budget="B10", per_step_cap: int = 2, **env_kwargs):
    """Create the Minari dataset ``dataset_id`` of the DP's schedules on the weeks ``seeds`` of
    ``gym.make("membudget/PMWeek-v0", budget=..., per_step_cap=..., **env_kwargs)`` (binary actions)."""
    import membudget  # noqa: F401  (registers the ids)

    env = gym.make("membudget/PMWeek-v0", budget=budget, per_step_cap=per_step_cap, **env_kwargs)
    plan = {}

    def act(base, obs, info):
        t = int(base._core.t[0])
        if t == 0:  # a new week: the DP's schedule for it
            plan.clear()
            for s, r in HindsightDP.from_env(base).solve(base.episode).schedule:
                plan.setdefault(s, []).append(r)
        a = np.zeros(base.action_space.shape, dtype=base.action_space.dtype)
        a[plan.get(t, [])] = 1
        return a

    return record_minari(env, act, seeds, dataset_id, algorithm_name="HindsightDP",
                         description=f"Hindsight-DP schedules on PMWeek-v0 weeks at budget {budget}")

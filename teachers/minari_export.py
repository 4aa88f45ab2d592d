"""The hindsight DP's demonstrations on ``PMWeek-v0`` as a Minari dataset
(``python -m membudget.teachers export-minari``; on an execution backend ``python -m membudget.evaluate
demonstrations``): each week is played by the DP's optimal schedule, so the dataset's rewards sum to the DP's Set
F1 per week."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np

from membudget.envs.recording import record_minari

from .hindsight_dp import HindsightDP


def _make_env(budget, per_step_cap, env_kwargs):
    import membudget  # noqa: F401  (registers the ids)

    return gym.make("membudget/PMWeek-v0", budget=budget, per_step_cap=per_step_cap, **env_kwargs)


def dp_week_schedule(budget, per_step_cap, env_kwargs, seed) -> tuple:
    """One task of the export: the DP's optimal schedule ``((step, resource), ...)`` of the week ``seed`` of the
    dataset's environment (a fresh one, reset with that seed: the week the recording plays)."""
    env = _make_env(budget, per_step_cap, env_kwargs)
    env.reset(seed=int(seed))
    base = env.unwrapped
    schedule = HindsightDP.from_env(base).solve(base.episode).schedule
    env.close()
    return tuple((int(s), int(r)) for s, r in schedule)


def export_dp_demonstrations(dataset_id: str, seeds, *, budget="B10", per_step_cap: int = 2, map=map,
                             **env_kwargs):
    """Create the Minari dataset ``dataset_id`` of the DP's schedules on the weeks ``seeds`` of
    ``gym.make("membudget/PMWeek-v0", budget=..., per_step_cap=..., **env_kwargs)`` (binary actions).

    Every week's schedule is one :func:`dp_week_schedule` task through ``map`` (``map(fn, items)`` -> results in
    item order, e.g. a study executor's ``map`` for Ray); this process then records the weeks with those
    schedules, so the dataset is the same for every ``map``."""
    seeds = [int(s) for s in seeds]
    schedules = iter(list(map(functools.partial(dp_week_schedule, budget, per_step_cap, env_kwargs), seeds)))
    env = _make_env(budget, per_step_cap, env_kwargs)
    plan = {}

    def act(base, obs, info):
        t = int(base.core.t[0])
        if t == 0:  # a new week: the DP's schedule for it
            plan.clear()
            for s, r in next(schedules):
                plan.setdefault(s, []).append(r)
        a = np.zeros(base.action_space.shape, dtype=base.action_space.dtype)
        a[plan.get(t, [])] = 1
        return a

    return record_minari(env, act, seeds, dataset_id, algorithm_name="HindsightDP",
                         description=f"Hindsight-DP schedules on PMWeek-v0 weeks at budget {budget}")

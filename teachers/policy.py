"""Teacher schedules played through the policy protocol."""

from __future__ import annotations

import numpy as np


class SchedulePolicy:
    """Replays fixed per-week schedules (``[(step, resource), ...]``, one per week in rollout order) as a
    binary-action policy: the hindsight DP and the current-greedy oracle evaluated through the same loop."""

    def __init__(self, schedules, n_resources: int):
        self.plans = []
        for sched in schedules:
            plan = {}
            for t, r in sched:
                plan.setdefault(int(t), []).append(int(r))
            self.plans.append(plan)
        self.n_resources = n_resources
        self.t = 0

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        """The schedules' queries at the current step: ``(n, R)`` for a batch of ``n`` weeks (one schedule each),
        ``(R,)`` for a single observation (one schedule)."""
        mask = np.asarray(observation["mask"])
        single = mask.ndim == 1
        n = 1 if single else mask.shape[0]
        if n != len(self.plans):
            raise ValueError(f"{len(self.plans)} schedules for {'a single week' if single else f'a batch of {n} weeks'}")
        if episode_start is not None and np.all(episode_start):
            self.t = 0
        a = np.zeros((n, self.n_resources), dtype=np.int8)
        for i, plan in enumerate(self.plans):
            for r in plan.get(self.t, ()):
                a[i, r] = 1
        self.t += 1
        return (a[0] if single else a), state

"""The online teacher of ``PMWeek-v0`` as a wrapper: :class:`OnlineTeacher` puts the online planner's action for the
current state (:class:`~membudget.teachers.online.HindsightPlanner`: hindsight optimisation over posterior weeks
given only what the agent has seen) in ``info["teacher_action"]``, at reset and after every step, like
:class:`~membudget.wrappers.HindsightTeacher` does with the hindsight DP — so BC, DAgger and any imitation code can
distil a teacher whose labels depend on nothing the student could not know. With ``oracle_feature=True`` it also
puts ``info["p_resolve"]``: per resource, the share of the planner's ``K`` posterior draws in which a query now
resolves a stored intention (an estimate of the exact posterior probability; 0 where no resource is a candidate).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from membudget.envs.pm import PMWeekEnv
from membudget.teachers.observed import AgentView
from membudget.teachers.online import HindsightPlanner

from .teacher import TEACHER_KEY

P_RESOLVE_KEY = "p_resolve"


class OnlineTeacher(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Adds the online planner's action to ``info["teacher_action"]`` (module docstring). ``samples``: the
    planner's ``K``; ``n_particles``: its weighted draws; ``seed``: its random stream (the labels of a run repeat).
    ``teacher_calls`` counts the planner's decisions so far."""

    def __init__(self, env: gym.Env, *, samples: int = 8, n_particles=None, seed: int = 0,
                 oracle_feature: bool = False):
        gym.utils.RecordConstructorArgs.__init__(self, samples=samples, n_particles=n_particles, seed=seed,
                                                 oracle_feature=oracle_feature)
        if not isinstance(env.unwrapped, PMWeekEnv):
            raise TypeError(f"OnlineTeacher wraps a PMWeekEnv, got {type(env.unwrapped).__name__}")
        view = env if isinstance(env, AgentView) else AgentView(env)
        gym.Wrapper.__init__(self, view)
        self.oracle_feature = bool(oracle_feature)
        self.planner = HindsightPlanner(env=view, n_samples=samples, n_particles=n_particles, seed=seed).fit()
        self.teacher_calls = 0

    def _label(self, obs, info, done=False):
        space = self.action_space
        if done:
            label = np.zeros(space.shape, dtype=space.dtype) if self.unwrapped.action_mode == "binary" else \
                np.full(space.shape, -1.0, dtype=space.dtype)
            p = np.zeros(space.shape[0])
        else:
            label, _ = self.planner.predict(obs)
            self.teacher_calls += 1
            last = self.planner.last_
            p = np.zeros(space.shape[0]) if last is None else last["p_resolve"]
        info[TEACHER_KEY] = label
        if self.oracle_feature:
            info[P_RESOLVE_KEY] = p
        return info

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs, self._label(obs, dict(info))

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._label(obs, dict(info), terminated or truncated)

"""The online teacher of ``PMWeek-v0`` and ``ConversationPM`` as a wrapper: :class:`OnlineTeacher` puts the online
planner's action for the current state (:class:`~membudget.teachers.online.HindsightPlanner`: hindsight
optimisation over posterior weeks given only what the agent has seen; on a conversation
:class:`~membudget.teachers.conversation_online.ConversationPlanner`, over posterior conversations) in
``info["teacher_action"]``, at reset and after every step, like
:class:`~membudget.wrappers.HindsightTeacher` does with the hindsight DP — so BC, DAgger and any imitation code can
distil a teacher whose labels depend on nothing the student could not know. With ``oracle_feature=True`` every
observation also carries ``"p_resolve"`` (``Box(0, 1, (R,), float32)``, added to the observation space): per
resource, the share of the planner's ``K`` posterior draws in which a query now resolves a stored intention (on a
conversation: verifies a true fire; an estimate of the exact posterior probability; 0 where no resource is a
candidate, and after the last step), the "oracle feature" a policy or gate can read as an input.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from membudget.envs.conversation import ConversationPMEnv
from membudget.envs.pm import PMWeekEnv
from membudget.envs.pm.env import scores_of
from membudget.envs.validation import check_bool, check_int
from membudget.teachers import conversation_online
from membudget.teachers.observed import AgentView
from membudget.teachers.online import DEFAULT_SAMPLES, HindsightPlanner

from .teacher import TEACHER_KEY

P_RESOLVE_KEY = "p_resolve"


class OnlineTeacher(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Adds the online planner's action to ``info["teacher_action"]`` (module docstring). ``samples``: the
    planner's ``K`` (default: the studies' choice, 32 on a week, :data:`~membudget.teachers.conversation_online.
    DEFAULT_SAMPLES` on a conversation); ``n_particles``: its weighted draws;
    ``seed``: its random stream (the labels of a run repeat), restarted at every seeded reset, so that
    ``reset(seed=s)`` repeats the week's labels (and oracle features); unseeded resets continue it.
    ``teacher_calls`` counts the planner's decisions so far. The arguments are checked here, each error naming
    it: ``samples`` an int in [1, 100000] or None, ``n_particles`` an int in [1, 1000000] or None, ``seed`` a
    non-negative int, ``oracle_feature`` a bool."""

    def __init__(self, env: gym.Env, *, samples: int | None = None, n_particles=None, seed: int = 0,
                 oracle_feature: bool = False):
        gym.utils.RecordConstructorArgs.__init__(self, samples=samples, n_particles=n_particles, seed=seed,
                                                 oracle_feature=oracle_feature)
        samples = check_int("samples", samples, 1, 100_000, none_ok=True)
        n_particles = check_int("n_particles", n_particles, 1, 10**6, none_ok=True)
        seed = check_int("seed", seed, 0)
        oracle_feature = check_bool("oracle_feature", oracle_feature)
        e = getattr(env, "unwrapped", env)
        if isinstance(e, ConversationPMEnv):
            view = env
            self.planner = conversation_online.ConversationPlanner(
                budget=e.budget, per_step_cap=e.per_step_cap, false_fire_penalty=e.false_fire_penalty, world=e.world,
                n_samples=conversation_online.DEFAULT_SAMPLES if samples is None else samples,
                n_particles=n_particles, seed=seed).fit()
        elif isinstance(e, PMWeekEnv):
            view = env if isinstance(env, AgentView) else AgentView(env)
            self.planner = HindsightPlanner(env=view, n_samples=DEFAULT_SAMPLES if samples is None else samples,
                                            n_particles=n_particles, seed=seed).fit()
        else:
            raise TypeError(f"OnlineTeacher wraps a PMWeekEnv or a ConversationPMEnv, got {type(e).__name__}")
        gym.Wrapper.__init__(self, view)
        self.oracle_feature = bool(oracle_feature)
        if self.oracle_feature:
            n_res = view.action_space.shape[0]
            self.observation_space = gym.spaces.Dict({**view.observation_space.spaces, P_RESOLVE_KEY: gym.spaces.Box(
                0.0, 1.0, (n_res,), np.float32)})
        self.teacher_calls = 0

    def _label(self, obs, info, done=False):
        space = self.action_space
        if done:
            label = np.zeros(space.shape, dtype=space.dtype) if self.unwrapped.action_mode == "binary" else \
                np.full(space.shape, -1.0, dtype=space.dtype)
            p = None
        else:
            if isinstance(self.planner, HindsightPlanner):
                label, _ = self.planner.predict(obs)
            else:
                a = self.planner.act(self.env)
                label = a if self.unwrapped.action_mode == "binary" else scores_of(a)
            self.teacher_calls += 1
            p = None if self.planner.last_ is None else self.planner.last_["p_resolve"]
        info[TEACHER_KEY] = label
        if self.oracle_feature:
            obs = {**obs, P_RESOLVE_KEY: np.zeros(space.shape[0], np.float32) if p is None else
                   np.asarray(p, dtype=np.float32)}
        return obs, info

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        if kwargs.get("seed") is not None:  # the planner's stream restarts too: a seeded reset repeats its labels
            self.planner.fit()
        return self._label(obs, dict(info))

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs, info = self._label(obs, dict(info), terminated or truncated)
        return obs, reward, terminated, truncated, info

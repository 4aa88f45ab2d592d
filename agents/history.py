"""A history-aware student for ``PMWeek-v0``: each resource sees its own recent past, still per-resource-equivariant.

The online planner decides from everything the agent has seen (the hints of every past step, what its queries
revealed); :class:`~membudget.agents.per_resource.PerResourceNet` reads one observation. :class:`History` gives
each resource, beside its 27 features now, its features of the ``frames - 1`` previous steps (frame stacking per
resource; before the week's first step, the first step's) and, for each decay ``d`` of ``decays``, an
exponentially decayed mean of its features so far (``m_t = d * m_{t-1} + (1 - d) * x_t``, ``m_0 = x_0``). Each
resource's history is a function of that resource's past features only, so permuting the resources permutes the
history (and a :class:`PerResourceNet` over it stays equivariant).

:class:`HistoryStudent` is the deployed form: a fitted network over the history features, following the policy
protocol of the recurrent SB3 policies — ``predict(obs, state, episode_start)`` returns the history it carries as
``state``, restarted where ``episode_start`` is set — so :func:`~membudget.envs.pm.rollout.rollout`, which passes
both, plays it on a batch of weeks. :func:`history_demonstrations` turns teacher demonstrations of whole episodes
(states in step order) into demonstrations over the history features, which
:func:`~membudget.agents.imitation.fit_net` fits as it fits any other.

:class:`HistoryTask` is ``PMWeek-v0`` for the learners behind :mod:`membudget.agents.tasks`' interface: its
environments (:class:`HistoryEnv`, one week; :class:`HistoryVectorEnv`, the native vector env) emit the history
features in ``"resources"``, so BC, DAgger (on the hindsight DP's labels) and the native PPO train the same
network class on them with ``task=HistoryTask(history)``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from torch import nn

from membudget.agents.imitation import Demonstrations
from membudget.agents.per_resource import StudentPolicy
from membudget.agents.tasks import PMWeekTask
from membudget.envs.pm import PMWeekEnv, RESOURCE_FEATURE_NAMES
from membudget.envs.pm.rollout import rollout
from membudget.envs.validation import check_int, check_number
from membudget.wrappers import HindsightTeacher


class History:
    """Per-resource history features: ``frames`` stacked steps (1: the current observation only) and one decayed
    mean per decay of ``decays`` (each in [0, 1))."""

    def __init__(self, frames: int = 1, decays=(), n_features: int = len(RESOURCE_FEATURE_NAMES)):
        self.frames = check_int("frames", frames, 1, 64)
        if isinstance(decays, (str, bytes)) or not hasattr(decays, "__iter__"):
            raise ValueError(f"decays must be a sequence of numbers in [0, 1), got {decays!r}")
        self.decays = tuple(check_number(f"decays[{i}]", d, 0, 1, high_open=True) for i, d in enumerate(decays))
        self.base = check_int("n_features", n_features, 1)
        self._d = np.asarray(self.decays, dtype=np.float32).reshape(1, -1, 1, 1)
        self._1_d = 1 - self._d

    @property
    def n_features(self) -> int:
        """Features per resource of the history: ``base * (frames + len(decays))``."""
        return self.base * (self.frames + len(self.decays))

    def config(self) -> dict:
        return {"frames": self.frames, "decays": list(self.decays), "n_features": self.base}

    def space(self, space: gym.spaces.Dict) -> gym.spaces.Dict:
        """A single observation space with ``"resources"`` replaced by the history's ``(R, n_features)``."""
        n_res = space["resources"].shape[0]
        return gym.spaces.Dict({**space.spaces, "resources": gym.spaces.Box(-np.inf, np.inf, (n_res, self.n_features),
                                                                            np.float32)})

    def _check(self, resources) -> np.ndarray:
        x = np.asarray(resources, dtype=np.float32)
        if x.ndim != 3 or x.shape[-1] != self.base:
            raise ValueError(f"resources must have shape (n, R, {self.base}), got {x.shape}")
        if not np.isfinite(x).all():
            raise ValueError("resources must be finite")
        return x

    def step(self, state, resources, episode_start) -> tuple:
        """The history features ``(n, R, n_features)`` of the observations ``resources (n, R, base)`` and the next
        state; ``state`` None (or rows with ``episode_start``) start an episode at this observation."""
        x = self._check(resources)
        n = len(x)
        start = np.ones(n, bool) if state is None else np.asarray(episode_start, dtype=bool).reshape(-1)
        if start.shape != (n,):
            raise ValueError(f"episode_start must hold one flag per observation ({n}), got shape {start.shape}")
        if state is None:
            state = (np.repeat(x[:, None], self.frames - 1, axis=1), np.repeat(x[:, None], len(self.decays), axis=1))
        frames, means = state
        if frames.shape[0] != n or frames.shape[2:] != x.shape[1:]:
            raise ValueError(f"state holds {frames.shape[0]} histories of shape {frames.shape[2:]}, the observation "
                             f"{x.shape}")
        frames, means = frames.copy(), means.copy()
        frames[start], means[start] = x[start, None], x[start, None]
        means = self._d * means + self._1_d * x[:, None]
        out = np.concatenate([x[:, None], frames[:, ::-1], means], axis=1)  # (n, frames + D, R, base)
        frames = np.concatenate([frames[:, 1:], x[:, None]], axis=1) if self.frames > 1 else frames
        return np.ascontiguousarray(out.transpose(0, 2, 1, 3).reshape(n, x.shape[1], self.n_features)), (frames,
                                                                                                           means)

    def episode(self, resources) -> np.ndarray:
        """The history features of one episode's observations ``resources (T, R, base)`` in step order."""
        x = self._check(resources)
        out, state = [], None
        for t in range(len(x)):
            h, state = self.step(state, x[t:t + 1], [t == 0])
            out.append(h[0])
        return np.stack(out) if out else np.zeros((0, x.shape[1], self.n_features), np.float32)


def history_demonstrations(episodes, history: History) -> Demonstrations:
    """Demonstrations over ``history``'s features from ``episodes``: teacher demonstrations of one whole episode
    each (its states in step order)."""
    episodes = list(episodes)
    if not episodes or not all(isinstance(e, Demonstrations) for e in episodes):
        raise ValueError("episodes must be a non-empty sequence of Demonstrations, one per episode")
    return Demonstrations.concatenate([Demonstrations(history.episode(e.resources), e.budget, e.mask, e.labels)
                                       for e in episodes])


class HistoryStudent:
    """A policy that reads history features acting on plain observations: ``policy`` (a fitted network — a
    :class:`~membudget.agents.per_resource.PerResourceNet` of ``history.n_features`` features per resource, acting
    as :class:`~membudget.agents.per_resource.StudentPolicy` does — or any policy-protocol policy over the history's
    observations) is handed, at every step, the observation with ``"resources"`` replaced by its history;
    ``predict`` carries the history as its ``state``."""

    def __init__(self, policy, history: History, config=None):
        if not isinstance(history, History):
            raise ValueError(f"history must be a History, got {type(history).__name__}")
        if isinstance(policy, nn.Module):
            policy = StudentPolicy(policy, config=dict(config or {}, history=history.config()))
        if not hasattr(policy, "predict"):
            raise ValueError(f"policy must be a network or follow the policy protocol, got {type(policy).__name__}")
        n = getattr(getattr(policy, "net", None), "n_resource_features", history.n_features)
        if n != history.n_features:
            raise ValueError(f"the network reads {n} features per resource, the history gives {history.n_features}")
        self.history, self.policy = history, policy
        self.config = getattr(policy, "config", {})

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        try:
            res = np.asarray(observation["resources"])
        except (KeyError, TypeError, IndexError):
            raise ValueError("observation must be a mapping of 'resources', 'budget' and 'mask' arrays") from None
        single = res.ndim == 2
        start = episode_start
        if state is not None and episode_start is None:
            start = np.zeros(1 if single else len(res), bool)
        feats, state = self.history.step(state, res[None] if single else res,
                                         None if start is None else np.reshape(start, -1))
        # the policy checks the rest and decides (a per-resource student: one observation in numpy, act_one)
        action, _ = self.policy.predict({"budget": observation["budget"], "mask": observation["mask"],
                                         "resources": feats[0] if single else feats}, deterministic=deterministic)
        return action, state


class HistoryEnv(gym.Wrapper):
    """One environment (``PMWeekEnv``, or a teacher wrapper around one) whose observations carry the history
    features in ``"resources"``."""

    def __init__(self, env, history: History):
        super().__init__(env)
        self.history = history
        self.observation_space = history.space(env.observation_space)
        self._state = None

    def _observe(self, obs, start: bool):
        feats, self._state = self.history.step(None if start else self._state, obs["resources"][None], [start])
        return {**obs, "resources": feats[0]}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return self._observe(obs, True), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._observe(obs, False), reward, terminated, truncated, info


class HistoryVectorEnv(gym.vector.VectorWrapper):
    """A vector environment (``PMWeekVectorEnv``, next-step autoreset) whose observations carry the history
    features in ``"resources"``; a week that starts at an autoreset starts its history there."""

    def __init__(self, env, history: History):
        if getattr(env, "autoreset_mode", AutoresetMode.NEXT_STEP) != AutoresetMode.NEXT_STEP:
            raise ValueError(f"HistoryVectorEnv needs next-step autoreset, got {env.autoreset_mode}")
        super().__init__(env)
        self.history = history
        self.single_observation_space = history.space(env.single_observation_space)
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)
        self._state, self._ended = None, np.zeros(env.num_envs, bool)

    def _observe(self, obs, start):
        feats, self._state = self.history.step(self._state, obs["resources"], start)
        return {**obs, "resources": feats}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._state, self._ended = None, np.zeros(self.num_envs, bool)
        return self._observe(obs, np.ones(self.num_envs, bool)), info

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        obs = self._observe(obs, self._ended)
        self._ended = np.asarray(terminated | truncated, bool)
        return obs, reward, terminated, truncated, info


class HistoryTask(PMWeekTask):
    """``PMWeek-v0`` whose observations carry ``history``'s features, for the learners of
    :mod:`membudget.agents.tasks`' interface: BC and DAgger on the hindsight DP's labels
    (:func:`~membudget.agents.imitation.fit_bc`, :func:`~membudget.agents.imitation.fit_dagger` with
    ``task=HistoryTask(h)``) and the native PPO (:func:`~membudget.agents.ppo.train_ppo`, which trains it with its
    autograd engine: the compiled one reads PMWeek-v0's own observation). Their policies read history features;
    :meth:`deployed` (and the task's rollouts and validation, which apply it) plays one on plain observations."""

    def __init__(self, history: History):
        if not isinstance(history, History):
            raise ValueError(f"history must be a History, got {type(history).__name__}")
        self.history = history

    def make_env(self, budget, **kw):
        return HistoryEnv(super().make_env(budget, **kw), self.history)

    def vector_env(self, num_envs, budget, observe_counts=False, **kw):
        return HistoryVectorEnv(super().vector_env(num_envs, budget, observe_counts=observe_counts, **kw),
                                self.history)

    def schedule(self, env):
        return super().schedule(env.unwrapped)

    def teacher_env(self, budget):
        return HistoryEnv(HindsightTeacher(PMWeekEnv(budget=budget, action_mode="scores")), self.history)

    def solves(self, env):
        return env.get_wrapper_attr("teacher_solves")

    def deployed(self, policy) -> HistoryStudent:
        """``policy`` (over the history's observations) acting on plain observations."""
        return policy if isinstance(policy, HistoryStudent) else HistoryStudent(policy, self.history)

    def rollout(self, policy, seeds, **env_kwargs) -> dict:
        return rollout(self.deployed(policy), seeds, **env_kwargs)

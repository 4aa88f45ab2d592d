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
"""

from __future__ import annotations

import numpy as np

from membudget.agents.imitation import Demonstrations
from membudget.agents.per_resource import StudentPolicy
from membudget.envs.pm import RESOURCE_FEATURE_NAMES
from membudget.envs.validation import check_int, check_number


class History:
    """Per-resource history features: ``frames`` stacked steps (1: the current observation only) and one decayed
    mean per decay of ``decays`` (each in [0, 1))."""

    def __init__(self, frames: int = 1, decays=(), n_features: int = len(RESOURCE_FEATURE_NAMES)):
        self.frames = check_int("frames", frames, 1, 64)
        if isinstance(decays, (str, bytes)) or not hasattr(decays, "__iter__"):
            raise ValueError(f"decays must be a sequence of numbers in [0, 1), got {decays!r}")
        self.decays = tuple(check_number(f"decays[{i}]", d, 0, 1, high_open=True) for i, d in enumerate(decays))
        self.base = check_int("n_features", n_features, 1)

    @property
    def n_features(self) -> int:
        """Features per resource of the history: ``base * (frames + len(decays))``."""
        return self.base * (self.frames + len(self.decays))

    def config(self) -> dict:
        return {"frames": self.frames, "decays": list(self.decays), "n_features": self.base}

    def _check(self, resources) -> np.ndarray:
        x = np.asarray(resources, dtype=np.float32)
        if x.ndim != 3 or x.shape[-1] != self.base:
            raise ValueError(f"resources must have shape (n, R, {self.base}), got {x.shape}")
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
        d = np.asarray(self.decays, dtype=np.float32).reshape(1, -1, 1, 1)
        means = d * means + (1 - d) * x[:, None]
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
    """A network fitted on ``history``'s features (a :class:`~membudget.agents.per_resource.PerResourceNet` of
    ``history.n_features`` features per resource) acting as :class:`~membudget.agents.per_resource.StudentPolicy`
    does; ``predict`` carries the history as its ``state``."""

    def __init__(self, net, history: History, threshold: float = 0.5, config=None):
        if not isinstance(history, History):
            raise ValueError(f"history must be a History, got {type(history).__name__}")
        if getattr(net, "n_resource_features", None) != history.n_features:
            raise ValueError(f"the network reads {getattr(net, 'n_resource_features', None)} features per resource, "
                             f"the history gives {history.n_features}")
        self.history = history
        self.student = StudentPolicy(net, threshold, dict(config or {}, history=history.config()))
        self.net, self.config = self.student.net, self.student.config

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        try:
            res = np.asarray(observation["resources"])
        except (KeyError, TypeError, IndexError):
            raise ValueError("observation must be a mapping of 'resources', 'budget' and 'mask' arrays") from None
        single = res.ndim == 2
        if single:
            observation = {k: np.asarray(observation[k])[None] for k in ("resources", "budget", "mask")}
            episode_start = None if episode_start is None else np.reshape(episode_start, 1)
        if state is not None and episode_start is None:
            episode_start = np.zeros(len(observation["resources"]), bool)
        feats, state = self.history.step(state, observation["resources"], episode_start)
        action, _ = self.student.predict({"resources": feats, "budget": observation["budget"],
                                          "mask": observation["mask"]})
        return (action[0] if single else action), state

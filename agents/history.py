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
import numba
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from torch import nn

from membudget.agents.imitation import Demonstrations
from membudget.agents.per_resource import PerResourceNet, StudentPolicy, seeded_torch
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

    @staticmethod
    def _starts(state, episode_start, n: int) -> np.ndarray:
        """Which of the ``n`` observations start an episode: all without a ``state``, else ``episode_start``."""
        start = np.ones(n, bool) if state is None else np.asarray(episode_start, dtype=bool).reshape(-1)
        if start.shape != (n,):
            raise ValueError(f"episode_start must hold one flag per observation ({n}), got shape {start.shape}")
        return start

    def step(self, state, resources, episode_start) -> tuple:
        """The history features ``(n, R, n_features)`` of the observations ``resources (n, R, base)`` and the next
        state; ``state`` None (or rows with ``episode_start``) start an episode at this observation."""
        x = self._check(resources)
        n = len(x)
        start = self._starts(state, episode_start, n)
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


@numba.njit(cache=True)
def _gru_step(x, h, start, mean, scale, w_ih, b_ih, w_hh, b_hh):
    """One step of ``torch.nn.GRUCell`` (gates r, z, n) for every resource of every observation: ``x (n, R, F)``
    standardised with ``mean``, ``scale``; ``h (n, R, H)`` the cells' states, taken as 0 where ``start``; the
    weights transposed. Returns ``(features (n, R, F + H), new states (n, R, H))``, float32."""
    n, R, F = x.shape
    H = h.shape[2]
    feats = np.empty((n, R, F + H), np.float32)
    out = np.empty((n, R, H), np.float32)
    xs = np.empty(F, np.float32)
    gi = np.empty(3 * H, np.float32)
    gh = np.empty(3 * H, np.float32)
    one, zero = np.float32(1.0), np.float32(0.0)  # float32 throughout, as torch's cell
    for i in range(n):
        for r in range(R):
            for f in range(F):
                xs[f] = (x[i, r, f] - mean[f]) / scale[f]
                feats[i, r, f] = xs[f]
            for k in range(3 * H):
                gi[k] = b_ih[k]
                gh[k] = b_hh[k]
            for f in range(F):
                a = xs[f]
                for k in range(3 * H):
                    gi[k] += a * w_ih[f, k]
            if not start[i]:
                for j in range(H):
                    a = h[i, r, j]
                    for k in range(3 * H):
                        gh[k] += a * w_hh[j, k]
            for k in range(H):
                rg = one / (one + np.exp(-(gi[k] + gh[k])))
                zg = one / (one + np.exp(-(gi[H + k] + gh[H + k])))
                cand = np.tanh(gi[2 * H + k] + rg * gh[2 * H + k])
                prev = zero if start[i] else h[i, r, k]
                out[i, r, k] = (one - zg) * cand + zg * prev
                feats[i, r, F + k] = out[i, r, k]
    return feats, out


class GRUHistory(History):
    """A learned history: one GRU cell, shared by the resources, reads each resource's standardised features step
    by step; the history features are those standardised features now followed by the cell's new state (``base +
    hidden`` per resource). ``cell``: a fitted ``torch.nn.GRUCell`` of ``base`` inputs (:func:`fit_gru_student`
    fits it with the network that reads the history); ``mean``, ``scale``: the standardisation of the ``base``
    features. The state is the cells' states ``(n, R, hidden)``, zero at an episode's start. Each resource's
    history is a function of its own past features, so it is per-resource-equivariant like :class:`History`."""

    def __init__(self, cell: nn.GRUCell, mean, scale):
        if not isinstance(cell, nn.GRUCell):
            raise ValueError(f"cell must be a torch.nn.GRUCell, got {type(cell).__name__}")
        mean, scale = (np.asarray(a, dtype=np.float32) for a in (mean, scale))
        if mean.shape != (cell.input_size,) or scale.shape != mean.shape or not (np.isfinite(mean).all()
                                                                                and (scale > 0).all()):
            raise ValueError(f"mean and scale must be finite arrays of shape ({cell.input_size},), scale > 0")
        self.cell, self.mean, self.scale = cell.eval(), mean, scale
        self.base, self.hidden, self.frames, self.decays = cell.input_size, cell.hidden_size, 1, ()
        # the standardisation and the cell's parameters (transposed) as arrays for _gru_step: one observation's
        # step is a few small products, far below torch's (or NumPy's) per-call costs when compiled. Copies, not
        # views: torch moves a parameter's memory when it sends the cell to another process (shared memory), which
        # would leave a view reading freed memory
        self._weights = (mean, scale) + tuple(np.array(p.detach().numpy().T, dtype=np.float32, order="C")
                                              for p in (cell.weight_ih, cell.bias_ih, cell.weight_hh, cell.bias_hh))

    @property
    def n_features(self) -> int:
        return self.base + self.hidden

    def config(self) -> dict:
        return {"gru": self.hidden, "n_features": self.base}

    def step(self, state, resources, episode_start) -> tuple:
        x = self._check(resources)
        n, R = x.shape[:2]
        start = self._starts(state, episode_start, n)
        h = np.zeros((n, R, self.hidden), np.float32) if state is None else np.asarray(state, dtype=np.float32)
        if h.shape != (n, R, self.hidden):
            raise ValueError(f"state must have shape {(n, R, self.hidden)}, got {h.shape}")
        return _gru_step(x, h, start, *self._weights)


def fit_gru_student(episodes, *, hidden=64, width=64, context=True, epochs=30, lr=3e-3, batch=16, seed=0,
                    config=None) -> HistoryStudent:
    """BC of a :class:`GRUHistory` and the :class:`~membudget.agents.per_resource.PerResourceNet` reading it,
    trained together through time on teacher demonstrations of whole episodes (``episodes``: one
    :class:`~membudget.agents.imitation.Demonstrations` per episode, states in step order): the class-weighted
    cross-entropy of :func:`~membudget.agents.imitation.fit_net` on the candidates, Adam, ``batch`` episodes per
    step, gradients clipped to norm 5. The GRU reads the resource features standardised over the candidates, the
    network's first layer has the budget features' standardisation folded in. ``hidden``: the cell's state size;
    ``width``: the network's two layer widths. Returns the deployed :class:`HistoryStudent`."""
    from membudget.agents.imitation import _rescale_first_layer, input_scaling

    episodes = list(episodes)
    if not episodes or not all(isinstance(e, Demonstrations) for e in episodes):
        raise ValueError("episodes must be a non-empty sequence of Demonstrations, one per episode")
    for name, v, low in (("hidden", hidden, 1), ("width", width, 1), ("epochs", epochs, 1), ("batch", batch, 1),
                         ("seed", seed, 0)):
        check_int(name, v, low)
    check_number("lr", lr, 0, low_open=True)
    shapes = {e.resources.shape[1:] for e in episodes}
    if len(shapes) != 1:
        raise ValueError(f"every episode must have the same resources and features, got {sorted(shapes)}")
    R, F = shapes.pop()
    mean, scale = input_scaling(Demonstrations.concatenate(episodes))
    T = max(len(e.labels) for e in episodes)

    def padded(name, width_):  # (episodes, T, ...) with zeros past each episode's end
        out = np.zeros((len(episodes), T, *width_), np.float32)
        for i, e in enumerate(episodes):
            out[i, :len(e.labels)] = getattr(e, name)
        return torch.from_numpy(out)

    res = (padded("resources", (R, F)) - torch.from_numpy(mean[:F].astype(np.float32))) / \
        torch.from_numpy(scale[:F].astype(np.float32))
    bud = (padded("budget", (len(mean) - F - 1,)) - torch.from_numpy(mean[F:-1].astype(np.float32))) / \
        torch.from_numpy(scale[F:-1].astype(np.float32))
    mask, y = padded("mask", (R,)), padded("labels", (R,))
    with seeded_torch(seed):  # the initial weights; the caller's global torch stream is left as it was
        cell = nn.GRUCell(F, hidden)
        net = PerResourceNet((width, width), context, n_resource_features=F + hidden)
    pos = float((y * mask).sum())
    pos_weight = torch.tensor(max(1.0, (float(mask.sum()) - pos) / max(pos, 1.0)))
    params = list(cell.parameters()) + list(net.parameters())
    opt = torch.optim.Adam(params, lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(episodes), generator=gen).split(batch):
            h = torch.zeros(len(idx) * R, hidden)
            loss = torch.zeros(())
            for t in range(T):
                h = cell(res[idx, t].reshape(-1, F), h)
                z = net(torch.cat([res[idx, t], h.reshape(len(idx), R, hidden)], -1), bud[idx, t], mask[idx, t])
                per = nn.functional.binary_cross_entropy_with_logits(z[..., 0], y[idx, t], pos_weight=pos_weight,
                                                                     reduction="none")
                loss = loss + (per * mask[idx, t]).sum()
            loss = loss / mask[idx].sum().clamp(min=1.0)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, 5.0)
            opt.step()
    head_mean = np.concatenate([np.zeros(F + hidden), mean[F:]])
    head_scale = np.concatenate([np.ones(F + hidden), scale[F:]])
    _rescale_first_layer(net, head_mean, head_scale, fold=True)
    cfg = {"method": "gru-bc", **(config or {}), "hidden": hidden, "width": width, "context": bool(context),
           "epochs": epochs, "lr": lr, "batch": batch, "seed": seed}
    return HistoryStudent(net.eval(), GRUHistory(cell, mean[:F], scale[:F]), config=cfg)


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

"""One policy class for every learner on ``PMWeek-v0``: a permutation-equivariant per-resource network.

:class:`PerResourceNet` applies one shared MLP to each resource's input — its 27 resource features, the 9 budget
features and its candidate bit, as the observation gives them — and returns ``n_out`` values per resource. With
``context=True`` the resources see each other DeepSets-style: the mean of the first hidden layer over the current
candidates is appended to every resource's first hidden layer before the second. Permuting the resources permutes
the outputs (tested), whatever the weights.

The same class serves every learner, so that a comparison of learners compares learning signals, not
architectures:

- behaviour cloning and DAgger (:mod:`membudget.agents.imitation`) fit it to the hindsight DP's labels;
- the PPO of :mod:`membudget.agents.ppo` trains it on the environment's reward (and can start from a student);
- Stable-Baselines3 PPO and sb3-contrib MaskablePPO use it as their actor through
  :class:`PerResourceActorCriticPolicy` and :class:`MaskablePerResourceActorCriticPolicy` (binary and scores
  action modes; the critic stays SB3's MLP over the flattened observation).

:class:`StudentPolicy` is the deployed form of any fitted network: in ``action_mode="scores"`` it proposes every
candidate whose probability ``sigmoid(logit)`` reaches ``threshold`` (0.5), scored by that probability, and the
environment's executor keeps the plan feasible. It saves to plain-array ``.npz`` files (never pickle).
"""

from __future__ import annotations

import contextlib
import json
import os

import numba
import numpy as np
import torch
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from torch import nn

from membudget.agents.configs import MAX_WIDTH, check_widths
from membudget.envs.pm import BUDGET_FEATURE_NAMES, RESOURCE_FEATURE_NAMES
from membudget.envs.validation import check_int, check_number, read_npz, reading_artefact

N_INPUT = len(RESOURCE_FEATURE_NAMES) + len(BUDGET_FEATURE_NAMES) + 1
"""Inputs per resource: its 27 features, the 9 budget features, its candidate bit."""




@contextlib.contextmanager
def seeded_torch(seed: int):
    """torch's global generator seeded with ``seed`` inside the block (networks draw their initial weights from it)
    and restored after it, so that fitting a network leaves the caller's torch stream as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


class PerResourceNet(nn.Module):
    """Shared per-resource MLP: ``(resources (n, R, F), budget (n, 9), mask (n, R)) -> (n, R, n_out)``.

    ``hidden``: layer widths (at least one); ``context``: append the candidates' mean first-layer activation to
    every resource's first layer (the resources then see each other); ``n_out``: values per resource (1: a logit;
    2: two logits, sb3-contrib's masked Bernoulli); ``n_resource_features``: ``F``, the features per resource
    (PMWeek-v0's 27; ConversationPM-v1's 34)."""

    def __init__(self, hidden=(64, 64), context: bool = True, n_out: int = 1,
                 n_resource_features: int = len(RESOURCE_FEATURE_NAMES)):
        super().__init__()
        hidden = check_widths("hidden", hidden)
        check_int("n_out", n_out, 1, 2)
        check_int("n_resource_features", n_resource_features, 1, MAX_WIDTH)
        if not isinstance(context, (bool, np.bool_)):
            raise ValueError(f"context must be a bool, got {context!r}")
        self.hidden, self.context, self.n_out = hidden, bool(context), int(n_out)
        self.n_resource_features = int(n_resource_features)
        self.first = nn.Linear(N_INPUT - len(RESOURCE_FEATURE_NAMES) + self.n_resource_features, hidden[0])
        widths = [hidden[0] * (2 if self.context else 1), *hidden[1:]]
        self.rest = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.head = nn.Linear(widths[-1], self.n_out)

    def forward(self, resources, budget, mask):
        mask = mask.to(resources.dtype)
        x = torch.cat([resources, budget.unsqueeze(-2).expand(*resources.shape[:-1], budget.shape[-1]),
                       mask.unsqueeze(-1)], dim=-1)
        h = torch.relu(self.first(x))
        if self.context:
            w = mask.unsqueeze(-1)
            pooled = (h * w).sum(dim=-2, keepdim=True) / w.sum(dim=-2, keepdim=True).clamp(min=1.0)
            h = torch.cat([h, pooled.expand_as(h)], dim=-1)
        for layer in self.rest:
            h = torch.relu(layer(h))
        return self.head(h)

    def forward_candidates(self, resources, budget, mask):
        """The outputs at the candidates only: ``(out (k, n_out), sample (k,), resource (k,))`` for the ``k``
        nonzero entries of ``mask (n, R)``, equal to ``forward(...)[sample, resource]``.

        A learner that never acts on a non-candidate (the native PPO, whose log-probabilities cover the
        candidates only) needs no more, and skips the MLP on every other resource: on ``PMWeek-v0`` about 3 of
        11 resources are candidates at a step, so this is about a quarter of ``forward``'s work."""
        x, sample, resource = candidate_rows(resources, budget, mask)
        return self.forward_rows(x, sample, mask.shape[0]), sample, resource

    def forward_rows(self, x, sample, n: int):
        """The outputs of candidate input rows ``x (k, N_INPUT)`` (:func:`candidate_rows`) whose row ``i``
        belongs to sample ``sample[i]`` of ``n``; the context pools each sample's rows."""
        h = torch.relu(self.first(x))
        if self.context:
            count = torch.zeros(n, dtype=h.dtype).index_add_(0, sample, torch.ones_like(sample, dtype=h.dtype))
            pooled = torch.zeros(n, h.shape[-1], dtype=h.dtype).index_add_(0, sample, h)
            h = torch.cat([h, (pooled / count.clamp(min=1.0).unsqueeze(-1))[sample]], dim=-1)
        for layer in self.rest:
            h = torch.relu(layer(h))
        return self.head(h)

    def config(self) -> dict:
        return {"hidden": list(self.hidden), "context": self.context, "n_out": self.n_out,
                "n_resource_features": self.n_resource_features}

    def numpy_layers(self) -> tuple:
        """The layers as numpy views of the parameters, for :func:`candidate_outputs`: ``(weights, biases,
        context)``, the weights ``(out, in)`` and the biases of the first layer, the later ones and the head, in
        order. In-place updates (an optimizer's step, ``load_state_dict``) show through the views; parameters
        replaced by new tensors do not."""
        mods = (self.first, *self.rest, self.head)
        return (tuple(m.weight.detach().numpy() for m in mods), tuple(m.bias.detach().numpy() for m in mods),
                self.context)


@numba.njit(cache=True, fastmath={"reassoc", "contract"})
def _candidate_outputs(weights, biases, context, resources, budget, rows):
    """:func:`candidate_outputs` compiled (float32; its sums may be reordered, so equal up to rounding)."""
    w0, b0 = weights[0], biases[0]
    width = w0.shape[0]
    F, B, k = resources.shape[1], budget.size, rows.size
    shared = np.empty(width, np.float32)  # the budget features' and the candidate bit's part, the same for all rows
    for j in range(width):
        s = np.float32(0.0)
        for i in range(B):
            s += budget[i] * w0[j, F + i]
        shared[j] = s + (w0[j, F + B] + b0[j])
    h = np.empty((k, width), np.float32)
    for c in range(k):
        for j in range(width):
            s = np.float32(0.0)
            for i in range(F):
                s += resources[rows[c], i] * w0[j, i]
            h[c, j] = max(s + shared[j], np.float32(0.0))
    n = len(weights)
    for layer in range(1, n):
        w, b = weights[layer], biases[layer]
        width = h.shape[1]
        pooled = np.zeros(w.shape[0], np.float32)
        if context and layer == 1:  # the candidates' mean first-layer activation, read by the second half
            mean = np.zeros(width, np.float32)
            for c in range(k):
                for i in range(width):
                    mean[i] += h[c, i]
            for i in range(width):
                mean[i] /= np.float32(k)
            for j in range(w.shape[0]):
                s = np.float32(0.0)
                for i in range(width):
                    s += mean[i] * w[j, width + i]
                pooled[j] = s
        z = np.empty((k, w.shape[0]), np.float32)
        for c in range(k):
            for j in range(w.shape[0]):
                s = np.float32(0.0)
                for i in range(width):
                    s += h[c, i] * w[j, i]
                s += pooled[j] + b[j]
                z[c, j] = s if layer == n - 1 else max(s, np.float32(0.0))
        h = z
    return h


def candidate_outputs(layers, resources, budget, rows) -> np.ndarray:
    """A :class:`PerResourceNet`'s outputs ``(k, n_out)`` at one observation's candidate ``rows`` (resource
    indices), from its :meth:`~PerResourceNet.numpy_layers`: ``resources (R, F)`` and ``budget (9,)`` float32,
    checked by the caller. The operations of :meth:`~PerResourceNet.forward_candidates` in one compiled call,
    without torch's per-operation overhead (deciding one observation at a time); equal to it up to float32
    rounding."""
    weights, biases, context = layers
    return _candidate_outputs(weights, biases, context, resources, budget, np.asarray(rows, dtype=np.int64))


@numba.njit(cache=True)
def _act_one(weights, biases, context, resources, budget, mask, threshold):
    """:meth:`StudentPolicy.act_one` compiled: the probability ``sigmoid(logit)`` of each candidate reaching
    ``threshold`` (at least 1e-6), -1 elsewhere."""
    action = np.full(mask.size, np.float32(-1.0))
    rows = np.flatnonzero(mask)
    if rows.size:
        z = _candidate_outputs(weights, biases, context, resources, budget, rows)
        for c in range(rows.size):
            p = np.float32(0.5) * (np.float32(1.0) + np.tanh(np.float32(0.5) * z[c, 0]))  # no exp overflow
            if p >= threshold:
                action[rows[c]] = min(max(p, np.float32(1e-6)), np.float32(1.0))
    return action


def obs_tensors(observation, dtype=torch.float32):
    """``(resources, budget, mask)`` tensors of a single or batched observation (a leading batch axis is added to
    a single one) and whether it was single."""
    res = torch.as_tensor(np.asarray(observation["resources"]), dtype=dtype)
    single = res.dim() == 2
    bud = torch.as_tensor(np.asarray(observation["budget"]), dtype=dtype)
    mask = torch.as_tensor(np.asarray(observation["mask"]), dtype=dtype)
    if single:
        res, bud, mask = res.unsqueeze(0), bud.unsqueeze(0), mask.unsqueeze(0)
    return res, bud, mask, single


class FlatMLPNet(nn.Module):
    """The architecture ablation: one MLP over the flattened observation (every resource's ``n_resource_features``
    features — PMWeek-v0's 27 —, the 9 budget features, the candidate mask) with one logit per resource out — what
    SB3's ``MultiInputPolicy`` builds.
    Same call signature and outputs as :class:`PerResourceNet` (``n_out=1``), so the native PPO and
    :class:`StudentPolicy` take either; it is not permutation-equivariant and is tied to ``n_resources``."""

    n_out = 1

    def __init__(self, n_resources: int, hidden=(64, 64), n_resource_features: int = len(RESOURCE_FEATURE_NAMES)):
        super().__init__()
        self.hidden = check_widths("hidden", hidden)
        self.n_resources = check_int("n_resources", n_resources, 1, MAX_WIDTH)
        self.n_resource_features = check_int("n_resource_features", n_resource_features, 1, MAX_WIDTH)
        widths = [self.n_resources * (self.n_resource_features + 1) + len(BUDGET_FEATURE_NAMES), *self.hidden]
        self.body = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.head = nn.Linear(widths[-1], self.n_resources)

    def forward(self, resources, budget, mask):
        h = torch.cat([resources.flatten(-2), budget, mask.to(resources.dtype)], dim=-1)
        for layer in self.body:
            h = torch.relu(layer(h))
        return self.head(h).unsqueeze(-1)

    def forward_candidates(self, resources, budget, mask):
        """``(out (k, 1), sample, resource)`` at the nonzero entries of ``mask``, as
        :meth:`PerResourceNet.forward_candidates`."""
        sample, resource = mask.nonzero(as_tuple=True)
        return self(resources, budget, mask)[sample, resource], sample, resource

    def config(self) -> dict:
        return {"kind": "flat-mlp", "n_resources": self.n_resources, "hidden": list(self.hidden),
                "n_resource_features": self.n_resource_features}


def network_from_config(config: dict) -> nn.Module:
    """The network a :meth:`PerResourceNet.config` / :meth:`FlatMLPNet.config` describes (untrained)."""
    config = dict(config)
    kind = config.pop("kind", "per-resource")
    if kind == "flat-mlp":
        return FlatMLPNet(**config)
    if kind != "per-resource":
        raise ValueError(f"unknown network kind {kind!r}")
    return PerResourceNet(**config)


def candidate_rows(resources, budget, mask):
    """The network's input rows of the candidates: ``(x (k, N_INPUT), sample (k,), resource (k,))`` for the ``k``
    nonzero entries of ``mask (n, R)`` (row-major order)."""
    sample, resource = mask.nonzero(as_tuple=True)
    ones = torch.ones(sample.numel(), 1, dtype=resources.dtype)
    return torch.cat([resources[sample, resource], budget[sample], ones], dim=-1), sample, resource


class StudentPolicy:
    """A fitted :class:`PerResourceNet` (``n_out=1``; or the :class:`FlatMLPNet` ablation) following the policy
    protocol in ``action_mode="scores"``.

    ``predict`` proposes every candidate with ``sigmoid(logit) >= threshold`` as its probability (-1 elsewhere).
    ``config`` records how it was fitted (method, budget, weeks, ...)."""

    def __init__(self, net: nn.Module, threshold: float = 0.5, config=None):
        if not isinstance(net, (PerResourceNet, FlatMLPNet)) or net.n_out != 1:
            raise ValueError(f"net must be a PerResourceNet with n_out=1 or a FlatMLPNet (one logit per resource), "
                             f"got {type(net).__name__}" + (f" with n_out={net.n_out}" if hasattr(net, "n_out") else ""))
        self.net = net.eval()
        self.threshold = check_number("threshold", threshold, 0, 1, low_open=True, high_open=True)
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"config must be a dict or None, got {type(config).__name__}")
        self.config = dict(config or {})
        self._layers = None  # (net, its numpy layers, their memory), made on the first decision of one observation

    def __getstate__(self):
        return {**self.__dict__, "_layers": None}  # views of this process's parameters: made again after a copy

    def _observation(self, observation) -> dict:
        """The observation's arrays, checked: numbers, finite, shapes of one ``(R, F)`` or a batch ``(n, R, F)``
        observation of the network's ``F`` features (and ``R`` resources for the flat MLP)."""
        try:
            obs = {k: np.asarray(observation[k]) for k in ("resources", "budget", "mask")}
        except (KeyError, TypeError, IndexError, ValueError):
            raise ValueError("observation must be a mapping of 'resources', 'budget' and 'mask' arrays, got "
                             f"{type(observation).__name__}") from None
        for k, a in obs.items():
            if a.dtype.kind not in "biuf":
                raise ValueError(f"observation[{k!r}] must be numbers, got dtype {a.dtype}")
            if not np.isfinite(a).all():
                raise ValueError(f"observation[{k!r}] must be finite")
        res, F = obs["resources"], self.net.n_resource_features
        R = getattr(self.net, "n_resources", None)
        if res.ndim not in (2, 3) or res.shape[-1] != F or (R is not None and res.shape[-2] != R):
            raise ValueError(f"observation['resources'] must have shape ({R or 'R'}, {F}) or (n, {R or 'R'}, {F}), "
                             f"got {res.shape}")
        for k, shape in (("mask", res.shape[:-1]), ("budget", res.shape[:-2] + (len(BUDGET_FEATURE_NAMES),))):
            if obs[k].shape != shape:
                raise ValueError(f"observation[{k!r}] must have shape {shape} to match 'resources' {res.shape}, "
                                 f"got {obs[k].shape}")
        return obs

    def probabilities(self, observation) -> np.ndarray:
        res, bud, mask, single = obs_tensors(self._observation(observation))
        with torch.no_grad():
            p = torch.sigmoid(self.net(res, bud, mask)[..., 0]).numpy().astype(np.float64)
        return p[0] if single else p

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        obs = self._observation(observation)
        if isinstance(self.net, PerResourceNet) and obs["resources"].ndim == 2:
            return self.act_one(obs["resources"], obs["budget"], obs["mask"]), state
        p = self.probabilities(obs)
        mask = obs["mask"].astype(bool)
        action = np.where(mask & (p >= self.threshold), np.clip(p, 1e-6, 1.0), -1.0).astype(np.float32)
        return action, state

    def act_one(self, resources, budget, mask) -> np.ndarray:
        """The action on one checked observation ``(R, F)``, ``(9,)``, ``(R,)`` of a per-resource student, in one
        compiled call (:func:`candidate_outputs` on its candidates: the path :meth:`predict` takes for one
        observation)."""
        # views of the parameters' memory, made again if torch has moved it (sending the network to another
        # process moves it to shared memory and frees the old)
        where = self.net.first.weight.data_ptr()
        if self._layers is None or self._layers[0] is not self.net or self._layers[2] != where:
            self._layers = (self.net, self.net.numpy_layers(), where)
        return _act_one(*self._layers[1], np.asarray(resources, dtype=np.float32),
                        np.asarray(budget, dtype=np.float32), np.asarray(mask), self.threshold)

    def save(self, path):
        """Plain-array ``.npz``: every parameter, the network's configuration, threshold and fit record."""
        arrays = {f"param/{k}": v.detach().numpy() for k, v in self.net.state_dict().items()}
        np.savez(os.fspath(path), net=np.array(json.dumps(self.net.config())), threshold=np.array(self.threshold),
                 config=np.array(json.dumps(self.config)), **arrays)

    @classmethod
    def load(cls, path):
        """A student saved by :meth:`save`; anything else (missing or misshaped parameters, non-finite values, a
        threshold outside (0, 1)) raises ``ValueError`` naming the file and the field."""
        with reading_artefact(path, "student"), read_npz(path) as z:
            if "net" not in z.files:
                raise ValueError("no network configuration: not a per-resource student")
            net = network_from_config(json.loads(str(z["net"])))
            state = {k[len("param/"):]: torch.as_tensor(z[k]) for k in z.files if k.startswith("param/")}
            expected = net.state_dict()
            if set(state) != set(expected):
                raise ValueError(f"parameters {sorted(state)} do not match the network's {sorted(expected)}")
            for k, v in state.items():
                if v.shape != expected[k].shape:
                    raise ValueError(f"parameter {k!r} must be an array of shape {tuple(expected[k].shape)}, got "
                                     f"shape {tuple(v.shape)}")
                if not torch.isfinite(v).all():
                    raise ValueError(f"parameter {k!r} has {int((~torch.isfinite(v)).sum())} non-finite value(s) "
                                     f"(NaN or infinity) among its {v.numel()}; a student's parameters are finite")
            net.load_state_dict(state)
            threshold = float(z["threshold"])
            if not 0.0 < threshold < 1.0:
                raise ValueError(f"threshold must lie in (0, 1), got {threshold}")
            return cls(net, threshold, json.loads(str(z["config"])))


# --------------------------------------------------------------------------------------------- Stable-Baselines3

class _Split(nn.Module):
    """SB3's ``mlp_extractor`` role: the actor is the per-resource network over the flattened observation (the
    order of SB3's ``CombinedExtractor``: the Dict's keys sorted), the critic an MLP over the same features."""

    def __init__(self, features_dim, n_resources, budget_offset, mask_offset, resources_offset, net, critic_arch):
        super().__init__()
        self.n_resources = n_resources
        self.slices = (resources_offset, budget_offset, mask_offset)
        self.net = net
        layers, width = [], features_dim
        for h in critic_arch:
            layers += [nn.Linear(width, h), nn.Tanh()]
            width = h
        self.critic = nn.Sequential(*layers)
        self.latent_dim_pi = n_resources * net.n_out
        self.latent_dim_vf = width

    def _unflatten(self, features):
        r0, b0, m0 = self.slices
        R = self.n_resources
        res = features[:, r0:r0 + R * len(RESOURCE_FEATURE_NAMES)].reshape(-1, R, len(RESOURCE_FEATURE_NAMES))
        return res, features[:, b0:b0 + len(BUDGET_FEATURE_NAMES)], features[:, m0:m0 + R]

    def forward_actor(self, features):
        return self.net(*self._unflatten(features)).reshape(features.shape[0], -1)

    def forward_critic(self, features):
        return self.critic(features)

    def forward(self, features):
        return self.forward_actor(features), self.forward_critic(features)


class _PerResourceMixin:
    """Shared by the SB3 and sb3-contrib policies: build :class:`_Split` instead of SB3's MLP extractor and use
    its per-resource outputs directly as the action distribution's parameters (no dense layer across
    resources, so the actor stays permutation-equivariant; in scores mode one log-std shared by every
    resource)."""

    _n_out = 1

    def __init__(self, *args, hidden=(64, 64), context=True, critic_arch=(128, 128), **kwargs):
        self._pr = dict(hidden=tuple(hidden), context=bool(context), critic_arch=tuple(critic_arch))
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        space = self.observation_space
        offsets, at = {}, 0
        for key, sub in space.spaces.items():  # CombinedExtractor flattens the keys in this order
            offsets[key] = at
            at += int(np.prod(sub.shape))
        net = PerResourceNet(self._pr["hidden"], self._pr["context"], self._n_out)
        self.mlp_extractor = _Split(self.features_dim, space["mask"].shape[0], offsets["budget"], offsets["mask"],
                                    offsets["resources"], net, self._pr["critic_arch"])

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()
        if hasattr(self, "log_std"):
            self.log_std = nn.Parameter(torch.full((1,), float(self.log_std_init)))
        head = self.mlp_extractor.net.head
        nn.init.orthogonal_(head.weight, gain=0.01)
        nn.init.zeros_(head.bias)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict:
        data = super()._get_constructor_parameters()
        data.update(hidden=self._pr["hidden"], context=self._pr["context"], critic_arch=self._pr["critic_arch"])
        return data


class PerResourceActorCriticPolicy(_PerResourceMixin, MultiInputActorCriticPolicy):
    """SB3 ``PPO`` policy whose actor is :class:`PerResourceNet` (one logit per resource in binary mode, one mean
    per resource in scores mode). Keyword arguments ``hidden``, ``context``, ``critic_arch``."""


class MaskablePerResourceActorCriticPolicy(_PerResourceMixin, MaskableMultiInputActorCriticPolicy):
    """sb3-contrib ``MaskablePPO`` policy whose actor is :class:`PerResourceNet` with two logits per resource
    (sb3-contrib's masked Bernoulli)."""

    _n_out = 2

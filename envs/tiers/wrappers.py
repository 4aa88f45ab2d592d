"""Seed 001 §5.5 reward normalisation for ``TierRouting-v0``, as a wrapper that can be switched off.

``r = r_task + λ · β · r_cost`` at the end of the query, with
``r_cost = 1 − clip((c − Q5) / (Q95 − Q5), 0, 1)`` (Q5 / Q95: 5th / 95th percentiles of the raw dollar costs of
the last ``window`` queries, the current one included) and ``β = std(r_task) / (std(r_cost) + ε)`` over the last
``window`` queries (population standard deviations, the current query included). ``use_beta=False`` is the β
ablation (β = 1). While fewer than ``min_history`` queries have been seen β = 1 (the standard deviations are
undefined or meaningless); when Q95 − Q5 ≤ ε every cost gets ``r_cost = 1``.
"""

from __future__ import annotations

from collections import deque

import gymnasium as gym
import numpy as np

from ..validation import check_int, check_number
from .env import TierRoutingEnv


MIN_EPS = 1e-12
"""Smallest ``eps`` a :class:`CostNormalizer` takes: β then stays below 0.5 / eps = 5e11 (the default 1e-6: 5e5)."""


class CostNormalizer:
    """The sliding-window statistics of §5.5, usable on any stream of (r_task, cost) pairs."""

    def __init__(self, window: int = 256, use_beta: bool = True, eps: float = 1e-6, min_history: int = 2):
        check_int("window", window, 2)
        check_int("min_history", min_history, 2, window)
        # β = std(r_task) / (std(r_cost) + eps) is std(r_task) / eps while the cost terms are constant, so a tiny eps
        # scales the cost term of the reward by up to 0.5 / eps (5e299 at 1e-300, infinite at 5e-324)
        check_number("eps", eps, MIN_EPS)
        if not isinstance(use_beta, (bool, np.bool_)):
            raise ValueError(f"use_beta must be a bool, got {use_beta!r}")
        self.window, self.use_beta, self.eps, self.min_history = int(window), bool(use_beta), float(eps), min_history
        self.costs: deque = deque(maxlen=self.window)
        self.r_task: deque = deque(maxlen=self.window)
        self.r_cost: deque = deque(maxlen=self.window)

    def quantiles(self) -> tuple:
        c = np.asarray(self.costs, dtype=np.float64)
        return float(np.quantile(c, 0.05)), float(np.quantile(c, 0.95))

    def update(self, r_task: float, cost: float) -> dict:
        """Push one query; returns ``{"r_cost", "beta", "q5", "q95"}`` for it."""
        if not (np.isfinite(r_task) and np.isfinite(cost)) or cost < 0:
            raise ValueError(f"r_task and cost must be finite and cost >= 0, got {r_task!r}, {cost!r}")
        self.costs.append(float(cost))
        q5, q95 = self.quantiles()
        if q95 - q5 <= self.eps:
            r_cost = 1.0
        else:
            r_cost = 1.0 - min(max((cost - q5) / (q95 - q5), 0.0), 1.0)
        self.r_task.append(float(r_task))
        self.r_cost.append(r_cost)
        if not self.use_beta or len(self.r_task) < self.min_history:
            beta = 1.0
        else:
            beta = float(np.std(self.r_task) / (np.std(self.r_cost) + self.eps))
        return {"r_cost": r_cost, "beta": beta, "q5": q5, "q95": q95}

    def reward(self, r_task: float, cost: float, lam: float) -> tuple:
        """``(r_task + lam · β · r_cost, stats)`` after pushing the query."""
        s = self.update(r_task, cost)
        return r_task + lam * s["beta"] * s["r_cost"], s


class BudgetMemReward(gym.Wrapper):
    """Replace ``TierRouting-v0``'s static reward by BudgetMem's §5.5 reward (see the module docstring). λ is the
    environment's (``info["lam"]``, so the λ-conditioned variant works unchanged). The normaliser's history lives
    in the wrapper and persists across episodes (it is the point of a sliding window); ``info["episode_metrics"]``
    at the end of a query gains ``normalized`` = ``{"r_cost", "beta", "q5", "q95"}``. It wraps ``TierRouting-v0``
    environments only (a :class:`~membudget.envs.tiers.TierRoutingEnv`, wrapped or not): any other raises
    ``TypeError`` here, as it lacks the ``r_task`` / ``cost`` metrics and the ``lam`` the reward is built from."""

    def __init__(self, env, window: int = 256, use_beta: bool = True, eps: float = 1e-6, min_history: int = 2):
        base = getattr(env, "unwrapped", env)
        if not isinstance(base, TierRoutingEnv):
            raise TypeError(f"BudgetMemReward wraps TierRouting-v0 environments only (a TierRoutingEnv, wrapped or "
                            f"not: its reward reads their r_task, cost and lam), got env={type(base).__name__}")
        super().__init__(env)
        self.normalizer = CostNormalizer(window=window, use_beta=use_beta, eps=eps, min_history=min_history)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated:
            m = info["episode_metrics"]
            reward, stats = self.normalizer.reward(m["r_task"], m["cost"], info["lam"])
            info = {**info, "episode_metrics": {**m, "normalized": stats}}
        return obs, float(reward), terminated, truncated, info


__all__ = ["BudgetMemReward", "CostNormalizer"]

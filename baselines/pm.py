"""Reference allocators for ``PMWeek-v0`` (BudgetPM appendix B.4)."""

from __future__ import annotations

import numpy as np


def _batched(observation):
    """``(mask as (n, R) bool, whether the input was a single observation)``."""
    mask = np.asarray(observation["mask"])
    if mask.ndim == 1:
        return mask[None, :].astype(bool), True
    if mask.ndim == 2:
        return mask.astype(bool), False
    raise ValueError(f"observation['mask'] must have 1 or 2 dimensions, got shape {mask.shape}")


class AllRelevant:
    """Query every candidate resource at every step: the unconstrained reference (run it with ``budget=None,
    per_step_cap=None``; under caps the executor trims it in index order). Binary action mode."""

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        mask, single = _batched(observation)
        action = mask.astype(np.int8)
        return (action[0] if single else action), state


class RandomFeasible:
    """Propose a uniformly random subset of ``min(per_step_cap, #candidates)`` current candidates each step;
    the environment's executor then drops whatever the remaining budget cannot afford. Binary action mode.

    ``seed`` fixes the policy's own generator (independent of the environment's).
    """

    def __init__(self, *, per_step_cap: int | None = 2, seed: int | None = None):
        self.per_step_cap = per_step_cap
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        if self.per_step_cap is not None and (not isinstance(self.per_step_cap, (int, np.integer))
                                              or self.per_step_cap <= 0):
            raise ValueError(f"per_step_cap must be a positive int or None, got {self.per_step_cap!r}")
        mask, single = _batched(observation)
        action = np.zeros(mask.shape, dtype=np.int8)
        for i, row in enumerate(mask):
            cand = np.flatnonzero(row)
            k = cand.size if self.per_step_cap is None else min(self.per_step_cap, cand.size)
            if k:
                action[i, self._rng.choice(cand, size=k, replace=False)] = 1
        return (action[0] if single else action), state

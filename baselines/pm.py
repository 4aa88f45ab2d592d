"""Reference allocators for ``PMWeek-v0`` (BudgetPM appendix B.4)."""

from __future__ import annotations

import numba
import numpy as np
from numba.np.random.random_methods import buffered_bounded_lemire_uint32

from membudget.envs.validation import check_int, observation_entry


def _batched(observation):
    """``(mask as (n, R) bool, whether the input was a single observation)``."""
    mask = np.asarray(observation_entry(observation, "mask"))
    if not ((mask == 0) | (mask == 1)).all():   # a NaN or a 0.5 is no candidate flag (astype(bool) reads it as 1)
        raise ValueError("observation['mask'] must hold 0 and 1 only")
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

    ``seed`` fixes the policy's own generator (independent of the environment's), ``rng_``, made from it at the first
    decision and continued over every later one.
    """

    def __init__(self, *, per_step_cap: int | None = 2, seed: int | None = None):
        self.per_step_cap = per_step_cap
        self.seed = seed

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        check_int("per_step_cap", self.per_step_cap, 1, none_ok=True)   # True is not a cap
        if not hasattr(self, "rng_"):
            self.rng_ = np.random.default_rng(check_int("seed", self.seed, 0, none_ok=True))
        mask, single = _batched(observation)
        action = _random_subsets(self.rng_, mask, -1 if self.per_step_cap is None else int(self.per_step_cap))
        return (action[0] if single else action), state


@numba.njit(cache=True)
def _bounded(rng, high):
    """numpy's ``random_bounded_uint64(rng, 0, high)`` for ``0 <= high < 2**32 - 1``: the same draws."""
    return 0 if high == 0 else np.int64(buffered_bounded_lemire_uint32(rng.bit_generator, high))


@numba.njit(cache=True)
def _random_subsets(rng, mask, cap):
    """Per row of ``mask``, ``rng.choice(np.flatnonzero(row), size=min(cap, n), replace=False)`` as an int8
    indicator (``cap < 0``: every candidate), drawn exactly as numpy's ``Generator.choice`` draws it, so the
    stream, and every table with RandomFeasible in it, is that of the per-row ``choice`` loop at a fraction of its
    cost: Floyd's algorithm, then the shuffle of the sample (which only consumes draws here), or, for more than
    10,000 candidates of which more than a 50th are taken, numpy's partial shuffle of all of them."""
    n_rows, n_res = mask.shape
    action = np.zeros((n_rows, n_res), np.int8)
    cand = np.empty(n_res, np.int64)
    picked = np.empty(n_res, np.int64)
    for r in range(n_rows):
        n = 0
        for c in range(n_res):
            if mask[r, c]:
                cand[n] = c
                n += 1
        k = n if cap < 0 else min(cap, n)
        if k == 0:
            continue
        if n > 10000 and k > n // 50:
            for i in range(n - 1, max(n - k, 1) - 1, -1):
                j = _bounded(rng, i)
                cand[i], cand[j] = cand[j], cand[i]
            for i in range(n - k, n):
                action[r, cand[i]] = 1
            continue
        for t in range(k):
            j = n - k + t
            val = _bounded(rng, j)
            for s in range(t):
                if picked[s] == val:
                    val = j
                    break
            picked[t] = val
            action[r, cand[val]] = 1
        for i in range(k - 1, 0, -1):
            _bounded(rng, i)
    return action

"""Reference tier policies for ``TierRouting-v0`` (policy protocol): all-LOW, all-MID, all-HIGH, random and the
hindsight oracle (privileged: it takes the environment, see :mod:`membudget.teachers.tier_oracle`)."""

from __future__ import annotations

import numpy as np

from membudget.envs.validation import check_int
from membudget.teachers.tier_oracle import HindsightTierOracle


def _n(observation):
    x = np.asarray(observation)
    if x.ndim == 1:
        return None
    if x.ndim == 2:
        return x.shape[0]
    raise ValueError(f"observation must have 1 or 2 dimensions, got shape {x.shape}")


class FixedTier:
    """The same tier for every module of every query; single ``(d,)`` or batched ``(n, d)`` observations."""

    def __init__(self, tier: int):
        self.tier = check_int("tier", tier, 0, 2)      # 0 LOW, 1 MID, 2 HIGH

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        n = _n(observation)
        return (np.int64(self.tier) if n is None else np.full(n, self.tier, dtype=np.int64)), state


class AllLow(FixedTier):
    """The all-LOW baseline: tier 0 (LOW, the cheapest) for every module of every query."""

    def __init__(self):
        super().__init__(0)


class AllMid(FixedTier):
    """The all-MID baseline: tier 1 (MID) for every module of every query."""

    def __init__(self):
        super().__init__(1)


class AllHigh(FixedTier):
    """The all-HIGH baseline: tier 2 (HIGH, the costliest) for every module of every query."""

    def __init__(self):
        super().__init__(2)


class RandomTiers:
    """A uniformly random tier per module; ``seed`` fixes the policy's own generator, ``rng_``, made from it at the
    first decision and continued over every later one."""

    def __init__(self, *, seed: int | None = None):
        self.seed = seed

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        if not hasattr(self, "rng_"):
            self.rng_ = np.random.default_rng(check_int("seed", self.seed, 0, none_ok=True))
        n = _n(observation)
        a = self.rng_.integers(0, 3, size=1 if n is None else n)
        return (np.int64(a[0]) if n is None else a.astype(np.int64)), state


class OracleTiers(HindsightTierOracle):
    """The hindsight oracle as a baseline (privileged: ``env`` required; ``lam`` / ``mu`` / ``cap`` objective)."""


BASELINES = {"all-LOW": AllLow, "all-MID": AllMid, "all-HIGH": AllHigh, "random": RandomTiers}

__all__ = ["AllHigh", "AllLow", "AllMid", "BASELINES", "FixedTier", "OracleTiers", "RandomTiers"]

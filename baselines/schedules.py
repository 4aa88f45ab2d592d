"""Natural monitoring schedules of BudgetPM (§4, appendix C.3.1-C.3.2) for ``PMWeek-v0`` in ``action_mode="scores"``.

All of them use a frozen Static Outcome scorer (any object with ``score(X) -> (n,)`` over the 27 resource
features, e.g. a fitted :class:`~membudget.agents.StaticGate`, passed in) and leave feasibility to the environment's
hard-cap executor. They read the step from the observation's progress feature, so they take the horizon ``T``.
Stateful schedules keep one state per row of a batched observation and reset a row on ``episode_start``.
"""

from __future__ import annotations

import numpy as np

from membudget.envs.pm import BUDGET_FEATURE_NAMES, RESOURCE_FEATURE_NAMES
from membudget.envs.validation import check_int, check_number, constructor_repr, observation_entry

from .thresholds import STATIC_BUDGETS, ThresholdGate, check_level, levels_of, target_count_threshold

_F = {n: i for i, n in enumerate(RESOURCE_FEATURE_NAMES)}
_B = {n: i for i, n in enumerate(BUDGET_FEATURE_NAMES)}


def _batch(observation):
    """``(observation with a batch axis, whether it was a single one)``; the keys the schedules read checked."""
    for key in ("budget", "mask"):
        observation_entry(observation, key)
    res = np.asarray(observation_entry(observation, "resources"))
    single = res.ndim == 2
    if single:
        observation = {k: np.asarray(v)[None] for k, v in observation.items()}
    return observation, single


def _step_of(observation, horizon):
    return np.rint(np.asarray(observation["budget"])[:, _B["progress"]] * (horizon - 1)).astype(int)


def uniform_slots(cap: int, horizon: int) -> np.ndarray:
    """Query opportunities per step when ``cap`` of them are spread uniformly over the horizon."""
    slots = np.zeros(horizon, dtype=int)
    np.add.at(slots, (np.arange(cap) * horizon) // cap, 1)
    return slots


class _Scored:
    def __init__(self, *, scorer, cap: int, horizon: int = 80):
        self.scorer = scorer
        self.cap = cap
        self.horizon = horizon

    def __repr__(self):
        return constructor_repr(self)

    def _scores(self, obs):
        res = np.asarray(obs["resources"], dtype=np.float64)
        n, R, F = res.shape
        return self.scorer.score(res.reshape(n * R, F)).reshape(n, R)

    def _check(self):
        check_int("cap", self.cap, 1)
        check_int("horizon", self.horizon, 1)


def _top(scores, allowed, k):
    """Action row proposing the ``k`` highest-scoring allowed resources (scores in (0, 1], -1 elsewhere)."""
    out = np.full(scores.shape, -1.0, dtype=np.float32)
    idx = np.flatnonzero(allowed)
    if k > 0 and idx.size:
        best = idx[np.argsort(-scores[idx], kind="stable")[:k]]
        out[best] = np.clip(scores[best], 1e-6, 1.0)
    return out


class PeriodicOutcome(_Scored):
    """``cap`` query opportunities placed uniformly over the episode; each goes to the highest-scoring candidate."""

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        self._check()
        obs, single = _batch(observation)
        slots = uniform_slots(self.cap, self.horizon)
        t = np.minimum(_step_of(obs, self.horizon), self.horizon - 1)
        s = self._scores(obs)
        allowed = self._allowed(obs, episode_start)
        act = np.stack([_top(s[i], allowed[i], slots[t[i]]) for i in range(s.shape[0])])
        act[self._checked_first(obs)] = 1.0
        return (act[0] if single else act), state

    def _allowed(self, obs, episode_start):
        """Resources the cadence slots may go to."""
        return np.asarray(obs["mask"]).astype(bool)

    def _checked_first(self, obs):
        """Resources proposed at the top priority outside the cadence."""
        return np.zeros(np.asarray(obs["mask"]).shape, dtype=bool)


class DeadlineOutcome(PeriodicOutcome):
    """Periodic cadence for state channels, but the clock is checked (first) at every step at which one of its
    unresolved intentions is inside its declared window."""

    def _checked_first(self, obs):
        res = np.asarray(obs["resources"])
        clock = res[:, :, _F["is_clock"]] > 0.5
        in_window = res[:, :, _F["resolvability"]] > 0
        return clock & in_window & np.asarray(obs["mask"]).astype(bool)

    def _allowed(self, obs, episode_start):
        res = np.asarray(obs["resources"])
        return np.asarray(obs["mask"]).astype(bool) & (res[:, :, _F["is_clock"]] < 0.5)


class DeadlineBackoffOutcome(DeadlineOutcome):
    """Deadline-Outcome plus exponential backoff of state checks: after the n-th check in a row that changed
    nothing, a resource is not polled again for ``min(initial * factor**(n - 1), max_interval)`` steps; a check
    that resolved something, or a newly relevant memory on the resource, resets it to ``initial``."""

    def __init__(self, *, scorer, cap: int, horizon: int = 80, initial: float = 2, factor: float = 1.5,
                 max_interval: float = 4):
        super().__init__(scorer=scorer, cap=cap, horizon=horizon)
        self.initial = initial
        self.factor = factor
        self.max_interval = max_interval

    def _check(self):
        super()._check()
        check_number("initial", self.initial, 0)
        check_number("factor", self.factor, 1)
        check_number("max_interval", self.max_interval, self.initial)

    def _allowed(self, obs, episode_start):
        return super()._allowed(obs, episode_start) & self._backoff_allows(obs, episode_start)

    def _backoff_allows(self, obs, episode_start):
        res = np.asarray(obs["resources"])
        n, R, _ = res.shape
        t = _step_of(obs, self.horizon)
        if getattr(self, "_interval", None) is None or self._interval.shape != (n, R):
            episode_start = np.ones(n, dtype=bool)
            self._interval = np.zeros((n, R))
            self._next = np.zeros((n, R))
            self._unchanged = np.zeros((n, R))
            self._open = np.zeros((n, R))
        if episode_start is not None:
            fresh = np.asarray(episode_start, dtype=bool).reshape(n)
            self._interval[fresh] = self.initial
            self._next[fresh] = 0
            self._unchanged[fresh] = 0
            self._open[fresh] = 0
        unchanged = res[:, :, _F["unchanged_count"]]
        open_now = res[:, :, _F["open_count"]]
        queried = np.isclose(res[:, :, _F["age_since_query"]], 1.0 / self.horizon) & (res[:, :, _F["ever_queried"]] > 0)
        found_nothing = queried & (unchanged > self._unchanged)
        changed = (queried & ~found_nothing) | (open_now > self._open)
        # the check at t - 1 found nothing: wait the current interval from it, then lengthen the interval
        self._next = np.where(found_nothing, t[:, None] - 1 + self._interval, self._next)
        self._interval = np.where(found_nothing, np.minimum(self._interval * self.factor, self.max_interval),
                                  self._interval)
        self._interval = np.where(changed, self.initial, self._interval)
        self._next = np.where(changed, t[:, None], self._next)
        self._unchanged, self._open = unchanged.copy(), open_now.copy()
        return self._next <= t[:, None]


class Pacing:
    """Static gate whose threshold is scaled by the pace of spending: ``threshold / rho`` with
    ``rho = (remaining budget / B) / (remaining horizon / T)`` (clipped to [0, 1]); ahead of pace it proposes
    more, behind pace fewer. Pacing-LB is the same rule with a low-budget threshold knot selected on development
    weeks (:func:`select_pacing_threshold`)."""

    def __init__(self, *, scorer, threshold: float):
        self.scorer = scorer
        self.threshold = threshold

    def __repr__(self):
        return constructor_repr(self)

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        check_number("threshold", self.threshold, 0)
        s, rho, mask, single = _paced_scores(self.scorer, observation)
        thr = np.clip(self.threshold / np.maximum(rho, 1e-9), 0.0, 1.0)
        act = np.where(mask & (s >= thr[:, None]), np.clip(s, 1e-6, 1.0), -1.0).astype(np.float32)
        return (act[0] if single else act), state


def _paced_scores(scorer, observation):
    """``(scores (n, R), pace rho (n,), candidate mask (n, R), single)`` of a (batched) observation, with
    ``rho = (remaining budget / B) / (remaining horizon / T)``."""
    obs, single = _batch(observation)
    res = np.asarray(obs["resources"], dtype=np.float64)
    n, R, F = res.shape
    s = scorer.score(res.reshape(n * R, F)).reshape(n, R)
    b = np.asarray(obs["budget"], dtype=np.float64)
    rho = b[:, _B["remaining_fraction"]] / np.maximum(b[:, _B["remaining_horizon"]], 1e-9)
    return s, rho, np.asarray(obs["mask"]).astype(bool), single


class FractionPacing:
    """BudgetPM's remaining-budget pacing as specified for GoodAI (appendix B.6): the calibrated target fraction
    ``fraction`` (0.6 at B60) scaled by ``(remaining budget / B) / (remaining horizon / T)``, clipped to [0, 1]
    and looked up on the Static calibration curve ``thresholds`` (level name -> threshold, e.g. a fitted gate's
    ``thresholds_``): linear in the fraction between calibrated levels, clamped to the lowest / highest level
    outside them; a fraction of 0 proposes nothing and 1 every candidate (before the executor's caps)."""

    def __init__(self, *, scorer, fraction: float, thresholds: dict):
        self.scorer = scorer
        self.fraction = fraction
        self.thresholds = thresholds

    def __repr__(self):
        return constructor_repr(self)

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        check_number("fraction", self.fraction, 0, 1)
        if not isinstance(self.thresholds, dict) or not self.thresholds:
            raise ValueError(f"thresholds must map budget levels to thresholds (a fitted gate's thresholds_), got "
                             f"{self.thresholds!r}")
        for name, value in self.thresholds.items():
            check_level("thresholds key", name)
            check_number(f"thresholds[{name!r}]", value)
        s, rho, mask, single = _paced_scores(self.scorer, observation)
        f = np.clip(self.fraction * rho, 0.0, 1.0)
        levels = sorted(self.thresholds, key=lambda k: int(k[1:]))
        thr = np.interp(f, [int(k[1:]) / 100.0 for k in levels], [self.thresholds[k] for k in levels])
        thr = np.where(f <= 0.0, np.inf, np.where(f >= 1.0, -np.inf, thr))
        act = np.where(mask & (s >= thr[:, None]), np.clip(s, 1e-6, 1.0), -1.0).astype(np.float32)
        return (act[0] if single else act), state


class RelevanceGate(ThresholdGate):
    """Rank by the retriever's relevance (the hint) instead of a learned score, with Static's target-count
    threshold calibration (no fitting beyond the thresholds)."""

    def __init__(self, *, budget="B20", calibration_budgets=STATIC_BUDGETS):
        self.budget = budget
        self.calibration_budgets = calibration_budgets

    def score(self, X):
        """The retriever's relevance (the hint) of each feature row (:attr:`n_features` features)."""
        return self.check_rows(X)[:, _F["max_relevance"]]

    def fit(self, dataset, levels=None):
        """Thresholds on ``dataset`` (a :class:`~membudget.teachers.LabelDataset`; ``levels`` as in
        :class:`~membudget.agents.StaticGate`'s ``fit``), calibrated as Static's on the relevance hint."""
        self.validate_params()
        self.check_fit_data(dataset, levels)
        levels = levels or levels_of(dataset)
        self._check_calibration(levels)
        if len(dataset.week) == 0:
            raise ValueError("the dataset has no rows")
        X = self.check_rows(dataset.features, fitting=True)
        s = X[:, _F["max_relevance"]]
        thresholds = {b: target_count_threshold(s, dataset.week, levels[b]) for b in self.calibration_budgets}
        self.n_features_in_, self.thresholds_ = X.shape[1], thresholds
        return self

    def fitted_arrays(self):
        return {"n_features": np.array(self.n_features)}

    def set_fitted_arrays(self, z):
        self._set_width(z)

"""LinUCB contextual bandits in numpy, with the online select / update fast path in numba kernels: LIMBO's two-head
controller and a single-head variant.

Both keep, per action ``a``, the inverse design matrix ``A_a^{-1} = (λ I + Σ x x^T)^{-1}`` (Sherman–Morrison for one
observation, Woodbury for a batch of observations of one action; a batch touching several actions is applied
action by action with one rank-``m`` update each) and the ridge estimates ``θ_a = A_a^{-1} b_a``.

- :class:`LinUCB` (LIMBO): two ridge heads on the same design per action, one for correctness and one for
  (normalised) cost; selects ``argmax_a  θ^c_a·x + α sqrt(x^T A_a^{-1} x) − w · θ^k_a·x`` (correctness UCB minus
  ``w`` times the predicted cost), updates after the task with the observed correctness and cost.
- :class:`SingleHeadLinUCB`: classic disjoint LinUCB on one reward, ``argmax_a θ_a·x + α sqrt(x^T A_a^{-1} x)``
  (the same rule as MABWiser's ``LearningPolicy.LinUCB``; ties go to the lowest action index in both).

scikit-learn conventions: the keyword-only ``__init__`` only stores its arguments (``get_params`` /
``set_params`` work); arguments are validated on first use (``fit``, ``partial_fit``, ``select``, ``predict``);
learned attributes end in ``_``. Both follow the policy protocol ``predict(observation, state=None,
episode_start=None, deterministic=True) -> (action, state)`` for one observation ``(d,)`` or a batch ``(n, d)``;
``predict`` never learns — call ``update`` / ``partial_fit`` with the outcome (see
:func:`membudget.studies.limbo.run_bandit` for the online loop).
"""

from __future__ import annotations

import math
import numbers

import numba
import numpy as np
from sklearn.base import BaseEstimator


def _check_number(name, value, *, low, low_inclusive=True):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    if value < low or (value == low and not low_inclusive):
        raise ValueError(f"{name} must be {'>=' if low_inclusive else '>'} {low}, got {value!r}")


@numba.njit(cache=True)
def _select_kernel(A_inv, score_theta, x, alpha):
    """``argmax_a score_theta[a]·x + α sqrt(x^T A_inv[a] x)`` (ties to the lowest index) and the chosen action's
    bonus; action −1 when a score is not finite."""
    K, d = score_theta.shape
    best, best_bonus, chosen = -np.inf, 0.0, 0
    for a in range(K):
        q = mean = 0.0
        for i in range(d):
            row = 0.0
            for j in range(d):
                row += A_inv[a, i, j] * x[j]
            q += x[i] * row
            mean += score_theta[a, i] * x[i]
        bonus = alpha * np.sqrt(q)
        score = mean + bonus
        if not np.isfinite(score):
            return -1, bonus
        if score > best:
            best, best_bonus, chosen = score, bonus, a
    return chosen, best_bonus


@numba.njit(cache=True)
def _sherman_morrison_kernel(A_inv, b, theta, score_theta, head_weights, a, x, targets):
    """Add row ``x`` with its head ``targets`` to action ``a``: ``A_inv[a] −= u u^T / (1 + x·u)`` with
    ``u = A_inv[a] x``, ``b[a] += targets ⊗ x``, ``theta[a] = b[a] A_inv[a]`` and ``score_theta[a] =
    head_weights · theta[a]``. Returns False (and changes nothing) when the denominator or a target is not
    finite."""
    d = x.size
    u = np.empty(d)
    for i in range(d):
        row = 0.0
        for j in range(d):
            row += A_inv[a, i, j] * x[j]
        u[i] = row
    den = 1.0
    for i in range(d):
        den += x[i] * u[i]
    total = den
    for h in range(len(targets)):
        total += targets[h]
    if not np.isfinite(total):
        return False
    for j in range(d):
        v = u[j] / den
        for i in range(d):
            A_inv[a, i, j] -= u[i] * v
    for h in range(len(targets)):
        for j in range(d):
            b[a, h, j] += targets[h] * x[j]
    for j in range(d):
        combined = 0.0
        for h in range(len(targets)):
            acc = 0.0
            for i in range(d):
                acc += b[a, h, i] * A_inv[a, i, j]
            theta[a, h, j] = acc
            combined += head_weights[h] * acc
        score_theta[a, j] = combined
    return True


class _LinUCBBase(BaseEstimator):
    """Shared state and updates; ``_n_heads`` targets per observation."""

    _n_heads = 1

    # -------------------------------------------------------------------------------------------- validation

    def _validate_params(self):
        n = self.n_actions
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n_actions must be an int >= 1, got {n!r}")
        _check_number("alpha", self.alpha, low=0.0)
        _check_number("l2_lambda", self.l2_lambda, low=0.0, low_inclusive=False)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValueError(f"fit_intercept must be a bool, got {self.fit_intercept!r}")

    def _initialize(self, n_features: int):
        self._validate_params()
        d = n_features + bool(self.fit_intercept)
        self.n_features_in_ = n_features
        self.A_inv_ = np.tile(np.eye(d) / float(self.l2_lambda), (self.n_actions, 1, 1))
        self.b_ = np.zeros((self.n_actions, self._n_heads, d))
        self.theta_ = np.zeros((self.n_actions, self._n_heads, d))
        self.n_updates_ = np.zeros(self.n_actions, dtype=np.int64)
        self.last_bonus_ = float("nan")
        self._w = self._head_weights()
        self._score_theta = np.zeros((self.n_actions, d))      # theta_ combined by the selection rule
        self._xbuf = np.ones(d)
        self._d_in = n_features

    def _check_X(self, X, *, first_use_ok=True):
        """2-D float64 design ``(n, d_in)`` (a 1-D observation becomes one row); initialises on first use."""
        X = np.asarray(X)
        if X.dtype.kind not in "biuf":
            raise TypeError(f"observations must be numeric, got dtype {X.dtype}")
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] == 0:
            raise ValueError(f"observations must have shape (d,) or (n, d) with d >= 1, got {np.shape(X)}")
        if not np.isfinite(X).all():
            raise ValueError("observations must be finite (found NaN or inf)")
        if not hasattr(self, "A_inv_"):
            if not first_use_ok:
                raise ValueError("the bandit has no state yet")
            self._initialize(X.shape[1])
        elif X.shape[1] != self.n_features_in_:
            raise ValueError(f"observations have {X.shape[1]} features, the bandit was set up with "
                             f"{self.n_features_in_}")
        X = X.astype(np.float64, copy=False)
        if self.fit_intercept:
            X = np.hstack([X, np.ones((X.shape[0], 1))])
        return X

    def _check_targets(self, X, actions, targets):
        actions = np.asarray(actions)
        if actions.ndim == 0:
            actions = actions[None]
        if actions.shape != (X.shape[0],) or actions.dtype.kind not in "iu":
            raise ValueError(f"actions must be {X.shape[0]} integers, got {np.asarray(actions)!r}")
        if ((actions < 0) | (actions >= self.n_actions)).any():
            raise ValueError(f"actions must lie in [0, {self.n_actions}), got {actions}")
        Y = np.column_stack([np.broadcast_to(np.asarray(t, dtype=np.float64), (X.shape[0],)) for t in targets])
        if not np.isfinite(Y).all():
            raise ValueError("targets must be finite")
        return actions, Y

    # ------------------------------------------------------------------------------------------------ learning

    def _partial_fit(self, X, actions, Y):
        """Woodbury update per touched action (rank ``m`` = rows of that action); exact for any batch order."""
        for a in np.unique(actions):
            rows = actions == a
            Xa, Ya = X[rows], Y[rows]
            Ai = self.A_inv_[a]
            if Xa.shape[0] == 1:
                x = Xa[0]
                u = Ai @ x
                Ai -= np.multiply.outer(u, u / (1.0 + x @ u))
            else:
                U = Ai @ Xa.T                                       # (d, m)
                S = np.eye(Xa.shape[0]) + Xa @ U                    # (m, m)
                Ai -= U @ np.linalg.solve(S, U.T)
                Ai += Ai.T
                Ai *= 0.5                                           # keep it symmetric
            self.b_[a] += Ya.T @ Xa
            self.theta_[a] = self.b_[a] @ Ai
            self._score_theta[a] = self._w @ self.theta_[a]
            self.n_updates_[a] += Xa.shape[0]
        return self

    def _head_weights(self):
        return np.ones(1)

    def _fast_x(self, x):
        """``x`` as the float64 row the fast path works on (intercept appended); shape-checked. Finiteness is
        checked on the scores / the Sherman-Morrison denominator instead (a NaN or inf reaches both)."""
        shape = x.shape if isinstance(x, np.ndarray) else np.shape(x)
        if shape != (self._d_in,):
            raise ValueError(f"observation must have shape ({self._d_in},), got {shape}")
        buf = self._xbuf
        buf[:self._d_in] = x
        return buf

    def _sm_update(self, x, a, targets):
        """Sherman-Morrison update of action ``a`` with one row ``x`` and its head targets (a numba kernel)."""
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, numbers.Integral) or not 0 <= a < self.n_actions:
            raise ValueError(f"action must be an int in [0, {self.n_actions}), got {a!r}")
        if not _sherman_morrison_kernel(self.A_inv_, self.b_, self.theta_, self._score_theta, self._w, int(a), x,
                                        targets):
            raise ValueError(f"observation and targets must be finite, got x={x}, targets={targets}")
        self.n_updates_[a] += 1

    def select(self, x) -> int:
        """Choose the action for one observation ``x (d,)`` (fast path of the online loop, same rule as
        :meth:`predict`); records the chosen action's UCB bonus in ``last_bonus_``."""
        if not hasattr(self, "A_inv_"):
            self._check_X(x)
        x = self._fast_x(x)
        a, bonus = _select_kernel(self.A_inv_, self._score_theta, x, float(self.alpha))
        if a < 0:
            raise ValueError(f"observation must be finite, got {x[:self._d_in]}")
        self.last_bonus_ = bonus
        return a

    def _reset(self):
        for name in ("A_inv_", "b_", "theta_", "n_updates_", "n_features_in_", "last_bonus_"):
            self.__dict__.pop(name, None)

    # --------------------------------------------------------------------------------------------- estimates

    def ucb_bonus(self, X) -> np.ndarray:
        """``α sqrt(x^T A_a^{-1} x)`` per observation and action, ``(n, n_actions)``."""
        X = self._check_X(X)
        return self.alpha * np.sqrt(np.einsum("nd,kde,ne->nk", X, self.A_inv_, X))

    def ridge_estimates(self) -> np.ndarray:
        """``θ`` as ``(n_actions, n_heads, d)`` (``d`` includes the intercept last when ``fit_intercept``)."""
        if not hasattr(self, "theta_"):
            raise ValueError("the bandit has no state yet: call fit, partial_fit or select first")
        return self.theta_.copy()

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        """Policy protocol: the selected action for one observation ``(d,)`` (an int64 scalar array) or a batch
        ``(n, d)`` (an ``(n,)`` array). Selection is deterministic (ties to the lowest index); nothing is learned."""
        single = np.ndim(observation) == 1
        actions = self.decision_function(observation).argmax(axis=1)
        return (actions[0] if single else actions), state


class LinUCB(_LinUCBBase):
    """LIMBO's two-head LinUCB: per action, ridge heads for correctness and for normalised cost.

    Parameters (keyword-only, validated on first use):

    - ``n_actions``: number of arms (12 for ``ReplayStream-v0``).
    - ``alpha``: exploration scale of the correctness UCB (>= 0).
    - ``l2_lambda``: ridge regularisation λ (> 0); ``A_a`` starts at ``λ I``.
    - ``cost_weight``: ``w`` in ``score = UCB(correct) − w · predicted cost`` (>= 0; the environment's 0.5).
    - ``fit_intercept``: append a constant 1 to every observation.

    Learned attributes: ``A_inv_`` (n_actions, d, d), ``b_`` and ``theta_`` (n_actions, 2, d) with head 0 =
    correctness and head 1 = cost, ``n_updates_`` (n_actions,), ``n_features_in_``, ``last_bonus_`` (UCB bonus
    of the action chosen by the last :meth:`select`).
    """

    _n_heads = 2

    def __init__(self, *, n_actions=12, alpha=0.5, l2_lambda=1.0, cost_weight=0.5, fit_intercept=True):
        self.n_actions = n_actions
        self.alpha = alpha
        self.l2_lambda = l2_lambda
        self.cost_weight = cost_weight
        self.fit_intercept = fit_intercept

    def _validate_params(self):
        super()._validate_params()
        _check_number("cost_weight", self.cost_weight, low=0.0)

    def fit(self, X, actions, correct, cost):
        """Forget everything, then learn from rows ``X (n, d)`` with the actions taken and their observed
        correctness and cost."""
        self._reset()
        return self.partial_fit(X, actions, correct, cost)

    def partial_fit(self, X, actions, correct, cost):
        """Add observations (batched: one Woodbury update per touched action)."""
        X = self._check_X(X)
        actions, Y = self._check_targets(X, actions, (correct, cost))
        return self._partial_fit(X, actions, Y)

    def decision_function(self, X) -> np.ndarray:
        """Selection scores ``(n, n_actions)``: correctness UCB minus ``w`` × predicted cost."""
        X = self._check_X(X)
        m = np.einsum("nd,khd->nkh", X, self.theta_)
        bonus = self.alpha * np.sqrt(np.einsum("nd,kde,ne->nk", X, self.A_inv_, X))
        return m[:, :, 0] + bonus - self.cost_weight * m[:, :, 1]

    def predict_heads(self, X) -> np.ndarray:
        """Ridge estimates of correctness and cost, ``(n, n_actions, 2)``."""
        X = self._check_X(X)
        return np.einsum("nd,khd->nkh", X, self.theta_)

    def _head_weights(self):
        return np.array([1.0, -float(self.cost_weight)])

    def update(self, x, action, correct, cost):
        """Add one observation (Sherman–Morrison); the fast path of :meth:`partial_fit`."""
        if not hasattr(self, "A_inv_"):
            self._check_X(x)
        self._sm_update(self._fast_x(x), action, (float(correct), float(cost)))


class SingleHeadLinUCB(_LinUCBBase):
    """Classic disjoint LinUCB on one scalar reward (the variant compared with MABWiser's ``LinUCB``).

    Parameters: ``n_actions``, ``alpha`` (>= 0), ``l2_lambda`` (> 0), ``fit_intercept`` (default ``False``, as
    MABWiser). Learned attributes as :class:`LinUCB` with one head: ``theta_`` (n_actions, 1, d).
    """

    _n_heads = 1

    def __init__(self, *, n_actions=12, alpha=1.0, l2_lambda=1.0, fit_intercept=False):
        self.n_actions = n_actions
        self.alpha = alpha
        self.l2_lambda = l2_lambda
        self.fit_intercept = fit_intercept

    def fit(self, X, actions, rewards):
        self._reset()
        return self.partial_fit(X, actions, rewards)

    def partial_fit(self, X, actions, rewards):
        X = self._check_X(X)
        actions, Y = self._check_targets(X, actions, (rewards,))
        return self._partial_fit(X, actions, Y)

    def decision_function(self, X) -> np.ndarray:
        X = self._check_X(X)
        m = np.einsum("nd,kd->nk", X, self.theta_[:, 0])
        return m + self.alpha * np.sqrt(np.einsum("nd,kde,ne->nk", X, self.A_inv_, X))

    def update(self, x, action, reward):
        """Add one observation (Sherman–Morrison); the fast path of :meth:`partial_fit`."""
        if not hasattr(self, "A_inv_"):
            self._check_X(x)
        self._sm_update(self._fast_x(x), action, (float(reward),))


__all__ = ["LinUCB", "SingleHeadLinUCB"]

"""LinUCB contextual bandits in numpy, with the online select / update fast path in numba kernels: LIMBO's two-head
controller and a single-head variant.

Both keep, per action ``a``, the inverse design matrix ``A_a^{-1} = (λ I + Σ x x^T)^{-1}`` (Sherman–Morrison for one
observation, Woodbury for a batch of observations of one action; a batch touching several actions is applied
action by action with one rank-``m`` update each) and the ridge estimates ``θ_a = A_a^{-1} b_a``.

- :class:`LinUCB` (LIMBO): two ridge heads on the same design per action, one for correctness and one for
  (normalised) cost; selects ``argmax_a  θ^c_a·x + α sqrt(x^T A_a^{-1} x) − w · θ^k_a·x`` (correctness UCB minus
  ``w`` times the predicted cost), updates after the task with the observed correctness and cost. With
  ``alpha_decay = τ`` the exploration scale decays with the number ``n`` of observations so far,
  ``α_n = α · τ / (τ + n)``, on top of the bonus's own shrinkage as the design matrices fill.
- :class:`HybridLinUCB`: LIMBO's two heads on Li et al. (2010)'s hybrid linear model, ``E[y | x, a] = z_{x,a}·β +
  x·θ_a`` with shared features ``z_{x,a} = f_a ⊗ x`` (the action's features ``f_a``, e.g. its replay mode and
  budget tier, times the context), so every outcome informs every action that shares a feature with the one played;
  ``θ_a`` keeps each action's own deviation. It keeps the joint ridge over ``(β, θ_1, …, θ_K)`` exactly (one
  inverse of the joint design; the UCB bonus ``α sqrt(φ^T A^{-1} φ)`` of the joint row ``φ`` equals Li et al.'s
  ``s_{t,a}``).
- :class:`SingleHeadLinUCB`: classic disjoint LinUCB on one reward, ``argmax_a θ_a·x + α sqrt(x^T A_a^{-1} x)``
  (the same rule as MABWiser's ``LearningPolicy.LinUCB``; ties go to the lowest action index in both).

scikit-learn conventions: the keyword-only ``__init__`` only stores its arguments (``get_params`` /
``set_params`` work); arguments are validated on first use (``fit``, ``partial_fit``, ``select``, ``predict``);
learned attributes end in ``_``. Both follow the policy protocol ``predict(observation, state=None,
episode_start=None, deterministic=True) -> (action, state)`` for one observation ``(d,)`` or a batch ``(n, d)``;
``predict`` never learns — call ``update`` / ``partial_fit`` with the outcome (see
:func:`membudget.studies.limbo.run_bandit` for the online loop). Unlike a scikit-learn estimator, an unfitted
bandit predicts: its first ``select`` / ``predict`` sets up the prior state (``A_inv_ = I / l2_lambda``, ``θ = 0``)
for that observation's width, as a bandit's cold start needs; later data of another width are refused.

Inputs are checked where they enter, each error naming the argument: observations (``X`` / ``x`` /
``observation``) and targets (``correct``, ``cost``, ``rewards``) must be numeric (never strings or ``None``),
finite, and at most :data:`MAX_MAGNITUDE` in absolute value ("too large" and "not finite" are told apart); so must
``alpha`` and ``cost_weight``, and ``l2_lambda`` lies in ``[1 / MAX_MAGNITUDE, MAX_MAGNITUDE]``. Within these
bounds every product of the ridge updates and of the scores stays inside float64. A ``cost`` is never negative
(``ReplayStream-v0``'s normalised cost lies in [0, 1]).
"""

from __future__ import annotations

import math
import numbers

import numba
import numpy as np
from sklearn.base import BaseEstimator


MAX_MAGNITUDE = 1e50
"""Largest absolute value of an observation, a target, ``alpha``, ``cost_weight`` or ``l2_lambda`` (and
``1 / l2_lambda``): ``x^T A^{-1} x``, ``θ`` and the scores then stay far inside float64 (a value of 1e200 once
overflowed the ridge update)."""


def _check_number(name, value, *, low, low_inclusive=True):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    if value < low or (value == low and not low_inclusive):
        raise ValueError(f"{name} must be {'>=' if low_inclusive else '>'} {low}, got {value!r}")
    if abs(value) > MAX_MAGNITUDE:
        raise ValueError(f"{name} is too large: at most {MAX_MAGNITUDE:g} in absolute value, got {value!r}")


def _numeric(name, value) -> np.ndarray:
    """``value`` as an array of numbers (bools, integers or floats); anything else — strings, ``None``, ragged
    nests — raises ``ValueError`` naming ``name``."""
    try:
        a = np.asarray(value)
    except ValueError as e:  # a ragged nest
        raise ValueError(f"{name} must be numbers in a regular array, got {value!r} ({e})") from None
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numbers, got {value!r} (dtype {a.dtype})")
    return a


def _check_values(name, a: np.ndarray) -> None:
    """``ValueError`` naming ``name`` and the first offending entry when ``a`` is not finite or too large."""
    a = a.astype(np.float64, copy=False)  # float32 cannot hold the bound
    bad = ~np.isfinite(a)
    if bad.any():
        raise ValueError(f"{name} must be finite, found {a[bad].flat[0]} at index "
                         f"{tuple(int(i) for i in np.argwhere(bad)[0])}")
    big = np.abs(a) > MAX_MAGNITUDE
    if big.any():
        raise ValueError(f"{name} is too large: at most {MAX_MAGNITUDE:g} in absolute value, found "
                         f"{a[big].flat[0]:g} at index {tuple(int(i) for i in np.argwhere(big)[0])}")


def _negative_cost(name, value, where="") -> ValueError:
    """The ``ValueError`` of a negative cost target ``name`` (``where``: the offending entry's index, if any)."""
    return ValueError(f"{name} must be >= 0 (an observed cost; ReplayStream-v0's normalised cost lies in [0, 1]), "
                      f"got {value!r}{where}")


# Codes of the kernels' input checks (0: fine).
_X_NOT_FINITE, _X_TOO_LARGE, _TARGET_NOT_FINITE, _TARGET_TOO_LARGE = 1, 2, 3, 4


@numba.njit(cache=True)
def _input_code(x, targets, limit):
    """The first problem of a row and its targets (a code above, and the index of the offending entry)."""
    for i in range(x.size):
        if not np.isfinite(x[i]):
            return _X_NOT_FINITE, i
        if abs(x[i]) > limit:
            return _X_TOO_LARGE, i
    for h in range(len(targets)):
        if not np.isfinite(targets[h]):
            return _TARGET_NOT_FINITE, h
        if abs(targets[h]) > limit:
            return _TARGET_TOO_LARGE, h
    return 0, 0


@numba.njit(cache=True)
def _select_kernel(A_inv, score_theta, x, alpha, limit):
    """``argmax_a score_theta[a]·x + α sqrt(x^T A_inv[a] x)`` (ties to the lowest index) and the chosen action's
    bonus; when ``x`` is not finite or an entry exceeds ``limit``: ``(−code, index)`` (:func:`_input_code`)."""
    code, where = _input_code(x, np.empty(0), limit)
    if code:
        return -code, float(where)
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
        bonus = alpha * np.sqrt(max(q, 0.0))  # x^T A^-1 x >= 0; below 0 only by rounding (see _bonus)
        score = mean + bonus
        if score > best:
            best, best_bonus, chosen = score, bonus, a
    return chosen, best_bonus


@numba.njit(cache=True)
def _sherman_morrison_kernel(A_inv, b, theta, score_theta, head_weights, a, x, targets, limit):
    """Add row ``x`` with its head ``targets`` to action ``a``: ``A_inv[a] −= u u^T / (1 + x·u)`` with
    ``u = A_inv[a] x``, ``b[a] += targets ⊗ x``, ``theta[a] = b[a] A_inv[a]`` and ``score_theta[a] =
    head_weights · theta[a]``. Returns ``(code, index)`` of :func:`_input_code` (0: done; otherwise nothing is
    changed)."""
    code, where = _input_code(x, targets, limit)
    if code:
        return code, where
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
    return 0, 0


class _LinUCBBase(BaseEstimator):
    """Shared state and updates; ``_n_heads`` targets per observation."""

    _n_heads = 1
    _NON_NEGATIVE = ()
    """Targets that are costs: refused when negative."""

    # -------------------------------------------------------------------------------------------- validation

    def _validate_params(self):
        n = self.n_actions
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n_actions must be an int >= 1, got {n!r}")
        _check_number("alpha", self.alpha, low=0.0)
        _check_number("l2_lambda", self.l2_lambda, low=0.0, low_inclusive=False)
        if self.l2_lambda < 1.0 / MAX_MAGNITUDE:
            raise ValueError(f"l2_lambda is too small: at least {1.0 / MAX_MAGNITUDE:g} (A^-1 starts at "
                             f"I / l2_lambda), got {self.l2_lambda!r}")
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

    def _check_X(self, X, *, name="X", first_use_ok=True):
        """2-D float64 design ``(n, d_in)`` (a 1-D observation becomes one row); initialises on first use. Errors
        name the argument ``name``."""
        X = _numeric(name, X)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] == 0:
            raise ValueError(f"{name} must have shape (d,) or (n, d) with d >= 1, got {np.shape(X)}")
        _check_values(name, X)
        if not hasattr(self, "A_inv_"):
            if not first_use_ok:
                raise ValueError("the bandit has no state yet")
            self._initialize(X.shape[1])
        elif X.shape[1] != self.n_features_in_:
            raise ValueError(f"{name} has {X.shape[1]} features, the bandit was set up with "
                             f"{self.n_features_in_}")
        X = X.astype(np.float64, copy=False)
        if self.fit_intercept:
            X = np.hstack([X, np.ones((X.shape[0], 1))])
        return X

    def _check_targets(self, X, actions, targets: dict):
        """Actions ``(n,)`` and the targets ``{name: values}`` as columns ``(n, n_heads)``."""
        actions = _numeric("actions", actions)
        if actions.ndim == 0:
            actions = actions[None]
        if actions.shape != (X.shape[0],) or actions.dtype.kind not in "iu":
            raise ValueError(f"actions must be {X.shape[0]} integers, got {actions!r}")
        if ((actions < 0) | (actions >= self.n_actions)).any():
            raise ValueError(f"actions must lie in [0, {self.n_actions}), got {actions}")
        columns = []
        for name, t in targets.items():
            t = _numeric(name, t)
            if t.shape not in ((), (X.shape[0],)):
                raise ValueError(f"{name} must be one number or {X.shape[0]} (one per row), got shape {t.shape}")
            t = np.broadcast_to(t.astype(np.float64), (X.shape[0],))
            _check_values(name, t)
            if name in self._NON_NEGATIVE and (t < 0).any():
                i = int(np.flatnonzero(t < 0)[0])
                raise _negative_cost(name, float(t[i]), f" at index {i}" if np.ndim(targets[name]) else "")
            columns.append(t)
        return actions, np.column_stack(columns)

    # ------------------------------------------------------------------------------------------------ learning

    def _partial_fit(self, X, actions, Y):
        """Woodbury update per touched action (rank ``m`` = rows of that action); exact for any batch order. When
        ``S = I + X_a A^{-1} X_a^T`` is singular in floating point (nearly collinear rows at a large scale, e.g.
        ``x`` and ``-x`` with ``x·x / λ`` past 1e16) the rows go in one Sherman-Morrison update at a time, whose
        denominators stay >= 1."""
        for a in np.unique(actions):
            rows = actions == a
            Xa, Ya = X[rows], Y[rows]
            Ai = self.A_inv_[a]
            U = Ai @ Xa.T                                           # (d, m)
            try:
                W = U @ np.linalg.solve(np.eye(Xa.shape[0]) + Xa @ U, U.T) if Xa.shape[0] > 1 else None
            except np.linalg.LinAlgError:
                W = None
            if W is None:
                for x in Xa:
                    u = Ai @ x
                    Ai -= np.multiply.outer(u, u / (1.0 + x @ u))
            else:
                Ai -= W
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
        """``x`` as the float64 row the fast path works on (intercept appended); type- and shape-checked here,
        finiteness and magnitude in the kernels (:func:`_input_code`)."""
        if not (isinstance(x, np.ndarray) and x.dtype.kind in "biuf"):
            x = _numeric("x", x)
        if x.shape != (self._d_in,):
            raise ValueError(f"x must have shape ({self._d_in},), got {x.shape}")
        buf = self._xbuf
        buf[:self._d_in] = x
        return buf

    @staticmethod
    def _refuse(code, where, x, targets=None):
        """The ``ValueError`` of a kernel's input code, naming the argument (``x`` or a target's name)."""
        if code in (_X_NOT_FINITE, _X_TOO_LARGE):
            name, value = f"x[{where}]", x[where]
        else:
            name, value = list(targets.items())[where]
        if code in (_X_NOT_FINITE, _TARGET_NOT_FINITE):
            return ValueError(f"{name} must be finite, got {value}")
        return ValueError(f"{name} is too large: at most {MAX_MAGNITUDE:g} in absolute value, got {value:g}")

    def _sm_update(self, x, a, targets: dict):
        """Sherman-Morrison update of action ``a`` with one row ``x`` and its head targets ``{name: value}`` (a
        numba kernel)."""
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, numbers.Integral) or not 0 <= a < self.n_actions:
            raise ValueError(f"action must be an int in [0, {self.n_actions}), got {a!r}")
        for name, v in targets.items():
            if type(v) is not float:
                v = _numeric(name, v)
                if v.ndim:
                    raise ValueError(f"{name} must be one number, got shape {v.shape}")
                targets[name] = float(v)
        for name in self._NON_NEGATIVE:
            if -math.inf < targets[name] < 0:  # -inf is refused as not finite, by the kernel
                raise _negative_cost(name, targets[name])
        code, where = _sherman_morrison_kernel(self.A_inv_, self.b_, self.theta_, self._score_theta, self._w, int(a),
                                               x, tuple(targets.values()), MAX_MAGNITUDE)
        if code:
            raise self._refuse(code, where, x, targets)
        self.n_updates_[a] += 1

    def select(self, x) -> int:
        """Choose the action for one observation ``x (d,)`` (fast path of the online loop, same rule as
        :meth:`predict`); records the chosen action's UCB bonus in ``last_bonus_``."""
        if not hasattr(self, "A_inv_"):
            self._check_X(x, name="x")
        x = self._fast_x(x)
        a, bonus = _select_kernel(self.A_inv_, self._score_theta, x, self._alpha_now(), MAX_MAGNITUDE)
        if a < 0:
            raise self._refuse(-a, int(bonus), x)
        self.last_bonus_ = bonus
        return a

    def _reset(self):
        for name in ("A_inv_", "b_", "theta_", "n_updates_", "n_features_in_", "last_bonus_"):
            self.__dict__.pop(name, None)

    def _fit_anew(self, X, *targets):
        """``partial_fit`` on a forgotten state; data that are refused leave the bandit as it was (its state
        included)."""
        saved = dict(self.__dict__)
        self._reset()
        try:
            if hasattr(X, "__len__") and len(X) == 0:
                raise ValueError("X has no rows: fit needs at least one observation")
            return self.partial_fit(X, *targets)
        except Exception:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise

    STRUCTURAL_PARAMS = ("n_actions", "l2_lambda", "fit_intercept")
    """Parameters the learned state is built from (its shapes, ``A`` 's prior)."""

    def set_params(self, **params):
        """scikit-learn's ``set_params``. On a bandit with no state yet the values are stored and checked at first
        use, as the constructor's are (so related parameters, e.g. ``n_actions`` and HybridLinUCB's
        ``action_features``, may be set in separate calls). On a fitted bandit they are checked now (a refused one
        changes nothing) and the bandit stays consistent: a new ``n_actions``, ``l2_lambda`` or ``fit_intercept``
        (or HybridLinUCB's ``action_features`` / ``own_l2_lambda``) discards the learned state, as ``fit`` would; a
        new ``cost_weight`` is used by every later choice (``select`` and ``update`` keep the combined scores it
        weights)."""
        if not hasattr(self, "A_inv_"):
            return super().set_params(**params)
        structural = any(k in self.STRUCTURAL_PARAMS for k in params)
        before = self.get_params(deep=False)
        super().set_params(**params)
        try:
            self._validate_params()
        except ValueError:
            super().set_params(**{k: before[k] for k in params})  # a refused value leaves the bandit as it was
            raise
        if structural:
            self._reset()
        elif hasattr(self, "A_inv_"):
            self._refresh_selection()
        return self

    def _refresh_selection(self):
        """The head weights and the per-action combined estimates the fast path selects with, from the current
        parameters and ``theta_``."""
        self._w = self._head_weights()
        self._score_theta = np.einsum("h,khd->kd", self._w, self.theta_)

    # --------------------------------------------------------------------------------------------- estimates

    def _bonus(self, X):
        """``α sqrt(x^T A_a^{-1} x)`` of checked rows. The quadratic form of the positive definite ``A_a^{-1}`` is
        never negative, but rounding makes it so for rows the bandit has seen at a large scale (an error of about
        ``|x|² × 1e-16``); it is taken as 0, as scikit-learn's Gaussian processes do with negative variances."""
        return self._alpha_now() * np.sqrt(np.maximum(np.einsum("nd,kde,ne->nk", X, self.A_inv_, X), 0.0))

    def _alpha_now(self) -> float:
        """The exploration scale of the next choice."""
        return float(self.alpha)

    def ucb_bonus(self, X) -> np.ndarray:
        """``α sqrt(x^T A_a^{-1} x)`` per observation and action, ``(n, n_actions)``."""
        X = self._check_X(X)
        return self._bonus(X)

    def ridge_estimates(self) -> np.ndarray:
        """``θ`` as ``(n_actions, n_heads, d)`` (``d`` includes the intercept last when ``fit_intercept``)."""
        if not hasattr(self, "theta_"):
            raise ValueError("the bandit has no state yet: call fit, partial_fit or select first")
        return self.theta_.copy()

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        """Policy protocol: the selected action for one observation ``(d,)`` (a NumPy int64) or a batch
        ``(n, d)`` (an ``(n,)`` array). Selection is deterministic (ties to the lowest index); nothing is learned.
        A bandit without data may select (the online loop starts so): its first observation sets the feature count
        and the ridge prior, as a first ``partial_fit`` would."""
        single = np.ndim(observation) == 1
        actions = self._scores(self._check_X(observation, name="observation")).argmax(axis=1)
        return (actions[0] if single else actions), state


class LinUCB(_LinUCBBase):
    """LIMBO's two-head LinUCB: per action, ridge heads for correctness and for normalised cost.

    Parameters (keyword-only, validated on first use):

    - ``n_actions``: number of arms (12 for ``ReplayStream-v0``).
    - ``alpha``: exploration scale of the correctness UCB (>= 0).
    - ``l2_lambda``: ridge regularisation λ (> 0); ``A_a`` starts at ``λ I``.
    - ``cost_weight``: ``w`` in ``score = UCB(correct) − w · predicted cost`` (>= 0; the environment's 0.5).
    - ``fit_intercept``: append a constant 1 to every observation.
    - ``alpha_decay``: ``None`` (constant ``alpha``) or ``τ > 0``: after ``n`` observations (all actions together)
      the bonus is scaled by ``α · τ / (τ + n)``.

    The observed ``cost`` given to :meth:`fit`, :meth:`partial_fit` and :meth:`update` must be >= 0 (and finite):
    the environment's normalised cost, in [0, 1]; a negative one raises ``ValueError`` naming ``cost``.

    Learned attributes: ``A_inv_`` (n_actions, d, d), ``b_`` and ``theta_`` (n_actions, 2, d) with head 0 =
    correctness and head 1 = cost, ``n_updates_`` (n_actions,), ``n_features_in_``, ``last_bonus_`` (UCB bonus
    of the action chosen by the last :meth:`select`).
    """

    _n_heads = 2
    _NON_NEGATIVE = ("cost",)

    def __init__(self, *, n_actions=12, alpha=0.5, l2_lambda=1.0, cost_weight=0.5, fit_intercept=True,
                 alpha_decay=None):
        self.n_actions = n_actions
        self.alpha = alpha
        self.l2_lambda = l2_lambda
        self.cost_weight = cost_weight
        self.fit_intercept = fit_intercept
        self.alpha_decay = alpha_decay

    def _validate_params(self):
        super()._validate_params()
        _check_number("cost_weight", self.cost_weight, low=0.0)
        if self.alpha_decay is not None:
            _check_number("alpha_decay", self.alpha_decay, low=0.0, low_inclusive=False)

    def _alpha_now(self) -> float:
        if self.alpha_decay is None:
            return float(self.alpha)
        tau = float(self.alpha_decay)
        return float(self.alpha) * tau / (tau + float(self.n_updates_.sum()))

    def fit(self, X, actions, correct, cost):
        """Forget everything, then learn from rows ``X (n, d)`` with the actions taken and their observed
        correctness and cost (at least one row; refused data leave the bandit as it was)."""
        return self._fit_anew(X, actions, correct, cost)

    def partial_fit(self, X, actions, correct, cost):
        """Add observations (batched: one Woodbury update per touched action)."""
        X = self._check_X(X)
        actions, Y = self._check_targets(X, actions, {"correct": correct, "cost": cost})
        return self._partial_fit(X, actions, Y)

    def decision_function(self, X) -> np.ndarray:
        """Selection scores ``(n, n_actions)``: correctness UCB minus ``w`` × predicted cost."""
        return self._scores(self._check_X(X))

    def _scores(self, X):
        m = np.einsum("nd,khd->nkh", X, self.theta_)
        bonus = self._bonus(X)
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
            self._check_X(x, name="x")
        self._sm_update(self._fast_x(x), action, {"correct": correct, "cost": cost})


class HybridLinUCB(LinUCB):
    """LIMBO's two heads (correctness, normalised cost) on Li et al. (2010)'s hybrid model: per head, one ridge over
    the joint row ``φ(x, a) = (f_a ⊗ x, 0, …, x, …, 0)`` (shared part ``z = f_a ⊗ x``, then ``x`` in action ``a``'s
    own block), regularised by ``λ`` on the shared ``β`` and ``λ_own`` on each ``θ_a`` (Li et al. use one ``λ``;
    a larger ``λ_own`` shrinks every action further towards what it shares with the others); selects
    ``argmax_a φ·θ^c + α_n sqrt(φ^T A^{-1} φ) − w φ·θ^k``.

    Parameters: those of :class:`LinUCB`, ``action_features`` (``(n_actions, m)`` numbers, required): the
    features ``f_a`` every action shares with the others (``x`` includes the intercept when ``fit_intercept``, so
    ``z`` holds each feature's main effect), and ``own_l2_lambda``: ``λ_own`` (None: ``l2_lambda``).

    Learned attributes: ``A_inv_`` (D, D) with ``D = (m + n_actions) · d``, ``b_`` and ``theta_`` (2, D) (head 0
    = correctness, head 1 = cost; the first ``m · d`` entries are the shared ``β``, then ``θ_a`` per action),
    ``n_updates_``, ``n_features_in_``, ``last_bonus_``.
    """

    def __init__(self, *, action_features=None, n_actions=12, alpha=0.5, l2_lambda=1.0, own_l2_lambda=None,
                 cost_weight=0.5, fit_intercept=True, alpha_decay=None):
        super().__init__(n_actions=n_actions, alpha=alpha, l2_lambda=l2_lambda, cost_weight=cost_weight,
                         fit_intercept=fit_intercept, alpha_decay=alpha_decay)
        self.action_features = action_features
        self.own_l2_lambda = own_l2_lambda

    STRUCTURAL_PARAMS = (*LinUCB.STRUCTURAL_PARAMS, "action_features", "own_l2_lambda")

    def _own_lambda(self) -> float:
        return float(self.l2_lambda if self.own_l2_lambda is None else self.own_l2_lambda)

    def _refresh_selection(self):
        self._w = self._head_weights()  # the joint model combines its heads when it selects

    def _validate_params(self):
        super()._validate_params()
        if self.own_l2_lambda is not None:
            _check_number("own_l2_lambda", self.own_l2_lambda, low=1.0 / MAX_MAGNITUDE)
        if self.action_features is None:
            raise ValueError("action_features is required: (n_actions, m) features each action shares")
        f = _numeric("action_features", self.action_features)
        if f.ndim != 2 or f.shape[0] != self.n_actions or f.shape[1] == 0:
            raise ValueError(f"action_features must have shape ({self.n_actions}, m) with m >= 1, got {f.shape}")
        _check_values("action_features", f)

    def _initialize(self, n_features: int):
        super()._initialize(n_features)  # the checks, counters and head weights; the joint arrays replace its own
        self._f = np.array(self.action_features, dtype=np.float64)  # a copy: the caller's array may change later
        d = n_features + bool(self.fit_intercept)
        self._d, self._shared = d, self._f.shape[1] * d
        D = self._shared + self.n_actions * d
        self.A_inv_ = np.diag(np.r_[np.full(self._shared, 1.0 / float(self.l2_lambda)),
                                    np.full(D - self._shared, 1.0 / self._own_lambda())])
        self.b_ = np.zeros((self._n_heads, D))
        self.theta_ = np.zeros((self._n_heads, D))

    def _rows(self, x):
        """Joint rows ``φ(x, a)`` of every action, ``(n_actions, D)``, for one checked row ``x (d,)``."""
        K, d = self.n_actions, self._d
        phi = np.zeros((K, self._shared + K * d))
        phi[:, :self._shared] = (self._f[:, :, None] * x[None, None, :]).reshape(K, -1)
        own = phi[:, self._shared:].reshape(K, K, d)
        own[np.arange(K), np.arange(K)] = x
        return phi

    def _add(self, phi, targets):
        u = self.A_inv_ @ phi
        self.A_inv_ -= np.multiply.outer(u, u / (1.0 + phi @ u))
        self.b_ += np.multiply.outer(targets, phi)

    def _partial_fit(self, X, actions, Y):
        for x, a, y in zip(X, actions, Y):
            self._add(self._rows(x)[a], y)
            self.n_updates_[a] += 1
        self.theta_ = self.b_ @ self.A_inv_
        return self

    def _all_rows(self, X):
        if len(X) == 0:
            return np.zeros((0, self.n_actions, self.A_inv_.shape[0]))
        return np.stack([self._rows(x) for x in X])                    # (n, K, D)

    def _row_bonus(self, P):
        """``α_n sqrt(φ^T A^{-1} φ)`` of joint rows ``P (..., D)``."""
        return self._alpha_now() * np.sqrt(np.maximum(np.einsum("...E,...E->...", P @ self.A_inv_, P), 0.0))

    def _bonus(self, X):
        return self._row_bonus(self._all_rows(X))

    def _scores(self, X):
        P = self._all_rows(X)
        return P @ (self._w @ self.theta_) + self._row_bonus(P)

    def predict_heads(self, X) -> np.ndarray:
        """Ridge estimates of correctness and cost, ``(n, n_actions, 2)``."""
        return self._all_rows(self._check_X(X)) @ self.theta_.T

    def ridge_estimates(self) -> np.ndarray:
        """The joint ``θ`` as ``(2, D)``: shared ``β`` (``m · d``, feature-major), then each action's ``θ_a``."""
        return super().ridge_estimates()

    def _one_row(self, x):
        if np.ndim(x) != 1:
            raise ValueError(f"x must be one observation of shape (d,), got shape {np.shape(x)}")
        return self._check_X(x, name="x")

    def select(self, x) -> int:
        phi = self._rows(self._one_row(x)[0])
        bonus = self._row_bonus(phi)
        a = int(np.argmax(phi @ (self._w @ self.theta_) + bonus))
        self.last_bonus_ = float(bonus[a])
        return a

    def update(self, x, action, correct, cost):
        """Add one observation (Sherman–Morrison on the joint inverse)."""
        X = self._one_row(x)
        actions, Y = self._check_targets(X, action, {"correct": correct, "cost": cost})
        self._partial_fit(X, actions, Y)


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
        """Forget everything, then learn from rows ``X (n, d)`` with the actions taken and their rewards (at least
        one row; refused data leave the bandit as it was)."""
        return self._fit_anew(X, actions, rewards)

    def partial_fit(self, X, actions, rewards):
        X = self._check_X(X)
        actions, Y = self._check_targets(X, actions, {"rewards": rewards})
        return self._partial_fit(X, actions, Y)

    def decision_function(self, X) -> np.ndarray:
        return self._scores(self._check_X(X))

    def _scores(self, X):
        m = np.einsum("nd,kd->nk", X, self.theta_[:, 0])
        return m + self._bonus(X)

    def update(self, x, action, reward):
        """Add one observation (Sherman–Morrison); the fast path of :meth:`partial_fit`."""
        if not hasattr(self, "A_inv_"):
            self._check_X(x, name="x")
        self._sm_update(self._fast_x(x), action, {"reward": reward})


__all__ = ["HybridLinUCB", "LinUCB", "SingleHeadLinUCB"]

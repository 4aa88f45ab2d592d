"""Distilled gates of BudgetPM (§3.4, appendix A.2): per-resource scorers plus thresholds, run in the environment
with ``action_mode="scores"``.

- :class:`StaticGate` — standardised, class-balanced logistic regression (C = 1, lbfgs) on the 27 resource
  features; thresholds by target-count calibration on grouped out-of-fold scores (5 folds of whole weeks):
  per budget, the threshold at which the mean number of rows per week scoring at least it equals the budget's
  query count. Budgets below B20 reuse the B20 threshold. ``label="due"`` gives the Matched-Due control.
- :class:`TemporalGate` — the same model on the 27 + 9 features (the teacher's own budget features), trained on
  one budget's Myopic or Sequential labels; the threshold from 0.05 ... 0.95 (step 0.025) maximising mean
  complete-week out-of-fold Set F1 in the environment, ties to lower realized cost, then the higher threshold.
- :class:`BoostedGate` — a higher-capacity scorer (scikit-learn gradient boosting) on Outcome labels with the
  Static calibration, to test whether capacity matters.

Gates save to ``.npz`` files of plain arrays (scaler, coefficients or tree arrays, thresholds, config as JSON);
``load`` never unpickles, so a downloaded gate cannot run code.
"""

from __future__ import annotations

import copy

import numba
import numpy as np

from membudget.baselines.thresholds import (STATIC_BUDGETS, ThresholdGate, levels_of, target_count_threshold,
                                           world_from_meta)
from membudget.envs.validation import check_int, check_number

THRESHOLD_GRID = np.round(np.arange(0.05, 0.95 + 1e-9, 0.025), 3)


MAX_TREE_DEPTH = 32
"""Deepest tree a :class:`BoostedGate` fits or loads (its ``score`` walks at most this many levels)."""


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def week_folds(weeks: np.ndarray, n_folds: int = 5, labels: np.ndarray | None = None):
    """Whole-week folds: ``[(train_mask, test_mask), ...]`` with weeks assigned round-robin in sorted order. With
    ``labels`` (one per row), a fold whose training weeks hold a single class is refused, naming its weeks."""
    uniq = np.unique(weeks)
    if uniq.size < n_folds:
        raise ValueError(f"need at least {n_folds} weeks for {n_folds} folds, got {uniq.size}")
    fold_of = {w: i % n_folds for i, w in enumerate(uniq)}
    f = np.array([fold_of[w] for w in weeks])
    folds = [(f != k, f == k) for k in range(n_folds)]
    for k, (train, test) in enumerate(folds if labels is not None else ()):
        classes = np.unique(labels[train])
        if classes.size < 2:
            raise ValueError(f"fold {k} (held-out weeks {np.unique(weeks[test]).tolist()}) trains on rows whose "
                             f"labels are all {classes.tolist()}: every fold's training weeks need both classes "
                             f"(spread the positive rows over more weeks, or use fewer folds)")
    return folds


class _Logistic:
    """Standardised class-balanced logistic regression stored as plain arrays."""

    @staticmethod
    def fit(X, y, *, C, max_iter, tol, sample_weight=None):
        from sklearn.linear_model import LogisticRegression

        with np.errstate(over="ignore"):
            mean = X.mean(axis=0)
            scale = X.std(axis=0)
        if not (np.isfinite(mean).all() and np.isfinite(scale).all()):
            raise ValueError("the features' mean or standard deviation overflows (features around 1e154 or larger); "
                             "rescale the features")
        scale[scale == 0] = 1.0
        model = LogisticRegression(C=C, solver="lbfgs", class_weight="balanced", max_iter=max_iter, tol=tol)
        model.fit((X - mean) / scale, y, sample_weight=sample_weight)
        return mean, scale, model.coef_[0].copy(), float(model.intercept_[0])

    @staticmethod
    def score(X, mean, scale, coef, intercept):
        return _sigmoid(((X - mean) / scale) @ coef + intercept)


class StaticGate(ThresholdGate):
    """Outcome gate (``label="outcome"``) or the Matched-Due control (``label="due"``)."""

    uses_budget_features = False

    def __init__(self, *, label="outcome", budget="B20", C=1.0, max_iter=5000, tol=1e-4, n_folds=5,
                 calibration_budgets=STATIC_BUDGETS):
        self.label = label
        self.budget = budget
        self.C = C
        self.max_iter = max_iter
        self.tol = tol
        self.n_folds = n_folds
        self.calibration_budgets = calibration_budgets

    def validate_params(self):
        super().validate_params()
        self._validate_labels()
        check_int("n_folds", self.n_folds, 2)
        self._validate_scorer()

    def _validate_labels(self):
        if self.label not in ("outcome", "due"):
            raise ValueError(f"label must be 'outcome' or 'due', got {self.label!r}")

    def _validate_scorer(self):
        check_number("C", self.C, 0, low_open=True)
        check_int("max_iter", self.max_iter, 1)
        check_number("tol", self.tol, 0, low_open=True)

    def _fit_scorer(self, X, y) -> dict:
        """The scorer fitted on ``X, y``, as :meth:`fitted_arrays` gives it (nothing of ``self`` changes)."""
        mean, scale, coef, intercept = _Logistic.fit(X, y, C=self.C, max_iter=self.max_iter, tol=self.tol)
        return {"mean": mean, "scale": scale, "coef": coef, "intercept": np.array(intercept),
                "n_features": np.array(X.shape[1])}

    @staticmethod
    def _score_arrays(z: dict, X):
        return _Logistic.score(X, z["mean"], z["scale"], z["coef"], float(z["intercept"]))

    def score(self, X):
        """Positive-label score in (0, 1) of each feature row (:attr:`n_features` features)."""
        self._check_fitted("coef_")
        return self._score_arrays(self.fitted_arrays(), self.check_rows(X))

    def fit(self, dataset, levels: dict | None = None):
        """Fit on ``dataset`` (a :class:`~membudget.teachers.LabelDataset`); ``levels`` maps budget names to query
        counts (default: the budget levels of the dataset's world and cost profile). The fitted attributes are
        set together at the end: a fit that fails leaves the gate as it was."""
        self.validate_params()
        self.check_fit_data(dataset, levels)
        levels = levels or levels_of(dataset)
        self._check_calibration(levels)
        X, y, weeks = self.check_rows(dataset.features, fitting=True), getattr(dataset, self.label), dataset.week
        self.check_training_rows(X, y, self.label)
        oof = np.zeros(len(y))
        for train, test in week_folds(weeks, self.n_folds, y):
            oof[test] = self._score_arrays(self._fit_scorer(X[train], y[train]), X[test])
        thresholds = {name: target_count_threshold(oof, weeks, levels[name]) for name in self.calibration_budgets}
        self.set_fitted_arrays(self._fit_scorer(X, y))
        self.oof_scores_, self.thresholds_ = oof, thresholds
        return self

    def fitted_arrays(self):
        return {"mean": self.mean_, "scale": self.scale_, "coef": self.coef_, "intercept": np.array(self.intercept_),
                "n_features": np.array(self.n_features)}

    def set_fitted_arrays(self, z):
        self.mean_, self.scale_, self.coef_, self.intercept_ = z["mean"], z["scale"], z["coef"], float(z["intercept"])
        self._set_width(z)

    def check_fitted_arrays(self):
        for name in ("mean", "scale", "coef"):
            a = getattr(self, name + "_")
            if a.shape != (self.n_features,) or a.dtype.kind != "f":
                raise ValueError(f"array {name!r} must be {self.n_features} floats (one per feature), got "
                                 f"{a.dtype} {a.shape}")
        if np.any(self.scale_ <= 0):
            raise ValueError("array 'scale' must be positive")


@numba.njit(cache=True)
def _boosted_raw(X, left, right, feature, threshold, value, init, learning_rate, max_depth):
    """The raw boosting score of every row of ``X``: each tree walked from its root (at most ``max_depth`` splits)
    and the leaf values added tree after tree, in the order of the trees (a numba kernel; the walk per step in numpy
    was most of an evaluation's time)."""
    raw = np.full(X.shape[0], init)
    for i in range(left.shape[0]):
        for r in range(X.shape[0]):
            node = 0
            for _ in range(max_depth + 1):
                if left[i, node] == -1:
                    break
                node = left[i, node] if X[r, feature[i, node]] <= threshold[i, node] else right[i, node]
            raw[r] += learning_rate * value[i, node]
    return raw


class BoostedGate(StaticGate):
    """Gradient-boosted trees (scikit-learn ``GradientBoostingClassifier``) on Outcome labels, with the Static
    calibration; the trees are stored as plain arrays and evaluated without scikit-learn at prediction time."""

    def __init__(self, *, label="outcome", budget="B20", n_estimators=100, max_depth=3, learning_rate=0.1,
                 random_state=0, n_folds=5, calibration_budgets=STATIC_BUDGETS):
        self.label = label
        self.budget = budget
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.random_state = random_state
        self.n_folds = n_folds
        self.calibration_budgets = calibration_budgets

    def _validate_scorer(self):
        check_int("n_estimators", self.n_estimators, 1)
        check_int("max_depth", self.max_depth, 1, MAX_TREE_DEPTH)
        check_number("learning_rate", self.learning_rate, 0, low_open=True)
        check_int("random_state", self.random_state, 0, none_ok=True)

    def _fit_scorer(self, X, y):
        from sklearn.ensemble import GradientBoostingClassifier

        m = GradientBoostingClassifier(n_estimators=self.n_estimators, max_depth=self.max_depth,
                                       learning_rate=self.learning_rate, random_state=self.random_state)
        m.fit(X, y)
        trees = [est[0].tree_ for est in m.estimators_]
        size = max(t.node_count for t in trees)

        def pad(attr, fill):
            out = np.full((len(trees), size), fill, dtype=np.float64 if attr in ("threshold", "value") else np.int64)
            for i, t in enumerate(trees):
                v = getattr(t, attr)
                out[i, : t.node_count] = v[:, 0, 0] if attr == "value" else v
            return out

        prior = m.init_.class_prior_[1] if hasattr(m.init_, "class_prior_") else y.mean()
        return {"left": pad("children_left", -1), "right": pad("children_right", -1), "feature": pad("feature", -2),
                "threshold": pad("threshold", 0.0), "value": pad("value", 0.0),
                "init": np.array(float(np.log(prior / (1 - prior)))), "n_features": np.array(X.shape[1])}

    def _score_arrays(self, z: dict, X):
        X = X.astype(np.float32).astype(np.float64)  # the trees split float32 features
        return _sigmoid(_boosted_raw(X, z["left"], z["right"], z["feature"], z["threshold"], z["value"],
                                     float(z["init"]), self.learning_rate, self.max_depth))

    def score(self, X):
        """Positive-label score in (0, 1) of each feature row (:attr:`n_features` features)."""
        self._check_fitted("left_")
        return self._score_arrays(self.fitted_arrays(), self.check_rows(X))

    def fitted_arrays(self):
        return {"left": self.left_, "right": self.right_, "feature": self.feature_, "threshold": self.threshold_,
                "value": self.value_, "init": np.array(self.init_), "n_features": np.array(self.n_features)}

    def set_fitted_arrays(self, z):
        self.left_, self.right_, self.feature_ = z["left"], z["right"], z["feature"]
        self.threshold_, self.value_, self.init_ = z["threshold"], z["value"], float(z["init"])
        self._set_width(z)

    def check_fitted_arrays(self):
        """Trees as scikit-learn stores them: every child after its parent (so no path loops), both children or
        none, split features in range, and no leaf deeper than ``max_depth`` (which bounds :meth:`score`)."""
        shape = self.left_.shape
        if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
            raise ValueError(f"array 'left' must have shape (n_trees, n_nodes), got {shape}")
        for name, kinds in (("left", "iu"), ("right", "iu"), ("feature", "iu"), ("threshold", "f"), ("value", "f")):
            a = getattr(self, name + "_")
            if a.shape != shape or a.dtype.kind not in kinds:
                raise ValueError(f"array {name!r} must be {'integers' if kinds == 'iu' else 'floats'} of the trees' "
                                 f"shape {shape}, got {a.dtype} {a.shape}")
        node = np.arange(shape[1])
        leaf = self.left_ == -1
        if np.any(leaf != (self.right_ == -1)):
            raise ValueError("arrays 'left'/'right': a node has exactly one child")
        inner = ~leaf
        for name in ("left", "right"):
            child = getattr(self, name + "_")
            if np.any(inner & ((child <= node) | (child >= shape[1]))):
                raise ValueError(f"array {name!r}: a child must come after its parent and inside the tree")
        if np.any(inner & ((self.feature_ < 0) | (self.feature_ >= self.n_features))):
            raise ValueError(f"array 'feature': split features must lie in 0..{self.n_features - 1}")
        tree, child = np.nonzero(inner)
        children = np.concatenate([tree * shape[1] + self.left_[tree, child], tree * shape[1] + self.right_[tree, child]])
        if np.unique(children).size != children.size:
            raise ValueError("arrays 'left'/'right': a node has two parents")
        frontier = np.arange(shape[0]) * shape[1]  # the roots, as flat (tree, node) indices
        for depth in range(self.max_depth + 1):
            frontier = frontier[inner.ravel()[frontier]]
            if frontier.size == 0:
                break
            root = frontier // shape[1] * shape[1]
            frontier = np.concatenate([root + self.left_.ravel()[frontier], root + self.right_.ravel()[frontier]])
        else:
            raise ValueError(f"trees are deeper than max_depth={self.max_depth}")



class TemporalGate(StaticGate):
    """Myopic (``teacher="myopic"``) or Sequential (``teacher="sequential"``) gate for one budget level."""

    uses_budget_features = True
    quality = "set_f1"
    """The end-of-episode metric the threshold selection maximises."""

    def __init__(self, *, teacher="sequential", budget="B10", per_step_cap=2, C=1.0, max_iter=4000, tol=1e-4,
                 n_folds=5, grid=tuple(THRESHOLD_GRID.tolist())):
        self.teacher = teacher
        self.budget = budget
        self.per_step_cap = per_step_cap
        self.C = C
        self.max_iter = max_iter
        self.tol = tol
        self.n_folds = n_folds
        self.grid = grid

    def _validate_labels(self):
        if self.teacher not in ("myopic", "sequential"):
            raise ValueError(f"teacher must be 'myopic' or 'sequential', got {self.teacher!r}")
        check_int("per_step_cap", self.per_step_cap, 1, none_ok=True)
        if not isinstance(self.grid, (tuple, list)) or not self.grid:
            raise ValueError(f"grid must be a non-empty list of thresholds, got {self.grid!r}")
        for i, g in enumerate(self.grid):
            check_number(f"grid[{i}]", g, 0, 1)

    def fit(self, dataset, levels: dict | None = None):
        """Fit on ``dataset``'s rows with this gate's teacher labels at ``budget``; select the threshold by
        out-of-fold complete-week Set F1 in the environment. ``levels`` (checked, not used) keeps the gates' common
        ``fit(dataset, levels)``: this gate fits its one ``budget``."""
        self.validate_params()
        self.check_fit_data(dataset, levels)
        j = dataset.budget_index(self.budget)
        y = getattr(dataset, self.teacher)[j]
        X = np.concatenate([dataset.features, getattr(dataset, f"budget_features_{self.teacher}")[j]],
                           axis=1).astype(np.float64)
        X = self.check_rows(X, fitting=True)
        self.check_training_rows(X, y, f"{self.teacher} at {self.budget}")
        weeks = dataset.week
        f1 = np.zeros((len(self.grid), np.unique(weeks).size))
        cost = np.zeros_like(f1)
        col = 0
        for train, test in week_folds(weeks, self.n_folds, y):
            fold = copy.copy(self)  # the fold's scorer plays the test weeks; this gate changes only at the end
            fold.set_fitted_arrays(self._fit_scorer(X[train], y[train]))
            fold.thresholds_ = {}
            test_weeks = np.unique(weeks[test])
            for g, thr in enumerate(self.grid):
                res = fold.rollout_at(dataset, test_weeks, thr)
                f1[g, col: col + test_weeks.size] = res[self.quality]
                cost[g, col: col + test_weeks.size] = res["realized_cost"]
            col += test_weeks.size
        mean_f1, mean_cost = f1.mean(axis=1), cost.mean(axis=1)
        order = sorted(range(len(self.grid)), key=lambda g: (-round(mean_f1[g], 12), mean_cost[g], -self.grid[g]))
        self.set_fitted_arrays(self._fit_scorer(X, y))
        self.oof_set_f1_, self.thresholds_ = mean_f1, {self.budget: float(self.grid[order[0]])}
        return self

    def rollout_at(self, dataset, weeks, threshold) -> dict:
        """``dataset``'s ``weeks`` played by this gate at ``threshold``: the rollout's metrics, from which :meth:`fit`
        selects the threshold (a gate for another environment overrides it)."""
        from membudget.envs.pm import WorldConfig
        from membudget.envs.pm.rollout import rollout

        meta = dataset.meta
        world = world_from_meta(meta)
        policy = _FixedThreshold(self, threshold)
        return rollout(policy, [int(w) for w in weeks], budget=self.budget, per_step_cap=self.per_step_cap,
                       cost_profile=meta["cost_profile"], late_policy=meta["late_policy"], load=meta["load"],
                       world=world if world != WorldConfig() else None, action_mode="scores")


class _FixedThreshold:
    def __init__(self, gate, threshold):
        self.gate, self.threshold = gate, threshold

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        return self.gate.action_for(observation, self.threshold), state

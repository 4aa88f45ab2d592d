"""Threshold calibration for per-resource scorers on ``PMWeek-v0`` (BudgetPM §3.4, eq. 4): no learning, only
thresholds. :class:`ThresholdGate` is the policy shared by every thresholded scorer — hand-written ones here
(:class:`~membudget.baselines.schedules.RelevanceGate`) and the learned gates of :mod:`membudget.agents.gates`.

Gates save to ``.npz`` files of plain arrays (fitted arrays, thresholds, config as JSON); ``load`` never unpickles,
so a downloaded gate cannot run code.
"""

from __future__ import annotations

import inspect
import json
import os
import re

import numpy as np

from membudget.envs.pm import BUDGET_FEATURE_NAMES, RESOURCE_FEATURE_NAMES, WorldConfig, budget_levels
from membudget.envs.validation import (check_int, check_known, check_number, constructor_repr,
                                       observation_entry, read_npz, reading_artefact)


_LEVEL = re.compile(r"B[1-9][0-9]*")

STATIC_BUDGETS = ("B20", "B40", "B60", "B80")
"""Budget levels the Static calibration fits thresholds for; lower levels reuse the lowest one's."""


def target_count_threshold(scores: np.ndarray, weeks: np.ndarray, target: float) -> float:
    """The largest threshold whose mean count of rows per week with ``score >= threshold`` reaches ``target``
    (BudgetPM eq. 4); the lowest score if even every row falls short."""
    n_weeks = np.unique(weeks).size
    s = np.sort(scores)[::-1]
    k = int(np.ceil(target * n_weeks))
    if k <= 0:
        return float(s[0]) + 1e-12
    return float(s[min(k, s.size) - 1])


def check_level(name: str, value) -> str:
    """``value`` when it is a budget level name (``"B20"``); otherwise ``ValueError`` naming ``name``."""
    if not isinstance(value, str) or not _LEVEL.fullmatch(value):
        raise ValueError(f"{name} must be a budget level name such as 'B20', got {value!r}")
    return value


def check_budget(name: str, value):
    """``value`` when it is a budget level name or a positive int (a budget in cost units)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
        return value
    if not isinstance(value, str) or not _LEVEL.fullmatch(value):
        raise ValueError(f"{name} must be a budget level name such as 'B20' or a positive int, got {value!r}")
    return value


def check_levels(name: str, value) -> tuple:
    """A non-empty tuple or list of budget level names, as a tuple."""
    if not isinstance(value, (tuple, list)) or not value:
        raise ValueError(f"{name} must be a non-empty list of budget level names such as ('B20', 'B40'), got "
                         f"{value!r}")
    return tuple(check_level(f"{name}[{i}]", v) for i, v in enumerate(value))


def world_from_meta(meta):
    return WorldConfig(**meta["world"])


def levels_of(dataset):
    return budget_levels(world_from_meta(dataset.meta), dataset.meta["cost_profile"])


class ThresholdGate:
    """A per-resource scorer with calibrated thresholds, run in ``PMWeek-v0`` with ``action_mode="scores"``: score
    every resource, propose candidates scoring >= threshold (as their score; -1 elsewhere).

    Subclasses give ``score(X) -> (n,)`` over feature rows, ``fit`` (setting ``thresholds_``: budget name ->
    threshold), ``fitted_arrays`` / ``set_fitted_arrays`` (their fitted arrays, saved as plain ``.npz`` entries) and
    ``uses_budget_features`` (score the 27 resource features, or those plus the 9 budget features)."""

    uses_budget_features = False

    def _features(self, observation):
        res = np.asarray(observation_entry(observation, "resources"), dtype=np.float64)
        single = res.ndim == 2
        res = res[None] if single else res
        if self.uses_budget_features:
            bud = np.asarray(observation_entry(observation, "budget"), dtype=np.float64)
            bud = bud[None] if single else bud
            X = np.concatenate([res, np.repeat(bud[:, None, :], res.shape[1], axis=1)], axis=2)
        else:
            X = res
        return X, single

    def action_for(self, observation, threshold: float):
        self._check_fitted()
        X, single = self._features(observation)
        n, R, F = X.shape
        s = self.score(X.reshape(n * R, F)).reshape(n, R)
        mask = np.asarray(observation_entry(observation, "mask")).reshape(n, R).astype(bool)
        action = np.where(mask & (s >= threshold), np.maximum(s, 1e-6), -1.0).astype(np.float32)
        return action[0] if single else action

    @property
    def n_features(self) -> int:
        """Width of the feature rows :meth:`score` takes: the width the gate was fitted on (``n_features_in_``;
        ConversationPM's rows add its seven GoodAI features), else PMWeek's: the 27 resource features, plus the 9
        budget features for a gate that uses them."""
        fitted = getattr(self, "n_features_in_", None)
        if fitted is not None:
            return fitted
        return len(RESOURCE_FEATURE_NAMES) + (len(BUDGET_FEATURE_NAMES) if self.uses_budget_features else 0)

    def check_rows(self, X, *, fitting: bool = False) -> np.ndarray:
        """``X`` as float64 feature rows, checked: 2-D, finite, and :attr:`n_features` columns (when ``fitting``: at
        least the 27 resource features the gates read by position). A compiled scorer would read past a narrower
        row, and a NaN would be proposed or dropped silently; ``ValueError`` naming ``X`` otherwise (numbers only:
        strings are refused, not parsed)."""
        X = np.asarray(X)
        if not (np.issubdtype(X.dtype, np.number) or X.dtype == np.bool_):
            raise ValueError(f"X must hold numbers, got dtype {X.dtype}")
        X = X.astype(np.float64, copy=False)
        width = X.shape[1] if X.ndim == 2 else -1
        if not (width >= len(RESOURCE_FEATURE_NAMES) if fitting else width == self.n_features):
            expected = f"at least {len(RESOURCE_FEATURE_NAMES)}" if fitting else str(self.n_features)
            raise ValueError(f"X must be feature rows of {expected} features, shape (n, d), got shape {X.shape}")
        if not np.isfinite(X).all():
            raise ValueError("X holds a NaN or infinite feature")
        return X

    def _set_width(self, z) -> None:
        """``n_features_in_`` from fitted arrays (``"n_features"``; files saved before the gates recorded it are
        PMWeek gates, of the default width)."""
        self.__dict__.pop("n_features_in_", None)
        if "n_features" in z:
            self.n_features_in_ = check_int("array 'n_features'", int(np.asarray(z["n_features"])),
                                            len(RESOURCE_FEATURE_NAMES), 100_000)

    @staticmethod
    def check_fit_data(dataset, levels=None) -> None:
        """A fit's arguments: ``dataset`` a :class:`~membudget.teachers.LabelDataset` (``TypeError`` otherwise, not an
        ``AttributeError`` deep inside the fit) and ``levels`` None or a dict of budget level names to query counts
        (finite numbers >= 0)."""
        from membudget.teachers.labels import LabelDataset

        if not isinstance(dataset, LabelDataset):
            raise TypeError(f"dataset must be a LabelDataset (membudget.teachers.LabelDataset, from "
                            f"build_label_dataset or LabelDataset.load), got {type(dataset).__name__}")
        if levels is not None:
            if not isinstance(levels, dict):
                raise TypeError(f"levels must be a dict of budget level names to query counts or None, got "
                                f"{type(levels).__name__}")
            for name, count in levels.items():
                check_number(f"levels[{name!r}]", count, 0)

    @staticmethod
    def check_training_rows(X, y, name: str) -> None:
        """A fit's data: at least one row, and labels ``name`` of 0 and 1 only, both present; ``ValueError``
        otherwise."""
        if len(y) == 0:
            raise ValueError("the dataset has no rows")
        values = np.unique(y)
        if not np.isin(values, (0, 1)).all():
            raise ValueError(f"the {name!r} labels must be 0 or 1, got the values {values.tolist()}")
        if values.size == 1:
            raise ValueError(f"the {name!r} labels of this dataset have a single class")

    def check_fitted_arrays(self):
        """Structural checks of loaded arrays (shapes, indices), beyond finiteness; ``ValueError`` naming one."""

    def validate_params(self):
        """The constructor arguments' types and ranges (scikit-learn's rule: checked in ``fit``, and by ``load``
        before anything else is read); ``ValueError`` naming the argument. Subclasses extend it."""
        check_budget("budget", self.budget)
        if hasattr(self, "calibration_budgets"):
            check_levels("calibration_budgets", self.calibration_budgets)

    def _check_calibration(self, levels: dict) -> None:
        """Before a target-count fit: every calibration budget is a level of the dataset's world (``levels``: name
        -> query count), and ``budget`` is one the fitted thresholds serve (a calibrated level, or a level below the
        lowest, which reuses its threshold); ``ValueError`` naming the argument otherwise."""
        for i, b in enumerate(self.calibration_budgets):
            check_known(f"calibration_budgets[{i}] (a budget level of the dataset's world)", b, levels, sorted(levels))
        lowest = min(int(b[1:]) for b in self.calibration_budgets)
        if self.budget not in self.calibration_budgets and not (isinstance(self.budget, str)
                                                                and int(self.budget[1:]) < lowest):
            raise ValueError(f"budget {self.budget!r} has no calibrated threshold: calibration_budgets are "
                             f"{list(self.calibration_budgets)} (a level below the lowest reuses its threshold)")

    def _check_fitted(self, attribute: str = "thresholds_"):
        if not hasattr(self, attribute):
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet; call fit() or load()")

    def threshold_for(self, budget) -> float:
        """Calibrated threshold of a budget level; levels below the lowest calibrated one reuse its threshold."""
        self._check_fitted()
        if budget in self.thresholds_:
            return self.thresholds_[budget]
        lowest = min(self.thresholds_, key=lambda b: int(b[1:]))
        if isinstance(budget, str) and budget.startswith("B") and int(budget[1:]) < int(lowest[1:]):
            return self.thresholds_[lowest]
        raise KeyError(f"no threshold for budget {budget!r}; calibrated: {sorted(self.thresholds_)}")

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        return self.action_for(observation, self.threshold_for(self.budget)), state

    def __repr__(self):
        return constructor_repr(self)

    def get_params(self, deep: bool = True) -> dict:
        """The constructor arguments, as scikit-learn's ``get_params`` (read from ``__init__``'s signature; a gate
        holds no nested estimators, so ``deep`` changes nothing)."""
        return {p: getattr(self, p) for p in inspect.signature(type(self).__init__).parameters if p != "self"}

    def set_params(self, **params):
        """scikit-learn's ``set_params``: constructor arguments by name (so ``sklearn.base.clone`` works); they are
        checked by the next ``fit``, as the constructor's are; an unknown name raises ``ValueError``."""
        valid = self.get_params()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; valid: {sorted(valid)}")
            setattr(self, name, value)
        return self

    def save(self, path):
        """Plain-array ``.npz`` (no pickle)."""
        self._check_fitted()
        np.savez(os.fspath(path), kind=np.array(type(self).__name__),
                 config=np.array(json.dumps(self.get_params())),
                 thresholds=np.array(json.dumps(self.thresholds_)), **self.fitted_arrays())

    @classmethod
    def load(cls, path):
        """A gate saved by :meth:`save`; a file that is not one (wrong kind, unknown config keys, non-finite
        thresholds or arrays) raises ``ValueError`` naming the file and the field."""
        with reading_artefact(path, cls.__name__), read_npz(path) as z:
            if "kind" not in z.files or str(z["kind"]) != cls.__name__:
                raise ValueError(f"holds a {z['kind'] if 'kind' in z.files else 'file without a kind'}, "
                                 f"not a {cls.__name__}")
            cfg = json.loads(str(z["config"]))
            defaults = inspect.signature(cls.__init__).parameters
            unknown = sorted(set(cfg) - set(defaults) - {"self"})
            if unknown:
                raise ValueError(f"config has unknown keys {unknown}")
            cfg = {k: tuple(v) if isinstance(defaults[k].default, tuple) and isinstance(v, list) else v
                   for k, v in cfg.items()}
            gate = cls(**cfg)
            try:
                gate.validate_params()
            except ValueError as e:
                raise ValueError(f"config: {e}") from None
            gate.set_fitted_arrays(z)
            thresholds = json.loads(str(z["thresholds"]))
            if not isinstance(thresholds, dict) or not thresholds:
                raise ValueError(f"thresholds must map budgets to numbers, got {thresholds!r}")
            # JSON keys are strings: a budget in cost units (a TemporalGate's) comes back as its digits
            thresholds = {int(k) if k.isdigit() else k: v for k, v in thresholds.items()}
            for budget, thr in thresholds.items():
                check_budget("a thresholds key", budget)
                if isinstance(thr, bool) or not isinstance(thr, (int, float)) or not np.isfinite(thr):
                    raise ValueError(f"threshold of {budget!r} must be a finite number, got {thr!r}")
            for name, arr in gate.fitted_arrays().items():
                if not np.all(np.isfinite(np.asarray(arr, dtype=np.float64))):
                    raise ValueError(f"array {name!r} has non-finite entries")
            gate.check_fitted_arrays()
            gate.thresholds_ = thresholds
        return gate

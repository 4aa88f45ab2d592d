"""The comparison's results: one typed :class:`Results` object, saved as JSON and read back (so the page and figure
can be rendered again without training), and what is computed from it (learning curves, steps to a target, the
goals)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from membudget.studies.protocol import bootstrap_ci

Key = tuple
"""``(budget, method)`` in ``per_week`` / ``per_seed``; ``(method, budget)`` in ``training`` / ``curves``."""


@dataclass
class Results:
    """What :func:`~membudget.studies.rl_vs_distillation.jobs.run_benchmark` measured."""

    params: dict
    """The comparison's settings (:data:`~membudget.studies.rl_vs_distillation.configs.BENCH_FULL` or ``_QUICK``
    with the overrides; PPO settings as dicts)."""
    quick: bool
    """A smoke run (tiny training budgets: no verdicts)."""
    budgets: list
    """Budget levels."""
    seeds: list
    """Held-out weeks."""
    learner_seeds: list
    """Seeds of every learner."""
    per_week: dict
    """``{(budget, method): {metric: per-week array}}`` (learners: averaged over learner seeds)."""
    per_seed: dict
    """``{(budget, learner): [one {metric: per-week array} per learner seed]}``."""
    training: dict
    """``{(learner, budget): mean env steps, teacher calls, wall clock and job seconds over seeds}``."""
    curves: dict
    """``{(learner, budget): [one learning-curve history per seed]}``."""
    seconds: float
    """Wall clock of the whole comparison."""
    command: str = field(default="")
    """The command that produced it."""

    def save(self, path) -> None:
        """As JSON (per-week arrays as lists); :meth:`load` reads it back."""
        def arrays(d):
            return {m: np.asarray(v).tolist() for m, v in d.items()}

        data = {"params": {k: (v if not isinstance(v, range) else list(v)) for k, v in self.params.items()},
                "quick": self.quick, "budgets": self.budgets, "seeds": self.seeds,
                "learner_seeds": self.learner_seeds, "seconds": self.seconds, "command": self.command,
                "per_week": {_key(k): arrays(v) for k, v in self.per_week.items()},
                "per_seed": {_key(k): [arrays(r) for r in v] for k, v in self.per_seed.items()},
                "training": {_key(k): v for k, v in self.training.items()},
                "curves": {_key(k): v for k, v in self.curves.items()}}
        with open(path, "w") as f:
            json.dump(data, f, default=lambda o: list(o) if isinstance(o, (range, tuple)) else str(o))

    @classmethod
    def load(cls, path) -> Results:
        """The results :meth:`save` wrote."""
        with open(path) as f:
            data = json.load(f)

        def arrays(d):
            return {m: np.asarray(v, dtype=np.float64) for m, v in d.items()}

        data["per_week"] = {_split(k): arrays(v) for k, v in data["per_week"].items()}
        data["per_seed"] = {_split(k): [arrays(r) for r in v] for k, v in data["per_seed"].items()}
        data["training"] = {_split(k): v for k, v in data["training"].items()}
        data["curves"] = {_split(k): v for k, v in data["curves"].items()}
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def _key(k):
    return "|".join(map(str, k))


def _split(text):
    return tuple(text.split("|"))


def paired(x, ref, n):
    """Mean of ``x - ref`` over the weeks both have, with its percentile bootstrap 95% interval (``n``
    resamples)."""
    d = np.asarray(x, float) - np.asarray(ref, float)
    d = d[~np.isnan(d)]
    return bootstrap_ci(d, n) if d.size else (float("nan"),) * 3


def mean_curve(histories, key="test_set_f1"):
    """``[(env_steps, mean over seeds)]`` at the checkpoints every seed's history has."""
    common = sorted(set.intersection(*({r["env_steps"] for r in h if key in r} for h in histories)))
    return [(x, float(np.mean([next(r[key] for r in h if r["env_steps"] == x) for h in histories])))
            for x in common]


def steps_to_reach(res: Results, method, budget, target) -> float | None:
    """First checkpoint at which the seed-mean held-out Set F1 of ``method`` reaches ``target`` (None: never)."""
    for x, y in mean_curve(res.curves[(method, budget)]):
        if y >= target:
            return x
    return None


def goal_check(res: Results) -> dict:
    """The issue's goals: PPO (seed mean) ≥ Sequential at B10 and within 0.01 of it at B5 / B20; distil-then-RL ≥
    max(BC, DAgger) at B10 with a paired 95% interval (over weeks, seed-averaged) that excludes a loss."""
    pw, n = res.per_week, res.params["bootstrap"]
    out = {}
    for b in res.budgets:
        if (b, "PPO") in pw and (b, "Sequential") in pw:
            gap = float(pw[(b, "PPO")]["set_f1"].mean() - pw[(b, "Sequential")]["set_f1"].mean())
            out[f"ppo_vs_sequential_{b}"] = {"gap": gap, "met": gap >= 0 if b == "B10" else gap >= -0.01}
    if ("B10", "DAgger→PPO") in pw:
        best = max(("BC", "DAgger"), key=lambda m: pw[("B10", m)]["set_f1"].mean())
        d = paired(pw[("B10", "DAgger→PPO")]["set_f1"], pw[("B10", best)]["set_f1"], n)
        out["distil_then_rl_B10"] = {"vs": best, "diff": d, "met": d[1] >= 0}
    return out



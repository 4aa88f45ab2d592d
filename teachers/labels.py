"""Imitation labels per (week, step, resource) and their compressed-npz datasets.

Rows and the 27 resource features come from a **reference trajectory**: the All-relevant rollout of the week
(every candidate queried every step, no budget, no caps — BudgetPM's full-subset collection trajectory). Each
row is a candidate (step, resource) of that rollout, with the features the environment observed before the step.
Labels:

- ``outcome``: the singleton-versus-empty effect (BudgetPM eq. 2 with ``A_ref = ∅``): 1 iff querying that
  resource alone at that state raises the running Set F1 after the step above querying nothing;
- ``due``: 1 iff the resource is needed to resolve a trigger due now (a registered positive on it, unresolved in
  the reference state, active and inside ``[onset, deadline]``);
- ``myopic[b]`` / ``sequential[b]``: 1 iff (step, resource) is in the current-greedy / hindsight-DP schedule of
  the week at budget ``b`` (schedules computed on the true dynamics from the start of the week). A teacher query
  that is not a candidate of the reference state has no row; their number is kept in ``meta``.

The nine budget features of a teacher's label rows are those its own rollout observed
(``budget_features_myopic[b]``, ``budget_features_sequential[b]``), so a 36-feature gate sees the teacher's
spending, not the reference's.

npz schema (all arrays; ``B`` budgets, ``N`` rows)::

    features            float32 (N, 27)   resource features, names in feature_names
    week, step, resource int64 (N,)        seed of the week, step, resource index
    outcome, due        int8 (N,)
    budgets             int64 (B,)          budget values; budget_names str (B,)
    myopic, sequential  int8 (B, N)
    budget_features_myopic, budget_features_sequential  float32 (B, N, 9), names in budget_feature_names
    meta                str                 JSON: world, cost profile, caps, late policy, seeds, counts
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from dataclasses import dataclass

import numpy as np

from membudget.envs.pm import BUDGET_FEATURE_NAMES, RESOURCE_FEATURE_NAMES, PMWeekEnv, WorldConfig, \
    generate_episode

from .current_greedy import CurrentGreedy, _step_effects
from .hindsight_dp import HindsightDP

SCHEMA_VERSION = 1


def _f1(tp, fp, fn):
    d = 2 * tp + fp + fn
    return 0.0 if d == 0 else 2 * tp / d


def reference_rows(ep, world: WorldConfig, late_policy: str):
    """(step, resource, features, outcome, due) of the All-relevant reference rollout of ``ep``."""
    env = PMWeekEnv(budget=None, per_step_cap=None, late_policy=late_policy, world=world)
    obs, _ = env.reset(options={"episode": ep})
    core = env.core
    out = []
    for t in range(ep.horizon):
        cands = np.flatnonzero(obs["mask"])
        if cands.size:
            dtp, dfp, dsaved, misses = _step_effects(core, 0)
            tp0, fp0, fn0 = (int(core.counters[0, j]) for j in range(3))
            vtp, vfp, vfn = (int(v) for v in core.vis_step[0, t])
            empty = _f1(tp0 + vtp, fp0 + vfp, fn0 + vfn + misses)
            for r in cands:  # due: a query of r alone makes a true positive now
                single = _f1(tp0 + vtp + dtp[r], fp0 + vfp + dfp[r], fn0 + vfn + misses - dsaved[r])
                out.append((t, int(r), obs["resources"][r], int(single > empty), int(dtp[r] > 0)))
        obs, _, _, _, _ = env.step(obs["mask"])
    return out


def teacher_rollout(ep, schedule, world, budget, per_step_cap, late_policy, cost_profile="unit"):
    """Budget features observed before each step while playing ``schedule`` in an environment configured with
    ``budget`` (a level name or an int, as the deployed environment would be); shape (T, 9)."""
    env = PMWeekEnv(budget=budget, per_step_cap=per_step_cap, late_policy=late_policy, world=world,
                    cost_profile=cost_profile)
    return play_schedule(env, {"episode": ep}, schedule, ep.horizon)[0]


def play_schedule(env, options, schedule, horizon):
    """Play ``schedule`` ((step, resource) pairs) for ``horizon`` steps in ``env`` reset with ``options``; returns
    ``(budget features observed before each step (horizon, 9), the last step's info)``. Raises if the executor
    does not execute the schedule as given."""
    obs, _ = env.reset(options=options)
    plan = {}
    for t, r in schedule:
        plan.setdefault(int(t), []).append(int(r))
    feats = np.zeros((horizon, len(BUDGET_FEATURE_NAMES)), dtype=np.float32)
    for t in range(horizon):
        feats[t] = obs["budget"]
        a = np.zeros(env.action_space.shape, dtype=np.int8)
        a[plan.get(t, [])] = 1
        obs, _, _, _, info = env.step(a)
        if np.flatnonzero(info["queried"]).tolist() != sorted(plan.get(t, [])):
            raise RuntimeError(f"teacher schedule not executable at step {t}")
    return feats, info


@dataclass
class LabelDataset:
    """Label rows (see the module docstring for the fields)."""

    features: np.ndarray
    week: np.ndarray
    step: np.ndarray
    resource: np.ndarray
    outcome: np.ndarray
    due: np.ndarray
    budgets: np.ndarray
    budget_names: np.ndarray
    myopic: np.ndarray
    sequential: np.ndarray
    budget_features_myopic: np.ndarray
    budget_features_sequential: np.ndarray
    meta: dict

    def __post_init__(self):
        """Every array's shape agrees with the schema and with the others (``N`` rows, ``B`` budgets), so a
        mismatched dataset (built by hand or loaded) is refused here, not deep inside a fit."""
        if np.ndim(self.features) != 2:
            raise ValueError(f"features must be a 2-D (rows, features) array, got shape {np.shape(self.features)}")
        n, b = np.shape(self.features)[0], np.shape(self.budgets)[:1]
        shapes = {"week": (n,), "step": (n,), "resource": (n,), "outcome": (n,), "due": (n,), "budgets": b,
                  "budget_names": b, "myopic": (*b, n), "sequential": (*b, n)}
        for name, shape in shapes.items():
            if np.shape(getattr(self, name)) != shape:
                raise ValueError(f"{name} must have shape {shape} ({n} rows, {b[0] if b else 0} budgets), got "
                                 f"{np.shape(getattr(self, name))}")
        for name in ("budget_features_myopic", "budget_features_sequential"):
            got = np.shape(getattr(self, name))
            if len(got) != 3 or got[:2] != (*b, n):
                raise ValueError(f"{name} must have shape {(*b, n, 'k')}, got {got}")

    def __len__(self):
        return self.features.shape[0]

    def save(self, path) -> None:
        arrays = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "meta"}
        np.savez_compressed(os.fspath(path), meta=np.array(json.dumps(self.meta)),
                            feature_names=np.array(RESOURCE_FEATURE_NAMES),
                            budget_feature_names=np.array(BUDGET_FEATURE_NAMES), **arrays)

    @classmethod
    def load(cls, path) -> "LabelDataset":
        with np.load(os.fspath(path), allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta.get("schema_version") != SCHEMA_VERSION:
                raise ValueError(f"{path}: label schema {meta.get('schema_version')}, expected {SCHEMA_VERSION}")
            return cls(meta=meta, **{f.name: z[f.name] for f in dataclasses.fields(cls) if f.name != "meta"})

    def budget_index(self, budget) -> int:
        names = self.budget_names.tolist()
        if isinstance(budget, str):
            if budget not in names:
                raise KeyError(f"budget {budget!r} not in this dataset ({names})")
            return names.index(budget)
        idx = np.flatnonzero(self.budgets == budget)
        if idx.size == 0:
            raise KeyError(f"budget {budget!r} not in this dataset ({self.budgets.tolist()})")
        return int(idx[0])


def label_weeks(seeds, budgets, world: WorldConfig, cost_profile: str, per_step_cap, late_policy: str,
                load: int) -> dict:
    """The label rows of the weeks ``seeds`` as arrays (one task of :func:`build_label_dataset`; weeks are
    independent): the :class:`LabelDataset` fields ``features`` ... ``budget_features_sequential`` and the count
    of teacher queries outside the rows."""
    from membudget.envs.pm import budget_levels

    levels = budget_levels(world, cost_profile)
    values = [levels[b] if isinstance(b, str) else int(b) for b in budgets]
    rows, week_of = [], []
    labels = {name: [[] for _ in values] for name in ("myopic", "sequential")}
    feats_of = {name: [[] for _ in values] for name in ("myopic", "sequential")}
    outside = {"myopic": 0, "sequential": 0}
    for seed in seeds:
        ep = generate_episode(seed, world, cost_profile, load)
        ref = reference_rows(ep, world, late_policy)
        rows += ref
        week_of += [seed] * len(ref)
        keys = {(t, r) for t, r, *_ in ref}
        for j, (b, spec) in enumerate(zip(values, budgets)):
            kw = dict(budget=b, per_step_cap=per_step_cap, late_policy=late_policy, lookahead=world.lookahead)
            for name, teacher in (("myopic", CurrentGreedy(**kw)), ("sequential", HindsightDP(**kw))):
                sched = teacher.solve(ep).schedule
                chosen = set(sched)
                outside[name] += len(chosen - keys)
                labels[name][j] += [int((t, r) in chosen) for t, r, *_ in ref]
                feats = teacher_rollout(ep, sched, world, spec, per_step_cap, late_policy, cost_profile)
                feats_of[name][j] += [feats[t] for t, *_ in ref]
    n, nb = len(rows), len(values)
    stack = lambda xs: np.stack(xs).astype(np.float32) if xs else np.zeros((0, 9), np.float32)  # noqa: E731
    return {
        "features": np.stack([r[2] for r in rows]).astype(np.float32) if n else np.zeros((0, 27), np.float32),
        "week": np.array(week_of, dtype=np.int64), "step": np.array([r[0] for r in rows], dtype=np.int64),
        "resource": np.array([r[1] for r in rows], dtype=np.int64),
        "outcome": np.array([r[3] for r in rows], dtype=np.int8), "due": np.array([r[4] for r in rows], dtype=np.int8),
        "myopic": np.array(labels["myopic"], dtype=np.int8).reshape(nb, n),
        "sequential": np.array(labels["sequential"], dtype=np.int8).reshape(nb, n),
        "budget_features_myopic": (np.stack([stack(x) for x in feats_of["myopic"]]) if nb
                                   else np.zeros((0, n, 9), np.float32)),
        "budget_features_sequential": (np.stack([stack(x) for x in feats_of["sequential"]]) if nb
                                       else np.zeros((0, n, 9), np.float32)),
        "outside": outside}


def build_label_dataset(seeds, budgets=("B5", "B10", "B15", "B20"), *, world: WorldConfig | None = None,
                        cost_profile: str = "unit", per_step_cap=2, late_policy: str = "expire",
                        load: int = 0, map=map, chunk_weeks: int = 10) -> LabelDataset:
    """Labels for the weeks ``seeds`` at each budget (level names or ints).

    The weeks are labelled in tasks of ``chunk_weeks`` consecutive weeks through ``map`` (``map(fn, items)`` ->
    results in item order, e.g. a study executor's ``map`` for Ray); weeks are independent, so the dataset is
    the same for every ``map`` and chunk size."""
    from membudget.envs.pm import budget_levels

    world = world or WorldConfig()
    budgets = list(budgets)
    levels = budget_levels(world, cost_profile)
    values = [levels[b] if isinstance(b, str) else int(b) for b in budgets]
    names = [b if isinstance(b, str) else f"B={b}" for b in budgets]
    seeds = [int(s) for s in seeds]
    size = chunk_weeks if chunk_weeks > 0 else max(len(seeds), 1)
    task = functools.partial(label_weeks, budgets=budgets, world=world, cost_profile=cost_profile,
                             per_step_cap=per_step_cap, late_policy=late_policy, load=load)
    parts = list(map(task, [tuple(seeds[i:i + size]) for i in range(0, len(seeds), size)]))
    if not parts:
        parts = [task(())]
    meta = {"schema_version": SCHEMA_VERSION, "reference": "all_relevant", "world": dataclasses.asdict(world),
            "cost_profile": cost_profile, "per_step_cap": per_step_cap, "late_policy": late_policy, "load": load,
            "seeds": seeds, "teacher_queries_outside_rows": {name: sum(p["outside"][name] for p in parts)
                                                              for name in ("myopic", "sequential")}}
    meta = json.loads(json.dumps(meta))  # exactly what a saved file holds (tuples become lists)
    axis = {"myopic": 1, "sequential": 1, "budget_features_myopic": 1, "budget_features_sequential": 1}
    arrays = {k: np.concatenate([p[k] for p in parts], axis=axis.get(k, 0)) for k in parts[0] if k != "outside"}
    return LabelDataset(budgets=np.array(values, dtype=np.int64), budget_names=np.array(names), meta=meta,
                        **arrays)

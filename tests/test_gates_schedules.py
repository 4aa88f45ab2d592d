"""Learned gates (fit / predict / save / load / calibration) and the natural schedules' defining behaviour."""

import numpy as np
import pytest

from membudget.agents import BoostedGate, StaticGate, TemporalGate
from membudget.agents.gates import target_count_threshold, week_folds
from membudget.baselines.schedules import (DeadlineBackoffOutcome, DeadlineOutcome, FractionPacing, Pacing,
                                           PeriodicOutcome, RelevanceGate, uniform_slots)
from membudget.envs.pm import RESOURCE_FEATURE_NAMES, PMWeekEnv, budget_levels, generate_episode
from membudget.studies.protocol import bootstrap_ci
from membudget.teachers import build_label_dataset

F = {n: i for i, n in enumerate(RESOURCE_FEATURE_NAMES)}


@pytest.fixture(scope="module")
def labels():
    return build_label_dataset(range(2000, 2006), ["B10"])


@pytest.fixture(scope="module")
def static(labels):
    return StaticGate().fit(labels)


def test_target_count_threshold_hits_its_target():
    rng = np.random.default_rng(0)
    scores, weeks = rng.random(1000), np.repeat(np.arange(10), 100)
    for target in (1, 7, 42, 99):
        thr = target_count_threshold(scores, weeks, target)
        assert np.sum(scores >= thr) / 10 >= target
        assert np.sum(scores > thr) / 10 < target


def test_static_threshold_hits_the_budget_on_its_calibration_data(static, labels):
    levels = budget_levels()
    for b in ("B20", "B40"):
        per_week = np.sum(static.oof_scores_ >= static.thresholds_[b]) / np.unique(labels.week).size
        assert levels[b] <= per_week < levels[b] + 1
    assert static.threshold_for("B5") == static.threshold_for("B10") == static.thresholds_["B20"]


def test_week_folds_keep_whole_weeks_together(labels):
    seen = []
    for train, test in week_folds(labels.week, 5):
        assert not set(labels.week[train]) & set(labels.week[test])
        seen += sorted(set(labels.week[test]))
    assert sorted(seen) == sorted(set(labels.week))


@pytest.mark.parametrize("make", [lambda: StaticGate(), lambda: StaticGate(label="due"), lambda: BoostedGate(),
                                  lambda: RelevanceGate(),
                                  lambda: TemporalGate(teacher="sequential", budget="B10", grid=(0.3, 0.6))])
def test_gates_fit_predict_and_round_trip_through_plain_arrays(make, labels, tmp_path):
    gate = make()
    with pytest.raises(RuntimeError, match="not fitted"):
        gate.predict({"resources": np.zeros((11, 27)), "budget": np.zeros(9), "mask": np.ones(11)})
    gate.fit(labels)
    path = tmp_path / "gate.npz"
    gate.save(path)
    with np.load(path, allow_pickle=False) as z:  # plain arrays only
        assert all(z[k].dtype != object for k in z.files)
    back = type(gate).load(path)
    env = PMWeekEnv(budget="B10", action_mode="scores")
    obs, _ = env.reset(seed=6000)
    gate.budget = back.budget = "B10" if isinstance(gate, TemporalGate) else "B20"
    for _ in range(20):
        a1, _ = gate.predict(obs)
        a2, _ = back.predict(obs)
        np.testing.assert_array_equal(a1, a2)
        assert a1.shape == (11,) and env.action_space.contains(a1)
        assert np.all(a1[obs["mask"] == 0] == -1.0)
        obs, *_ = env.step(a1)
    batched = {k: np.stack([v, v]) for k, v in obs.items()}
    assert gate.predict(batched)[0].shape == (2, 11)


def test_boosted_gate_scores_equal_scikit_learn(labels):
    from sklearn.ensemble import GradientBoostingClassifier

    gate = BoostedGate(n_estimators=30).fit(labels)
    ref = GradientBoostingClassifier(n_estimators=30, max_depth=3, random_state=0).fit(labels.features, labels.outcome)
    np.testing.assert_allclose(gate.score(labels.features), ref.predict_proba(labels.features)[:, 1], atol=1e-12)


def test_boosted_gate_scores_are_the_tree_walk_bit_for_bit(labels):
    gate = BoostedGate(n_estimators=20).fit(labels)
    X = labels.features[:300].astype(np.float32).astype(np.float64)
    raw = np.full(len(X), gate.init_)
    left, right, feature, threshold = gate.left_, gate.right_, gate.feature_, gate.threshold_
    for r, x in enumerate(X):  # each tree walked from its root, the leaf values added in tree order
        for i in range(left.shape[0]):
            node = 0
            while left[i, node] != -1:
                node = left[i, node] if x[feature[i, node]] <= threshold[i, node] else right[i, node]
            raw[r] += gate.learning_rate * gate.value_[i, node]
    np.testing.assert_array_equal(gate.score(labels.features[:300]), 1.0 / (1.0 + np.exp(-raw)))


def test_temporal_gate_threshold_maximises_out_of_fold_set_f1(labels):
    gate = TemporalGate(teacher="myopic", budget="B10", grid=(0.1, 0.5, 0.9)).fit(labels)
    best = gate.grid[int(np.argmax(np.round(gate.oof_set_f1_, 12)))]
    assert gate.thresholds_["B10"] == best and gate.coef_.shape == (36,)
    with pytest.raises(ValueError, match="teacher"):
        TemporalGate(teacher="oracle").fit(labels)


def test_loading_the_wrong_kind_of_gate_raises(static, tmp_path):
    static.save(tmp_path / "s.npz")
    with pytest.raises(ValueError, match="not a BoostedGate"):
        BoostedGate.load(tmp_path / "s.npz")


def test_uniform_slots_spread_the_cap_evenly():
    slots = uniform_slots(10, 80)
    assert slots.sum() == 10 and np.flatnonzero(slots).tolist() == list(range(0, 80, 8))
    assert uniform_slots(200, 80).sum() == 200 and uniform_slots(200, 80).max() == 3


class _Hint:
    def score(self, X):
        return np.asarray(X)[:, F["max_relevance"]] + 0.01


def _obs(n_res=3, t=10, T=80, **cols):
    res = np.zeros((n_res, 27), dtype=np.float32)
    for name, values in cols.items():
        res[:, F[name]] = values
    budget = np.zeros(9, dtype=np.float32)
    budget[2] = t / (T - 1)
    return {"resources": res, "budget": budget, "mask": np.ones(n_res, dtype=np.int8)}


def test_backoff_interval_grows_on_unchanged_checks_and_resets_on_change():
    pol = DeadlineBackoffOutcome(scorer=_Hint(), cap=80, initial=1, factor=2.0, max_interval=8)
    T = 80
    unchanged = 0.0
    allowed_at = []
    # resource 1 is queried at every allowed step and never finds anything
    n_unchanged = 0
    for t in range(30):
        queried = t > 0 and allowed_at and allowed_at[-1] == t - 1
        if queried:
            n_unchanged += 1
        unchanged = n_unchanged / (1 + n_unchanged)
        obs = _obs(t=t, is_clock=[1, 0, 0], unchanged_count=[0, unchanged, 0], open_count=[0, 0.5, 0],
                   age_since_query=[1, 1 / T if queried else 1, 1], ever_queried=[0, float(n_unchanged > 0), 0],
                   max_relevance=[0, 0.9, 0.1])
        a, _ = pol.predict(obs, episode_start=np.array([t == 0]))
        if a[1] > 0:
            allowed_at.append(t)
    gaps = np.diff(allowed_at)
    assert gaps.tolist()[:4] == [1, 2, 4, 8] and set(gaps[3:]) == {8}  # grows by the factor up to the max
    # a newly relevant memory resets the interval
    obs = _obs(t=30, is_clock=[1, 0, 0], unchanged_count=[0, unchanged, 0], open_count=[0, 0.75, 0],
               age_since_query=[1, 1, 1], ever_queried=[0, 1, 0], max_relevance=[0, 0.9, 0.1])
    a, _ = pol.predict(obs)
    assert a[1] > 0


def test_deadline_outcome_checks_the_clock_inside_a_declared_window():
    env = PMWeekEnv(budget=None, per_step_cap=3, action_mode="scores")
    obs, _ = env.reset(seed=9000)
    ep = env.episode
    pol = DeadlineOutcome(scorer=_Hint(), cap=1)
    clock_steps = []
    for t in range(ep.horizon):
        a, _ = pol.predict(obs)
        in_window = obs["resources"][0, F["resolvability"]] > 0 and obs["mask"][0] == 1
        assert (a[0] > 0) == in_window
        obs, _, _, _, info = env.step(a)
        if 0 in np.flatnonzero(info["queried"]):
            clock_steps.append(t)
    # every registered time trigger is checked on its declared step
    time_tasks = (ep.kind == 0) & ep.registered & (ep.polarity == 0)
    due = {int(ep.declared_start[i]) for i in np.flatnonzero(time_tasks) if ep.active_from[i] <= ep.declared_start[i]}
    assert due <= set(clock_steps)


def test_periodic_outcome_places_its_cap_uniformly():
    env = PMWeekEnv(budget=None, per_step_cap=2, action_mode="scores")
    obs, _ = env.reset(seed=9001)
    pol = PeriodicOutcome(scorer=_Hint(), cap=8)
    slots = uniform_slots(8, 80)
    for t in range(80):
        a, _ = pol.predict(obs)
        assert int(np.sum(a > 0)) == min(slots[t], int(obs["mask"].sum()))
        obs, *_ = env.step(a)


def test_pacing_lowers_its_threshold_when_ahead_of_pace():
    pol = Pacing(scorer=_Hint(), threshold=0.5)
    obs = _obs(max_relevance=[0.3, 0.3, 0.3])
    obs["budget"][1], obs["budget"][3] = 0.9, 0.5   # 90% of the budget left with half the horizon to go
    assert np.all(pol.predict(obs)[0] > 0)
    obs["budget"][1] = 0.2                          # behind: spent most of it already
    assert np.all(pol.predict(obs)[0] < 0)


def test_paired_bootstrap_recovers_a_known_difference():
    rng = np.random.default_rng(1)
    base = rng.normal(0.7, 0.05, 200)
    diff = base + rng.normal(0.01, 0.004, 200) - base
    mean, lo, hi = bootstrap_ci(diff, 20000)
    assert lo < 0.01 < hi and lo > 0
    half = (hi - lo) / 2
    assert half == pytest.approx(1.96 * diff.std(ddof=1) / np.sqrt(200), rel=0.15)


def test_gates_work_on_real_weeks_better_than_random(static):
    from membudget.envs.pm.rollout import rollout

    seeds = range(9000, 9005)
    bound = static
    bound.budget = "B20"
    res = rollout(bound, seeds, budget="B20", action_mode="scores")
    from membudget.baselines import RandomFeasible

    rnd = rollout(RandomFeasible(seed=0), seeds, budget="B20")
    assert res["set_f1"].mean() > rnd["set_f1"].mean()
    assert np.all(res["realized_cost"] <= budget_levels()["B20"])
    assert generate_episode(9000).horizon == 80


@pytest.mark.slow
def test_suite_policies_at_int_and_no_budget():
    from membudget.studies.suite import fit_suite
    from membudget.studies.protocol import available, evaluate_policy

    suite = fit_suite(dev_seeds=range(2000, 2005), temporal_budgets=("B10",), analysis_seeds=range(4000, 4002))
    assert suite.nearest_level(21) == "B10" and suite.nearest_level(None) == "B80"
    res = evaluate_policy(suite, "Static", 21, [9000, 9001])
    assert np.all(res["realized_cost"] <= 21)
    assert evaluate_policy(suite, "Static", None, [9000])["set_f1"].shape == (1,)
    assert not available("DeadlineOutcome", None, suite) and not available("Sequential", 21, suite)
    with pytest.raises(ValueError, match="needs a budget"):
        suite.policy("PeriodicOutcome", None)


@pytest.mark.parametrize("gate", [StaticGate(budget="B40", C=0.5), BoostedGate(n_estimators=7), TemporalGate(),
                                  RelevanceGate(budget="B60")])
def test_gates_clone_and_set_params_as_scikit_learn_estimators(gate):
    from sklearn.base import clone

    copy = clone(gate)
    assert type(copy) is type(gate) and copy is not gate and copy.get_params() == gate.get_params(deep=True)
    assert copy.set_params(budget="B80") is copy and copy.budget == "B80" and gate.budget != "B80"
    with pytest.raises(ValueError, match="invalid parameter 'budgett'"):
        copy.set_params(budgett="B80")


@pytest.mark.parametrize("kwargs,match", [(dict(budget="B30"), "budget 'B30' has no calibrated threshold"),
                                          (dict(budget=20), "budget 20 has no calibrated threshold"),
                                          (dict(calibration_budgets=("B30",)), r"calibration_budgets\[0\]")])
@pytest.mark.parametrize("cls", [StaticGate, RelevanceGate])
def test_a_budget_the_fitted_thresholds_cannot_serve_is_refused_by_fit(labels, cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs).fit(labels)
    assert cls(budget="B10").fit(labels).threshold_for("B10") == cls(budget="B20").fit(labels).threshold_for("B20")


@pytest.mark.parametrize("make", [StaticGate, BoostedGate, RelevanceGate])
def test_a_gate_refuses_rows_it_cannot_score(make, labels):
    if make is not RelevanceGate:  # the hint is scored without fitting; a learned scorer is not
        with pytest.raises(RuntimeError, match="not fitted"):
            make().score(labels.features[:3])
    gate = make(**({"n_estimators": 5} if make is BoostedGate else {})).fit(labels)
    with pytest.raises(ValueError, match=r"X must be feature rows of 27 features"):
        gate.score(labels.features[:5, :20])  # a compiled scorer would read past each row
    bad = labels.features[:5].astype(np.float64)
    bad[2, 4] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        gate.score(bad)
    with pytest.raises(ValueError, match="X must hold numbers, got dtype <U"):
        gate.score(labels.features[:5].astype(str))  # refused, not parsed
    obs, _ = PMWeekEnv(budget="B10", action_mode="scores").reset(seed=6000)
    obs = dict(obs, resources=np.where(obs["mask"][:, None] > 0, np.nan, obs["resources"]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        gate.predict(obs)


def labels_rows(labels, keep):
    """The label rows ``keep`` (a boolean mask) of ``labels``, every array cut alike."""
    import dataclasses

    per_budget = ("myopic", "sequential", "budget_features_myopic", "budget_features_sequential")
    cut = {f: getattr(labels, f)[keep] for f in ("features", "week", "step", "resource", "outcome", "due")}
    return dataclasses.replace(labels, **cut, **{f: getattr(labels, f)[:, keep] for f in per_budget})


def test_label_datasets_with_mismatched_arrays_are_refused_when_built(tiny_labels):
    import dataclasses

    ds = tiny_labels
    for change, match in ((dict(outcome=np.zeros(2, np.int8)), r"outcome must have shape \(3,\)"),
                          (dict(features=np.zeros(3)), "features must be a 2-D"),
                          (dict(sequential=np.zeros((2, 3), np.int8)), r"sequential must have shape \(1, 3\)"),
                          (dict(budget_features_myopic=np.zeros((1, 3))), "budget_features_myopic must have shape")):
        with pytest.raises(ValueError, match=match):
            dataclasses.replace(ds, **change)


def test_a_refit_that_fails_leaves_the_gate_as_it_was(static, labels):
    import copy
    import dataclasses

    gate = copy.deepcopy(static)
    before = {k: copy.deepcopy(v) for k, v in vars(gate).items()}
    weeks = np.unique(labels.week)
    # one week holds every positive: the folds that leave it out see a single class, and their fit fails
    one_week = dataclasses.replace(labels, outcome=(labels.week == weeks[1]).astype(np.int8))
    with pytest.raises(ValueError, match=r"fold \d \(held-out weeks \[.*\]\) trains on rows whose labels are all "
                                         r"\[0\]"):
        gate.fit(one_week)
    huge = dataclasses.replace(labels, features=labels.features.astype(np.float64) * 1e160)
    with pytest.raises(ValueError, match="mean or standard deviation overflows"):
        gate.fit(huge)
    assert vars(gate).keys() == before.keys()
    for k, v in before.items():
        assert np.array_equal(vars(gate)[k], v) if isinstance(v, np.ndarray) else vars(gate)[k] == v
    for bad, match in ((dataclasses.replace(labels, outcome=labels.outcome * 2), "must be 0 or 1"),
                       (labels_rows(labels, np.zeros(len(labels), dtype=bool)), "no rows")):
        with pytest.raises(ValueError, match=match):
            StaticGate().fit(bad)


@pytest.mark.parametrize("make, match", [
    (lambda s: Pacing(scorer=s, threshold=float("nan")), "threshold"),
    (lambda s: Pacing(scorer=s, threshold=-1.0), "threshold"),
    (lambda s: FractionPacing(scorer=s, fraction=0.6, thresholds={}), "thresholds"),
    (lambda s: FractionPacing(scorer=s, fraction=float("nan"), thresholds=s.thresholds_), "fraction"),
    (lambda s: PeriodicOutcome(scorer=s, cap=20, horizon=0), "horizon"),
    (lambda s: DeadlineBackoffOutcome(scorer=s, cap=20, factor=float("nan")), "factor"),
])
def test_schedules_refuse_bad_parameters_at_their_first_decision(static, make, match):
    obs, _ = PMWeekEnv(budget="B10", action_mode="scores").reset(seed=6000)
    with pytest.raises(ValueError, match=match):
        make(static).predict(obs)


def test_estimators_teachers_and_schedules_show_their_arguments():
    from membudget.teachers import HindsightDP
    from membudget.teachers.conversation import InformedOptimum

    gate = StaticGate(budget="B40")
    assert repr(gate) == ("StaticGate(label='outcome', budget='B40', C=1.0, max_iter=5000, tol=0.0001, n_folds=5, "
                          "calibration_budgets=('B20', 'B40', 'B60', 'B80'))")
    assert repr(Pacing(scorer=gate, threshold=0.3)) == f"Pacing(scorer={gate!r}, threshold=0.3)"
    assert repr(HindsightDP(budget=21)) == ("HindsightDP(budget=21, per_step_cap=2, per_step_cost_cap=None, "
                                            "late_policy='expire', lookahead=2)")
    assert repr(InformedOptimum(budget=10)).startswith("InformedOptimum(budget=10, per_step_cap=2, ")
    assert "np.float64" not in repr(TemporalGate())


@pytest.mark.parametrize("make", [lambda: StaticGate(n_folds=2), lambda: BoostedGate(n_folds=2, n_estimators=5),
                                  RelevanceGate])
def test_a_gate_fitted_on_conversation_rows_scores_and_reloads_at_their_width(make, tmp_path):
    from membudget.envs.conversation import budget_levels as conversation_levels
    from membudget.teachers.conversation import build_conversation_dataset

    data = build_conversation_dataset([2000, 2001], ("B60",))
    assert data.features.shape[1] == 34   # PMWeek's 27 resource features and GoodAI's 7
    gate = make().fit(data, conversation_levels())
    assert gate.n_features == 34
    gate.save(tmp_path / "gate.npz")
    again = type(gate).load(tmp_path / "gate.npz")
    assert again.n_features == 34
    assert np.array_equal(again.score(data.features[:10]), gate.score(data.features[:10]))
    with pytest.raises(ValueError, match="34 features"):
        gate.score(data.features[:10, :27])

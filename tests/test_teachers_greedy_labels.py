"""CurrentGreedy against step-by-step enumeration in the environment; label datasets; structural report."""

import copy
import functools
import itertools
from fractions import Fraction

import numpy as np
import pytest

from membudget.envs.pm import PMWeekEnv, WorldConfig, generate_episode
from membudget.teachers import CurrentGreedy, HindsightDP, LabelDataset, build_label_dataset
from membudget.studies.budgetpm_reproduction import structure_report as report
from membudget.studies.execution import Executor
from membudget.teachers.structure import headroom

from pm_tiny import instances


def _f1(tp, fp, fn):
    return Fraction(2 * tp, 2 * tp + fp + fn) if 2 * tp + fp + fn else Fraction(0)


def _world(ep, lookahead):
    return WorldConfig(horizon=ep.horizon, n_days=1, resources=tuple(zip(ep.resource_names, ep.resource_classes)),
                       lookahead=lookahead)


@pytest.mark.parametrize("seed", range(2))
def test_current_greedy_takes_the_best_immediate_subset(seed):
    """At every step the greedy subset is the best of every feasible subset of candidates, judged by stepping a
    copy of the environment (running Set F1 after the step; ties to lower cost, fewer queries, lower indices)."""
    for ep, kw in instances(500 + seed, 40):
        lookahead = kw.pop("lookahead")
        env = PMWeekEnv(world=_world(ep, lookahead), **kw)
        env.reset(options={"episode": ep})
        greedy = CurrentGreedy(lookahead=lookahead, **kw)
        sched = greedy.solve(ep).schedule
        counts = np.zeros(3, dtype=int)
        for t in range(ep.horizon):
            mask = env.core.mask_state[0].astype(bool)
            cands = np.flatnonzero(mask)
            best, best_key = None, None
            for bits in range(1 << cands.size):
                sub = [int(c) for j, c in enumerate(cands) if bits >> j & 1]
                probe = copy.deepcopy(env)
                a = np.zeros(ep.n_resources, dtype=np.int8)
                a[sub] = 1
                _, _, _, _, info = probe.step(a)
                if sorted(np.flatnonzero(info["queried"]).tolist()) != sub:
                    continue  # infeasible under the caps or the budget
                c = counts + [info["tp"], info["fp"], info["fn"]]
                key = (_f1(*c), -info["cost"], -len(sub))
                if best_key is None or key > best_key:
                    best, best_key = sub, key
            chosen = sorted(r for s, r in sched if s == t)
            probe_key = None
            a = np.zeros(ep.n_resources, dtype=np.int8)
            a[chosen] = 1
            _, _, _, _, info = env.step(a)
            probe_key = (_f1(*(counts + [info["tp"], info["fp"], info["fn"]])), -info["cost"], -len(chosen))
            assert probe_key == best_key, (t, chosen, best)
            counts += [info["tp"], info["fp"], info["fn"]]


def _enumerated_subset(core):
    """The greedy's choice by enumerating every feasible subset of the firing candidates (the definition)."""
    from membudget.teachers.current_greedy import _step_effects

    t = int(core.t[0])
    tp0, fp0, fn0 = (int(core.counters[0, j]) for j in range(3))
    vtp, vfp, vfn = (int(v) for v in core.vis_step[0, t])
    dtp, dfp, dsaved, misses = _step_effects(core, 0)
    cands = [r for r in np.flatnonzero(core.mask_state[0]).tolist() if dtp[r] or dfp[r]]
    budget = core.remaining[0] if core.budget[0] >= 0 else None
    best, best_key = (), None
    for size in range(0, (len(cands) if core.n_max < 0 else min(core.n_max, len(cands))) + 1):
        for sub in itertools.combinations(cands, size):
            cost = int(sum(core.costs[0, r] for r in sub))
            if (budget is not None and cost > budget) or (core.cost_cap >= 0 and cost > core.cost_cap):
                continue
            key = (_f1(tp0 + vtp + sum(dtp[r] for r in sub), fp0 + vfp + sum(dfp[r] for r in sub),
                       fn0 + vfn + misses - sum(dsaved[r] for r in sub)), -cost, -size)
            if best_key is None or key > best_key:
                best, best_key = sub, key
    return best


@pytest.mark.parametrize("kw", [dict(per_step_cap=None, budget=None, load=6),
                                dict(per_step_cap=None, budget="B5", load=6, cost_profile="skewed"),
                                dict(per_step_cap=None, budget=7, load=10, late_policy="execute"),
                                dict(per_step_cap=3, budget="B10", load=4, cost_profile="mild", per_step_cost_cap=30)])
def test_greedy_subset_equals_the_enumeration_with_and_without_caps(kw):
    """Dinkelbach's unconstrained optimum (taken when it fits) and the bounded enumeration give the subset the
    full enumeration gives, index for index, on busy weeks (loads up to 10, no count cap) played half greedily."""
    from membudget.teachers.current_greedy import greedy_subset

    env = PMWeekEnv(**kw)
    steps = 0
    for seed in range(4):
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        done = False
        while not done:
            chosen = greedy_subset(env.core)
            assert chosen == _enumerated_subset(env.core), (seed, int(env.core.t[0]))
            steps += bool(chosen)
            a = np.zeros(env.core.n_resources, dtype=np.int8)
            a[list(chosen)] = 1
            _, _, done, _, _ = env.step(a if rng.random() < 0.5 else (rng.random(a.size) < 0.3).astype(np.int8))
    assert steps >= 10


def test_greedy_act_refuses_a_week_not_started_or_ended_and_other_envs():
    import gymnasium as gym

    env = PMWeekEnv(budget=10)
    greedy = CurrentGreedy.from_env(env)
    with pytest.raises(RuntimeError, match="call reset"):
        greedy.act(env)
    env.reset(seed=0)
    done = False
    while not done:
        _, _, done, _, _ = env.step(greedy.act(env))
    with pytest.raises(RuntimeError, match="the week has ended"):
        greedy.act(env)
    with pytest.raises(TypeError, match="PM-week teacher"):
        greedy.act(gym.make("CartPole-v1"))
    vec = gym.make_vec("membudget/PMWeek-v0", num_envs=2, vectorization_mode="vector_entry_point", budget="B5")
    vec.reset(seed=0)
    for slot in (2, -1, 1.0, True):
        with pytest.raises(ValueError, match="slot must be an int"):
            HindsightDP.from_env(vec).continuation(vec, slot)
    assert HindsightDP.from_env(vec).continuation(vec, 1).cost <= vec.budget


@pytest.mark.parametrize("budget", [10, 21])
def test_exact_cost_dp_never_loses_to_greedy(budget):
    weeks = [generate_episode(s) for s in range(9000, 9006)]
    for g_f1, dp_f1, cost, sched in headroom(weeks, budget):
        assert dp_f1 >= g_f1 - 1e-12 and cost <= budget
        assert HindsightDP(budget=budget).solve(weeks[0]).f1 >= 0


def test_greedy_act_matches_its_schedule():
    ep = generate_episode(9000)
    env = PMWeekEnv(budget=10)
    env.reset(options={"episode": ep})
    greedy = CurrentGreedy.from_env(env)
    plan = greedy.solve(ep).schedule
    played = []
    for t in range(ep.horizon):
        _, _, _, _, info = env.step(greedy.act(env))
        played += [(t, int(r)) for r in np.flatnonzero(info["queried"])]
    assert played == plan


@pytest.fixture(scope="module")
def labels():
    return build_label_dataset(range(2000, 2003), ["B5", "B10"])


def test_label_rows_are_the_all_relevant_candidates(labels):
    from membudget.envs.pm.levels import all_relevant_costs

    costs, _ = all_relevant_costs(range(2000, 2003))
    assert [int(np.sum(labels.week == s)) for s in range(2000, 2003)] == costs.astype(int).tolist()
    assert labels.features.shape == (len(labels), 27) and labels.features.dtype == np.float32


def test_outcome_labels_are_the_singleton_versus_empty_effect(labels):
    ep = generate_episode(2000)
    env = PMWeekEnv(budget=None, per_step_cap=None)
    obs, _ = env.reset(options={"episode": ep})
    rows = {(int(t), int(r)): int(o) for t, r, o, w in zip(labels.step, labels.resource, labels.outcome, labels.week)
            if w == 2000}
    checked = 0
    for t in range(ep.horizon):
        for r in np.flatnonzero(obs["mask"]):
            single, empty = copy.deepcopy(env), copy.deepcopy(env)
            a = np.zeros(11, dtype=np.int8)
            a[r] = 1
            gain = single.step(a)[1] - empty.step(np.zeros(11, dtype=np.int8))[1]
            assert rows[(t, int(r))] == int(gain > 1e-12), (t, r)
            checked += 1
        obs, *_ = env.step(obs["mask"])
    assert checked == len(rows)


def test_teacher_labels_are_their_schedules(labels):
    for j, b in enumerate(labels.budgets):
        for seed in range(2000, 2003):
            ep = generate_episode(seed)
            rows = labels.week == seed
            for name, teacher in (("myopic", CurrentGreedy(budget=int(b))), ("sequential", HindsightDP(budget=int(b)))):
                sched = set(teacher.solve(ep).schedule)
                lab = getattr(labels, name)[j][rows]
                marked = {(int(t), int(r)) for t, r, y in zip(labels.step[rows], labels.resource[rows], lab) if y}
                assert marked <= sched and len(sched - marked) <= labels.meta["teacher_queries_outside_rows"][name]
        # the teacher's own budget features: full budget before its first step
        first = labels.step == 0
        if first.any():
            assert np.all(labels.budget_features_sequential[j][first][:, 1] == 1.0)


def test_label_dataset_round_trip(labels, tmp_path):
    path = tmp_path / "labels.npz"
    labels.save(path)
    back = LabelDataset.load(path)
    for f in ("features", "week", "step", "resource", "outcome", "due", "budgets", "myopic", "sequential",
              "budget_features_myopic", "budget_features_sequential"):
        np.testing.assert_array_equal(getattr(back, f), getattr(labels, f))
    assert back.meta == labels.meta and back.budget_index("B10") == 1 and back.budget_index(int(labels.budgets[0])) == 0
    with pytest.raises(KeyError):
        back.budget_index("B80")


def test_structure_report_runs_small():
    text = report(n_resamples=200, n_boundary=3, n_load=4)
    assert "B5" in text and "k=3 minus k=0" in text


def test_label_budget_features_match_the_deployed_environment():
    from membudget.envs.pm import PMWeekEnv

    ds = build_label_dataset([2000], ["B10"], cost_profile="skewed")
    env = PMWeekEnv(budget="B10", cost_profile="skewed")
    obs, _ = env.reset(seed=2000)
    assert ds.budget_features_sequential[0][:, 0].tolist() == [obs["budget"][0]] * len(ds)
    assert ds.budget_features_myopic[0][:, 0].tolist() == [obs["budget"][0]] * len(ds)


class _Reversed(Executor):
    """Tasks finishing in the reverse order (as remote workers may)."""

    def _run(self, fn, items, todo):
        for i in reversed(todo):
            yield i, fn(items[i])


def test_structure_report_headrooms_do_not_depend_on_the_task_order():
    small = {"n_resamples": 200, "n_boundary": 3, "n_load": 4}
    assert report(**small, executor=_Reversed()) == report(**small)


@pytest.mark.slow
def test_report_tasks_seed_themselves_from_their_key():
    from membudget.envs.pm import budget_levels
    from membudget.studies.budgetpm_reproduction import headroom_task, report_task
    from membudget.studies.protocol import evaluate_policy, sweep
    from membudget.studies.suite import fit_suite

    suite = fit_suite(dev_seeds=range(2000, 2005), temporal_budgets=("B10",), analysis_seeds=range(4000, 4002))
    weeks = range(9000, 9003)
    items = [("policy", "RandomFeasible", "B10", weeks, 3), ("policy", "Sequential", "B10", weeks, 0),
             ("sweep", "DeadlineOutcome", range(9000, 9002)), ("headroom", weeks, 0, 0.0, 10)]
    fn = functools.partial(report_task, suite)
    forward, backward = Executor().map(fn, items), _Reversed().map(fn, items)
    for a, b in zip(forward[:2] + forward[3:], backward[:2] + backward[3:]):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
    assert forward[2] == backward[2] == sweep(suite, "DeadlineOutcome", [9000, 9001])
    direct = evaluate_policy(suite, "RandomFeasible", "B10", list(weeks), 3)
    assert all(np.array_equal(forward[0][k], direct[k], equal_nan=True) for k in direct)
    no_time = [generate_episode(s, WorldConfig(n_time=0.0)) for s in weeks]
    rows = headroom(no_time, 10)
    np.testing.assert_array_equal(forward[3]["dp"] - forward[3]["greedy"], [d - g for g, d, _, _ in rows])
    assert headroom_task((weeks, 0, None, budget_levels()["B10"]))["opened"].shape == (3, 4)


def test_report_and_structure_command_lines_pass_bad_backend_input_to_make_executor():
    from membudget.studies.budgetpm_reproduction import main, structure_main

    for entry in (main, structure_main):
        with pytest.raises(ValueError, match="--address needs --backend ray"):
            entry(["--address", "auto"])


def test_the_report_s_spend_profiles_read_a_rollout():
    """Section 5 of the reproduction report on real rollouts (a query-every-candidate policy standing in for Static,
    Myopic and Sequential): its spend by quarter adds up to the mean realized cost, and a week counts as exhausted
    when it spends the whole budget (unit prices)."""
    from membudget.envs.pm import budget_levels
    from membudget.envs.pm.rollout import rollout
    from membudget.studies.budgetpm_reproduction import SEVERE, _Measured, _spend_profiles

    class AllCandidates:
        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            return obs["mask"], state

    levels = budget_levels()
    runs = {b: rollout(AllCandidates(), SEVERE, budget=levels[b], per_step_cap=2) for b in ("B5", "B10")}
    evaluations = {(n, b, SEVERE, 0): runs[b] for n in ("Static", "Myopic", "Sequential") for b in runs}
    rows = [line.split(" | ") for line in _spend_profiles(_Measured(None, evaluations, {}, {}, 1000))
            if line.startswith("| B")]
    assert len(rows) == 6
    for cells in rows:
        run = runs[cells[0][2:]]
        assert abs(sum(float(x) for x in cells[2].split("/")) - run["realized_cost"].mean()) <= 0.02
        exhausted = int(np.sum(run["realized_cost"] == levels[cells[0][2:]]))
        assert 0 < exhausted and cells[4].startswith(f"{exhausted}/30")

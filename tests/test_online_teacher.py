"""The online teacher of PMWeek-v0 (teachers/online.py over teachers/observed.py and teachers/posterior.py): it
decides from what the agent has seen only, so hidden future information cannot change its decision."""

import pickle
from dataclasses import replace

import numpy as np
import pytest

from membudget.envs.pm import PMWeekEnv, generate_episode
from membudget.envs.pm.world import KIND_VISIBLE, NEVER
from membudget.teachers import HindsightDP
from membudget.teachers.observed import AgentView
from membudget.teachers.online import BayesFeatureGate, HindsightPlanner

WEEK, T_CUT = 2003, 18


def _planner(seed=0, samples=2):
    env = AgentView(PMWeekEnv(budget="B10", per_step_cap=2))
    return HindsightPlanner(env=env, n_samples=samples, n_particles=32, seed=seed).fit()


def _future_changed(ep, t):
    """``ep`` with everything the agent cannot have seen by the decision of step ``t`` changed: the hints of the
    steps after ``t`` redrawn, and every hidden intention whose onset bump lies wholly after ``t`` (onset >= t + 7)
    made to never trigger."""
    hints = ep.hints.copy()
    hints[t + 1:] = np.random.default_rng(1).random(hints[t + 1:].shape)
    late = (ep.kind != KIND_VISIBLE) & (ep.onset < NEVER) & (ep.onset >= t + 7)
    onset, deadline = ep.onset.copy(), ep.deadline.copy()
    onset[late] = NEVER
    deadline[late] = NEVER
    return replace(ep, hints=hints, onset=onset, deadline=deadline), int(late.sum())


def _play(planner, ep, steps):
    env = planner.env
    obs, _ = env.reset(options={"episode": ep})
    actions, records, values = [], [], []
    for _ in range(steps):
        a, _ = planner.predict(obs)
        actions.append(a.copy())
        records.append(env.observed)
        values.append(None if planner.last_ is None else planner.last_["values"].copy())
        obs, *_ = env.step(a)
    return actions, records, values


@pytest.mark.slow  # the planner's numba sampler compiles for about 20 s on a cold cache
def test_decisions_do_not_depend_on_the_hidden_future():
    a = generate_episode(WEEK)
    b, n_changed = _future_changed(a, T_CUT)
    assert n_changed > 0
    # the weeks differ where it matters: the hindsight DP (which sees the whole week) scores them differently
    dp = HindsightDP(budget=PMWeekEnv(budget="B10").budget, per_step_cap=2)
    assert dp.solve(a).f1 != dp.solve(b).f1
    acts_a, rec_a, val_a = _play(_planner(), a, T_CUT + 1)
    acts_b, rec_b, val_b = _play(_planner(), b, T_CUT + 1)
    for t in range(T_CUT + 1):
        assert rec_a[t].equals(rec_b[t]), f"the agent's record differs at step {t}"
        np.testing.assert_array_equal(acts_a[t], acts_b[t])
        assert (val_a[t] is None) == (val_b[t] is None)
        if val_a[t] is not None:
            np.testing.assert_array_equal(val_a[t], val_b[t])
    assert sum(int(x.sum()) for x in acts_a) > 0  # it did query something


@pytest.mark.slow
def test_a_week_is_feasible_and_repeats_with_the_same_seed():
    scores = []
    for _ in range(2):
        planner = _planner(seed=3)
        env = planner.env
        obs, _ = env.reset(seed=2001)
        done = False
        while not done:
            a, _ = planner.predict(obs)
            assert set(np.flatnonzero(a)) <= set(np.flatnonzero(obs["mask"]))
            assert a.sum() <= 2
            obs, _, done, _, info = env.step(a)
        scores.append(info["episode_metrics"]["set_f1"])
        assert info["episode_metrics"]["realized_cost"] <= env.unwrapped.budget
    assert scores[0] == scores[1]


def test_bad_settings_raise_clear_errors():
    with pytest.raises(TypeError, match="AgentView"):
        HindsightPlanner(env=PMWeekEnv(budget="B10")).fit()
    with pytest.raises(ValueError, match="n_samples"):
        HindsightPlanner(env=AgentView(PMWeekEnv(budget="B10")), n_samples=0).fit()
    with pytest.raises(RuntimeError, match="fit"):
        HindsightPlanner(env=AgentView(PMWeekEnv(budget="B10"))).predict({"mask": np.ones(11)})
    with pytest.raises(TypeError, match="PMWeekEnv"):
        import gymnasium as gym

        AgentView(gym.make("CartPole-v1"))
    from membudget.teachers.posterior import PosteriorSampler

    for bad in ("gold", ["unit"]):  # checked before the per-world tables are looked up (an unhashable key too)
        with pytest.raises(ValueError, match="cost_profile"):
            PosteriorSampler(cost_profile=bad).fit()


def test_bayes_gate_refuses_bad_settings():
    scores_env = lambda: AgentView(PMWeekEnv(budget="B10", action_mode="scores"))  # noqa: E731
    for bad in (0, 0.0, -0.1, 1.5, True, float("nan"), "0.5"):
        with pytest.raises(ValueError, match="threshold"):
            BayesFeatureGate(env=scores_env(), threshold=bad).fit()
    with pytest.raises(ValueError, match="scores"):
        BayesFeatureGate(env=AgentView(PMWeekEnv(budget="B10")), threshold=0.5).fit()
    with pytest.raises(RuntimeError, match="fit"):
        BayesFeatureGate(env=scores_env()).predict({"mask": np.ones(11)})


@pytest.mark.slow
def test_bayes_gate_sends_the_posterior_probability_of_the_candidates_at_or_above_its_threshold():
    gate = BayesFeatureGate(env=AgentView(PMWeekEnv(budget="B10", per_step_cap=2, action_mode="scores")),
                            threshold=0.5, n_samples=8, n_particles=32, seed=4).fit()
    planner = _planner(seed=4, samples=8)  # the same random stream: the same draws at the first decision
    obs, _ = gate.env.reset(seed=2001)
    p_obs, _ = planner.env.reset(seed=2001)
    compared, sent, done = False, 0, False
    while not done:
        s, _ = gate.predict(obs)
        mask = obs["mask"].astype(bool)
        assert np.all(s[~mask] == -1.0)
        if gate.last_ is None:
            assert np.all(s == -1.0)
        else:
            p = gate.last_["p_resolve"]
            affordable = mask & (gate.env.observed.costs <= gate.env.observed.remaining_budget)
            want = np.where(affordable & (p >= 0.5), p, -1.0).astype(np.float32)
            np.testing.assert_array_equal(s, want)
            sent += int((s > 0).sum())
            if not compared:  # until now neither proposed anything, so both saw the same week and drew alike
                planner.predict(p_obs)
                np.testing.assert_array_equal(planner.last_["p_resolve"], p)
                compared = True
        if not compared:
            p_obs, *_ = planner.env.step(np.zeros(11, dtype=np.int8))
        obs, _, done, _, info = gate.env.step(s)
    assert compared and sent > 0
    assert info["episode_metrics"]["realized_cost"] <= gate.env.unwrapped.budget


@pytest.mark.slow
def test_online_demonstrations_label_the_planners_own_rollout():
    from membudget.agents.online_imitation import fit_online_bc, online_demonstrations

    demos, planner = online_demonstrations([2002], "B10", samples=1, seed=0)
    horizon = planner.env.unwrapped.episode.horizon
    assert len(demos) == horizon
    assert np.all(demos.labels <= demos.mask)  # labels are candidates only
    assert np.all(demos.labels.sum(axis=1) <= 2)
    assert demos.labels.sum() > 0
    policy, same = fit_online_bc([2002], "B10", epochs=1, demos=demos)
    assert same is demos and policy.config["method"] == "online-bc"
    action, _ = policy.predict(PMWeekEnv(budget="B10", action_mode="scores").reset(seed=2002)[0])
    assert action.shape == (demos.mask.shape[1],)


class _Never:
    """A student that proposes nothing (scores -1 everywhere)."""

    def predict(self, obs, state=None, episode_start=None, deterministic=True):
        return np.full(obs["mask"].shape, -1.0, dtype=np.float32), state


def test_online_dagger_labels_the_students_states_with_the_planner_given_its_history():
    from membudget.agents.online_imitation import fit_online_dagger, student_demonstrations

    demos = student_demonstrations(_Never(), [2002], "B10", samples=1, particles=8)
    # the same states and labels: a planner (seed = the week) deciding while nothing is ever queried
    env = AgentView(PMWeekEnv(budget="B10", per_step_cap=2, action_mode="scores"))
    planner = HindsightPlanner(env=env, n_samples=1, n_particles=8, seed=2002).fit()
    obs, _ = env.reset(seed=2002)
    done, states, labels = False, [], []
    while not done:
        states.append(obs["resources"])
        labels.append(planner.predict(obs)[0] > 0)
        obs, _, done, _, _ = env.step(np.full(obs["mask"].shape, -1.0, dtype=np.float32))
    np.testing.assert_array_equal(demos.resources, np.stack(states))
    np.testing.assert_array_equal(demos.labels, np.stack(labels))
    assert demos.labels.sum() > 0  # the planner would have queried: a never-querying student is corrected
    policy, every = fit_online_dagger([2002], "B10", samples=1, particles=8, seed=3, demos=demos)
    assert len(every) == 2 * len(demos)  # the given labels and one round on the student's own states
    np.testing.assert_array_equal(every.labels[:len(demos)], demos.labels)
    assert policy.config["method"] == "online-dagger" and policy.config["iterations"] == 1
    with pytest.raises(ValueError, match="iterations"):
        fit_online_dagger([2002], "B10", iterations=0, demos=demos)


@pytest.mark.slow
@pytest.mark.parametrize("week, t, shuffle", [(2001, 12, False), (2004, 25, False), (2004, 25, True)])
def test_every_posterior_week_replays_to_the_same_observations(week, t, shuffle):
    """A drawn week, played with the agent's own actions, shows the agent exactly what it saw (the ledger, its
    events, the hints, the counters), whatever the order the sampler draws the resources in."""
    from membudget.teachers.posterior import PosteriorSampler

    def top_hint(obs):
        a = np.zeros(obs["mask"].size, dtype=np.int8)
        h = np.where(obs["mask"] > 0, obs["resources"][:, 0], -1.0)
        r = int(np.argmax(h))
        a[r] = obs["mask"][r] > 0
        return a

    env = AgentView(PMWeekEnv(budget="B10", per_step_cap=2))
    obs, _ = env.reset(seed=week)
    actions = []
    for _ in range(t):
        actions.append(top_hint(obs))
        obs, *_ = env.step(actions[-1])
    seen = env.observed
    assert len(seen.ledger) > 0 and seen.queried.any()
    draws = PosteriorSampler.from_env(env.unwrapped, n_particles=32).fit().sample(seen, 4, np.random.default_rng(0),
                                                                                   shuffle=shuffle)
    for i in range(len(draws)):
        replay = AgentView(PMWeekEnv(budget="B10", per_step_cap=2))
        replay.reset(options={"episode": draws.episode(i, 0)})
        for a in actions:
            replay.step(a)
        assert replay.observed.equals(seen), f"draw {i} disagrees with the observations"


@pytest.mark.slow
def test_online_teacher_wrapper_labels_are_the_planners_actions():
    from membudget.wrappers import P_RESOLVE_KEY, TEACHER_KEY, OnlineTeacher

    env = OnlineTeacher(PMWeekEnv(budget="B10", per_step_cap=2, action_mode="scores"), samples=2, n_particles=32,
                        seed=5, oracle_feature=True)
    planner = _planner(seed=5)
    obs, info = env.reset(seed=2001)
    obs_p, _ = planner.env.reset(seed=2001)
    done, steps, resolving = False, 0, 0
    while not done:
        label = info[TEACHER_KEY]
        assert label.dtype == np.float32 and set(np.unique(label)) <= {-1.0, 1.0}
        assert obs in env.observation_space  # the oracle feature is an observation key, in its declared space
        p = obs[P_RESOLVE_KEY]
        direct, _ = planner.predict(obs_p)  # the same planner on the same states and stream
        np.testing.assert_array_equal(label > 0, direct > 0)
        expected = np.zeros(label.shape) if planner.last_ is None else planner.last_["p_resolve"]
        np.testing.assert_array_equal(p, expected.astype(np.float32))
        resolving += int((p > 0).any())
        obs, _, done, _, info = env.step(label)
        obs_p, *_ = planner.env.step(direct)
        steps += 1
    assert env.teacher_calls == steps and resolving > 0
    assert np.all(info[TEACHER_KEY] == -1.0) and not obs[P_RESOLVE_KEY].any()  # nothing after the week
    assert P_RESOLVE_KEY not in OnlineTeacher(PMWeekEnv(budget="B10"), samples=1).observation_space.spaces
    with pytest.raises(TypeError, match="PMWeekEnv"):
        import gymnasium as gym

        OnlineTeacher(gym.make("CartPole-v1"))


@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")  # a wrapper is what is checked
def test_online_teacher_with_the_oracle_feature_passes_gymnasium_s_checker():
    from gymnasium.utils.env_checker import check_env

    from membudget.wrappers import P_RESOLVE_KEY, OnlineTeacher

    env = OnlineTeacher(PMWeekEnv(budget="B10", per_step_cap=2), samples=1, n_particles=8, seed=3,
                        oracle_feature=True)
    check_env(env, skip_render_check=True)
    first = [env.reset(seed=2002)]
    for _ in range(6):
        first.append(env.step(env.action_space.sample())[0])
    again = env.reset(seed=2002)  # a seeded reset restarts the planner's stream: the same oracle features
    np.testing.assert_array_equal(first[0][0][P_RESOLVE_KEY], again[0][P_RESOLVE_KEY])
    np.testing.assert_array_equal(first[0][1]["teacher_action"], again[1]["teacher_action"])


def test_bench_flags_parse_weeks_and_samples():
    import argparse

    from membudget.bench.online import parse_samples
    from membudget.envs.validation import seeds_flag

    parse_weeks = seeds_flag("--weeks")
    assert parse_weeks("8000-8002,9000") == [8000, 8001, 8002, 9000]
    assert parse_samples("1,4,16") == [1, 4, 16]
    for bad in ("", "0", "a", "5000"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_samples(bad)
    for bad in (",", "8000-", "8000,8000"):
        with pytest.raises(argparse.ArgumentTypeError, match="neither a number nor a range|names no number"):
            parse_weeks(bad)


@pytest.mark.parametrize("kw", [
    {"budget": 21, "per_step_cap": 2, "per_step_cost_cap": None, "late_policy": "expire", "cost_profile": "unit"},
    {"budget": 30, "per_step_cap": 2, "per_step_cost_cap": 4, "late_policy": "execute", "cost_profile": "skewed"},
    {"budget": None, "per_step_cap": 1, "per_step_cost_cap": None, "late_policy": "expire", "cost_profile": "unit"},
])
def test_rest_values_equal_the_dp_for_every_first_action(monkeypatch, kw):
    """The planner's one call per drawn week (``rest_values``: shared link tables, Dinkelbach over caps-free
    relaxations) gives exactly the Set F1 of ``solve_problem`` for each first action's rest, the branch and
    bound's cases (a relaxation breaking a per-step cap) included. Early steps, where the budget makes resources
    without false positives compete with the others, check that their chains kept under every weight are scaled."""
    from itertools import combinations

    import membudget.teachers.hindsight_dp as hd
    from membudget.teachers.problem import problem_from_episode

    calls = []
    real = hd.solve_problem
    monkeypatch.setattr(hd, "solve_problem", lambda p, *a: calls.append(1) or real(p, *a))
    rng = np.random.default_rng(0)
    profile = kw.pop("cost_profile")
    checked = 0
    for week in (2000, 2001, 2005):
        ep = generate_episode(week, cost_profile=profile)
        for t in (10, 40, 62, 78):
            lq = np.where(rng.random(ep.n_resources) < 0.5, rng.integers(-1, t, ep.n_resources), -1)
            base = problem_from_episode(ep, lookahead=2, t0=t + 1, last_query=lq, **kw)
            firsts = [()] + [c for n in (1, 2) for c in combinations(range(ep.n_resources), n)][:14]
            lqs, buds, tpf, fpf = [], [], [], []
            for combo in firsts:
                q = lq.copy()
                q[list(combo)] = t
                lqs.append(q)
                spent = int(base.costs[list(combo)].sum())
                buds.append(None if base.budget_left is None else max(base.budget_left - spent, 0))
                tpf.append(base.tp_fixed + int(rng.integers(0, 3)))
                fpf.append(base.fp_fixed + int(rng.integers(0, 3)))
            got = hd.rest_values(base, lqs, buds, tpf, fpf)
            n_fallback = len(calls)
            want = [real(replace(base, last_query=q, budget_left=b, tp_fixed=a, fp_fixed=f)).f1
                    for q, b, a, f in zip(lqs, buds, tpf, fpf)]
            np.testing.assert_array_equal(got, want)
            assert len(calls) == n_fallback  # the reference solves did not go through the patched name
            checked += len(firsts)
    assert checked == 3 * 4 * 15
    if kw["per_step_cap"] == 1:
        assert calls, "no variant needed the branch and bound: the fallback went untested"


@pytest.mark.slow
def test_sampler_draws_do_not_depend_on_its_earlier_calls():
    """The tables kept across calls (per step; the new versions' onset cache), which every sampler of one world
    shares, change nothing: a sampler that has drawn for other steps and weeks draws exactly what a sampler on
    tables no call has filled draws."""
    from membudget.teachers.posterior import PosteriorSampler, _world_tables

    env = AgentView(PMWeekEnv(budget="B10", per_step_cap=2))
    records = {}
    for week in (2001, 2004):
        obs, _ = env.reset(seed=week)
        for t in range(40):
            if t in (20, 39):
                records[week, t] = env.observed
            obs, *_ = env.step(obs["mask"].astype(np.int8) * (np.arange(obs["mask"].size) < 2))
    used = PosteriorSampler.from_env(env.unwrapped, n_particles=32).fit()
    for rec in records.values():
        used.sample(rec, 4, np.random.default_rng(1))
    assert PosteriorSampler.from_env(env.unwrapped, n_particles=32).fit()._call_cache_ is used._call_cache_
    for rec in records.values():
        _world_tables.cache_clear()
        fresh = PosteriorSampler.from_env(env.unwrapped, n_particles=32).fit()
        assert fresh._call_cache_ is not used._call_cache_
        a = fresh.sample(rec, 4, np.random.default_rng(0))
        b = used.sample(rec, 4, np.random.default_rng(0))
        for name in ("rows", "n_rows", "visible", "log_weights", "source"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


@pytest.mark.slow
def test_sampler_draws_do_not_depend_on_what_its_reused_buffers_held():
    """Stage one's buffers are kept from one call to the next of the same size: filled with garbage between two
    calls, they change nothing that a call returns."""
    from membudget.teachers.posterior import PosteriorSampler

    env = AgentView(PMWeekEnv(budget="B10", per_step_cap=2))
    obs, _ = env.reset(seed=2004)
    for t in range(30):
        obs, *_ = env.step(obs["mask"].astype(np.int8) * (np.arange(obs["mask"].size) < 2))
    fresh = PosteriorSampler.from_env(env.unwrapped, n_particles=32).fit().weighted(env.observed, rng=0)
    used = PosteriorSampler.from_env(env.unwrapped, n_particles=32).fit()
    used.weighted(env.observed, rng=1)
    buf = used._draws_buffers_
    for a in (buf.rows, buf.n, buf.miss):
        a.fill(987654)
    for a in (buf.mc, buf.logw, buf.B, buf.sel):
        a.fill(np.nan)
    again = used.weighted(env.observed, rng=0)
    assert used._draws_buffers_ is buf
    for name in ("rows", "n_rows", "visible", "log_weights", "miss_cost"):
        np.testing.assert_array_equal(getattr(again, name), getattr(fresh, name))
    np.testing.assert_array_equal(used.expected_misses_, PosteriorSampler.from_env(env.unwrapped, n_particles=32).fit()
                                  .weighted(env.observed, rng=0).sampler.expected_misses_)
    assert "_draws_buffers_" not in pickle.loads(pickle.dumps(used)).__dict__


@pytest.mark.slow
@pytest.mark.parametrize("per_step_cap", [1, 2])
def test_particles_rest_values_equal_each_drawn_weeks_rest(monkeypatch, per_step_cap):
    """``Particles.rest_values`` (one kernel call for all the drawn weeks) gives exactly what
    ``hindsight_dp.rest_values`` gives on each week's :meth:`problem`, the branch and bound's variants included;
    on the last step, the Set F1 of the counts."""
    from itertools import combinations

    import membudget.teachers.hindsight_dp as hd
    from membudget.teachers.posterior import PosteriorSampler

    calls = []
    real = hd.solve_problem
    monkeypatch.setattr(hd, "solve_problem", lambda p, *a: calls.append(1) or real(p, *a))
    env = AgentView(PMWeekEnv(budget="B10", per_step_cap=per_step_cap))
    obs, _ = env.reset(seed=2001)
    for _ in range(24):  # one query, then none (the budget left makes clashes likely)
        a = np.zeros(obs["mask"].size, dtype=np.int8)
        if env.observed.last_query.max() < 0 and obs["mask"].any():
            a[np.argmax(obs["mask"])] = 1
        obs, *_ = env.step(a)
    seen = env.observed
    assert seen.last_query.max() >= 0
    draws = PosteriorSampler.from_env(env.unwrapped, n_particles=32).fit().sample(seen, 6, np.random.default_rng(0))
    R, t = seen.n_resources, seen.t
    firsts = [()] + [c for n in range(1, per_step_cap + 1) for c in combinations(range(R), n)][:12]
    chosen = np.zeros((len(firsts), R), dtype=np.int64)
    for j, c in enumerate(firsts):
        chosen[j, list(c)] = 1
    lqs = np.where(chosen == 1, t, seen.last_query[None, :])
    budgets = [seen.remaining_budget - int(seen.costs[list(c)].sum()) for c in firsts]
    rng = np.random.default_rng(1)
    weeks = np.array([0, 2, 5])
    tp_add, fp_add = rng.integers(0, 3, (3, len(firsts))), rng.integers(0, 3, (3, len(firsts)))
    kw = dict(budget_left=seen.remaining_budget, per_step_cap=per_step_cap, per_step_cost_cap=None)
    for t0 in (t + 1, seen.horizon):
        got = draws.rest_values(weeks, t0=t0, last_queries=lqs, budgets=budgets, tp_add=tp_add, fp_add=fp_add, **kw)
        assert got.shape == (3, len(firsts))
        for i, k in enumerate(weeks):
            base = draws.problem(int(k), t0=t0, **kw)
            tpf, fpf = base.tp_fixed + tp_add[i], base.fp_fixed + fp_add[i]
            if t0 >= seen.horizon:
                want = [hd.f1_of_counts(int(a), int(b), base.due) for a, b in zip(tpf, fpf)]
            else:
                want = hd.rest_values(base, lqs, budgets, tpf, fpf)
            np.testing.assert_array_equal(got[i], want)
    if per_step_cap == 1:
        assert calls, "no variant needed the branch and bound: the fallback went untested"


@pytest.mark.slow
def test_bench_label_speed_reports_minutes_per_1000_weeks_and_the_dp_ratio(capsys):
    from membudget.bench.online import main

    main(["--weeks", "2001", "--samples", "1", "--particles", "8", "--label-speed"])
    out = capsys.readouterr().out
    assert "hindsight DP:" in out and "ms CPU per week" in out
    assert "machine:" in out and "torch capability" in out  # a speed figure names its CPU
    assert "K=1 (particles 8):" in out and "labels for 1,000 weeks on 2 cores:" in out
    assert "times the DP's time per week" in out
    assert "processes" not in out
    main(["--weeks", "2001-2002", "--samples", "1", "--particles", "8", "--label-speed", "--workers", "2"])
    line = [x for x in capsys.readouterr().out.splitlines() if "the study's label task" in x]
    assert len(line) == 1 and line[0].startswith("K=1 (particles 8), the study's label task in 2 processes: ")
    assert "s wall for 2 weeks" in line[0] and "min per 1,000 weeks" in line[0]
    assert "times the DP's time per week" in line[0]
    for bad in (["--workers", "2"], ["--label-speed", "--workers", "0"]):
        with pytest.raises(SystemExit):
            main(["--weeks", "2001", *bad])


@pytest.mark.slow
def test_sampler_first_pass_stays_inside_its_arrays_with_few_particles(monkeypatch):
    """Without a miss guide the sampler's first pass draws min(M, max(16, M / 8)) weeks per resource into the
    first rows of the M-row arrays (more than M wrote past them: heap corruption with n_particles < 16)."""
    import membudget.teachers.posterior as post

    real = post._sample_resource
    seen = []

    def checked(rng, M, *args):
        out_rows, parts = args[16], args[-1]
        assert M <= out_rows.shape[0] and M <= parts.shape[0], "the first pass writes past its arrays"
        seen.append(M)
        return real(rng, M, *args)

    monkeypatch.setattr(post, "_sample_resource", checked)
    env = AgentView(PMWeekEnv(budget="B10", per_step_cap=2))
    obs, _ = env.reset(seed=2001)
    for _ in range(15):
        obs, *_ = env.step(np.zeros(obs["mask"].size, dtype=np.int8))
    sampler = post.PosteriorSampler.from_env(env.unwrapped, n_particles=8).fit()
    draws = sampler.weighted(env.observed, rng=np.random.default_rng(0))
    assert len(draws) == 8 and min(seen) == 8


def test_planner_gate_and_wrapper_default_to_the_studies_setting():
    """One default K for the planner, the Bayes-feature gate and the online-teacher wrapper: the studies' choice
    (K = 32 with 64 weighted draws)."""
    from membudget.teachers.online import DEFAULT_SAMPLES
    from membudget.wrappers import OnlineTeacher

    planner = HindsightPlanner(env=AgentView(PMWeekEnv(budget="B10"))).fit()
    gate = BayesFeatureGate(env=AgentView(PMWeekEnv(budget="B10", action_mode="scores"))).fit()
    wrapper = OnlineTeacher(PMWeekEnv(budget="B10"))
    assert DEFAULT_SAMPLES == 32
    for p in (planner, gate, wrapper.planner):
        assert p.n_samples == DEFAULT_SAMPLES and p.sampler_.n_particles == 64


class _TopHint:
    """A base policy for the rollout planner's tests: proposes the candidate with the highest hint; with
    ``every`` > 1 it carries a step counter as its state and proposes only on every ``every``-th step of a week."""

    def __init__(self, every=1, mode="scores"):
        self.every, self.mode = every, mode

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        mask = np.asarray(observation["mask"])
        single = mask.ndim == 1
        mask = mask.reshape(-1, mask.shape[-1])
        hint = np.asarray(observation["resources"]).reshape(*mask.shape, -1)[..., 11]
        best = np.argmax(np.where(mask > 0, hint, -1.0), axis=1)
        go = mask[np.arange(len(mask)), best] > 0
        if self.every > 1:
            state = np.zeros(len(mask), np.int64) if state is None else np.asarray(state).copy()
            if episode_start is not None:
                state[np.asarray(episode_start).reshape(-1)] = 0
            go &= state % self.every == 0
            state = state + 1
        out = np.zeros(mask.shape, np.int8) if self.mode == "binary" else np.full(mask.shape, -1.0, np.float32)
        out[np.flatnonzero(go), best[go]] = 1
        return (out[0] if single else out), state


@pytest.mark.slow
@pytest.mark.parametrize("every, mode", [(1, "scores"), (3, "binary")])
def test_rollout_values_are_the_base_played_on_every_draw_in_a_single_env(monkeypatch, every, mode):
    """Each action's value is the mean final Set F1 of the base played after it on each drawn week, counted once
    per posterior week kept (duplicates weighted): recomputed here one week at a time in PMWeekEnv (the drawn week
    replayed with the agent's queries, the action, then the base from the week's first step, its state carried)."""
    from membudget.teachers.online import RolloutPlanner
    from membudget.teachers.posterior import Particles

    made, nows = [], []
    episode, now = Particles.episode, RolloutPlanner._now
    monkeypatch.setattr(Particles, "episode", lambda self, i, rng=None: made.append(episode(self, i, rng)) or made[-1])
    monkeypatch.setattr(RolloutPlanner, "_now", lambda self, *a: nows.append(now(self, *a)) or nows[-1])
    base = _TopHint(every, mode)
    env = AgentView(PMWeekEnv(budget="B10", per_step_cap=2))
    planner = RolloutPlanner(env=env, base=base, base_action_mode=mode, n_samples=6, n_particles=6, seed=1).fit()
    obs, _ = env.reset(seed=2001)
    checked, duplicated = 0, 0
    for _ in range(30):
        made.clear()
        a, _ = planner.predict(obs)
        assert set(np.flatnonzero(a)) <= set(np.flatnonzero(obs["mask"])) and a.sum() <= 2
        if made:
            seen, draws = env.observed, nows[-1][1]
            copies = np.unique(draws.source, return_counts=True)[1]
            duplicated += int(copies.max() > 1)
            actions = planner.last_["actions"]
            f1 = np.zeros((len(made), len(actions)))
            for d, week in enumerate(made):
                for j, act in enumerate(actions):
                    single = PMWeekEnv(budget="B10", per_step_cap=2, action_mode=mode)
                    o, _ = single.reset(options={"episode": week})
                    state, start, done = None, True, False
                    for s in range(seen.t + 1):
                        _, state = base.predict(o, state, episode_start=np.array([start]))
                        start = False
                        row = np.zeros(11) if s == seen.t else seen.queried[s].astype(float)
                        row[list(act) if s == seen.t else []] = 1
                        o, _, done, _, info = single.step(row.astype(np.int8) if mode == "binary"
                                                          else np.where(row > 0, 1.0, -1.0).astype(np.float32))
                    while not done:
                        b, state = base.predict(o, state, episode_start=np.array([False]))
                        o, _, done, _, info = single.step(b)
                    f1[d, j] = info["episode_metrics"]["set_f1"]
            np.testing.assert_allclose(planner.last_["values"], copies @ f1 / copies.sum(), rtol=1e-12)
            assert np.argmax(planner.last_["values"]) == actions.index(tuple(np.flatnonzero(a)))
            checked += 1
        obs, *_ = env.step(a)
    assert checked >= 2 and duplicated >= 1


def test_rollout_planner_refuses_bad_settings():
    from membudget.teachers.online import RolloutPlanner

    env = AgentView(PMWeekEnv(budget="B10"))
    with pytest.raises(ValueError, match="base_action_mode"):
        RolloutPlanner(env=env, base=_TopHint(), base_action_mode="probabilities").fit()
    with pytest.raises(TypeError, match="predict"):
        RolloutPlanner(env=env, base=object()).fit()
    with pytest.raises(TypeError, match="AgentView"):
        RolloutPlanner(env=PMWeekEnv(budget="B10"), base=_TopHint()).fit()


@pytest.mark.slow
def test_bench_rollout_pairs_the_rollout_planner_with_the_planner(capsys):
    from membudget.bench.online import main
    from membudget.studies.online_ceiling import planner_week, rollout_week

    main(["--weeks", "2001", "--samples", "1", "--particles", "8", "--rollout"])
    out = capsys.readouterr().out
    planner, rollout = (task(("B10", 1, 8, 2001))["set_f1"] for task in (planner_week, rollout_week))
    row = next(line for line in out.splitlines() if line.startswith("2001"))
    assert [float(x) for x in row.split()[1:3]] == [round(planner, 4), round(rollout, 4)]
    assert f"Rollout K=1 - Planner K=1: {rollout - planner:+.4f}" in out
    assert "Rollout K=1: share of the DP - Sequential gap closed" in out


@pytest.mark.slow
def test_bench_planner_seeds_give_the_study_s_mean_over_seeds_per_week(capsys):
    from membudget.bench.online import main
    from membudget.studies.online_ceiling import planner_week

    want = {w: [planner_week(("B10", 1, 8, w, s))["set_f1"] for s in (0, 1)] for w in (2001, 2002)}
    for workers in ("1", "2"):
        main(["--weeks", "2001-2002", "--samples", "1", "--particles", "8", "--planner-seeds", "0,1", "--workers",
              workers])
        out = capsys.readouterr().out
        for w, f1 in want.items():
            row = next(line for line in out.splitlines() if line.startswith(str(w)))
            assert float(row.split()[1]) == round(float(np.mean(f1)), 4)
        per_seed = "; ".join(f"{np.mean([want[w][s] for w in want]):.4f}" for s in (0, 1))
        assert f"Planner K=1: planner seeds 0, 1: Set F1 per seed {per_seed};" in out
        assert "Planner K=1 - Sequential:" in out and "s per week (max" in out and ", CPU)" in out
    for bad in (["--planner-seeds", "0", "--rollout"], ["--planner-seeds", "0", "--label-speed"],
                ["--workers", "2"], ["--planner-seeds", "1-0"]):
        with pytest.raises(SystemExit):
            main(["--weeks", "2001", *bad])


def test_rollout_planner_keeps_the_vector_envs_of_its_last_sizes_only():
    from membudget.teachers.online import VENVS_KEPT, RolloutPlanner

    planner = RolloutPlanner(env=AgentView(PMWeekEnv(budget="B10")), base=_TopHint(), n_samples=2,
                             n_particles=8).fit()
    made = {n: planner._venv(n) for n in range(2, 2 + VENVS_KEPT + 4)}
    assert list(planner.venvs_) == list(range(6, 2 + VENVS_KEPT + 4))
    assert planner._venv(7) is made[7] and list(planner.venvs_)[-1] == 7
    assert planner._venv(2) is not made[2] and 6 not in planner.venvs_
    assert made[9].num_envs == 9 and made[9].budget == planner.env.unwrapped.budget


@pytest.mark.parametrize("cls", ["HindsightPlanner", "BayesFeatureGate"])
def test_act_before_fit_says_so(cls):
    import membudget.teachers.online as online
    from membudget.envs.pm.env import PMWeekEnv
    from membudget.teachers.observed import AgentView

    view = AgentView(PMWeekEnv(budget=20, action_mode="scores"))
    obs, _ = view.reset(seed=0)
    with pytest.raises(RuntimeError, match="not fitted yet; call fit"):
        getattr(online, cls)(env=view).act(view.observed, obs["mask"])


def test_bench_posterior_calibration_sets_the_planners_estimates_against_the_true_week(capsys):
    from membudget.bench.posterior_calibration import calibration_rows, main, reliability
    from membudget.teachers.current_greedy import _step_effects, firing

    r = calibration_rows([4000], "B10", 4, 8)
    n = r["p_resolve"].size
    assert n > 0 and all(r[k].size == n for k in ("resolves", "p_tp", "tp"))
    assert np.all(r["p_tp"] <= r["p_resolve"]) and np.all(r["tp"] <= r["resolves"])
    assert set(np.unique(r["p_resolve"] * 4)) <= {0, 1, 2, 3, 4}  # shares of K = 4 draws
    # the true week's outcome is what the environment does: at every step of a week, a query of a candidate alone
    # resolves something (a TP, FP, late miss or expired negative more than with no query) exactly where firing()
    # says an intention of that resource fires, and makes a TP exactly where _step_effects counts one
    from membudget.envs.pm.core import F_RES

    env = PMWeekEnv(budget=None, per_step_cap=2)
    obs, _ = env.reset(seed=4000)
    R = env.unwrapped.core.n_resources
    resolutions = lambda info: info["tp"] + info["fp"] + info["late_miss"] + info["expired_negative"]  # noqa: E731
    checked, done = np.zeros(2, dtype=int), False
    while not done:
        tab, _, fires = firing(env.unwrapped.core)
        fired = np.bincount(tab[fires, F_RES], minlength=R) > 0
        dtp = _step_effects(env.unwrapped.core, 0)[0]
        base = pickle.loads(pickle.dumps(env)).step(np.zeros(R, dtype=np.int8))[4]
        for c in np.flatnonzero(obs["mask"]):
            one = np.zeros(R, dtype=np.int8)
            one[c] = 1
            info = pickle.loads(pickle.dumps(env)).step(one)[4]
            assert (resolutions(info) > resolutions(base)) == fired[c]
            assert info["tp"] - base["tp"] == dtp[c]
            checked[int(fired[c])] += 1
        obs, _, done, _, _ = env.step(np.zeros(R, dtype=np.int8))
    assert checked.min() > 0  # both outcomes occur
    rows = reliability(np.array([0.0, 0.05, 0.05, 0.5, 1.0, 1.0]), np.array([0, 1, 0, 1, 1, 0]))
    expected = [("0", 1, 0.0, 0.0, 0.0), ("(0, 0.1)", 2, 0.05, 0.5, 0.5 / np.sqrt(2)),
                ("[0.5, 0.7)", 1, 0.5, 1.0, 0.0), ("1", 2, 1.0, 0.5, 0.5 / np.sqrt(2))]
    assert [row[:2] for row in rows] == [row[:2] for row in expected]
    assert np.allclose([row[2:] for row in rows], [row[2:] for row in expected], rtol=0, atol=1e-12)
    main(["--weeks", "4000", "--samples", "4", "--particles", "8"])
    out = capsys.readouterr().out
    assert f"{n} candidates" in out and "| p | candidates |" in out
    for flags in (["--samples", "0"], ["--budget", "B7"], ["--weeks", "x"]):
        with pytest.raises(SystemExit) as e:
            main(flags)
        assert e.value.code == 2

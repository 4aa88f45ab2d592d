"""The hindsight teacher as a wrapper: following ``info["teacher_action"]`` reproduces each teacher's value, after
any deviation the label is the optimum from the visited state, and the key batches in vector environments."""

import gymnasium as gym
import numpy as np
import pytest

import membudget  # noqa: F401
from membudget.envs.pm import PMWeekEnv, PMWeekVectorEnv
from membudget.teachers import HindsightDP
from membudget.wrappers import TEACHER_KEY, HindsightTeacher, HindsightTeacherVector, TeacherPolicy


def _follow(env, obs, info):
    done = False
    while not done:
        obs, _, term, trunc, info = env.step(info[TEACHER_KEY])
        done = term or trunc
    return info


@pytest.mark.parametrize("action_mode", ["binary", "scores"])
@pytest.mark.parametrize("seed", [8000, 9003])
def test_following_the_teacher_reproduces_the_dp(action_mode, seed):
    env = HindsightTeacher(PMWeekEnv(budget="B10", action_mode=action_mode))
    obs, info = env.reset(seed=seed)
    assert info[TEACHER_KEY].shape == env.action_space.shape and info[TEACHER_KEY].dtype == env.action_space.dtype
    dp = HindsightDP.from_env(env).solve(env.unwrapped.episode)
    end = _follow(env, obs, info)
    assert end["episode_metrics"]["set_f1"] == pytest.approx(dp.f1, abs=1e-12)
    assert env.teacher_solves == 1  # on the plan, nothing is re-solved
    assert np.all(end[TEACHER_KEY] == (0 if action_mode == "binary" else -1))  # neutral at the terminal state


@pytest.mark.parametrize("k", [1, 17, 45])
def test_after_a_deviation_the_label_is_the_continuation_from_the_visited_state(k):
    env = HindsightTeacher(PMWeekEnv(budget="B10", action_mode="scores"))
    obs, info = env.reset(seed=2005)
    rng = np.random.default_rng(k)
    for _ in range(k):
        obs, _, _, _, info = env.step(np.where(obs["mask"] > 0, rng.uniform(-1, 1, 11), -1).astype(np.float32))
    cont = HindsightDP.from_env(env).continuation(env)
    t = int(env.unwrapped.core.t[0])
    assert np.flatnonzero(info[TEACHER_KEY] > 0).tolist() == sorted(r for s, r in cont.schedule if s == t)
    assert _follow(env, obs, info)["episode_metrics"]["set_f1"] == pytest.approx(cont.f1, abs=1e-12)


def test_plan_mode_keeps_the_plan_fixed_at_reset():
    env = HindsightTeacher(PMWeekEnv(budget="B10"), mode="plan")
    obs, info = env.reset(seed=2005)
    plan = HindsightDP.from_env(env).solve(env.unwrapped.episode).schedule
    for t in range(30):
        assert np.flatnonzero(info[TEACHER_KEY]).tolist() == sorted(r for s, r in plan if s == t)
        obs, _, _, _, info = env.step(np.zeros(11, dtype=np.int8))  # never follows
    assert env.teacher_solves == 1


def test_vector_teacher_matches_single_envs_and_batches():
    venv = HindsightTeacherVector(PMWeekVectorEnv(num_envs=3, budget="B5", action_mode="scores"))
    singles = [HindsightTeacher(PMWeekEnv(budget="B5", action_mode="scores")) for _ in range(3)]
    obs, info = venv.reset(seed=8000)
    s_info = [e.reset(seed=8000 + i)[1] for i, e in enumerate(singles)]
    rng = np.random.default_rng(0)
    for _ in range(85):  # past the end of the week: autoreset included
        np.testing.assert_array_equal(info[TEACHER_KEY], np.stack([i[TEACHER_KEY] for i in s_info]))
        a = np.where(obs["mask"] > 0, rng.uniform(-1, 1, (3, 11)), -1).astype(np.float32)
        obs, _, term, _, info = venv.step(a)
        for i, e in enumerate(singles):
            if e.unwrapped.core.t[0] >= 80:
                s_info[i] = e.reset()[1]
                s_info[i] = {TEACHER_KEY: np.full(11, -1.0, np.float32)} if term[i] else s_info[i]
            else:
                s_info[i] = e.step(a[i])[4]
    policy = TeacherPolicy(venv)
    assert policy.predict(obs)[0].shape == (3, 11)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_info_key_batches_under_gymnasium_vector_envs(mode):
    venv = gym.make_vec("membudget/TierRouting-v0", num_envs=2, vectorization_mode=mode,
                        wrappers=[HindsightTeacher])
    try:
        _, info = venv.reset(seed=50_000)
        assert info[TEACHER_KEY].shape == (2,) and info[TEACHER_KEY].dtype == np.int64
        _, _, _, _, info = venv.step(info[TEACHER_KEY])
        assert info[TEACHER_KEY].shape == (2,)
    finally:
        venv.close()


@pytest.mark.parametrize("expected", [False, True])
def test_tier_teacher_reaches_the_oracle_combination(expected):
    from membudget.teachers.tier_oracle import HindsightTierOracle

    env = HindsightTeacher(gym.make("membudget/TierRouting-v0", strategy="capacity", lam=0.3), expected=expected)
    for seed in (50_000, 50_001, 50_002):
        obs, info = env.reset(seed=seed)
        best = HindsightTierOracle(env, lam=None, expected=expected).combination()
        info = _follow(env, obs, info)
        assert tuple(info["episode_metrics"]["tiers"]) == best


def test_replay_and_proactive_teachers():
    env = HindsightTeacher(gym.make("membudget/ReplayStream-v0", n_tasks=40))
    obs, info = env.reset(seed=42)
    best = env.unwrapped.stream.oracle_actions()
    seen = [int(info[TEACHER_KEY])]
    for t in range(39):
        obs, _, _, _, info = env.step(int(info[TEACHER_KEY]))
        seen.append(int(info[TEACHER_KEY]))
    assert seen == best[:40].tolist()

    env = HindsightTeacher(gym.make("membudget/ProactiveStream-v0", scope="sports"))
    obs, info = env.reset(seed=10_000)
    labels = env.unwrapped.stream.label
    decisions = []
    done = False
    while not done:
        if env.unwrapped.phase == 1:
            decisions.append(int(info[TEACHER_KEY]))
        else:
            assert int(info[TEACHER_KEY]) == 0  # the cheapest depth
        obs, _, done, _, info = env.step(int(info[TEACHER_KEY]))
    assert decisions == [int(x) for x in labels]


def test_unsupported_environments_and_modes_are_refused():
    with pytest.raises(TypeError, match="no hindsight teacher"):
        HindsightTeacher(gym.make("CartPole-v1"))
    with pytest.raises(ValueError, match="mode"):
        HindsightTeacher(PMWeekEnv(), mode="oracle")
    with pytest.raises(TypeError):
        TeacherPolicy(PMWeekEnv())


@pytest.mark.parametrize("seed", [2000, 2001, 2002])
def test_labels_equal_a_fresh_continuation_solve_at_every_visited_state(seed):
    """DAgger's labels: the wrapper (plan kept while followed) against solving from scratch at each state."""
    env = HindsightTeacher(PMWeekEnv(budget="B10", action_mode="scores"))
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    done = False
    while not done:
        cont = HindsightDP.from_env(env).continuation(env)
        t = int(env.unwrapped.core.t[0])
        assert np.flatnonzero(info[TEACHER_KEY] > 0).tolist() == sorted(r for s, r in cont.schedule if s == t)
        follow = rng.uniform() < 0.7  # a student that mostly agrees with the teacher
        a = info[TEACHER_KEY] if follow else np.where(obs["mask"] > 0, rng.uniform(-1, 1, 11), -1).astype(np.float32)
        obs, _, done, _, info = env.step(a)


@pytest.mark.slow
def test_the_docs_dagger_example_runs_against_the_wrapper_alone():
    import os
    import re
    import subprocess
    import sys

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "examples",
                        "dagger_wrapper.py")
    with open(path) as f:
        source = f.read()
    assert set(re.findall(r"^(?:from|import) (membudget[\w.]*)", source, re.M)) == {"membudget", "membudget.wrappers"}
    out = subprocess.run([sys.executable, path, "--quick"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert re.search(r"Set F1 0\.\d{4}$", out.stdout.strip())


def test_exact_cost_teacher_spends_exactly_that_and_reaches_its_optimum():
    env = HindsightTeacher(PMWeekEnv(budget=None), exact_cost=12)
    obs, info = env.reset(seed=9002)
    best = HindsightDP(budget=None).solve(env.unwrapped.episode, exact_cost=12)
    end = _follow(env, obs, info)
    assert end["episode_metrics"]["realized_cost"] == 12
    assert end["episode_metrics"]["set_f1"] == pytest.approx(best.f1, abs=1e-12)
    with pytest.raises(ValueError, match="exact_cost"):
        HindsightTeacher(gym.make("membudget/ReplayStream-v0"), exact_cost=3)


def test_teacher_rollouts_export_to_a_minari_dataset_that_recovers_the_environment(tmp_path, monkeypatch):
    import minari
    from minari import DataCollector

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    env = DataCollector(HindsightTeacher(gym.make("membudget/PMWeek-v0", budget="B10")), record_infos=False)
    policy = TeacherPolicy(env)
    f1 = []
    for week in (8000, 8001):
        obs, info = env.reset(seed=week)
        done = False
        while not done:
            obs, _, done, _, info = env.step(policy.predict(obs)[0])
        f1.append(info["episode_metrics"]["set_f1"])
    env.create_dataset(dataset_id="membudget/pmweek-teacher-v0", algorithm_name="HindsightDP")
    ds = minari.load_dataset("membudget/pmweek-teacher-v0")
    assert ds.total_episodes == 2 and ds.total_steps == 160
    np.testing.assert_allclose([e.rewards.sum() for e in ds.iterate_episodes()], f1)
    recovered = ds.recover_environment()
    assert isinstance(recovered, HindsightTeacher)
    _, info = recovered.reset(seed=8000)
    assert TEACHER_KEY in info


def test_vector_teacher_in_same_step_mode_labels_the_new_week_at_once():
    from gymnasium.vector import AutoresetMode

    venv = HindsightTeacherVector(PMWeekVectorEnv(num_envs=2, budget="B5", action_mode="scores",
                                                  autoreset_mode=AutoresetMode.SAME_STEP, max_episode_steps=12))
    single = HindsightTeacher(PMWeekEnv(budget="B5", action_mode="scores"))
    _, info = venv.reset(seed=8000)
    _, s_info = single.reset(seed=8000)
    for step in range(30):
        np.testing.assert_array_equal(info[TEACHER_KEY][0], s_info[TEACHER_KEY])
        _, _, _, trunc, info = venv.step(np.stack([info[TEACHER_KEY][0], info[TEACHER_KEY][1]]))
        s_info = single.step(s_info[TEACHER_KEY])[4]
        if trunc[0]:
            s_info = single.reset()[1]  # the vector env's slot 0 drew its next week from its own generator

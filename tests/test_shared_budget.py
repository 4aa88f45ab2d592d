"""The PettingZoo shared-budget environment: PettingZoo's own tests, equality with PMWeek-v0 for one agent, the
shared executor's invariants and fairness, bad arguments."""

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

from membudget.envs import shared_budget
from membudget.envs.pm import PMWeekEnv, budget_levels
from membudget.studies.execution import Executor


def test_pettingzoo_parallel_api():
    parallel_api_test(shared_budget.parallel_env(n_agents=3), num_cycles=200)


def test_pettingzoo_aec_api():
    api_test(shared_budget.env(n_agents=2), num_cycles=200)


def test_pettingzoo_seed_tests():
    parallel_seed_test(lambda: shared_budget.parallel_env(n_agents=2), num_cycles=100)
    seed_test(lambda: shared_budget.env(n_agents=2), num_cycles=100)


@pytest.mark.parametrize("kw", [dict(), dict(budget="B5", cost_profile="skewed", late_policy="execute"),
                                dict(budget=None, per_step_cost_cap=5, cost_profile="mild")])
def test_one_agent_equals_pmweek(kw):
    single = PMWeekEnv(action_mode="scores", **{k: v for k, v in kw.items()})
    shared = shared_budget.parallel_env(n_agents=1, **kw)
    o1, i1 = single.reset(seed=77)
    o2, i2 = shared.reset(seed=77)
    np.testing.assert_equal(i1, i2["agent_0"])
    rng = np.random.default_rng(0)
    for _ in range(80):
        for k in ("resources", "budget", "mask"):
            np.testing.assert_array_equal(o1[k], o2["agent_0"][k])
        a = rng.uniform(-1, 1, 11).astype(np.float32)
        o1, r1, t1, _, i1 = single.step(a)
        o2, r2, t2, _, i2 = shared.step({"agent_0": a})
        assert r1 == r2["agent_0"] and t1 == t2["agent_0"]
        # the same info, key for key, type for type (PMWeek-v0's step-info keys)
        assert list(i1) == list(i2["agent_0"])
        np.testing.assert_equal(i1, i2["agent_0"])
        assert all(type(i1[k]) is type(i2["agent_0"][k]) for k in i1 if k != "episode_metrics")


@pytest.mark.parametrize("n_agents", [2, 3, 5])
def test_shared_budget_and_caps_are_never_exceeded(n_agents):
    env = shared_budget.parallel_env(n_agents=n_agents, budget="B10", per_step_cap=3, per_step_cost_cap=6,
                                     cost_profile="mild")
    assert env.budget == n_agents * budget_levels(cost_profile="mild")["B10"]
    obs, _ = env.reset(seed=5)
    rng = np.random.default_rng(1)
    spent = 0
    while env.agents:
        acts = {a: np.where(obs[a]["mask"] > 0, rng.uniform(0, 1, 11), -1).astype(np.float32) for a in env.agents}
        obs, _, _, _, infos = env.step(acts)
        step_cost = sum(i["cost"] for i in infos.values())
        assert sum(len(np.flatnonzero(i["queried"])) for i in infos.values()) <= 3 and step_cost <= 6
        spent += step_cost
        assert spent <= env.budget and infos["agent_0"]["remaining_budget"] == env.budget - spent
        for a in infos:
            assert all(obs[a]["others"] >= 0)


def test_ties_do_not_favour_an_agent_index():
    wins = np.zeros(2)
    for seed in range(40):
        env = shared_budget.parallel_env(n_agents=2, budget=None, per_step_cap=1)
        obs, _ = env.reset(seed=seed)
        while env.agents:
            both = all(obs[a]["mask"].any() for a in env.agents)
            acts = {a: np.where(obs[a]["mask"] > 0, 0.5, -1).astype(np.float32) for a in env.agents}
            obs, _, _, _, infos = env.step(acts)
            if both:
                wins += [len(np.flatnonzero(infos["agent_0"]["queried"])), len(np.flatnonzero(infos["agent_1"]["queried"]))]
    share = wins[0] / wins.sum()
    assert wins.sum() > 200 and 0.42 < share < 0.58


def test_floor_gives_every_proposing_agent_its_queries():
    env = shared_budget.parallel_env(n_agents=3, budget=None, per_step_cap=3, floor=1)
    obs, _ = env.reset(seed=2)
    while env.agents:
        # agent_0 bids high on everything, the others low: without a floor agent_0 would take the whole cap
        acts = {a: np.where(obs[a]["mask"] > 0, 0.9 if a == "agent_0" else 0.1, -1).astype(np.float32)
                for a in env.agents}
        proposing = [a for a in env.agents if obs[a]["mask"].any()]
        obs, _, _, _, infos = env.step(acts)
        for a in proposing:
            assert len(np.flatnonzero(infos[a]["queried"])) >= 1


def test_cooperative_reward_is_the_team_mean():
    env = shared_budget.parallel_env(n_agents=3, cooperative=True)
    obs, _ = env.reset(seed=4)
    ind = shared_budget.parallel_env(n_agents=3)
    ind.reset(seed=4)
    rng = np.random.default_rng(3)
    while env.agents:
        acts = {a: rng.uniform(-1, 1, 11).astype(np.float32) for a in env.agents}
        _, r, *_ = env.step(acts)
        _, r_ind, *_ = ind.step(acts)
        assert len(set(r.values())) == 1
        assert r["agent_0"] == pytest.approx(np.mean(list(r_ind.values())))


def test_jain_index_closed_form():
    assert shared_budget.jain_index([1, 1, 1]) == 1.0
    assert shared_budget.jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    x = np.array([0.2, 0.5, 0.9])
    assert shared_budget.jain_index(x) == pytest.approx(x.sum() ** 2 / (3 * (x ** 2).sum()))
    with pytest.raises(ValueError):
        shared_budget.jain_index([-1.0])


@pytest.mark.parametrize("kw, match", [(dict(n_agents=0), "n_agents"), (dict(floor=-1), "floor"),
                                       (dict(budget=0), "budget"), (dict(per_step_cap=0), "per_step_cap"),
                                       (dict(cost_profile="gold"), "cost_profile")])
def test_bad_arguments_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        shared_budget.parallel_env(**kw)


def test_bad_actions_raise():
    env = shared_budget.parallel_env(n_agents=2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="missing"):
        env.step({"agent_0": np.zeros(11, dtype=np.float32)})
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        env.step({"agent_0": np.full(11, 2.0), "agent_1": np.zeros(11)})


def test_parallel_vec_env_follows_sb3_semantics():
    from membudget.agents.multiagent import ParallelVecEnv

    venv = ParallelVecEnv(n_copies=2, seed=3, n_agents=3)
    obs = venv.reset()
    assert venv.num_envs == 6 and obs["resources"].shape == (6, 11, 27) and obs["others"].shape == (6, 2)
    for t in range(80):
        venv.step_async(np.zeros((6, 11), dtype=np.float32))
        obs, rewards, dones, infos = venv.step_wait()
        assert rewards.shape == (6,) and dones.shape == (6,)
        if t < 79:
            assert not dones.any()
    assert dones.all() and all("terminal_observation" in i and "episode" not in i for i in infos)
    assert all(venv.observation_space[k].contains(obs[k][0]) for k in obs)  # already the next weeks


def test_shared_ppo_trains_and_bounds_bracket():
    from membudget.agents.multiagent import train_shared_ppo
    from membudget.studies.shared_quota import dp_bounds, play

    model = train_shared_ppo(2, "B10", total_timesteps=256, n_copies=1)
    f1 = play(lambda a, o: model.predict(o, deterministic=True)[0], 2, "B10", bases=(6000,))
    lo, hi = dp_bounds(2, "B10", bases=(6000, 6010))
    assert f1.shape == (1, 2) and np.all(lo <= hi + 1e-12) and np.all(f1 <= hi[:1] + 1e-12)


def test_int_and_level_budgets_give_the_same_target_fraction():
    a = shared_budget.parallel_env(n_agents=2, budget="B10")
    b = shared_budget.parallel_env(n_agents=2, budget=a.budget)
    oa, _ = a.reset(seed=1)
    ob, _ = b.reset(seed=1)
    assert a.budget == b.budget
    assert oa["agent_0"]["budget"][0] == pytest.approx(ob["agent_0"]["budget"][0], rel=0.05)


def test_impossible_floor_is_rejected_and_one_agent_observations_are_non_empty():
    with pytest.raises(ValueError, match="floor"):
        shared_budget.parallel_env(n_agents=2, per_step_cap=4, floor=5)
    env = shared_budget.parallel_env(n_agents=1)
    obs, _ = env.reset(seed=0)
    assert obs["agent_0"]["others"].shape == (1,) and obs["agent_0"]["others"][0] == 0.0


def test_shared_ppo_training_never_plays_evaluation_weeks():
    from membudget.agents.multiagent import ParallelVecEnv

    venv = ParallelVecEnv(n_copies=4, seed=2990, n_agents=2)
    for _ in range(60):
        assert all(2000 <= venv._week(i) <= 3989 for i in range(4))
        venv._seed += 40


def test_state_space_and_pettingzoo_state_test():
    import warnings

    from pettingzoo.test import state_test

    env = shared_budget.parallel_env(n_agents=3)
    env.reset(seed=6000)
    assert env.state_space.contains(env.state()) and env.state_space.shape == (3 * (27 * 11 + 9 + 11),)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        state_test(shared_budget.env(n_agents=3), shared_budget.parallel_env(n_agents=3))


def test_text_render_and_unsupported_mode_is_refused():
    env = shared_budget.parallel_env(n_agents=2, render_mode="ansi")
    assert env.render() == "shared budget: call reset() first"
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step"):
        env.step({a: np.zeros(11, np.float32) for a in env.possible_agents})
    env.reset(seed=6000)
    text = env.render()
    assert "agent_0" in text and "agent_1" in text and "step 0/80" in text
    with pytest.raises(ValueError, match=r"^render_mode must be None or one of .*'depth_array'"):
        shared_budget.parallel_env(render_mode="depth_array")


def test_step_takes_a_dict_of_actions():
    env = shared_budget.parallel_env(n_agents=2)
    env.reset(seed=0)
    with pytest.raises(TypeError, match="dict"):
        env.step([np.zeros(11, np.float32), np.zeros(11, np.float32)])


class _Reversed(Executor):
    """Tasks finishing in the reverse order (as remote workers may)."""

    def _run(self, fn, items, todo):
        for i in reversed(todo):
            yield i, fn(items[i])


def test_shared_quota_numbers_do_not_depend_on_the_task_order_and_resume(tmp_path):
    from membudget.agents import StaticGate
    from membudget.studies.shared_quota import dp_bounds, measure, play
    from membudget.teachers import build_label_dataset

    static = StaticGate().fit(build_label_dataset(range(2000, 2005), []))
    kw = dict(timesteps=256, agent_counts=(2,), levels=("B10",), progress=lambda m: None, bases=(6000, 6010),
              static=static)
    local = measure(**kw)
    np.testing.assert_equal(local, measure(**kw, executor=_Reversed(tmp_path)))
    resumed = Executor(tmp_path)
    np.testing.assert_equal(local, measure(**kw, executor=resumed))
    assert (resumed.computed, resumed.loaded) == (0, 3)
    assert list(local) == [(2, "B10")] and list(local[(2, "B10")]) == ["Static", "PPO", "DP bounds"]
    thr = static.threshold_for("B10")
    np.testing.assert_equal(local[(2, "B10")]["Static"],
                            play(lambda a, o: static.action_for(o, thr), 2, "B10", bases=(6000, 6010)))
    np.testing.assert_equal(local[(2, "B10")]["DP bounds"], dp_bounds(2, "B10", bases=(6000, 6010)))
    assert local[(2, "B10")]["PPO"].shape == (2, 2)


def test_shared_ppo_task_trains_on_one_thread_and_restores_the_callers(monkeypatch):
    import torch

    from membudget.studies import shared_quota

    class Idle:
        def predict(self, obs, deterministic):
            return np.full(11, -1, np.float32), None

    seen = []
    monkeypatch.setattr(shared_quota, "train_shared_ppo", lambda *args: seen.append(torch.get_num_threads()) or Idle())
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        f1 = shared_quota.setting_task(None, 256, (6000,), (2, "B10", "PPO"))
        assert seen == [1] and torch.get_num_threads() == 2 and f1.shape == (1, 2)
    finally:
        torch.set_num_threads(threads)
    with pytest.raises(ValueError, match="unknown policy"):
        shared_quota.setting_task(None, 256, (6000,), (2, "B10", "Random"))


def test_shared_budget_command_passes_bad_backend_input_to_a_clear_error(tmp_path):
    from membudget.studies.shared_quota import main

    with pytest.raises(ValueError, match="--address needs --backend ray"):
        main(["--address", "auto", "--out", str(tmp_path / "page.md")])
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("n_agents", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 5])
def test_every_agent_reports_the_shared_budgets_exhaustion_step(n_agents, seed):
    """The budget is shared, so each agent's exhaustion step (PMWeek-v0's: the step after which the remainder is
    below the cheapest price) is the same: the step at which the shared remaining budget falls below one query
    (unit prices). Agents that spent nothing on that step reported a later one before."""
    env = shared_budget.parallel_env(n_agents=n_agents, budget="B10")
    obs, infos = env.reset(seed=seed)
    step, shared = 0, -1
    while env.agents:
        obs, _, _, _, infos = env.step({a: np.ones(11, np.float32) for a in env.agents})
        step += 1
        if shared < 0 and infos[env.possible_agents[0]]["remaining_budget"] < 1:
            shared = step
    assert shared > 0
    assert [infos[a]["episode_metrics"]["exhaustion_step"] for a in env.possible_agents] == [shared] * n_agents

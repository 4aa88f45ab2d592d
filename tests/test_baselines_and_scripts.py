"""Reference allocators (policy protocol), evaluate.py, train.py and the calibration command."""

from __future__ import annotations

import csv
import json
import os
import re

import numpy as np
import pytest

import membudget  # noqa: F401
from membudget.baselines import AllRelevant, RandomFeasible
from membudget.envs.pm import PMWeekEnv, PMWeekVectorEnv, budget_levels
from membudget.envs.pm.levels import all_relevant_costs
from membudget.studies.protocol import machine

R, T = 11, 80


def _observations(env, n_steps=T, seed=0):
    """Observations of one week under empty proposals (the candidate mask does not depend on the actions)."""
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for _ in range(n_steps - 1):
        obs, *_ = env.step(np.zeros(env.action_space.shape, dtype=env.action_space.dtype))
        out.append(obs)
    return out


@pytest.fixture(scope="module")
def week_obs():
    return _observations(PMWeekEnv(), seed=3)


@pytest.fixture(scope="module")
def batched_obs():
    venv = PMWeekVectorEnv(num_envs=4)
    obs, _ = venv.reset(seed=10)
    out = [obs]
    for _ in range(T - 1):
        obs, *_ = venv.step(np.zeros((4, R), dtype=np.int8))
        out.append(obs)
    return out


POLICIES = [
    pytest.param(lambda: AllRelevant(), id="AllRelevant"),
    pytest.param(lambda: RandomFeasible(per_step_cap=2, seed=0), id="RandomFeasible-cap2"),
    pytest.param(lambda: RandomFeasible(per_step_cap=None, seed=0), id="RandomFeasible-nocap"),
]


@pytest.mark.parametrize("make_policy", POLICIES)
def test_policy_protocol_single(make_policy, week_obs):
    policy = make_policy()
    space = PMWeekEnv().action_space
    assert sum(o["mask"].any() for o in week_obs) > 10
    for obs in week_obs:
        action, state = policy.predict(obs)
        assert isinstance(action, np.ndarray) and action.shape == (R,)
        assert state is None
        assert space.contains(action)
        assert np.all(action <= obs["mask"]), "proposed a non-candidate"
    token = object()
    _, state = policy.predict(week_obs[0], state=token, episode_start=np.ones(1, bool), deterministic=False)
    assert state is token


@pytest.mark.parametrize("make_policy", POLICIES)
def test_policy_protocol_batched(make_policy, batched_obs):
    policy = make_policy()
    space = PMWeekVectorEnv(num_envs=4).action_space
    for obs in batched_obs:
        action, state = policy.predict(obs, episode_start=np.zeros(4, dtype=bool))
        assert isinstance(action, np.ndarray) and action.shape == (4, R)
        assert state is None
        assert space.contains(action)
        assert np.all(action <= obs["mask"])


def test_all_relevant_proposes_every_candidate(week_obs, batched_obs):
    for obs in week_obs:
        np.testing.assert_array_equal(AllRelevant().predict(obs)[0], obs["mask"])
    for obs in batched_obs:
        np.testing.assert_array_equal(AllRelevant().predict(obs)[0], obs["mask"])


@pytest.mark.parametrize("cap", [1, 2, 3, None])
def test_random_feasible_proposes_min_cap_candidates(cap, week_obs, batched_obs):
    policy = RandomFeasible(per_step_cap=cap, seed=1)
    for obs in week_obs + batched_obs:
        action, _ = policy.predict(obs)
        mask = np.atleast_2d(obs["mask"])
        a = np.atleast_2d(action)
        n_cand = mask.sum(axis=1)
        expected = n_cand if cap is None else np.minimum(cap, n_cand)
        np.testing.assert_array_equal(a.sum(axis=1), expected)
        assert np.all(a <= mask)


def test_random_feasible_is_reproducible(week_obs):
    def actions(seed):
        policy = RandomFeasible(per_step_cap=1, seed=seed)
        return np.stack([policy.predict(o)[0] for o in week_obs])

    np.testing.assert_array_equal(actions(5), actions(5))
    assert not np.array_equal(actions(5), actions(6))


def _choice_loop(rng, mask, cap):
    """RandomFeasible's definition, one ``Generator.choice`` per row."""
    action = np.zeros(mask.shape, dtype=np.int8)
    for i, row in enumerate(mask):
        cand = np.flatnonzero(row)
        k = cand.size if cap is None else min(cap, cand.size)
        if k:
            action[i, rng.choice(cand, size=k, replace=False)] = 1
    return action


@pytest.mark.parametrize("cap", [1, 2, 3, 7, None])
@pytest.mark.parametrize("n_res", [1, 5, R, 64])
def test_random_feasible_draws_the_stream_of_numpy_choice(cap, n_res):
    """The compiled sampler gives the actions of the per-row ``choice`` loop and leaves the generator in the same
    state, over masks from empty to full."""
    masks = np.random.default_rng(n_res).random((400, n_res)) < np.linspace(0, 1, 400)[:, None]
    policy = RandomFeasible(per_step_cap=cap, seed=11)
    rng = np.random.default_rng(11)
    for part in np.array_split(masks, 7):
        np.testing.assert_array_equal(policy.predict({"mask": part})[0], _choice_loop(rng, part, cap))
    assert policy.rng_.integers(1 << 62) == rng.integers(1 << 62)


@pytest.mark.parametrize("cap", [2, None])
def test_random_feasible_matches_choice_past_10000_candidates(cap):
    """numpy switches to a partial shuffle when it takes more than a 50th of over 10,000 candidates."""
    mask = np.ones((2, 10_003), dtype=bool)
    mask[1, ::3] = False
    policy, rng = RandomFeasible(per_step_cap=cap, seed=3), np.random.default_rng(3)
    np.testing.assert_array_equal(policy.predict({"mask": mask})[0], _choice_loop(rng, mask, cap))
    assert policy.rng_.integers(1 << 62) == rng.integers(1 << 62)


def test_random_feasible_bad_input(week_obs):
    with pytest.raises(ValueError, match="per_step_cap must be a positive int"):
        RandomFeasible(per_step_cap=0).predict(week_obs[0])
    with pytest.raises(ValueError, match="1 or 2 dimensions"):
        RandomFeasible().predict({"mask": np.zeros((2, 2, R))})
    with pytest.raises(ValueError, match="1 or 2 dimensions"):
        AllRelevant().predict({"mask": np.zeros((2, 2, R))})


@pytest.mark.parametrize("cost_profile", ["unit", "skewed"])
def test_all_relevant_realises_the_reference_cost(cost_profile):
    seeds = [2000, 2001, 2002, 4005]
    env = PMWeekEnv(budget=None, per_step_cap=None, cost_profile=cost_profile)
    policy = AllRelevant()
    realised, f1 = [], []
    for s in seeds:
        obs, _ = env.reset(seed=s)
        terminated = False
        skipped = 0
        while not terminated:
            obs, _, terminated, _, info = env.step(policy.predict(obs)[0])
            skipped += sum(v for k, v in info.items() if k.startswith("skipped_"))
        assert skipped == 0, "without a budget or caps nothing All-relevant proposes is skipped"
        realised.append(info["episode_metrics"]["realized_cost"])
        f1.append(info["episode_metrics"]["set_f1"])
    costs, metrics = all_relevant_costs(seeds, cost_profile=cost_profile)
    np.testing.assert_array_equal(np.array(realised, dtype=np.float64), costs)
    np.testing.assert_allclose(f1, metrics[:, 0], rtol=0, atol=1e-12)
    assert min(realised) > 0


# ----------------------------------------------------------------------------------------------- evaluate


@pytest.fixture(scope="module")
def small_suite():
    from membudget.studies.suite import fit_suite

    return fit_suite(dev_seeds=range(2000, 2005), temporal_budgets=("B10",), analysis_seeds=range(4000, 4002))


@pytest.mark.slow
def test_evaluate_main(tmp_path, capsys, monkeypatch, small_suite):
    import membudget.studies.budgetpm as budgetpm
    from membudget import evaluate

    monkeypatch.setattr(budgetpm, "fit_suite", lambda **kw: small_suite)
    argv = ["--policies", "AllRelevant", "RandomFeasible", "Static", "Sequential", "DeadlineOutcome", "--budgets",
            "B10", "--first-seed", "6000", "--n-weeks", "3", "--repetitions", "1", "--bootstrap", "200", "--sweep",
            "--out", str(tmp_path)]
    rows = evaluate.main(argv)
    out = capsys.readouterr().out
    assert "weeks 6000-6002" in out and "| B10 | Sequential |" in out and "Cost to match" in out
    assert re.search(r"^\| B10 \| AllRelevant \| \d\.\d{4} \| [+-]\d\.\d{4} \[", out, re.M), out
    with open(tmp_path / "results.json") as f:
        res = json.load(f)
    assert {"config", "command", "versions", "rows", "sweeps"} <= res.keys()
    assert res["config"]["n_weeks"] == 3 and res["config"]["budgets"] == ["B10"] and res["config"]["sweep"] is True
    assert budgetpm.parse_args(res["command"].split()[3:]) == budgetpm.parse_args(argv)
    assert res["versions"]["numpy"] == np.__version__
    assert res["machine"] == machine()
    assert (tmp_path / "results.md").read_text().startswith("PMWeek-v0")
    assert (tmp_path / "frontiers.png").stat().st_size > 1000
    assert [len(v) for v in res["sweeps"].values()] == [20, 20, 20]
    # the numbers are those of the policies on weeks 6000-6002
    all_rel = next(r for r in rows if r["policy"] == "AllRelevant")
    costs, metrics = all_relevant_costs(range(6000, 6003))
    np.testing.assert_array_equal(all_rel["realized_cost"], costs)
    np.testing.assert_allclose(all_rel["set_f1"], metrics[:, 0], atol=1e-12)
    for r in rows:
        if r["policy"] != "AllRelevant":
            assert np.all(r["realized_cost"] <= budget_levels()["B10"])


def test_evaluate_quick_runs_end_to_end(capsys, monkeypatch, small_suite):
    import membudget.studies.budgetpm as budgetpm
    from membudget import evaluate

    monkeypatch.setattr(budgetpm, "fit_suite", lambda **kw: small_suite)
    rows = evaluate.main(["--quick", "--bootstrap", "200"])
    out = capsys.readouterr().out
    assert "weeks 9000-9029" in out and "| B60 | Static |" in out
    assert {r["policy"] for r in rows} >= {"AllRelevant", "Static", "Sequential", "PacingLB"}


def test_bootstrap_ci_constant():
    from membudget.studies.protocol import bootstrap_ci

    mean, lo, hi = bootstrap_ci(np.full(25, 0.37), n_resamples=500)
    assert mean == pytest.approx(0.37, abs=1e-12)
    assert lo == hi == pytest.approx(0.37, abs=1e-12)


@pytest.mark.parametrize("level, z", [(0.95, 1.959964), (0.90, 1.644854)])
def test_bootstrap_ci_normal_approximation(level, z):
    from membudget.studies.protocol import bootstrap_ci

    rng = np.random.default_rng(12345)
    x = rng.normal(2.0, 3.0, size=2000)
    mean, lo, hi = bootstrap_ci(x, n_resamples=3000, seed=0, level=level)
    assert mean == pytest.approx(x.mean(), abs=1e-12)
    expected = z * x.std(ddof=1) / np.sqrt(x.size)
    assert (hi - lo) / 2 == pytest.approx(expected, rel=0.12)
    assert (lo + hi) / 2 == pytest.approx(mean, abs=0.2 * expected)
    assert bootstrap_ci(x, n_resamples=3000, seed=0, level=level) == (mean, lo, hi)


@pytest.mark.parametrize("n", [1, 7, 60, 61])
def test_bootstrap_ci_equals_one_draw_of_all_resamples(n):
    """Resampling in blocks draws the same indices as one draw of every resample at once."""
    from membudget.studies.protocol import bootstrap_ci

    x = np.random.default_rng(n).random(n)
    means = x[np.random.default_rng(3).integers(0, n, size=(2500, n))].mean(axis=1)
    assert bootstrap_ci(x, n_resamples=2500, seed=3) == (float(x.mean()), float(np.quantile(means, 0.025)),
                                                          float(np.quantile(means, 0.975)))


@pytest.mark.parametrize("bad", [[], np.zeros((3, 2))])
def test_bootstrap_ci_bad_input(bad):
    from membudget.studies.protocol import bootstrap_ci

    with pytest.raises(ValueError, match="non-empty 1-D"):
        bootstrap_ci(bad)


# ---------------------------------------------------------------------------------------------- train


def test_train_ppo_smoke(tmp_path, capsys):
    from stable_baselines3 import PPO

    from membudget import train

    run_dir = train.main(["sb3-ppo", "--total-timesteps", "1024", "--n-steps", "256", "--eval-weeks", "2", "--out",
                          str(tmp_path), "--progress-bar", "off"])
    assert os.path.dirname(os.path.normpath(run_dir)) == str(tmp_path)
    assert sorted(os.listdir(run_dir)) == ["config.json", "learning_curve.csv", "learning_curve.png", "metrics.csv",
                                           "model.zip"]
    with open(os.path.join(run_dir, "config.json")) as f:
        cfg = json.load(f)
    assert cfg["seed"] == 0 and cfg["config"]["total_timesteps"] == 1024 and cfg["config"]["n_steps"] == 256
    assert isinstance(cfg["versions"], dict) and cfg["versions"]["stable-baselines3"]
    assert cfg["machine"] == machine()
    assert cfg["command"].startswith("python -m membudget.train sb3-ppo")
    with open(os.path.join(run_dir, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["seed"]) for r in rows] == [4010, 4011]
    for r in rows:
        assert 0.0 <= float(r["set_f1"]) <= 1.0
        assert 0.0 <= float(r["realized_cost"]) <= budget_levels()["B10"]
    assert "weeks 4010-4011 (validation-range) B10: Set F1" in capsys.readouterr().out  # not called held-out

    model = PPO.load(os.path.join(run_dir, "model.zip"), device="cpu")
    assert model.num_timesteps >= 1024
    env = PMWeekEnv()
    obs, _ = env.reset(seed=4000)
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(np.asarray(action, dtype=np.int8))
    env.step(action)  # the env accepts it as is
    venv = PMWeekVectorEnv(num_envs=3)
    vobs, _ = venv.reset(seed=0)
    actions, _ = model.predict(vobs, deterministic=True)
    assert venv.action_space.contains(np.asarray(actions, dtype=np.int8))


# -------------------------------------------------------------------------------------------- calibrate


def test_calibrate_command(capsys):
    from membudget.envs.pm.__main__ import main

    main(["calibrate", "--n-weeks", "3"])
    out = capsys.readouterr().out
    assert "seeds 2000-2002 (3 weeks)" in out
    m = re.search(r"^all_relevant_cost\s+(\d+\.\d+)\s", out, re.M)
    assert m, out
    costs, _ = all_relevant_costs(range(2000, 2003))
    assert float(m.group(1)) == pytest.approx(costs.mean(), abs=5e-4)
    assert re.search(r"^steps\s+80\.000\s", out, re.M)
    assert "budget levels (unit costs): B5=" in out



def test_run_records_name_the_version_of_every_learning_library():
    """sb3-maskable-ppo trains sb3-contrib's MaskablePPO (and every per-resource SB3 policy imports sb3-contrib):
    its version is recorded beside Stable-Baselines3's and torch's."""
    from importlib import metadata

    from membudget.studies.protocol import package_versions

    versions = package_versions()
    for name in ("stable-baselines3", "sb3-contrib", "torch", "numpy", "gymnasium"):
        assert versions[name] == metadata.version(name), name


def test_machine_records_the_cpu_with_fixed_keys():
    import platform

    import torch

    m = machine()
    assert list(m) == ["cpu", "cpu_id", "logical_cores", "platform", "architecture", "torch_cpu_capability"]
    assert m["logical_cores"] == os.cpu_count() and m["architecture"] == platform.machine()
    assert m["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()  # torch is imported here
    if os.path.exists("/proc/cpuinfo") and platform.machine() in ("x86_64", "AMD64"):
        with open("/proc/cpuinfo") as f:
            text = f.read()
        assert m["cpu"] in text and m["cpu_id"].startswith("family ")
    json.dumps(m)  # what run records write


def test_machine_line_names_the_cpu_its_cores_and_torchs_capability():
    from membudget.studies.protocol import machine_line

    record = {"cpu": "AMD EPYC", "cpu_id": "family 25, model 17, stepping 1", "logical_cores": 2,
              "platform": "Linux", "architecture": "x86_64", "torch_cpu_capability": "AVX512"}
    assert machine_line(record) == ("machine: AMD EPYC (family 25, model 17, stepping 1), 2 logical cores, "
                                    "torch CPU capability AVX512")
    bare = dict(record, cpu=None, cpu_id=None, torch_cpu_capability=None)
    assert machine_line(bare) == "machine: unknown CPU, 2 logical cores"
    assert machine_line() == machine_line(machine())


def test_random_baselines_draw_from_the_seed_they_hold_at_their_first_decision():
    """The constructor only stores ``seed``; the generator is made at the first decision, so a seed set after
    construction (as set_params or a copy would) is the one used."""
    from membudget.baselines.pm import RandomFeasible
    from membudget.baselines.tiers import RandomTiers

    obs = {"mask": np.ones((4, 11), dtype=np.int8)}
    late = RandomFeasible(seed=1)
    late.seed = 7
    assert np.array_equal(late.predict(obs)[0], RandomFeasible(seed=7).predict(obs)[0])
    tiers = RandomTiers(seed=1)
    tiers.seed = 7
    assert np.array_equal(tiers.predict(np.zeros((5, 21)))[0], RandomTiers(seed=7).predict(np.zeros((5, 21)))[0])
    with pytest.raises(ValueError, match="seed"):
        RandomFeasible(seed=-1).predict(obs)


def test_random_feasible_refuses_a_bool_cap_and_a_mask_that_is_not_0_or_1():
    with pytest.raises(ValueError, match="per_step_cap"):
        RandomFeasible(per_step_cap=True).predict({"mask": np.ones(3, dtype=np.int8)})
    for bad in (np.array([np.nan, 1.0, 0.0]), np.array([0.5, 1.0, 0.0])):
        with pytest.raises(ValueError, match="0 and 1 only"):
            RandomFeasible(seed=0).predict({"mask": bad})
        with pytest.raises(ValueError, match="0 and 1 only"):
            AllRelevant().predict({"mask": bad})

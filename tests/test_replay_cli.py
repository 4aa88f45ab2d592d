"""CLI entry points for ReplayStream (v1 by default, v0 kept): ``train replay-ppo`` and ``evaluate replay`` on a reduced
setting."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from membudget import evaluate, train
from membudget.agents.linucb import LinUCB
from membudget.agents.replay_ppo import make_env, train_ppo
from membudget.baselines.replay import HindsightOracle, reference_baselines
from membudget.studies import limbo
from membudget.studies.execution import Executor
from run_dirs import sb3_run


@pytest.fixture(autouse=True)
def _in_a_temporary_folder(tmp_path, monkeypatch):
    """``evaluate replay`` writes into ``./runs/replay/<time>/`` by default: here, a temporary folder."""
    monkeypatch.chdir(tmp_path)


def test_train_replay_ppo_writes_run_dir(tmp_path, capsys):
    run_dir = train.main(["replay-ppo", "--profile", "weak", "--total-timesteps", "128", "--n-steps", "128",
                          "--batch-size", "128", "--n-tasks", "100", "--eval-seeds", "42,43", "--seed", "1",
                          "--out", str(tmp_path), "--name", "r"])
    assert run_dir == str(tmp_path / "r")
    cfg, rows = sb3_run(run_dir, "replay-ppo", seed=1)
    assert cfg["config"]["profile"] == "weak" and cfg["config"]["n_tasks"] == 100
    assert [int(r["seed"]) for r in rows] == [42, 43]
    assert all(0.0 <= float(r["accuracy"]) <= 1.0 and int(r["total_tokens"]) > 0 for r in rows)
    assert "accuracy" in capsys.readouterr().out
    # the current world by default (v0 before): the saved model replays its rows on ReplayStream-v1
    from stable_baselines3 import PPO

    from membudget.studies.limbo import run_policy

    assert cfg["config"]["version"] == 1
    model = PPO.load(os.path.join(run_dir, "model.zip"), device="cpu")
    again = run_policy(model, family="db", profile="weak", seed=42, n_tasks=100, version=1)
    assert int(rows[0]["total_tokens"]) == again["total_tokens"]


def test_a_replay_ppo_run_records_its_training_like_every_run(tmp_path):
    """config.json of a replay-ppo run holds the training totals, torch's thread count and the machine as recorded
    after training (torch's CPU capability), as every other training subcommand's does."""
    run_dir = train.main(["replay-ppo", "--profile", "weak", "--total-timesteps", "64", "--n-steps", "64",
                          "--batch-size", "64", "--n-epochs", "1", "--n-tasks", "50", "--eval-seeds", "42",
                          "--out", str(tmp_path), "--name", "r"])
    with open(os.path.join(run_dir, "config.json")) as f:
        meta = json.load(f)
    import torch

    assert meta["training"]["env_steps"] >= 64 and meta["training"]["wall_clock_s"] > 0
    assert meta["training"]["torch_threads"] == torch.get_num_threads() == 1  # the default: one thread
    assert meta["machine"]["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()


def test_train_replay_ppo_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit):
        train.main(["replay-ppo", "--family", "sql", "--out", str(tmp_path)])
    for seeds in ("x", "3-1", "42,42"):  # refused with the flags, before any work, on one line
        with pytest.raises(SystemExit) as e:
            train.main(["replay-ppo", "--eval-seeds", seeds, "--out", str(tmp_path)])
        assert e.value.code == 2 and "eval_seeds" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_evaluate_replay_prints_table_and_writes_outputs(tmp_path, capsys):
    rows = evaluate.main(["replay", "--families", "os", "--profiles", "mid", "--seeds", "42", "--bootstrap", "200",
                          "--out", str(tmp_path)])
    out = capsys.readouterr().out
    agents = {r["agent"] for r in rows}
    assert {"no-replay", "fixed-k16", "retrieved-k1", "gsc-n5", "linucb", "oracle"} <= agents
    for name in ("os × mid", "linucb", "frontier:", "Comparison with LIMBO's claims",
                 "command: python -m membudget.evaluate replay"):
        assert name in out
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["seeds"] == [42] and len(res["rows"]) == len(rows)
    lin = next(r for r in res["rows"] if r["agent"] == "linucb")
    assert 0.0 <= lin["accuracy"][0] <= 1.0 and len(lin["seed_actions"][0]) == 500
    assert "os × mid" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "replay_frontier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_replay_is_deterministic_and_rejects_bad_arguments(capsys, tmp_path):
    a = evaluate.main(["replay", "--families", "db", "--profiles", "weak", "--seeds", "43", "--bootstrap", "100"])
    (run,) = (tmp_path / "runs" / "replay").iterdir()  # like every study: a new run folder by default
    assert {f.name for f in run.iterdir()} == {"results.json", "results.md", "replay_frontier.png"}
    b = evaluate.main(["replay", "--families", "db", "--profiles", "weak", "--seeds", "43", "--bootstrap", "100",
                       "--out", ""])
    for x, y in zip(a, b):
        assert x["agent"] == y["agent"] and x["runs"][0]["total_tokens"] == y["runs"][0]["total_tokens"]
        assert (x["runs"][0]["actions"] == y["runs"][0]["actions"]).all()
    with pytest.raises(SystemExit):
        evaluate.main(["replay", "--profiles", "huge"])
    for sub, flag, bad in [("replay", "--alpha-decay", "0"), ("replay", "--alpha-decay", "nan"),
                           ("replay-alpha", "--decays", "-2"), ("replay-alpha", "--decays", "fast")]:
        with pytest.raises(SystemExit):
            evaluate.main([sub, flag, bad])
    assert "a decay must be 'none' or a finite number > 0" in capsys.readouterr().err


def test_evaluate_replay_alpha_decay_flag_reaches_linucb(capsys):
    args = ["replay", "--families", "os", "--profiles", "weak", "--seeds", "42", "--bootstrap", "50", "--alpha", "0.5"]
    decayed = {r["agent"]: r for r in evaluate.main([*args, "--alpha-decay", "20"])}["linucb"]["runs"][0]
    assert "LinUCB alpha=0.5 decay=20 " in capsys.readouterr().out
    constant = {r["agent"]: r for r in evaluate.main([*args, "--alpha-decay", "none"])}["linucb"]["runs"][0]
    direct = limbo.run_bandit(LinUCB(alpha=0.5, alpha_decay=20.0), family="os", profile="weak", seed=42,
                              cost_weight=0.5, version=1)
    assert (decayed["actions"] == direct["actions"]).all() and not (constant["actions"] == direct["actions"]).all()


def test_evaluate_dispatch_keeps_default_and_subcommands(monkeypatch):
    from membudget.studies import budgetpm, limbo

    calls = []
    monkeypatch.setattr(limbo, "replay_main", lambda argv: calls.append(("replay", argv)))
    monkeypatch.setattr(budgetpm, "parse_args", lambda argv: calls.append(("default", argv)) or (_ for _ in ()).throw(
        RuntimeError("stop")))
    evaluate.main(["replay", "--seeds", "42"])
    with pytest.raises(RuntimeError, match="stop"):
        evaluate.main(["--quick"])
    assert calls == [("replay", ["--seeds", "42"]), ("default", ["--quick"])]


@pytest.mark.parametrize("name", sorted(evaluate.SUBCOMMANDS))
def test_every_evaluate_subcommand_resolves_and_has_help(name, capsys):
    with pytest.raises(SystemExit) as e:
        evaluate.main([name, "--help"])
    assert e.value.code == 0 and f"python -m membudget.evaluate {name}" in capsys.readouterr().out


class _Reversed(Executor):
    """Tasks finishing in the reverse order (as remote workers may)."""

    def _run(self, fn, items, todo):
        for i in reversed(todo):
            yield i, fn(items[i])


def assert_same_rows(a, b):
    assert [(r["family"], r["profile"], r["agent"]) for r in a] == [(r["family"], r["profile"], r["agent"]) for r in b]
    for x, y in zip(a, b):
        assert len(x["runs"]) == len(y["runs"])
        for u, v in zip(x["runs"], y["runs"]):
            assert u.keys() == v.keys()
            for k in u:
                assert np.array_equal(u[k], v[k]), (x["agent"], k)


@pytest.fixture
def one_torch_thread():
    """A tiny PPO update runs many times slower on two threads that other processes contend for."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.slow
def test_replay_study_in_reverse_task_order_equals_the_streams_played_one_by_one(monkeypatch, one_torch_thread):
    trained = []  # the PPO task's model, trained on one short rollout (64 steps, one minibatch)
    monkeypatch.setattr(limbo, "train_ppo", lambda **kw: trained.append(train_ppo(**kw, n_steps=64, batch_size=64))
                        or trained[-1])
    rows = limbo.evaluate(("os",), ("weak",), (42, 43), bandit=limbo.Bandit(0.3), ppo_timesteps=64,
                          executor=_Reversed())
    (model,) = trained
    direct = []
    for name, pol in [*reference_baselines().items(), ("linucb", None), ("ppo", model), ("oracle", None)]:
        direct.append({"family": "os", "profile": "weak", "agent": name, "runs": [
            limbo.run_bandit(LinUCB(alpha=0.3), family="os", profile="weak", seed=s, cost_weight=0.5)
            if name == "linucb" else
            limbo.run_policy(pol or HindsightOracle(None), family="os", profile="weak", seed=s) for s in (42, 43)]})
    assert_same_rows(rows, direct)  # the PPO row: the model shipped as bytes plays as the trained one
    no_ppo = [r for r in rows if r["agent"] != "ppo"]
    assert_same_rows(limbo.evaluate(("os",), ("weak",), (42, 43), bandit=limbo.Bandit(0.3)), no_ppo)


def test_select_alpha_in_reverse_task_order_equals_the_mean_over_streams():
    grid = limbo.bandit_grid((0.0, 0.5), decays=(None, 10))
    streams = [("db", "weak", 1), ("db", "weak", 2), ("os", "weak", 1), ("os", "weak", 2)]
    best, scores = limbo.select_alpha(grid, (1, 2), ("db", "os"), ("weak",), executor=_Reversed())
    assert [(b.alpha, b.alpha_decay, b.hybrid_own) for b in scores] == [(0.0, None, None), (0.0, 10.0, None),
                                                                         (0.5, None, None), (0.5, 10.0, None)]
    for b in scores:
        runs = [limbo.run_bandit(LinUCB(alpha=b.alpha, alpha_decay=b.alpha_decay), family=f, profile=p, seed=s,
                                 cost_weight=0.5) for f, p, s in streams]
        fixed = [limbo.fixed_scale_reward(r, limbo.stream_of(f, p, s)) for r, (f, p, s) in zip(runs, streams)]
        assert scores[b] == (np.mean([r["mean_reward"] for r in runs]), np.mean(fixed),
                             np.mean([r["accuracy"] for r in runs]), np.mean([r["tokens"].mean() for r in runs]))
    assert scores[limbo.Bandit(0.5)] != scores[limbo.Bandit(0.5, 10.0)]
    assert scores[best][0] == max(v[0] for v in scores.values())
    by_fixed, _ = limbo.select_alpha(grid, (1, 2), ("db", "os"), ("weak",), criterion="fixed-scale")
    assert scores[by_fixed][1] == max(v[1] for v in scores.values())
    with pytest.raises(ValueError, match="criterion must be one of"):
        limbo.select_alpha(grid, (1,), criterion="accuracy")
    assert limbo.select_alpha(grid, (1, 2), ("db", "os"), ("weak",)) == (best, scores)


@pytest.mark.parametrize("sub", ["replay", "replay-alpha"])
def test_replay_commands_pass_bad_backend_input_to_make_executor(sub):
    with pytest.raises(ValueError, match="--address needs --backend ray"):
        evaluate.main([sub, "--address", "auto"])
    with pytest.raises(SystemExit):
        evaluate.main([sub, "--backend", "dask"])


def test_replay_study_trains_ppo_on_the_version_it_plays(monkeypatch, one_torch_thread):
    trained = []
    monkeypatch.setattr(limbo, "train_ppo", lambda **kw: trained.append(train_ppo(**kw, n_steps=64, batch_size=64))
                        or trained[-1])
    rows = limbo.evaluate(("db",), ("weak",), (42,), ppo_timesteps=64, version=1)
    (model,) = trained
    assert type(model.get_env().envs[0].unwrapped).__name__ == "ReplayStreamV1Env"
    ppo = next(r for r in rows if r["agent"] == "ppo")["runs"][0]
    direct = limbo.run_policy(model, family="db", profile="weak", seed=42, version=1)
    assert all(np.array_equal(ppo[k], direct[k]) for k in direct)
    assert not np.array_equal(ppo["tokens"], limbo.run_policy(model, family="db", profile="weak", seed=42,
                                                                version=0)["tokens"])


def test_diagnose_bandit_on_the_first_task_by_hand():
    # before any update every head is 0 and every bonus alpha · |(x, 1)|, so the first choice is action 0 (ties to the
    # lowest index); with no running maximum yet every action's normalised cost is 1
    d = limbo.diagnose_bandit("db", "weak", (3,), bandit=limbo.Bandit(0.5), action=5, windows=((0, 1), (0, 500)))
    env = make_env("db", "weak", version=1)
    obs, _ = env.reset(seed=3)
    p = env.unwrapped.stream.prob
    (first, whole) = d["windows"]
    assert first["tasks"] == (0, 1) and first["share"] == 0.0
    assert first["bonus"] == pytest.approx(0.5 * np.sqrt(np.sum(obs.astype(float) ** 2) + 1))
    assert first["head_rmse"] == pytest.approx(np.sqrt(np.mean(p[0] ** 2)))
    assert first["head_error"] == pytest.approx(-p[0, 5])
    assert first["margin"] == pytest.approx(p[0, 5] - p[0, 0]) and first["gain"] == pytest.approx(p[0, 0] - p[0, 5])
    r = limbo.run_bandit(LinUCB(alpha=0.5), family="db", profile="weak", seed=3, version=1)
    assert d["mean_reward"] == pytest.approx(r["mean_reward"])
    assert d["fixed_scale_reward"] == pytest.approx(r["accuracy"] - 0.5 * r["tokens"].mean()
                                                    / env.unwrapped.stream.tokens.max())
    assert whole["share"] == pytest.approx(np.mean(r["actions"] == 5))
    assert d["top_action_tasks"] == [int(np.bincount(r["actions"]).max())]


def test_action_profile_is_each_action_s_true_value_averaged_over_the_streams():
    prof = limbo.action_profile("db", "strong", (3, 7))
    streams = []
    for seed in (3, 7):
        env = make_env("db", "strong", version=1)
        env.reset(seed=seed)
        streams.append(env.unwrapped.stream)
    reward = [[st.prob[:, a].mean() - 0.5 * st.tokens[:, a].mean() / st.tokens.max() for a in range(12)]
              for st in streams]
    np.testing.assert_allclose(prof["prob"], [np.mean([st.prob[:, a].mean() for st in streams]) for a in range(12)])
    np.testing.assert_allclose(prof["tokens"], [np.mean([st.tokens[:, a].mean() for st in streams]) for a in range(12)])
    np.testing.assert_allclose(prof["fixed_scale_reward"], np.mean(reward, axis=0))
    assert prof["gap"].min() == 0.0 and np.all(prof["gap"] >= 0)
    with pytest.raises(ValueError, match="development seeds"):
        limbo.action_profile(seeds=(0, 43))


def test_diagnose_bandit_refuses_report_seeds_and_bad_configs():
    with pytest.raises(ValueError, match="development seeds"):
        limbo.diagnose_bandit(seeds=(1, 42))
    with pytest.raises(SystemExit):
        evaluate.main(["replay-diagnose", "--configs", "0.3"])
    with pytest.raises(SystemExit):
        evaluate.main(["replay-diagnose", "--configs", "-1:none"])


def test_hybrid_model_reaches_the_study_and_its_action_features_are_mode_and_tier():
    from membudget.agents.linucb import HybridLinUCB
    from membudget.envs.replay.world import BUDGETS, MODES, action_index

    for mode in MODES:
        for budget in BUDGETS:
            f = limbo.REPLAY_ACTION_FEATURES[action_index(mode, budget)]
            assert f.tolist() == [float(m == mode) for m in MODES] + [float(b == budget) for b in BUDGETS]
    best, scores = limbo.select_alpha(limbo.bandit_grid((0.3,), hybrids=(None, 10.0)), (1,), ("db",), ("weak",),
                                      version=1)
    hybrid = limbo.run_bandit(HybridLinUCB(action_features=limbo.REPLAY_ACTION_FEATURES, own_l2_lambda=10.0,
                                           alpha=0.3), family="db", profile="weak", seed=1, version=1)
    h = limbo.Bandit(0.3, hybrid_own=10.0)
    assert scores[h][0] == hybrid["mean_reward"] and scores[h][2] == hybrid["accuracy"]
    assert scores[limbo.Bandit(0.3)] != scores[h]
    rows = evaluate.main(["replay", "--families", "db", "--profiles", "weak", "--seeds", "42", "--bootstrap", "50",
                          "--alpha", "0.3", "--alpha-decay", "none", "--hybrid-own", "10"])
    played = {r["agent"]: r for r in rows}["linucb"]["runs"][0]
    direct = limbo.run_bandit(HybridLinUCB(action_features=limbo.REPLAY_ACTION_FEATURES, own_l2_lambda=10.0,
                                           alpha=0.3), family="db", profile="weak", seed=42, version=1)
    assert (played["actions"] == direct["actions"]).all()
    for sub, flag in [("replay", "--hybrid-own"), ("replay-alpha", "--hybrids")]:
        with pytest.raises(SystemExit):
            evaluate.main([sub, flag, "0"])
    with pytest.raises(SystemExit):
        evaluate.main(["replay-diagnose", "--configs", "0.3:none:-1"])


@pytest.mark.parametrize("module", ["membudget.agents.replay_ppo", "membudget.studies.limbo",
                                    "membudget.agents.proactive_ppo", "membudget.studies.proactmem"])
def test_every_function_and_config_defaults_to_the_latest_world_version(module):
    """One default per world family: the Python functions play the version the commands and configs play (the
    replay functions defaulted to v0 while ``evaluate replay`` played v1)."""
    import importlib
    import inspect

    mod = importlib.import_module(module)
    latest = importlib.import_module(module.replace("studies.limbo", "agents.replay_ppo")
                                     .replace("studies.proactmem", "agents.proactive_ppo")).LATEST_VERSION
    assert latest == 1
    seen = 0
    for name, obj in vars(mod).items():
        if inspect.isfunction(obj) and obj.__module__ == mod.__name__:
            p = inspect.signature(obj).parameters.get("version")
            if p is not None and p.default is not inspect.Parameter.empty:
                assert p.default == latest, f"{module}.{name}(version={p.default})"
                seen += 1
        if inspect.isclass(obj) and obj.__module__ == mod.__name__ and hasattr(obj, "__dataclass_fields__") \
                and "version" in obj.__dataclass_fields__:
            assert obj().version == latest, f"{module}.{name}().version"
            seen += 1
    assert seen


def test_replay_study_plays_the_versions_own_linucb_by_default(monkeypatch):
    played = []
    monkeypatch.setattr(limbo, "_stream_task_item", lambda fixed, item: played.append((fixed[0], fixed[3])) or {})
    for version in (0, 1):
        limbo.evaluate(("db",), ("weak",), (42,), version=version)
    assert set(played) == {(limbo.BANDITS[0], 0), (limbo.BANDITS[1], 1)}
    played.clear()
    limbo.evaluate(("db",), ("weak",), (42,))
    assert set(played) == {(limbo.V1_BANDIT, 1)}
    for call in (lambda: limbo.evaluate(("db",), ("weak",), (42,), version=2),
                 lambda: limbo.diagnose_bandit("db", "weak", (3,), version=2)):
        with pytest.raises(ValueError, match="unknown ReplayStream version 2"):
            call()


@pytest.mark.parametrize("version", [0, 1])
def test_replay_diagnose_plays_the_versions_own_linucb_by_default(version, monkeypatch, capsys):
    diagnosed = []
    monkeypatch.setattr(limbo, "action_profile", lambda *a, **k: {x: np.zeros(12) for x in
                                                                  ("prob", "tokens", "fixed_scale_reward", "gap")})
    monkeypatch.setattr(limbo, "diagnose_bandit", lambda *a, bandit, version: diagnosed.append((bandit, version))
                        or {"mean_reward": 0.0, "fixed_scale_reward": 0.0, "top_action_tasks": [0], "windows": []})
    limbo.diagnose_main(["--env-version", str(version)])
    assert diagnosed == [(limbo.BANDITS[version], version)]

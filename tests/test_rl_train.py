"""train.py's PMWeek subcommands end to end at tiny scale; saved models load (also through evaluate.py) and act."""

import csv
import json
import os
import re

import pytest

from membudget import train
from membudget.agents.rl import load_policy
from membudget.envs.pm import PMWeekVectorEnv

TINY_PPO = ["--total-timesteps", "256", "--n-envs", "4", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1",
            "--eval-every", "128", "--eval-weeks", "2", "--progress-bar", "off"]
TINY_IMIT = ["--train-weeks", "2", "--epochs", "2", "--eval-weeks", "2", "--progress-bar", "off"]
TINY_DAGGER = [*TINY_IMIT, "--iterations", "1"]  # (bc has no iterations)


def _check_run(run_dir, subcommand, model_file, budgets=("B10",)):
    files = sorted(os.listdir(run_dir))
    assert files == sorted(["config.json", "metrics.csv", "learning_curve.csv", "learning_curve.png", model_file])
    with open(os.path.join(run_dir, "config.json")) as f:
        meta = json.load(f)
    assert meta["subcommand"] == subcommand and meta["seed"] == 0
    assert meta["command"].startswith(f"python -m membudget.train {subcommand}")
    assert meta["versions"]["torch"] and meta["training"]["env_steps"] > 0
    with open(os.path.join(run_dir, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [(r["budget"], int(r["seed"])) for r in rows] == [(b, s) for b in budgets for s in (4010, 4011)]
    assert all(0.0 <= float(r["set_f1"]) <= 1.0 for r in rows)
    with open(os.path.join(run_dir, "learning_curve.csv")) as f:
        curve = list(csv.DictReader(f))
    assert curve and {"env_steps", "wall_clock", "val_set_f1"} <= set(curve[0])
    # the saved model loads by path and acts in the environment it was trained for
    policy, kw = load_policy(run_dir)
    env = PMWeekVectorEnv(num_envs=2, budget=budgets[0], **kw)
    obs, _ = env.reset(seed=4000)
    action, _ = policy.predict(obs, deterministic=True)
    env.step(action)
    return meta


@pytest.mark.parametrize("sub", ["sb3-ppo", "sb3-maskable-ppo"])
@pytest.mark.parametrize("policy", ["per-resource", "mlp"])
def test_ppo_subcommands(tmp_path, sub, policy):
    run_dir = train.main([sub, *TINY_PPO, "--policy", policy, "--learning-curve", "on", "--out", str(tmp_path)])
    meta = _check_run(run_dir, sub, "model.zip")
    assert os.path.basename(run_dir) == f"{sub}-B10-seed0" and meta["config"]["n_envs"] == 4
    model = load_policy(run_dir)[0]
    sb3 = getattr(model, "model", model)
    assert type(sb3.policy).__name__.endswith("PerResourceActorCriticPolicy") == (policy == "per-resource")


TINY_NATIVE = ["--total-timesteps", "640", "--n-envs", "4", "--n-minibatches", "2", "--eval-every", "320",
               "--eval-weeks", "2", "--progress-bar", "off"]


def test_ppo_native_and_distil_then_rl(tmp_path):
    student_dir = train.main(["dagger", *TINY_DAGGER, "--hidden", "16", "--out", str(tmp_path)])
    run_dir = train.main(["ppo", *TINY_NATIVE, "--hidden", "16,16", "--init-from", student_dir,
                          "--bc-coef", "0.5", "--bc-weeks", "2", "--out", str(tmp_path)])
    meta = _check_run(run_dir, "ppo", "model.npz")
    assert meta["config"]["init_from"] == student_dir and meta["config"]["hidden"] == [16, 16]
    with open(os.path.join(run_dir, "learning_curve.csv")) as f:
        assert [int(r["env_steps"]) for r in csv.DictReader(f)] == [0, 320, 640]
    with pytest.raises(SystemExit):
        train.main(["ppo", "--critic-counts", "maybe", "--out", str(tmp_path)])


def test_a_ppo_run_records_what_auto_resolved_to_and_torch_s_threads(tmp_path):
    """config.json keeps engine / critic_dtype / compiled_backend as given ("auto"); the record says what they
    resolved to on this machine (results are reproducible per engine, dtype and backend), the env steps of the kept
    actor and torch's thread count."""
    run_dir = train.main(["ppo", *TINY_NATIVE, "--hidden", "16,16", "--learning-curve", "off", "--out", str(tmp_path)])
    with open(os.path.join(run_dir, "config.json")) as f:
        meta = json.load(f)
    assert meta["config"]["engine"] == "auto" and meta["config"]["critic_dtype"] == "auto"
    policy, _ = load_policy(run_dir)
    recorded = meta["training"]
    for key in ("engine", "critic_dtype", "compiled_backend", "selected_env_steps"):
        assert recorded[key] == policy.config[key], key
    assert recorded["engine"] == "autograd" and recorded["compiled_backend"] == "none"  # auto: a short run
    assert recorded["selected_env_steps"] in (0, 320, 640) and recorded["torch_threads"] == 1


def test_ppo_conditioned_subcommand(tmp_path):
    run_dir = train.main(["sb3-ppo-conditioned", *TINY_PPO[:2], "--envs-per-budget", "2", "--n-steps", "32",
                          "--batch-size", "64", "--n-epochs", "1", "--eval-weeks", "2", "--progress-bar", "off",
                          "--budgets", "B5,B20", "--out", str(tmp_path)])
    _check_run(run_dir, "sb3-ppo-conditioned", "model.zip", budgets=("B5", "B20"))


def test_the_library_the_command_line_and_the_study_train_one_ppo():
    """One source of truth: PPOConfig's defaults are the study's PPO settings and the ppo subcommand's defaults."""
    import dataclasses

    from membudget.agents.ppo import PPOConfig
    from membudget.studies.rl_vs_distillation import BENCH_FULL, NativePPOConfig

    assert BENCH_FULL["ppo"] == PPOConfig()
    assert list(BENCH_FULL["val_seeds"]) == list(range(4000, 4000 + PPOConfig().eval_episodes))
    cli = train.commands()["ppo"]
    assert cli.config is NativePPOConfig and not cli.defaults
    flags = NativePPOConfig()
    assert all(getattr(flags, f.name) == f.default for f in dataclasses.fields(PPOConfig))
    assert PPOConfig().engine == "auto" and PPOConfig().keep_best and PPOConfig().total_timesteps == 4_000_000


def test_library_defaults_train_the_study_s_ppo_weight_for_weight(tmp_path):
    """A short run three ways — train_ppo with the defaults, the study's training job, the ppo subcommand — with the
    same overrides: the library and the command line give the same weights, and the study's job the same validation
    curve and held-out scores."""
    import numpy as np
    import torch

    from membudget.agents.per_resource import StudentPolicy
    from membudget.agents.ppo import PPOConfig, train_ppo
    from membudget.envs.pm.rollout import rollout
    from membudget.studies.rl_vs_distillation import BENCH_FULL, BENCH_QUICK, training_job

    short = dict(total_timesteps=2 * 4 * 80, n_envs=4, n_minibatches=2, eval_every=4 * 80, engine="autograd")
    lib, history = train_ppo("B10", seed=1, **short)
    study = training_job(("PPO", "B10", 1, dict(BENCH_QUICK, val_seeds=BENCH_FULL["val_seeds"], eval_seeds=(8000, 8001),
                                        ppo=PPOConfig(**short)), None))
    run_dir = train.main(["ppo", "--seed", "1", "--total-timesteps", "640", "--n-envs", "4", "--n-minibatches", "2",
                          "--eval-every", "320", "--engine", "autograd", "--eval-weeks", "1", "--progress-bar", "off",
                          "--learning-curve", "off", "--out", str(tmp_path)])
    cli = StudentPolicy.load(os.path.join(run_dir, "model.npz"))
    for a, b in zip(lib.net.state_dict().values(), cli.net.state_dict().values()):
        assert torch.equal(a, b)
    assert [r["val_set_f1"] for r in study["history"]] == [r["val_set_f1"] for r in history]
    mine = rollout(lib, [8000, 8001], budget="B10", per_step_cap=2, action_mode="scores")
    np.testing.assert_array_equal(study["per_week"]["set_f1"], mine["set_f1"])
    assert lib.config["engine"] == "autograd" and lib.config["selected_env_steps"] in (0, 320, 640)


def test_renamed_subcommands_still_work_with_a_warning(tmp_path):
    with pytest.warns(DeprecationWarning, match="ppo-conditioned.*sb3-ppo-conditioned"):
        run_dir = train.main(["ppo-conditioned", *TINY_PPO[:2], "--envs-per-budget", "2", "--n-steps", "32",
                              "--batch-size", "64", "--n-epochs", "1", "--eval-weeks", "1", "--progress-bar", "off",
                              "--learning-curve", "off", "--budgets", "B5", "--out", str(tmp_path)])
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["subcommand"] == "sb3-ppo-conditioned"


def test_a_run_s_config_json_is_a_config_file_that_resolves_to_the_same_config(tmp_path):
    from membudget.studies.rl_vs_distillation import NativePPOConfig
    from membudget.studies.runs import load_config_file, resolve_config

    cfg = NativePPOConfig(hidden=(32, 16), context=False, critic_counts=True, learning_rate=3e-4, budget="B5")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dataclasses_asdict(cfg)))
    assert resolve_config(NativePPOConfig, {}, load_config_file(str(path))) == cfg
    yaml_path = tmp_path / "config.yaml"
    yaml_path.write_text("hidden: 32,16\ncontext: off\ncritic_counts: on\nlearning_rate: 3.0e-4\nbudget: B5\n")
    assert resolve_config(NativePPOConfig, {}, load_config_file(str(yaml_path))) == cfg
    with pytest.raises(ValueError, match="hidden"):
        resolve_config(NativePPOConfig, {}, {"hidden": [0, 4]})
    with pytest.raises(ValueError, match="keep_best must be on or off"):
        resolve_config(NativePPOConfig, {}, {"keep_best": "yes"})


def dataclasses_asdict(cfg):
    import dataclasses

    return dataclasses.asdict(cfg)


@pytest.mark.parametrize("sub", ["bc", "dagger"])
def test_imitation_subcommands(tmp_path, sub):
    run_dir = train.main([sub, *(TINY_DAGGER if sub == "dagger" else TINY_IMIT), "--out", str(tmp_path)])
    _check_run(run_dir, sub, "model.npz")


@pytest.mark.parametrize("threads", [None, "0"])
def test_an_imitation_run_gives_the_weights_of_its_seed_in_a_multi_seed_run(tmp_path, threads):
    """Float sums depend on torch's thread count: a single run trains with one thread (``torch_threads``), as each seed
    of ``--seeds`` does, whatever torch's default on this machine; ``--torch-threads 0`` keeps the default."""
    import numpy as np
    import torch

    given = ["--torch-threads", threads] if threads else []
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # a two-core machine's default
    try:
        single = train.main(["bc", *TINY_IMIT, *given, "--seed", "1", "--name", "one", "--out", str(tmp_path)])
        threads_used = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    (multi,) = train.main(["bc", *TINY_IMIT, "--seeds", "1", "--name", "many", "--out", str(tmp_path)])
    with open(os.path.join(single, "config.json")) as f:
        assert json.load(f)["training"]["torch_threads"] == threads_used == (1 if threads is None else 2)
    if threads is None:  # (with two threads the weights differ here, but a machine may round alike)
        a, b = np.load(os.path.join(single, "model.npz")), np.load(os.path.join(multi, "model.npz"))
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_config_file_and_flag_override(tmp_path, fmt):
    pytest.importorskip("yaml") if fmt == "yaml" else None
    path = tmp_path / f"cfg.{fmt}"
    if fmt == "json":
        path.write_text(json.dumps({"total-timesteps": 128, "n_envs": 2, "n_steps": 32, "batch_size": 64,
                                    "n_epochs": 1, "eval_weeks": 2, "budget": "B5", "seed": 3,
                                    "progress_bar": "off", "learning_rate": 1}))
    else:
        path.write_text("total_timesteps: 128\nn_envs: 2\nn_steps: 32\nbatch_size: 64\nn_epochs: 1\n"
                        "eval_weeks: 2\nbudget: B5\nseed: 3\nprogress_bar: 'off'\nnet_arch: [16, 16]\n")
    run_dir = train.main(["sb3-ppo", "--config", str(path), "--budget", "B20", "--out", str(tmp_path)])
    with open(os.path.join(run_dir, "config.json")) as f:
        cfg = json.load(f)["config"]
    assert cfg["budget"] == "B20"  # the flag overrides the file
    assert cfg["seed"] == 3 and cfg["n_envs"] == 2 and cfg["total_timesteps"] == 128  # the file overrides defaults
    assert os.path.basename(run_dir) == "sb3-ppo-B20-seed3"
    if fmt == "json":
        assert cfg["learning_rate"] == 1.0
    else:
        assert cfg["net_arch"] == [16, 16]


def refused(capsys, argv, match, main=train.main):
    """``main(argv)`` refuses with one line on stderr matching ``match`` and exit status 2."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and re.search(match, err) and err.endswith("\n") and err.count("\n") == 1, err


def test_config_file_errors(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"no_such_flag": 1}))
    refused(capsys, ["ppo", "--config", str(bad), "--out", str(tmp_path)], "unknown keys")
    bad.write_text(json.dumps({"total_timesteps": "many"}))
    refused(capsys, ["ppo", "--config", str(bad), "--out", str(tmp_path)], "total_timesteps must be int")
    bad.write_text("__import__('os')")
    refused(capsys, ["ppo", "--config", str(bad), "--out", str(tmp_path)], "not valid JSON")
    assert os.listdir(tmp_path) == ["bad.json"]  # no run directory


def test_same_seed_same_model(tmp_path):
    dirs = [train.main(["sb3-ppo", *TINY_PPO, "--out", str(tmp_path / str(i))]) for i in range(2)]
    rows = []
    for d in dirs:
        with open(os.path.join(d, "metrics.csv")) as f:
            rows.append(f.read())
    assert rows[0] == rows[1]


@pytest.mark.slow
def test_evaluate_loads_model_by_path(tmp_path, capsys):
    from membudget.studies import budgetpm
    from membudget.studies.suite import fit_suite

    run_dir = train.main(["sb3-maskable-ppo", *TINY_PPO, "--out", str(tmp_path)])
    cfg = budgetpm.EvalConfig(policies=["Static"], budgets=["B10"], first_seed=8000, n_weeks=2, model=[run_dir],
                              reference="Static", bootstrap=100)
    suite = fit_suite(dev_seeds=range(2000, 2005), temporal_budgets=("B10",), analysis_seeds=range(4000, 4002))
    results, _ = budgetpm.run(cfg, suite=suite)
    names = [r["policy"] for r in results]
    assert names == ["Static", f"model:{run_dir}"]
    assert 0.0 <= results[1]["set_f1"].mean() <= 1.0 and "diff_vs_reference" in results[1]


def test_parse_budgets_accept_levels_integers_and_none(tmp_path):
    from membudget.studies.rl_vs_distillation import ImitationConfig
    from membudget.studies.runs import parse_budget, resolve_config

    assert parse_budget("B10") == "B10" and parse_budget("21") == 21 and parse_budget("none") is None
    cfg = resolve_config(ImitationConfig, {}, {"budget": 21})
    assert cfg.budget == "21"
    run_dir = train.main(["bc", *TINY_IMIT, "--budget", "21", "--out", str(tmp_path)])
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["config"]["budget"] == "21"


def test_evaluate_refuses_missing_models_and_unknown_policies_before_fitting(monkeypatch, capsys):
    from membudget import evaluate
    from membudget.studies import budgetpm

    monkeypatch.setattr(budgetpm, "fit_suite", lambda **kw: pytest.fail("fitted before checking the inputs"))
    refused(capsys, ["--model", "missing.zip", "--progress-bar", "off"], "no model at missing.zip", evaluate.main)
    refused(capsys, ["--policies", "Oracle", "--progress-bar", "off"], "unknown policy 'Oracle'", evaluate.main)
    with pytest.raises(FileNotFoundError, match="missing.zip"):  # the library raises
        budgetpm.run(budgetpm.EvalConfig(model=["missing.zip"]))


def test_every_config_field_documents_its_flag(capsys):
    """Each field of every train subcommand's config and of evaluate's EvalConfig has a docstring, and --help
    shows it."""
    import dataclasses

    from membudget.studies.budgetpm import EvalConfig
    from membudget.studies.runs import field_docs

    configs = {name: cmd.config for name, cmd in train.commands().items()}
    for name, cls in [*configs.items(), ("evaluate", EvalConfig)]:
        docs = field_docs(cls)
        missing = [f.name for f in dataclasses.fields(cls) if not docs.get(f.name)]
        assert not missing, f"{name}: fields without a docstring: {missing}"
    with pytest.raises(SystemExit):
        train.main(["ppo", "--help"])
    assert " ".join(capsys.readouterr().out.split()).count(field_docs(configs["ppo"])["keep_best"]) == 1


@pytest.mark.parametrize("sub", ["ppo", "bc", "dagger"])
def test_training_subcommands_on_conversations(tmp_path, capsys, sub):
    from membudget.agents.per_resource import StudentPolicy
    from membudget.agents.tasks import CONVERSATION
    from membudget.envs.conversation import ConversationPMEnv

    args = (["--total-timesteps", str(2 * 4 * 66), "--n-envs", "4", "--n-minibatches", "2", "--eval-every", "0"]
            if sub == "ppo" else ["--train-weeks", "2", "--epochs", "2", *(["--iterations", "1"] * (sub == "dagger"))])
    run_dir = train.main([sub, *args, "--task", "conversation", "--budget", "B60", "--eval-weeks", "2",
                          "--progress-bar", "off", "--out", str(tmp_path)])
    assert os.path.basename(run_dir) == f"{sub}-conversation-B60-seed0"  # not a PMWeek run's folder
    # 4010-4011 are BudgetPM's held-out analysis conversations (PMWeek's weeks 4010-4011 are validation weeks)
    assert "conversations 4010-4011 (held-out) B60: score" in capsys.readouterr().out
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["config"]["task"] == "conversation"
    with open(os.path.join(run_dir, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["budget", "seed", "score", "macro_accuracy", "realized_cost"]
    policy = StudentPolicy.load(os.path.join(run_dir, "model.npz"))
    direct = CONVERSATION.rollout(policy, [4010, 4011], budget="B60", per_step_cap=2, action_mode="scores")
    assert [float(r["score"]) for r in rows] == pytest.approx(list(direct["score"]))
    assert policy.net.n_resource_features == 34
    obs, _ = ConversationPMEnv(budget="B60", action_mode="scores").reset(seed=4000)
    assert policy.predict(obs)[0].shape == (6,)
    with open(os.path.join(run_dir, "learning_curve.csv")) as f:
        assert "val_score" in next(csv.DictReader(f))
    with pytest.raises(ValueError, match="features per resource"):  # not a PMWeek-v0 model
        load_policy(run_dir)


def test_conversation_runs_refuse_pmweek_only_settings(tmp_path, capsys):
    with pytest.raises(SystemExit):  # a mistake in the flags: one line, before the run folder is made
        train.main(["bc", "--task", "conversation", "--train-first-seed", "2990", "--train-weeks", "20",
                    "--out", str(tmp_path)])
    assert "development range 2000-2999" in capsys.readouterr().err and not os.listdir(tmp_path)
    with pytest.raises(ValueError, match="unit verifier costs"):
        train.main(["ppo", "--task", "conversation", "--cost-profile", "skewed", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        train.main(["ppo", "--task", "goodai", "--out", str(tmp_path)])


def test_an_earlier_run_in_the_same_folder_is_named_when_overwritten(tmp_path, capsys):
    from membudget.studies.rl_vs_distillation.configs import ImitationConfig
    from membudget.studies.runs import start_run

    cfg = ImitationConfig(out=str(tmp_path))
    first = start_run("bc", cfg, "first", "bc-B10-seed0")
    assert "overwritten" not in capsys.readouterr().err
    for name in ("learning_curve.png", "model.zip", "notes.txt"):   # the first run's files, and the user's own
        with open(os.path.join(first, name), "w") as f:
            f.write("first")
    os.makedirs(os.path.join(first, "checkpoint", "policies"))   # an RLlib run's checkpoint
    assert start_run("bc", cfg, "second", "bc-B10-seed0") == first
    assert sorted(os.listdir(first)) == ["config.json", "notes.txt"]   # no file of the first run left beside it
    assert f"{first} holds an earlier run; it is overwritten" in capsys.readouterr().err
    with open(os.path.join(first, "config.json")) as f:
        assert json.load(f)["command"] == "second"

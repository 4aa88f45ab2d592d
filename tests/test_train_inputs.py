"""``python -m membudget.train``'s inputs, checked once before any work: DAgger's iterations from a flag or a config
file alike, config files that hold no settings, YAML's on / off for on / off settings, a run's whole config.json,
bc without DAgger's iterations, minibatch settings the rollout cannot hold, and the numbers --help shows."""

import json
import os

import pytest

from membudget import train
from membudget.studies.runs import TrainCommand


@pytest.fixture
def runs(monkeypatch, tmp_path):
    """The configs the training functions are given (a spy instead of any training), in an empty working folder."""
    monkeypatch.chdir(tmp_path)
    given = []
    monkeypatch.setattr(TrainCommand, "function", lambda self: lambda cfg, command: given.append(cfg) or "run")
    return given


def refused(capsys, argv, *words, argparse_usage=False):
    """``train.main(argv)`` exits with status 2 and one line naming ``words``, no traceback; returns the line."""
    with pytest.raises(SystemExit) as e:
        train.main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert e.value.code == 2, err
    assert "Traceback" not in err and len(lines) == (2 if argparse_usage else 1), err
    assert lines[-1].startswith("python -m membudget.train") and all(w in lines[-1] for w in words), lines[-1]
    return lines[-1]


TINY_IMIT = ["--train-weeks", "1", "--epochs", "1", "--eval-weeks", "1", "--progress-bar", "off"]


# --- 1. dagger's iterations: 0 refused from the flag and from a config file, before any work -------------------

def test_dagger_refuses_zero_iterations_from_the_flag_and_from_a_config_file(runs, capsys, tmp_path):
    refused(capsys, ["dagger", "--iterations", "0", *TINY_IMIT], "iterations must be a positive int, got 0")
    refused(capsys, ["dagger", "--iterations", "-1", *TINY_IMIT], "iterations must be a positive int, got -1")
    (tmp_path / "bc.json").write_text(json.dumps({"budget": "B10", "epochs": 1, "iterations": 0}))
    refused(capsys, ["dagger", "--config", "bc.json"], "iterations must be a positive int, got 0")
    assert runs == [] and os.listdir(tmp_path) == ["bc.json"]
    train.main(["dagger", "--iterations", "2", *TINY_IMIT])
    assert runs[-1].iterations == 2


def test_dagger_s_config_refuses_zero_iterations_when_it_is_made():
    from membudget.studies.rl_vs_distillation.configs import DAggerConfig

    with pytest.raises(ValueError, match="iterations must be a positive int, got 0"):
        DAggerConfig(iterations=0)


# --- 2. a config file with no settings ---------------------------------------------------------------------------

@pytest.mark.parametrize("name,text", [("empty.yaml", ""), ("comments.yaml", "# nothing yet\n"),
                                       ("null.yml", "null\n"), ("null.json", "null")])
def test_a_config_file_with_no_settings_is_refused(runs, capsys, tmp_path, name, text):
    (tmp_path / name).write_text(text)
    refused(capsys, ["ppo", "--config", name], name, "holds no settings")
    assert runs == []


# --- 3. YAML's on / off for a setting whose choices are on / off -------------------------------------------------

def test_yaml_on_off_are_read_as_on_off_for_on_off_settings(runs, capsys, tmp_path):
    (tmp_path / "ppo.yaml").write_text("progress_bar: off\nlearning_curve: off\nanneal_lr: on\n")
    train.main(["ppo", "--config", "ppo.yaml"])
    assert (runs[-1].progress_bar, runs[-1].learning_curve, runs[-1].anneal_lr) == ("off", "off", True)
    (tmp_path / "bc.yaml").write_text("progress_bar: on\ncontext: off\n")
    train.main(["bc", "--config", "bc.yaml"])
    assert (runs[-1].progress_bar, runs[-1].context) == ("on", "off")
    (tmp_path / "bad.yaml").write_text("progress_bar: sometimes\n")
    refused(capsys, ["ppo", "--config", "bad.yaml"], "progress_bar must be one of")
    (tmp_path / "engine.yaml").write_text("engine: on\n")  # a string setting whose choices are not on / off
    refused(capsys, ["ppo", "--config", "engine.yaml"], "engine must be str, got True")
    assert len(runs) == 2


def test_the_config_paragraph_says_how_yaml_booleans_are_read():
    with open(os.path.join(os.path.dirname(train.__file__), "docs", "studies.md")) as f:
        assert "`progress_bar: off`" in " ".join(f.read().split())


# --- 4. a run's whole config.json ----------------------------------------------------------------------------

def test_a_run_s_config_json_is_a_config_file_of_its_own_subcommand_only(runs, capsys, tmp_path):
    from membudget.studies.rl_vs_distillation.configs import BCConfig
    from membudget.studies.runs import start_run

    recorded = BCConfig(epochs=3, train_weeks=2, progress_bar="off", out="old")
    run_dir = start_run("bc", recorded, "python -m membudget.train bc", "bc-B10-seed0")
    path = os.path.join(run_dir, "config.json")
    train.main(["bc", "--config", path])
    assert runs == [recorded]
    refused(capsys, ["dagger", "--config", path], path, "'bc' run", "not dagger's")
    assert len(runs) == 1
    with open(os.path.join(os.path.dirname(train.__file__), "docs", "agents.md")) as f:
        assert "its `config.json` is a valid `--config` file)" not in " ".join(f.read().split())


# --- 5. bc has no iterations ---------------------------------------------------------------------------------

def test_bc_refuses_dagger_s_iterations(runs, capsys, tmp_path):
    import dataclasses

    refused(capsys, ["bc", "--iterations", "3", *TINY_IMIT], "--iterations", argparse_usage=True)
    (tmp_path / "bc.json").write_text(json.dumps({"iterations": 3}))
    refused(capsys, ["bc", "--config", "bc.json"], "unknown keys ['iterations']")
    assert runs == []
    commands = train.commands(["bc", "dagger"])
    assert "iterations" not in {f.name for f in dataclasses.fields(commands["bc"].config)}
    assert "iterations" in {f.name for f in dataclasses.fields(commands["dagger"].config)}


# --- 6. minibatches the rollout cannot hold ------------------------------------------------------------------

def test_more_minibatches_than_a_rollout_s_samples_are_refused(runs, capsys):
    refused(capsys, ["ppo", "--n-envs", "16", "--n-minibatches", "100000", "--total-timesteps", "1"],
            "n_minibatches must be at most the 1280 samples", "n_envs 16")
    refused(capsys, ["ppo", "--task", "conversation", "--n-envs", "2", "--n-minibatches", "133"],
            "n_minibatches must be at most the 132 samples")
    train.main(["ppo", "--n-envs", "2", "--n-minibatches", "160"])  # one sample per minibatch: accepted
    assert len(runs) == 1


@pytest.mark.parametrize("sub,flags,rollout", [
    ("sb3-ppo", [], "2048 samples of a rollout (n_steps 128 x n_envs 16)"),
    ("sb3-maskable-ppo", ["--n-envs", "2", "--n-steps", "32"], "64 samples"),
    ("sb3-ppo-conditioned", ["--budgets", "B5,B10"], "2048 samples of a rollout (n_steps 128 x envs_per_budget 8 x "
                                                     "2 budgets)"),
    ("replay-ppo", ["--n-steps", "64"], "64 samples of a rollout (n_steps 64 x one environment)"),
])
def test_a_batch_larger_than_the_rollout_is_refused(runs, capsys, sub, flags, rollout):
    line = refused(capsys, [sub, *flags, "--batch-size", "100000", "--total-timesteps", "1"], "batch_size", rollout)
    assert "does not divide the rollout is accepted" in line and runs == []


def test_the_python_api_refuses_the_same_before_any_work(monkeypatch):
    from membudget.agents import configs, rl
    from membudget.agents.ppo import train_ppo
    from membudget.agents.tasks import CONVERSATION, PMWEEK

    def no_work(*a, **k):
        pytest.fail("training started before its settings were checked")

    monkeypatch.setattr(PMWEEK, "vector_env", no_work)
    monkeypatch.setattr(CONVERSATION, "vector_env", no_work)
    monkeypatch.setattr(rl, "ConcatBudgetVecEnv", no_work)
    with pytest.raises(ValueError, match="n_minibatches must be at most the 160 samples"):
        train_ppo("B10", n_envs=2, n_minibatches=161)
    with pytest.raises(ValueError, match="n_minibatches must be at most the 132 samples"):
        train_ppo("B60", task="conversation", n_envs=2, n_minibatches=133)
    with pytest.raises(ValueError, match=r"batch_size must be at most the 64 samples"):
        rl.train_ppo_allocator("B10", n_envs=2, n_steps=32, batch_size=65)
    with pytest.raises(ValueError, match=r"x envs_per_budget 1 x 1 budgets"):
        rl.train_conditioned_ppo(["B5"], envs_per_budget=1, n_steps=32, batch_size=64)
    configs.ConditionedPPOAllocatorConfig(envs_per_budget=1, n_steps=32, batch_size=64)  # budgets not known yet
    configs.PPOAllocatorConfig(n_envs=3, n_steps=10, batch_size=7)  # does not divide 30: SB3 runs it (and warns)


# --- 7. --help shows numbers, not the names of constants -------------------------------------------------------

def test_help_shows_the_auto_engine_s_step_count(capsys):
    from membudget.agents.configs import AUTO_COMPILED_STEPS

    with pytest.raises(SystemExit):
        train.main(["ppo", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"compiled for runs of at least {AUTO_COMPILED_STEPS:,} steps" in out and "AUTO_COMPILED_STEPS" not in out

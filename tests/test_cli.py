"""The command lines as a newcomer meets them: a mistake is one line naming the argument, the bad value and what is
accepted, exit status 2, no traceback, and nothing written — before any work; --help in plain text; progress a
log can show."""

import importlib.util
import os

import pytest

from membudget import evaluate, train
from membudget.bench.cli_errors import MISTAKES, config_with_an_unknown_key


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_mistake_is_one_line_exit_status_2_and_nothing_written(mistake, tmp_path, capsys, monkeypatch):
    import re

    module, argv, message = MISTAKES[mistake]
    module = {"train": train, "evaluate": evaluate}[module]
    if mistake == "missing Ray" and importlib.util.find_spec("ray") is not None:
        pytest.skip("Ray is installed here")
    monkeypatch.chdir(tmp_path)  # a run folder would appear here (runs/), a page under docs/
    argv = [a.replace("{config}", config_with_an_unknown_key(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as e:
        module.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    last = err.strip().splitlines()[-1]
    assert re.search(message, last), last
    assert "Traceback" not in err and last.startswith("python -m membudget."), err
    assert sorted(os.listdir(tmp_path)) in ([], ["cfg.json"])  # nothing written


def _help(module, argv, capsys):
    with pytest.raises(SystemExit) as e:
        module.main([*argv, "--help"])
    assert e.value.code in (0, None)
    return capsys.readouterr().out


def test_help_is_plain_text_and_lists_every_subcommand(capsys):
    """No reST markup (roles, double backticks) in any --help; train's lists every subcommand with one line."""
    import re

    raw = re.compile(r":(class|mod|func|meth|data|attr|obj|exc):`|``")
    texts = {"train": _help(train, [], capsys), "evaluate": _help(evaluate, [], capsys)}
    for name in train.commands():
        texts[f"train {name}"] = _help(train, [name], capsys)
    for name in evaluate.SUBCOMMANDS:
        texts[f"evaluate {name}"] = _help(evaluate, [name], capsys)
    assert {k: raw.findall(v) for k, v in texts.items() if raw.search(v)} == {}
    listed = texts["train"]
    for name in train.commands():
        assert re.search(rf"^\s+{re.escape(name)}\s+\S", listed, re.M), name  # the subcommand and its help line


def test_progress_prints_plain_lines_at_each_stage_and_while_a_stage_runs():
    import io
    import time

    from membudget.studies.cli import Progress

    out = io.StringIO()
    with Progress("plain", every=0.2, stream=out) as progress:
        progress("fit: gates")
        progress.count(3, 12)
        time.sleep(0.7)
        progress("evaluate")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("fit: gates [") and lines[-1].startswith("evaluate [")
    beats = [line for line in lines if line.startswith("fit: gates 3/12 [")]
    assert len(beats) >= 2  # the stage ran 0.7 s: a line at least every 0.2 s, each with done/total and elapsed
    quiet = io.StringIO()
    with Progress("off", stream=quiet) as progress:
        progress("fit: gates")
    assert quiet.getvalue() == ""
    with pytest.raises(ValueError, match="progress must be"):
        Progress("loud")


def test_the_subcommand_registry_names_each_study_s_commands():
    """train.SUBCOMMANDS (read without importing the studies) says which module defines each subcommand."""
    import importlib

    by_module = {}
    for name, module in train.SUBCOMMANDS.items():
        by_module.setdefault(module, set()).add(name)
    for module, names in by_module.items():
        assert set(importlib.import_module(module).TRAIN_COMMANDS) == names, module
    assert set(train.RENAMED.values()) <= set(train.SUBCOMMANDS)


def test_every_mistake_is_refused_before_torch_sb3_or_sklearn_is_imported(tmp_path):
    """What keeps a refusal fast (python -m membudget.bench.cli_errors times them): all the mistakes, one after
    another in one fresh process, leave torch, Stable-Baselines3 and scikit-learn unimported."""
    import subprocess
    import sys

    config = config_with_an_unknown_key(tmp_path)
    calls = [(m, [a.replace("{config}", config) for a in argv]) for m, argv, _ in MISTAKES.values()]
    code = ("import contextlib, io, sys\nfrom membudget import evaluate, train\n"
            f"for module, argv in {calls!r}:\n"
            "    with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "        {'train': train, 'evaluate': evaluate}[module].main(argv)\n"
            "print(sorted(m for m in ('torch', 'stable_baselines3', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_task_levels_are_the_tasks_levels():
    from membudget.agents.configs import TASK_NAMES, task_levels
    from membudget.agents.tasks import TASKS

    assert tuple(TASKS) == TASK_NAMES
    for name in TASK_NAMES:
        assert task_levels(name) == TASKS[name].levels


@pytest.mark.parametrize("cls,kwargs,match", [
    ("sweep:SweepConfig", dict(trials=-1), "trials must be a positive int"),
    ("sweep:SweepConfig", dict(total_timesteps=0), "total_timesteps must be a positive int"),
    ("sweep:SweepConfig", dict(max_concurrent=0), "max_concurrent must be a positive int"),
    ("rllib_stack:RLlibPPOConfig", dict(learning_rate=float("nan")), "learning_rate must be a finite number"),
    ("rllib_stack:RLlibPPOConfig", dict(iterations=-1), "iterations must be a positive int"),
    ("rllib_stack:RLlibPPOConfig", dict(n_agents=0), r"n_agents must be an int in \[1, 500\]"),
    ("rllib_stack:RLlibPPOConfig", dict(minibatch_size=500, train_batch_size=400), "train_batch_size must be"),
    ("rllib_stack:RLlibPPOConfig", dict(env="atari"), "unknown env 'atari'"),
])
def test_ray_commands_check_their_settings_without_ray(cls, kwargs, match):
    """The rllib-ppo and sweep configs refuse impossible settings themselves (before, a negative iteration count or
    a NaN learning rate started a Ray cluster and ran)."""
    import importlib

    module, _, name = cls.partition(":")
    config = getattr(importlib.import_module(f"membudget.studies.{module}"), name)
    with pytest.raises(ValueError, match=match):
        config(**kwargs)
    config()  # the defaults pass


def test_a_config_path_that_is_a_folder_is_refused_on_one_line(tmp_path, capsys):
    from membudget import train

    with pytest.raises(SystemExit) as e:
        train.main(["ppo", "--config", str(tmp_path), "--out", str(tmp_path / "runs")])
    assert e.value.code == 2 and "no such config file" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_start_model_that_is_not_a_student_is_refused_on_one_line(tmp_path, capsys):
    from membudget import train

    (tmp_path / "fake.npz").write_text("not an archive")
    with pytest.raises(SystemExit) as e:
        train.main(["ppo", "--init-from", str(tmp_path / "fake.npz"), "--out", str(tmp_path / "runs")])
    assert e.value.code == 2 and "not an .npz archive" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("study,argv,match", [
    ("replay", ["--alpha", "nan"], "--alpha: must be a finite number"),
    ("replay", ["--cost-weight", "-1"], "--cost-weight: must be a finite number"),
    ("replay", ["--l2-lambda", "inf"], "--l2-lambda: must be a finite number"),
    ("replay-alpha", ["--alphas", "0.3", "nan"], "--alphas: must be a finite number"),
    ("replay-diagnose", ["--l2-lambda", "-1"], "--l2-lambda: must be a finite number"),
    ("tiers", ["--caps", "nan"], "--caps: must be a finite number > 0"),
    ("tiers", ["--lambdas", "0.3", "-1"], "--lambdas: must be a finite number >= 0"),
    ("tiers", ["--strategies", "speed"], "--strategies: invalid choice"),
    ("tiers", ["--population", "squad"], "--population: invalid choice"),
    ("tiers", ["--per-lambda-strategy", "speed"], "--per-lambda-strategy: invalid choice"),
    ("rl-vs-distillation", ["--workers", "0"], "--workers: must be an integer >= 1"),
    (None, ["--load", "-1"], r"load must be an int in \[0, 100\]"),
    (None, ["--reference", "Oracle"], "reference 'Oracle' is not among the policies"),
    (None, ["--policies", "Sequential"], "reference 'Static' is not among the policies"),
])
def test_a_study_flag_mistake_is_one_line_before_any_work(capsys, study, argv, match):
    """Each study's numeric and named flags are checked with the flags (before: NaN or a negative weight ran and
    failed after minutes of work, or a traceback; an unknown reference gave an empty column)."""
    import re

    from membudget import evaluate

    with pytest.raises(SystemExit) as e:
        evaluate.main(([study] if study else []) + argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) >= 1 and re.search(match, err[-1]), err


def test_protocol_helpers_refuse_what_they_cannot_use():
    from membudget.studies.protocol import bootstrap_ci, parse_budget

    for bad in (True, False):
        with pytest.raises(ValueError, match="budget must be"):
            parse_budget(bad)
    for kwargs, match in ((dict(n_resamples=0), "n_resamples"), (dict(level=1.5), "level"), (dict(level=0.0), "level"),
                          (dict(seed=-1), "seed")):
        with pytest.raises(ValueError, match=match):
            bootstrap_ci([0.1, 0.2, 0.3], **kwargs)


@pytest.mark.parametrize("module, argv, extra", [
    ("evaluate", ["--quick", "--backend", "ray"], "ray"),
    ("evaluate", ["structure", "--backend", "ray"], "ray"),
    ("evaluate", ["rl-vs-distillation", "--quick", "--backend", "ray"], "ray"),
    ("train", ["bc", "--seeds", "0,1", "--backend", "ray"], "ray"),
    ("evaluate", ["demonstrations", "--dataset-id", "membudget/test-v0", "--n-weeks", "1"], "minari"),
    ("membudget.bench.ray_scaling", ["--workers", "1"], "ray"),
    ("membudget.bench.ppo", ["--torchrl", "--steps", "10"], "torchrl"),
])
def test_a_missing_extra_on_any_path_is_one_line_with_its_install_command(module, argv, extra, tmp_path, capsys,
                                                                           monkeypatch):
    import importlib
    import sys

    from membudget.studies.cli import EXTRAS

    monkeypatch.setitem(sys.modules, extra, None)   # as if not installed, whether it is or not
    monkeypatch.chdir(tmp_path)
    main = {"train": train.main, "evaluate": evaluate.main}.get(module) or importlib.import_module(module).main
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err, err
    assert f'this needs {extra}, which is not installed: pip install "{EXTRAS[extra]}"' in err.splitlines()[-1]


@pytest.mark.parametrize("argv, flag", [(["--quick", "--budgets", "B20"], "--budgets"),
                                        (["tiers", "--quick", "--n-queries", "20"], "--n-queries"),
                                        (["tiers", "--quick", "--per-lambda-strategy", "reasoning"],
                                         "--per-lambda-strategy"),
                                        (["conversation", "--quick", "--resamples", "100000"], "--resamples"),
                                        (["tiers", "--quick", "--n-queries", "300"], "--n-queries")])
def test_quick_refuses_the_flags_it_sets_before_any_work(argv, flag, tmp_path, capsys, monkeypatch):
    """``--quick`` fixes some settings: a flag that would change one is refused in one line, not silently replaced."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        evaluate.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err and f"drop --quick to set {flag}" in err, err
    assert not any(tmp_path.iterdir())


def test_quick_takes_a_flag_at_the_value_it_sets(monkeypatch, tmp_path):
    """A flag given beside ``--quick`` at the very value ``--quick`` sets changes nothing, so it is taken."""
    from membudget.studies import budgetmem

    monkeypatch.chdir(tmp_path)
    ran = []
    monkeypatch.setattr(budgetmem, "evaluate", lambda cfg, progress=print, executor=None: ran.append(cfg) or {})
    monkeypatch.setattr(budgetmem, "format_results", lambda res: "")
    monkeypatch.setattr(budgetmem, "plot_frontier", lambda res, path: None)
    for argv in (["--quick"], ["--quick", "--n-queries", "200", "--per-lambda-strategy", "capacity"]):
        evaluate.main(["tiers", *argv, "--out", str(tmp_path / "t")])
    evaluate.main(["tiers", "--out", str(tmp_path / "t")])
    assert [(c.per_lambda_strategy, c.n_queries) for c in ran] == [("capacity", 200)] * 2 + [("all", 300)]
    with pytest.raises(SystemExit):
        evaluate.main(["tiers", "--strategies", "implementation", "--per-lambda-strategy", "capacity"])
    with pytest.raises(SystemExit):
        evaluate.main(["tiers", "--lambdas", "0.1", "0.5"])
    for bad, match in ((dict(strategies=["implementation"], per_lambda_strategy="capacity"), "per_lambda_strategy"),
                       (dict(lambdas=[0.1]), "0.3"), (dict(strategies=["memory"]), "strategies"),
                       (dict(n_queries=0), "n_queries")):  # the Python path: refused before any training
        with pytest.raises(ValueError, match=match):
            budgetmem.check_results_config(budgetmem.ResultsConfig(**bad))
    monkeypatch.undo()
    with pytest.raises(ValueError, match="per_lambda_strategy"):
        budgetmem.evaluate(budgetmem.ResultsConfig(strategies=["implementation"], per_lambda_strategy="capacity"))

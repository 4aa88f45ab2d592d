"""The command lines as a newcomer meets them: a mistake is one line naming the argument, the bad value and what is
accepted, exit status 2, no traceback, and nothing written — before any work; --help in plain text; progress a
log can show."""

import importlib.util
import json
import os

import pytest

from membudget import evaluate, train


def _config_with_an_unknown_key(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"learning_rate": 1e-3, "no_such_field": 1}))
    return str(path)


MISTAKES = {
    "malformed budget name": (train, ["bc", "--budget", "B7"], r"budget 'B7' is not a level; the levels are B5, B10"),
    "lower-case budget": (train, ["bc", "--budget", "b10"], r"did you mean 'B10'"),
    "budget list with a bad level": (train, ["sb3-ppo-conditioned", "--budgets", "B5,B9"], r"'B9' is not a level"),
    "evaluate at a level no gate is calibrated for": (evaluate, ["--budgets", "B7"], r"'B7' is not a level"),
    "unknown policy": (evaluate, ["--policies", "Foo"], r"unknown policy 'Foo'; known: AllRelevant"),
    "unknown train subcommand": (train, ["ppo2"], r"unknown subcommand 'ppo2'; the subcommands are ppo, sb3-ppo"),
    "unknown study": (evaluate, ["reprot"], r"unknown study 'reprot'; the studies are report, structure"),
    "missing model file": (evaluate, ["--model", "/nonexistent/model.zip"], r"no model at /nonexistent/model.zip"),
    "negative seed": (train, ["ppo", "--seed", "-1"], r"seed must be a non-negative int, got -1"),
    "bad seed list": (train, ["ppo", "--seeds", "0,x"], r"--seeds must be comma-separated"),
    "bad week range": (evaluate, ["--first-seed", "-5"], r"first_seed must be a non-negative int, got -5"),
    "no weeks": (train, ["bc", "--eval-weeks", "0"], r"eval_weeks must be a positive int, got 0"),
    "unwritable --out": (train, ["bc", "--out", "/proc/membudget-runs"], r"out '/proc/membudget-runs' cannot be made"),
    "unwritable evaluate --out": (evaluate, ["--out", "/proc/membudget-out"], r"out '/proc/membudget-out' cannot be"),
    "unknown config key": (train, ["ppo", "--config", "{config}"], r"unknown keys \['no_such_field'\]"),
    "bad --engine": (train, ["ppo", "--engine", "jax"], r"engine must be one of \('auto', 'autograd', 'compiled'\)"),
    "not on/off": (train, ["ppo", "--keep-best", "yes"], r"argument --keep-best: expected on or off, got 'yes'"),
    "missing Ray": (train, ["rllib-ppo", "--env", "replay"],
                    r'this needs ray, which is not installed: pip install "membudget\[ray\]"'),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_mistake_is_one_line_exit_status_2_and_nothing_written(mistake, tmp_path, capsys, monkeypatch):
    import re

    module, argv, message = MISTAKES[mistake]
    if mistake == "missing Ray" and importlib.util.find_spec("ray") is not None:
        pytest.skip("Ray is installed here")
    monkeypatch.chdir(tmp_path)  # a run folder would appear here (runs/), a page under docs/
    argv = [a.replace("{config}", _config_with_an_unknown_key(tmp_path)) for a in argv]
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

"""Refusals that a user trial of the wheel found wrong or late: each is one line naming the flag and the value, exit
status 2, no traceback, before any work (tests/test_cli.py holds the table of the usual mistakes)."""

import sys
import time
import types

import pytest

from membudget import evaluate, train
from membudget.teachers import __main__ as teachers_cli


def _refused(main, argv, capsys) -> str:
    """The last line ``main(argv)`` prints on stderr, after checking that it exits with status 2 and no traceback."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("python -m membudget."), err
    return last


@pytest.fixture
def no_labels(monkeypatch):
    """A spy in place of the label computation of both label commands: the calls it got."""
    from membudget.studies import generate

    calls = []

    def spy(*args, **kwargs):
        calls.append(args)
        raise AssertionError("labels computed before the refusal")

    monkeypatch.setattr(teachers_cli, "build_label_dataset", spy)
    monkeypatch.setattr(generate, "build_label_dataset", spy)
    return calls


LABEL_COMMANDS = {"teachers": (teachers_cli.main, ["labels"]), "evaluate": (evaluate.main, ["labels"])}


@pytest.mark.parametrize("command", sorted(LABEL_COMMANDS))
def test_labels_out_that_cannot_be_written_is_refused_before_any_label(command, tmp_path, capsys, no_labels,
                                                                      monkeypatch):
    """Before: every label computed, then a FileNotFoundError traceback from the save, exit status 1."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    out = str(tmp_path / "a-file" / "dir" / "labels.npz")  # its folder cannot be made, even by root
    main, argv = LABEL_COMMANDS[command]
    start = time.perf_counter()
    last = _refused(main, [*argv, "--out", out, "--n-weeks", "2"], capsys)
    assert time.perf_counter() - start < 5
    assert f"--out {out!r}" in last and "cannot be made" in last, last
    assert no_labels == []
    last = _refused(main, [*argv, "--out", str(tmp_path), "--n-weeks", "2"], capsys)  # a folder, not a file
    assert f"--out {str(tmp_path)!r} is a folder" in last, last
    assert no_labels == [] and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.parametrize("command", sorted(LABEL_COMMANDS))
@pytest.mark.parametrize("budget, match", [("B7", "budget 'B7' is not a level"),
                                           ("-4", r"budget must be an int in \[1, \d+\], got -4"),
                                           ("none", "budget 'none' is not accepted here")])
def test_label_budgets_are_checked_before_any_label(command, budget, match, tmp_path, capsys, no_labels):
    """Before: a bad level or none failed inside the label computation, with a traceback."""
    import re

    main, argv = LABEL_COMMANDS[command]
    last = _refused(main, [*argv, "--out", str(tmp_path / "labels.npz"), "--budgets", "B10", budget], capsys)
    assert re.search(match, last), last
    assert "or none" not in last  # a label needs a budget
    assert no_labels == [] and not any(tmp_path.iterdir())


@pytest.fixture
def no_export(monkeypatch):
    from membudget.teachers import minari_export

    calls = []
    monkeypatch.setattr(minari_export, "export_dp_demonstrations",
                        lambda *a, **k: calls.append(a) or types.SimpleNamespace(total_episodes=0, total_steps=0))
    return calls


def test_export_minari_without_minari_is_one_line_with_its_install_command(monkeypatch, capsys, no_export):
    """Before: the DP's schedules computed, then a ModuleNotFoundError traceback, exit status 1."""
    monkeypatch.setitem(sys.modules, "minari", None)  # as if not installed
    last = _refused(teachers_cli.main, ["export-minari", "--dataset-id", "membudget/pmweek-dp-B10-v0",
                                        "--first-seed", "2000", "--n-weeks", "2"], capsys)
    assert last.endswith('this needs minari, which is not installed: pip install "membudget[minari]"'), last
    assert no_export == []


@pytest.mark.parametrize("main, argv", [(teachers_cli.main, ["export-minari"]), (evaluate.main, ["demonstrations"])])
def test_export_minari_budget_is_checked_before_any_work(main, argv, capsys, no_export):
    pytest.importorskip("minari")
    last = _refused(main, [*argv, "--dataset-id", "membudget/test-v0", "--n-weeks", "1", "--budget", "B7"], capsys)
    assert "budget 'B7' is not a level" in last and last.endswith("(or give an integer budget, or none)"), last
    assert no_export == []


@pytest.mark.parametrize("main, argv", [(evaluate.main, ["--budgets", "-5"]), (train.main, ["ppo", "--budget", "-5"]),
                                        (train.main, ["sb3-ppo", "--budget", "-5"]),
                                        (train.main, ["sb3-ppo-conditioned", "--budgets", "B5,-5"])])
def test_a_negative_integer_budget_is_refused_as_an_integer_below_1(main, argv, tmp_path, capsys, monkeypatch):
    """Before: "budget '-5' is not a level ... (or give an integer budget ...)", although -5 is an integer."""
    monkeypatch.chdir(tmp_path)
    last = _refused(main, argv, capsys)
    assert "budget must be an int in [1, " in last and last.endswith("got -5"), last
    assert "not a level" not in last and not any(tmp_path.iterdir())


def test_budget_messages_name_none_as_each_path_spells_it(tmp_path, capsys, monkeypatch):
    """Python's no-budget is None, the command lines' is the word none (both still accepted)."""
    import gymnasium as gym

    import membudget  # noqa: F401
    from membudget.studies.protocol import parse_budget

    with pytest.raises(ValueError) as e:
        gym.make("membudget/PMWeek-v0", budget="none")
    assert str(e.value).endswith("(or give an integer budget, or None)") and "did you mean None?" in str(e.value)
    assert gym.make("membudget/PMWeek-v0", budget=None).unwrapped.budget is None
    assert parse_budget("none") is None
    monkeypatch.chdir(tmp_path)
    last = _refused(train.main, ["ppo", "--budget", "None"], capsys)
    assert last.endswith("(or give an integer budget, or none)") and "did you mean 'none'?" in last, last


@pytest.mark.parametrize("seeds", ["0,-1", "-3", "0-2,-1"])
def test_a_negative_seed_is_refused_as_negative(seeds, tmp_path, capsys, monkeypatch):
    """Before: "'-1' is neither a number nor a range like 12-60"."""
    monkeypatch.chdir(tmp_path)
    last = _refused(train.main, ["ppo", "--seeds", seeds], capsys)
    bad = seeds.split(",")[-1]
    assert f"--seeds: {bad!r} is negative; seeds are integers >= 0" in last, last
    assert not any(tmp_path.iterdir())


def test_rllib_without_rllib_names_what_installs_it(tmp_path, capsys, monkeypatch):
    """Before: pip install "membudget[ray]", whose extra has Ray core and Tune but not RLlib."""
    from membudget.envs.validation import missing_extra

    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    monkeypatch.chdir(tmp_path)
    last = _refused(train.main, ["rllib-ppo", "--env", "replay"], capsys)
    assert last.endswith('this needs ray.rllib, which is not installed: pip install "ray[rllib]"'), last
    assert not any(tmp_path.iterdir())
    for module, line in [("ray.rllib.algorithms.ppo", 'pip install "ray[rllib]"'), ("tree", 'pip install "ray[rllib]"'),
                         ("ray.tune", 'pip install "membudget[ray]"'), ("ray", 'pip install "membudget[ray]"')]:
        assert missing_extra(ModuleNotFoundError(name=module)).endswith(line), module
    assert missing_extra(ModuleNotFoundError(name="numpy")) is None


def test_rllib_hint_matches_the_extras_and_the_readme():
    """What the hint names must install RLlib: membudget's ray extra does not, the README says ray[rllib]."""
    import os
    import tomllib

    from membudget.studies.cli import EXTRAS

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        ray_extra = tomllib.load(f)["project"]["optional-dependencies"]["ray"]
    with open(os.path.join(root, "README.md")) as f:
        readme = f.read()
    assert not any("rllib" in r for r in ray_extra)
    assert EXTRAS["ray.rllib"] == "ray[rllib]" and f'pip install "{EXTRAS["ray.rllib"]}"' in readme


def test_tiers_takes_progress_bar_as_the_main_job_does(tmp_path, capsys, monkeypatch):
    """Before: "unrecognized arguments: --progress-bar"."""
    from membudget.studies import budgetmem
    from membudget.studies.cli import Progress

    monkeypatch.chdir(tmp_path)
    got = []
    monkeypatch.setattr(budgetmem, "evaluate", lambda cfg, progress=print, executor=None: got.append(progress) or {})
    monkeypatch.setattr(budgetmem, "format_results", lambda res: "")
    monkeypatch.setattr(budgetmem, "plot_frontier", lambda res, path: None)
    for mode in ("on", "off", "plain", "auto"):
        evaluate.main(["tiers", "--quick", "--progress-bar", mode, "--out", str(tmp_path / "t")])
    assert [type(p) for p in got] == [Progress] * 4 and [p.mode for p in got[:3]] == ["on", "off", "plain"]
    capsys.readouterr()
    last = _refused(evaluate.main, ["tiers", "--progress-bar", "loud"], capsys)
    assert "--progress-bar: invalid choice: 'loud'" in last, last

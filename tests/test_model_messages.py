"""What ``--model`` and ``load_policy`` say about a model they refuse: a student's parameter that is not finite (or
of another shape), a ``.pth`` entry that is not plain tensors (named, with torch's reason), a run directory of
another environment (named before any technical detail); and what ``evaluate rl-vs-distillation`` prints when it
has written its page."""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile

import numpy as np
import pytest

from membudget import evaluate, train
from membudget.agents.rl import load_policy

TINY_SB3 = ["--total-timesteps", "64", "--n-envs", "2", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1",
            "--eval-every", "0", "--eval-weeks", "1", "--progress-bar", "off", "--learning-curve", "off"]


def _refused(argv, capsys, monkeypatch):
    """The one line ``python -m membudget.evaluate argv`` prints as it exits with status 2 (before any gate is
    fitted)."""
    from membudget.studies import budgetpm

    monkeypatch.setattr(budgetpm, "fit_suite", lambda **kw: pytest.fail("the model was accepted"))
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        evaluate.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return " ".join(err.split())


# --- 1. a student's parameters: not finite, or of another shape ---------------------------------------------------

def _student_file(path, edit):
    """A per-resource student saved by ``StudentPolicy.save`` at ``path``, its arrays then edited by ``edit``."""
    import torch

    from membudget.agents.per_resource import PerResourceNet, StudentPolicy

    torch.manual_seed(0)
    StudentPolicy(PerResourceNet(hidden=(8,)), 0.5, {"method": "bc"}).save(path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    edit(arrays)
    np.savez(path, **arrays)
    return str(path)


def test_a_student_parameter_with_a_nan_is_named_as_not_finite(tmp_path, capsys, monkeypatch):
    def one_nan(a):
        a["param/first.weight"] = a["param/first.weight"].copy()
        a["param/first.weight"][3, 5] = np.nan

    path = _student_file(tmp_path / "model.npz", one_nan)
    with pytest.raises(ValueError) as e:
        load_policy(path)
    message = str(e.value)
    assert message.startswith(f"{path}: parameter 'first.weight' has 1 non-finite value(s)")
    assert "got shape" not in message  # the shape is right: the message does not point at it
    err = _refused(["--model", path, "--progress-bar", "off"], capsys, monkeypatch)
    assert "parameter 'first.weight' has 1 non-finite value(s)" in err


def test_a_student_parameter_of_another_shape_is_named_with_both_shapes(tmp_path):
    def wider(a):
        a["param/first.weight"] = np.zeros((9, 37), dtype=np.float32)

    path = _student_file(tmp_path / "model.npz", wider)
    with pytest.raises(ValueError, match=r"parameter 'first\.weight' must be an array of shape \(8, 37\), got shape "
                                         r"\(9, 37\)"):
        load_policy(path)


# --- 2. an SB3 archive whose .pth entry is not plain tensors --------------------------------------------------------

class _Marker:
    """Unpickling it creates the directory ``path``: the code a crafted weights entry would run."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return os.makedirs, (self.path,)


@pytest.fixture(scope="module")
def sb3_model(tmp_path_factory):
    """A genuine ``model.zip`` of ``python -m membudget.train sb3-ppo`` (a tiny run)."""
    out = tmp_path_factory.mktemp("sb3")
    return os.path.join(train.main(["sb3-ppo", *TINY_SB3, "--out", str(out), "--name", "run"]), "model.zip")


def _with_entries(src, dst, entries):
    with zipfile.ZipFile(src) as z:
        files = {n: z.read(n) for n in z.namelist()}
    files.update(entries)
    with zipfile.ZipFile(dst, "w") as z:
        for n, b in files.items():
            z.writestr(n, b)
    return str(dst)


def _torch_saved(obj) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@pytest.mark.parametrize("entry", ["policy.pth", "pytorch_variables.pth"])
def test_a_pickled_object_in_a_pth_entry_is_refused_naming_the_entry_and_torch_s_reason(sb3_model, tmp_path, capsys,
                                                                                        monkeypatch, entry):
    marker = tmp_path / "ran"
    path = _with_entries(sb3_model, tmp_path / "m.zip", {entry: _torch_saved(_Marker(marker))})
    for trusted in (False, True):  # SB3's own load reads the weights with weights_only=True too
        with pytest.raises(ValueError) as e:
            load_policy(path, trust_remote_code=trusted)
        message = str(e.value)
        assert message.startswith(f"{path}: entry {entry!r} is not plain tensors (torch.load with weights_only=True "
                                  "refuses it: UnpicklingError: ")
        assert "os.makedirs" in message and "refuses it: )" not in message  # torch's reason, not a blank
        assert "\x1b" not in message and "Check the documentation" not in message
    assert not marker.exists()
    err = _refused(["--model", path, "--progress-bar", "off"], capsys, monkeypatch)
    assert f"entry {entry!r} is not plain tensors" in err and "os.makedirs" in err
    assert not marker.exists()


def test_a_refusal_without_torch_s_words_gives_the_exception_s_type():
    from membudget.agents.sb3_files import _not_plain_tensors

    message = _not_plain_tensors(("entry 'policy.pth'", pickle.UnpicklingError()))
    assert message == ("entry 'policy.pth' is not plain tensors (torch.load with weights_only=True refuses it: "
                       "UnpicklingError)")


# --- 3. a run directory of another environment ----------------------------------------------------------------------

def _learners() -> str:
    from membudget.studies.rl_vs_distillation.configs import TRAIN_COMMANDS

    return ", ".join(TRAIN_COMMANDS)


@pytest.fixture(scope="module")
def tiers_run(tmp_path_factory):
    """A genuine run directory of ``python -m membudget.train tiers`` (BC warm start only, tiny)."""
    out = tmp_path_factory.mktemp("tiers")
    return train.main(["tiers", "--total-timesteps", "0", "--bc-queries", "30", "--bc-epochs", "1",
                       "--eval-queries", "10", "--out", str(out), "--name", "t"])


def test_a_tiers_run_is_refused_as_a_model_of_tier_routing(tiers_run, capsys, monkeypatch):
    head = "is a TierRouting-v0 model (python -m membudget.train tiers); --model takes PMWeek-v0 models"
    for path in (tiers_run, os.path.join(tiers_run, "model.zip")):
        with pytest.raises(ValueError) as e:
            load_policy(path)
        assert str(e.value).startswith(f"{path} {head}") and _learners() in str(e.value)
        assert "policy_class" not in str(e.value)  # the environment first, not a technical detail
        err = _refused(["--model", path, "--progress-bar", "off"], capsys, monkeypatch)
        assert f"{path} {head}" in err and f"(runs of python -m membudget.train {_learners()})" in err


RECORDS = {
    "replay-ppo": ({"version": 0, "family": "db"}, "a ReplayStream-v0 model"),
    "proactive-ppo": ({"scope": "code"}, "a ProactiveStream-v1 model"),
    "rllib-ppo": ({"env": "tiers"}, "an RLlib TierRouting-v0 model"),
    "sweep": ({"budget": "B10"}, "a hyperparameter search"),
}


@pytest.mark.parametrize("sub", sorted(RECORDS))
def test_runs_of_the_other_environments_are_named_by_their_record(tiers_run, tmp_path, sub):
    cfg, what = RECORDS[sub]
    run = tmp_path / sub
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"subcommand": sub, "config": cfg, "seed": 0}))
    if sub != "sweep":  # a search keeps no model
        (run / "model.zip").write_bytes(open(os.path.join(tiers_run, "model.zip"), "rb").read())
    with pytest.raises(ValueError) as e:
        load_policy(str(run))
    assert str(e.value).startswith(f"{run} is {what} (python -m membudget.train {sub})")
    assert _learners() in str(e.value)


@pytest.mark.parametrize("record", ["not json {", '{"subcommand": "tiers", "pad": "' + "x" * (1 << 20) + '"}',
                                    '{"subcommand": "sb3-ppo", "config": {}}', '{"subcommand": "future-cmd"}',
                                    "[" * 100_000])
def test_a_record_that_is_unreadable_or_names_a_pmweek_learner_leaves_the_model_s_own_checks(tiers_run, tmp_path,
                                                                                              record):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(record)
    (run / "model.zip").write_bytes(open(os.path.join(tiers_run, "model.zip"), "rb").read())
    with pytest.raises(ValueError, match=r"model\.zip: entry 'policy_class' is "):
        load_policy(str(run))


def test_a_pmweek_run_still_loads_by_its_directory(sb3_model):
    policy, kw = load_policy(os.path.dirname(sb3_model))
    assert kw == {"action_mode": "binary"}


# --- 4. evaluate rl-vs-distillation says where it wrote its page ----------------------------------------------------

DOCS_RESULTS = os.path.join(os.path.dirname(evaluate.__file__), "docs", "rl_vs_distillation.json")


@pytest.fixture
def saved_results():
    if not os.path.exists(DOCS_RESULTS):
        pytest.skip("docs/rl_vs_distillation.json is not in this checkout")
    return DOCS_RESULTS


def test_the_study_names_the_page_and_files_it_wrote(saved_results, tmp_path, capsys, monkeypatch):
    from membudget.studies.rl_vs_distillation import report
    from membudget.studies.rl_vs_distillation.results import Results

    # the training is replaced by the saved results: the study's finishing is what is tested
    monkeypatch.setattr(report, "run_benchmark", lambda **kw: Results.load(saved_results))
    out = tmp_path / "X.md"
    evaluate.main(["rl-vs-distillation", "--quick", "--progress-bar", "off", "--out", str(out)])
    printed = capsys.readouterr().out
    assert printed.splitlines()[-1] == f"wrote {out} (rl_vs_distillation_curves.png and rl_vs_distillation.json " \
                                       "beside it)"
    assert out.read_text() in printed  # the page itself, as the other studies print theirs
    assert {p.name for p in tmp_path.iterdir()} == {"X.md", "rl_vs_distillation_curves.png",
                                                    "rl_vs_distillation.json"}


def test_a_rendered_page_is_named_too(saved_results, tmp_path, capsys):
    out = tmp_path / "again.md"
    evaluate.main(["rl-vs-distillation", "--render", saved_results, "--out", str(out)])
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {out} (rl_vs_distillation_curves.png beside it)"
    assert out.exists() and not (tmp_path / "rl_vs_distillation.json").exists()

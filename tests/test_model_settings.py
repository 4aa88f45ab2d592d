"""A trained model is evaluated only in the settings it was trained in: evaluate and show refuse a run whose
config.json records other environment settings than the evaluation plays, before any work."""

import json

import pytest

from membudget.studies.protocol import EVAL_SETTINGS, check_model_settings


def _run(tmp_path, subcommand="ppo", **settings):
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.npz").write_bytes(b"")  # never read: the settings are refused first
    config = {"budget": "B20", "seed": 0, **EVAL_SETTINGS, **settings}
    (run / "config.json").write_text(json.dumps({"subcommand": subcommand, "config": config, "seed": 0}))
    return run


@pytest.mark.parametrize("setting, value", [("per_step_cap", 4), ("cost_profile", "skewed"),
                                            ("late_policy", "execute")])
def test_a_run_trained_in_other_settings_is_refused_naming_them(tmp_path, setting, value):
    run = _run(tmp_path, **{setting: value})
    for path in (run, run / "model.npz"):  # the run directory, or the model file inside it
        with pytest.raises(ValueError, match=rf"trained with {setting} {value!r} .*plays every policy with "
                                             rf"{setting} {EVAL_SETTINGS[setting]!r}.*metrics.csv"):
            check_model_settings(str(path))


def test_runs_in_the_evaluations_settings_and_models_without_a_run_record_pass(tmp_path):
    check_model_settings(str(_run(tmp_path)))
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "model.npz").write_bytes(b"")
    check_model_settings(str(loose / "model.npz"))  # no config.json
    (loose / "config.json").write_text(json.dumps({"per_step_cap": 9}))  # not a run record
    check_model_settings(str(loose / "model.npz"))
    (loose / "config.json").write_text("{not json")
    check_model_settings(str(loose / "model.npz"))


@pytest.mark.parametrize("command", ["evaluate", "show"])
def test_the_command_lines_refuse_it_in_one_line_before_any_work(tmp_path, capsys, command):
    from membudget.studies import budgetpm, show

    run = _run(tmp_path, per_step_cap=4)
    argv = (["--policies", "AllRelevant", "--reference", "AllRelevant", "--budgets", "B20", "--model", str(run)]
            if command == "evaluate" else ["--model", str(run), "--budget", "B20"])
    with pytest.raises(SystemExit) as e:
        (budgetpm if command == "evaluate" else show).main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "per_step_cap 4" in err[-1] and "Traceback" not in "\n".join(err)


def test_the_model_loaders_tables_of_subcommands_are_the_command_registrys():
    import membudget.train as train
    from membudget.agents.rl import OTHER_RUNS, PMWEEK_LEARNERS
    from membudget.studies.rl_vs_distillation.configs import TRAIN_COMMANDS

    assert set(PMWEEK_LEARNERS) == set(TRAIN_COMMANDS)
    assert set(PMWEEK_LEARNERS).isdisjoint(OTHER_RUNS)
    assert set(PMWEEK_LEARNERS) | set(OTHER_RUNS) == set(train.SUBCOMMANDS)

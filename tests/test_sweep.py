"""``python -m membudget.train sweep``: a Tune search (Optuna, ASHA) whose best config ppo accepts.
Skipped where Ray Tune or Optuna is not installed (.ci/ray installs them)."""

import csv
import json
import os

import pytest

pytest.importorskip("ray.tune")
pytest.importorskip("optuna")


def test_sweep_writes_a_best_config_that_ppo_native_accepts(tmp_path):
    from membudget import train
    from membudget.studies.sweep import SEARCH_SPACE

    run_dir = train.main(["sweep", "--trials", "2", "--total-timesteps", "640", "--eval-every", "640", "--n-envs",
                          "8", "--out", str(tmp_path)])
    with open(os.path.join(run_dir, "best_config.json")) as f:
        best = json.load(f)
    with open(os.path.join(run_dir, "trials.csv")) as f:
        trials = list(csv.DictReader(f))
    assert len(trials) == 2
    top = max(float(r["val_set_f1"]) for r in trials)  # the best trial's last validation Set F1
    assert any(all(best[k] == pytest.approx(float(r[f"config/{k}"])) for k in SEARCH_SPACE)
               for r in trials if float(r["val_set_f1"]) == top)
    assert 1e-4 <= best["learning_rate"] <= 3e-3 and best["reward_scale"] in (1.0, 10.0, 100.0)
    ppo_dir = train.main(["ppo", "--config", os.path.join(run_dir, "best_config.json"), "--eval-weeks", "2",
                          "--engine", "autograd", "--learning-curve", "off", "--progress-bar", "off",
                          "--out", str(tmp_path)])
    with open(os.path.join(ppo_dir, "config.json")) as f:
        used = json.load(f)["config"]
    assert all(used[k] == best[k] for k in best)

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


class _Stop(Exception):
    pass


@pytest.mark.parametrize("env_address", [None, "auto"])
def test_sweep_starts_its_own_cluster_unless_told_to_join_one(tmp_path, monkeypatch, env_address):
    """Like the ray backend: a new local cluster, not whatever cluster already runs on the machine (``ray.init()``
    alone joins one); ``RAY_ADDRESS`` joins an existing one."""
    import ray

    from membudget import train

    calls = []

    def fake_init(**kwargs):
        calls.append(kwargs)
        raise _Stop

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", fake_init)
    if env_address is None:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("RAY_ADDRESS", env_address)
    with pytest.raises(_Stop):
        train.main(["sweep", "--trials", "2", "--total-timesteps", "640", "--eval-every", "640", "--n-envs", "8",
                    "--out", str(tmp_path)])
    assert calls[0]["address"] == ("local" if env_address is None else None)

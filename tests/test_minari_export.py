"""Minari datasets: the DP's demonstrations (``python -m membudget.teachers export-minari``) and any policy's
rollouts, loadable with ``minari.load_dataset`` and ``recover_environment()`` in a fresh process."""

import json
import os
import subprocess
import sys

import numpy as np

from membudget.envs.pm import generate_episode, budget_levels
from membudget.teachers import HindsightDP

FRESH = """
import json, sys, minari
ds = minari.load_dataset(sys.argv[1])
env = ds.recover_environment()
obs, _ = env.reset(seed=0)
print(json.dumps({"returns": [float(e.rewards.sum()) for e in ds.iterate_episodes()], "steps": ds.total_steps,
                  "id": env.spec.id}))
"""


def test_dp_demonstrations_export_and_load_in_a_fresh_process(tmp_path):
    env = dict(os.environ, MINARI_DATASETS_PATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "membudget.teachers", "export-minari", "--dataset-id",
                          "membudget/pmweek-dp-test-v0", "--first-seed", "9000", "--n-weeks", "2"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    loaded = subprocess.run([sys.executable, "-c", FRESH, "membudget/pmweek-dp-test-v0"], env=env,
                            capture_output=True, text=True, timeout=600)
    assert loaded.returncode == 0, loaded.stderr
    res = json.loads(loaded.stdout.strip().splitlines()[-1])
    dp = [HindsightDP(budget=budget_levels()["B10"], per_step_cap=2).solve(generate_episode(s)).f1
          for s in (9000, 9001)]
    np.testing.assert_allclose(res["returns"], dp, atol=1e-9)  # rewards sum to the DP's Set F1
    assert res["steps"] == 160 and res["id"] == "membudget/PMWeek-v0"


def test_any_policy_records(tmp_path, monkeypatch):
    import gymnasium as gym
    import minari

    from membudget.baselines import AllRelevant
    from membudget.envs.recording import policy_actor, record_minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    ds = record_minari(gym.make("membudget/PMWeek-v0"), policy_actor(AllRelevant()), [8000],
                       "membudget/pmweek-allrelevant-test-v0", algorithm_name="AllRelevant")
    again = minari.load_dataset("membudget/pmweek-allrelevant-test-v0")
    assert ds.total_steps == again.total_steps == 80

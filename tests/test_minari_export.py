"""Minari datasets: the DP's demonstrations (``python -m membudget.teachers export-minari``) and any policy's
rollouts, loadable with ``minari.load_dataset`` and ``recover_environment()`` in a fresh process."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

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


@pytest.mark.slow
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
    import membudget

    assert again.storage.metadata["requirements"] == [f"membudget=={membudget.__version__}"]
    assert again.recover_environment(eval_env=True).spec.id == "membudget/PMWeek-v0"  # the recording env evaluates


def _episodes(ds):
    """Every episode of a Minari dataset as plain arrays (observations, actions, rewards, ends)."""
    def arrays(x):
        return {k: arrays(v) for k, v in x.items()} if isinstance(x, dict) else np.asarray(x)
    return [{f: arrays(getattr(e, f)) for f in ("id", "observations", "actions", "rewards", "terminations",
                                                  "truncations")} for e in ds.iterate_episodes()]


def _assert_same_episodes(a, b):
    def same(x, y):
        if isinstance(x, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        return x.dtype == y.dtype and np.array_equal(x, y)
    ea, eb = _episodes(a), _episodes(b)
    assert len(ea) == len(eb) > 0
    assert all(same(x, y) for x, y in zip(ea, eb))


def _reversed_map(fn, items):
    """The tasks run in reverse order, results in item order (as a remote backend returns them)."""
    items = list(items)
    return list(reversed([fn(x) for x in reversed(items)]))


def _solving_while_recording(dataset_id, seeds, budget):
    """The export as it was before it took ``map``: the DP solved in the recording loop at each week's start."""
    import gymnasium as gym

    from membudget.envs.recording import record_minari

    plan = {}

    def act(base, obs, info):
        t = int(base.core.t[0])
        if t == 0:
            plan.clear()
            for s, r in HindsightDP.from_env(base).solve(base.episode).schedule:
                plan.setdefault(s, []).append(r)
        a = np.zeros(base.action_space.shape, dtype=base.action_space.dtype)
        a[plan.get(t, [])] = 1
        return a

    return record_minari(gym.make("membudget/PMWeek-v0", budget=budget, per_step_cap=2), act, seeds, dataset_id,
                         algorithm_name="HindsightDP")


def test_dp_demonstrations_do_not_depend_on_the_map_and_equal_solving_while_recording(tmp_path, monkeypatch):
    from membudget.teachers.minari_export import dp_week_schedule, export_dp_demonstrations

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    seeds = [9002, 9000, 9001]
    calls = []

    def recording_map(fn, items):
        items = list(items)
        calls.append((fn, items))
        return _reversed_map(fn, items)

    default = export_dp_demonstrations("membudget/pmweek-dp-map-v0", seeds, budget="B5")
    mapped = export_dp_demonstrations("membudget/pmweek-dp-reversed-v0", seeds, budget="B5", map=recording_map)
    before = _solving_while_recording("membudget/pmweek-dp-before-v0", seeds, "B5")
    _assert_same_episodes(default, mapped)
    _assert_same_episodes(default, before)
    [(fn, items)] = calls  # one task per week, keyed by the week's seed (the budget bound to the task)
    assert items == seeds and fn.args[:2] == ("B5", 2)
    dp = HindsightDP(budget=budget_levels()["B5"], per_step_cap=2).solve(generate_episode(9001))
    assert dp_week_schedule("B5", 2, {}, 9001) == tuple(dp.schedule)
    np.testing.assert_allclose([e["rewards"].sum() for e in _episodes(mapped)], [
        HindsightDP(budget=budget_levels()["B5"], per_step_cap=2).solve(generate_episode(s)).f1 for s in seeds],
        atol=1e-9)


def test_demonstrations_command_on_the_backend_equals_the_teachers_export(tmp_path, monkeypatch):
    from membudget import evaluate
    from membudget.teachers.__main__ import main as teachers_main

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    week = ["--first-seed", "9000", "--n-weeks", "2", "--budget", "B10"]
    backend = evaluate.main(["demonstrations", "--dataset-id", "membudget/pmweek-dp-backend-v0", *week,
                             "--checkpoint-dir", str(tmp_path / "ckpt")])
    _assert_same_episodes(backend, teachers_main(["export-minari", "--dataset-id", "membudget/pmweek-dp-one-v0",
                                                  *week]))
    assert len(list((tmp_path / "ckpt").glob("*.pkl"))) == 2  # one finished task per week
    with pytest.raises(ValueError, match="--address needs --backend ray"):
        evaluate.main(["demonstrations", "--dataset-id", "membudget/pmweek-dp-x-v0", "--address", "auto"])

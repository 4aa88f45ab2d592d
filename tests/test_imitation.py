"""Behaviour cloning and DAgger from the hindsight DP."""

import numpy as np

from membudget.agents.imitation import StudentPolicy, fit_bc, fit_dagger
from membudget.envs.pm import PMWeekEnv
from membudget.teachers import HindsightDP


def test_bc_student_overfits_one_week_and_replays_its_dp_schedule():
    policy, history = fit_bc([2003], "B10", epochs=200)
    env = PMWeekEnv(budget="B10", action_mode="scores")
    obs, _ = env.reset(seed=2003)
    schedule = HindsightDP.from_env(env).solve(env.episode).schedule
    played = []
    for t in range(80):
        obs, _, _, _, info = env.step(policy.predict(obs)[0])
        played += [(t, int(r)) for r in np.flatnonzero(info["queried"])]
    assert played == schedule
    assert history[0]["env_steps"] == 80 and 0.0 <= history[0]["val_set_f1"] <= 1.0


def test_student_is_permutation_equivariant_and_round_trips(tmp_path):
    policy, _ = fit_bc([2000, 2001], "B10", epochs=5)
    env = PMWeekEnv(budget="B10", action_mode="scores")
    obs, _ = env.reset(seed=7)
    for _ in range(10):
        obs, *_ = env.step(policy.predict(obs)[0])
    perm = np.random.default_rng(1).permutation(11)
    permuted = {"resources": obs["resources"][perm], "budget": obs["budget"], "mask": obs["mask"][perm]}
    np.testing.assert_allclose(policy.probabilities(permuted), policy.probabilities(obs)[perm], rtol=1e-6)
    policy.save(tmp_path / "student.npz")
    back = StudentPolicy.load(tmp_path / "student.npz")
    np.testing.assert_array_equal(back.predict(obs)[0], policy.predict(obs)[0])
    batched = {k: np.stack([v, v]) for k, v in obs.items()}
    assert policy.predict(batched)[0].shape == (2, 11)


def test_dagger_aggregates_student_states():
    policy, history = fit_dagger([2000, 2001], "B5", iterations=2, epochs=5)
    assert [h["env_steps"] for h in history] == [160, 320, 480]
    assert policy.config["method"] == "dagger"

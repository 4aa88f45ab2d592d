"""Behaviour cloning and DAgger from the hindsight DP."""

import numpy as np

from membudget.agents.imitation import Demonstrations, StudentPolicy, dp_demonstrations, fit_bc, fit_dagger, fit_net
from membudget.agents.per_resource import PerResourceNet
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


def _tensors(demos):
    import torch

    return tuple(torch.as_tensor(a) for a in demos.arrays()[:3])


def test_standardised_fit_reads_raw_observations_and_does_not_depend_on_a_features_units():
    import torch

    demos = dp_demonstrations([2000], "B10")
    units = np.ones(demos.resources.shape[-1], dtype=np.float32)
    units[[5, 6, 12]] = (100.0, 0.01, 7.0)  # the same features in other units
    scaled = Demonstrations(demos.resources * units, demos.budget, demos.mask, demos.labels)
    a = fit_net(demos, hidden=(8, 8), epochs=2, seed=0, standardize=True)
    b = fit_net(scaled, hidden=(8, 8), epochs=2, seed=0, standardize=True)
    res, bud, mask = _tensors(demos)
    with torch.no_grad():
        torch.testing.assert_close(a(res, bud, mask), b(res * torch.as_tensor(units), bud, mask), atol=1e-4, rtol=0)
    raw = fit_net(demos, hidden=(8, 8), epochs=2, seed=0, standardize=False)
    assert isinstance(a, PerResourceNet) and a.config() == raw.config()  # the same class and saved form


def test_standardised_fit_continues_a_network_where_it_stands():
    import copy

    import torch

    demos = dp_demonstrations([2000], "B10")
    net = fit_net(demos, hidden=(8, 8), epochs=2, seed=0, standardize=True)
    again = fit_net(demos, hidden=(8, 8), epochs=1, seed=0, lr=1e-12, standardize=True, init=copy.deepcopy(net))
    res, bud, mask = _tensors(demos)
    with torch.no_grad():
        torch.testing.assert_close(again(res, bud, mask), net(res, bud, mask), atol=1e-4, rtol=1e-4)


def test_every_entry_point_reads_the_imitation_defaults_from_one_place():
    import inspect

    from membudget.agents.imitation import DEFAULTS, defaults
    from membudget.agents.tasks import CONVERSATION, PMWEEK
    from membudget.studies.rl_vs_distillation import BENCH_FULL, ImitationConfig

    cli = ImitationConfig()
    assert (cli.train_weeks, cli.epochs, cli.hidden, cli.iterations, cli.context) == (
        DEFAULTS.weeks, DEFAULTS.epochs, DEFAULTS.width, DEFAULTS.iterations, "on" if DEFAULTS.context else "off")
    assert (BENCH_FULL["imitation_weeks"], BENCH_FULL["epochs"], BENCH_FULL["dagger_iterations"]) == (
        DEFAULTS.weeks, DEFAULTS.epochs, DEFAULTS.iterations)
    fit = inspect.signature(fit_net).parameters
    assert {k: fit[k].default for k in ("epochs", "lr", "batch", "standardize", "context", "hidden")} == {
        k: getattr(DEFAULTS, k) for k in ("epochs", "lr", "batch", "standardize", "context", "hidden")}
    assert defaults(PMWEEK) is DEFAULTS and defaults(CONVERSATION) is not DEFAULTS
    policy, _ = fit_bc([2000], "B10", epochs=1)  # unset settings: the defaults, recorded with the student
    assert {k: policy.config[k] for k in ("lr", "batch", "standardize", "context", "hidden", "calibrate")} == {
        "lr": DEFAULTS.lr, "batch": DEFAULTS.batch, "standardize": DEFAULTS.standardize,
        "context": DEFAULTS.context, "hidden": list(DEFAULTS.hidden), "calibrate": DEFAULTS.calibrate}


def test_threshold_quality_is_each_threshold_rolled_out_alone_and_calibration_takes_the_best():
    from membudget.agents.imitation import calibrate_threshold, threshold_quality, with_threshold
    from membudget.envs.pm.rollout import rollout

    net = fit_net(dp_demonstrations([2000, 2001], "B10"), hidden=(8, 8), epochs=3, seed=0)
    weeks, grid = [4000, 4001, 4002], (0.05, 0.5, 0.9)
    quality = threshold_quality(net, "B10", weeks, grid)
    for row, t in zip(quality, grid):
        folded = rollout(StudentPolicy(with_threshold(net, t)), weeks, budget="B10", action_mode="scores")["set_f1"]
        np.testing.assert_array_equal(row, folded)
        at_t = rollout(StudentPolicy(net, t), weeks, budget="B10", action_mode="scores")["set_f1"]
        np.testing.assert_allclose(row, at_t)  # the fold acts as the threshold does
    threshold, table = calibrate_threshold(net, "B10", weeks, grid)
    assert table == {t: float(q) for t, q in zip(grid, quality.mean(axis=1))}
    assert table[threshold] == max(table.values()) and threshold == grid[int(np.argmax(quality.mean(axis=1)))]


def test_fitted_students_act_with_their_calibrated_threshold_folded_into_the_network():
    import torch

    policy, _ = fit_bc([2000], "B10", epochs=2, hidden=8)
    raw, _ = fit_bc([2000], "B10", epochs=2, hidden=8, calibrate=False)
    cal, t = policy.config["calibration"], policy.config["threshold"]
    assert policy.config["calibrate"] and cal["episodes"] == [4000, 4029]
    assert cal["set_f1"][str(t)] == max(cal["set_f1"].values()) and "calibration" not in raw.config
    assert policy.threshold == raw.threshold == 0.5  # the threshold lives in the head's bias
    a, b = policy.net.state_dict(), raw.net.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a if k != "head.bias")
    env = PMWeekEnv(budget="B10", action_mode="scores")
    obs, _ = env.reset(seed=4005)
    for _ in range(30):
        chosen = policy.predict(obs)[0] > 0
        np.testing.assert_array_equal(chosen, StudentPolicy(raw.net, t).predict(obs)[0] > 0)
        obs, *_ = env.step(policy.predict(obs)[0])
    seen = []
    dagger, _ = fit_dagger([2000], "B10", iterations=1, epochs=2, hidden=8,
                           callback=lambda it, p: seen.append(p.config["threshold"]))
    assert len(seen) == 2 and dagger.config["threshold"] == seen[-1] and dagger.threshold == 0.5


def test_a_fit_reads_an_imitation_settings_or_overrides_alike_and_refuses_unknown_settings(monkeypatch):
    import dataclasses

    import pytest
    import torch

    from membudget.agents import imitation

    settings = dataclasses.replace(imitation.DEFAULTS, epochs=2, width=8, calibrate=False)
    a, _ = fit_bc([2000], "B10", settings)
    b, _ = fit_bc([2000], "B10", epochs=2, hidden=8, calibrate=False)
    assert a.config == b.config
    assert all(torch.equal(x, y) for x, y in zip(a.net.state_dict().values(), b.net.state_dict().values()))

    def no_teacher(*args, **kwargs):
        raise AssertionError("the teacher ran before the settings were checked")

    monkeypatch.setattr(imitation, "dp_demonstrations", no_teacher)
    with pytest.raises(TypeError, match="^unknown setting.* epoch; a fit takes epochs, hidden"):
        fit_bc([2000], "B10", epoch=3)
    with pytest.raises(TypeError, match="^unknown setting.* iterations"):
        fit_bc([2000], "B10", iterations=3)
    with pytest.raises(TypeError, match="^settings must be an ImitationSettings, got dict"):
        fit_dagger([2000], "B10", {"epochs": 3})
    with pytest.raises(ValueError, match="^iterations must be a positive int"):
        fit_dagger([2000], "B10", iterations=0)

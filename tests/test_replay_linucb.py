"""LinUCB: ridge exactness after any updates, errors, policy protocol, MABWiser agreement, a short PPO run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membudget.agents.linucb import HybridLinUCB, LinUCB, SingleHeadLinUCB


def ridge(X, acts, Y, K, lam, intercept):
    if intercept:
        X = np.hstack([X, np.ones((len(X), 1))])
    out = []
    for a in range(K):
        m = acts == a
        out.append(np.linalg.solve(lam * np.eye(X.shape[1]) + X[m].T @ X[m], X[m].T @ Y[m]).T)
    return np.array(out)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 80), K=st.integers(1, 5), d=st.integers(1, 6),
       lam=st.floats(0.1, 5.0), intercept=st.booleans(), cuts=st.lists(st.integers(0, 80), max_size=6))
def test_estimates_equal_direct_ridge_solve(seed, n, K, d, lam, intercept, cuts):
    rng = np.random.default_rng(seed)
    X, acts = rng.normal(size=(n, d)) * 2, rng.integers(0, K, n)
    c, k = rng.random(n), rng.random(n)
    bandit = LinUCB(n_actions=K, l2_lambda=lam, fit_intercept=intercept)
    bounds = sorted({0, n, *[min(x, n) for x in cuts]})
    for lo, hi in zip(bounds[:-1], bounds[1:]):   # mix batched (Woodbury) and single (Sherman-Morrison) updates
        if hi - lo == 1 or rng.random() < 0.3:
            for i in range(lo, hi):
                bandit.update(X[i], int(acts[i]), c[i], k[i])
        else:
            bandit.partial_fit(X[lo:hi], acts[lo:hi], c[lo:hi], k[lo:hi])
    expected = ridge(X, acts, np.column_stack([c, k]), K, lam, intercept)
    np.testing.assert_allclose(bandit.theta_, expected, rtol=1e-7, atol=1e-9)
    one = SingleHeadLinUCB(n_actions=K, l2_lambda=lam, fit_intercept=intercept).fit(X, acts, c - 0.5 * k)
    np.testing.assert_allclose(one.theta_[:, 0], ridge(X, acts, c - 0.5 * k, K, lam, intercept), rtol=1e-7,
                               atol=1e-9)


def test_select_matches_decision_function_and_bonus():
    rng = np.random.default_rng(0)
    b = LinUCB(alpha=0.7)
    for _ in range(60):
        x = rng.random(12)
        scores = None if not hasattr(b, "A_inv_") else b.decision_function(x)[0]
        a = b.select(x)
        if scores is not None:
            assert a == int(scores.argmax())
            assert b.last_bonus_ == pytest.approx(b.ucb_bonus(x)[0, a])
        b.update(x, a, float(rng.random() < 0.5), rng.random())


def test_alpha_decay_scales_the_bonus_by_tau_over_tau_plus_observations():
    # alpha 0.8, tau 4, one action, d = 1 with intercept: x = (1, 1), A = I + n x x^T after n observations, so
    # x^T A^{-1} x = 2 / (1 + 2 n) and the bonus is 0.8 · 4 / (4 + n) · sqrt(2 / (1 + 2 n))
    b = LinUCB(n_actions=1, alpha=0.8, alpha_decay=4.0)
    for n in range(6):
        assert b.select(np.ones(1)) == 0
        assert b.last_bonus_ == pytest.approx(0.8 * 4 / (4 + n) * np.sqrt(2 / (1 + 2 * n)), rel=1e-12)
        assert b.ucb_bonus(np.ones(1))[0, 0] == pytest.approx(b.last_bonus_, rel=1e-12)
        b.update(np.ones(1), 0, 1.0, 0.5)
    b.partial_fit(np.ones((3, 1)), np.zeros(3, dtype=int), np.ones(3), np.zeros(3))   # batched updates count too
    assert b.ucb_bonus(np.ones(1))[0, 0] == pytest.approx(0.8 * 4 / 13 * np.sqrt(2 / 19), rel=1e-12)
    constant = LinUCB(n_actions=1, alpha=0.8).fit(np.ones((9, 1)), np.zeros(9, dtype=int), np.ones(9), np.zeros(9))
    assert constant.ucb_bonus(np.ones(1))[0, 0] == pytest.approx(0.8 * np.sqrt(2 / 19), rel=1e-12)


def test_alpha_decay_changes_choices_only_through_the_bonus():
    # two actions, action 1 estimated better; a large bonus on the untried action 0 wins until the decay shrinks it
    x = np.ones(1)
    for decay, expected in [(None, 0), (1.0, 1)]:
        b = LinUCB(n_actions=2, alpha=0.5, alpha_decay=decay)
        b.partial_fit(np.ones((40, 1)), np.ones(40, dtype=int), np.full(40, 0.6), np.zeros(40))
        assert b.select(x) == expected
        assert b.decision_function(x)[0].argmax() == expected


def test_policy_protocol_single_and_batched():
    rng = np.random.default_rng(1)
    X = rng.random((30, 12))
    b = LinUCB().partial_fit(X, rng.integers(0, 12, 30), rng.random(30), rng.random(30))
    a, state = b.predict(X[0].astype(np.float32))
    assert np.ndim(a) == 0 and 0 <= a < 12 and state is None
    acts, _ = b.predict(X[:7], episode_start=np.ones(7, bool))
    assert acts.shape == (7,) and acts.dtype.kind == "i" and acts[0] == a
    assert b.predict_heads(X[:3]).shape == (3, 12, 2)


@pytest.mark.parametrize("kwargs, match", [
    ({"alpha": -1.0}, "alpha must be >= 0"), ({"l2_lambda": 0.0}, "l2_lambda must be > 0"),
    ({"n_actions": 0}, "n_actions must be an int >= 1"), ({"cost_weight": float("inf")}, "cost_weight must be"),
    ({"fit_intercept": "yes"}, "fit_intercept must be a bool"), ({"alpha_decay": 0.0}, "alpha_decay must be > 0"),
    ({"alpha_decay": float("nan")}, "alpha_decay must be a finite"),
])
def test_bad_parameters_raise_on_first_use(kwargs, match):
    b = LinUCB(**kwargs)  # __init__ only stores
    with pytest.raises(ValueError, match=match):
        b.select(np.zeros(12))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_bad_inputs():
    b = LinUCB()
    b.select(np.zeros(12))
    with pytest.raises(ValueError, match=r"shape \(12,\)"):
        b.select(np.zeros(11))
    with pytest.raises(ValueError, match="set up with 12"):
        b.partial_fit(np.zeros((2, 5)), [0, 1], [1, 0], [0.1, 0.2])
    with pytest.raises(ValueError, match="action must be an int"):
        b.update(np.zeros(12), 12, 1.0, 0.1)
    with pytest.raises(ValueError, match="finite"):
        b.update(np.zeros(12), 1, float("nan"), 0.1)
    with pytest.raises(ValueError, match="finite"):
        b.update(np.full(12, np.inf), 1, 1.0, 0.1)
    with pytest.raises(ValueError, match="actions must lie"):
        b.partial_fit(np.zeros((2, 12)), [0, 99], [1, 0], [0.1, 0.2])
    with pytest.raises(ValueError, match="finite"):
        b.partial_fit(np.full((1, 12), np.nan), [0], [1], [0.1])
    with pytest.raises(ValueError, match="no state yet"):
        LinUCB().ridge_estimates()
    assert np.isfinite(b.A_inv_).all()  # nothing was corrupted by the rejected updates


def test_single_head_matches_mabwiser_choices():
    pytest.importorskip("mabwiser")
    from membudget.bench.linucb import run_mabwiser, run_ours, stream_data

    X, c, k = stream_data(42, n_tasks=150)
    ours = run_ours(SingleHeadLinUCB(alpha=0.5, l2_lambda=1.0), X, c, k, 0.5, False)
    np.testing.assert_array_equal(ours, run_mabwiser(X, c, k, 0.5, 0.5, 1.0, 12))


def test_online_bandit_run_and_ppo_complete():
    from membudget.agents.replay_ppo import train_ppo
    from membudget.studies.limbo import run_bandit, run_policy

    res = run_bandit(LinUCB(), profile="weak", seed=42, n_tasks=100)
    assert res["actions"].shape == (100,) and np.isfinite(res["bonus"]).all()
    assert res["bonus"][-20:].mean() < res["bonus"][:20].mean()
    model = train_ppo(profile="weak", total_timesteps=256, n_steps=128, batch_size=64, n_tasks=100)
    out = run_policy(model, profile="weak", seed=42, n_tasks=100)
    assert out["actions"].shape == (100,) and 0.0 <= out["accuracy"] <= 1.0


@pytest.mark.parametrize("make", [lambda **kw: LinUCB(n_actions=4, **kw),
                                  lambda **kw: HybridLinUCB(action_features=np.arange(8.0).reshape(4, 2) / 8,
                                                            n_actions=4, **kw)])
def test_set_params_after_fit_acts_as_a_bandit_fitted_with_those_params(make):
    rng = np.random.default_rng(0)
    X, a = rng.normal(size=(120, 3)), rng.integers(0, 4, 120)
    correct, cost = rng.random(120), 3 * rng.random(120)
    changed = make(alpha=0.0, cost_weight=0.0).fit(X, a, correct, cost).set_params(cost_weight=5.0, alpha=0.3)
    fresh = make(alpha=0.3, cost_weight=5.0).fit(X, a, correct, cost)
    for bandit in (changed, fresh):  # the fast path keeps combined estimates: they follow the new weight
        bandit.update(X[0], 1, 1.0, 0.5)
    np.testing.assert_allclose(changed.decision_function(X), fresh.decision_function(X), rtol=1e-12, atol=1e-12)
    assert [changed.select(x) for x in X[:40]] == [fresh.select(x) for x in X[:40]]
    with pytest.raises(ValueError, match="alpha"):
        changed.set_params(alpha=-1.0)
    assert changed.alpha == 0.3  # a refused value changes nothing
    changed.set_params(l2_lambda=2.0)  # the state was built with the old prior: it is discarded, as fit would
    assert not hasattr(changed, "A_inv_")

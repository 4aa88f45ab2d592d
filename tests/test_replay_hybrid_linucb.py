"""HybridLinUCB (Li et al. 2010's shared + per-action model with LIMBO's two heads): estimates and bonus equal a
direct joint ridge solve, identity action features reduce it to disjoint LinUCB, errors, the online loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membudget.agents.linucb import HybridLinUCB, LinUCB


def joint_rows(x, F, intercept):
    """φ(x, a) for every action, built independently of the agent: (kron(f_a, x), x in action a's block)."""
    x = np.append(x, 1.0) if intercept else np.asarray(x, float)
    K, d = len(F), x.size
    rows = []
    for a in range(K):
        own = np.zeros(K * d)
        own[a * d:(a + 1) * d] = x
        rows.append(np.concatenate([np.kron(F[a], x), own]))
    return np.array(rows)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60), K=st.integers(1, 4), d=st.integers(1, 4),
       m=st.integers(1, 3), lam=st.floats(0.1, 5.0), own=st.one_of(st.none(), st.floats(0.1, 50.0)),
       intercept=st.booleans(), cut=st.integers(0, 60))
def test_estimates_and_bonus_equal_direct_joint_ridge_solve(seed, n, K, d, m, lam, own, intercept, cut):
    rng = np.random.default_rng(seed)
    X, acts = rng.normal(size=(n, d)), rng.integers(0, K, n)
    F = rng.integers(0, 2, size=(K, m)).astype(float)
    Y = np.column_stack([rng.random(n), rng.random(n)])
    bandit = HybridLinUCB(action_features=F, n_actions=K, l2_lambda=lam, own_l2_lambda=own, fit_intercept=intercept,
                          alpha=0.7)
    cut = min(cut, n)
    if cut:
        bandit.partial_fit(X[:cut], acts[:cut], Y[:cut, 0], Y[:cut, 1])
    for i in range(cut, n):
        bandit.update(X[i], int(acts[i]), Y[i, 0], Y[i, 1])
    Phi = np.array([joint_rows(X[i], F, intercept)[acts[i]] for i in range(n)])
    shared = m * (d + intercept)
    M = np.diag([lam] * shared + [lam if own is None else own] * (Phi.shape[1] - shared)) + Phi.T @ Phi
    theta = np.linalg.solve(M, Phi.T @ Y).T
    np.testing.assert_allclose(bandit.ridge_estimates(), theta, rtol=1e-6, atol=1e-8)
    probe = rng.normal(size=(3, d))
    P = np.array([joint_rows(x, F, intercept) for x in probe])                   # (3, K, D)
    np.testing.assert_allclose(bandit.predict_heads(probe), P @ theta.T, rtol=1e-6, atol=1e-8)
    var = np.einsum("nkD,nkD->nk", P, np.linalg.solve(M, P.reshape(-1, P.shape[2]).T).T.reshape(P.shape))
    np.testing.assert_allclose(bandit.ucb_bonus(probe), 0.7 * np.sqrt(var), rtol=1e-6, atol=1e-8)


def test_identity_action_features_make_disjoint_linucb_at_half_the_ridge():
    # f_a = e_a: E[y] = x·(β_a + θ_a) with both penalised by λ, i.e. x·w_a with penalty λ/2 on w_a
    rng = np.random.default_rng(3)
    K, d = 4, 3
    hybrid = HybridLinUCB(action_features=np.eye(K), n_actions=K, l2_lambda=2.0, alpha=0.4)
    disjoint = LinUCB(n_actions=K, l2_lambda=1.0, alpha=0.4)
    for _ in range(60):
        x = rng.normal(size=d)
        a = hybrid.select(x)
        assert a == disjoint.select(x)
        assert hybrid.last_bonus_ == pytest.approx(disjoint.last_bonus_, rel=1e-9)
        c, k = float(rng.random() < 0.3 + 0.1 * a), rng.random()
        hybrid.update(x, a, c, k)
        disjoint.update(x, a, c, k)
    probe = rng.normal(size=(5, d))
    np.testing.assert_allclose(hybrid.decision_function(probe), disjoint.decision_function(probe), rtol=1e-9)


def test_an_outcome_informs_actions_that_share_a_feature():
    F = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])                          # actions 0, 1 share feature 0
    bandit = HybridLinUCB(action_features=F, n_actions=3, fit_intercept=False)
    x = np.array([1.0])
    bandit.partial_fit(np.tile(x, (20, 1)), np.zeros(20, dtype=int), np.ones(20), np.zeros(20))
    heads = bandit.predict_heads(x)[0, :, 0]
    assert heads[0] > heads[1] > 0.3 and heads[2] == 0.0
    assert bandit.n_updates_.tolist() == [20, 0, 0]


def test_select_matches_decision_function_and_decay():
    rng = np.random.default_rng(0)
    F = np.array([[1, 0, 1], [1, 0, 0], [0, 1, 1], [0, 1, 0]], float)
    bandit = HybridLinUCB(action_features=F, n_actions=4, alpha=1.0, alpha_decay=10.0)
    for t in range(30):
        x = rng.random(5)
        scores = bandit.decision_function(x)[0]
        a = bandit.select(x)
        assert a == int(np.argmax(scores))
        assert bandit.last_bonus_ == pytest.approx(bandit.ucb_bonus(x)[0, a])
        bandit.update(x, a, float(rng.random() < 0.5), rng.random())
    X, A, zero = rng.random((30, 5)), rng.integers(0, 4, 30), np.zeros(30)
    decayed = HybridLinUCB(action_features=F, n_actions=4, alpha=1.0, alpha_decay=10.0).fit(X, A, zero, zero)
    raw = HybridLinUCB(action_features=F, n_actions=4, alpha=1.0).fit(X, A, zero, zero)
    x = rng.random(5)
    np.testing.assert_allclose(decayed.ucb_bonus(x), raw.ucb_bonus(x) * 10.0 / (10.0 + 30.0))


@pytest.mark.parametrize("kwargs, match", [
    ({}, "action_features is required"),
    ({"action_features": np.ones((3, 2))}, r"shape \(4, m\)"),
    ({"action_features": np.ones((4, 0))}, r"shape \(4, m\)"),
    ({"action_features": np.full((4, 1), np.nan)}, "action_features must be finite"),
    ({"action_features": [["a"]] * 4}, "action_features must be numbers"),
    ({"action_features": np.ones((4, 1)), "own_l2_lambda": 0.0}, "own_l2_lambda must be >="),
])
def test_bad_action_features_raise_on_first_use(kwargs, match):
    bandit = HybridLinUCB(n_actions=4, **kwargs)
    with pytest.raises(ValueError, match=match):
        bandit.select(np.zeros(2))


def test_bad_inputs():
    bandit = HybridLinUCB(action_features=np.eye(3), n_actions=3)
    with pytest.raises(ValueError, match="one observation"):
        bandit.select(np.zeros((2, 2)))
    bandit.select(np.zeros(2))
    with pytest.raises(ValueError, match="x must be finite"):
        bandit.select(np.array([np.inf, 0.0]))
    with pytest.raises(ValueError, match="features"):
        bandit.update(np.zeros(3), 0, 1.0, 0.1)
    with pytest.raises(ValueError, match=r"actions must lie in \[0, 3\)"):
        bandit.update(np.zeros(2), 3, 1.0, 0.1)
    with pytest.raises(ValueError, match="correct must be finite"):
        bandit.update(np.zeros(2), 0, np.nan, 0.1)
    assert bandit.n_updates_.sum() == 0


def test_the_fitted_bandit_keeps_its_own_copy_of_the_action_features_and_takes_empty_batches():
    rng = np.random.default_rng(0)
    X, a = rng.normal(size=(30, 3)), rng.integers(0, 4, 30)
    correct, cost = rng.random(30), rng.random(30)
    F = np.arange(8.0).reshape(4, 2) / 8
    bandit = HybridLinUCB(action_features=F, n_actions=4).fit(X, a, correct, cost)
    before = bandit.decision_function(X)
    F[:] = F[::-1]   # the caller reuses its array
    assert np.array_equal(bandit.decision_function(X), before)
    assert bandit.predict(np.zeros((0, 3)))[0].shape == (0,)
    assert bandit.decision_function(np.zeros((0, 3))).shape == (0, 4)


@pytest.mark.parametrize("make", [lambda: LinUCB(n_actions=4),
                                  lambda: HybridLinUCB(action_features=np.eye(4), n_actions=4)])
def test_fit_refuses_empty_or_bad_data_and_keeps_the_state_it_had(make):
    rng = np.random.default_rng(1)
    X, a = rng.normal(size=(20, 3)), rng.integers(0, 4, 20)
    bandit = make().fit(X, a, rng.random(20), rng.random(20))
    before = bandit.decision_function(X)
    with pytest.raises(ValueError, match="no rows"):
        bandit.fit(np.zeros((0, 3)), np.zeros(0, dtype=int), np.zeros(0), np.zeros(0))
    with pytest.raises(ValueError, match="actions must lie"):
        bandit.fit(X, a + 4, rng.random(20), rng.random(20))
    assert np.array_equal(bandit.decision_function(X), before) and bandit.n_updates_.sum() == 20


def test_set_params_on_a_fresh_bandit_stores_related_parameters_in_separate_calls():
    bandit = HybridLinUCB().set_params(n_actions=4)   # action_features comes in the next call
    bandit.set_params(action_features=np.eye(4))
    assert bandit.select(np.zeros(2)) in range(4)
    with pytest.raises(ValueError, match="alpha"):   # a fitted bandit checks at once, and keeps its value
        bandit.set_params(alpha=-1.0)
    assert bandit.alpha != -1.0

"""ReplayStream-v1: checkers, determinism, bad input, v0 unchanged, and the v1 world's structure (k = 16-scale
replay the strongest and costliest, retrieval below it, profiles fitted on development streams only)."""

from __future__ import annotations

import hashlib

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import membudget  # noqa: F401
from membudget.agents.replay_ppo import make_env
from membudget.envs.replay.world import generate_stream
from membudget.envs.replay.world_v1 import PROFILE_PARAMS_V1, TARGETS_V1, coverage_v1, generate_stream_v1

V1 = "membudget/ReplayStream-v1"


def _digest(s):
    h = hashlib.sha256()
    for a in (s.correct, s.tokens, s.error, s.sc_correct, np.round(s.prob, 9)):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("family, profile, digest", [("db", "weak", "9d854c75093dfa73"),
                                                     ("os", "strong", "28446f4f4150227a")])
def test_v0_streams_are_unchanged(family, profile, digest):
    """Digests taken from ReplayStream-v0's world before v1 was added."""
    assert _digest(generate_stream(7, family=family, profile=profile, n_tasks=120)) == digest


def test_check_env_and_same_seed_same_stream():
    env = gym.make(V1, n_tasks=40).unwrapped
    check_env(env, skip_render_check=True)
    a = generate_stream_v1(3, family="os", profile="mid", n_tasks=60)
    b = generate_stream_v1(3, family="os", profile="mid", n_tasks=60)
    assert _digest(a) == _digest(b)
    assert _digest(a) != _digest(generate_stream_v1(4, family="os", profile="mid", n_tasks=60))
    assert _digest(a) != _digest(generate_stream(3, family="os", profile="mid", n_tasks=60, recent_k=16))


def test_v1_defaults_and_text():
    env = gym.make(V1, render_mode="ansi")
    assert env.unwrapped.recent_k == 16 and env.unwrapped.retrieve_k == 4  # db
    assert gym.make(V1, family="os").unwrapped.retrieve_k == 1
    env.reset(seed=0)
    assert "ReplayStream-v1" in env.render()
    _, _, _, _, info = env.step(0)
    assert info["replay_tokens"] == 0


@pytest.mark.parametrize("kwargs, match", [({"profile": "huge"}, "profile"), ({"family": "sql"}, "family"),
                                           ({"recent_k": 0}, "recent_k"), ({"n_tasks": 0}, "n_tasks"),
                                           ({"cost_weight": -1.0}, "cost_weight")])
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gym.make(V1, **kwargs)


def test_bad_actions_and_versions_are_refused():
    env = gym.make(V1, n_tasks=5)
    with pytest.raises(RuntimeError):
        env.unwrapped.step(0)
    env.reset(seed=1)
    for bad in (12, -1, 1.5):
        with pytest.raises((ValueError, TypeError)):
            env.step(bad)
    with pytest.raises(ValueError, match="version"):
        make_env("db", "mid", version=2)


def test_coverage_is_the_best_match():
    task = np.array([True, True, False])
    items = np.array([[True, False, False], [True, True, False]])
    assert coverage_v1(task, items, np.array([False, False])) == pytest.approx(0.6)
    assert coverage_v1(task, items[:1], np.array([True])) == pytest.approx(0.3 + 0.4)
    assert coverage_v1(task, items[:0], np.array([], dtype=bool)) == 0.0


def _expected(stream, action):
    return float(stream.prob[:, action].mean())


@pytest.mark.parametrize("profile", ["strong", "weak"])
def test_k16_replay_is_the_strongest_and_costliest_on_db(profile):
    """On a development stream: fixed k = 16 (full, low tier) is above retrieved k = 4 and k = 1 and above no
    replay, at 5-6x the no-replay tokens; retrieved k = 1 costs less than 1.5x."""
    big = generate_stream_v1(0, family="db", profile=profile, recent_k=16, retrieve_k=4)
    one = generate_stream_v1(0, family="db", profile=profile, recent_k=16, retrieve_k=1)
    none, k16, r4, r1 = _expected(big, 0), _expected(big, 3), _expected(big, 9), _expected(one, 9)
    assert k16 > r4 > none and k16 > r1 > none
    ratio = big.tokens[:, 3].mean() / big.tokens[:, 0].mean()
    assert 4.5 < ratio < 6.5
    assert one.tokens[:, 9].mean() / one.tokens[:, 0].mean() < 1.5


def test_profiles_follow_limbos_figures_on_development_streams():
    """Llama DB: no replay near 20.8%, retrieved k = 1 near 66%, fixed k = 16 near 70% (within 3 points)."""
    t = TARGETS_V1[("weak", "db")]
    s = generate_stream_v1(1, family="db", profile="weak", recent_k=16, retrieve_k=1)
    assert abs(_expected(s, 0) - t["none"]) < 0.03
    assert abs(_expected(s, 3) - t["fixed-k16"]) < 0.03
    assert abs(_expected(s, 9) - t["retrieved-k1"]) < 0.03
    assert set(PROFILE_PARAMS_V1) == set(TARGETS_V1)


def test_calibration_refuses_the_report_seeds():
    from membudget.studies.limbo_calibration import fit

    with pytest.raises(ValueError, match="development"):
        fit("strong", "db", seeds=(0, 42))


def test_paired_comparison_exact_case():
    from membudget.studies.limbo import paired_comparison

    a = [{"correct": np.array([1, 1, 0, 1], bool), "tokens": np.array([10, 10, 10, 10])}]
    b = [{"correct": np.array([1, 0, 0, 1], bool), "tokens": np.array([40, 40, 40, 40])}]
    (d, lo, hi), (s, slo, shi) = paired_comparison(a, b, n_resamples=500)
    assert d == pytest.approx(0.25) and 0.0 <= lo <= d <= hi <= 1.0
    assert s == pytest.approx(0.75) and slo == pytest.approx(0.75) and shi == pytest.approx(0.75)
    with pytest.raises(ValueError, match="same streams"):
        paired_comparison(a, [{"correct": np.ones(3, bool), "tokens": np.ones(3)}])

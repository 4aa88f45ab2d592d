"""The SB3 adapter of the native vector env equals SB3's DummyVecEnv of single PMWeek-v0 environments."""

import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv

from membudget.agents.sb3_vec import PMWeekSB3VecEnv
from membudget.envs.pm import PMWeekEnv


@pytest.mark.parametrize("kw", [dict(), dict(budget="B5", action_mode="scores", late_policy="execute")])
def test_adapter_equals_dummy_vec_env(kw):
    n = 3
    ref = DummyVecEnv([lambda: PMWeekEnv(**kw) for _ in range(n)])
    ours = PMWeekSB3VecEnv(n, **kw)
    ref.seed(11)
    ours.seed(11)
    o1, o2 = ref.reset(), ours.reset()
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(200):
        for k in o1:
            np.testing.assert_array_equal(o1[k], o2[k])
        if kw.get("action_mode") == "scores":
            a = rng.uniform(-1, 1, (n, 11)).astype(np.float32)
        else:
            a = rng.integers(0, 2, (n, 11))
        o1, r1, d1, i1 = ref.step(a)
        o2, r2, d2, i2 = ours.step(a)
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(d1, d2)
        for j in range(n):  # every info, key by key, with its Python and NumPy types
            _assert_same(i2[j], i1[j])
        ends += int(d1.sum())
    assert ends == 2 * n  # two weeks finished in every slot


def _assert_same(ours, ref):
    assert sorted(ours) == sorted(ref)
    for k, v in ref.items():
        if isinstance(v, dict):
            _assert_same(ours[k], v)
        else:
            assert type(ours[k]) is type(v), (k, type(ours[k]), type(v))
            np.testing.assert_array_equal(ours[k], v, err_msg=k)


def test_maskable_ppo_runs_on_the_adapter():
    from sb3_contrib import MaskablePPO

    venv = PMWeekSB3VecEnv(4)
    masks = venv.env_method("action_masks")
    assert len(masks) == 4 and masks[0].shape == (22,)
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=64, batch_size=64, seed=0, device="cpu")
    model.learn(256)
    action, _ = model.predict(venv.reset(), action_masks=np.stack(venv.env_method("action_masks")))
    assert action.shape == (4, 11)


def test_adapter_renders_as_dummy_vec_env():
    """SB3's ``VecEnv.render`` on the adapter: the tiled frames of ``DummyVecEnv`` (rgb_array) across an episode's
    end, the texts per week (ansi), None with SB3's warning without a mode."""
    n = 2
    for mode in ("rgb_array", "ansi"):
        ref = DummyVecEnv([lambda: PMWeekEnv(budget="B5", render_mode=mode) for _ in range(n)])
        ours = PMWeekSB3VecEnv(n, budget="B5", render_mode=mode)
        ref.seed(3)
        ours.seed(3)
        ref.reset(), ours.reset()
        rng = np.random.default_rng(0)
        for step in range(82):
            if mode == "rgb_array" and step in (0, 1, 79, 80, 81):  # the first week's end and the second's start
                np.testing.assert_array_equal(ours.render(), ref.render())
            elif mode == "ansi":
                assert ours.env_method("render") == ref.env_method("render")
            a = rng.integers(0, 2, (n, 11))
            ref.step(a), ours.step(a)
    plain = PMWeekSB3VecEnv(n)
    plain.reset()
    with pytest.warns(UserWarning, match="no `render_mode`"):
        assert plain.render() is None

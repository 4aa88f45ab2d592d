"""Stable-Baselines3 and sb3-contrib on every id with their default path: ``make_vec_env``, a few hundred
training steps, ``save`` / ``load`` / ``predict``; MaskablePPO takes PMWeek-v0's ``action_masks()`` as is."""

import gymnasium as gym
import numpy as np
import pytest

sb3 = pytest.importorskip("stable_baselines3")
sb3_contrib = pytest.importorskip("sb3_contrib")

import membudget  # noqa: F401
from membudget.envs.registration import ENV_IDS


def _policy(env_id):
    return "MultiInputPolicy" if isinstance(gym.make(env_id).observation_space, gym.spaces.Dict) else "MlpPolicy"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_learn_save_load_predict(env_id, tmp_path):
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(env_id, n_envs=2, seed=0)  # with its default render_mode="rgb_array"
    model = sb3.PPO(_policy(env_id), venv, n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(256)
    obs = venv.reset()
    action, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "model")
    again = sb3.PPO.load(tmp_path / "model", device="cpu")
    np.testing.assert_array_equal(again.predict(obs, deterministic=True)[0], action)
    rewards = venv.step(action)[1]  # the predicted actions are valid actions of every id
    assert rewards.shape == (2,)


@pytest.mark.parametrize("env_id", ["membudget/PMWeek-v0", "membudget/PMWeekFlat-v0"])
def test_maskable_ppo_reads_the_candidate_mask(env_id, tmp_path):
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(env_id, n_envs=2, seed=0, env_kwargs={"render_mode": None})
    masks = get_action_masks(venv)  # env_method("action_masks") through the wrappers gym.make adds
    assert masks.shape == (2, 22)
    model = MaskablePPO(_policy(env_id), venv, n_steps=64, batch_size=64, seed=0, device="cpu")
    model.learn(256)
    obs = venv.reset()
    masks = get_action_masks(venv)
    action, _ = model.predict(obs, action_masks=masks, deterministic=True)
    model.save(tmp_path / "maskable")
    again = MaskablePPO.load(tmp_path / "maskable", device="cpu")
    np.testing.assert_array_equal(again.predict(obs, action_masks=masks, deterministic=True)[0], action)
    proposed = action.astype(bool)
    allowed = masks.reshape(2, -1, 2)[:, :, 1]  # per resource: [not propose, propose]
    assert not (proposed & ~allowed).any()  # a masked model never proposes a non-candidate

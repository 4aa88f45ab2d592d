"""SuperSuit's parameter-sharing path for the PettingZoo shared-budget env: ``pettingzoo_env_to_vec_env_v1`` and
``concat_vec_envs_v1(..., base_class="stable_baselines3")``, then SB3 PPO learns, saves, loads and predicts.
(PettingZoo's own API and seed tests run in tests/test_shared_budget.py.)"""

import numpy as np
import pytest

ss = pytest.importorskip("supersuit")
sb3 = pytest.importorskip("stable_baselines3")

from membudget.envs import shared_budget


def test_parameter_sharing_ppo_learns_saves_loads_predicts(tmp_path):
    n_agents, copies = 3, 2
    venv = ss.pettingzoo_env_to_vec_env_v1(shared_budget.parallel_env(n_agents=n_agents))
    venv = ss.concat_vec_envs_v1(venv, copies, num_cpus=0, base_class="stable_baselines3")
    assert venv.num_envs == n_agents * copies
    # no seed= for the model: SB3 would call venv.seed(), which SuperSuit's ConcatVecEnv lacks; seed torch instead
    sb3.common.utils.set_random_seed(0)
    model = sb3.PPO("MultiInputPolicy", venv, n_steps=64, batch_size=64, n_epochs=2, device="cpu")
    model.learn(256)
    obs = venv.reset()
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (n_agents * copies, 11) and np.abs(action).max() <= 1.0
    model.save(tmp_path / "shared")
    again = sb3.PPO.load(tmp_path / "shared", device="cpu")
    np.testing.assert_array_equal(again.predict(obs, deterministic=True)[0], action)
    rewards = venv.step(action)[1]
    assert rewards.shape == (n_agents * copies,)

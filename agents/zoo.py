"""RL Baselines3 Zoo hyperparameters for every id, for ``--algo ppo``:
``python -m rl_zoo3.train --algo ppo --env membudget/PMWeek-v0 --gym-packages membudget
--conf-file membudget.agents.zoo``.

The Zoo's own ``ppo.yml`` has no entry for these ids. PMWeek-v0's and ConversationPM-v0's ``Dict`` observation needs
``MultiInputPolicy``, and ``VecNormalize`` can only normalise its ``Box`` keys (``norm_obs_keys``): the binary
candidate ``mask`` stays as is. The values are SB3's PPO defaults with a shorter rollout (one week is 80 steps); they
are a starting point, not tuned.
"""

_PPO = {"n_envs": 4, "n_timesteps": 1_000_000, "n_steps": 256, "batch_size": 256}

_DICT = {**_PPO, "policy": "MultiInputPolicy",
         "normalize": {"norm_obs": True, "norm_reward": False, "norm_obs_keys": ["budget", "resources"]}}

hyperparams = {
    "membudget/PMWeek-v0": _DICT,
    "membudget/ConversationPM-v0": _DICT,
    "membudget/ConversationPM-v1": _DICT,
    "membudget/PMWeekFlat-v0": {**_PPO, "policy": "MlpPolicy"},
    "membudget/ReplayStream-v0": {**_PPO, "policy": "MlpPolicy"},
    "membudget/ReplayStream-v1": {**_PPO, "policy": "MlpPolicy"},
    "membudget/TierRouting-v0": {**_PPO, "policy": "MlpPolicy"},
    "membudget/ProactiveStream-v0": {**_PPO, "policy": "MlpPolicy"},
    "membudget/ProactiveStream-v1": {**_PPO, "policy": "MlpPolicy"},
}

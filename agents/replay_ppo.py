"""SB3 PPO on ``membudget/ReplayStream-v0`` (LIMBO's protocol): fitting code only; the comparison is the study
:mod:`membudget.studies.limbo`."""

from __future__ import annotations

import gymnasium as gym

from membudget.envs.validation import check_ppo_settings

ENV_ID = "membudget/ReplayStream-v0"


def make_env(family="db", profile="mid", **env_kwargs):
    import membudget  # noqa: F401  (registers the ids)

    return gym.make(ENV_ID, family=family, profile=profile, **env_kwargs)


def train_ppo(*, family="db", profile="mid", total_timesteps=20000, seed=0, n_steps=500, batch_size=100,
              learning_rate=3e-4, **env_kwargs):
    """SB3 PPO (``MlpPolicy``) trained on streams drawn from ``reset(seed=seed)`` onwards (then unseeded resets
    continue the environment's generator, so training streams differ from the evaluation seeds' streams).
    Returns the model; it follows the policy protocol (``run_policy(model, ...)``)."""
    from stable_baselines3 import PPO

    check_ppo_settings(total_timesteps=total_timesteps, n_steps=n_steps, batch_size=batch_size,
                       learning_rate=learning_rate, seed=seed)
    env = make_env(family, profile, **env_kwargs)
    env.reset(seed=seed)
    model = PPO("MlpPolicy", env, n_steps=n_steps, batch_size=batch_size, learning_rate=learning_rate, seed=seed,
                verbose=0, device="cpu")
    model.learn(total_timesteps=total_timesteps)
    return model

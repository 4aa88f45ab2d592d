"""SB3 PPO on ``membudget/ProactiveStream-v0`` choosing the memory depth and the decision per event (ProactMem,
seed 002): fitting code only; the comparison is the study :mod:`membudget.studies.proactmem`."""

from __future__ import annotations

import time

from membudget.envs.validation import check_ppo_settings

ENV_ID = "membudget/ProactiveStream-v0"
HELD_OUT_FIRST_SEED = 10_000
"""Held-out streams start here; training streams are drawn from seeds below it."""


def make_env(scope="sports", **env_kwargs):
    import gymnasium as gym

    import membudget  # noqa: F401  (registers the ids)

    return gym.make(ENV_ID, scope=scope, **env_kwargs)


def train_ppo(*, scope="sports", total_timesteps=200_000, seed=0, n_envs=4, n_steps=1024, batch_size=256,
              learning_rate=3e-4, ent_coef=0.01, gamma=0.9, net_arch=(64, 64), **env_kwargs):
    """SB3 PPO on training streams: copy ``i`` starts at stream ``seed + i`` (below :data:`HELD_OUT_FIRST_SEED`)
    and later resets continue its generator, so training never replays a held-out stream's seed; returns the model
    with ``train_seconds`` set."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    check_ppo_settings(total_timesteps=total_timesteps, n_steps=n_steps, batch_size=batch_size,
                       learning_rate=learning_rate, seed=seed, n_envs=n_envs, ent_coef=ent_coef, gamma=gamma)
    torch.set_num_threads(1)   # a 64-64 MLP: one thread is fastest, and several oversubscribe a shared machine

    if seed + n_envs > HELD_OUT_FIRST_SEED:
        raise ValueError(f"training seeds {seed}..{seed + n_envs - 1} would reach the held-out streams")
    vec = DummyVecEnv([lambda: make_env(scope, **env_kwargs) for _ in range(n_envs)])
    vec.seed(seed)
    model = PPO("MlpPolicy", vec, n_steps=n_steps, batch_size=batch_size, learning_rate=learning_rate,
                        ent_coef=ent_coef, gamma=gamma, policy_kwargs={"net_arch": list(net_arch)}, seed=seed,
                        verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=total_timesteps)
    model.train_seconds = time.perf_counter() - start
    vec.close()
    return model

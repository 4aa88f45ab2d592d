"""SB3 PPO on ``membudget/ReplayStream-v0`` / ``-v1`` (LIMBO's protocol): fitting code only; the comparison is the
study :mod:`membudget.studies.limbo`."""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

from membudget.agents.configs import SB3PPOSettings
from membudget.envs.validation import MAX_REWARD_WEIGHT, check_int, check_known, check_number

VERSIONS = (0, 1)
LATEST_VERSION = 1
"""The ReplayStream version every function, config and command plays unless told otherwise (v0: the original
world, kept)."""


def make_env(family="db", profile="mid", version=LATEST_VERSION, **env_kwargs):
    """``membudget/ReplayStream-v{version}`` (0 or 1) for ``family`` / ``profile``."""
    import membudget  # noqa: F401  (registers the ids)

    if version not in VERSIONS:
        raise ValueError(f"unknown ReplayStream version {version!r}; expected one of {VERSIONS}")
    return gym.make(f"membudget/ReplayStream-v{version}", family=family, profile=profile, **env_kwargs)


@dataclass(frozen=True)
class ReplayStreamPPOConfig(SB3PPOSettings):
    """The ReplayStream PPO's settings (:func:`train_ppo`): SB3's own with shorter rollouts and minibatches;
    ``python -m membudget.train replay-ppo`` is generated from these fields."""

    total_timesteps: int = 20_000
    """Environment steps (tasks) to train for."""
    n_steps: int = 500
    """PPO rollout length per update."""
    batch_size: int = 100
    n_tasks: int = 500
    """Stream length."""
    cost_weight: float = 0.5
    """w in the reward correct - w * cost."""
    version: int = LATEST_VERSION
    """ReplayStream version (1, or 0 for v0's world)."""

    def __post_init__(self):
        super().__post_init__()
        check_int("n_tasks", self.n_tasks, 1)
        check_number("cost_weight", self.cost_weight, 0, MAX_REWARD_WEIGHT)
        check_known("version", self.version, VERSIONS)


def train_ppo(family="db", profile="mid", config: ReplayStreamPPOConfig | None = None, *, seed: int = 0,
              **overrides):
    """SB3 PPO (``MlpPolicy``) trained on streams of ``family`` / ``profile`` drawn from ``reset(seed=seed)``
    onwards (then unseeded resets continue the environment's generator, so training streams differ from the
    evaluation seeds' streams) of ``membudget/ReplayStream-v{config.version}``. ``config``:
    :class:`ReplayStreamPPOConfig` (default its defaults); ``overrides``: fields of it to replace. Returns the
    model; it follows the policy protocol (``run_policy(model, ...)``)."""
    cfg = ReplayStreamPPOConfig.resolve(config, **overrides)
    check_int("seed", seed, 0)
    env = make_env(family, profile, cfg.version, n_tasks=cfg.n_tasks, cost_weight=cfg.cost_weight)
    env.reset(seed=seed)
    model = cfg.new_model("MlpPolicy", env, seed)
    model.learn(total_timesteps=cfg.total_timesteps)
    return model

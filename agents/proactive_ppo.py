"""SB3 PPO on ``membudget/ProactiveStream-v1`` (or v0) choosing the memory depth and the decision per event (ProactMem,
ProactMem): fitting code only; the comparison is the study :mod:`membudget.studies.proactmem`."""

from __future__ import annotations

import time
from dataclasses import dataclass

from membudget.agents.configs import SB3PPOSettings
from membudget.envs.validation import check_int, check_number


ENV_IDS = {0: "membudget/ProactiveStream-v0", 1: "membudget/ProactiveStream-v1"}
HELD_OUT_FIRST_SEED = 10_000
"""Held-out streams start here; training streams are drawn from seeds below it."""


def make_env(scope="sports", version=1, **env_kwargs):
    import gymnasium as gym

    import membudget  # noqa: F401  (registers the ids)

    if version not in ENV_IDS:
        raise ValueError(f"version must be one of {sorted(ENV_IDS)}, got {version!r}")
    return gym.make(ENV_IDS[version], scope=scope, **env_kwargs)


@dataclass(frozen=True)
class ProactiveStreamPPOConfig(SB3PPOSettings):
    """The ProactiveStream PPO's settings (:func:`train_ppo`): SB3's own with longer rollouts, an entropy bonus and a
    short horizon; ``python -m membudget.train proactive-ppo`` is generated from these fields."""

    total_timesteps: int = 200_000
    """Environment steps (two per event: depth, then decision)."""
    n_steps: int = 1024
    """PPO rollout length per copy and update."""
    batch_size: int = 256
    gamma: float = 0.9
    """Discount (rewards follow the decision that earns them within one or two steps)."""
    ent_coef: float = 0.01
    n_envs: int = 4
    """Training environment copies (SB3 DummyVecEnv)."""
    memory: str = "full"
    """Memory variant (full, no_replay_gate, no_validation)."""
    intrusion_penalty: float = 0.5
    """Reward of a false intervention is minus this."""
    token_weight: float = 2e-6
    """Reward per memory token loaded is minus this."""
    version: int = 1
    """ProactiveStream version (1, or 0 for v0's world)."""

    def __post_init__(self):
        super().__post_init__()
        check_int("n_envs", self.n_envs, 1)
        check_number("intrusion_penalty", self.intrusion_penalty, 0)
        check_number("token_weight", self.token_weight, 0)
        check_int("version", self.version, 0, 1)

    def env_kwargs(self) -> dict:
        """The environment's arguments besides the scope."""
        return dict(memory=self.memory, intrusion_penalty=self.intrusion_penalty, token_weight=self.token_weight,
                    version=self.version)


def train_ppo(scope="sports", config: ProactiveStreamPPOConfig | None = None, *, seed: int = 0, **overrides):
    """SB3 PPO on training streams of ``scope``: copy ``i`` starts at stream ``seed + i`` (below
    :data:`HELD_OUT_FIRST_SEED`) and later resets continue its generator, so training never replays a held-out
    stream's seed; returns the model with ``train_seconds`` set. ``config``: :class:`ProactiveStreamPPOConfig`
    (default its defaults); ``overrides``: fields of it to replace."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    cfg = ProactiveStreamPPOConfig.resolve(config, **overrides)
    check_int("seed", seed, 0)
    if seed + cfg.n_envs > HELD_OUT_FIRST_SEED:
        raise ValueError(f"training seeds {seed}..{seed + cfg.n_envs - 1} would reach the held-out streams")
    vec = DummyVecEnv([lambda: make_env(scope, **cfg.env_kwargs()) for _ in range(cfg.n_envs)])
    vec.seed(seed)
    model = cfg.new_model("MlpPolicy", vec, seed)
    start = time.perf_counter()
    model.learn(total_timesteps=cfg.total_timesteps)
    model.train_seconds = time.perf_counter() - start
    vec.close()
    return model

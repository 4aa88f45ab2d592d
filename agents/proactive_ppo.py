"""SB3 PPO on ``membudget/ProactiveStream-v1`` (or v0) choosing the memory depth and the decision per event (ProactMem,
ProactMem): fitting code only; the comparison is the study :mod:`membudget.studies.proactmem`."""

from __future__ import annotations

import time
from dataclasses import dataclass

from membudget.agents.configs import SB3PPOSettings
from membudget.envs.validation import MAX_REWARD_WEIGHT, check_int, check_number


ENV_IDS = {0: "membudget/ProactiveStream-v0", 1: "membudget/ProactiveStream-v1"}
LATEST_VERSION = 1
"""The ProactiveStream version every function, config and command plays unless told otherwise (v0: the original
world, kept)."""
HELD_OUT_FIRST_SEED = 10_000
"""Held-out streams start here; training streams are drawn from seeds below it."""
WARM_STARTS = ("none", "full-hierarchy")
"""The policies PPO can start from: SB3's initialisation, or a behaviour clone of ProactMem's full-hierarchy rule."""


def make_env(scope="sports", version=LATEST_VERSION, **env_kwargs):
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
    version: int = LATEST_VERSION
    """ProactiveStream version (1, or 0 for v0's world)."""
    warm_start: str = "none"
    """The policy PPO starts from: none (SB3's initialisation) or full-hierarchy (a behaviour clone of ProactMem's
    full-hierarchy rule on the first warm_start_streams training streams: an exploration start, the reward
    unchanged)."""
    warm_start_streams: int = 10
    """Training streams the full-hierarchy rule plays for the behaviour clone (seeds seed .. seed + this - 1)."""
    warm_start_epochs: int = 5
    """Passes of the behaviour clone over the rule's steps (Adam, learning rate 1e-3, minibatches of 512)."""

    def __post_init__(self):
        super().__post_init__()
        check_int("n_envs", self.n_envs, 1)
        check_number("intrusion_penalty", self.intrusion_penalty, 0, MAX_REWARD_WEIGHT)
        check_number("token_weight", self.token_weight, 0, MAX_REWARD_WEIGHT)
        check_int("version", self.version, 0, 1)
        if self.warm_start not in WARM_STARTS:
            raise ValueError(f"warm_start must be one of {WARM_STARTS}, got {self.warm_start!r}")
        check_int("warm_start_streams", self.warm_start_streams, 1)
        check_int("warm_start_epochs", self.warm_start_epochs, 1)

    def env_kwargs(self) -> dict:
        """The environment's arguments besides the scope."""
        return dict(memory=self.memory, intrusion_penalty=self.intrusion_penalty, token_weight=self.token_weight,
                    version=self.version)


def check_training_seeds(cfg: ProactiveStreamPPOConfig, seed) -> None:
    """Raise unless ``seed`` is a non-negative int whose training streams (the copies' first streams and the warm
    start's) lie below :data:`HELD_OUT_FIRST_SEED`."""
    check_int("seed", seed, 0)
    last = seed + max(cfg.n_envs, cfg.warm_start_streams if cfg.warm_start != "none" else 0) - 1
    if last >= HELD_OUT_FIRST_SEED:
        raise ValueError(f"training seeds {seed}..{last} would reach the held-out streams (from "
                         f"{HELD_OUT_FIRST_SEED})")


def predict_action(policy, obs) -> int:
    """The action ``policy`` (the package's rules or an SB3 policy or model) takes deterministically on one
    observation, as the environment's ``Discrete`` action."""
    import numpy as np

    action, _ = policy.predict(obs, deterministic=True)
    return int(np.asarray(action).reshape(-1)[0])


def rule_steps(rule, scope, seeds, **env_kwargs) -> tuple:
    """Every step of ``rule`` (a policy with ``predict``) on the streams ``seeds`` of ``scope``: the observations
    ``(n, features)`` float32 and the actions ``(n,)`` int64, both sub-steps."""
    import numpy as np

    env = make_env(scope, **env_kwargs)
    obs_rows, actions = [], []
    for s in seeds:
        obs, _ = env.reset(seed=int(s))
        terminated = False
        while not terminated:
            a = predict_action(rule, obs)
            obs_rows.append(obs)
            actions.append(a)
            obs, _, terminated, _, _ = env.step(a)
    env.close()
    return np.asarray(obs_rows, dtype=np.float32), np.asarray(actions, dtype=np.int64)


def train_ppo(scope="sports", config: ProactiveStreamPPOConfig | None = None, *, seed: int = 0, **overrides):
    """SB3 PPO on training streams of ``scope``: copy ``i`` starts at stream ``seed + i`` (below
    :data:`HELD_OUT_FIRST_SEED`) and later resets continue its generator, so training never replays a held-out
    stream's seed; returns the model with ``train_seconds`` set. ``config``: :class:`ProactiveStreamPPOConfig`
    (default its defaults); ``overrides``: fields of it to replace. With ``warm_start="full-hierarchy"`` the actor
    first clones :class:`~membudget.baselines.proactive.FullHierarchy` on streams ``seed ..``
    ``seed + warm_start_streams - 1`` (:func:`~membudget.agents.behaviour_cloning.behaviour_clone`; its time
    counts in ``train_seconds``)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    cfg = ProactiveStreamPPOConfig.resolve(config, **overrides)
    check_training_seeds(cfg, seed)
    vec = DummyVecEnv([lambda: make_env(scope, **cfg.env_kwargs()) for _ in range(cfg.n_envs)])
    vec.seed(seed)
    model = cfg.new_model("MlpPolicy", vec, seed)
    start = time.perf_counter()
    if cfg.warm_start == "full-hierarchy":
        from membudget.agents.behaviour_cloning import behaviour_clone
        from membudget.baselines.proactive import FullHierarchy

        steps = rule_steps(FullHierarchy(), scope, range(seed, seed + cfg.warm_start_streams), **cfg.env_kwargs())
        behaviour_clone(model, *steps, epochs=cfg.warm_start_epochs, batch_size=512, learning_rate=1e-3, seed=seed)
    model.learn(total_timesteps=cfg.total_timesteps)
    model.train_seconds = time.perf_counter() - start
    vec.close()
    return model

"""PPO tier routers on ``membudget/TierRouting-v0`` (BudgetMem §5-6): fitting code only.

- :func:`make_env`: the environment with BudgetMem's §5.5 reward (:class:`~membudget.envs.tiers.BudgetMemReward`,
  ``use_beta=False`` for the β ablation, ``normalize=False`` for the static reward);
- :class:`TierRouterConfig`: the router's settings (frozen; the defaults are the study's routers');
- :func:`bc_warm_start`: behaviour cloning of an oracle into a PPO model's actor;
- :func:`train_router`: SB3 PPO for one λ, or the λ-conditioned router (λ in the observation).

The results (rollouts, frontiers, the goal check, tables and figures) are the study
:mod:`membudget.studies.budgetmem`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from membudget.agents.configs import SB3PPOSettings
from membudget.envs.validation import check_int, check_number

ENV_ID = "membudget/TierRouting-v0"
BC_TEACHERS = ("expected", "hindsight")
HELD_OUT_FIRST_SEED = 50_000
"""Held-out queries start here; training and warm-start queries are drawn below it."""


def make_env(*, strategy="capacity", population="locomo", backbone="llama", lam=0.0, lam_conditioned=False,
             max_cost_per_query=None, normalize=True, use_beta=True, window=256, **env_kwargs):
    """``TierRouting-v0`` with BudgetMem's §5.5 reward wrapper (``normalize=True``) or its static reward."""
    import gymnasium as gym

    import membudget  # noqa: F401  (registers the ids)
    from membudget.envs.tiers import BudgetMemReward

    env = gym.make(ENV_ID, strategy=strategy, population=population, backbone=backbone, lam=lam,
                   lam_conditioned=lam_conditioned, max_cost_per_query=max_cost_per_query, **env_kwargs)
    return BudgetMemReward(env, window=window, use_beta=use_beta) if normalize else env


@dataclass(frozen=True)
class TierRouterConfig(SB3PPOSettings):
    """The PPO tier router's settings (:func:`train_router`); the defaults are the study's routers' (BudgetMem: 4
    PPO epochs per update, ``gamma = 1`` since the reward arrives at the end of the query; a behaviour-cloning warm
    start from 3,000 queries of the expected-quality oracle, the teacher chosen on validation queries 40000-40299).
    ``python -m membudget.train tiers`` is generated from these fields."""

    MIN_TIMESTEPS: ClassVar[int] = 0  # a router warm-started by behaviour cloning alone

    total_timesteps: int = 20_000
    """PPO environment steps (5 per query; 0: the warm start alone)."""
    n_steps: int = 500
    batch_size: int = 100
    n_epochs: int = 4
    learning_rate: float = 1e-3
    gamma: float = 1.0
    gae_lambda: float = 1.0
    ent_coef: float = 0.01
    strategy: str = "capacity"
    """Tiering strategy (implementation, reasoning, capacity)."""
    population: str = "locomo"
    """Query population (locomo, longmemeval, hotpotqa)."""
    backbone: str = "llama"
    """Price / capability family (llama, qwen)."""
    lam: float = 0.3
    """λ of BudgetMem's §5.5 reward r_task + λ·β·r_cost, and of the warm start's oracle (ignored with
    lam_conditioned)."""
    lam_conditioned: bool = False
    """One router for every λ (λ in the observation, drawn per query from 0, 0.1, 0.3, 0.5, 1.0)."""
    use_beta: bool = True
    """off: the β ablation (β = 1 in the §5.5 reward)."""
    max_cost_per_query: float = 0.0
    """Hard per-query budget in dollars (0: none)."""
    normalize_reward: bool = False
    """SB3 VecNormalize of the reward during training (observations are already in [0, 1]; nothing to save for
    evaluation)."""
    bc_queries: int = 3000
    """Oracle queries for the behaviour-cloning warm start of the actor before PPO (0: PPO from scratch)."""
    bc_teacher: str = "expected"
    """Oracle of the warm start: expected (best combination before judge noise) or hindsight (after it)."""
    bc_epochs: int = 30
    """Epochs of the behaviour-cloning warm start."""
    bc_batch_size: int = 256
    """Minibatch size of the behaviour-cloning warm start."""
    bc_learning_rate: float = 3e-3
    """Adam learning rate of the behaviour-cloning warm start."""

    def __post_init__(self):
        if self.max_cost_per_query is None:   # the library's old spelling of "no cap"
            object.__setattr__(self, "max_cost_per_query", 0.0)
        super().__post_init__()
        check_number("lam", self.lam, 0)
        check_number("max_cost_per_query", self.max_cost_per_query, 0)
        for name in ("lam_conditioned", "use_beta", "normalize_reward"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        check_int("bc_queries", self.bc_queries, 0)
        check_int("bc_epochs", self.bc_epochs, 1)
        check_int("bc_batch_size", self.bc_batch_size, 1)
        check_number("bc_learning_rate", self.bc_learning_rate, 0, low_open=True)
        if self.bc_teacher not in BC_TEACHERS:
            raise ValueError(f"bc_teacher must be one of {BC_TEACHERS}, got {self.bc_teacher!r}")

    def env_kwargs(self) -> dict:
        """The environment's arguments (the cap ``None`` when there is none)."""
        return dict(strategy=self.strategy, population=self.population, backbone=self.backbone, lam=self.lam,
                    lam_conditioned=self.lam_conditioned, max_cost_per_query=self.max_cost_per_query or None)


def bc_warm_start(model, env, config: TierRouterConfig | None = None, *, seed: int = 0, first_seed=None,
                  **overrides) -> dict:
    """Behaviour-cloning warm start of a PPO model's **actor** from an oracle
    (:func:`~membudget.teachers.tier_oracle.demonstrations`): cross-entropy of the oracle's tiers under the policy
    on ``bc_queries`` training queries (seeds ``first_seed`` onwards, default ``seed``; the held-out seeds ≥ 50,000
    are never used), ``bc_epochs`` epochs of Adam (``bc_batch_size``, ``bc_learning_rate``). ``config``:
    :class:`TierRouterConfig` (default its defaults); ``overrides``: fields of it to replace. The oracle's objective
    is the static reward at ``lam`` (per-λ router), the query's own λ (λ-conditioned environment), within the
    environment's hard cap if any. ``bc_teacher``: ``"expected"`` ranks combinations by their answer probability
    before judge noise (it knows the query's needs and hardness, not the noise), ``"hindsight"`` by the realised
    ``r_task`` (it also chases judge noise that no observation reveals). Only the actor
    (``mlp_extractor.policy_net`` and ``action_net``) is trained; the critic is left to PPO. Returns
    ``{"bc_accuracy", "bc_samples"}``."""
    from membudget.agents.behaviour_cloning import behaviour_clone
    from membudget.teachers.tier_oracle import demonstrations

    cfg = TierRouterConfig.resolve(config, **overrides)
    first = seed if first_seed is None else first_seed
    if first + cfg.bc_queries > HELD_OUT_FIRST_SEED:
        raise ValueError(f"BC queries {first}..{first + cfg.bc_queries - 1} would overlap the held-out seeds "
                         f"≥ {HELD_OUT_FIRST_SEED}")
    objective = {} if getattr(env.unwrapped, "lam_conditioned", False) else {"lam": cfg.lam}
    x, y = demonstrations(env, range(first, first + cfg.bc_queries), expected=cfg.bc_teacher == "expected",
                          **objective)
    acc = behaviour_clone(model, x, y, epochs=cfg.bc_epochs, batch_size=cfg.bc_batch_size,
                          learning_rate=cfg.bc_learning_rate, seed=seed)
    return {"bc_accuracy": acc, "bc_samples": int(len(y))}


def train_router(config: TierRouterConfig | None = None, *, seed: int = 0, save_path=None, return_info=False,
                 **overrides):
    """SB3 PPO (``MlpPolicy``, ``net_arch``) on training queries drawn from ``reset(seed=seed)`` onwards (disjoint
    from the held-out seeds ≥ 50,000 in practice: continuous draws), with the §5.5 reward. One episode = one query
    of five steps. ``config``: :class:`TierRouterConfig` (default: the study's router); ``overrides``: fields of it
    to replace, e.g. ``train_router(lam=0.5, strategy="reasoning", bc_queries=0)``.

    ``bc_queries > 0``: before PPO, the actor is warm-started by behaviour cloning of an oracle (``bc_teacher``) on
    that many training queries (:func:`bc_warm_start`, seeds ``seed + 10**4`` onwards); PPO then fine-tunes it on the
    §5.5 reward (it is still a PPO router: the deployed policy is the fine-tuned actor). ``save_path``: save the
    model there; ``return_info``: return ``(model, info)`` with BC accuracy and wall clock."""
    from membudget.envs.tiers import TierRoutingEnv

    cfg = TierRouterConfig.resolve(config, **overrides)
    check_int("seed", seed, 0)
    t0 = time.time()
    env = make_env(use_beta=cfg.use_beta, **cfg.env_kwargs())
    train_env = env
    if cfg.normalize_reward:
        from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

        train_env = VecNormalize(DummyVecEnv([lambda: env]), norm_obs=False, norm_reward=True, gamma=cfg.gamma)
    model = cfg.new_model("MlpPolicy", train_env, seed)
    info = {}
    if cfg.bc_queries:
        info.update(bc_warm_start(model, TierRoutingEnv(**cfg.env_kwargs()), cfg, seed=seed,
                                  first_seed=seed + 10 ** 4))
    if cfg.total_timesteps:
        model.learn(total_timesteps=cfg.total_timesteps)
    info["train_seconds"] = time.time() - t0
    if save_path:
        model.save(save_path)
    return (model, info) if return_info else model

"""PPO tier routers on ``membudget/TierRouting-v0`` (BudgetMem, seed 001 §5-6): fitting code only.

- :func:`make_env`: the environment with seed 001's §5.5 reward (:class:`~membudget.envs.tiers.BudgetMemReward`,
  ``use_beta=False`` for the β ablation, ``normalize=False`` for the static reward);
- :func:`bc_warm_start`: behaviour cloning of an oracle into a PPO model's actor;
- :func:`train_router`: SB3 PPO for one λ, or the λ-conditioned router (λ in the observation).

The results (rollouts, frontiers, the goal check, tables and figures) are the study
:mod:`membudget.studies.budgetmem`.
"""

from __future__ import annotations

import time

from membudget.envs.validation import check_int, check_ppo_settings

ENV_ID = "membudget/TierRouting-v0"
BC_TEACHERS = ("expected", "hindsight")
HELD_OUT_FIRST_SEED = 50_000
"""Held-out queries start here; training and warm-start queries are drawn below it."""


def make_env(*, strategy="capacity", population="locomo", backbone="llama", lam=0.0, lam_conditioned=False,
             max_cost_per_query=None, normalize=True, use_beta=True, window=256, **env_kwargs):
    """``TierRouting-v0`` with seed 001's §5.5 reward wrapper (``normalize=True``) or its static reward."""
    import gymnasium as gym

    import membudget  # noqa: F401  (registers the ids)
    from membudget.envs.tiers import BudgetMemReward

    env = gym.make(ENV_ID, strategy=strategy, population=population, backbone=backbone, lam=lam,
                   lam_conditioned=lam_conditioned, max_cost_per_query=max_cost_per_query, **env_kwargs)
    return BudgetMemReward(env, window=window, use_beta=use_beta) if normalize else env


def bc_warm_start(model, env, *, lam=None, n_queries=2000, epochs=30, batch_size=256, learning_rate=3e-3,
                  seed=0, first_seed=None, teacher="expected") -> dict:
    """Behaviour-cloning warm start of a PPO model's **actor** from the hindsight oracle
    (:func:`~membudget.teachers.tier_oracle.demonstrations`): cross-entropy of the oracle's tiers under the policy
    on ``n_queries`` training queries (seeds ``first_seed`` onwards, default ``seed``; the held-out seeds ≥ 50,000
    are never used). The oracle's objective is the static reward at ``lam`` (per-λ router), the query's own λ
    (λ-conditioned environment, ``lam=None``), within the environment's hard cap if any. ``teacher``:
    ``"expected"`` ranks combinations by their answer probability before judge noise (it knows the query's needs
    and hardness, not the noise), ``"hindsight"`` by the realised ``r_task`` (it also chases judge noise that no
    observation reveals). Only the actor
    (``mlp_extractor.policy_net`` and ``action_net``) is trained; the critic is left to PPO. Returns
    ``{"bc_accuracy", "bc_samples"}``."""
    import torch

    from membudget.teachers.tier_oracle import demonstrations

    if teacher not in BC_TEACHERS:
        raise ValueError(f"teacher must be one of {BC_TEACHERS}, got {teacher!r}")
    first = seed if first_seed is None else first_seed
    if first + n_queries > HELD_OUT_FIRST_SEED:
        raise ValueError(f"BC queries {first}..{first + n_queries - 1} would overlap the held-out seeds "
                         f"≥ {HELD_OUT_FIRST_SEED}")
    objective = {} if getattr(env.unwrapped, "lam_conditioned", False) else {"lam": lam}
    x, y = demonstrations(env, range(first, first + n_queries), expected=teacher == "expected", **objective)
    policy = model.policy
    params = list(policy.mlp_extractor.policy_net.parameters()) + list(policy.action_net.parameters())
    opt = torch.optim.Adam(params, lr=learning_rate)
    xt, yt = torch.as_tensor(x), torch.as_tensor(y)
    g = torch.Generator().manual_seed(int(seed))
    policy.set_training_mode(True)
    for _ in range(epochs):
        perm = torch.randperm(len(xt), generator=g)
        for i in range(0, len(xt), batch_size):
            b = perm[i:i + batch_size]
            loss = -policy.get_distribution(xt[b]).log_prob(yt[b]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    policy.set_training_mode(False)
    with torch.no_grad():
        acc = float((policy.get_distribution(xt).distribution.probs.argmax(-1) == yt).float().mean())
    return {"bc_accuracy": acc, "bc_samples": int(len(y))}


def train_router(*, lam=0.3, lam_conditioned=False, strategy="capacity", population="locomo", backbone="llama",
                 use_beta=True, total_timesteps=20_000, seed=0, n_steps=500, batch_size=100, n_epochs=4,
                 learning_rate=1e-3, ent_coef=0.01, max_cost_per_query=None, save_path=None, bc_queries=0,
                 bc_epochs=30, bc_teacher="expected", normalize_reward=False, net_arch=(64, 64), return_info=False):
    """SB3 PPO (``MlpPolicy``, ``net_arch``) on training queries drawn from ``reset(seed=seed)`` onwards (disjoint
    from the held-out seeds ≥ 50,000 in practice: continuous draws), with the §5.5 reward. One episode = one query
    of five steps; ``gamma = 1`` (the reward arrives at the end), 4 PPO epochs per update as in seed 001.

    ``bc_queries > 0``: before PPO, the actor is warm-started by behaviour cloning of an oracle (``bc_teacher``) on
    that many training queries (:func:`bc_warm_start`, seeds ``seed + 10**4`` onwards); PPO then fine-tunes it on the
    §5.5 reward (it is still a PPO router: the deployed policy is the fine-tuned actor). ``normalize_reward``:
    SB3 ``VecNormalize`` of the reward only (observations are already in [0, 1]; nothing to save for
    evaluation). ``return_info``: return ``(model, info)`` with BC accuracy and wall clock."""
    import torch
    from stable_baselines3 import PPO

    check_ppo_settings(total_timesteps=total_timesteps, n_steps=n_steps, batch_size=batch_size, n_epochs=n_epochs,
                       learning_rate=learning_rate, ent_coef=ent_coef, seed=seed, min_timesteps=0)
    check_int("bc_queries", bc_queries, 0)
    check_int("bc_epochs", bc_epochs, 1)
    torch.set_num_threads(1)
    t0 = time.time()
    env = make_env(strategy=strategy, population=population, backbone=backbone, lam=lam,
                   lam_conditioned=lam_conditioned, use_beta=use_beta, max_cost_per_query=max_cost_per_query)
    train_env = env
    if normalize_reward:
        from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

        train_env = VecNormalize(DummyVecEnv([lambda: env]), norm_obs=False, norm_reward=True, gamma=1.0)
    model = PPO("MlpPolicy", train_env, n_steps=n_steps, batch_size=batch_size, n_epochs=n_epochs, gamma=1.0,
                gae_lambda=1.0, learning_rate=learning_rate, ent_coef=ent_coef, seed=seed, device="cpu",
                policy_kwargs={"net_arch": list(net_arch)}, verbose=0)
    info = {}
    if bc_queries:
        from membudget.envs.tiers import TierRoutingEnv

        demo_env = TierRoutingEnv(strategy=strategy, population=population, backbone=backbone, lam=lam,
                                  lam_conditioned=lam_conditioned, max_cost_per_query=max_cost_per_query)
        info.update(bc_warm_start(model, demo_env, lam=lam, n_queries=bc_queries, epochs=bc_epochs, seed=seed,
                                  first_seed=seed + 10 ** 4, teacher=bc_teacher))
    if total_timesteps:
        model.learn(total_timesteps=total_timesteps)
    info["train_seconds"] = time.time() - t0
    if save_path:
        model.save(save_path)
    return (model, info) if return_info else model

"""Training throughput of PPO on ``PMWeek-v0`` with the per-resource actor: the package's native PPO loop
(:mod:`membudget.agents.ppo`) against Stable-Baselines3 PPO with the same actor
(:class:`~membudget.agents.per_resource.PerResourceActorCriticPolicy`), in one process, one torch thread each.

Both run the same algorithm settings — 64 weeks × 80 steps per update (SB3: ``n_envs=64, n_steps=80``), 4 epochs,
16 minibatches of 320, Adam 1e-3, the same actor and critic widths — so the ratio measures the implementations,
not the hyperparameters. Rounds alternate so that machine noise hits both alike. Training wall clock only: the
native loop's learning-curve evaluations are excluded, SB3 runs without callbacks.

``python -m membudget.bench.ppo [--steps N] [--rounds K]``
"""

from __future__ import annotations

import argparse
import time

N_ENVS, HORIZON, EPOCHS, MINIBATCHES, LR = 64, 80, 4, 16, 1e-3


def native_rate(steps: int, seed: int = 0) -> float:
    from membudget.agents.ppo import train_ppo

    _, history = train_ppo("B10", total_timesteps=steps, seed=seed, n_envs=N_ENVS, n_epochs=EPOCHS,
                           n_minibatches=MINIBATCHES, learning_rate=LR, eval_every=0, eval_seeds=[4000])
    return history[-1]["env_steps"] / history[-1]["wall_clock"]


def sb3_rate(steps: int, seed: int = 0) -> float:
    from stable_baselines3 import PPO

    from membudget.agents.per_resource import PerResourceActorCriticPolicy
    from membudget.agents.rl import DevWeeksVecEnv

    venv = DevWeeksVecEnv(N_ENVS, seed=seed, budget="B10", action_mode="binary")
    model = PPO(PerResourceActorCriticPolicy, venv, n_steps=HORIZON, batch_size=N_ENVS * HORIZON // MINIBATCHES,
                n_epochs=EPOCHS, learning_rate=LR, gamma=1.0, gae_lambda=0.95, seed=seed, device="cpu", verbose=0)
    start = time.perf_counter()
    model.learn(steps)
    return model.num_timesteps / (time.perf_counter() - start)


def main(argv=None):
    import torch

    parser = argparse.ArgumentParser(prog="python -m membudget.bench.ppo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10 * N_ENVS * HORIZON, help="environment steps per run")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{'round':>5} {'native steps/s':>15} {'SB3 steps/s':>12} {'ratio':>6}")
    ratios = []
    for k in range(args.rounds):
        ours, theirs = native_rate(args.steps, k), sb3_rate(args.steps, k)
        ratios.append(ours / theirs)
        print(f"{k:>5} {ours:>15,.0f} {theirs:>12,.0f} {ratios[-1]:>6.2f}", flush=True)
    ratios.sort()
    print(f"median ratio {ratios[len(ratios) // 2]:.2f} (target ≥ 4)")
    return ratios


if __name__ == "__main__":
    main()

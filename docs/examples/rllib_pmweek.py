"""RLlib PPO on the flat PMWeek, written as an RLlib user would (python docs/examples/rllib_pmweek.py [--quick]).

The ``membudget:`` prefix makes Gymnasium import membudget (which registers the ids) in every EnvRunner process;
``membudget/PMWeekFlat-v0`` has a flat ``Box`` observation and ``MultiDiscrete([2] * 11)`` proposals, which
RLlib's default model takes. Needs ``pip install "ray[rllib]"``.
"""
import sys

import ray
from ray.rllib.algorithms.ppo import PPOConfig

QUICK = "--quick" in sys.argv
ray.init(include_dashboard=False)
config = (PPOConfig()
          .environment("membudget:membudget/PMWeekFlat-v0", env_config={"budget": "B10", "per_step_cap": 2})
          .env_runners(num_env_runners=2)  # EnvRunners in two processes
          .training(train_batch_size_per_learner=160 if QUICK else 4000, minibatch_size=80 if QUICK else 500,
                    num_epochs=1 if QUICK else 4, lr=3e-4))
algo = config.build_algo()
for i in range(1 if QUICK else 50):
    result = algo.train()["env_runners"]
    # rewards sum to the week's Set F1: the mean return is the mean Set F1 of the weeks sampled
    print(f"iteration {i + 1}: {result['num_env_steps_sampled_lifetime']} env steps, "
          f"mean week Set F1 {result.get('episode_return_mean', float('nan')):.4f}")
algo.stop()
ray.shutdown()

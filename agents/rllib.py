"""RLlib as a second training stack: PPO on the flat PMWeek (``membudget/PMWeekFlat-v0``), ReplayStream-v1 and
TierRouting-v0, and multi-agent PPO (one shared policy) on the shared-budget PettingZoo env, with EnvRunners in
several processes. Needs ``pip install "ray[rllib]"`` (RLlib pins gymnasium 1.2.2, inside membudget's range).

Remote EnvRunners are fresh processes that never imported membudget, so a plain ``"membudget/PMWeek-v0"`` id is
unknown there. Two ways that work, both used here:

- the ``module:`` prefix of Gymnasium ids: ``config.environment("membudget:membudget/PMWeekFlat-v0")`` — RLlib
  calls ``gym.make`` with it, and Gymnasium imports ``membudget`` (which registers every id) first;
- :func:`register_rllib_envs`: ``ray.tune.registry.register_env`` with creators defined in this module, so a
  worker that unpickles a creator imports membudget. It registers every Gymnasium id under its own name and the
  shared-budget env as ``"membudget/SharedBudget"``.

The policy is RLlib's default MLP on the flat observation (PMWeekFlat-v0's ``Box`` of ``9 + 28 R``; the
shared-budget observation flattened the same way per agent), not the per-resource network of the PMWeek learners:
an RLlib run is a second stack for users' own experiments, not an entry of the fair comparison.
"""

from __future__ import annotations

import functools
import time

import gymnasium as gym

from membudget.envs.registration import ENV_IDS

SHARED_BUDGET_ID = "membudget/SharedBudget"
"""The name :func:`register_rllib_envs` gives the shared-budget PettingZoo env (flat observations)."""
RLLIB_ENVS = {"pmweek-flat": "membudget/PMWeekFlat-v0", "replay": "membudget/ReplayStream-v1",
              "tiers": "membudget/TierRouting-v0", "shared-budget": SHARED_BUDGET_ID}
"""Short names of ``python -m membudget.train rllib-ppo --env``."""


def make_gym_env(env_id, config=None):
    """The Gymnasium env ``env_id`` made with the keyword arguments ``config`` (an RLlib ``EnvContext``)."""
    import membudget  # noqa: F401  (registers the ids in a fresh worker)

    return gym.make(env_id, **dict(config or {}))


def make_shared_budget(config=None):
    """The shared-budget env as an RLlib ``MultiAgentEnv`` with each agent's observation flattened (a ``Box``)."""
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    from membudget.envs import shared_budget

    return ParallelPettingZooEnv(FlatObservations(shared_budget.parallel_env(**dict(config or {}))))


class FlatObservations:
    """A PettingZoo parallel env whose per-agent ``Dict`` observations are flattened by
    ``gymnasium.spaces.flatten`` (``budget``, ``mask``, ``others``, ``resources``, in the space's key order)."""

    def __init__(self, env):
        self.env = env
        self.metadata = getattr(env, "metadata", {})
        self.possible_agents = list(env.possible_agents)
        self._spaces = {a: gym.spaces.flatten_space(env.observation_space(a)) for a in self.possible_agents}

    @property
    def agents(self):
        return self.env.agents

    @property
    def unwrapped(self):
        return self.env.unwrapped

    @property
    def render_mode(self):
        return getattr(self.env, "render_mode", None)

    def observation_space(self, agent):
        return self._spaces[agent]

    def action_space(self, agent):
        return self.env.action_space(agent)

    def _flat(self, obs):
        return {a: gym.spaces.flatten(self.env.observation_space(a), o) for a, o in obs.items()}

    def reset(self, seed=None, options=None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._flat(obs), infos

    def step(self, actions):
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        return self._flat(obs), rewards, terminations, truncations, infos

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()


def register_rllib_envs() -> None:
    """Register every membudget Gymnasium id, and ``"membudget/SharedBudget"``, with Ray Tune's registry (the
    creators import membudget on the worker that calls them)."""
    from ray.tune.registry import register_env

    for env_id in ENV_IDS:
        register_env(env_id, functools.partial(make_gym_env, env_id))
    register_env(SHARED_BUDGET_ID, make_shared_budget)


def ppo_config(env: str, env_config=None, *, num_env_runners: int = 2, train_batch_size: int = 1600,
               minibatch_size: int = 400, num_epochs: int = 4, lr: float = 3e-4, seed: int = 0):
    """An RLlib ``PPOConfig`` for one of :data:`RLLIB_ENVS` (short name or id): ``num_env_runners`` EnvRunner
    processes; one shared policy for every agent of the shared-budget env."""
    from ray.rllib.algorithms.ppo import PPOConfig

    env_id = RLLIB_ENVS.get(env, env)
    if env_id not in RLLIB_ENVS.values():
        raise ValueError(f"unknown RLlib env {env!r}; known: {sorted(RLLIB_ENVS)}")
    register_rllib_envs()
    config = (PPOConfig()
              .environment(env_id, env_config=dict(env_config or {}), clip_actions=True)
              .env_runners(num_env_runners=num_env_runners, num_envs_per_env_runner=1)
              .training(train_batch_size_per_learner=train_batch_size, minibatch_size=minibatch_size,
                        num_epochs=num_epochs, lr=lr)
              .debugging(seed=seed))
    if env_id == SHARED_BUDGET_ID:
        config = config.multi_agent(policies={"shared"}, policy_mapping_fn=_shared_policy)
    return config


def _shared_policy(agent_id, episode, **kwargs):
    return "shared"


def train_rllib_ppo(env: str, iterations: int, env_config=None, **kwargs):
    """Build PPO with :func:`ppo_config` and train ``iterations`` iterations; returns ``(algo, history)`` with
    one row per iteration (env steps, mean episode return, wall clock)."""
    algo = ppo_config(env, env_config, **kwargs).build_algo()
    history, start = [], time.perf_counter()
    for i in range(iterations):
        res = algo.train()
        runners = res.get("env_runners", {})
        history.append({"iteration": i + 1, "env_steps": int(runners.get("num_env_steps_sampled_lifetime", 0)),
                        "episode_return_mean": float(runners.get("episode_return_mean", float("nan"))),
                        "wall_clock": time.perf_counter() - start})
    return algo, history

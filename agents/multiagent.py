"""Learned allocators for the shared-quota environment (:mod:`membudget.envs.shared_budget`); the comparison is
the study :mod:`membudget.studies.shared_quota`.

- Shared-parameter PPO: one Stable-Baselines3 PPO policy for all agents, trained through
  :class:`ParallelVecEnv` (every (copy, agent) pair is one slot of an SB3 ``VecEnv`` — the role SuperSuit's
  ``pettingzoo_env_to_vec_env`` plays, written here to avoid a dependency that pins older Gymnasium releases).
"""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from membudget.agents.configs import silent_logger
from membudget.envs import shared_budget


class ParallelVecEnv(VecEnv):
    """``n_copies`` shared-budget environments as one SB3 ``VecEnv`` of ``n_copies * n_agents`` slots (agents share
    the policy). A finished copy is reset at once; its slots report ``done`` with ``terminal_observation``."""

    def __init__(self, n_copies: int = 4, seed: int = 0, **env_kwargs):
        self.envs = [shared_budget.parallel_env(**env_kwargs) for _ in range(n_copies)]
        self.agents = self.envs[0].possible_agents
        first = self.agents[0]
        super().__init__(n_copies * len(self.agents), self.envs[0].observation_space(first),
                         self.envs[0].action_space(first))
        self._seed = seed
        self._actions = None

    def _flat(self, per_copy):
        keys = self.observation_space.spaces
        return {k: np.stack([obs[a][k] for obs in per_copy for a in self.agents]) for k in keys}

    def _week(self, i):
        """Base seed of copy ``i``: always a development week (2000-3989), never an evaluation week."""
        return 2000 + (self._seed + 10 * i) % 1990

    def reset(self):
        obs = [e.reset(seed=self._week(i))[0] for i, e in enumerate(self.envs)]
        self._seed += 10 * len(self.envs)
        return self._flat(obs)

    def step_async(self, actions):
        self._actions = np.asarray(actions)

    def step_wait(self):
        n = len(self.agents)
        all_obs, rewards, dones, infos = [], [], [], []
        for c, e in enumerate(self.envs):
            acts = {a: self._actions[c * n + j] for j, a in enumerate(self.agents)}
            obs, rew, term, trunc, info = e.step(acts)
            done = all(term.values()) or all(trunc.values())
            slot_infos = [dict(info[a]) for a in self.agents]
            if done:
                for j, a in enumerate(self.agents):
                    slot_infos[j]["terminal_observation"] = {k: v.copy() for k, v in obs[a].items()}
                    slot_infos[j]["TimeLimit.truncated"] = False
                obs, _ = e.reset()
            all_obs.append(obs)
            rewards += [rew[a] for a in self.agents]
            dones += [done] * n
            infos += slot_infos
        return self._flat(all_obs), np.array(rewards, dtype=np.float32), np.array(dones), infos

    def close(self):
        pass

    def get_attr(self, attr_name, indices=None):
        return [getattr(self.envs[i // len(self.agents)], attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name, value, indices=None):
        for i in self._get_indices(indices):
            setattr(self.envs[i // len(self.agents)], attr_name, value)

    def env_method(self, method_name, *args, indices=None, **kwargs):
        return [getattr(self.envs[i // len(self.agents)], method_name)(*args, **kwargs)
                for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False for _ in self._get_indices(indices)]

    def seed(self, seed=None):
        self._seed = 0 if seed is None else int(seed)
        return [None] * self.num_envs


def train_shared_ppo(n_agents, budget, total_timesteps=20_000, seed=0, n_copies=4):
    """One PPO policy (``MultiInputPolicy``) shared by every agent."""
    from stable_baselines3 import PPO

    venv = ParallelVecEnv(n_copies=n_copies, seed=seed, n_agents=n_agents, budget=budget)
    model = PPO("MultiInputPolicy", venv, n_steps=max(64, 1024 // venv.num_envs), batch_size=256, seed=seed,
                verbose=0, device="cpu")
    model.set_logger(silent_logger())
    model.learn(total_timesteps=total_timesteps)
    return model

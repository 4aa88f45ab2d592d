"""Allocators for the shared-quota environment (:mod:`membudget.envs.shared_budget`) and its results.

- Static: every agent runs the Static gate on its own observation; the shared executor arbitrates.
- Shared-parameter PPO: one Stable-Baselines3 PPO policy for all agents, trained through
  :class:`ParallelVecEnv` (every (copy, agent) pair is one slot of an SB3 ``VecEnv`` — the role SuperSuit's
  ``pettingzoo_env_to_vec_env`` plays, written here to avoid a dependency that pins older Gymnasium releases).
- Hindsight bounds: the exact optimum of the *team mean* Set F1 (a sum of ratios) over the joint week is not
  tractable with the DP, so two DP bounds bracket it: each agent's optimum given the whole shared budget and cap
  (a relaxation: an upper bound) and each agent's optimum with a 1/n share of budget and cap (a feasible joint
  schedule: a lower bound). With one agent both equal the exact optimum.

``python -m membudget.agents.multiagent`` prints the results table (2, 3, 5 agents; shared budgets = the sum
of the agents' B10 and B20 levels) and writes ``docs/shared_budget.md``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from membudget.envs import shared_budget
from membudget.envs.pm import budget_levels

EVAL_BASES = tuple(range(6000, 6300, 10))  # base seed s plays weeks s .. s + n - 1: disjoint for n <= 10


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
    model.learn(total_timesteps=total_timesteps)
    return model


def play(policy_fn, n_agents, budget, bases=EVAL_BASES):
    """Per base seed, every agent's Set F1. ``policy_fn(agent, obs) -> action``."""
    out = np.zeros((len(bases), n_agents))
    for k, s in enumerate(bases):
        env = shared_budget.parallel_env(n_agents=n_agents, budget=budget)
        obs, _ = env.reset(seed=s)
        while env.agents:
            obs, _, _, _, infos = env.step({a: policy_fn(a, obs[a]) for a in env.agents})
        out[k] = [infos[a]["episode_metrics"]["set_f1"] for a in env.possible_agents]
    return out


def dp_bounds(n_agents, budget, bases=EVAL_BASES):
    """Per base seed and agent: (lower, upper) hindsight-DP bounds of the team's Set F1 (see the module doc)."""
    from membudget.envs.pm import generate_episode
    from membudget.teachers import HindsightDP

    env = shared_budget.parallel_env(n_agents=n_agents, budget=budget)
    total, cap = env.budget, env.per_step_cap
    lo, hi = np.zeros((len(bases), n_agents)), np.zeros((len(bases), n_agents))
    relaxed = HindsightDP(budget=total, per_step_cap=cap)
    split = HindsightDP(budget=max(1, total // n_agents), per_step_cap=max(1, cap // n_agents))
    for k, s in enumerate(bases):
        for i in range(n_agents):
            ep = generate_episode(s + i)
            hi[k, i] = relaxed.solve(ep).f1
            lo[k, i] = split.solve(ep).f1
    return lo, hi


def results(timesteps=20_000, agent_counts=(2, 3, 5), levels=("B10", "B20"), progress=print) -> str:
    from membudget.agents import StaticGate
    from membudget.evaluate import bootstrap_ci
    from membudget.teachers import build_label_dataset

    start = time.perf_counter()
    progress("fit the Static gate on development weeks 2000-2019")
    static = StaticGate().fit(build_label_dataset(range(2000, 2020), []))
    lines = ["# Shared observation quota: several assistants, one budget", "",
             "`membudget.envs.shared_budget`: each agent owns a PM week; one shared executor allocates the shared "
             "per-step cap (2 per agent) and the shared episode budget (the sum of the agents' budget levels). "
             f"Evaluated on {len(EVAL_BASES)} base seeds (agent i plays week s + i, s = 6000, 6010, ...); team mean "
             "Set F1 with a bootstrap 95% interval over base seeds, and Jain's fairness index of the agents' Set F1 "
             f"(mean over base seeds). Shared-parameter PPO: {timesteps:,} training steps per setting. Regenerate "
             "with `python -m membudget.agents.multiagent`.", "",
             "| agents | shared budget | Static: team F1 / Jain | shared PPO: team F1 / Jain | hindsight DP bounds "
             "on team F1 [lower, upper] |", "|---|---|---|---|---|"]
    for n in agent_counts:
        for level in levels:
            budget = level  # a level name means the sum of the agents' levels
            thr = static.threshold_for(level)
            progress(f"{n} agents, {level}: Static")
            st = play(lambda a, o: static.action_for(o, thr), n, budget)
            progress(f"{n} agents, {level}: PPO")
            model = train_shared_ppo(n, budget, timesteps)
            pp = play(lambda a, o: model.predict(o, deterministic=True)[0], n, budget)
            progress(f"{n} agents, {level}: DP bounds")
            lo, hi = dp_bounds(n, budget)

            def cell(x):
                m, a, b = bootstrap_ci(x.mean(axis=1), 10_000)
                jain = np.mean([shared_budget.jain_index(row) for row in x])
                return f"{m:.4f} [{a:.4f}, {b:.4f}] / {jain:.3f}"

            total = n * budget_levels()[level]
            exact = " (equal: the optimum)" if np.allclose(lo, hi) else ""
            lines.append(f"| {n} | {level} × {n} = {total} | {cell(st)} | {cell(pp)} | "
                         f"[{lo.mean():.4f}, {hi.mean():.4f}]{exact} |")
    lines += ["", "The exact team optimum (a mean of per-agent ratios over the joint week) is not computed: the "
              "hindsight DP optimises one Set F1 ratio. The upper bound gives every agent the whole shared budget "
              "and cap; the lower bound splits both evenly (a feasible joint schedule). Where the two coincide in "
              "every week the optimum is known exactly. With one agent the environment equals PMWeek-v0 and the DP "
              "is exact. The shared PPO policy gets a short training budget here; it is the RL baseline of this "
              "table, not a tuned agent.", "",
              f"Generated in {time.perf_counter() - start:.0f} s."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.agents.multiagent")
    parser.add_argument("--timesteps", type=int, default=20_000)
    parser.add_argument("--out", default="docs/shared_budget.md")
    args = parser.parse_args(argv)
    text = results(args.timesteps, progress=lambda m: print(m, flush=True))
    print(text)
    import os

    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()

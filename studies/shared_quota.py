"""The shared-quota study (:mod:`membudget.envs.shared_budget`): several assistants, one observation quota.

- Static: every agent runs the Static gate on its own observation; the shared executor arbitrates.
- Shared-parameter PPO: one Stable-Baselines3 PPO policy for all agents, trained through
  :class:`ParallelVecEnv` (every (copy, agent) pair is one slot of an SB3 ``VecEnv`` — the role SuperSuit's
  ``pettingzoo_env_to_vec_env`` plays, written here to avoid a dependency that pins older Gymnasium releases).
- Hindsight bounds: the exact optimum of the *team mean* Set F1 (a sum of ratios) over the joint week is not
  tractable with the DP, so two DP bounds bracket it: each agent's optimum given the whole shared budget and cap
  (a relaxation: an upper bound) and each agent's optimum with a 1/n share of budget and cap (a feasible joint
  schedule: a lower bound). With one agent both equal the exact optimum.

``python -m membudget.evaluate shared-budget`` prints the results table (2, 3, 5 agents; shared budgets = the sum
of the agents' B10 and B20 levels) and writes ``docs/shared_budget.md``; with ``--backend local|ray`` (local by
default) every (agent count, level, policy or bound) is one task of :func:`measure`.
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np

from membudget.agents import StaticGate
from membudget.agents.multiagent import train_shared_ppo
from membudget.envs import shared_budget
from membudget.envs.pm import budget_levels, generate_episode
from membudget.envs.validation import int_flag
from membudget.studies.cli import add_page_flag, page_path
from membudget.studies.execution import Executor, add_backend_flags, run_with_flags
from membudget.studies.protocol import bootstrap_ci, write_page
from membudget.teachers import HindsightDP, build_label_dataset

EVAL_BASES = tuple(range(6000, 6300, 10))  # base seed s plays weeks s .. s + n - 1: disjoint for n <= 10


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


POLICIES = ("Static", "PPO", "DP bounds")
"""The tasks of one (agent count, level) setting: the Static gate's play, one shared-PPO training and its play,
the hindsight-DP bounds."""


def setting_task(static, timesteps, bases, item):
    """One task of :func:`measure`: ``item = (n_agents, level, policy)`` with ``policy`` in :data:`POLICIES` ->
    the per-base-seed, per-agent Set F1 (for ``"DP bounds"`` the pair ``(lower, upper)``) on the base seeds
    ``bases``. ``static``: the fitted Static gate; ``timesteps``: PPO's training steps."""
    n, level, policy = item
    if policy == "Static":
        thr = static.threshold_for(level)
        return play(lambda a, o: static.action_for(o, thr), n, level, bases)
    if policy == "PPO":
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # float sums depend on the thread count: one thread in every process and backend
        try:
            model = train_shared_ppo(n, level, timesteps)
            return play(lambda a, o: model.predict(o, deterministic=True)[0], n, level, bases)
        finally:
            torch.set_num_threads(threads)
    if policy == "DP bounds":
        return dp_bounds(n, level, bases)
    raise ValueError(f"unknown policy {policy!r}; known: {POLICIES}")


def measure(timesteps=20_000, agent_counts=(2, 3, 5), levels=("B10", "B20"), progress=print, executor=None,
            bases=EVAL_BASES, static=None) -> dict:
    """``{(n_agents, level): {"Static": f1, "PPO": f1, "DP bounds": (lower, upper)}}`` (arrays base seed × agent
    over ``bases``; a level name means the sum of the agents' levels). The Static gate ``static`` is fitted once if
    not given (on development weeks 2000-2019, its labels in tasks of ``executor``), then every (agent count,
    level, policy) is one task of ``executor`` (default: the local backend), each seeded by its key, so the numbers
    do not depend on the backend."""
    executor = executor or Executor()
    if static is None:
        progress("fit the Static gate on development weeks 2000-2019")
        static = StaticGate().fit(build_label_dataset(range(2000, 2020), [], map=executor.map))
    items = [(n, level, policy) for n in agent_counts for level in levels for policy in POLICIES]
    progress(f"{len(items)} tasks: Static, PPO (training and play) and DP bounds per setting "
             f"({executor.backend} backend)")
    out = {}
    for (n, level, policy), value in zip(items, executor.map(
            functools.partial(setting_task, static, timesteps, tuple(bases)), items)):
        out.setdefault((n, level), {})[policy] = value
    return out


def results(timesteps=20_000, agent_counts=(2, 3, 5), levels=("B10", "B20"), progress=print, executor=None) -> str:
    """The page ``docs/shared_budget.md`` of :func:`measure`'s numbers."""
    start = time.perf_counter()
    measured = measure(timesteps, agent_counts, levels, progress, executor)
    lines = ["# Shared observation quota: several assistants, one budget", "",
             "`membudget.envs.shared_budget`: each agent owns a PM week; one shared executor allocates the shared "
             "per-step cap (2 per agent) and the shared episode budget (the sum of the agents' budget levels). "
             f"Evaluated on {len(EVAL_BASES)} base seeds (agent i plays week s + i, s = 6000, 6010, ...); team mean "
             "Set F1 with a bootstrap 95% interval over base seeds, and Jain's fairness index of the agents' Set F1 "
             f"(mean over base seeds). Shared-parameter PPO: {timesteps:,} training steps per setting. Regenerate "
             "with `python -m membudget.evaluate shared-budget`.", "",
             "| agents | shared budget | Static: team F1 / Jain | shared PPO: team F1 / Jain | hindsight DP bounds "
             "on team F1 [lower, upper] |", "|---|---|---|---|---|"]

    def cell(x):
        m, a, b = bootstrap_ci(x.mean(axis=1), 10_000)
        jain = np.mean([shared_budget.jain_index(row) for row in x])
        return f"{m:.4f} [{a:.4f}, {b:.4f}] / {jain:.3f}"

    for (n, level), m in measured.items():
        lo, hi = m["DP bounds"]
        total = n * budget_levels()[level]
        exact = " (equal: the optimum)" if np.allclose(lo, hi) else ""
        lines.append(f"| {n} | {level} × {n} = {total} | {cell(m['Static'])} | {cell(m['PPO'])} | "
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
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate shared-budget")
    parser.add_argument("--timesteps", type=int_flag(1), default=20_000)
    add_page_flag(parser, "shared-budget", "shared_budget.md")
    add_backend_flags(parser)
    args = parser.parse_args(argv)
    args.out = page_path(args.out, "shared-budget", "shared_budget.md")
    text = run_with_flags(args, functools.partial(results, args.timesteps))
    print(text)
    write_page(args.out, text)


if __name__ == "__main__":
    main()

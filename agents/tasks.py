"""The environments a learner of the package trains on, behind one interface: ``PMWeek-v0`` (:data:`PMWEEK`) and
``ConversationPM-v1`` (:data:`CONVERSATION`).

Behaviour cloning and DAgger (:mod:`membudget.agents.imitation`) and the native PPO (:mod:`membudget.agents.ppo`)
take a ``task=`` and run the same code on either: a task names the environment (single and batched, in
``action_mode="scores"``), its teacher (the hindsight DP on weeks, the exact hindsight optimum on conversations),
the quality it reports (Set F1, the conversation score) and its episode seeds — training, and validation seeds
disjoint from every seed a study reports on (PMWeek: weeks 4000-4009, tested on 8000+ / 9000+; conversations:
3000-3009, analysed on 4000-4029).
"""

from __future__ import annotations

import gymnasium as gym

from membudget.agents.configs import TASK_NAMES, TRAIN_RANGES

from membudget.agents.rl import TRAIN_SEEDS, VALIDATION_SEEDS
from membudget.envs.conversation import DEV_SEEDS, ConversationPMEnv
from membudget.envs.conversation.levels import LEVELS as CONVERSATION_LEVELS
from membudget.envs.conversation.rollout import rollout as conversation_rollout
from membudget.envs.pm import PMWeekEnv, PMWeekVectorEnv
from membudget.envs.pm.levels import LEVELS as PMWEEK_LEVELS
from membudget.envs.pm.rollout import rollout
from membudget.teachers import HindsightDP
from membudget.teachers.conversation import ConversationOptimum
from membudget.wrappers import TEACHER_KEY, HindsightTeacher


class _Task:
    """What every task shares: validation is the mean of its quality over a rollout in ``action_mode="scores"``."""

    quality: str
    metrics: tuple
    episodes: str
    validation_seeds: range

    def rollout(self, policy, seeds, **env_kwargs) -> dict:
        raise NotImplementedError

    def validate(self, policy, budget, seeds, **kw):
        return float(self.rollout(policy, seeds, budget=budget, action_mode="scores", **kw)[self.quality].mean())

    def validation_label(self) -> str:
        """The quality on the validation episodes, e.g. ``"Set F1, validation weeks 4000-4009"``."""
        seeds = self.validation_seeds
        return f"{dict(self.metrics)[self.quality]}, validation {self.episodes} {min(seeds)}-{max(seeds)}"


class PMWeekTask(_Task):
    """``PMWeek-v0``: the hindsight DP's schedules; DAgger labels from the
    :class:`~membudget.wrappers.HindsightTeacher` wrapper; quality Set F1; training weeks 2000-3999."""

    name = "PMWeek-v0"
    levels = PMWEEK_LEVELS
    """The budget level names the environment accepts (``"B5"``...``"B80"``)."""
    episodes = "weeks"
    quality = "set_f1"
    train_seeds = TRAIN_SEEDS
    validation_seeds = VALIDATION_SEEDS
    held_out_first = 8000
    """The first held-out week (docs/protocol.md: validation 4000-4029, held-out 8000-8029 and 9000-9029)."""
    train_range = TRAIN_RANGES["pmweek"]
    """Episodes a learner may train on (the development weeks)."""
    metrics = (("set_f1", "Set F1"), ("on_time_recall", "on-time recall"), ("realized_cost", "realized cost"))
    """End-of-episode metrics a run reports: (key of the rollout's metrics, label)."""

    def env_kwargs(self, per_step_cap=2, cost_profile="unit", late_policy="expire") -> dict:
        """The environment options a learner passes through (beside the budget)."""
        return {"per_step_cap": per_step_cap, "cost_profile": cost_profile, "late_policy": late_policy}

    def make_env(self, budget, **kw):
        return PMWeekEnv(budget=budget, action_mode="scores", **kw)

    def vector_env(self, num_envs, budget, observe_counts=False, **kw):
        """The native batched environment of ``num_envs`` weeks."""
        return PMWeekVectorEnv(num_envs=num_envs, budget=budget, action_mode="scores", observe_counts=observe_counts,
                               **kw)

    def schedule(self, env):
        return HindsightDP.from_env(env).solve(env.episode).schedule

    def teacher_env(self, budget):
        return HindsightTeacher(self.make_env(budget))

    def label(self, env, info):
        return info[TEACHER_KEY] > 0

    def solves(self, env):
        return env.teacher_solves

    def rollout(self, policy, seeds, **env_kwargs) -> dict:
        """Per-episode metrics of ``policy`` on the weeks ``seeds``."""
        return rollout(policy, seeds, **env_kwargs)


class ConversationTask(_Task):
    """``ConversationPM-v1``: the exact hindsight optimum's schedules and, for DAgger, its optimal continuation from
    each visited state (one solve per state); quality the conversation score; training on the 12 development
    conversations 2000-2011 (the ones Static is calibrated on)."""

    name = "ConversationPM-v1"
    levels = CONVERSATION_LEVELS
    """The budget level names the environment accepts (``"B20"``...``"B80"``)."""
    episodes = "conversations"
    quality = "score"
    train_seeds = DEV_SEEDS
    validation_seeds = range(3000, 3010)
    held_out_first = 4000
    """The first held-out conversation: the analysis conversations 4000-4029 (BudgetPM's) and those from 5000."""
    train_range = TRAIN_RANGES["conversation"]
    """Episodes a learner may train on (below the validation conversations)."""
    metrics = (("score", "score"), ("macro_accuracy", "macro accuracy"), ("realized_cost", "realized cost"))
    """End-of-episode metrics a run reports: (key of the rollout's metrics, label)."""

    def env_kwargs(self, per_step_cap=2, cost_profile="unit", late_policy="expire") -> dict:
        """The environment options a learner passes through (beside the budget); a conversation's verifier calls
        cost 1 and nothing is late, so other cost profiles and late policies are refused."""
        if cost_profile != "unit" or late_policy != "expire":
            raise ValueError(f"{self.name} has unit verifier costs and no late policy: cost_profile must be 'unit' "
                             f"and late_policy 'expire', got {cost_profile!r} and {late_policy!r}")
        return {"per_step_cap": per_step_cap}

    def make_env(self, budget, **kw):
        return ConversationPMEnv(budget=budget, action_mode="scores", **kw)

    def vector_env(self, num_envs, budget, observe_counts=False, **kw):
        """``num_envs`` conversations side by side (Gymnasium's ``SyncVectorEnv``; every conversation has the
        same horizon)."""
        if observe_counts:
            raise ValueError(f"{self.name} does not observe running counts (observe_counts is PMWeek-v0's)")
        return gym.vector.SyncVectorEnv([lambda: self.make_env(budget, **kw) for _ in range(num_envs)])

    def _teacher(self, env):
        e = env.unwrapped
        return ConversationOptimum(budget=e.budget, per_step_cap=e.per_step_cap,
                                   false_fire_penalty=e.false_fire_penalty)

    def schedule(self, env):
        return self._teacher(env).continuation(env)

    def teacher_env(self, budget):
        return self.make_env(budget)

    def label(self, env, info):
        return self._teacher(env).act(env) > 0

    def solves(self, env):
        return env.unwrapped.conversation.horizon

    def rollout(self, policy, seeds, **env_kwargs) -> dict:
        """Per-episode metrics of ``policy`` on the conversations ``seeds``."""
        return conversation_rollout(policy, seeds, **env_kwargs)


PMWEEK, CONVERSATION = PMWeekTask(), ConversationTask()
TASKS = dict(zip(TASK_NAMES, (PMWEEK, CONVERSATION)))
"""The tasks by their command-line names."""

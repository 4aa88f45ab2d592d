"""``membudget/ReplayStream-v0``: replay mode × generation budget for each task of a lifelong stream (LIMBO)."""

from __future__ import annotations

from collections import deque

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..rendering import (C_BAD, C_FUTURE, C_GOOD, C_QUERIED, RENDER_MODES, Render, blank_frame, check_render_mode,
                         figure_array, new_figure)
from ..validation import MAX_REWARD_WEIGHT, check_discrete_action, check_int, check_number, check_options
from .world import (ACTIONS, BUDGETS, MAX_CONTEXT, MAX_INSTRUCTION, MODES, N_ACTIONS, BANK_WINDOW, Stream,
                    check_stream_arguments, generate_stream)

FEATURE_NAMES = (
    "instruction_tokens",   # instruction length / 1024                         (prompt shape)
    "context_tokens",       # schema / environment description length / 2048    (prompt shape)
    "n_skills",             # skills the task names / 3                         (prompt shape)
    "bank_fill",            # bank entries visible to retrieval / 64            (retrieval state)
    "retrieval_top",        # retriever score of the best bank entry            (retrieval state)
    "retrieval_recent",     # mean retriever score of the recent_k latest entries (retrieval state)
    "schema_share",         # share of the visible bank with the task's schema  (retrieval state)
    "recent_cost",          # mean normalised cost of the last 10 tasks         (runtime)
    "recent_accuracy",      # accuracy over the last 10 tasks                   (runtime)
    "prev_success",         # the previous task was solved                      (previous outcome)
    "prev_error",           # the previous task failed with a format / execution error (previous outcome)
    "progress",             # tasks done / stream length                        (runtime)
)
N_FEATURES = len(FEATURE_NAMES)
RECENT_WINDOW = 10


class ReplayStreamEnv(Render, gym.Env):
    """
    ## Description

    A lifelong agent works through a stream of tasks (default 500) of one family — ``db`` (SQL over a set of
    tables) or ``os`` (bash in a set of environments) — with one backbone LLM. Before each task the allocator
    chooses how much memory to replay into the prompt and how many generation tokens to allow (LIMBO).
    Successful sessions enter a memory bank (retrieval from the 64 most recent); a replayed trajectory helps when
    it shares skills / schema with the task, costs its tokens, and can hurt when irrelevant; compression keeps part
    of the help at a fraction of the tokens. Every task's outcome under every action is drawn at reset from the
    seed (:class:`~membudget.envs.replay.world.Stream`, ``env.unwrapped.stream``), so the stream is identical for
    every policy and the hindsight oracle exists. The outcome model is documented in
    :mod:`membudget.envs.replay.world`.

    ## Action Space

    ``Discrete(12)``: action ``a = 3 · mode + budget`` with memory mode ``none``, ``full`` (the ``recent_k`` most
    recent bank entries verbatim), ``compressed`` (the same entries compressed) or ``retrieved`` (the
    ``retrieve_k`` entries the retriever ranks highest) and generation budget ``low`` (≤ 512 tokens), ``medium``
    (768) or ``high`` (1024). ``ACTIONS[a]`` names the pair; ``action_index(mode, budget)`` inverts it.

    ## Observation Space

    ``Box(0, 1, (12,), float32)``, the pre-call features (names in ``FEATURE_NAMES``): prompt shape (instruction
    length / 1024, context length / 2048, skills / 3), retrieval state (bank fill / 64, best retriever score, mean
    retriever score of the recent entries, share of the bank with the task's schema), runtime state (mean
    normalised cost and accuracy over the last 10 tasks, 0 before any), the previous task's success and error
    flags, and progress through the stream.

    ## Rewards

    ``correct − w · cost`` with ``cost`` = the task's tokens / the running maximum of tokens over the tasks so far
    (this one included), in [0, 1]; ``w`` = ``cost_weight`` (0.5).

    ## Starting State

    ``reset(seed=s)`` draws stream ``s`` (tasks, bank, the outcome and tokens of every task under every action).

    ## Episode End

    Terminates after the last task; never truncates. The final observation repeats the last task's prompt and
    retrieval features with the runtime features updated. ``info`` at reset and at every step has the same keys,
    fixed shapes and numeric dtypes: ``task``, ``replay_mode`` and ``generation_budget`` (indices in ``MODES`` and
    ``BUDGETS``; -1 at reset), ``correct``, ``error``, ``tokens``, ``prompt_tokens``, ``replay_tokens``,
    ``generation_tokens``, ``cost`` (normalised), ``running_max_tokens``; at the end ``info["episode_metrics"]`` adds
    ``accuracy``, ``total_tokens``, ``n_tasks`` and ``return``.

    ## Arguments

    - ``family``: ``"db"`` (default) or ``"os"``.
    - ``profile``: backbone profile ``"strong"`` (no replay already strong, replay worth 2-3 points at 5-6× cost),
      ``"mid"`` (default) or ``"weak"`` (no replay ~21%, retrieved replay ~66% on ``db``).
    - ``n_tasks``: stream length (500), in [1, 100,000]. A reset's time grows with its square: it draws the
      retriever's noise of every (task, bank item) pair, the draws that fix the stream (0.04 s at 500 tasks,
      6 s at 20,000, 20 s at 40,000, about 2 min at 100,000; memory stays linear).
    - ``recent_k``: entries replayed by ``full`` / ``compressed`` (4; the fixed-replay baselines use 1, 4, 8, 16).
    - ``retrieve_k``: entries replayed by ``retrieved`` (1).
    - ``cost_weight``: ``w`` (0.5), in [0, ``MAX_REWARD_WEIGHT``] (1e6).
    - ``render_mode``: ``"ansi"``, ``"human"``, ``"rgb_array"`` (the stream so far as a picture: each task's
      replay mode and generation budget, whether it was solved, its tokens and the running accuracy) or None.

    ## Version History

    - v0: initial version.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 25}
    _name = "ReplayStream-v0"
    _generate = staticmethod(generate_stream)

    def __init__(self, family="db", profile="mid", n_tasks=500, recent_k=4, retrieve_k=1, cost_weight=0.5,
                 render_mode=None):
        check_stream_arguments(family, profile, n_tasks, recent_k, retrieve_k)
        check_number("cost_weight", cost_weight, 0, MAX_REWARD_WEIGHT)
        check_render_mode(render_mode, self._name)
        self.family, self.profile, self.n_tasks = family, profile, int(n_tasks)
        self.recent_k, self.retrieve_k, self.cost_weight = int(recent_k), int(retrieve_k), float(cost_weight)
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(N_ACTIONS)
        self.observation_space = spaces.Box(0.0, 1.0, (N_FEATURES,), dtype=np.float32)
        self.stream: Stream | None = None
        self._t = 0
        self._chosen: np.ndarray | None = None

    # ------------------------------------------------------------------------------------------------ internals

    def _obs(self) -> np.ndarray:
        s, t = self.stream, min(self._t, self.n_tasks - 1)
        costs, accs = self._recent_cost, self._recent_acc
        return np.array([
            s.instruction_tokens[t] / MAX_INSTRUCTION, s.context_tokens[t] / MAX_CONTEXT, s.n_skills[t] / 3.0,
            s.bank_size[t] / BANK_WINDOW, s.retrieval_top[t], s.retrieval_recent[t], s.schema_share[t],
            sum(costs) / len(costs) if costs else 0.0, sum(accs) / len(accs) if accs else 0.0,
            float(self._prev_success), float(self._prev_error), self._t / self.n_tasks,
        ], dtype=np.float32)

    # ---------------------------------------------------------------------------------------------------- API

    def reset(self, *, seed=None, options=None):
        seed = check_int("seed", seed, 0, none_ok=True)
        check_options(options, ())
        super().reset(seed=seed)  # after the checks: a refused reset leaves the generator as it was
        self.stream = self._generate(family=self.family, profile=self.profile, n_tasks=self.n_tasks,
                                      recent_k=self.recent_k, retrieve_k=self.retrieve_k, rng=self.np_random)
        self._t = 0
        self._running_max = 0
        self._recent_cost: deque = deque(maxlen=RECENT_WINDOW)
        self._recent_acc: deque = deque(maxlen=RECENT_WINDOW)
        self._prev_success = self._prev_error = False
        self._n_correct = self._total_tokens = 0
        self._return = 0.0
        if self._pictures:
            self._chosen = np.full(self.n_tasks, -1, dtype=np.int64)
        return self._obs(), self._info(0, -1, False, False, 0, 0, 0, 0, 0.0)

    def _info(self, task, a, correct, error, tokens, prompt, replay, generation, cost) -> dict:
        """The per-step info (at reset: task 0, no action yet, -1)."""
        return {"task": task, "replay_mode": -1 if a < 0 else a // len(BUDGETS),
                "generation_budget": -1 if a < 0 else a % len(BUDGETS), "correct": correct, "error": error,
                "tokens": tokens, "prompt_tokens": prompt, "replay_tokens": replay, "generation_tokens": generation,
                "cost": cost, "running_max_tokens": self._running_max}

    def step(self, action):
        if self.stream is None:
            raise RuntimeError("call reset() before step()")
        if self._t >= self.n_tasks:
            raise RuntimeError("the stream has ended; call reset()")
        a = check_discrete_action(action, N_ACTIONS)
        s, t = self.stream, self._t
        correct, error = bool(s.correct[t, a]), bool(s.error[t, a])
        tokens = int(s.tokens[t, a])
        self._running_max = max(self._running_max, tokens)
        cost = tokens / self._running_max
        reward = float(correct) - self.cost_weight * cost
        self._recent_cost.append(cost)
        self._recent_acc.append(float(correct))
        self._prev_success, self._prev_error = correct, error
        self._n_correct += correct
        self._total_tokens += tokens
        self._return += reward
        if self._chosen is not None:
            self._chosen[t] = a
        self._t += 1
        terminated = self._t >= self.n_tasks
        mode = a // len(BUDGETS)
        info = self._info(t, a, correct, error, tokens,
                          int(s.instruction_tokens[t] + s.context_tokens[t] + s.replay_tokens[t, mode]),
                          int(s.replay_tokens[t, mode]), int(s.generation_tokens[t, a]), cost)
        if terminated:
            info["episode_metrics"] = {"accuracy": self._n_correct / self.n_tasks, "total_tokens": self._total_tokens,
                               "n_tasks": self.n_tasks, "return": self._return}
        return self._obs(), reward, terminated, False, info

    def outcome_table(self):
        """The counterfactual table of the current stream: ``(correct (T, 12) bool, tokens (T, 12) int)``;
        privileged (for the hindsight oracle and analysis), never part of the observation."""
        if self.stream is None:
            raise RuntimeError("call reset() before outcome_table()")
        return self.stream.correct, self.stream.tokens

    def _text(self) -> str:
        if self.stream is None:
            return f"{self._name}: call reset() first"
        acc = self._n_correct / self._t if self._t else 0.0
        return (f"{self._name} ({self.family}, {self.profile}) task {self._t}/{self.n_tasks}  accuracy so far "
                f"{acc:.3f}  tokens so far {self._total_tokens}  previous task "
                + ("-" if self._t == 0 else "correct" if self._prev_success else "wrong"))

    def _picture(self) -> np.ndarray:
        if self.stream is None:
            return blank_frame(f"{self._name}: call reset() first")
        s, t, n = self.stream, self._t, self.n_tasks
        tasks, a = np.arange(t), self._chosen[:t]
        correct, tokens = s.correct[tasks, a], s.tokens[tasks, a]
        fig = new_figure()
        grid = fig.add_gridspec(2, 1, height_ratios=(3, 2), left=0.17, right=0.93, top=0.88, bottom=0.1, hspace=0.1)
        ax = fig.add_subplot(grid[0])
        tax = fig.add_subplot(grid[1], sharex=ax)
        for ok, colour, marker, name in ((True, C_GOOD, "o", "solved"), (False, C_BAD, "X", "failed")):
            ax.scatter(tasks[correct == ok], a[correct == ok], s=14, c=colour, marker=marker, linewidths=0,
                       label=name)
        ax.set_yticks(range(N_ACTIONS), [f"{m} · {b}" for m, b in ACTIONS], fontsize=7)
        ax.set_ylim(N_ACTIONS - 0.5, -0.5)
        for k in range(len(BUDGETS), N_ACTIONS, len(BUDGETS)):
            ax.axhline(k - 0.5, color="#d9d9d9", linewidth=0.8)
        ax.set_ylabel("replay mode · generation budget", fontsize=7)
        ax.legend(fontsize=7, loc="upper right", ncol=2, framealpha=0.9)
        ax.tick_params(labelbottom=False)
        tax.stairs(tokens, np.arange(t + 1) - 0.5, fill=True, color=C_QUERIED)
        tax.set_ylabel("tokens", fontsize=7, color=C_QUERIED)
        tax.set_ylim(0, max(1, int(s.tokens.max())) * 1.05)
        tax.tick_params(labelsize=7)
        tax.set_xlabel("task", fontsize=8)
        acc = tax.twinx()
        acc.plot(tasks, np.cumsum(correct) / (tasks + 1), color=C_GOOD, linewidth=1.5)
        acc.set_ylim(0, 1.05)
        acc.set_ylabel("accuracy so far", fontsize=7, color=C_GOOD)
        acc.tick_params(labelsize=7)
        for panel in (ax, tax):
            panel.axvspan(t - 0.5, n - 0.5, color=C_FUTURE, zorder=0)
        ax.set_xlim(-0.5, n - 0.5)
        accuracy = self._n_correct / t if t else 0.0
        fig.suptitle(f"{self._name} ({self.family}, {self.profile})  task {t}/{n}\naccuracy so far "
                     f"{accuracy:.3f}, tokens so far {self._total_tokens:,}, return {self._return:.2f}",
                     fontsize=9, x=0.02, ha="left", y=0.985)
        return figure_array(fig)

    @property
    def task_index(self) -> int:
        """Index of the task the next action is for."""
        return self._t


__all__ = ["ACTIONS", "BUDGETS", "FEATURE_NAMES", "MODES", "N_ACTIONS", "ReplayStreamEnv"]

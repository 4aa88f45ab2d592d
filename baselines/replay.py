"""Reference allocators for ``ReplayStream-v0`` (LIMBO's baselines) and the hindsight oracle.

The fixed baselines choose one action for every task. Like LIMBO's baselines they decode with the low
generation tier (a 512-token response cap) unless told otherwise. A fixed-replay or retrieval baseline with a
``k`` other than the environment's default needs the environment built with that ``k``: its ``env_kwargs``
attribute says how (``gym.make("membudget/ReplayStream-v0", **policy.env_kwargs)``);
:func:`membudget.studies.limbo.run_policy` applies it.

Privileged policies take the environment explicitly and say so: :class:`HindsightOracle` reads the current
stream's counterfactual table, :class:`GroupSelfConsistency` scores the stream's self-consistency samples (an
action outside ``Discrete(12)``).
"""

from __future__ import annotations

import numpy as np

from membudget.envs.replay.world import BUDGETS, RECENT_KS, SC_MAX, action_index


def _check_budget(budget):
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {BUDGETS}, got {budget!r}")


def _check_k(name, k, allowed=None):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 or (allowed and k not in allowed):
        raise ValueError(f"{name} must be {'one of ' + str(allowed) if allowed else 'a positive int'}, got {k!r}")


class _Fixed:
    """One action for every task; ``predict`` handles a single ``(12,)`` or a batched ``(n, 12)`` observation."""

    mode = "none"

    def __init__(self, *, budget="low"):
        self.budget = budget

    @property
    def env_kwargs(self) -> dict:
        return {}

    @property
    def action(self) -> int:
        _check_budget(self.budget)
        return action_index(self.mode, self.budget)

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        obs = np.asarray(observation)
        if obs.ndim not in (1, 2):
            raise ValueError(f"observation must have shape (d,) or (n, d), got {obs.shape}")
        a = self.action
        if obs.ndim == 1:
            return np.int64(a), state
        return np.full(obs.shape[0], a, dtype=np.int64), state

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class NoReplay(_Fixed):
    """No memory in the prompt."""

    mode = "none"


class _Replayed(_Fixed):
    """Replays ``k`` sessions: the environment must be built with that ``k`` (its keyword ``k_keyword``, the ``k``
    allowed ``k_allowed``; None: any positive int)."""

    k_keyword = ""
    k_allowed = None

    def __init__(self, *, k, budget="low"):
        super().__init__(budget=budget)
        self.k = k

    @property
    def env_kwargs(self) -> dict:
        _check_k("k", self.k, self.k_allowed)
        return {self.k_keyword: int(self.k)}


class FixedRecentReplay(_Replayed):
    """Replay the ``k`` most recent successful sessions verbatim (trimmed traces), ``k`` in {1, 4, 8, 16}."""

    mode = "full"
    k_keyword = "recent_k"
    k_allowed = RECENT_KS

    def __init__(self, *, k=4, budget="low"):
        super().__init__(k=k, budget=budget)


class CompressedReplay(FixedRecentReplay):
    """Replay the ``k`` most recent successful sessions, compressed (LongLLMLingua-style)."""

    mode = "compressed"


class RetrievedTopK(_Replayed):
    """Replay the ``k`` bank sessions the retriever ranks highest for the task."""

    mode = "retrieved"
    k_keyword = "retrieve_k"

    def __init__(self, *, k=1, budget="low"):
        super().__init__(k=k, budget=budget)


class GroupSelfConsistency(_Fixed):
    """``n`` no-replay samples per task at the medium tier, plurality vote, ``n`` × the tokens.

    Not an action of ``Discrete(12)``: ``predict`` returns (none, medium) — what one sample costs in the
    environment — and :meth:`score_stream` gives the vote's correctness and tokens from the stream's fixed samples
    (privileged: it takes the environment's stream explicitly). ``run_policy`` uses :meth:`score_stream`.
    """

    mode = "none"

    def __init__(self, *, n=5):
        super().__init__(budget="medium")
        self.n = n

    def score_stream(self, env):
        """``(correct (T,) bool, tokens (T,) int)`` of the vote on ``env``'s current stream."""
        _check_k("n", self.n, tuple(range(1, SC_MAX + 1)))
        return env.unwrapped.stream.self_consistency(int(self.n))


class HindsightOracle:
    """Privileged: takes the environment explicitly and reads its counterfactual table. For the task about to be
    played it picks the cheapest action that is correct (the cheapest action if none is): an upper bound on
    accuracy at the least cost that reaches it. Single observations only (one environment)."""

    def __init__(self, env):
        self.env = env

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        """The cheapest correct action for the task about to be played: one action for a single observation
        ``(d,)``, a ``(1,)`` array for a batch of one ``(1, d)`` (the oracle follows one environment)."""
        shape = np.shape(observation)
        if len(shape) not in (1, 2) or (len(shape) == 2 and shape[0] != 1):
            raise ValueError(f"HindsightOracle follows one environment: pass one observation (d,) or a batch of one "
                             f"(1, d), got shape {shape}")
        env = self.env.unwrapped
        if getattr(env, "stream", None) is None:
            raise RuntimeError("the oracle's environment has not been reset")
        correct, tokens = env.outcome_table()
        t = env.task_index
        if t >= correct.shape[0]:
            raise RuntimeError("the stream has ended")
        ok = correct[t]
        cand = np.flatnonzero(ok) if ok.any() else np.arange(ok.size)
        a = np.int64(cand[np.argmin(tokens[t, cand])])
        return (a if len(shape) == 1 else np.array([a])), state


def reference_baselines() -> dict:
    """The baselines of the results table, by name."""
    out = {"no-replay": NoReplay()}
    for k in RECENT_KS:
        out[f"fixed-k{k}"] = FixedRecentReplay(k=k)
    out["compressed-k4"] = CompressedReplay(k=4)
    out["retrieved-k1"] = RetrievedTopK(k=1)
    out["retrieved-k4"] = RetrievedTopK(k=4)
    out["gsc-n5"] = GroupSelfConsistency(n=5)
    return out


__all__ = ["CompressedReplay", "FixedRecentReplay", "GroupSelfConsistency", "HindsightOracle", "NoReplay",
           "RetrievedTopK", "reference_baselines"]

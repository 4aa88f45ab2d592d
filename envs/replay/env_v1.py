"""``membudget/ReplayStream-v1``: ReplayStream-v0's interface on the v1 world (LIMBO's costly baselines)."""

from __future__ import annotations

from ..validation import check_known
from .env import FEATURE_NAMES, ReplayStreamEnv
from .world import FAMILIES
from .world_v1 import generate_stream_v1

RETRIEVE_K = {"db": 4, "os": 1}
"""``retrieve_k`` by family when not given: LIMBO's DB retrieval injects k ∈ {4, 8, 16} trajectories (its
retrieval-gated design), its OS policies retrieve k = 1."""


class ReplayStreamV1Env(ReplayStreamEnv):
    """
    ## Description

    ReplayStream-v0's lifelong task stream (LIMBO) on the v1 world (:mod:`membudget.envs.replay.world_v1`): the
    same tasks, bank, tokens and outcome formula, with what makes LIMBO's costly baselines strong and costly.
    Every replayed trajectory demonstrates the family's conventions (a many-shot help that grows with the number
    of items, so a k = 16-scale replay budget reaches the top accuracy at 5–6× the no-replay cost); the
    relevance-based help is the match of the best replayed item to the task, so retrieval pays when the bank
    holds a trajectory that overlaps the task's skills and schema; and the backbone profiles are fitted on
    development streams to LIMBO's reported figures (``strong`` ≈ GPT-4o mini, ``mid`` ≈ Qwen2.5-7B, ``weak`` ≈
    Llama-3.1-8B). Every task's outcome under every action is drawn at reset from the seed
    (``env.unwrapped.stream``), so the stream is identical for every policy and the hindsight oracle exists.

    ## Action Space

    ``Discrete(12)``: action ``a = 3 · mode + budget`` with memory mode ``none``, ``full`` (the ``recent_k`` = 16
    most recent bank entries verbatim, about 5–6× the no-replay cost), ``compressed`` (the same entries compressed) or ``retrieved`` (the
    ``retrieve_k`` entries the retriever ranks highest) and generation budget ``low`` (≤ 512 tokens), ``medium``
    (768) or ``high`` (1024), as in v0.

    ## Observation Space

    ``Box(0, 1, (12,), float32)``, v0's pre-call features (names in ``FEATURE_NAMES``): prompt shape, retrieval
    state (bank fill, best retriever score, mean retriever score of the recent entries, schema share), runtime
    state (mean normalised cost and accuracy over the last 10 tasks), the previous task's success and error flags,
    and progress through the stream.

    ## Rewards

    ``correct − w · cost`` with ``cost`` = the task's tokens / the running maximum of tokens over the tasks so far
    (this one included), in [0, 1]; ``w`` = ``cost_weight`` (0.5).

    ## Starting State

    ``reset(seed=s)`` draws v1 stream ``s`` (tasks, bank, the outcome and tokens of every task under every action).

    ## Episode End

    Terminates after the last task; never truncates; the same ``info`` keys as v0: ``task``, ``replay_mode``,
    ``generation_budget`` (-1 at reset), ``correct``, ``error``, ``tokens``, ``prompt_tokens``, ``replay_tokens``,
    ``generation_tokens``, ``cost``, ``running_max_tokens``; at the end ``info["episode_metrics"]`` adds
    ``accuracy``, ``total_tokens``, ``n_tasks`` and ``return``.

    ## Arguments

    - ``family``: ``"db"`` (default) or ``"os"``.
    - ``profile``: ``"strong"`` (GPT-4o mini: on db no replay ≈ 78% and replay adds 2-3 points at a k = 16-scale
      cost), ``"mid"`` (default; Qwen2.5-7B: on db the same shape at ≈ 70%, on os replay worth ≈ 10 points and the
      higher generation tiers useful) or ``"weak"`` (Llama-3.1-8B: on db no replay 20.8%, retrieved k = 1 ≈ 66%,
      fixed k = 16 ≈ 70%).
    - ``n_tasks``: stream length (500), in [1, 100,000]. A reset's time grows with its square: it draws the
      retriever's noise of every (task, bank item) pair, the draws that fix the stream (0.04 s at 500 tasks,
      6 s at 20,000, 20 s at 40,000, about 2 min at 100,000; memory stays linear).
    - ``recent_k``: entries replayed by ``full`` / ``compressed`` (16, LIMBO's k = 16-scale replay budget; v0: 4;
      the fixed-replay baselines set their own 1, 4, 8, 16).
    - ``retrieve_k``: entries replayed by ``retrieved`` (None: 4 on ``db``, LIMBO's retrieval-gated design with
      k ∈ {4, 8, 16}; 1 on ``os``, the retrieved k = 1 of its OS policies; v0: 1).
    - ``cost_weight``: ``w`` (0.5), in [0, ``MAX_REWARD_WEIGHT``] (1e6).
    - ``render_mode``: ``"ansi"``, ``"human"``, ``"rgb_array"`` or None, as in v0.

    ## Version History

    - v1: ``full`` / ``compressed`` replay 16 entries by default (v0: 4), ``retrieved`` 4 on db (v0: 1), many-shot replay help (k = 16-scale budgets are what the strongest replay needs), best-match content
      help for retrieval, backbone profiles fitted to LIMBO's figures on development streams.
    - v0: initial version (``membudget/ReplayStream-v0``, kept unchanged).
    """

    _name = "ReplayStream-v1"
    _generate = staticmethod(generate_stream_v1)

    def __init__(self, family="db", profile="mid", n_tasks=500, recent_k=16, retrieve_k=None, cost_weight=0.5,
                 render_mode=None):
        if retrieve_k is None:
            check_known("family", family, FAMILIES)
            retrieve_k = RETRIEVE_K.get(family, 1)
        super().__init__(family=family, profile=profile, n_tasks=n_tasks, recent_k=recent_k, retrieve_k=retrieve_k,
                         cost_weight=cost_weight, render_mode=render_mode)


__all__ = ["FEATURE_NAMES", "RETRIEVE_K", "ReplayStreamV1Env"]

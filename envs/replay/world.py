"""The task stream of ``membudget/ReplayStream-v0``: families, backbone profiles and the counterfactual table.

A stream is a pure function of (family, profile, stream length, ``recent_k``, ``retrieve_k``, seed). Everything
that depends on a policy's choices (running cost maximum, recent accuracy, the previous task's outcome) is kept
out of it, so every policy faces the same tasks, the same memory bank and the same outcome of every task under
every action (:class:`Stream`).

Outcome model (per task ``t`` and action ``a`` = (memory mode, generation budget)):

    logit p[t, a] = base(profile, family) - difficulty_t + tier_term(t, budget) + replay_gain(t, mode)

- the **memory bank** holds earlier tasks whose *reference session* succeeded (a Bernoulli of the task's
  success probability under the profile's reference accuracy, independent of the policy) — the stand-in for
  "successful sessions enter the bank" that keeps the counterfactual fixed; retrieval sees the 64 most recent;
- **relevance** of a replayed task ``i`` to task ``t`` = 0.6 · Jaccard(skills) + 0.4 · [same schema / environment];
- **help with diminishing returns** (:func:`_coverage`): content help = 0.6 · mean over the task's skills of
  (1 − (1 − COVER)^(replayed items showing the skill)) + 0.4 · (1 − (1 − COVER)^(items on the task's schema)); the
  first demonstration of a skill carries most of the benefit, each further one a geometrically smaller share, and
  redundant items add nothing (LIMBO §I: fixed replay buffers give "rapidly growing inference costs for
  diminishing performance gains"); format help = 1 − (1 − FORMAT_PER_ITEM)^(items): any trajectory of the family
  demonstrates the action format, which saturates within one or two items and matters for weak backbones;
- **replay gain** = G · content + F · format − H · mean irrelevance (1 − r) of the replayed items − L · log2(1 +
  replay tokens / 1024): an irrelevant trajectory only adds prompt overhead and can hurt (LIMBO §III-B), and every
  replayed token lengthens the context; full recent-k replays the ``recent_k`` latest bank entries (trimmed traces);
  compressed replays the same entries at ``COMPRESSED_TOKENS`` of their tokens and keeps ``COMPRESSED_GAIN`` of the
  content help and of the harm but only ``COMPRESSED_FORMAT`` of the format help, minus ``COMPRESSION_DAMAGE`` for
  the action syntax token-level compression breaks (Qwen OS, k = 1: 51.5% trimmed traces vs 49.4% token-level
  compression); retrieved replays the ``retrieve_k`` bank entries the retriever ranks highest (noisy relevance plus a
  small recency bonus);
- **generation budget**: the task needs ``need_t`` generation tokens; tier ``low``/``medium``/``high`` caps them
  at 512/768/1024 and lets the model spend ``TIER_SPEND`` × ``need_t``; a truncated answer loses
  ``TRUNCATION`` · (cut fraction) in logit; larger tiers add a profile-dependent reasoning bonus;
- **correctness** ``correct[t, a] = u[t, a] < p[t, a]`` with ``u`` from a Gaussian copula (task-level factor with
  correlation ``COPULA_RHO``), so outcomes are paired across actions; a failure is an *error* (format /
  execution error rather than a wrong answer) with a probability that grows with the irrelevance of what was
  replayed (and with compression);
- **self-consistency** samples (no replay, medium tier) share the task's latent with correlation ``SC_RHO`` (the
  same prompt fails for the same reason) and a wrong sample gives the task's dominant wrong answer with
  probability ``SC_SAME_WRONG``, so the majority vote is limited by correlated errors;
- **tokens** = instruction + schema / environment context + replayed tokens + generated tokens.

Calibration (development seeds 0-9, never the report's 42-44) follows the shapes LIMBO reports: ``strong`` —
no replay already strong, the best replay adds 2-3 points at a k = 16-scale (5-6×) cost; ``weak`` — no replay
about 21%, retrieved replay about 66%, fixed k = 16 a few points above it at more than twice the cost; ``mid``
in between (replay worth about ten points, higher generation tiers useful on ``os``).
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit
from scipy.stats import norm

from ..validation import check_int, check_known

FAMILIES = ("db", "os")
PROFILES = ("strong", "mid", "weak")
MODES = ("none", "full", "compressed", "retrieved")
BUDGETS = ("low", "medium", "high")
BUDGET_CAPS = np.array([512, 768, 1024])
TIER_SPEND = np.array([1.0, 1.25, 1.5])
ACTIONS = tuple((m, b) for m in MODES for b in BUDGETS)
N_ACTIONS = len(ACTIONS)
BANK_WINDOW = 64
RECENT_KS = (1, 4, 8, 16)
COMPRESSED_TOKENS = 0.3
COMPRESSED_GAIN = 0.5
COMPRESSION_DAMAGE = 0.1
TRUNCATION = 2.5
COPULA_RHO = 0.7
COVER = 0.9
FORMAT_PER_ITEM = 0.9
COMPRESSED_FORMAT = 0.25
CONTEXT_SCALE = 1024.0
SC_MAX = 15
SC_WRONG_ANSWERS = 3
SC_RHO = 0.85
SC_SAME_WRONG = 0.7
MAX_INSTRUCTION, MAX_CONTEXT = 1024, 2048

# per family: skills, schemas (DB tables / OS environments), log-normal (median, sigma) of instruction, context,
# needed generation and (trimmed) trajectory tokens, probability that a task repeats the previous schema
FAMILY_PARAMS = {
    "db": dict(n_skills=8, n_schemas=12, instruction=(110, 0.35), context=(420, 0.30), need=(230, 0.45),
               trajectory=(200, 0.35), repeat_schema=0.3),
    "os": dict(n_skills=10, n_schemas=8, instruction=(90, 0.40), context=(260, 0.35), need=(330, 0.55),
               trajectory=(240, 0.40), repeat_schema=0.25),
}

# per (profile, family): target no-replay accuracy at the medium tier (base), reference accuracy feeding the bank,
# content help G (relevance-weighted, diminishing per item), format help F (any trajectory demonstrates the action
# format; saturates within a few items), irrelevance harm H, long-context penalty L, reasoning bonus per tier step
PROFILE_PARAMS = {
    # no replay already strong; replay adds 2-3 points at a 5-6x cost (Qwen2.5-7B / GPT-4o mini on DB)
    ("strong", "db"): dict(base=0.77, ref=0.80, G=0.30, F=0.00, H=0.05, L=0.03, tier=0.05),
    ("strong", "os"): dict(base=0.60, ref=0.65, G=0.40, F=0.00, H=0.10, L=0.04, tier=0.10),
    # in between (Qwen2.5-7B on OS: replay worth ~10 points, higher tiers used)
    ("mid", "db"): dict(base=0.52, ref=0.62, G=0.60, F=0.20, H=0.30, L=0.06, tier=0.10),
    ("mid", "os"): dict(base=0.45, ref=0.55, G=0.90, F=0.20, H=0.30, L=0.06, tier=0.15),
    # no replay weak (~21%); retrieved replay lifts it to ~66% (Llama-3.1-8B on DB)
    ("weak", "db"): dict(base=0.20, ref=0.55, G=2.40, F=0.80, H=0.50, L=0.10, tier=0.05),
    ("weak", "os"): dict(base=0.21, ref=0.45, G=1.60, F=1.20, H=0.50, L=0.10, tier=0.10),
}


def _coverage(task_skills: np.ndarray, item_skills: np.ndarray, same_schema: np.ndarray) -> float:
    """Content help of a set of replayed items: ``0.6 · mean over the task's skills of (1 − (1 − COVER)^(items
    showing that skill)) + 0.4 · (1 − (1 − COVER)^(items on the task's schema))``. The first demonstration of a
    skill or schema carries most of the benefit and each further one a geometrically smaller share (diminishing
    returns per item); items sharing nothing with the task add nothing."""
    cnt = item_skills[:, task_skills].sum(axis=0)
    miss = (1.0 - COVER) ** cnt
    return float(0.6 * (1.0 - miss.mean()) + 0.4 * (1.0 - (1.0 - COVER) ** same_schema.sum()))


def action_index(mode: str, budget: str) -> int:
    """Index in ``Discrete(12)`` of (memory mode, generation budget)."""
    check_known("memory mode", mode, MODES)
    check_known("generation budget", budget, BUDGETS)
    return MODES.index(mode) * len(BUDGETS) + BUDGETS.index(budget)


@dataclass
class Stream:
    """One task stream with its full counterfactual table (``T`` tasks, ``A = 12`` actions)."""

    family: str
    profile: str
    recent_k: int
    retrieve_k: int
    instruction_tokens: np.ndarray  # (T,) int
    context_tokens: np.ndarray      # (T,) int
    n_skills: np.ndarray            # (T,) int
    schema: np.ndarray              # (T,) int
    difficulty: np.ndarray          # (T,)
    need: np.ndarray                # (T,) int, generation tokens the task needs
    in_bank: np.ndarray             # (T,) bool, reference session succeeded -> enters the bank after the task
    bank_size: np.ndarray           # (T,) int, bank entries visible to retrieval before task t (<= 64)
    retrieval_top: np.ndarray       # (T,) retriever score of the best bank entry (0 if the bank is empty)
    retrieval_recent: np.ndarray    # (T,) mean retriever score of the recent_k latest entries (0 if empty)
    schema_share: np.ndarray        # (T,) share of the visible bank with the task's schema
    replay_tokens: np.ndarray       # (T, 4) int, replayed tokens per memory mode
    prob: np.ndarray                # (T, A) success probability
    correct: np.ndarray             # (T, A) bool
    error: np.ndarray               # (T, A) bool, failure by format / execution error
    tokens: np.ndarray              # (T, A) int, total tokens (prompt + generation)
    generation_tokens: np.ndarray   # (T, A) int
    sc_correct: np.ndarray          # (T, SC_MAX) bool, no-replay medium-tier samples (self-consistency)
    sc_wrong: np.ndarray            # (T, SC_MAX) int, which of SC_WRONG_ANSWERS wrong answers a wrong sample gives
    sc_tie: np.ndarray              # (T,) uniform breaking a vote tie

    @property
    def n_tasks(self) -> int:
        return int(self.difficulty.shape[0])

    def self_consistency(self, n: int):
        """Plurality vote over ``n`` no-replay medium-tier samples per task: a wrong sample gives one of
        ``SC_WRONG_ANSWERS`` wrong answers; the vote is correct when the correct answer has more votes than every
        wrong one (a tie is broken by a fixed uniform). Cost: ``n`` × the single sample's tokens.
        Returns ``(correct (T,) bool, tokens (T,) int)``."""
        check_int("n", n, 1, SC_MAX)
        ok = self.sc_correct[:, :n]
        votes = ok.sum(axis=1)
        wrong = np.stack([((self.sc_wrong[:, :n] == w) & ~ok).sum(axis=1) for w in range(SC_WRONG_ANSWERS)], 1)
        top_wrong = wrong.max(axis=1)
        n_top = (wrong == top_wrong[:, None]).sum(axis=1)
        win = (votes > top_wrong) | ((votes == top_wrong) & (votes > 0) & (self.sc_tie * (n_top + 1) < 1.0))
        a = action_index("none", "medium")
        return win, n * self.tokens[:, a]

    def oracle_actions(self) -> np.ndarray:
        """Hindsight oracle: per task the cheapest action that is correct (the cheapest action if none is)."""
        big = np.iinfo(np.int64).max // 4
        masked = np.where(self.correct, self.tokens, big)
        best = masked.argmin(axis=1)
        none_ok = ~self.correct.any(axis=1)
        best[none_ok] = self.tokens[none_ok].argmin(axis=1)
        return best


def _lognormal(rng, median_sigma, size, lo, hi):
    median, sigma = median_sigma
    return np.clip(np.round(median * np.exp(sigma * rng.standard_normal(size))), lo, hi).astype(np.int64)


def check_stream_arguments(family, profile, n_tasks, recent_k, retrieve_k):
    check_known("family", family, FAMILIES)
    check_known("profile", profile, PROFILES)
    check_int("n_tasks", n_tasks, 1, 100_000)
    check_int("recent_k", recent_k, 1, BANK_WINDOW)
    check_int("retrieve_k", retrieve_k, 1, BANK_WINDOW)


def generate_stream(seed=None, *, family="db", profile="mid", n_tasks=500, recent_k=4, retrieve_k=1,
                    rng: np.random.Generator | None = None) -> Stream:
    """Draw a stream. ``rng`` (the environment's ``np_random``) takes precedence over ``seed``.

    The draws are ordered so that ``recent_k`` and ``retrieve_k`` change only the replay actions they govern:
    tasks, bank, copula noise and self-consistency samples are identical across them for one seed."""
    seed = check_int("seed", seed, 0, none_ok=True)
    check_stream_arguments(family, profile, n_tasks, recent_k, retrieve_k)
    rng = np.random.default_rng(seed) if rng is None else rng
    pp = PROFILE_PARAMS[(profile, family)]
    d = _draw(rng, FAMILY_PARAMS[family], pp, n_tasks)
    return _stream(d, _replay(d, recent_k, retrieve_k), pp, family, profile, recent_k, retrieve_k)


def _stream(d: _Draws, rp: _Replay, pp: dict, family, profile, recent_k, retrieve_k) -> Stream:
    """The :class:`Stream` of the draws ``d`` with the replay state ``rp`` under the profile ``pp``."""
    prob, correct, error, tokens, gen, sc_correct = _outcomes(d, rp, pp)
    return Stream(family=family, profile=profile, recent_k=int(recent_k), retrieve_k=int(retrieve_k),
                  instruction_tokens=d.instruction, context_tokens=d.context, n_skills=d.n_skills, schema=d.schema,
                  difficulty=d.difficulty, need=d.need, in_bank=d.in_bank, bank_size=rp.bank_size,
                  retrieval_top=rp.top, retrieval_recent=rp.recent_score, schema_share=rp.share,
                  replay_tokens=rp.tokens, prob=prob, correct=correct, error=error, tokens=tokens,
                  generation_tokens=gen, sc_correct=sc_correct, sc_wrong=d.sc_wrong, sc_tie=d.sc_tie)


_Draws = namedtuple("_Draws", "skills n_skills schema difficulty instruction context need trajectory in_bank "
                              "retrieval_noise z e err_u sc_e sc_wrong sc_tie")
NOISE_BLOCK = 1 << 22
"""Most retriever-noise draws :func:`_window_noise` holds at once."""


def bank_window(bank_ids: np.ndarray, t: int) -> np.ndarray:
    """The bank items task ``t`` sees: the ``BANK_WINDOW`` latest of the (sorted) ``bank_ids`` before ``t``."""
    hi = int(np.searchsorted(bank_ids, t))
    return bank_ids[max(0, hi - BANK_WINDOW):hi]


def _window_noise(rng, bank_ids: np.ndarray, T: int) -> np.ndarray:
    """``(T, BANK_WINDOW)`` float32: the retriever's noise of each task on the bank items it sees, row ``t`` the
    noise on :func:`bank_window` ``(bank_ids, t)`` in its order (zeros after them). The draws are v0's ``(T, T)``
    table of ``0.15 · N(0, 1)`` per (task, item), whose other entries no task reads; drawn a block of rows at a
    time (the same draws as the whole table at once) and kept only where read, so a stream's memory is linear in
    its length (the whole table, and the relevance of every pair, needed 75 GB at 100,000 tasks)."""
    out = np.zeros((T, BANK_WINDOW), dtype=np.float32)
    rows = max(1, NOISE_BLOCK // T)
    for t0 in range(0, T, rows):
        block = 0.15 * rng.standard_normal((min(rows, T - t0), T)).astype(np.float32)
        for k in range(block.shape[0]):
            pool = bank_window(bank_ids, t0 + k)
            out[t0 + k, :pool.size] = block[k, pool]
    return out


def _draw(rng, fp: dict, pp: dict, T: int) -> _Draws:
    """Every random draw of a stream of ``T`` tasks, in a fixed order: the tasks (skills, schema, difficulty, token
    counts), the reference sessions that fill the bank, the retriever's noise, the copula noise and the
    self-consistency samples."""
    S, A = fp["n_skills"], N_ACTIONS
    skill_pop = rng.dirichlet(np.full(S, 0.8))
    schema_pop = rng.dirichlet(np.full(fp["n_schemas"], 0.8))
    n_sk = rng.integers(1, 4, size=T)
    skills = np.zeros((T, S), dtype=bool)
    for t in range(T):
        skills[t, rng.choice(S, size=n_sk[t], replace=False, p=skill_pop)] = True
    schema = rng.choice(fp["n_schemas"], size=T, p=schema_pop)
    repeat = rng.random(T) < fp["repeat_schema"]
    for t in range(1, T):
        if repeat[t]:
            schema[t] = schema[t - 1]
    difficulty = 0.8 * rng.standard_normal(T)
    instruction = _lognormal(rng, fp["instruction"], T, 16, MAX_INSTRUCTION)
    context = _lognormal(rng, fp["context"], T, 32, MAX_CONTEXT)
    need = _lognormal(rng, fp["need"], T, 32, 4096)
    trajectory = _lognormal(rng, fp["trajectory"], T, 100, 4000)
    in_bank = rng.random(T) < expit(logit(pp["ref"]) - difficulty)
    retr_noise = _window_noise(rng, np.flatnonzero(in_bank), T)
    z = rng.standard_normal(T)
    e = rng.standard_normal((T, A))
    err_u = rng.random((T, A))
    sc_e = rng.standard_normal((T, SC_MAX))
    sc_wrong = np.where(rng.random((T, SC_MAX)) < SC_SAME_WRONG, 0,
                        rng.integers(1, SC_WRONG_ANSWERS, size=(T, SC_MAX)))  # 0: the task's dominant wrong answer
    sc_tie = rng.random(T)
    return _Draws(skills, n_sk, schema, difficulty, instruction, context, need, trajectory, in_bank, retr_noise, z, e,
                  err_u, sc_e, sc_wrong, sc_tie)


_Replay = namedtuple("_Replay", "bank_size top recent_score share best n_items irr tokens")


def _replay(d: _Draws, recent_k: int, retrieve_k: int, coverage=None, noise_scale: float = 1.0) -> _Replay:
    """What each task sees of the bank and what each memory mode replays from it: the bank's size, the retriever's
    best and recent scores, the share of the bank on the task's schema, and per mode (columns of MODES) the content
    help (``coverage``, default :func:`_coverage`), the number of items, their mean irrelevance and their tokens;
    the retriever's noise scaled by ``noise_scale`` (1: v0's)."""
    coverage = coverage or _coverage
    scale = np.float32(noise_scale)  # 1.0 multiplies exactly: v0's streams are unchanged
    T = d.difficulty.shape[0]
    skills, schema = d.skills, d.schema
    bank_size = np.zeros(T, dtype=np.int64)
    top = np.zeros(T)
    recent_score = np.zeros(T)
    share = np.zeros(T)
    best = np.zeros((T, 4))
    n_items = np.zeros((T, 4))
    irr = np.zeros((T, 4))
    rtok = np.zeros((T, 4), dtype=np.int64)
    bank_ids = np.flatnonzero(d.in_bank)
    skills_i32 = skills.astype(np.int32)
    for t in range(T):
        pool = bank_window(bank_ids, t)
        n = pool.size
        bank_size[t] = n
        if n == 0:
            continue
        inter = skills_i32[pool] @ skills_i32[t]
        union = d.n_skills[t] + d.n_skills[pool] - inter
        rel = 0.6 * inter / union + 0.4 * (schema[pool] == schema[t])
        score = np.clip(rel + scale * d.retrieval_noise[t, :n], 0.0, 1.0)
        top[t] = score.max()
        share[t] = np.mean(schema[pool] == schema[t])
        recent = slice(max(0, n - recent_k), n)
        recent_score[t] = score[recent].mean()
        same = schema[pool] == schema[t]
        best[t, 1] = best[t, 2] = coverage(skills[t], skills[pool[recent]], same[recent])
        n_items[t, 1] = n_items[t, 2] = min(n, recent_k)
        irr[t, 1] = irr[t, 2] = 1.0 - rel[recent].mean()
        rtok[t, 1] = d.trajectory[pool[recent]].sum()
        rtok[t, 2] = int(round(COMPRESSED_TOKENS * rtok[t, 1]))
        rank = np.argsort(-(score + 0.05 * np.arange(n) / n), kind="stable")[:retrieve_k]
        best[t, 3] = coverage(skills[t], skills[pool[rank]], same[rank])
        n_items[t, 3] = rank.size
        irr[t, 3] = 1.0 - rel[rank].mean()
        rtok[t, 3] = d.trajectory[pool[rank]].sum()
    return _Replay(bank_size, top, recent_score, share, best, n_items, irr, rtok)


def _outcomes(d: _Draws, rp: _Replay, pp: dict) -> tuple:
    """Per (task, action): the success probability, correctness, error (a failure by format / execution error),
    total and generated tokens; and the correctness of the self-consistency samples."""
    T = d.difficulty.shape[0]
    length = np.log2(1.0 + rp.tokens / CONTEXT_SCALE)
    fmt = 1.0 - (1.0 - FORMAT_PER_ITEM) ** rp.n_items
    gain = pp["G"] * rp.best + pp["F"] * fmt - pp["H"] * rp.irr - pp["L"] * length
    gain[:, 0] = 0.0
    gain[:, 2] = COMPRESSED_GAIN * (pp["G"] * rp.best[:, 2] - pp["H"] * rp.irr[:, 2]) \
        + COMPRESSED_FORMAT * pp["F"] * fmt[:, 2] - COMPRESSION_DAMAGE - pp["L"] * length[:, 2]
    gain[rp.bank_size == 0, 1:] = 0.0
    need, difficulty = d.need, d.difficulty
    spend = np.minimum(need[:, None] * TIER_SPEND[None, :], BUDGET_CAPS[None, :])        # (T, 3)
    cut = np.clip(1.0 - BUDGET_CAPS[None, :] / (need[:, None] * TIER_SPEND[None, :]), 0.0, 1.0)
    tier_term = pp["tier"] * np.arange(3)[None, :] * (1.0 + np.maximum(difficulty, 0.0))[:, None] \
        - TRUNCATION * cut
    lg = logit(pp["base"]) - difficulty[:, None, None] + gain[:, :, None] + tier_term[:, None, :]
    prob = expit(lg).reshape(T, N_ACTIONS)
    u = norm.cdf(COPULA_RHO * d.z[:, None] + np.sqrt(1.0 - COPULA_RHO ** 2) * d.e)
    correct = u < prob
    irr_a = np.repeat(np.where(rp.bank_size[:, None] > 0, rp.irr, 0.0), 3, axis=1)
    irr_a[:, :3] = 0.0
    irr_a[rp.bank_size > 0, 6:9] += 0.2  # compression damages action syntax: more format errors
    error = ~correct & (d.err_u < 0.3 + 0.4 * irr_a)
    gen = np.tile(np.round(spend).astype(np.int64), (1, 4))
    tokens = (d.instruction + d.context)[:, None] + np.repeat(rp.tokens, 3, axis=1) + gen
    a_sc = action_index("none", "medium")
    latent = COPULA_RHO * d.z + np.sqrt(1.0 - COPULA_RHO ** 2) * d.e[:, a_sc]   # the single (none, medium) call
    sc_u = norm.cdf(np.sqrt(SC_RHO) * latent[:, None] + np.sqrt(1.0 - SC_RHO) * d.sc_e)
    sc_correct = sc_u < prob[:, a_sc][:, None]
    return prob, correct, error, tokens, gen, sc_correct

"""The query world of ``TierRouting-v0`` (BudgetMem, §5-6): queries, tier profiles, outcome tables.

One query passes the fixed pipeline filter → entity, temporal, topic → summary; every module runs at a LOW, MID
or HIGH tier. Everything about a query — its hidden per-module needs, its token counts and the judge noise of
each of the 3^5 tier combinations — is drawn at reset from the seed, so the answer quality ``r_task`` and the
cost of *every* combination are fixed (the counterfactual is defined) before the router acts.

Outcome model (all constants below; profiles are stylised, chosen to give the shapes BudgetMem reports, not fitted —
including its premise that module-level routing pays, §6.4: a policy that knows each query's needs and hardness,
or only its question type, beats all-MID at all-MID's mean cost; see docs/envs/tier_routing.md):

- **Needs.** A query has a question type (population mix in ``POPULATIONS``); the type gives a mean need per
  module (``TYPE_NEEDS``: sparse, e.g. a temporal question needs the temporal module and hardly the entity one),
  perturbed per query by ``N(0, 0.15)`` and clipped to [0.02, 0.98]. The needs are hidden; the router sees noisy
  type cues and, once the filter has run, noisy cues of the extraction needs in the filtered context (less noisy
  after a better filter).
- **Hardness.** Each module of a query also has a hidden hardness ``h_k`` (``TYPE_HARDNESS`` by question type +
  ``N(0, 0.15)``, clipped to [0.05, 1.5]): explicit patterns (a date, a named entity; low ``h``) that rules or a
  direct answer already handle, or implicit relations, cross-passage ordering and multi-hop integration (high ``h``)
  that need the top tier (BudgetMem §5.3, §6.4). The query's capability of module ``k`` at tier ``a`` is
  ``c[k, a] ** (2 h_k)``: the profile's ``c`` at ``h = 0.5``, every tier close to 1 on an easy module, the tier
  gaps wider on a hard one.
- **Quality.** With that capability ``c[k, a]`` and need ``d_k``:
  ``m_fil = 1 − d_fil (1 − c_fil)``; for entity / temporal / topic ``m_k = 1 − d_k (1 − c_k (0.6 + 0.4 m_fil))``
  (a poor filter hurts extraction); ``m_sum = 1 − d_sum (1 − c_sum)``;
  ``p = A · m_fil^0.5 · m_ent · m_tmp · m_top · m_sum`` with answerability ``A`` (can the top-5 chunks answer
  it at all; Beta, mean by population). ``r_task = clip(p + ε, 0, 1)`` with judge noise ``ε ~ N(0, noise)``
  drawn once per (query, combination) at reset; ``p`` itself is ``Outcomes.expected_r_task`` (privileged).
- **Cost** (dollars): each module reads its input plus a 150-token prompt and generates tokens;
  ``cost = in_mult · (input · price_in + generated · price_out) / 1e6`` at its tier's prices. The filter reads the
  top-5 chunks (chunk length by population) and keeps a tier-dependent share of them (a better filter keeps less,
  so downstream modules read less); entity / temporal / topic read the kept context; the summary reads half of
  it plus the three extraction results. Generated tokens are a per-module base × the tier's ``gen_mult``
  (reasoning tokens of chain-of-thought / reflection) × a per-query jitter. Every module's cost is
  nondecreasing in its own tier given the filter's tier.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..validation import check_int, check_known, check_number

MODULES = ("filter", "entity", "temporal", "topic", "summary")
N_MODULES = len(MODULES)
TIERS = ("LOW", "MID", "HIGH")
N_TIERS = len(TIERS)
COMBOS = np.array(list(itertools.product(range(N_TIERS), repeat=N_MODULES)), dtype=np.int64)  # (243, 5)
N_COMBOS = len(COMBOS)
STRATEGIES = ("implementation", "reasoning", "capacity")
BACKBONES = ("llama", "qwen")

QUESTION_TYPES = ("single-hop", "multi-hop", "temporal", "open-domain", "knowledge-update", "comparison")
N_TYPES = len(QUESTION_TYPES)
#                       filter entity temporal topic summary
TYPE_NEEDS = np.array([[0.50, 0.80, 0.05, 0.10, 0.20],    # single-hop
                       [0.60, 0.80, 0.10, 0.30, 0.90],    # multi-hop
                       [0.50, 0.20, 0.95, 0.10, 0.50],    # temporal
                       [0.30, 0.20, 0.05, 0.90, 0.40],    # open-domain
                       [0.60, 0.40, 0.80, 0.20, 0.70],    # knowledge-update
                       [0.50, 0.90, 0.05, 0.20, 0.60]])   # comparison
NEED_SD = 0.15
#                          filter entity temporal topic summary
TYPE_HARDNESS = np.array([[0.10, 0.15, 0.10, 0.10, 0.15],    # single-hop: explicit patterns, rules suffice
                          [0.50, 0.80, 0.30, 0.50, 1.00],    # multi-hop: implicit relations, integration
                          [0.30, 0.20, 0.90, 0.20, 0.60],    # temporal: implicit ordering across passages
                          [0.20, 0.20, 0.10, 0.50, 0.40],    # open-domain
                          [0.50, 0.40, 0.90, 0.30, 0.80],    # knowledge-update: conflicting versions
                          [0.40, 0.70, 0.10, 0.30, 0.60]])   # comparison
HARDNESS_SD = 0.15
HARDNESS_RANGE = (0.05, 1.5)


@dataclass(frozen=True)
class Population:
    """A query population named after one of BudgetMem's datasets."""

    name: str
    type_mix: tuple            # probabilities over QUESTION_TYPES
    context_tokens: float      # mean history length (BudgetMem §6.1)
    chunk_tokens: tuple        # (low, high) of the uniform chunk length; 5 chunks are the filter's input
    answerability: float       # mean of the Beta(10 μ, 10 (1 − μ)) answerability


POPULATIONS = {
    "locomo": Population("locomo", (0.35, 0.20, 0.30, 0.15, 0.0, 0.0), 18_000, (250, 450), 0.88),
    "longmemeval": Population("longmemeval", (0.25, 0.25, 0.25, 0.0, 0.25, 0.0), 122_000, (700, 1300), 0.78),
    "hotpotqa": Population("hotpotqa", (0.10, 0.70, 0.0, 0.0, 0.0, 0.20), 26_000, (350, 650), 0.82),
}
TOP_K = 5
PROMPT_TOKENS = 150
GEN_BASE = np.array([60.0, 150.0, 100.0, 80.0, 200.0])    # generated (result) tokens per module at gen_mult 1
JITTER = (0.85, 1.15)                                     # per-query multiplicative jitter of token counts
MAX_CONTEXT = 200_000
MAX_CHUNK = 1500
MAX_QUERY_TOKENS = 64
MAX_INPUT = TOP_K * MAX_CHUNK + PROMPT_TOKENS             # the largest input any module reads


@dataclass(frozen=True)
class TierProfile:
    """Prices and capabilities of one tiering strategy with one backbone family (index = tier)."""

    price_in: tuple            # dollars per 1M input tokens
    price_out: tuple           # dollars per 1M generated tokens
    gen_mult: tuple            # generated-token multiplier (reasoning tokens)
    in_mult: tuple             # input re-reads (reflection)
    keep: tuple                # share of the top-5 chunks the filter keeps at this tier
    capability: tuple          # (5 modules) × (3 tiers)

    def arrays(self):
        return (np.asarray(self.price_in, float), np.asarray(self.price_out, float), np.asarray(self.gen_mult, float),
                np.asarray(self.in_mult, float), np.asarray(self.keep, float), np.asarray(self.capability, float))


# implementation: rules (≈ free) → BERT-class model → LLM; the widest cost range.
# reasoning: the backbone LLM at every tier, direct → CoT → reflection; a narrow, expensive cost range.
# capacity: small → medium → large model of the backbone family; the best quality at high budget.
PROFILES = {
    ("implementation", "llama"): TierProfile(
        (0.002, 0.10, 0.88), (0.002, 0.10, 0.88), (1, 1, 1), (1, 1, 1), (0.70, 0.50, 0.35),
        ((0.45, 0.65, 0.80), (0.50, 0.68, 0.82), (0.55, 0.66, 0.80), (0.25, 0.60, 0.80), (0.20, 0.45, 0.80))),
    ("reasoning", "llama"): TierProfile(
        (0.88, 0.88, 0.88), (0.88, 0.88, 0.88), (1, 3, 5), (1, 1, 1.8), (0.50, 0.44, 0.40),
        ((0.74, 0.80, 0.84), (0.76, 0.82, 0.85), (0.70, 0.80, 0.88), (0.76, 0.80, 0.83), (0.72, 0.80, 0.88))),
    ("capacity", "llama"): TierProfile(
        (0.06, 0.18, 0.88), (0.06, 0.18, 0.88), (1, 1, 1), (1, 1, 1), (0.56, 0.46, 0.38),
        ((0.45, 0.64, 0.86), (0.48, 0.68, 0.88), (0.42, 0.64, 0.87), (0.50, 0.68, 0.86), (0.40, 0.62, 0.90))),
    ("implementation", "qwen"): TierProfile(
        (0.002, 0.05, 0.15), (0.002, 0.10, 1.50), (1, 1, 1), (1, 1, 1), (0.70, 0.50, 0.35),
        ((0.45, 0.65, 0.82), (0.50, 0.68, 0.79), (0.55, 0.66, 0.84), (0.25, 0.60, 0.80), (0.20, 0.45, 0.82))),
    ("reasoning", "qwen"): TierProfile(
        (0.15, 0.15, 0.15), (1.50, 1.50, 1.50), (1, 3, 5), (1, 1, 1.8), (0.50, 0.44, 0.40),
        ((0.76, 0.82, 0.86), (0.73, 0.80, 0.83), (0.74, 0.84, 0.90), (0.76, 0.81, 0.84), (0.74, 0.82, 0.89))),
    ("capacity", "qwen"): TierProfile(
        (0.10, 0.30, 0.50), (0.10, 0.60, 1.50), (1, 1, 1), (1, 1, 1), (0.56, 0.46, 0.38),
        ((0.50, 0.66, 0.86), (0.46, 0.66, 0.85), (0.48, 0.70, 0.90), (0.52, 0.68, 0.86), (0.45, 0.66, 0.90))),
}


def check_world_arguments(strategy, population, backbone, noise):
    check_known("strategy", strategy, STRATEGIES)
    check_known("population", population, POPULATIONS, tuple(POPULATIONS))
    check_known("backbone", backbone, BACKBONES)
    check_number("noise", noise, 0, 0.5)


@dataclass
class Query:
    """The latent draw of one query (independent of strategy and backbone, so strategies are paired)."""

    population: str
    qtype: int
    needs: np.ndarray              # (5,) hidden per-module needs in [0.02, 0.98]
    answerability: float           # A in (0, 1)
    context_tokens: int
    chunk_tokens: int
    query_tokens: int
    retrieval_score: float         # noisy view of A
    type_cues: np.ndarray          # (6,) noisy view of the type
    keep_jitter: float
    gen_jitter: np.ndarray         # (5,)
    cue_noise: np.ndarray          # (3 filter tiers, 3 extraction modules) standard normal
    quality_noise: np.ndarray      # (3 filter tiers + 81 (filter, entity, temporal, topic) prefixes) standard normal
    judge_noise: np.ndarray        # (243,) standard normal, one per tier combination
    hardness: np.ndarray           # (5,) hidden per-module hardness in HARDNESS_RANGE (0.5: the profile's capability)


def generate_query(rng: np.random.Generator, population: str = "locomo") -> Query:
    """Draw one query of ``population`` from ``rng`` (the environment passes ``self.np_random``)."""
    pop = POPULATIONS[population]
    qtype = int(rng.choice(N_TYPES, p=np.asarray(pop.type_mix)))
    needs = np.clip(TYPE_NEEDS[qtype] + rng.normal(0.0, NEED_SD, N_MODULES), 0.02, 0.98)
    mu, kappa = pop.answerability, 10.0
    a = float(rng.beta(mu * kappa, (1 - mu) * kappa))
    ctx = int(np.clip(rng.lognormal(np.log(pop.context_tokens), 0.25), 1000, MAX_CONTEXT))
    chunk = int(rng.integers(pop.chunk_tokens[0], pop.chunk_tokens[1] + 1))
    qtok = int(rng.integers(8, MAX_QUERY_TOKENS + 1))
    ret = float(np.clip(a + rng.normal(0.0, 0.1), 0.0, 1.0))
    onehot = np.eye(N_TYPES)[qtype]
    cues = np.clip(onehot * rng.uniform(0.4, 1.0) + rng.normal(0.0, 0.15, N_TYPES), 0.0, 1.0)
    return Query(population, qtype, needs, a, ctx, chunk, qtok, ret, cues,
                 float(rng.uniform(*JITTER)), rng.uniform(*JITTER, N_MODULES),
                 rng.standard_normal((3, 3)), rng.standard_normal(3 + 81), rng.standard_normal(N_COMBOS),
                 np.clip(TYPE_HARDNESS[qtype] + rng.normal(0.0, HARDNESS_SD, N_MODULES), *HARDNESS_RANGE))


def validate_query(q: Query, population: str) -> None:
    """Raise ``ValueError`` naming the first field of ``q`` outside the range :func:`generate_query` draws from
    (a query given through ``reset(options={"query": q})`` must keep the observation inside its space)."""
    if not isinstance(q, Query) or q.population != population:
        raise ValueError(f"options['query'] must be a Query of population {population!r}")
    pop = POPULATIONS[population]
    check_int("query.qtype", q.qtype, 0, N_TYPES - 1)
    check_int("query.context_tokens", q.context_tokens, 1000, MAX_CONTEXT)
    check_int("query.chunk_tokens", q.chunk_tokens, pop.chunk_tokens[0], pop.chunk_tokens[1])
    check_int("query.query_tokens", q.query_tokens, 8, MAX_QUERY_TOKENS)
    check_number("query.answerability", q.answerability, 0, 1)
    check_number("query.retrieval_score", q.retrieval_score, 0, 1)
    check_number("query.keep_jitter", q.keep_jitter, *JITTER)
    for name, shape, lo, hi in (("needs", (N_MODULES,), 0.02, 0.98), ("type_cues", (N_TYPES,), 0.0, 1.0),
                                ("gen_jitter", (N_MODULES,), *JITTER), ("hardness", (N_MODULES,), *HARDNESS_RANGE),
                                ("cue_noise", (3, 3), -np.inf, np.inf), ("quality_noise", (3 + 81,), -np.inf, np.inf),
                                ("judge_noise", (N_COMBOS,), -np.inf, np.inf)):
        a = getattr(q, name)
        if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype.kind != "f":
            raise ValueError(f"query.{name}: expected a float array of shape {shape}, got "
                             f"{getattr(a, 'shape', type(a).__name__)}")
        if not np.all(np.isfinite(a)) or np.any((a < lo) | (a > hi)):
            raise ValueError(f"query.{name}: values must be finite{'' if np.isinf(hi) else f' and lie in [{lo}, {hi}]'}")


def module_costs(chunk_tokens, keep_jitter, gen_jitter, profile: TierProfile) -> np.ndarray:
    """``mc[f, k, a]``: dollars of module ``k`` at tier ``a`` when the filter ran at tier ``f`` (for ``k = 0`` only
    ``a = f`` is meaningful). Nondecreasing in every argument, so bounds give exact bounds."""
    p_in, p_out, g_mult, i_mult, keep, _ = profile.arrays()
    gen = GEN_BASE * np.asarray(gen_jitter, float)                       # result tokens at gen_mult 1
    top = TOP_K * float(chunk_tokens)
    kept = np.minimum(keep * keep_jitter, 1.0) * top                      # (3,) by filter tier
    inputs = np.empty((N_TIERS, N_MODULES))
    inputs[:, 0] = top + PROMPT_TOKENS
    inputs[:, 1:4] = kept[:, None] + PROMPT_TOKENS
    inputs[:, 4] = 0.5 * kept + gen[1:4].sum() + PROMPT_TOKENS
    # (f, k, a)
    return i_mult[None, None, :] * (inputs[:, :, None] * p_in[None, None, :]
                                    + gen[None, :, None] * g_mult[None, None, :] * p_out[None, None, :]) / 1e6


def combo_costs(mc: np.ndarray) -> np.ndarray:
    """Total dollars of each of the 243 combinations from ``mc`` (see :func:`module_costs`)."""
    f = COMBOS[:, 0]
    return sum(mc[f, k, COMBOS[:, k]] for k in range(N_MODULES))


@dataclass
class Outcomes:
    """The fixed counterfactual of one query under one profile."""

    r_task: np.ndarray             # (243,) in [0, 1]
    cost: np.ndarray               # (243,) dollars
    module_cost: np.ndarray        # (3, 5, 3) see module_costs
    ext_cues: np.ndarray           # (3 filter tiers, 3) cues of the extraction needs in the filtered context
    filter_signal: np.ndarray      # (3,) observed quality of the filtered context
    ext_signal: np.ndarray         # (81,) observed quality of the extraction results, by (f, e, t, p) prefix
    expected_r_task: np.ndarray    # (243,) the answer probability p before judge noise (privileged)


def outcomes(q: Query, strategy: str, backbone: str = "llama", noise: float = 0.04) -> Outcomes:
    profile = PROFILES[(strategy, backbone)]
    cap = profile.arrays()[5] ** (2.0 * q.hardness[:, None])                      # (5, 3) this query's capability
    d = q.needs
    m_fil = 1.0 - d[0] * (1.0 - cap[0])                                           # (3,) by filter tier
    m_ext = 1.0 - d[1:4, None, None] * (1.0 - cap[1:4, None, :] * (0.6 + 0.4 * m_fil)[None, :, None])  # (3, f, a)
    m_sum = 1.0 - d[4] * (1.0 - cap[4])
    f, e, t, p, s = COMBOS.T
    prob = q.answerability * np.sqrt(m_fil[f]) * m_ext[0, f, e] * m_ext[1, f, t] * m_ext[2, f, p] * m_sum[s]
    r_task = np.clip(prob + noise * q.judge_noise, 0.0, 1.0)
    mc = module_costs(q.chunk_tokens, q.keep_jitter, q.gen_jitter, profile)
    cue_sd = np.array([0.25, 0.15, 0.08])[:, None]
    ext_cues = np.clip(d[None, 1:4] + cue_sd * q.cue_noise, 0.0, 1.0)
    filter_signal = np.clip(m_fil + 0.1 * q.quality_noise[:3], 0.0, 1.0)
    pre = COMBOS[::3, :4]                                                         # the 81 (f, e, t, p) prefixes
    ext_mean = (m_ext[0, pre[:, 0], pre[:, 1]] + m_ext[1, pre[:, 0], pre[:, 2]] + m_ext[2, pre[:, 0], pre[:, 3]]) / 3
    ext_signal = np.clip(ext_mean + 0.1 * q.quality_noise[3:], 0.0, 1.0)
    return Outcomes(r_task, combo_costs(mc), mc, ext_cues, filter_signal, ext_signal, prob)


def combo_index(tiers) -> int:
    """Index into the 243 combinations (filter is the most significant base-3 digit)."""
    idx = 0
    for a in tiers:
        idx = idx * N_TIERS + int(a)
    return idx


@lru_cache(maxsize=None)
def floor_cost_bound(strategy: str, population: str, backbone: str = "llama") -> float:
    """The largest all-LOW cost any query of ``population`` can have: the smallest admissible hard budget."""
    profile = PROFILES[(strategy, backbone)]
    mc = module_costs(POPULATIONS[population].chunk_tokens[1], JITTER[1], np.full(N_MODULES, JITTER[1]), profile)
    return float(combo_costs(mc)[0])


@lru_cache(maxsize=None)
def reference_costs(strategy: str, population: str, backbone: str = "llama", n: int = 256) -> tuple:
    """Mean all-LOW, all-MID and all-HIGH cost over ``n`` reference queries (a fixed generator, seed 10**6):
    ``cost_ref`` (all-HIGH) scales the static cost reward and the spend feature."""
    rng = np.random.default_rng(10 ** 6)
    profile = PROFILES[(strategy, backbone)]
    tot = np.zeros(3)
    for _ in range(n):
        q = generate_query(rng, population)
        c = combo_costs(module_costs(q.chunk_tokens, q.keep_jitter, q.gen_jitter, profile))
        tot += c[[0, combo_index([1] * 5), N_COMBOS - 1]]
    return tuple(float(x) for x in tot / n)

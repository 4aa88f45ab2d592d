"""``membudget/TierRouting-v0``: LOW / MID / HIGH compute tier for each memory-extraction module of one query."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from ..rendering import (C_CANDIDATE, C_EMPTY, C_MISS, C_QUERIED, RENDER_MODES, Render, blank_frame, check_render_mode,
                         figure_array, new_figure)
from ..validation import check_discrete_action, check_int, check_number, check_options
from .world import (COMBOS, GEN_BASE, MAX_CHUNK, MAX_CONTEXT, MAX_INPUT, MAX_QUERY_TOKENS, MODULES, N_MODULES,
                    N_TIERS, PROFILES, PROMPT_TOKENS, TIERS, TOP_K, Outcomes, Query, check_world_arguments,
                    combo_index, floor_cost_bound, generate_query, outcomes, reference_costs, validate_query)

DEFAULT_LAMBDAS = (0.0, 0.1, 0.3, 0.5, 1.0)
QUERY_FEATURE_NAMES = tuple(f"cue_{t}" for t in ("single_hop", "multi_hop", "temporal", "open_domain",
                                                  "knowledge_update", "comparison")) + (
    "context_tokens", "chunk_tokens", "query_tokens", "retrieval_score")
INPUT_FEATURE_NAMES = ("input_tokens", "entity_cue", "temporal_cue", "topic_cue", "upstream_quality", "spent")
MODULE_FEATURE_NAMES = tuple(f"module_{m}" for m in MODULES)


MAX_LAMBDA = float(np.finfo(np.float32).max)
"""Largest λ of the conditioned variant, whose observation holds λ as a float32 (a larger one read as inf)."""


def feature_names(hard_budget: bool, lam_conditioned: bool) -> tuple:
    """Names of the observation entries, in order."""
    return (QUERY_FEATURE_NAMES + INPUT_FEATURE_NAMES + MODULE_FEATURE_NAMES
            + (("remaining_budget",) if hard_budget else ()) + (("lambda",) if lam_conditioned else ()))


class TierRoutingEnv(Render, gym.Env):
    """
    ## Description

    Query-aware budget routing of a runtime memory-extraction pipeline (BudgetMem). An episode is one
    user query over a long history: the top-5 retrieved chunks pass the fixed module pipeline
    ``filter → entity, temporal, topic → summary`` and an answer model answers from the resulting compact memory.
    Before each module runs, the router picks its compute tier LOW / MID / HIGH. Three tiering strategies
    (``strategy``): ``implementation`` (rules → BERT-class model → LLM; the widest cost range), ``reasoning``
    (direct → chain of thought → reflection with the same LLM; a narrow, expensive range) and ``capacity``
    (small → medium → large model; the best quality at high budget). Query populations are named after BudgetMem's
    datasets (``locomo``, ``longmemeval``, ``hotpotqa``: LoCoMo-, LongMemEval- and HotpotQA-like question-type mixes
    and context lengths of 18K / 122K / 26K tokens). Every query has hidden per-module needs and hardness; the
    answer quality ``r_task`` and the cost of all 3^5 tier combinations are drawn at reset
    (:mod:`membudget.envs.tiers.world` documents the outcome model), so the counterfactual is fixed and the
    hindsight oracle (:mod:`membudget.teachers.tier_oracle`) is exact.

    ## Action Space

    ``Discrete(3)``: 0 = LOW, 1 = MID, 2 = HIGH, the tier of the next module in the order filter, entity,
    temporal, topic, summary. With ``max_cost_per_query`` the environment may apply a lower tier (see Rewards).

    ## Observation Space

    ``Box(0, 1, (21,), float32)`` by default; one more feature with ``max_cost_per_query`` and one more with
    ``lam_conditioned`` (names from ``feature_names(hard_budget, lam_conditioned)``):
    - query features (10): six noisy question-type cues, context length / 200K, chunk length / 1500, query
      length / 64, retriever score of the top chunk (a noisy view of answerability);
    - features of the current module's input, the intermediate result so far (6): its tokens / 7650; cues of the
      entity / temporal / topic needs found in the filtered context (0 before the filter has run, less noisy after a
      better filter); observed quality of the upstream result (0 at the filter; of the filtered context for the
      extraction modules; of the three extraction results for the summary); dollars spent so far ``c`` as
      ``c / (c + cost_ref)``;
    - a one-hot module descriptor (5);
    - with ``max_cost_per_query``: the remaining per-query budget / the cap;
    - with ``lam_conditioned``: λ.

    ## Rewards

    0 after the first four modules; after the summary ``r_task + λ · r_cost`` with the static cost reward
    ``r_cost = 1 − clip(c / cost_ref, 0, 1)`` (``cost_ref``: the mean all-HIGH cost of this strategy, population and
    backbone over 256 reference queries). Seed 001's §5.5 reward — sliding-window Q5/Q95 cost normalisation and the
    scale factor β — is the wrapper :class:`~membudget.envs.tiers.BudgetMemReward`, which replaces it.
    Cost is tokens × price per tier, in dollars. With ``max_cost_per_query`` a requested tier whose cost, plus the
    all-LOW cost of the modules still to run, exceeds the remaining budget is downgraded to the highest tier that
    fits; the downgrade shows in ``info["downgraded"]`` (``requested_tier`` against ``tier``) and is counted in
    ``info["episode_metrics"]["downgrades"]``, and no query ever costs more than its cap.

    ## Starting State

    ``reset(seed=s)`` draws query ``s`` (:func:`~membudget.envs.tiers.world.generate_query`; the latent query does
    not depend on strategy or backbone, so they are paired by seed) and its outcome table. Options:
    ``{"query": Query}`` replays a query; ``{"lam": x}`` sets λ of a λ-conditioned episode (otherwise drawn
    uniformly from ``lam_values``).

    ## Episode End

    Terminates after the summary module (5 steps); never truncates. ``info`` at reset and at every step has the same
    keys, fixed shapes and numeric dtypes: ``module`` (index in ``MODULES`` of the module just routed; at reset 0),
    ``requested_tier``, ``tier`` (-1 at reset), ``downgraded`` (bool), ``module_cost``, ``spent``, ``lam``. At the
    end ``info["episode_metrics"]`` adds ``r_task``, ``cost``, ``r_cost``, ``tiers`` and ``requested_tiers`` (arrays
    of 5), ``downgrades``, ``lam``, ``return``.

    ## Arguments

    - ``strategy``: ``"implementation"`` (default), ``"reasoning"`` or ``"capacity"``.
    - ``population``: ``"locomo"`` (default), ``"longmemeval"`` or ``"hotpotqa"``.
    - ``backbone``: ``"llama"`` (default; LLaMA-3.3-70B family prices) or ``"qwen"`` (Qwen family: cheap input,
      expensive output, different per-module strengths), for transfer without retraining.
    - ``lam``: λ ≥ 0, the cost weight (default 0.0, performance first), at most ``MAX_LAMBDA``. Ignored when
      ``lam_conditioned``.
    - ``lam_conditioned``: put λ in the observation and draw it per query from ``lam_values``.
    - ``lam_values``: λ values of the conditioned variant (default 0, 0.1, 0.3, 0.5, 1.0), each at most
      ``MAX_LAMBDA`` (float32's largest: the observation holds λ).
    - ``max_cost_per_query``: hard per-query budget in dollars, or ``None`` (default). Must be at least
      ``floor_cost_bound(strategy, population, backbone)`` (the largest possible all-LOW cost) so every query is
      feasible.
    - ``noise``: standard deviation of the judge noise of ``r_task`` (default 0.04).
    - ``render_mode``: ``"ansi"``, ``"human"``, ``"rgb_array"`` (the query so far as a picture: modules × tiers
      with each tier's cost, the tiers applied and requested, and the spend against the cap and the reference
      cost) or None.

    ## Version History

    - v0: initial version. Revised before the first release (0.1.0): per-module hidden hardness, sparse per-type
      needs, and the implementation strategy's MID price 0.02 → 0.10 $/M tokens (Qwen: 0.05 in / 0.10 out). Under
      the first profiles module-level routing was worth almost nothing at all-MID's cost — a policy knowing each
      query's exact needs gained +0.003 / +0.008 / +0.017 r_task over all-MID (implementation / reasoning /
      capacity) — so the world did not show BudgetMem's premise (§6.4) and no router could show it either.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 2}

    def __init__(self, strategy="implementation", population="locomo", backbone="llama", lam=0.0,
                 lam_conditioned=False, lam_values=DEFAULT_LAMBDAS, max_cost_per_query=None, noise=0.04,
                 render_mode=None):
        check_world_arguments(strategy, population, backbone, noise)
        self.lam = check_number("lam", lam, 0, MAX_LAMBDA)
        if not isinstance(lam_conditioned, (bool, np.bool_)):
            raise ValueError(f"lam_conditioned must be a bool, got {lam_conditioned!r}")
        try:
            if isinstance(lam_values, (str, bytes)):
                raise TypeError
            values = tuple(check_number("lam_values entry", v, 0, MAX_LAMBDA) for v in lam_values)
        except TypeError:
            raise ValueError(f"lam_values must be a non-empty sequence of numbers >= 0, got {lam_values!r}") from None
        if not values:
            raise ValueError("lam_values must be a non-empty sequence of numbers >= 0, got an empty one")
        self.strategy, self.population, self.backbone, self.noise = strategy, population, backbone, float(noise)
        self.lam_conditioned, self.lam_values = bool(lam_conditioned), values
        self.floor_cost = floor_cost_bound(strategy, population, backbone)
        if max_cost_per_query is not None:
            max_cost_per_query = check_number("max_cost_per_query", max_cost_per_query, 0, low_open=True)
            if max_cost_per_query < self.floor_cost:
                raise ValueError(f"max_cost_per_query={max_cost_per_query:.6g} is below the largest all-LOW cost "
                                 f"of a {population} query under {strategy}/{backbone} ({self.floor_cost:.6g} $); "
                                 "no tier choice could keep such a query within it")
        self.max_cost_per_query = max_cost_per_query
        self.render_mode = check_render_mode(render_mode, "TierRouting-v0")
        self.cost_low, self.cost_mid, self.cost_ref = reference_costs(strategy, population, backbone)
        self.feature_names = feature_names(max_cost_per_query is not None, self.lam_conditioned)
        high = np.ones(len(self.feature_names), dtype=np.float32)
        if self.lam_conditioned:
            high[-1] = max(1.0, max(values))
        self.observation_space = spaces.Box(np.zeros_like(high), high, dtype=np.float32)
        self.action_space = spaces.Discrete(N_TIERS)
        self.query: Query | None = None
        self.outcomes: Outcomes | None = None
        self._k = N_MODULES

    # ------------------------------------------------------------------------------------------------ internals

    def _obs(self) -> np.ndarray:
        q, o, k = self.query, self.outcomes, min(self._k, N_MODULES - 1)
        tiers = self._tiers
        qf = [*q.type_cues, q.context_tokens / MAX_CONTEXT, q.chunk_tokens / MAX_CHUNK,
              q.query_tokens / MAX_QUERY_TOKENS, q.retrieval_score]
        if k == 0:
            inp, cues, upstream = q.chunk_tokens * TOP_K + PROMPT_TOKENS, np.zeros(3), 0.0
        else:
            f = tiers[0]
            inp = self._input_tokens(k, f)
            cues = o.ext_cues[f]
            upstream = o.filter_signal[f] if k < 4 else o.ext_signal[combo_index(tiers[:4])]
        spent = self._spent / (self._spent + self.cost_ref)
        onehot = np.eye(N_MODULES)[k]
        x = [*qf, min(inp / MAX_INPUT, 1.0), *cues, upstream, spent, *onehot]
        if self.max_cost_per_query is not None:
            x.append(min(max(self.max_cost_per_query - self._spent, 0.0) / self.max_cost_per_query, 1.0))
        if self.lam_conditioned:
            x.append(self._lam)
        return np.asarray(x, dtype=np.float32)

    def _input_tokens(self, k, f):
        q = self.query
        keep = PROFILES[(self.strategy, self.backbone)].keep[f]
        kept = min(keep * q.keep_jitter, 1.0) * TOP_K * q.chunk_tokens
        if k < 4:
            return kept + PROMPT_TOKENS
        return 0.5 * kept + float((GEN_BASE[1:4] * q.gen_jitter[1:4]).sum()) + PROMPT_TOKENS

    def _module_cost(self, k, f, a):
        return float(self.outcomes.module_cost[f, k, a])

    def _low_completion(self, k, f):
        """All-LOW cost of the modules after ``k`` when the filter ran at tier ``f``."""
        return float(sum(self.outcomes.module_cost[f, j, 0] for j in range(k + 1, N_MODULES)))

    # ---------------------------------------------------------------------------------------------------- API

    def reset(self, *, seed=None, options=None):
        seed = check_int("seed", seed, 0, none_ok=True)
        options = check_options(options, ("query", "lam"))
        if "query" in options:
            validate_query(options["query"], self.population)
        if "lam" in options:
            if not self.lam_conditioned:
                raise ValueError("options['lam'] needs lam_conditioned=True (set lam in the constructor instead)")
            lam = check_number("options['lam']", options["lam"], 0)
            if lam > self.observation_space.high[-1]:
                raise ValueError(f"options['lam']={lam} exceeds the observation bound "
                                 f"{self.observation_space.high[-1]} (max of lam_values, at least 1)")
        super().reset(seed=seed)  # after the checks: a refused reset leaves the generator as it was
        q = options["query"] if "query" in options else generate_query(self.np_random, self.population)
        if "lam" in options:
            self._lam = lam
        elif self.lam_conditioned:
            self._lam = float(self.lam_values[int(self.np_random.integers(len(self.lam_values)))])
        else:
            self._lam = self.lam
        self.query = q
        self.outcomes = outcomes(q, self.strategy, self.backbone, self.noise)
        self._k, self._spent, self._tiers, self._requested, self._downgrades = 0, 0.0, [], [], 0
        return self._obs(), self._info(0, -1, -1, False, 0.0)

    def _info(self, module, requested, tier, downgraded, module_cost) -> dict:
        """The per-step info (at reset: the first module, no tier yet, -1)."""
        return {"module": module, "requested_tier": requested, "tier": tier, "downgraded": downgraded,
                "module_cost": module_cost, "spent": self._spent, "lam": self._lam}

    def step(self, action):
        if self.outcomes is None:
            raise RuntimeError("call reset() before step()")
        if self._k >= N_MODULES:
            raise RuntimeError("the query has been answered; call reset()")
        k, req = self._k, check_discrete_action(action, N_TIERS)
        applied = req
        if self.max_cost_per_query is not None:
            remaining = self.max_cost_per_query - self._spent
            while applied > 0:
                f = applied if k == 0 else self._tiers[0]
                if self._module_cost(k, f, applied) + self._low_completion(k, f) <= remaining + 1e-15:
                    break
                applied -= 1
            if applied != req:
                self._downgrades += 1
        f = applied if k == 0 else self._tiers[0]
        c = self._module_cost(k, f, applied)
        self._spent += c
        self._tiers.append(applied)
        self._requested.append(req)
        self._k += 1
        terminated = self._k >= N_MODULES
        info = self._info(k, req, applied, applied != req, c)
        reward = 0.0
        if terminated:
            r_task, cost, r_cost, reward = self._outcome()
            info["episode_metrics"] = {"r_task": r_task, "cost": cost, "r_cost": r_cost,
                                       "tiers": np.array(self._tiers, dtype=np.int64),
                                       "requested_tiers": np.array(self._requested, dtype=np.int64),
                                       "downgrades": self._downgrades, "lam": self._lam, "return": reward}
        return self._obs(), reward, terminated, False, info

    def _outcome(self) -> tuple:
        """``(r_task, cost, r_cost, reward)`` of the answered query."""
        idx = combo_index(self._tiers)
        r_task, cost = float(self.outcomes.r_task[idx]), float(self.outcomes.cost[idx])
        r_cost = 1.0 - min(max(cost / self.cost_ref, 0.0), 1.0)
        return r_task, cost, r_cost, r_task + self._lam * r_cost

    def outcome_table(self, expected=False):
        """``(r_task (243,), cost (243,))`` of the current query, combinations in ``COMBOS`` order; privileged
        (for the hindsight oracle and analysis), never part of the observation. ``expected=True`` gives the answer
        probability before judge noise in place of ``r_task`` (what knowing the query's needs and hardness, but
        not the judge's noise, predicts)."""
        if self.outcomes is None:
            raise RuntimeError("call reset() before outcome_table()")
        return (self.outcomes.expected_r_task if expected else self.outcomes.r_task), self.outcomes.cost

    def _text(self) -> str:
        if self.outcomes is None:
            return "TierRouting-v0: call reset() first"
        nxt = MODULES[self._k] if self._k < N_MODULES else "answered"
        done = ", ".join(f"{m} {TIERS[t]}" for m, t in zip(MODULES, self._tiers)) or "none yet"
        return (f"TierRouting-v0 ({self.strategy}, {self.population}, {self.backbone}, lambda {self._lam:g})  "
                f"next module: {nxt}\n  tiers so far: {done}\n  spent {self._spent * 1e3:.4f} m$"
                + ("" if self.max_cost_per_query is None else f" of {self.max_cost_per_query * 1e3:.4f} m$"))

    def _picture(self) -> np.ndarray:
        if self.outcomes is None:
            return blank_frame("TierRouting-v0: call reset() first")
        from matplotlib.colors import ListedColormap
        from matplotlib.patches import Patch

        fig = new_figure()
        grid = fig.add_gridspec(1, 2, width_ratios=(1, 1), left=0.1, right=0.97, top=0.84, bottom=0.22, wspace=0.45)
        ax, sax = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
        k, tiers = self._k, self._tiers
        code = np.zeros((N_MODULES, N_TIERS), dtype=np.int8)
        if k < N_MODULES:
            code[k] = 3
        for j, (applied, requested) in enumerate(zip(tiers, self._requested)):
            code[j, requested], code[j, applied] = 2, 1
        ax.imshow(code, cmap=ListedColormap([C_EMPTY, C_QUERIED, C_MISS, C_CANDIDATE]), vmin=0, vmax=3)
        for j in range(N_MODULES):  # a module's costs are known once the filter's tier is
            for a in range(N_TIERS):
                if j == 0 or tiers:
                    cost = self._module_cost(j, a if j == 0 else tiers[0], a) * 1e3
                    ax.text(a, j, f"{cost:.4f}", ha="center", va="center", fontsize=8,
                            color="white" if code[j, a] == 1 else "black")
        ax.set_xticks(range(N_TIERS), TIERS, fontsize=8)
        ax.set_yticks(range(N_MODULES), [f"{m} ←" if j == k else m for j, m in enumerate(MODULES)], fontsize=8)
        ax.set_xticks(np.arange(N_TIERS + 1) - 0.5, minor=True)
        ax.set_yticks(np.arange(N_MODULES + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="#bdbdbd", linewidth=0.8)
        ax.tick_params(which="minor", length=0)
        ax.set_title("cost of each tier (m$); ← the module routed next", fontsize=8)
        bars = [("spent so far", self._spent * 1e3, C_QUERIED)] + [
            (f"this query all-{name}", float(self.outcomes.cost[combo_index([a] * N_MODULES)]) * 1e3, "#bdbdbd")
            for a, name in enumerate(TIERS)]
        marks = [("cost_ref (mean all-HIGH)", self.cost_ref * 1e3, "#636363")]
        if self.max_cost_per_query is not None:
            marks.append(("cap", self.max_cost_per_query * 1e3, C_MISS))
        values = [x for _, x, _ in bars + marks if x > 0]
        low = min(values) / 3
        for y, (name, x, colour) in enumerate(bars):
            sax.barh(y, x, color=colour, height=0.6)
            sax.text(max(x, low), y, f" {x:.4f}", va="center", fontsize=7)
        sax.set_yticks(range(len(bars)), [name for name, _, _ in bars], fontsize=8)
        sax.invert_yaxis()
        sax.set_xscale("log")
        for name, x, colour in marks:
            sax.axvline(x, color=colour, linestyle="--", linewidth=1.2, label=f"{name} {x:.4f}")
        sax.set_xlim(low, max(values) * 6)
        sax.set_xlabel("m$ (log scale)", fontsize=8)
        sax.tick_params(labelsize=7)
        sax.legend(fontsize=7, loc="upper right", framealpha=0.9)
        sax.set_title("spend", fontsize=8)
        head = (f"TierRouting-v0 ({self.strategy}, {self.population}, {self.backbone}, λ {self._lam:g})  "
                + (f"module {k + 1}/{N_MODULES}: {MODULES[k]}" if k < N_MODULES else "answered"))
        if k >= N_MODULES:
            r_task, _, r_cost, reward = self._outcome()
            head += (f"\nr_task {r_task:.3f}, r_cost {r_cost:.3f}, reward {reward:.3f}, "
                     f"downgrades {self._downgrades}")
        fig.suptitle(head, fontsize=9, x=0.02, ha="left", y=0.98)
        fig.legend(handles=[Patch(facecolor=c, edgecolor="#999999", label=lab) for c, lab in (
            (C_QUERIED, "tier applied"), (C_MISS, "tier requested, downgraded to fit the cap"),
            (C_CANDIDATE, "choices for the next module"))], loc="lower center", ncol=3, fontsize=8, frameon=False)
        return figure_array(fig)

    @property
    def module_index(self) -> int:
        """Index of the module the next action is for (5 once the query is answered)."""
        return self._k

    @property
    def tiers(self) -> tuple:
        """Tiers applied so far in this query."""
        return tuple(self._tiers)

    @property
    def current_lam(self) -> float:
        return self._lam


def query_for_seed(seed: int, population: str = "locomo") -> Query:
    """The query ``reset(seed=seed)`` draws (a pure function of population and seed)."""
    rng, _ = seeding.np_random(seed)
    return generate_query(rng, population)


__all__ = ["COMBOS", "DEFAULT_LAMBDAS", "TierRoutingEnv", "feature_names", "query_for_seed"]

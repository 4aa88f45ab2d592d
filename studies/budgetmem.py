"""BudgetMem's study on ``membudget/TierRouting-v0`` (BudgetMem §5-6): routers trained by
:mod:`membudget.agents.tier_router`, evaluated against fixed tiers and the oracles.

- :func:`train_many`: several routers in worker processes (or as executor tasks), saved and reusable;
- :func:`rollout`: any policy-protocol policy (SB3 models, baselines, the privileged oracle) on held-out queries,
  stepped in lockstep (every query has exactly five steps) so SB3 models predict in batches;
- :func:`evaluate`: mean r_task and cost per λ with bootstrap intervals, the frontier against all-LOW / all-MID /
  all-HIGH / random / the hindsight oracle for each tiering strategy, per-module tier distributions per λ, the
  budget-capped routers (λ = 0 under a per-query cap on a fixed grid of multiples of the all-MID reference cost,
  :func:`cap_grid`) and the hard cap under them, the β ablation at λ = 0.3, transfer between backbones;
- :func:`goal_check`: the dominance criterion for each router family and for their union;
- :func:`format_results` and :func:`plot_frontier`; :func:`main` (``python -m membudget.evaluate tiers``).

On the execution backend (:mod:`membudget.studies.execution`, ``--backend ray`` or ``--checkpoint-dir``), every
router's training is one task and every evaluation (one policy's rollouts and summary per strategy, λ, cap or
backbone, one oracle frontier) is one task; without them the routers train in ``--workers`` local processes.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np

from membudget.agents.tier_router import BC_TEACHERS, HELD_OUT_FIRST_SEED, TierRouterConfig, train_router
from membudget.baselines.tiers import BASELINES, OracleTiers
from membudget.envs.tiers import MODULES, TierRoutingEnv, floor_cost_bound, reference_costs
from membudget.envs.tiers.world import POPULATIONS, STRATEGIES
from membudget.envs.validation import check_int, int_flag, number_flag
from membudget.teachers.tier_oracle import frontier_at, lagrangian_frontier
from membudget.studies.cli import Progress, resolve_quick
from membudget.studies.execution import Executor, add_backend_flags, executor_beside_pool
from membudget.studies.protocol import bootstrap_ci, save_figure, study_subplots
from membudget.studies.runs import (TrainCommand, model_to_bytes, ppo_from_bytes, record_training, start_run,
                                   write_metrics)

LAMBDAS = (0.0, 0.1, 0.3, 0.5, 1.0)
SWEEP_LAMBDAS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)   # the results' default: dense enough for a frontier
CAP_MULTIPLES = (0.6, 0.8, 1.0, 1.25, 1.6)   # per-query caps of the capped routers, × the all-MID reference cost
ORACLE = "oracle (max r_task)"
FAMILIES = {"per-lambda": ("routers",), "conditioned": ("conditioned",), "capped": ("capped",),
            "all routers": ("routers", "conditioned", "capped")}
"""Router families of :func:`goal_check`: the result rows' router entries each family's frontier is built from."""


def _train_task(kwargs) -> bytes:
    """One router's training as a task (of an executor or the local pool): ``train_router`` kwargs → the saved
    model (zip bytes)."""
    return model_to_bytes(train_router(**kwargs))


def _trained_routers(jobs: dict, out_dir: str, workers: int, reuse: bool, executor) -> dict:
    """``{name: zip bytes}`` of the routers of :func:`train_many`, saved as ``out_dir/<name>.zip``."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {n: os.path.join(out_dir, f"{n}.zip") for n in jobs}
    todo = [n for n in jobs if not (reuse and os.path.exists(paths[n]))]
    kwargs = [jobs[n] for n in todo]
    if executor is not None:
        trained = executor.map(_train_task, kwargs)
    elif workers > 1 and len(todo) > 1:
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            trained = list(pool.map(_train_task, kwargs))
    else:
        trained = [_train_task(kw) for kw in kwargs]
    for n, data in zip(todo, trained):
        with open(paths[n], "wb") as f:
            f.write(data)
    out = {}
    for n, p in paths.items():
        with open(p, "rb") as f:
            out[n] = f.read()
    return out


def train_many(jobs: dict, out_dir: str, workers: int = 2, reuse: bool = False, executor=None) -> dict:
    """Train ``{name: train_router kwargs}`` in ``workers`` processes (spawned, one torch thread each), or one
    ``executor`` task per router; returns ``{name: PPO model}``. Models are saved as ``out_dir/<name>.zip``;
    ``reuse`` loads existing ones instead."""
    return {n: ppo_from_bytes(d) for n, d in _trained_routers(jobs, out_dir, workers, reuse, executor).items()}


def rollout(policy, seeds, *, privileged=False, lam=None, **env_kwargs) -> dict:
    """Play ``policy`` once on each held-out query ``seeds`` (lockstep, batched ``predict`` unless ``privileged``:
    then the policy is given each environment as ``policy.env`` and predicts one observation at a time).
    λ-conditioned environments get ``lam`` through ``reset(options=...)``. Returns per-query ``r_task``, ``cost``,
    applied ``tiers`` (n, 5), ``requested`` tiers and ``downgrades``."""
    seeds = [int(s) for s in seeds]
    envs = [TierRoutingEnv(**env_kwargs) for _ in seeds]
    opts = {"lam": lam} if env_kwargs.get("lam_conditioned") else None
    obs = np.stack([e.reset(seed=s, options=opts)[0] for e, s in zip(envs, seeds)])
    n = len(seeds)
    tiers, req = np.zeros((n, 5), dtype=np.int64), np.zeros((n, 5), dtype=np.int64)
    r_task, cost, downgrades = np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64)
    start = np.ones(n, dtype=bool)
    for k in range(5):
        if privileged:
            acts = []
            for e, o in zip(envs, obs):
                policy.env = e
                acts.append(int(np.asarray(policy.predict(o)[0]).reshape(())))
            acts = np.asarray(acts)
        else:
            acts, _ = policy.predict(obs, episode_start=start, deterministic=True)
            acts = np.asarray(acts).reshape(n)
        start[:] = False
        new = []
        for i, (e, a) in enumerate(zip(envs, acts)):
            o, _, term, _, info = e.step(int(a))
            tiers[i, k], req[i, k] = info["tier"], info["requested_tier"]
            new.append(o)
            if term:
                m = info["episode_metrics"]
                r_task[i], cost[i], downgrades[i] = m["r_task"], m["cost"], m["downgrades"]
        obs = np.stack(new)
    return {"r_task": r_task, "cost": cost, "tiers": tiers, "requested": req, "downgrades": downgrades}


def outcome_tables(seeds, expected=False, **env_kwargs) -> list:
    """``[(r_task (243,), cost (243,))]`` of the held-out queries (privileged; for the oracle); ``expected=True``:
    the answer probability before judge noise in place of ``r_task``."""
    env = TierRoutingEnv(**env_kwargs)
    out = []
    for s in seeds:
        env.reset(seed=int(s))
        r, c = env.outcome_table(expected=expected)
        out.append((r.copy(), c.copy()))
    return out


def oracle_frontier(tables, cost_ref, n=60, rank=None):
    """The set-level oracle frontier (:func:`~membudget.teachers.tier_oracle.lagrangian_frontier`) over a fixed
    grid of multipliers; ``rank``: choose by these tables instead (the expected-quality oracle)."""
    mus = np.concatenate([[0.0], np.logspace(-3, 3, n) / cost_ref])
    return lagrangian_frontier(tables, mus, rank=rank)


def summarize(run, n_resamples=10_000) -> dict:
    r = bootstrap_ci(run["r_task"], n_resamples=n_resamples)
    c = bootstrap_ci(run["cost"], n_resamples=n_resamples)
    dist = np.stack([(run["tiers"] == t).mean(axis=0) for t in range(3)], axis=1)  # (5 modules, 3 tiers)
    return {"r_task": r, "cost": c, "tier_share": dist.tolist(), "low_share": float((run["tiers"] == 0).mean()),
            "downgrades": int(run["downgrades"].sum()),
            "per_query": {"r_task": run["r_task"].tolist(), "cost": run["cost"].tolist()}}


def router_frontier_at(router_points, cost):
    """Quality of the router's frontier at mean cost ``cost``: the upper concave hull of the router points
    (mixing two routers query by query reaches any point on a hull segment), the best hull point at ≤ ``cost``
    beyond the last vertex; ``-inf`` below the cheapest router point."""
    hull = _upper_hull(np.asarray(router_points, float))
    if cost < hull[0, 0]:
        return -np.inf
    if cost >= hull[-1, 0]:
        return float(hull[-1, 1])
    return float(np.interp(cost, hull[:, 0], hull[:, 1]))


def dominance(router_points, fixed_point) -> dict:
    """Does the router's frontier dominate a fixed-tier policy at ``fixed_point = (mean cost, mean r_task)``?

    - ``weak``: the fixed point does not lie strictly above the router's frontier (:func:`router_frontier_at`):
      some router point or mixture of two has ≥ quality at ≤ cost. This is the goal's criterion for the ends of the
      range: under implementation and capacity tiering all-LOW is the cheapest combination of every query (only
      all-LOW itself costs as little; under reasoning a MID filter keeps less context and is cheaper overall), and
      all-HIGH has the highest expected quality of every query (every module's quality rises with its tier; only
      the unobservable judge noise can favour another combination), so those two can be matched, not beaten.
    - ``strict``: the frontier is strictly higher at the fixed policy's cost (the criterion for all-MID).
    - ``gain``: frontier quality minus the fixed policy's at its cost (``None`` below the router's cost range).
    - ``point`` (no mixing): some single router point has > quality at ≤ cost; ``hull``: the frontier is higher
      and the cost lies inside the router's cost range (``None`` outside it)."""
    pts = np.asarray(router_points, float)
    fc, fq = fixed_point
    point = bool(np.any((pts[:, 0] <= fc) & (pts[:, 1] > fq)))
    q = router_frontier_at(pts, fc)
    gain = None if not np.isfinite(q) else q - fq
    inside = bool(pts[:, 0].min() <= fc <= pts[:, 0].max())
    return {"point": point, "hull": bool(q > fq) if inside else None, "gain": gain,
            "weak": bool(np.isfinite(q) and q >= fq), "strict": bool(np.isfinite(q) and q > fq)}


def _upper_hull(pts):
    return pts[_upper_hull_index(pts)]


def _upper_hull_index(pts):
    """Indices of the vertices of the upper concave hull of ``pts`` (n, 2), by increasing cost."""
    order = np.lexsort((-pts[:, 1], pts[:, 0]))
    hull = []
    for i in order:
        if hull and pts[i, 1] <= pts[hull[-1], 1]:
            continue
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = pts[hull[-2]], pts[hull[-1]]
            if (y2 - y1) * (pts[i, 0] - x1) <= (pts[i, 1] - y1) * (x2 - x1):
                hull.pop()
            else:
                break
        hull.append(i)
    return np.asarray(hull, dtype=np.int64)


def frontier_mixture(router_points, cost):
    """The query-by-query mixture that reaches the router frontier (:func:`router_frontier_at`) at ``cost``:
    ``[(index into router_points, weight)]`` with one or two entries, or ``None`` below the cheapest point."""
    pts = np.asarray(router_points, float)
    idx = _upper_hull_index(pts)
    h = pts[idx]
    if cost < h[0, 0]:
        return None
    if cost >= h[-1, 0]:
        return [(int(idx[-1]), 1.0)]
    j = int(np.searchsorted(h[:, 0], cost, side="right")) - 1
    w = float((h[j + 1, 0] - cost) / (h[j + 1, 0] - h[j, 0]))
    return [(int(idx[j]), w), (int(idx[j + 1]), 1.0 - w)]


def paired_gain(router_runs, fixed_run, n_resamples=10_000):
    """Frontier minus a fixed tier at the fixed tier's mean cost, with a paired bootstrap 95% interval over the
    queries: per query, the frontier mixture's r_task (weights fixed by the mean costs, :func:`frontier_mixture`)
    minus the fixed tier's. ``router_runs`` / ``fixed_run``: :func:`summarize` results on the same queries.
    ``None`` below the routers' cost range."""
    pts = [(v["cost"][0], v["r_task"][0]) for v in router_runs]
    mix = frontier_mixture(pts, fixed_run["cost"][0])
    if mix is None:
        return None
    q = sum(w * np.asarray(router_runs[i]["per_query"]["r_task"]) for i, w in mix)
    return bootstrap_ci(q - np.asarray(fixed_run["per_query"]["r_task"]), n_resamples=n_resamples)


def cap_grid(strategy, population="locomo", multiples=CAP_MULTIPLES, backbone="llama") -> dict:
    """``{multiple: per-query cap in dollars}``: each multiple of the mean all-MID cost of the reference queries
    (:func:`~membudget.envs.tiers.reference_costs`: 256 queries of a fixed generator, seed 10**6, none of them
    held out), skipping caps below :func:`~membudget.envs.tiers.floor_cost_bound` (the smallest admissible cap)."""
    mid, floor = reference_costs(strategy, population, backbone)[1], floor_cost_bound(strategy, population, backbone)
    return {m: m * mid for m in multiples if m * mid >= floor}


@dataclass
class ResultsConfig:
    strategies: list = field(default_factory=lambda: ["implementation", "reasoning", "capacity"])
    population: str = "locomo"
    lambdas: list = field(default_factory=lambda: list(SWEEP_LAMBDAS))
    """λ of the per-λ routers (one PPO router each; 0.3 is needed by the β ablation and the transfer)."""
    caps: list = field(default_factory=lambda: list(CAP_MULTIPLES))
    """Per-query caps of the budget-capped routers as multiples of each strategy's all-MID reference cost
    (:func:`cap_grid`): one λ = 0 router per admissible cap and strategy, trained with the cap in its observation."""
    per_lambda_strategy: str = "all"
    """Strategy of the per-λ routers: one name or 'all'. The λ-conditioned router is trained for every strategy."""
    timesteps: int = TierRouterConfig.total_timesteps
    conditioned_timesteps: int = 30_000
    n_queries: int = 300
    eval_first_seed: int = HELD_OUT_FIRST_SEED
    """First evaluation query. The held-out queries start at 50,000; development choices (teacher, λ grid) are made
    on validation queries below it (e.g. 40,000), never on the held-out ones."""
    seed: int = 0
    workers: int = 2
    transfer_to: str = "qwen"
    out: str = "runs/tiers"
    n_resamples: int = 10_000
    reuse: bool = False
    """Load routers already saved in ``out`` instead of retraining them."""
    bc_queries: int = TierRouterConfig.bc_queries
    """Behaviour-cloning warm start of every router's actor from an oracle on this many training queries before
    PPO fine-tuning (0: PPO from scratch)."""
    bc_teacher: str = TierRouterConfig.bc_teacher
    """The warm start's oracle (:func:`bc_warm_start`): ``expected`` or ``hindsight``."""


def check_results_config(cfg: ResultsConfig) -> None:
    """The study's settings that its steps rely on, checked before any training (a ``ValueError`` naming the
    field): known strategies, a per-λ strategy among them (or ``all``), λ = 0.3 among the lambdas (the β ablation
    and the transfer use its router), at least one held-out query."""
    unknown = [x for x in cfg.strategies if x not in STRATEGIES]
    if not cfg.strategies or unknown:
        raise ValueError(f"strategies must be a non-empty list of {STRATEGIES}, got {cfg.strategies!r}")
    if cfg.per_lambda_strategy != "all" and cfg.per_lambda_strategy not in cfg.strategies:
        raise ValueError(f"per_lambda_strategy {cfg.per_lambda_strategy!r} must be 'all' or one of the strategies "
                         f"{cfg.strategies} (its routers are compared with that strategy's fixed tiers)")
    if 0.3 not in cfg.lambdas:
        raise ValueError("lambdas must include 0.3 (the β ablation and the transfer use the λ = 0.3 router)")
    check_int("n_queries", cfg.n_queries, 1)


def evaluate(cfg: ResultsConfig, progress=print, executor=None) -> dict:
    """Train (or, with ``cfg.reuse``, load) every router of ``cfg`` and evaluate it on the held-out queries
    (``executor``: a study executor, e.g. Ray, for the trainings and the evaluations; default: the trainings in
    ``cfg.workers`` local processes, the evaluations in this one).
    Returns ``{"config", "strategies", "beta_ablation", "transfer", "train_seconds", "seconds"}``; each strategy's
    row holds :func:`summarize` results of the fixed tiers and the oracle (``"fixed"``), the per-λ routers
    (``"routers"``, by λ), the λ-conditioned router (``"conditioned"``, by λ), the capped routers (``"capped"``, by
    cap multiple, with ``cap``, ``max_cost`` and ``queries_downgraded``) and the oracle frontier."""
    check_results_config(cfg)
    t0 = time.time()
    seeds = range(cfg.eval_first_seed, cfg.eval_first_seed + cfg.n_queries)
    per_lam = cfg.strategies if cfg.per_lambda_strategy == "all" else [cfg.per_lambda_strategy]
    base = {"population": cfg.population, "seed": cfg.seed, "bc_queries": cfg.bc_queries,
            "bc_teacher": cfg.bc_teacher}
    jobs = {}
    for s in per_lam:
        for lam in cfg.lambdas:
            jobs[f"{s}-lam{lam}"] = dict(base, strategy=s, lam=lam, total_timesteps=cfg.timesteps)
    caps = {s: cap_grid(s, cfg.population, cfg.caps) for s in cfg.strategies}
    for s in cfg.strategies:
        jobs[f"{s}-conditioned"] = dict(base, strategy=s, lam_conditioned=True,
                                        total_timesteps=cfg.conditioned_timesteps)
        for m, cap in caps[s].items():
            jobs[f"{s}-cap{m}"] = dict(base, strategy=s, lam=0.0, max_cost_per_query=cap,
                                       total_timesteps=cfg.timesteps)
    ab = per_lam[-1]
    jobs[f"{ab}-lam0.3-nobeta"] = dict(base, strategy=ab, lam=0.3, use_beta=False, total_timesteps=cfg.timesteps)
    progress(f"training {len(jobs)} routers " + (f"({cfg.workers} workers)" if executor is None else
                                                  f"({executor.backend} backend)") + " ...")
    routers = _trained_routers(jobs, cfg.out, cfg.workers, cfg.reuse, executor)
    train_s = time.time() - t0
    progress(f"trained in {train_s:.0f} s; evaluating on {cfg.n_queries} held-out queries ...")
    # one task per result cell, keyed by its place in the results: (kind, policy, env kwargs)
    tasks = {}
    for s in cfg.strategies:
        kw = {"strategy": s, "population": cfg.population}
        for name in (*BASELINES, ORACLE):
            tasks["strategies", s, "fixed", name] = ("fixed", name, kw)
        tasks["strategies", s, "oracle_frontier"] = ("frontier", "hindsight", kw)
        tasks["strategies", s, "expected_frontier"] = ("frontier", "expected", kw)
        if s in per_lam:
            for lam in cfg.lambdas:
                tasks["strategies", s, "routers", lam] = ("router", f"{s}-lam{lam}", kw)
        for lam in cfg.lambdas:
            tasks["strategies", s, "conditioned", lam] = ("router", f"{s}-conditioned",
                                                          dict(kw, lam=lam, lam_conditioned=True))
        for m, cap in caps[s].items():
            tasks["strategies", s, "capped", m] = ("capped", f"{s}-cap{m}", dict(kw, max_cost_per_query=cap))
    tasks["beta_ablation", "without_beta"] = ("router", f"{ab}-lam0.3-nobeta",
                                              {"strategy": ab, "population": cfg.population})
    # transfer: the llama-trained λ = 0.3 router on the other backbone, no retraining
    for s in per_lam:
        kw = {"strategy": s, "population": cfg.population, "backbone": cfg.transfer_to}
        tasks["transfer", s, "router (llama-trained, lam 0.3)"] = ("router", f"{s}-lam0.3", kw)
        for name in ("all-LOW", "all-MID", "all-HIGH"):
            tasks["transfer", s, name] = ("fixed", name, kw)
        tasks["transfer", s, "oracle_frontier"] = ("frontier", "hindsight", kw)
    fn = functools.partial(_evaluation_task, seeds=seeds, n_resamples=cfg.n_resamples, routers=routers)
    res = {"config": asdict(cfg),
           "strategies": {s: {"fixed": {}, "routers": {}, "conditioned": {}, "capped": {}} for s in cfg.strategies},
           "train_seconds": train_s, "beta_ablation": {"strategy": ab}, "transfer": {}}
    for (*where, key), value in zip(tasks, (executor or Executor()).map(fn, list(tasks.values()))):
        node = res
        for k in where:
            node = node.setdefault(k, {})
        node[key] = value
    res["beta_ablation"] = {"strategy": ab, "with_beta": res["strategies"][ab]["routers"].get(0.3),
                            "without_beta": res["beta_ablation"]["without_beta"]}
    res["seconds"] = time.time() - t0
    return res


def _evaluation_task(item, *, seeds, n_resamples, routers):
    """One evaluation of :func:`evaluate` on the queries ``seeds``: ``item = (kind, name, env kwargs)`` with kind
    ``fixed`` (a fixed tier of ``BASELINES`` or the privileged ``ORACLE``), ``router`` or ``capped`` (the router
    ``routers[name]``, zip bytes; ``capped`` adds the cap, the largest query cost and the queries with a
    downgrade): the rollout's :func:`summarize`; kind ``frontier``: the ``hindsight`` or ``expected``-quality
    oracle frontier as a list."""
    kind, name, kw = item
    kw = dict(kw)
    if kind == "frontier":
        cost_ref = reference_costs(kw["strategy"], kw["population"], kw.get("backbone", "llama"))[2]
        rank = [r for r, _ in outcome_tables(seeds, expected=True, **kw)] if name == "expected" else None
        return oracle_frontier(outcome_tables(seeds, **kw), cost_ref, rank=rank).tolist()
    if kind == "fixed" and name == ORACLE:
        return summarize(rollout(OracleTiers(), seeds, privileged=True, **kw), n_resamples)
    if kind == "fixed":
        return summarize(rollout(BASELINES[name](seed=0) if name == "random" else BASELINES[name](), seeds, **kw),
                         n_resamples)
    run = rollout(ppo_from_bytes(routers[name]), seeds, **kw)
    if kind == "router":
        return summarize(run, n_resamples)
    return {"cap": kw["max_cost_per_query"], "max_cost": float(run["cost"].max()),
            "queries_downgraded": int((run["downgrades"] > 0).sum()), **summarize(run, n_resamples)}


def _router_runs(row, family):
    return [v for key in FAMILIES[family] for v in row[key].values()]


def goal_check(res) -> dict:
    """Per strategy and router family (:data:`FAMILIES`: per-λ, λ-conditioned, capped, and all routers together,
    whose frontier is the hull of every router point): dominance of every fixed-tier policy (:func:`dominance`),
    whether the goal is met, each gain with its paired bootstrap interval (:func:`paired_gain`), the gap to the
    hindsight oracle at each router point's mean cost and at each fixed
    tier's, and the gap to the expected-quality oracle (it knows each query's needs and hardness, not the judge
    noise) at each fixed tier's cost. A family without routers for a strategy is left out."""
    n_resamples = res.get("config", {}).get("n_resamples", 10_000)
    out = {}
    for s, row in res["strategies"].items():
        frontier = np.asarray(row["oracle_frontier"])
        expected = np.asarray(row["expected_frontier"])
        for fam in FAMILIES:
            runs = _router_runs(row, fam)
            if not runs:
                continue
            pts = [(v["cost"][0], v["r_task"][0]) for v in runs]
            dom = {n: dominance(pts, (row["fixed"][n]["cost"][0], row["fixed"][n]["r_task"][0]))
                   for n in ("all-LOW", "all-MID", "all-HIGH")}
            gaps = [frontier_at(frontier, c) - q for c, q in pts]
            met = all(d["weak"] for d in dom.values()) and dom["all-MID"]["strict"]
            out[(s, fam)] = {"dominance": dom, "oracle_gap": gaps, "met": met,
                             "gain_ci": {n: paired_gain(runs, row["fixed"][n], n_resamples)
                                         for n in ("all-LOW", "all-MID", "all-HIGH")},
                             "oracle_gap_at_fixed": {n: frontier_at(frontier, row["fixed"][n]["cost"][0])
                                                     - router_frontier_at(pts, row["fixed"][n]["cost"][0])
                                                     for n in ("all-LOW", "all-MID", "all-HIGH")},
                             "expected_gap_at_fixed": {n: frontier_at(expected, row["fixed"][n]["cost"][0])
                                                       - router_frontier_at(pts, row["fixed"][n]["cost"][0])
                                                       for n in ("all-LOW", "all-MID", "all-HIGH")}}
    return out


def _fmt_ci(t, scale=1.0, digits=3):
    m, lo, hi = (x * scale for x in t)
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def format_results(res) -> str:
    cfg = res["config"]
    first = cfg["eval_first_seed"]
    kind = "held-out" if first >= HELD_OUT_FIRST_SEED else "validation"
    L = [f"TierRouting-v0, population {cfg['population']}, {cfg['n_queries']} {kind} queries (seeds "
         f"{first}..{first + cfg['n_queries'] - 1}), backbone llama; BC warm start from the {cfg['bc_teacher']} "
         f"oracle on {cfg['bc_queries']} training queries, then PPO "
         f"{cfg['timesteps']} steps per λ router and per capped router (λ = 0, per-query cap = "
         f"{', '.join(map(str, cfg['caps']))} × the strategy's all-MID reference cost; caps below the "
         f"smallest admissible one skipped), {cfg['conditioned_timesteps']} for the λ-conditioned router, "
         f"training seed {cfg['seed']}; bootstrap 95% intervals ({cfg['n_resamples']} resamples); cost in m$ "
         "(1e-3 dollars) per query", ""]
    for s, row in res["strategies"].items():
        L += [f"### {s} tiering", "", "| policy | λ | r_task [95% CI] | cost m$ [95% CI] | LOW share |",
              "|---|---|---|---|---|"]
        for n, v in row["fixed"].items():
            L.append(f"| {n} | – | {_fmt_ci(v['r_task'])} | {_fmt_ci(v['cost'], 1e3, 4)} | {v['low_share']:.2f} |")
        for fam, src in (("PPO router (one per λ)", row["routers"]), ("PPO λ-conditioned", row["conditioned"])):
            for lam, v in src.items():
                L.append(f"| {fam} | {lam} | {_fmt_ci(v['r_task'])} | {_fmt_ci(v['cost'], 1e3, 4)} | "
                         f"{v['low_share']:.2f} |")
        for m, v in row["capped"].items():
            L.append(f"| PPO capped, cap {m} × all-MID ref = {v['cap'] * 1e3:.4f} m$ | 0.0 | {_fmt_ci(v['r_task'])} | "
                     f"{_fmt_ci(v['cost'], 1e3, 4)} | {v['low_share']:.2f} |")
        fr = np.asarray(row["oracle_frontier"])
        picks = [fr[np.argmin(np.abs(fr[:, 1] - row['fixed'][n]['cost'][0]))] for n in ("all-LOW", "all-MID",
                                                                                        "all-HIGH")]
        L += ["", "hindsight-oracle frontier (set level, per-query argmax r_task − μ·cost) near the fixed tiers' "
              "costs: " + ", ".join(f"{c * 1e3:.4f} m$ → {q:.3f}" for _, c, q in picks)]
        ex = np.asarray(row["expected_frontier"])
        L += ["expected-quality-oracle frontier (per-query argmax of r_task before judge noise − μ·cost) at the "
              "fixed tiers' costs: " + ", ".join(f"{row['fixed'][n]['cost'][0] * 1e3:.4f} m$ → "
                                          f"{frontier_at(ex, row['fixed'][n]['cost'][0]):.3f}"
                                          for n in ("all-LOW", "all-MID", "all-HIGH")), ""]
        if row["routers"]:
            L += ["per-module tier distribution (LOW/MID/HIGH shares) of the per-λ routers:", "",
                  "| λ | " + " | ".join(MODULES) + " |", "|---" * (len(MODULES) + 1) + "|"]
            for lam, v in row["routers"].items():
                L.append(f"| {lam} | " + " | ".join("/".join(f"{x:.2f}" for x in m) for m in v["tier_share"]) + " |")
            L.append("")
    L += ["### Goal: the router's frontier dominates every fixed-tier policy (higher r_task at ≤ cost)", "",
          "Frontier = upper concave hull of the router points of one family (per-lambda, conditioned, capped) or "
          "of all three together (all routers); per-query mixing of two routers reaches its segments; flat beyond "
          "the costliest point. Per fixed tier: frontier r_task minus the fixed tier's at the fixed tier's mean cost "
          "(≥ 0: no fixed point lies above the frontier; > 0: strictly higher), against all-MID with a paired "
          "bootstrap 95% interval over the queries (mixture weights fixed by the mean costs). Met = ≥ 0 against "
          "all three and > 0 "
          "against all-MID (all-HIGH is every query's highest-expected-quality combination and, under implementation "
          "and capacity, all-LOW its cheapest, so those can be matched, not beaten); single point = one router alone "
          "beats it. Oracle gap: hindsight-oracle frontier minus router frontier at each fixed tier's cost, and at "
          "each router point's own cost; expected gap: the same against the expected-quality oracle, which knows "
          "each query's needs and hardness but not the judge noise (no router observes either).", "",
          "| strategy | routers | vs all-LOW | vs all-MID | vs all-HIGH | met | oracle gap at LOW / MID / HIGH cost "
          "| expected gap at LOW / MID / HIGH cost | oracle gap at each router point's cost |",
          "|---|---|---|---|---|---|---|---|---|"]
    for (s, fam), g in goal_check(res).items():
        cells = []
        for n in ("all-LOW", "all-MID", "all-HIGH"):
            d, ci = g["dominance"][n], g["gain_ci"][n]
            gain = "below range" if d["gain"] is None else f"{d['gain']:+.4f}"
            if n == "all-MID" and ci is not None:
                gain += f" [{ci[1]:+.4f}, {ci[2]:+.4f}]"
            cells.append(f"{gain}{' (single point)' if d['point'] else ''}")
        og, eg = (" / ".join("–" if not np.isfinite(x) else f"{x:.3f}" for x in g[k].values())
                  for k in ("oracle_gap_at_fixed", "expected_gap_at_fixed"))
        L.append(f"| {s} | {fam} | " + " | ".join(cells) + f" | {'yes' if g['met'] else 'no'} | {og} | {eg} | "
                 + ", ".join(f"{x:.3f}" for x in g["oracle_gap"]) + " |")
    ab = res["beta_ablation"]
    L += ["", f"### β ablation at λ = 0.3 ({ab['strategy']})", "", "| router | r_task | cost m$ | LOW share |",
          "|---|---|---|---|"]
    for n in ("with_beta", "without_beta"):
        v = ab[n]
        if v:
            L.append(f"| {n.replace('_', ' ')} | {_fmt_ci(v['r_task'])} | {_fmt_ci(v['cost'], 1e3, 4)} | "
                     f"{v['low_share']:.2f} |")
    L += ["", f"### Transfer to backbone {cfg['transfer_to']} without retraining", "",
          "| strategy | policy | r_task | cost m$ | oracle at that cost |", "|---|---|---|---|---|"]
    for s, t in res["transfer"].items():
        fr = np.asarray(t["oracle_frontier"])
        for n, v in t.items():
            if n == "oracle_frontier":
                continue
            L.append(f"| {s} | {n} | {_fmt_ci(v['r_task'])} | {_fmt_ci(v['cost'], 1e3, 4)} | "
                     f"{frontier_at(fr, v['cost'][0]):.3f} |")
    L += ["", "### Hard cap under the capped routers (λ = 0, trained with the cap in their observation)", "",
          "| strategy | cap (× all-MID ref) | cap m$ | max query cost m$ | ≤ cap | queries with a downgrade |",
          "|---|---|---|---|---|---|"]
    for s, row in res["strategies"].items():
        for m, v in row["capped"].items():
            L.append(f"| {s} | {m} | {v['cap'] * 1e3:.4f} | {v['max_cost'] * 1e3:.4f} | "
                     f"{'yes' if v['max_cost'] <= v['cap'] + 1e-15 else 'NO'} | "
                     f"{v['queries_downgraded']} of {cfg['n_queries']} |")
    L += ["", f"training {res['train_seconds']:.0f} s, total {res['seconds']:.0f} s"]
    return "\n".join(L)


def plot_frontier(res, path) -> None:
    """One panel per tiering strategy: mean cost (log) against mean r_task for the fixed tiers, random, the
    oracle frontier and the routers (per λ, λ-conditioned, capped)."""
    strategies = list(res["strategies"])
    fig, axes = study_subplots(1, len(strategies), figsize=(5 * len(strategies), 4), squeeze=False)
    for ax, s in zip(axes[0], strategies):
        row = res["strategies"][s]
        fr = np.asarray(row["oracle_frontier"])
        ax.plot(fr[:, 1] * 1e3, fr[:, 2], "k-", lw=1, label="hindsight oracle")
        ex = np.asarray(row["expected_frontier"])
        ax.plot(ex[:, 1] * 1e3, ex[:, 2], "k--", lw=1, label="expected-quality oracle")
        for n, v in row["fixed"].items():
            if n.startswith("oracle"):
                continue
            ax.plot(v["cost"][0] * 1e3, v["r_task"][0], "s", label=n)
        for fam, src, m in (("router per λ", row["routers"], "o-"), ("λ-conditioned", row["conditioned"], "^--"),
                            ("capped (λ = 0)", row["capped"], "D:")):
            if src:
                pts = np.array([(v["cost"][0] * 1e3, v["r_task"][0]) for v in src.values()])
                ax.plot(pts[:, 0], pts[:, 1], m, label=fam)
        ax.set_xscale("log")
        ax.set_title(f"{s} tiering")
        ax.set_xlabel("mean cost per query (m$)")
        ax.set_ylabel("mean r_task")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    save_figure(fig, path)


QUICK_TIERS = {"per_lambda_strategy": "capacity", "n_queries": 200}
"""What ``evaluate tiers --quick`` sets: per-λ routers for capacity only, 200 held-out queries."""


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m membudget.evaluate tiers",
                                description="Train the PPO tier routers and print BudgetMem's results.")
    d = ResultsConfig()
    p.add_argument("--quick", action="store_true", help="per-λ routers for capacity only, 200 queries")
    p.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=d.strategies)
    p.add_argument("--population", choices=tuple(POPULATIONS), default=d.population)
    p.add_argument("--per-lambda-strategy", choices=("all", *STRATEGIES), default=None,
                   help=f"the strategy of the per-λ routers (default {d.per_lambda_strategy}: every strategy of "
                        "--strategies; --quick: capacity)")
    p.add_argument("--lambdas", nargs="+", type=number_flag(0), default=d.lambdas)
    p.add_argument("--caps", nargs="+", type=number_flag(0, low_open=True), default=d.caps,
                   help="per-query caps of the capped routers, as multiples of the all-MID reference cost")
    p.add_argument("--bc-queries", type=int_flag(0), default=d.bc_queries,
                   help="oracle queries for the behaviour-cloning warm start of each router (0: none)")
    p.add_argument("--bc-teacher", choices=BC_TEACHERS, default=d.bc_teacher,
                   help="oracle of the warm start: expected (before judge noise) or hindsight (after it)")
    p.add_argument("--timesteps", type=int_flag(0), default=d.timesteps)
    p.add_argument("--conditioned-timesteps", type=int_flag(0), default=d.conditioned_timesteps)
    p.add_argument("--n-queries", type=int_flag(1), default=None,
                   help=f"held-out evaluation queries (default {d.n_queries}; --quick: {QUICK_TIERS['n_queries']})")
    p.add_argument("--eval-first-seed", type=int_flag(0), default=d.eval_first_seed,
                   help="first evaluation query (held-out: ≥ 50000; validation below it)")
    p.add_argument("--seed", type=int_flag(0), default=d.seed)
    p.add_argument("--workers", type=int_flag(1), default=d.workers,
                   help="local processes training the routers (with --backend ray or --checkpoint-dir: one "
                        "executor task per router instead)")
    p.add_argument("--out", default=d.out)
    p.add_argument("--reuse", action="store_true", help="load routers already saved in --out")
    p.add_argument("--progress-bar", choices=("on", "off", "plain", "auto"), default="auto",
                   help="progress on stderr, as the main job's: on (a live line), plain (a line per stage and every "
                        "5 s), off, or auto (on when attached to a terminal, plain otherwise)")
    add_backend_flags(p)
    a = p.parse_args(argv)
    resolve_quick(p, a, QUICK_TIERS, {name: getattr(d, name) for name in QUICK_TIERS})
    cfg = ResultsConfig(strategies=a.strategies, population=a.population, per_lambda_strategy=a.per_lambda_strategy,
                        lambdas=a.lambdas, caps=a.caps, bc_queries=a.bc_queries, bc_teacher=a.bc_teacher,
                        timesteps=a.timesteps, conditioned_timesteps=a.conditioned_timesteps,
                        n_queries=a.n_queries, eval_first_seed=a.eval_first_seed, seed=a.seed,
                        workers=a.workers, out=a.out, reuse=a.reuse)
    try:
        check_results_config(cfg)
    except ValueError as e:
        p.error(str(e).replace("per_lambda_strategy", "--per-lambda-strategy").replace("lambdas ", "--lambdas "))
    with Progress(a.progress_bar) as progress, executor_beside_pool(a, progress) as executor:
        res = evaluate(cfg, progress=progress, executor=executor)
    text = format_results(res)
    print(text)
    os.makedirs(cfg.out, exist_ok=True)
    plot_frontier(res, os.path.join(cfg.out, "frontier.png"))
    with open(os.path.join(cfg.out, "results.md"), "w") as f:
        f.write(text + "\n")
    print(f"figure: {os.path.join(cfg.out, 'frontier.png')}")
    return res


@dataclass(frozen=True)
class TiersConfig(TierRouterConfig):
    """PPO tier router on TierRouting-v0 (membudget.agents.tier_router.train_router; every field is a flag):
    :class:`~membudget.agents.tier_router.TierRouterConfig`'s fields beside the run's own."""

    seed: int = 0
    """Seeds the policy and the training queries (reset(seed=seed) then unseeded resets; BC queries from seed + 10000)."""
    eval_first_seed: int = HELD_OUT_FIRST_SEED
    """First held-out query of the final evaluation (held-out queries start at 50000)."""
    eval_queries: int = 300
    """Number of held-out queries of the final evaluation."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: tiers-<strategy>-lam<lam>|conditioned-seed<seed>)."""

    def __post_init__(self):
        super().__post_init__()
        check_int("eval_queries", self.eval_queries, 1)
        check_int("eval_first_seed (the held-out queries)", self.eval_first_seed, HELD_OUT_FIRST_SEED)


def train_tiers(cfg: TiersConfig, command: str = "") -> str:
    """Train one PPO tier router, evaluate it on the held-out queries and save; returns the run directory."""
    conditioned = cfg.lam_conditioned
    tag = "conditioned" if conditioned else f"lam{cfg.lam:g}"
    run_dir = start_run("tiers", cfg, command, f"tiers-{cfg.strategy}-{tag}-seed{cfg.seed}")
    env_kwargs = dict(strategy=cfg.strategy, population=cfg.population, backbone=cfg.backbone,
                      max_cost_per_query=cfg.max_cost_per_query or None)
    model, info = train_router(TierRouterConfig.of(cfg), seed=cfg.seed, return_info=True)
    model.save(os.path.join(run_dir, "model.zip"))
    seeds = range(cfg.eval_first_seed, cfg.eval_first_seed + cfg.eval_queries)
    lams = [0.0, 0.1, 0.3, 0.5, 1.0] if conditioned else [cfg.lam]
    rows, summary = [], []
    for lam in lams:
        kw = dict(env_kwargs, lam_conditioned=True) if conditioned else env_kwargs
        run = rollout(model, seeds, lam=lam if conditioned else None, **kw)
        for i, s in enumerate(seeds):
            rows.append([lam, s, run["r_task"][i], run["cost"][i], "".join(map(str, run["tiers"][i])),
                         int(run["downgrades"][i])])
        summary.append(f"λ {lam:g}: r_task {run['r_task'].mean():.3f}, cost {run['cost'].mean() * 1e3:.4f} m$, "
                       f"LOW share {(run['tiers'] == 0).mean():.2f}")
    write_metrics(run_dir, ["lam", "seed", "r_task", "cost", "tiers", "downgrades"], rows)
    record_training(run_dir, info["train_seconds"], model.num_timesteps,
                     **{k: v for k, v in info.items() if k != "train_seconds"})
    print(f"{run_dir}: " + "; ".join(summary) + f" on held-out queries {seeds.start}-{seeds.stop - 1} "
          f"(training {info['train_seconds']:.1f} s)")
    return run_dir


TRAIN_COMMANDS = {"tiers": TrainCommand(TiersConfig, "SB3 PPO tier router on TierRouting-v0 (BC warm start from an "
                                                     "oracle)", train_tiers)}

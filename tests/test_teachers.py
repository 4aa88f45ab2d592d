"""HindsightDP against exhaustive enumeration of every schedule on tiny weeks, and against the environment."""

import functools
import itertools
from fractions import Fraction

import numpy as np
import pytest

from membudget.envs.pm import PMWeekEnv, WorldConfig, generate_episode
from membudget.teachers import HindsightDP
from membudget.teachers import hindsight_dp
from membudget.teachers.problem import problem_from_episode
from pm_tiny import instances, tiny_episode

def enumerate_outcomes(ep, budget, n_max, cost_cap, late_execute, lookahead, prefix=()):
    """Every reachable (TP, FP, FN, cost) of the week, by enumerating every per-step subset of candidates,
    simulated directly from the rules of DESIGN §3 (independent of the environment and the DP). Steps covered
    by ``prefix`` query exactly the given resources."""
    T, R = ep.horizon, ep.n_resources
    hid = [i for i in range(ep.n_intentions) if ep.kind[i] != 2]
    vis_tp = int(sum((ep.kind == 2) & (ep.visible_outcome == 1)))
    vis_fp = int(sum((ep.kind == 2) & (ep.visible_outcome == 3)))
    vis_fn = int(sum((ep.kind == 2) & (ep.visible_outcome == 2)))
    never = 1 << 30

    def due(i):
        return ep.polarity[i] == 0 and ep.onset[i] <= min(ep.deadline[i], T - 1)

    def candidate(r, t, resolved):
        return any(ep.registered[i] and ep.resource[i] == r and i not in resolved
                   and ep.active_from[i] <= t <= ep.active_until[i]
                   and ep.declared_start[i] - lookahead <= t <= ep.declared_end[i] for i in hid)

    @functools.lru_cache(maxsize=None)
    def rec(t, resolved, remaining):
        if t == T:
            return frozenset({(0, 0, 0)})
        cands = [r for r in range(R) if candidate(r, t, resolved)]
        if t < len(prefix):
            subsets = [tuple(prefix[t])]
        else:
            subsets = []
            for mask in range(1 << len(cands)):
                s = tuple(c for j, c in enumerate(cands) if mask >> j & 1)
                cost = sum(int(ep.costs[r]) for r in s)
                if (n_max is not None and len(s) > n_max) or (cost_cap is not None and cost > cost_cap) \
                        or (remaining is not None and cost > remaining):
                    continue
                subsets.append(s)
        out = set()
        for s in subsets:
            tp = fp = 0
            newly = set()
            for i in hid:
                if (ep.registered[i] and ep.resource[i] in s and i not in resolved
                        and ep.active_from[i] <= t <= ep.active_until[i] and ep.onset[i] <= t < never):
                    newly.add(i)
                    on_time = t <= ep.deadline[i]
                    if ep.polarity[i] == 0:
                        tp += on_time
                        fp += (not on_time) and late_execute
                    else:
                        fp += on_time
            cost = sum(int(ep.costs[r]) for r in s)
            rest = rec(t + 1, resolved | frozenset(newly), None if remaining is None else remaining - cost)
            for a, b, c in rest:
                out.add((tp + a, fp + b, cost + c))
        return frozenset(out)

    due_total = sum(due(i) for i in hid) + vis_tp + vis_fn
    outcomes = set()
    for tp, fp, cost in rec(0, frozenset(), budget):
        tp_all = tp + vis_tp
        outcomes.add((tp_all, fp + vis_fp, due_total - tp_all, cost))
    return outcomes


def best_f1(outcomes, cost=None):
    vals = [Fraction(2 * tp, 2 * tp + fp + fn) if 2 * tp + fp + fn else Fraction(0)
            for tp, fp, fn, c in outcomes if cost is None or c == cost]
    return max(vals) if vals else None


def replay(ep, schedule, world, **kw):
    env = PMWeekEnv(world=world, **kw)
    env.reset(options={"episode": ep})
    plan = {}
    for t, r in schedule:
        plan.setdefault(t, []).append(r)
    for t in range(ep.horizon):
        a = np.zeros(ep.n_resources, dtype=np.int8)
        a[plan.get(t, [])] = 1
        _, _, _, _, info = env.step(a)
        assert np.flatnonzero(info["queried"]).tolist() == sorted(plan.get(t, [])), "schedule not executable as planned"
    return info["episode_metrics"]


def check_instance(ep, kw, solve=None):
    """Mismatches between ``solve`` (default: HindsightDP) and enumeration on one week, every mode."""
    solve = solve or (lambda ep, kw, exact=None: HindsightDP(**kw).solve(ep, exact_cost=exact))
    outcomes = enumerate_outcomes(ep, kw["budget"], kw["per_step_cap"], kw["per_step_cost_cap"],
                                  kw["late_policy"] == "execute", kw["lookahead"])
    world = WorldConfig(horizon=ep.horizon, n_days=1, resources=tuple(zip(ep.resource_names, ep.resource_classes)),
                        lookahead=kw["lookahead"])
    env_kw = {k: v for k, v in kw.items() if k != "lookahead"}
    bad = []
    s = solve(ep, kw)
    if Fraction(s.f1).limit_denominator(10 ** 6) != best_f1(outcomes) or (s.tp, s.fp, s.fn, s.cost) not in outcomes:
        bad.append(("optimum", s, best_f1(outcomes)))
    end = replay(ep, s.schedule, world, **env_kw)
    if (end["tp"], end["fp"], end["fn"], end["realized_cost"]) != (s.tp, s.fp, s.fn, s.cost):
        bad.append(("replay", s, end))
    for c in sorted({o[3] for o in outcomes} | {max(o[3] for o in outcomes) + 1}):
        s = solve(ep, kw, c)
        want = best_f1(outcomes, c)
        if (s is None) != (want is None) or (s is not None and (
                Fraction(s.f1).limit_denominator(10 ** 6) != want or s.cost != c)):
            bad.append(("exact_cost", c, s, want))
    return bad


@pytest.mark.parametrize("seed", range(8))
def test_hindsight_dp_equals_enumeration_on_tiny_weeks(seed):
    bad = []
    for ep, kw in instances(seed, 45):
        bad += check_instance(ep, kw)
    assert not bad, bad[:3]


@pytest.mark.parametrize("seed", range(3))
def test_continuation_equals_enumeration_from_mid_episode_states(seed):
    rng = np.random.default_rng(100 + seed)
    checked = 0
    for ep, kw in instances(200 + seed, 40):
        world = WorldConfig(horizon=ep.horizon, n_days=1,
                            resources=tuple(zip(ep.resource_names, ep.resource_classes)), lookahead=kw["lookahead"])
        env = PMWeekEnv(world=world, **{k: v for k, v in kw.items() if k != "lookahead"})
        env.reset(options={"episode": ep})
        t0 = int(rng.integers(0, ep.horizon))
        prefix = []
        for _ in range(t0):
            _, _, _, _, info = env.step(rng.integers(0, 2, ep.n_resources))
            prefix.append(tuple(np.flatnonzero(info["queried"]).tolist()))
        s = HindsightDP.from_env(env).continuation(env)
        outcomes = enumerate_outcomes(ep, kw["budget"], kw["per_step_cap"], kw["per_step_cost_cap"],
                                      kw["late_policy"] == "execute", kw["lookahead"], prefix=prefix)
        assert Fraction(s.f1).limit_denominator(10 ** 6) == best_f1(outcomes), (ep, kw, prefix)
        assert all(t >= t0 for t, _ in s.schedule)
        for t, r in s.schedule:  # the continuation plays out in the environment with the promised counts
            pass
        plan = {}
        for t, r in s.schedule:
            plan.setdefault(t, []).append(r)
        for t in range(t0, ep.horizon):
            a = np.zeros(ep.n_resources, dtype=np.int8)
            a[plan.get(t, [])] = 1
            _, _, _, _, info = env.step(a)
            assert np.flatnonzero(info["queried"]).tolist() == sorted(plan.get(t, []))
        end = info["episode_metrics"]
        assert (end["tp"], end["fp"], end["fn"]) == (s.tp, s.fp, s.fn)
        checked += 1
    assert checked == 40


def _single_pass(ep, kw, exact=None):
    """Mutant: the first linear solve only (no Dinkelbach iterations)."""
    prob = problem_from_episode(ep, **kw)
    res = hindsight_dp._LinearSolver(prob).solve(2, 0, exact)
    if res is None:
        return None
    _, plan, tp, fp, cost = res
    return hindsight_dp.Schedule(sorted((t, r) for r, ts in plan.items() for t in ts), prob.f1(tp, fp),
                                 *prob.counts(tp, fp), cost)


def _mutant(change):
    def solve(ep, kw, exact=None):
        prob = problem_from_episode(ep, **kw)
        change(prob)
        return hindsight_dp.solve_problem(prob, exact)
    return solve


@pytest.mark.parametrize("name, solve", [
    ("late charge dropped", _mutant(lambda p: setattr(p, "late_execute", False))),
    ("per-step caps ignored", _mutant(lambda p: (setattr(p, "n_max", None), setattr(p, "cost_cap", None)))),
    ("no Dinkelbach iterations", _single_pass),
])
def test_enumeration_check_catches_broken_solvers(name, solve):
    failures = 0
    for ep, kw in instances(0, 45):
        try:
            failures += bool(check_instance(ep, kw, solve))
        except AssertionError:  # a schedule the executor cannot play as planned
            failures += 1
    assert failures > 0, f"the exactness check does not detect: {name}"


@pytest.mark.parametrize("budget", [10, 21])
def test_default_weeks_replay_exactly_and_beat_random_schedules(budget):
    for seed in (9000, 9001):
        ep = generate_episode(seed)
        s = HindsightDP(budget=budget).solve(ep)
        end = replay(ep, s.schedule, WorldConfig(), budget=budget)
        assert (end["tp"], end["fp"], end["fn"], end["realized_cost"]) == (s.tp, s.fp, s.fn, s.cost)
        assert s.cost <= budget
        # no random feasible rollout beats the optimum
        env = PMWeekEnv(budget=budget)
        rng = np.random.default_rng(seed)
        for _ in range(20):
            obs, _ = env.reset(options={"episode": ep})
            done = False
            while not done:
                obs, _, done, _, info = env.step(obs["mask"] * rng.integers(0, 2, obs["mask"].size))
            assert info["episode_metrics"]["set_f1"] <= s.f1 + 1e-12


def test_bad_arguments_raise():
    ep = generate_episode(1)
    with pytest.raises(ValueError, match="budget"):
        HindsightDP(budget=0).solve(ep)
    with pytest.raises(ValueError, match="late_policy"):
        HindsightDP(budget=5, late_policy="never").solve(ep)
    with pytest.raises(TypeError, match="exact_cost"):
        HindsightDP(budget=5).solve(ep, exact_cost=2.5)


@pytest.mark.parametrize("seed, budget, cap, cost_cap, profile, late_policy, exact", [
    (4000, 10, 2, None, "unit", "expire", None),
    (4001, 21, 2, None, "unit", "execute", None),
    (4002, 10, 1, None, "unit", "execute", None),
    (4003, 21, 2, None, "unit", "expire", 15),
    (4004, 60, 2, 8, "skewed", "expire", None),
    (4005, 40, None, 5, "mild", "execute", None),
])
def test_hindsight_dp_equals_milp_on_default_size_weeks(seed, budget, cap, cost_cap, profile, late_policy, exact):
    from membudget.teachers.milp import solve_milp

    ep = generate_episode(seed, cost_profile=profile)
    kw = dict(budget=budget, per_step_cap=cap, per_step_cost_cap=cost_cap, late_policy=late_policy, lookahead=2)
    dp = HindsightDP(**kw).solve(ep, exact_cost=exact)
    ref = solve_milp(problem_from_episode(ep, **kw), exact)
    assert (dp is None) == (ref is None)
    if dp is not None:
        assert Fraction(2 * dp.tp, 2 * dp.tp + dp.fp + dp.fn) == Fraction(2 * ref.tp, 2 * ref.tp + ref.fp + ref.fn)
        end = replay(ep, dp.schedule, WorldConfig(), budget=budget, per_step_cap=cap, per_step_cost_cap=cost_cap,
                     late_policy=late_policy, cost_profile=profile)
        assert (end["tp"], end["fp"], end["fn"], end["realized_cost"]) == (dp.tp, dp.fp, dp.fn, dp.cost)


def _priced_above_cap(seed, n):
    """Tiny weeks whose per-step cost cap lies below some resource's price, over the grid's corners."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        T, R = int(rng.integers(2, 7)), int(rng.integers(2, 4))
        costs = rng.integers(1, 5, R)
        costs[0] = 1
        costs[-1] = max(int(costs[-1]), 2)
        yield tiny_episode(rng, T, R, costs), {
            "budget": [None, int(rng.integers(1, 8))][int(rng.integers(0, 2))],
            "per_step_cap": [None, 1, 2][int(rng.integers(0, 3))],
            "per_step_cost_cap": int(rng.integers(1, int(costs.max()))),
            "late_policy": ["expire", "execute"][int(rng.integers(0, 2))], "lookahead": int(rng.integers(0, 3))}


@pytest.mark.parametrize("seed", range(3))
def test_cost_cap_below_prices_equals_enumeration(seed):
    bad = []
    for ep, kw in _priced_above_cap(300 + seed, 40):
        bad += check_instance(ep, kw)
    assert not bad, bad[:3]


@pytest.mark.parametrize("max_nodes, lp_nodes, lp_gap", [
    (10 ** 6, 10 ** 6, 10 ** 6), (10 ** 6, 0, 10 ** 6), (10 ** 6, 0, 0), (1, 10 ** 6, 10 ** 6)])
def test_lagrangian_bounds_and_milp_guard_stay_exact(monkeypatch, max_nodes, lp_nodes, lp_gap):
    """Lagrangian bounds (and repaired incumbents) at every node; with LP multipliers and the LP's incumbent from
    the first tightened node on; handing over to the MILP right after the LP; or the MILP guard at the first
    branching: the enumeration still agrees, budgets, caps and exact costs included."""
    monkeypatch.setattr(hindsight_dp, "EAGER_NODES", 0)
    monkeypatch.setattr(hindsight_dp, "MAX_NODES", max_nodes)
    monkeypatch.setattr(hindsight_dp, "LP_NODES", lp_nodes)
    monkeypatch.setattr(hindsight_dp, "LP_GAP", lp_gap)
    handed = []

    def solve(ep, kw, exact=None):
        dp = HindsightDP(**kw)
        schedule = dp.solve(ep, exact_cost=exact)
        handed.append(dp.stats_.milp_handovers)
        return schedule

    bad = []
    for ep, kw in list(instances(400, 40)) + list(_priced_above_cap(401, 20)):
        bad += check_instance(ep, kw, solve)
    assert not bad, bad[:3]
    assert (sum(handed) > 0) == (max_nodes == 1 or lp_gap == 0)


def test_search_stats_are_the_last_solve_s():
    """``stats_`` counts one solve's work (the same week twice: the same counts, not their sum); without per-step
    caps no relaxation clashes, so every linear problem ends at its root."""
    ep = generate_episode(9003, cost_profile="mild", load=3)
    dp = HindsightDP(budget=102, per_step_cap=None, per_step_cost_cap=2, late_policy="execute")
    dp.solve(ep)
    first = dp.stats_
    dp.solve(ep)
    assert dp.stats_ == first
    assert first.nodes > hindsight_dp.EAGER_NODES and first.expanded > 0 and first.bounds > 0
    free = HindsightDP(budget=102, per_step_cap=None)
    free.solve(ep)
    assert free.stats_.nodes > 0 and free.stats_.expanded == free.stats_.bounds == free.stats_.milp_handovers == 0


@pytest.mark.parametrize("seed, profile, load, budget, cap, cost_cap, late_policy", [
    (9002, "mild", 3, None, None, 1, "expire"),  # every price but the clock's above the cost cap
    (9000, "mild", 2, None, 2, None, "execute"),
    (9003, "mild", 3, 102, 2, 2, "execute"),
])
def test_pathological_settings_equal_milp(seed, profile, load, budget, cap, cost_cap, late_policy):
    from membudget.teachers.milp import solve_milp

    ep = generate_episode(seed, cost_profile=profile, load=load)
    kw = {"budget": budget, "per_step_cap": cap, "per_step_cost_cap": cost_cap, "late_policy": late_policy,
          "lookahead": 2}
    dp = HindsightDP(**kw).solve(ep)
    ref = solve_milp(problem_from_episode(ep, **kw))
    assert Fraction(2 * dp.tp, 2 * dp.tp + dp.fp + dp.fn) == Fraction(2 * ref.tp, 2 * ref.tp + ref.fp + ref.fn)
    end = replay(ep, dp.schedule, WorldConfig(), budget=budget, per_step_cap=cap, per_step_cost_cap=cost_cap,
                 late_policy=late_policy, cost_profile=profile, load=load)
    assert (end["tp"], end["fp"], end["fn"], end["realized_cost"]) == (dp.tp, dp.fp, dp.fn, dp.cost)


def test_the_dp_refuses_a_week_whose_tables_exceed_its_memory_bound_before_building_them(monkeypatch):
    ep = generate_episode(4000, WorldConfig())
    dp = HindsightDP(budget=21, per_step_cap=2)
    prob = problem_from_episode(ep, budget=21, per_step_cap=2, per_step_cost_cap=None, late_policy="expire",
                                lookahead=WorldConfig().lookahead)
    # the tables the estimate counts: TP and FP per (previous query, query) pair, for every resource
    solver = hindsight_dp._LinearSolver(prob)
    built = sum(t.nbytes for t in solver.tp + solver.fp)
    assert built == 2 * hindsight_dp.table_bytes(prob.horizon, prob.n_resources) // 3
    monkeypatch.setattr(hindsight_dp, "MAX_TABLE_BYTES", hindsight_dp.table_bytes(prob.horizon, prob.n_resources) - 1)

    def no_tables(*args, **kwargs):
        raise AssertionError("refused before any table is built")

    monkeypatch.setattr(hindsight_dp, "_LinearSolver", no_tables)
    with pytest.raises(MemoryError, match=rf"{prob.horizon} steps and {prob.n_resources} resources.*MAX_TABLE_BYTES"):
        dp.solve(ep)


def _link_table(rng, T):
    """A resource's link values ``val_t[q, p + 1]`` as the DP builds them: each intention adds its weight to the
    links that resolve it (previous query before its start, this one from its start to its last on-time step),
    so the values change with ``p`` only at starts; with a dense start grid and equal weights, ties abound."""
    val = np.zeros((T, T + 1), dtype=np.int64)
    for _ in range(int(rng.integers(0, 3 * T))):
        s = int(rng.integers(0, T))
        d = min(T - 1, s + int(rng.integers(0, 4)))
        val[s:d + 1, :s + 1] += int(rng.integers(-2, 3))
    return val


@pytest.mark.parametrize("seed", range(4))
def test_chain_equals_enumeration_of_query_steps(seed):
    """``_chain`` against every set of query steps (each after ``t0``, not forbidden, allowed by ``m`` after the
    previous query): ``g[k][q]``, the best value of exactly ``k`` queries with the last at ``q``, gives its best
    value per ``k``, its last step (the first of the best) and every back-pointer (the earliest previous query
    of the best value: the DP's tie rule, which keeps the planner's labels repeatable)."""
    rng = np.random.default_rng(seed)
    NEG = hindsight_dp.NEG
    checked = 0
    for _ in range(150):
        T = int(rng.integers(2, 11))
        t0 = int(rng.integers(0, T))
        p0 = int(rng.integers(-1, t0)) if t0 else -1
        val = _link_table(rng, T)
        m = np.where(rng.random(T) < 0.8, T, rng.integers(-2, T, size=T)).astype(np.int64)
        forbidden = rng.random(T) < 0.2
        k_max = int(rng.integers(0, T - t0 + 1))
        best, end, par = hindsight_dp._chain(val, m, t0, p0, k_max, forbidden)
        g = {0: {p0: 0}}
        for k in range(1, k_max + 1):
            g[k] = {}
            for steps in itertools.combinations(range(t0, T), k):
                prev, v = p0, 0
                for q in steps:
                    if forbidden[q] or m[q] <= prev:
                        break
                    v, prev = v + int(val[q, prev + 1]), q
                else:
                    g[k][prev] = max(g[k].get(prev, NEG), v)
        assert best[0] == 0
        for k in range(1, k_max + 1):
            want = max(g[k].values(), default=NEG)
            assert best[k] == want, (seed, T, t0, k)
            assert end[k] == (min(q for q, v in g[k].items() if v == want) if g[k] else -1)
            for q in range(t0, T):
                if q not in g[k]:
                    continue
                ways = {p: v + int(val[q, p + 1]) for p, v in g[k - 1].items() if p < q and p < m[q]}
                top = max(ways.values())
                assert top == g[k][q] and par[k, q] == min(p for p, v in ways.items() if v == top)
                checked += 1
    assert checked > 300

"""``python -m membudget.train tiers`` (the PPO tier router with its BC warm start) and ``python -m
membudget.envs.tiers results`` on a reduced setting, the cap grid of the capped routers, and the dominance criterion
of the results per router family."""

from __future__ import annotations

import json

import numpy as np
import pytest

from membudget import train
from membudget.studies.budgetmem import (ResultsConfig, cap_grid, dominance, evaluate, format_results,
                                         frontier_mixture, goal_check, paired_gain, router_frontier_at, train_many)
from membudget.studies.execution import Executor
from membudget.envs.tiers import floor_cost_bound, reference_costs
from run_dirs import metrics_rows, sb3_run


def test_train_tiers_writes_run_dir(tmp_path, capsys):
    cfg_file = tmp_path / "tiers.json"
    cfg_file.write_text(json.dumps({"strategy": "implementation", "lam": 0.5, "total-timesteps": 250,
                                    "n_steps": 250, "batch_size": 50, "bc_queries": 40, "bc_epochs": 2}))
    run_dir = train.main(["tiers", "--config", str(cfg_file), "--eval-queries", "20", "--seed", "2",
                          "--out", str(tmp_path), "--name", "t"])
    assert run_dir == str(tmp_path / "t")
    meta, rows = sb3_run(run_dir, "tiers", seed=2)
    assert meta["config"]["strategy"] == "implementation" and meta["config"]["lam"] == 0.5
    assert meta["config"]["bc_queries"] == 40 and meta["config"]["eval_queries"] == 20
    assert meta["training"]["env_steps"] >= 250 and 0.0 <= meta["training"]["bc_accuracy"] <= 1.0
    assert [int(r["seed"]) for r in rows] == list(range(50_000, 50_020))
    assert all(0.0 <= float(r["r_task"]) <= 1.0 and float(r["cost"]) > 0 and len(r["tiers"]) == 5 for r in rows)
    assert "r_task" in capsys.readouterr().out


def test_train_tiers_conditioned_and_cap(tmp_path):
    cap = 0.0015
    run_dir = train.main(["tiers", "--lam-conditioned", "on", "--total-timesteps", "0", "--bc-queries", "30",
                          "--bc-epochs", "1", "--max-cost-per-query", str(cap), "--eval-queries", "10",
                          "--out", str(tmp_path)])
    assert run_dir.endswith("tiers-capacity-conditioned-seed0")
    rows = metrics_rows(run_dir)
    assert sorted({float(r["lam"]) for r in rows}) == [0.0, 0.1, 0.3, 0.5, 1.0] and len(rows) == 50
    assert max(float(r["cost"]) for r in rows) <= cap + 1e-15


def test_train_tiers_bad_arguments(tmp_path):
    with pytest.raises(SystemExit):
        train.main(["tiers", "--strategy", "speed", "--out", str(tmp_path)])
    for flags in (["--eval-first-seed", "10"], ["--eval-queries", "-1"]):  # one line, before any work
        with pytest.raises(SystemExit) as e:
            train.main(["tiers", *flags, "--out", str(tmp_path)])
        assert e.value.code == 2
    assert not any(tmp_path.iterdir())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"lam": "high"}))
    with pytest.raises(SystemExit) as e:  # refused on one line before any work
        train.main(["tiers", "--config", str(bad), "--out", str(tmp_path)])
    assert e.value.code == 2


def test_bc_teacher_must_be_known():
    from membudget.agents.tier_router import train_router

    with pytest.raises(ValueError, match="teacher must be one of"):
        train_router(bc_queries=5, bc_teacher="oracle", total_timesteps=0)


def test_dominance_interpretation():
    pts = [(1.0, 0.5), (3.0, 0.7), (2.0, 0.55)]          # (2, 0.55) lies under the hull: 0.6 there
    assert router_frontier_at(pts, 2.0) == pytest.approx(0.6)
    assert router_frontier_at(pts, 5.0) == pytest.approx(0.7) and router_frontier_at(pts, 0.5) == -np.inf
    mid = dominance(pts, (2.0, 0.58))
    assert mid["weak"] and mid["strict"] and mid["gain"] == pytest.approx(0.02) and not mid["point"]
    assert dominance(pts, (1.0, 0.5)) | {"gain": 0.0} == {"point": False, "hull": False, "gain": 0.0,
                                                         "weak": True, "strict": False}   # matched, not beaten
    below = dominance(pts, (0.5, 0.3))
    assert not below["weak"] and below["gain"] is None
    assert not dominance(pts, (3.0, 0.71))["weak"]


def test_cap_grid_multiples_of_all_mid_above_the_floor():
    mid = reference_costs("capacity", "locomo")[1]
    assert cap_grid("capacity", multiples=(0.6, 1.0, 1.6)) == pytest.approx({0.6: 0.6 * mid, 1.0: mid, 1.6: 1.6 * mid})
    grid = cap_grid("reasoning", multiples=(0.6, 0.8, 1.0, 1.25, 1.6))   # reasoning's floor is above its all-MID cost
    assert list(grid) == [1.25, 1.6] and min(grid.values()) >= floor_cost_bound("reasoning", "locomo")


def _point(cost, r_task):
    return {"cost": (cost, cost, cost), "r_task": (r_task, r_task, r_task),
            "per_query": {"cost": [cost] * 4, "r_task": [r_task] * 4}}


def test_goal_check_per_family_and_union():
    row = {"fixed": {"all-LOW": _point(1.0, 0.2), "all-MID": _point(2.0, 0.4), "all-HIGH": _point(4.0, 0.6)},
           "routers": {0.0: _point(4.0, 0.6), 0.5: _point(3.0, 0.45), 1.0: _point(1.0, 0.2)},   # under all-MID
           "conditioned": {},
           "capped": {0.8: _point(1.6, 0.41), 1.25: _point(2.4, 0.5)},                        # beats all-MID only
           "oracle_frontier": [[10.0, 1.0, 0.3], [1.0, 2.0, 0.55], [0.0, 4.0, 0.7]],
           "expected_frontier": [[10.0, 1.0, 0.25], [1.0, 2.0, 0.5], [0.0, 4.0, 0.65]]}
    g = goal_check({"strategies": {"capacity": row}})
    assert set(g) == {("capacity", "per-lambda"), ("capacity", "capped"), ("capacity", "all routers")}
    per_lambda = g[("capacity", "per-lambda")]
    assert not per_lambda["met"] and not per_lambda["dominance"]["all-MID"]["weak"]
    capped = g[("capacity", "capped")]
    assert capped["dominance"]["all-MID"]["strict"] and not capped["met"]      # cannot reach all-LOW or all-HIGH
    union = g[("capacity", "all routers")]
    assert union["met"] and union["dominance"]["all-MID"]["gain"] == pytest.approx(0.055)
    assert union["oracle_gap_at_fixed"]["all-MID"] == pytest.approx(0.55 - 0.455)
    assert union["expected_gap_at_fixed"]["all-MID"] == pytest.approx(0.5 - 0.455)
    assert union["gain_ci"]["all-MID"] == pytest.approx((0.055, 0.055, 0.055))   # constant per query
    assert per_lambda["gain_ci"]["all-LOW"] == pytest.approx((0.0, 0.0, 0.0))
    assert len(union["oracle_gap"]) == 5


def test_frontier_mixture_and_paired_gain_closed_form():
    pts = [(1.0, 0.5), (3.0, 0.7), (2.0, 0.55)]
    assert frontier_mixture(pts, 0.5) is None and frontier_mixture(pts, 4.0) == [(1, 1.0)]
    assert frontier_mixture(pts, 1.5) == [(0, pytest.approx(0.75)), (1, pytest.approx(0.25))]
    a = {"cost": (1.0,), "r_task": (0.5,), "per_query": {"r_task": [0.4, 0.6]}}
    b = {"cost": (3.0,), "r_task": (0.7,), "per_query": {"r_task": [0.9, 0.5]}}
    fixed = {"cost": (1.5,), "r_task": (0.45,), "per_query": {"r_task": [0.5, 0.4]}}
    # per query: 0.75 a + 0.25 b − fixed = (0.525 − 0.5, 0.575 − 0.4); two queries → the bootstrap means are the
    # mean of the pair drawn twice: 0.025, 0.1 or 0.175
    mean, lo, hi = paired_gain([a, b], fixed, n_resamples=2000)
    assert mean == pytest.approx(0.1) and lo == pytest.approx(0.025) and hi == pytest.approx(0.175)


@pytest.mark.slow
def test_results_command_with_capped_routers(tmp_path, capsys):
    from membudget.evaluate import main

    res = main(["tiers", "--strategies", "capacity", "--lambdas", "0.3", "--caps", "0.6", "1.0", "--bc-queries",
                "20", "--timesteps", "500", "--conditioned-timesteps", "500", "--n-queries", "20", "--workers", "1",
                "--eval-first-seed", "40000", "--out", str(tmp_path)])
    capped = res["strategies"]["capacity"]["capped"]
    assert list(capped) == [0.6, 1.0] and all(v["max_cost"] <= v["cap"] + 1e-15 for v in capped.values())
    assert (tmp_path / "capacity-cap0.6.zip").exists() and (tmp_path / "frontier.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "| capacity | all routers |" in out and "PPO capped, cap 1.0 × all-MID ref" in out
    assert "20 validation queries (seeds 40000..40019)" in out and "expected-quality-oracle frontier" in out
    ex = np.asarray(res["strategies"]["capacity"]["expected_frontier"])
    hs = np.asarray(res["strategies"]["capacity"]["oracle_frontier"])
    assert np.all(ex[:, 2] <= hs[:, 2] + 1e-12)     # same multipliers: choosing before the noise cannot beat hindsight


class _Reversed(Executor):
    """Tasks finishing in the reverse order (as remote workers may)."""

    def _run(self, fn, items, todo):
        for i in reversed(todo):
            yield i, fn(items[i])


def _tiny_results_config(out, **kw):
    return ResultsConfig(**{"strategies": ["capacity"], "lambdas": [0.3], "caps": [1.0], "timesteps": 0,
                            "conditioned_timesteps": 0, "bc_queries": 20, "n_queries": 8, "eval_first_seed": 40000,
                            "n_resamples": 200, "workers": 1, "out": str(out), **kw})


def _numbers(res):
    return {k: v for k, v in res.items() if k not in ("config", "seconds", "train_seconds")}


def test_results_on_an_executor_equal_the_local_run_and_resume_from_checkpoints(tmp_path):
    local = evaluate(_tiny_results_config(tmp_path / "local"), progress=lambda m: None)
    ckpt = str(tmp_path / "ckpt")
    reversed_ = evaluate(_tiny_results_config(tmp_path / "reversed"), progress=lambda m: None,
                         executor=_Reversed(checkpoint_dir=ckpt))
    assert _numbers(reversed_) == _numbers(local)
    assert format_results(reversed_).splitlines()[:-1] == format_results(local).splitlines()[:-1]
    assert list(reversed_["strategies"]["capacity"]["capped"]) == [1.0] and reversed_["transfer"]
    assert (tmp_path / "reversed" / "capacity-cap1.0.zip").stat().st_size > 0
    again = Executor(checkpoint_dir=ckpt)       # a restarted run: every training and evaluation is loaded
    assert _numbers(evaluate(_tiny_results_config(tmp_path / "again"), progress=lambda m: None,
                             executor=again)) == _numbers(local)
    assert again.computed == 0 and again.loaded == 4 + 16   # routers; 5 fixed, 2 frontiers, 3 routers, β, transfer 5


def test_results_command_passes_bad_backend_input_on(tmp_path):
    from membudget.evaluate import main

    with pytest.raises(ValueError, match="--address needs --backend ray"):
        main(["tiers", "--address", "auto", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        main(["tiers", "--backend", "spark", "--out", str(tmp_path)])
    assert not list(tmp_path.iterdir())       # refused before training anything


def test_train_many_on_an_executor_trains_the_same_routers(tmp_path):
    import torch

    jobs = {n: {"lam": lam, "total_timesteps": 0, "bc_queries": 10, "bc_epochs": 2} for n, lam in (("a", 0.0),
                                                                                                ("b", 1.0))}
    local = train_many(jobs, str(tmp_path / "local"), workers=1)
    tasks = train_many(jobs, str(tmp_path / "tasks"), executor=_Reversed())
    assert (tmp_path / "tasks" / "b.zip").exists()
    for n in jobs:
        a, b = local[n].policy.state_dict(), tasks[n].policy.state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a)
    a, b = local["a"].policy.state_dict(), local["b"].policy.state_dict()
    assert not all(torch.equal(a[k], b[k]) for k in a)    # the jobs differ, so a mix-up would show

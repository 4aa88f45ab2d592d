"""``python -m membudget.train tiers`` (the PPO tier router with its BC warm start) on a reduced setting, and the
dominance criterion of the results."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from membudget import train
from membudget.agents.tier_router import dominance, router_frontier_at


def test_train_tiers_writes_run_dir(tmp_path, capsys):
    cfg_file = tmp_path / "tiers.json"
    cfg_file.write_text(json.dumps({"strategy": "implementation", "lam": 0.5, "total-timesteps": 250,
                                    "n_steps": 250, "batch_size": 50, "bc_queries": 40, "bc_epochs": 2}))
    run_dir = train.main(["tiers", "--config", str(cfg_file), "--eval-queries", "20", "--seed", "2",
                          "--out", str(tmp_path), "--name", "t"])
    assert run_dir == str(tmp_path / "t")
    assert (tmp_path / "t" / "model.zip").stat().st_size > 0
    meta = json.loads((tmp_path / "t" / "config.json").read_text())
    assert meta["subcommand"] == "tiers" and meta["seed"] == 2
    assert meta["config"]["strategy"] == "implementation" and meta["config"]["lam"] == 0.5
    assert meta["config"]["bc_queries"] == 40 and meta["config"]["eval_queries"] == 20
    assert meta["command"].startswith("python -m membudget.train tiers")
    assert {"numpy", "gymnasium", "stable-baselines3"} <= set(meta["versions"])
    assert meta["training"]["env_steps"] >= 250 and 0.0 <= meta["training"]["bc_accuracy"] <= 1.0
    with open(tmp_path / "t" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["seed"]) for r in rows] == list(range(50_000, 50_020))
    assert all(0.0 <= float(r["r_task"]) <= 1.0 and float(r["cost"]) > 0 and len(r["tiers"]) == 5 for r in rows)
    assert "r_task" in capsys.readouterr().out


def test_train_tiers_conditioned_and_cap(tmp_path):
    cap = 0.0015
    run_dir = train.main(["tiers", "--lam-conditioned", "on", "--total-timesteps", "0", "--bc-queries", "30",
                          "--bc-epochs", "1", "--max-cost-per-query", str(cap), "--eval-queries", "10",
                          "--out", str(tmp_path)])
    assert run_dir.endswith("tiers-capacity-conditioned-seed0")
    with open(f"{run_dir}/metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert sorted({float(r["lam"]) for r in rows}) == [0.0, 0.1, 0.3, 0.5, 1.0] and len(rows) == 50
    assert max(float(r["cost"]) for r in rows) <= cap + 1e-15


def test_train_tiers_bad_arguments(tmp_path):
    with pytest.raises(SystemExit):
        train.main(["tiers", "--strategy", "speed", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="eval-first-seed"):
        train.main(["tiers", "--eval-first-seed", "10", "--out", str(tmp_path)])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"lam": "high"}))
    with pytest.raises(ValueError, match="lam must be float"):
        train.main(["tiers", "--config", str(bad), "--out", str(tmp_path)])


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

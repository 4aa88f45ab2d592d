"""CLI entry points for ReplayStream-v0: ``train replay-ppo`` and ``evaluate replay`` on a reduced setting."""

from __future__ import annotations

import csv
import json

import pytest

from membudget import evaluate, train


def test_train_replay_ppo_writes_run_dir(tmp_path, capsys):
    run_dir = train.main(["replay-ppo", "--profile", "weak", "--total-timesteps", "128", "--n-steps", "128",
                          "--batch-size", "128", "--n-tasks", "100", "--eval-seeds", "42,43", "--seed", "1",
                          "--out", str(tmp_path), "--name", "r"])
    assert run_dir == str(tmp_path / "r")
    assert (tmp_path / "r" / "model.zip").stat().st_size > 0
    cfg = json.loads((tmp_path / "r" / "config.json").read_text())
    assert cfg["subcommand"] == "replay-ppo" and cfg["seed"] == 1
    assert cfg["config"]["profile"] == "weak" and cfg["config"]["n_tasks"] == 100
    assert cfg["command"].startswith("python -m membudget.train replay-ppo")
    assert {"numpy", "gymnasium", "stable-baselines3"} <= set(cfg["versions"])
    with open(tmp_path / "r" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["seed"]) for r in rows] == [42, 43]
    assert all(0.0 <= float(r["accuracy"]) <= 1.0 and int(r["total_tokens"]) > 0 for r in rows)
    assert "accuracy" in capsys.readouterr().out


def test_train_replay_ppo_bad_arguments(tmp_path):
    with pytest.raises(SystemExit):
        train.main(["replay-ppo", "--family", "sql", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="eval-seeds"):
        train.main(["replay-ppo", "--eval-seeds", "x", "--out", str(tmp_path)])


def test_evaluate_replay_prints_table_and_writes_outputs(tmp_path, capsys):
    rows = evaluate.main(["replay", "--families", "os", "--profiles", "mid", "--seeds", "42", "--bootstrap", "200",
                          "--out", str(tmp_path)])
    out = capsys.readouterr().out
    agents = {r["agent"] for r in rows}
    assert {"no-replay", "fixed-k16", "retrieved-k1", "gsc-n5", "linucb", "oracle"} <= agents
    for name in ("os × mid", "linucb", "frontier:", "Comparison with LIMBO's claims",
                 "command: python -m membudget.evaluate replay"):
        assert name in out
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["seeds"] == [42] and len(res["rows"]) == len(rows)
    lin = next(r for r in res["rows"] if r["agent"] == "linucb")
    assert 0.0 <= lin["accuracy"][0] <= 1.0 and len(lin["seed_actions"][0]) == 500
    assert "os × mid" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "replay_frontier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_replay_is_deterministic_and_rejects_bad_arguments(capsys):
    a = evaluate.main(["replay", "--families", "db", "--profiles", "weak", "--seeds", "43", "--bootstrap", "100"])
    b = evaluate.main(["replay", "--families", "db", "--profiles", "weak", "--seeds", "43", "--bootstrap", "100"])
    for x, y in zip(a, b):
        assert x["agent"] == y["agent"] and x["runs"][0]["total_tokens"] == y["runs"][0]["total_tokens"]
        assert (x["runs"][0]["actions"] == y["runs"][0]["actions"]).all()
    with pytest.raises(SystemExit):
        evaluate.main(["replay", "--profiles", "huge"])


def test_evaluate_dispatch_keeps_default_and_subcommands(monkeypatch):
    from membudget.studies import budgetpm, limbo

    calls = []
    monkeypatch.setattr(limbo, "replay_main", lambda argv: calls.append(("replay", argv)))
    monkeypatch.setattr(budgetpm, "parse_args", lambda argv: calls.append(("default", argv)) or (_ for _ in ()).throw(
        RuntimeError("stop")))
    evaluate.main(["replay", "--seeds", "42"])
    with pytest.raises(RuntimeError, match="stop"):
        evaluate.main(["--quick"])
    assert calls == [("replay", ["--seeds", "42"]), ("default", ["--quick"])]


@pytest.mark.parametrize("name", sorted(evaluate.SUBCOMMANDS))
def test_every_evaluate_subcommand_resolves_and_has_help(name, capsys):
    with pytest.raises(SystemExit) as e:
        evaluate.main([name, "--help"])
    assert e.value.code == 0 and f"python -m membudget.evaluate {name}" in capsys.readouterr().out

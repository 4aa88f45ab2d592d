"""bench/imitation.py on a tiny scale: the search's rows and table (BC, DAgger per iteration, the f9a9592
reference), resuming from its file, and the held-out measurement of the train subcommands (choosing settings is
the benchmark's job, not the tests')."""

import json

from membudget.agents.imitation import THRESHOLDS
from membudget.bench import imitation as bench


def test_search_scores_every_trial_on_validation_weeks_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "VALIDATION", (4000, 4001))
    monkeypatch.setattr(bench, "TRIALS", {
        "tiny": bench._trial("one week", weeks=1, epochs=1, width=8, standardize=True, budgets=("B10",)),
        "tiny f9": bench._trial("f9a9592's student", method="f9a9592", weeks=1, epochs=1, width=8, batch=512,
                                budgets=("B10",)),
        "tiny dagger": bench._trial("DAgger", method="dagger", weeks=1, epochs=1, width=8, iterations=1,
                                    calibrate=True, budgets=("B5", "B10"))})
    out = tmp_path / "search.jsonl"
    bench.main(["--search", "--budget", "B10", "--seeds", "0", "--out", str(out), "--cache", str(tmp_path / "cache")])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["trial"], r.get("iteration")) for r in rows] == [("tiny", None), ("tiny f9", None),
                                                                 ("tiny dagger", 0), ("tiny dagger", 1)]
    assert all(0.0 <= r["val_at_half"] <= 1.0 and r["dp_val_set_f1"] >= r["val_at_half"] - 1e-9 for r in rows)
    nets = [r for r in rows if r["method"] != "f9a9592"]  # scored at every threshold
    assert all(r["val_calibrated"] == max(r["val_by_threshold"].values()) >= r["val_at_half"] for r in nets)
    assert all(r["val_by_threshold"][str(r["calibrated_threshold"])] == r["val_calibrated"] for r in nets)
    assert all(r["val_crossfit"] <= r["val_calibrated"] + 1e-12 for r in nets)
    assert all(r["student_threshold"] in THRESHOLDS for r in rows[2:])  # the DAgger students act calibrated
    assert rows[0]["cpu"] == bench.cpu() and (tmp_path / "cache" / "dp_demonstrations_B10.npz").exists()
    printed = capsys.readouterr().out
    assert "| tiny dagger @1 |" in printed and "CPU:" in printed
    bench.main(["--search", "--seeds", "0", "--out", str(out)])  # every trial's budgets: only DAgger's B5 is new
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["trial"], r["budget"], r.get("iteration")) for r in rows[4:]] == [("tiny dagger", "B5", 0),
                                                                                  ("tiny dagger", "B5", 1)]
    bench.main(["--search", "--seeds", "0", "--out", str(out)])  # nothing left to fit
    assert len(out.read_text().splitlines()) == 6


def test_held_out_runs_the_train_subcommand_and_compares_with_the_dp(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "HELD_OUT", (8000, 9000))
    out = tmp_path / "held_out.jsonl"
    rows = bench.held_out(["bc"], ["B10"], [0], out=str(out), say=lambda m: None,
                          flags={"train_weeks": 1, "epochs": 1, "eval_weeks": 1})
    (row,) = rows
    assert row["ratio"] == row["held_out_set_f1"] / row["dp_held_out_set_f1"] and len(row["per_week"]) == 2
    assert row["command"].startswith("python -m membudget.train bc --budget B10 --seed 0")
    assert row["student"]["method"] == "bc" and row["settings"]["epochs"] == 1
    assert "| B10 | bc | 0: " in bench.held_out_table(rows)

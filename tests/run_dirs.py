"""The run folder a ``python -m membudget.train`` command writes, read back and checked, shared by the test
modules."""

import csv
import json
import os


def metrics_rows(run_dir) -> list:
    """The rows of the run's ``metrics.csv``."""
    with open(os.path.join(run_dir, "metrics.csv")) as f:
        return list(csv.DictReader(f))


def sb3_run(run_dir, subcommand: str, seed: int):
    """``(config.json, metrics rows)`` of a Stable-Baselines3 run of ``subcommand`` with ``seed``, after checking
    what every such run records: the model, the command, the seed, the package versions and the machine."""
    assert os.path.getsize(os.path.join(run_dir, "model.zip")) > 0
    with open(os.path.join(run_dir, "config.json")) as f:
        meta = json.load(f)
    assert meta["subcommand"] == subcommand and meta["seed"] == seed
    assert meta["command"].startswith(f"python -m membudget.train {subcommand}")
    assert {"numpy", "gymnasium", "stable-baselines3"} <= set(meta["versions"])
    assert meta["machine"]["logical_cores"] >= 1 and meta["machine"]["architecture"]
    return meta, metrics_rows(run_dir)

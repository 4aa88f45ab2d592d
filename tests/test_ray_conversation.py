"""The conversation study on the Ray backend (skipped where Ray is not installed): its evaluations and paired
intervals at a small configuration equal the local backend's bit for bit."""

from __future__ import annotations

import numpy as np


def test_ray_conversation_evaluations_equal_local(cluster, monkeypatch):
    from conversation_tiny import SEEDS, tiny_study
    from membudget.studies import conversation as study
    from membudget.studies.execution import Executor, RayExecutor

    gates = tiny_study(monkeypatch)
    local = study.evaluate(gates, SEEDS, 500, Executor())
    remote = study.evaluate(gates, SEEDS, 500, RayExecutor())
    (res, intervals, diag), (res_r, intervals_r, diag_r) = local, remote
    assert list(res) == list(res_r) and intervals == intervals_r and len(intervals) == 12
    for key, r in res.items():
        assert all(np.array_equal(r[m], res_r[key][m]) for m in r)
    for key, r in diag["ppo"].items():
        assert all(np.array_equal(r[m], diag_r["ppo"][key][m]) for m in r)
    for key, d in diag["breakdown"].items():
        assert d["calls"] == diag_r["breakdown"][key]["calls"] and d["lost"] == diag_r["breakdown"][key]["lost"]

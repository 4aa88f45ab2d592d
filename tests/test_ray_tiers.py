"""BudgetMem's study (``python -m membudget.evaluate tiers``) on a simulated Ray cluster equals the local run."""

from __future__ import annotations


def test_ray_tiers_results_equal_local(cluster, tmp_path):
    from membudget.studies.budgetmem import ResultsConfig, evaluate
    from membudget.studies.execution import RayExecutor

    def cfg(out):
        return ResultsConfig(strategies=["capacity"], lambdas=[0.3], caps=[1.0], timesteps=0, conditioned_timesteps=0,
                             bc_queries=20, n_queries=8, eval_first_seed=40000, n_resamples=200, workers=1,
                             out=str(tmp_path / out))

    local = evaluate(cfg("local"), progress=lambda m: None)
    remote = evaluate(cfg("ray"), progress=lambda m: None, executor=RayExecutor())
    for k in ("config", "seconds", "train_seconds"):
        local.pop(k), remote.pop(k)
    assert remote == local and list(remote["strategies"]["capacity"]["capped"]) == [1.0]

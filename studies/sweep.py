"""``python -m membudget.train sweep``: a Ray Tune search over the native PPO's hyperparameters on PMWeek-v0
(Optuna's TPE search, ASHA early stopping), selecting on the validation weeks 4000-4029 only. The best trial's
settings are written as ``best_config.json``, a ``--config`` file of ``python -m membudget.train ppo``.

Search space (:data:`SEARCH_SPACE`): learning rate log-uniform in [1e-4, 3e-3]; reward scale in {1, 10, 100};
PPO epochs in {2, 4, 8}; minibatches per epoch in {4, 8, 16}; clipping range uniform in [0.1, 0.3]; GAE lambda
uniform in [0.9, 1.0]; entropy bonus in {0, 0.001, 0.01}. Every trial has the same environment-step budget
(``--total-timesteps``), the same budget level and seed; ASHA compares trials on the validation Set F1 recorded
every ``--eval-every`` steps and stops the worse ones early. Needs ``pip install "membudget[ray]"``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from membudget.envs.validation import check_int
from membudget.studies.execution import ray_address
from membudget.studies.runs import TrainCommand, parse_budget, start_run

VALIDATION = (4000, 4030)
"""The weeks a sweep selects on (4000-4029); never the held-out weeks."""


def search_space():
    """The Tune search space (documented in the module docstring)."""
    from ray import tune

    return {"learning_rate": tune.loguniform(1e-4, 3e-3), "reward_scale": tune.choice([1.0, 10.0, 100.0]),
            "n_epochs": tune.choice([2, 4, 8]), "n_minibatches": tune.choice([4, 8, 16]),
            "clip_coef": tune.uniform(0.1, 0.3), "gae_lambda": tune.uniform(0.9, 1.0),
            "ent_coef": tune.choice([0.0, 0.001, 0.01])}


SEARCH_SPACE = ("learning_rate", "reward_scale", "n_epochs", "n_minibatches", "clip_coef", "gae_lambda",
                "ent_coef")
"""The hyperparameters a sweep searches (the ppo flags of the same names)."""


@dataclass
class SweepConfig:
    """A Tune sweep of the native PPO on PMWeek-v0 (every field is a flag)."""

    budget: str = "B10"
    """Episode budget of every trial: a level, an integer or none."""
    trials: int = 16
    """Trials (Optuna samples)."""
    total_timesteps: int = 500_000
    """Environment steps per trial (the ASHA maximum)."""
    eval_every: int = 100_000
    """Validation Set F1 (weeks 4000-4029) reported to Tune every this many steps; ASHA's rungs."""
    n_envs: int = 64
    """Weeks played per update (fixed across trials)."""
    seed: int = 0
    """Seed of every trial's PPO and of the Optuna sampler."""
    max_concurrent: int = 2
    """Trials run at once (one CPU each)."""
    out: str = "runs"
    """Parent directory of the run directory (Tune's results go to its tune/ folder)."""
    name: str = ""
    """Run directory name (default: sweep-<budget>-seed<seed>)."""

    def __post_init__(self):
        for name in ("trials", "total_timesteps", "eval_every", "n_envs", "max_concurrent"):
            check_int(name, getattr(self, name), 1)


def _trial(settings, fixed):
    from ray import tune

    from membudget.agents.ppo import PPOConfig, train_ppo

    def report(row):
        tune.report({"val_set_f1": row["val_set_f1"], "env_steps": row["env_steps"]})

    # the searched settings over PPOConfig's; the eager engine (nothing to compile in each trial's worker), every
    # reported point as trained (Tune, not keep_best, picks the best)
    train_ppo(parse_budget(fixed["budget"]), PPOConfig(engine="autograd", keep_best=False), seed=fixed["seed"],
              total_timesteps=fixed["total_timesteps"], n_envs=fixed["n_envs"], eval_every=fixed["eval_every"],
              eval_seeds=range(*VALIDATION), report=report, **settings)


def run_sweep(cfg: SweepConfig, command: str) -> str:
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search import ConcurrencyLimiter
    from ray.tune.search.optuna import OptunaSearch

    run_dir = os.path.abspath(start_run("sweep", cfg, command, f"sweep-{cfg.budget}-seed{cfg.seed}"))
    fixed = {"budget": cfg.budget, "total_timesteps": cfg.total_timesteps, "seed": cfg.seed, "n_envs": cfg.n_envs,
             "eval_every": cfg.eval_every}
    owns = not ray.is_initialized()
    if owns:
        ray.init(address=ray_address(None), include_dashboard=False, log_to_driver=False)
    try:
        trainable = tune.with_resources(tune.with_parameters(_trial, fixed=fixed), {"cpu": 1})
        scheduler = ASHAScheduler(time_attr="env_steps", max_t=cfg.total_timesteps,
                                  grace_period=min(cfg.eval_every, cfg.total_timesteps), reduction_factor=2)
        search = ConcurrencyLimiter(OptunaSearch(seed=cfg.seed), max_concurrent=cfg.max_concurrent)
        tuner = tune.Tuner(trainable, param_space=search_space(),
                           tune_config=tune.TuneConfig(metric="val_set_f1", mode="max", search_alg=search,
                                                       scheduler=scheduler, num_samples=cfg.trials),
                           run_config=tune.RunConfig(name="tune", storage_path=run_dir, verbose=0))
        results = tuner.fit()
        best = results.get_best_result(metric="val_set_f1", mode="max", scope="last")
        frame = results.get_dataframe()  # each trial's last report, the one the best trial is chosen on
    finally:
        if owns:
            ray.shutdown()
    settings = {k: best.config[k] for k in SEARCH_SPACE}
    best_cfg = {"budget": cfg.budget, "total_timesteps": cfg.total_timesteps, "seed": cfg.seed,
                "n_envs": cfg.n_envs, **{k: (int(v) if k in ("n_epochs", "n_minibatches") else float(v))
                                         for k, v in settings.items()}}
    with open(os.path.join(run_dir, "best_config.json"), "w") as f:
        json.dump(best_cfg, f, indent=1)
    cols = [c for c in frame.columns if c in ("val_set_f1", "env_steps") or c.startswith("config/")]
    frame[cols].to_csv(os.path.join(run_dir, "trials.csv"), index=False)
    print(f"{run_dir}: {len(frame)} trials; best validation Set F1 (weeks 4000-4029) "
          f"{best.metrics['val_set_f1']:.4f} with {settings}; python -m membudget.train ppo --config "
          f"{os.path.join(run_dir, 'best_config.json')}")
    return run_dir


TRAIN_COMMANDS = {
    "sweep": TrainCommand(SweepConfig, "Ray Tune search (Optuna + ASHA) over native PPO on validation weeks",
                          run_sweep, requires=("ray.tune", "optuna")),
}

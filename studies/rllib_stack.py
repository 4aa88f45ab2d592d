"""``python -m membudget.train rllib-ppo --env pmweek-flat|replay|tiers|shared-budget``: RLlib PPO (the second
training stack, :mod:`membudget.agents.rllib`) with EnvRunners in ``--num-env-runners`` processes. The run
directory keeps ``config.json``, ``metrics.csv`` (one row per iteration: env steps, mean episode return, wall
clock) and the RLlib checkpoint (``checkpoint/``). ``RAY_ADDRESS=auto`` (or ``ray://host:10001``) runs it on an
existing cluster; without it a local one is started (:func:`~membudget.studies.execution.ray_address`), even when
another cluster runs on the machine."""

from __future__ import annotations

import os
from dataclasses import dataclass

from membudget.envs.validation import check_int, check_known, check_number
from membudget.studies.execution import ray_address
from membudget.studies.runs import CHOICES, TrainCommand, parse_budget, record_training, start_run, write_metrics


@dataclass(frozen=True)
class RLlibPPOConfig:
    """RLlib PPO on one membudget environment."""

    env: str = "pmweek-flat"
    """pmweek-flat (membudget/PMWeekFlat-v0), replay, tiers or shared-budget (multi-agent, one shared policy)."""
    budget: str = "B10"
    """PMWeek budget (pmweek-flat and shared-budget): a level, an integer or none."""
    n_agents: int = 3
    """Assistants sharing the budget (shared-budget)."""
    iterations: int = 20
    """Training iterations."""
    num_env_runners: int = 2
    """EnvRunner processes."""
    train_batch_size: int = 1600
    """Env steps per iteration."""
    minibatch_size: int = 400
    """SGD minibatch."""
    num_epochs: int = 4
    """SGD epochs per iteration."""
    learning_rate: float = 3e-4
    """Adam step size."""
    seed: int = 0
    """RLlib's seed (debugging(seed=...))."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: rllib-ppo-<env>-seed<seed>)."""

    def __post_init__(self):
        check_known("env", self.env, CHOICES["env"])
        check_int("n_agents", self.n_agents, 1, 500)
        for name in ("iterations", "num_epochs"):
            check_int(name, getattr(self, name), 1)
        check_int("num_env_runners (0: sample in the driver)", self.num_env_runners, 0)
        check_int("minibatch_size", self.minibatch_size, 1)
        check_int("train_batch_size", self.train_batch_size, self.minibatch_size)
        check_number("learning_rate", self.learning_rate, 0, low_open=True)


def _env_config(cfg):
    if cfg.env == "pmweek-flat":
        return {"budget": parse_budget(cfg.budget)}
    if cfg.env == "shared-budget":
        return {"budget": parse_budget(cfg.budget), "n_agents": cfg.n_agents}
    return {}


def train_rllib(cfg: RLlibPPOConfig, command: str) -> str:
    import ray

    from membudget.agents.rllib import train_rllib_ppo

    run_dir = start_run("rllib-ppo", cfg, command, f"rllib-ppo-{cfg.env}-seed{cfg.seed}")
    owns = not ray.is_initialized()
    if owns:
        ray.init(address=ray_address(None), include_dashboard=False, log_to_driver=False)
    try:
        algo, history = train_rllib_ppo(cfg.env, cfg.iterations, _env_config(cfg),
                                        num_env_runners=cfg.num_env_runners, train_batch_size=cfg.train_batch_size,
                                        minibatch_size=cfg.minibatch_size, num_epochs=cfg.num_epochs,
                                        lr=cfg.learning_rate, seed=cfg.seed)
        algo.save(os.path.abspath(os.path.join(run_dir, "checkpoint")))
        algo.stop()
    finally:
        if owns:
            ray.shutdown()
    write_metrics(run_dir, list(history[0]), [list(r.values()) for r in history])
    last = history[-1]
    record_training(run_dir, last["wall_clock"], last["env_steps"])
    print(f"{run_dir}: {cfg.env}, {len(history)} iterations, {last['env_steps']} env steps, mean episode return "
          f"{last['episode_return_mean']:.4f} ({last['wall_clock']:.1f} s)")
    return run_dir


TRAIN_COMMANDS = {
    "rllib-ppo": TrainCommand(RLlibPPOConfig, "RLlib PPO on PMWeekFlat / ReplayStream / TierRouting / shared budget",
                              train_rllib, requires=("ray.rllib", "tree")),
}

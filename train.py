"""Training entry point (``python -m membudget.train`` or ``python train.py``): a thin command line over the
training runs the studies register (:class:`membudget.studies.runs.TrainCommand`).

Subcommands:

- ``ppo``: the native PPO with the per-resource actor on PMWeek-v0 (or ConversationPM-v0) at one budget — the
  study's learner, its defaults the settings chosen on validation weeks (``membudget.agents.ppo.PPOConfig``);
- ``sb3-ppo`` / ``sb3-maskable-ppo``: Stable-Baselines3 PPO / sb3-contrib MaskablePPO on PMWeek-v0 at one budget;
- ``sb3-ppo-conditioned``: one SB3 PPO trained across B5/B10/B15/B20 at once (the target-fraction feature tells it
  the budget);
- ``bc`` / ``dagger``: the per-resource student imitating the hindsight DP (behaviour cloning / DAgger);
- ``tiers``: the PPO tier router on TierRouting-v0 (optional behaviour-cloning warm start from an oracle);
- ``proactive-ppo``: SB3 PPO on ProactiveStream-v0 choosing the memory depth and the decision per event;
- ``replay-ppo``: SB3 PPO (``MlpPolicy``) on ReplayStream-v0;
- ``rllib-ppo``: RLlib PPO on PMWeekFlat-v0, ReplayStream-v0, TierRouting-v0 or the shared-budget env
  (multi-agent), EnvRunners in several processes (needs ``ray[rllib]``; docs/ray.md);
- ``sweep``: a Ray Tune search (Optuna, ASHA) over ``ppo``'s hyperparameters on the validation weeks
  4000-4029; writes ``best_config.json`` for ``ppo --config`` (needs ``membudget[ray]``).

Renamed in 0.2.0 (the old names still work for one release, with a warning): ``ppo-native`` → ``ppo``,
``maskable-ppo`` → ``sb3-maskable-ppo``, ``ppo-conditioned`` → ``sb3-ppo-conditioned``; 0.1.0's ``ppo`` (SB3's
PPO) is ``sb3-ppo``.

Configuration: flags, and optionally ``--config FILE`` (JSON, or YAML when the name ends in .yaml/.yml) whose keys
are the flag names (dashes or underscores); flags given on the command line override the file; unknown keys
are an error. Files are parsed as data only (json / yaml.safe_load), never evaluated.

Several seeds: ``--seeds 0,1,2`` trains one run per seed (one task each, with ``-seed<k>`` run names), in this
process or on Ray with ``--backend ray [--address ADDR] [--num-cpus N]`` (docs/ray.md); each seed's run is the
same on either backend.

Each run writes ``<out>/<name>/`` with the model, ``config.json`` (resolved config, command, seed, package
versions, training totals) and ``metrics.csv`` (held-out metrics); PMWeek learners also write
``learning_curve.csv`` / ``learning_curve.png``. ``python -m membudget.evaluate --model DIR`` evaluates a PMWeek
model like any other policy.
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
import warnings

STUDIES = (
    "membudget.studies.rl_vs_distillation",
    "membudget.studies.budgetmem",
    "membudget.studies.proactmem",
    "membudget.studies.limbo",
    "membudget.studies.rllib_stack",
    "membudget.studies.sweep",
)
"""Modules whose ``TRAIN_COMMANDS`` (``{name: TrainCommand}``) become subcommands. A new study adds one line."""


def commands() -> dict:
    out = {}
    for module in STUDIES:
        out.update(importlib.import_module(module).TRAIN_COMMANDS)
    return out


def deprecated_commands() -> dict:
    """``{old name: new name}`` of renamed subcommands (each study's ``DEPRECATED_COMMANDS``)."""
    out = {}
    for module in STUDIES:
        out.update(getattr(importlib.import_module(module), "DEPRECATED_COMMANDS", {}))
    return out


def main(argv=None):
    from membudget.studies.execution import add_backend_flags, make_executor
    from membudget.studies.runs import add_fields, load_config_file, resolve_config, run_seeds

    table = commands()
    argv = list(sys.argv[1:] if argv is None else argv)
    renamed = deprecated_commands()
    if argv and argv[0] in renamed:
        old, argv[0] = argv[0], renamed[argv[0]]
        warnings.warn(f"'python -m membudget.train {old}' is deprecated and will be removed in the next release; "
                      f"use '{argv[0]}'", DeprecationWarning, stacklevel=2)
        print(f"note: {old} is now called {argv[0]}; the old name works until the next release", file=sys.stderr)
    parser = argparse.ArgumentParser(prog="python -m membudget.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, cmd in table.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.help)
        add_fields(p, cmd.config, suppress=True, defaults=cmd.defaults)
        p.add_argument("--seeds", default=None, help="comma-separated seeds: one run per seed (multi-seed run)")
        add_backend_flags(p)
    args = vars(parser.parse_args(argv))
    cmd = table[args.pop("command")]
    seeds = args.pop("seeds")
    backend = {k: args.pop(k) for k in ("backend", "address", "num_cpus", "checkpoint_dir")}
    command = "python -m membudget.train " + " ".join(shlex.quote(a) for a in argv)
    config_path = args.pop("config", None)
    file_values = load_config_file(config_path) if config_path else {}
    cfg = resolve_config(cmd.config, args, file_values, cmd.defaults, source=config_path or "config")
    if seeds is None:
        if backend["backend"] != "local" or backend["address"] or backend["checkpoint_dir"]:
            raise SystemExit("--backend, --address and --checkpoint-dir apply to the seeds of --seeds; give "
                             "--seeds for a multi-seed run")
        return cmd.run(cfg, command)
    with make_executor(**backend) as executor:
        return run_seeds(cmd.run, cfg, command, [int(s) for s in seeds.split(",") if s.strip()], executor)


if __name__ == "__main__":
    main()

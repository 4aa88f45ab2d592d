"""Training entry point (``python -m membudget.train`` or ``python train.py``): a thin command line over the
training runs the studies register (:class:`membudget.studies.runs.TrainCommand`).

Subcommands:

- ``ppo``: the native PPO with the per-resource actor on PMWeek-v0 (or ConversationPM-v1) at one budget — the
  study's learner, its defaults the settings chosen on validation weeks (``membudget.agents.ppo.PPOConfig``);
- ``sb3-ppo`` / ``sb3-maskable-ppo``: Stable-Baselines3 PPO / sb3-contrib MaskablePPO on PMWeek-v0 at one budget;
- ``sb3-ppo-conditioned``: one SB3 PPO trained across B5/B10/B15/B20 at once (the target-fraction feature tells it
  the budget);
- ``bc`` / ``dagger``: the per-resource student imitating the hindsight DP (behaviour cloning / DAgger);
- ``tiers``: the PPO tier router on TierRouting-v0 (optional behaviour-cloning warm start from an oracle);
- ``proactive-ppo``: SB3 PPO on ProactiveStream-v1 (``--version 0``: v0) choosing the memory depth and the decision
  per event;
- ``replay-ppo``: SB3 PPO (``MlpPolicy``) on ReplayStream-v1 (``--version 0``: v0);
- ``rllib-ppo``: RLlib PPO on PMWeekFlat-v0, ReplayStream-v0, TierRouting-v0 or the shared-budget env
  (multi-agent), EnvRunners in several processes (needs ``ray[rllib]``; docs/ray.md);
- ``sweep``: a Ray Tune search (Optuna, ASHA) over ``ppo``'s hyperparameters on the validation weeks
  4000-4029; writes ``best_config.json`` for ``ppo --config`` (needs ``membudget[ray]``).

Renamed before the first release (the old names still work until it, with a warning): ``ppo-native`` → ``ppo``,
``maskable-ppo`` → ``sb3-maskable-ppo``, ``ppo-conditioned`` → ``sb3-ppo-conditioned``; the earlier ``ppo``
(SB3's PPO) is ``sb3-ppo``.

Configuration: flags, and optionally ``--config FILE`` (JSON, or YAML when the name ends in .yaml/.yml) whose keys
are the flag names (dashes or underscores); flags given on the command line override the file; unknown keys
are an error, and so is a file with no settings (empty). A run directory's ``config.json`` is a config file of the
same subcommand (its ``config`` entry is read). A boolean (YAML reads on / off as true / false) is read as on / off
for a setting whose choices are on / off (``progress_bar: off``). Files are parsed as data only (json /
yaml.safe_load), never evaluated.

Several seeds: ``--seeds 0,1,2`` trains one run per seed (one task each, with ``-seed<k>`` run names), in this
process or on Ray with ``--backend ray [--address ADDR] [--num-cpus N]`` (docs/ray.md); each seed's run is the
same on either backend.

Each run writes ``<out>/<name>/`` with the model, ``config.json`` (resolved config, command, seed, package
versions, training totals) and ``metrics.csv`` (the final evaluation's metrics: on PMWeek-v0 weeks 4010-4029 by
default, inside the validation range the learners select on; ``--eval-first-seed 8000`` for held-out ones); PMWeek
learners also write ``learning_curve.csv`` / ``learning_curve.png``. ``python -m membudget.evaluate --model DIR``
evaluates a PMWeek model like any other policy (a run trained in other settings than the evaluation's is refused).
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
import warnings

SUBCOMMANDS = {
    "ppo": "membudget.studies.rl_vs_distillation", "sb3-ppo": "membudget.studies.rl_vs_distillation",
    "sb3-maskable-ppo": "membudget.studies.rl_vs_distillation",
    "sb3-ppo-conditioned": "membudget.studies.rl_vs_distillation", "bc": "membudget.studies.rl_vs_distillation",
    "dagger": "membudget.studies.rl_vs_distillation", "tiers": "membudget.studies.budgetmem",
    "proactive-ppo": "membudget.studies.proactmem", "replay-ppo": "membudget.studies.limbo",
    "rllib-ppo": "membudget.studies.rllib_stack", "sweep": "membudget.studies.sweep",
}
"""``python -m membudget.train <name>``: the module whose ``TRAIN_COMMANDS`` (``{name: TrainCommand}``) defines it,
imported only when that subcommand runs (a run, or a mistake, pays for its own module's imports alone). A new study
adds its lines."""
RENAMED = {"ppo-native": "ppo", "maskable-ppo": "sb3-maskable-ppo", "ppo-conditioned": "sb3-ppo-conditioned"}
"""Names of 0.1.0 that still work for one release, with a warning: ``old: new`` (0.1.0's ``ppo`` was SB3's PPO, now
``sb3-ppo``; ``ppo`` is the native PPO)."""


def commands(names=None) -> dict:
    """``{name: TrainCommand}`` of the subcommands ``names`` (default: all, which imports every study)."""
    out = {}
    for module in dict.fromkeys(SUBCOMMANDS[n] for n in (names or SUBCOMMANDS)):
        out.update(importlib.import_module(module).TRAIN_COMMANDS)
    return {n: out[n] for n in (names or SUBCOMMANDS)}


def main(argv=None):
    from membudget.envs.validation import check_int, parse_seeds
    from membudget.studies.cli import (MAX_SEED, check_extras, check_run_config, optional_extras, plain, usage_error,
                                       user_input)
    from membudget.studies.execution import add_backend_flags, make_executor
    from membudget.studies.runs import add_fields, load_config_file, resolve_config, run_seeds

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in RENAMED:
        old, argv[0] = argv[0], RENAMED[argv[0]]
        warnings.warn(f"'python -m membudget.train {old}' is deprecated and will be removed in the next release; "
                      f"use '{argv[0]}'", DeprecationWarning, stacklevel=2)
        print(f"note: {old} is now called {argv[0]}; the old name works until the next release", file=sys.stderr)
    if argv and not argv[0].startswith("-") and argv[0] not in SUBCOMMANDS:
        usage_error("python -m membudget.train", f"unknown subcommand {argv[0]!r}; the subcommands are "
                                                 f"{', '.join(SUBCOMMANDS)}")
    table = commands([argv[0]] if argv and argv[0] in SUBCOMMANDS else None)
    parser = argparse.ArgumentParser(prog="python -m membudget.train", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, cmd in table.items():
        p = sub.add_parser(name, help=plain(cmd.help), description=plain(cmd.help))
        add_fields(p, cmd.config, suppress=True, defaults=cmd.defaults)
        p.add_argument("--seeds", default=None, help="seeds, comma-separated or ranges (0-2,7): one run per seed "
                                                     "(multi-seed run)")
        add_backend_flags(p)
    args = vars(parser.parse_args(argv))
    name = args.pop("command")
    cmd, prog = table[name], f"python -m membudget.train {name}"
    seeds = args.pop("seeds")
    backend = {k: args.pop(k) for k in ("backend", "address", "num_cpus", "checkpoint_dir")}
    command = "python -m membudget.train " + " ".join(shlex.quote(a) for a in argv)
    config_path = args.pop("config", None)
    with optional_extras(prog):
        check_extras(cmd.requires)
    with user_input(prog):  # every mistake in the flags or the config file is one line, before any work
        seed_list = None if seeds is None else [check_int("--seeds", s, 0, MAX_SEED) for s in parse_seeds(seeds)]
        file_values = load_config_file(config_path, name) if config_path else {}
        cfg = resolve_config(cmd.config, args, file_values, cmd.defaults, source=config_path or "config")
        cmd.check_inputs(cfg)
        check_run_config(cfg)  # last: it makes the output folder
    if seed_list is None and (backend["backend"] != "local" or backend["address"] or backend["checkpoint_dir"]):
        usage_error(prog, "--backend, --address and --checkpoint-dir apply to the seeds of --seeds; give --seeds "
                          "for a multi-seed run")
    with optional_extras(prog):
        if seed_list is None:
            return cmd.function()(cfg, command)
        with make_executor(**backend) as executor:
            return run_seeds(cmd.function(), cfg, command, seed_list, executor)


if __name__ == "__main__":
    main()

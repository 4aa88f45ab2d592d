"""How long a newcomer waits for a mistake to be refused: each mistake of :data:`MISTAKES` (the dozen a newcomer
makes, the same table tests/test_cli.py checks for one line, exit status 2 and nothing written) run as ``python -m
membudget.<module> ...`` in a fresh process from an empty folder, its wall clock and CPU time measured.

Target: every mistake refused in under 2 s. The wall clock depends on the machine's load (a shared machine slows a
process that waits for a core), the CPU time (user + system) much less: both are printed, with the load average.

    python -m membudget.bench.cli_errors [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

TARGET_SECONDS = 2.0
"""A mistake is refused within this many seconds."""

MISTAKES = {
    "malformed budget name": ("train", ["bc", "--budget", "B7"], r"budget 'B7' is not a level; the levels are B5, B10"),
    "lower-case budget": ("train", ["bc", "--budget", "b10"], r"did you mean 'B10'"),
    "budget list with a bad level": ("train", ["sb3-ppo-conditioned", "--budgets", "B5,B9"], r"'B9' is not a level"),
    "evaluate at a level no gate is calibrated for": ("evaluate", ["--budgets", "B7"], r"'B7' is not a level"),
    "unknown policy": ("evaluate", ["--policies", "Foo"], r"unknown policy 'Foo'; known: AllRelevant"),
    "unknown train subcommand": ("train", ["ppo2"], r"unknown subcommand 'ppo2'; the subcommands are ppo, sb3-ppo"),
    "unknown study": ("evaluate", ["reprot"], r"unknown study 'reprot'; the studies are report, structure"),
    "missing model file": ("evaluate", ["--model", "/nonexistent/model.zip"], r"no model at /nonexistent/model.zip"),
    "negative seed": ("train", ["ppo", "--seed", "-1"], r"seed must be an int in \[0, 4294967295\], got -1"),
    "bad seed list": ("train", ["ppo", "--seeds", "0,x"], r"--seeds: 'x' is neither a number nor a range"),
    "seed named twice": ("train", ["ppo", "--seeds", "1,1"], r"--seeds: '1,1' names no number or one twice"),
    "run outside --out": ("train", ["ppo", "--name", "../elsewhere"], r"name must be one folder name"),
    "unknown cost profile": ("train", ["ppo", "--cost-profile", "flat"], r"unknown cost_profile 'flat'"),
    "missing start model": ("train", ["ppo", "--init-from", "no-such-run"], r"--init-from 'no-such-run': no student"),
    "bad week range": ("evaluate", ["--first-seed", "-5"], r"first_seed must be a non-negative int, got -5"),
    "no weeks": ("train", ["bc", "--eval-weeks", "0"], r"eval_weeks must be a positive int, got 0"),
    "no epochs": ("train", ["bc", "--epochs", "0"], r"epochs must be a positive int, got 0"),
    "unwritable --out": ("train", ["bc", "--out", "/proc/membudget-runs"], r"out '/proc/membudget-runs' cannot be made"),
    "unwritable evaluate --out": ("evaluate", ["--out", "/proc/membudget-out"], r"out '/proc/membudget-out' cannot be"),
    "unknown config key": ("train", ["ppo", "--config", "{config}"], r"unknown keys \['no_such_field'\]"),
    "bad --engine": ("train", ["ppo", "--engine", "jax"], r"engine must be one of \('auto', 'autograd', 'compiled'\)"),
    "not on/off": ("train", ["ppo", "--keep-best", "yes"], r"argument --keep-best: expected on or off, got 'yes'"),
    "training streams reaching the held-out ones": ("train", ["proactive-ppo", "--seed", "9998"],
                                                    r"training seeds 9998\.\.10001 would reach the held-out"),
    "--quick with a flag it fixes": ("evaluate", ["--quick", "--budgets", "B999"],
                                     r"--quick runs the README's main job with the default .*drop --quick to set "
                                     r"--budgets"),
    "missing Ray": ("train", ["rllib-ppo", "--env", "replay"],
                    r'this needs ray.rllib, which is not installed: pip install "ray\[rllib\]"'),
}
"""``{mistake: (module of membudget, argv, the refusal's last line matches this)}``; ``{config}`` stands for a
config file with an unknown key (:func:`config_with_an_unknown_key`)."""


def config_with_an_unknown_key(folder) -> str:
    path = os.path.join(folder, "cfg.json")
    with open(path, "w") as f:
        json.dump({"learning_rate": 1e-3, "no_such_field": 1}, f)
    return path


def time_mistake(module: str, argv: list, folder: str) -> tuple:
    """``(wall seconds, CPU seconds, exit status)`` of one refusal in a fresh process started in ``folder``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", f"membudget.{module}", *argv], capture_output=True, cwd=folder)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.returncode


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.cli_errors", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each mistake (the median is reported)")
    args = parser.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    worst = []
    with tempfile.TemporaryDirectory() as folder:
        config = config_with_an_unknown_key(folder)
        for name, (module, args_, _) in MISTAKES.items():
            runs = [time_mistake(module, [a.replace("{config}", config) for a in args_], folder)
                    for _ in range(args.rounds)]
            wall, cpu = (float(np.median([r[i] for r in runs])) for i in (0, 1))
            worst.append((wall, cpu, name))
            print(f"{name:48s} exit {runs[0][2]}  wall {wall:5.2f} s  CPU {cpu:5.2f} s")
    wall, cpu = max(w[0] for w in worst), max(w[1] for w in worst)
    print(f"target: every mistake refused in < {TARGET_SECONDS:.0f} s — slowest median wall {wall:.2f} s "
          f"({max(worst)[2]}), slowest median CPU {cpu:.2f} s: {'met' if wall < TARGET_SECONDS else 'not met'} "
          f"(load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    return worst


if __name__ == "__main__":
    main()

"""Run directories and configurations of ``python -m membudget.train`` (CleanRL / RL Zoo style).

Every training subcommand is a :class:`TrainCommand`: a typed config dataclass (one docstring per field; every
field is a command-line flag and a key of ``--config FILE``) and a runner ``run(cfg, command) -> run directory``.
A study registers its commands beside its own code; ``train.py`` only lists them.

Each run directory keeps ``config.json`` (resolved config, command, seed, package versions, training totals),
``metrics.csv`` and, for PMWeek learners, ``learning_curve.csv`` / ``learning_curve.png``.
"""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import functools
import importlib
import inspect
import io
import itertools
import json
import os
import re
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from membudget.agents.configs import TASK_NAMES
from membudget.envs.validation import MAX_CONFIG_BYTES
from membudget.agents.proactive_ppo import WARM_STARTS
from membudget.studies.cli import plain
from membudget.studies.protocol import machine, parse_budget, provenance


@dataclass(frozen=True)
class TrainCommand:
    """One ``python -m membudget.train`` subcommand."""

    config: type
    """The config dataclass; every field is a flag."""
    help: str
    """One line for ``--help``."""
    run: Callable | str
    """``run(cfg, command) -> run directory``, or ``"module:function"`` naming it: imported only when the command
    runs, so that a mistake in the flags is reported without the training code's imports."""
    defaults: dict = field(default_factory=dict)
    """Overrides of the config's defaults for this subcommand."""
    requires: tuple = ()
    """Modules of optional extras the subcommand needs (checked before any work)."""
    check: Callable | str | None = None
    """``check(cfg)``, or ``"module:function"`` naming it: reads the files the run will read (a model to start
    from), raising ``ValueError`` / ``FileNotFoundError`` naming the file, with the flags' checks, before any work."""

    def function(self) -> Callable:
        """:attr:`run` as a function."""
        return _resolve(self.run)

    def check_inputs(self, cfg) -> None:
        """:attr:`check` on ``cfg``, if the command has one."""
        if self.check is not None:
            _resolve(self.check)(cfg)


def _resolve(target: Callable | str) -> Callable:
    if callable(target):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def run_seed(run, cfg, command, seed):
    """One seed of a multi-seed training run (one task): ``cfg`` with ``seed`` (and ``-seed<k>`` appended to an
    explicit run name), one torch thread so that every backend computes the same numbers."""
    import torch

    torch.set_num_threads(1)
    named = {"name": f"{cfg.name}-seed{seed}"} if getattr(cfg, "name", "") else {}
    return run(dataclasses.replace(cfg, seed=int(seed), **named), f"{command} (seed {seed})")


def model_to_bytes(model) -> bytes:
    """An SB3 model saved as a zip in memory: how a training task hands its model back (small, and loadable in any
    process)."""
    buf = io.BytesIO()
    model.save(buf)
    return buf.getvalue()


def ppo_from_bytes(data: bytes):
    """The SB3 PPO model of :func:`model_to_bytes`, on the CPU."""
    from stable_baselines3 import PPO

    return PPO.load(io.BytesIO(data), device="cpu")


def run_seeds(run, cfg, command, seeds, executor):
    """Train ``cfg`` once per seed through ``executor`` (one task per seed); returns the run directories in seed
    order."""
    import functools

    return executor.map(functools.partial(run_seed, run, cfg, command), [int(s) for s in seeds])


def show_bar(setting: str) -> bool:
    return sys.stderr.isatty() if setting == "auto" else setting == "on"


def net_arch(text) -> tuple:
    try:
        arch = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--net-arch must be comma-separated integers, got {text!r}") from None
    if not arch or min(arch) <= 0:
        raise ValueError(f"--net-arch must name at least one positive layer size, got {text!r}")
    return arch


RUN_FILES = ("config.json", "metrics.csv", "learning_curve.csv", "learning_curve.png", "model.zip", "model.npz",
             "best_config.json", "trials.csv", "checkpoint", "tune")
"""What a training run writes into its directory (``checkpoint``: RLlib's, ``tune``: a sweep's, folders)."""


def start_run(subcommand: str, cfg, command: str, default_name: str) -> str:
    """The run directory ``<out>/<name>`` made, with ``config.json`` written; an earlier run there is overwritten:
    its :data:`RUN_FILES` are removed first (what the new run does not write would otherwise stay beside it, e.g. a
    learning curve, a model of another format or an RLlib checkpoint), and a line on standard error says so. Other
    files stay."""
    run_dir = os.path.join(cfg.out, cfg.name or default_name)
    if os.path.exists(os.path.join(run_dir, "config.json")):
        print(f"note: {run_dir} holds an earlier run; it is overwritten (--name gives this run another folder)",
              file=sys.stderr)
        for name in RUN_FILES:
            entry = os.path.join(run_dir, name)
            if os.path.isdir(entry) and not os.path.islink(entry):
                shutil.rmtree(entry)
            elif os.path.lexists(entry):
                os.unlink(entry)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump({"subcommand": subcommand, "config": dataclasses.asdict(cfg), "command": command, "seed": cfg.seed,
                   **provenance()}, f, indent=1)
    return run_dir


def write_metrics(run_dir, header, rows) -> None:
    """``metrics.csv`` of a run directory: one header row, then ``rows``."""
    with open(os.path.join(run_dir, "metrics.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def record_training(run_dir, wall_clock_s, env_steps, **extra) -> None:
    """Add the training totals (and ``extra``) to the run's ``config.json`` written by :func:`_start_run`, and record
    the machine again: training has imported torch by now, so its CPU capability is known. ``torch_threads``: torch's
    thread count as training left it, the count it trained with (float sums, and so the weights, depend on it)."""
    path = os.path.join(run_dir, "config.json")
    with open(path) as f:
        meta = json.load(f)
    meta["machine"] = machine()
    torch = sys.modules.get("torch")
    meta["training"] = {"wall_clock_s": float(wall_clock_s), "env_steps": int(env_steps),
                        "torch_threads": None if torch is None else torch.get_num_threads(), **extra}
    with open(path, "w") as f:
        json.dump(meta, f, indent=1)


def _task(task):
    if task is None:  # imported here: the command line checks its flags without the environments' imports
        from membudget.agents.tasks import PMWEEK as task
    return task


def finish_run(run_dir, subcommand, cfg, history, policy, budgets, env_kwargs, task=None, training=None):
    """metrics.csv (the task's metrics on the evaluation episodes ``cfg.eval_first_seed`` on), learning curves, a
    line on stdout naming which episodes those are; adds the training totals (the last history row's ``wall_clock``
    and ``env_steps``, and the entries of ``training``) to config.json. ``task``: an :mod:`membudget.agents.tasks`
    task (default PMWeek-v0's)."""
    task = _task(task)
    train_seconds, env_steps = history[-1]["wall_clock"], history[-1]["env_steps"]
    seeds = range(cfg.eval_first_seed, cfg.eval_first_seed + cfg.eval_weeks)
    rows, summary = [], []
    for b in budgets:
        res = task.rollout(policy, seeds, budget=parse_budget(b, task.levels),
                           **{"per_step_cap": getattr(cfg, "per_step_cap", 2), **env_kwargs})
        for i, s in enumerate(seeds):
            rows.append([b, s, *(res[key][i] for key, _ in task.metrics)])
        summary.append(f"{b}: " + ", ".join(
            f"{label} {np.nanmean(res[key]):.{1 if key == 'realized_cost' else 3}f}" for key, label in task.metrics))
    write_metrics(run_dir, ["budget", "seed", *(key for key, _ in task.metrics)], rows)
    if cfg.learning_curve == "on":
        write_learning_curve(history, run_dir, title=f"{subcommand} ({', '.join(map(str, budgets))})", task=task)
    record_training(run_dir, train_seconds, env_steps, **(training or {}))
    kind = "held-out" if cfg.eval_first_seed + cfg.eval_weeks > task.held_out_first else "validation-range"
    print(f"{run_dir}: {task.episodes} {seeds.start}-{seeds.stop - 1} ({kind}) " + "; ".join(summary)
          + f" (training {train_seconds:.1f} s, {env_steps} env steps)")
    return run_dir


def write_learning_curve(history, run_dir, title="", task=None):
    """``learning_curve.csv`` (every key of the history rows) and ``learning_curve.png`` in ``run_dir``."""
    import matplotlib

    task = _task(task)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(dict.fromkeys(k for row in history for k in row))
    with open(os.path.join(run_dir, "learning_curve.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(history)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    x = [r["env_steps"] for r in history]
    val = f"val_{task.quality}"
    per_budget = [k for k in keys if k.startswith(f"{val}_")]
    for k in per_budget if len(per_budget) > 1 else [val]:
        ax.plot(x, [r.get(k, np.nan) for r in history], marker="o", label=k.replace(f"{val}_", "") or k)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(task.validation_label())
    ax.set_title(title, fontsize=9)
    if len(per_budget) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(run_dir, "learning_curve.png"), dpi=110)
    plt.close(fig)


CHOICES = {"progress_bar": ("on", "off", "auto"), "learning_curve": ("on", "off"), "family": ("db", "os"),
           "profile": ("strong", "mid", "weak"), "strategy": ("implementation", "reasoning", "capacity"),
           "population": ("locomo", "longmemeval", "hotpotqa"), "backbone": ("llama", "qwen"),
           "lam_conditioned": ("on", "off"), "use_beta": ("on", "off"), "normalize_reward": ("on", "off"),
           "scope": ("sports", "home", "code"), "memory": ("full", "no_replay_gate", "no_validation"),
           "bc_teacher": ("expected", "hindsight"), "policy": ("per-resource", "mlp"), "context": ("on", "off"),
           "critic_counts": ("on", "off"), "keep_best": ("on", "off"), "actor": ("per-resource", "flat-mlp"),
           "warm_start": WARM_STARTS,
           "env": ("pmweek-flat", "replay", "tiers", "shared-budget"), "task": TASK_NAMES}


def _constants(text: str, module) -> str:
    """``text`` with each name of an int constant of ``module`` (an upper-case name such as ``AUTO_COMPILED_STEPS``)
    replaced by its value (``1,000,000``): a docstring names the constant, its reader sees the number."""
    def value(match):
        v = getattr(module, match.group(0), None)
        return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else match.group(0)

    return re.sub(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", value, text)


@functools.cache
def field_docs(cls) -> dict:
    """``{field: its docstring}`` of a config dataclass and its bases (the string literal under each field; an int
    constant of the class's module it names is shown as its value, :func:`_constants`)."""
    docs = {}
    for klass in reversed(cls.__mro__[:-1]):
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        except (OSError, TypeError):
            continue
        for a, b in itertools.pairwise(body):
            if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr) \
                    and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
                docs[a.target.id] = _constants(" ".join(b.value.value.split()), sys.modules.get(klass.__module__))
    return docs


def flag_help(cls, name: str, default=dataclasses.MISSING) -> str:
    """The ``--help`` text of field ``name`` of ``cls``: its docstring (argparse-escaped) and its default."""
    doc = plain(field_docs(cls).get(name, "")).replace("%", "%%")
    return doc if default is dataclasses.MISSING else f"{doc} (default: {default})".lstrip()


def on_off(text: str) -> bool:
    """A boolean flag's value: ``on`` or ``off`` (never argparse's ``type=bool``, for which "off" is true)."""
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")
    return text == "on"


def widths(text: str) -> tuple:
    """A tuple-of-widths flag's value: comma-separated positive integers, e.g. ``64,64``."""
    try:
        return net_arch(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}") from None


def _shown(value):
    """A default as it is typed on the command line."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return ",".join(map(str, value)) if isinstance(value, tuple) else value


def add_fields(parser, cls, suppress=False, defaults=None):
    """A flag per field of the config dataclass ``cls``: bool fields take on / off, tuple fields comma-separated
    integers, the others their default's type (with :data:`CHOICES` where listed)."""
    defaults = defaults or {}
    for f in dataclasses.fields(cls):
        default = defaults.get(f.name, f.default)
        kind = type(f.default)
        kw = {"type": {bool: on_off, tuple: widths}.get(kind, kind),
              "default": argparse.SUPPRESS if suppress else default, "help": flag_help(cls, f.name, _shown(default))}
        if kind is bool:
            kw["metavar"] = "{on,off}"
        elif kind is tuple:
            kw["metavar"] = "N[,N...]"
        elif f.name in CHOICES:
            kw["choices"] = CHOICES[f.name]
        parser.add_argument(f"--{f.name.replace('_', '-')}", **kw)
    if suppress:
        parser.add_argument("--config", default=argparse.SUPPRESS,
                            help="JSON or YAML file of flag values (flags on the command line override it)")


MAX_CONFIG_DEPTH = 4
"""Deepest nesting of a ``--config`` file (the top-level mapping is depth 1; a list value is depth 2)."""


def _yaml_config(path: str, text: str):
    """A YAML config parsed with ``yaml.safe_load`` after its events are checked: no anchors or aliases (a few
    hundred bytes of nested aliases expand into hundreds of megabytes) and at most :data:`MAX_CONFIG_DEPTH` levels
    of nesting."""
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML ships with most stacks
        raise ImportError("reading a YAML config needs PyYAML (pip install pyyaml); or use JSON") from None
    try:
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise ValueError(f"{path}: YAML anchors and aliases (&name, *name, <<) are not accepted in a "
                                 "config; write every value out")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_CONFIG_DEPTH:
                    raise ValueError(f"{path}: nested deeper than {MAX_CONFIG_DEPTH} levels; a config maps flag "
                                     "names to values or lists of values")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({e})") from None


def _depth(value) -> int:
    """Nesting depth of parsed JSON (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def load_config_file(path: str, subcommand: str | None = None) -> dict:
    """Flag values from a JSON or YAML file (data only: json.loads / yaml.safe_load); keys may use dashes. Before
    any field is read, a file over :data:`MAX_CONFIG_BYTES`, nested deeper than :data:`MAX_CONFIG_DEPTH`, with
    YAML anchors or aliases, that is not UTF-8 JSON / YAML, or that holds no mapping (an empty file, ``null``, a
    list) is refused with a ``ValueError`` naming it. A run directory's ``config.json`` (:func:`start_run`: the keys
    ``subcommand`` and ``config``) gives its ``config`` entry, when its subcommand is ``subcommand`` (a run of
    another subcommand is refused naming both; ``subcommand`` None: any run's)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such config file")
    size = os.path.getsize(path)
    if size > MAX_CONFIG_BYTES:
        raise ValueError(f"{path}: {size} bytes; config files are limited to {MAX_CONFIG_BYTES} bytes")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e})") from None
    if path.endswith((".yaml", ".yml")):
        data = _yaml_config(path, text)
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e}); YAML files must end in .yaml or .yml") from None
        except RecursionError:
            raise ValueError(f"{path}: nested deeper than {MAX_CONFIG_DEPTH} levels") from None
        if _depth(data) > MAX_CONFIG_DEPTH:
            raise ValueError(f"{path}: nested deeper than {MAX_CONFIG_DEPTH} levels; a config maps flag names to "
                             "values or lists of values")
    if data is None:  # an empty YAML file, one of comments only, or null
        raise ValueError(f"{path}: holds no settings (empty, or null); the config must be a mapping of flag names "
                         "to values")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the config must be a mapping of flag names to values")
    if "subcommand" in data and "config" in data:  # a run directory's config.json: its settings are its config entry
        if subcommand is not None and data["subcommand"] != subcommand:
            raise ValueError(f"{path}: the config.json of a {data['subcommand']!r} run; its settings are "
                             f"{data['subcommand']}'s, not {subcommand}'s")
        data = data["config"]
        if not isinstance(data, dict):
            raise ValueError(f"{path}: the run's config entry must be a mapping of flag names to values")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def resolve_config(cls, given: dict, file_values: dict, defaults=None, source="config"):
    """Dataclass defaults < subcommand defaults < file < flags; file values are type-checked."""
    values = {f.name: f.default for f in dataclasses.fields(cls)}
    values.update(defaults or {})
    types = {f.name: type(f.default) for f in dataclasses.fields(cls)}
    unknown = sorted(set(file_values) - set(types))
    if unknown:
        raise ValueError(f"{source}: unknown keys {unknown}; known: {sorted(types)}")
    for k, v in file_values.items():
        t = types[k]
        if t is bool and v in ("on", "off"):
            v = v == "on"
        if t is str and isinstance(v, bool) and {"on", "off"} <= set(CHOICES.get(k, ())):
            v = "on" if v else "off"  # YAML reads on / off as booleans: progress_bar: off
        if t is tuple:
            try:
                v = net_arch(",".join(map(str, v)) if isinstance(v, list) else v)
            except (ValueError, TypeError):
                raise ValueError(f"{source}: {k} must be positive integers (a list or 64,64), got {v!r}") from None
        if t is str and isinstance(v, list):  # e.g. budgets: [B5, B10] or net_arch: [64, 64]
            v = ",".join(str(x) for x in v)
        if t is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if t is float and isinstance(v, str):  # YAML 1.1 reads 1e-3 as a string
            try:
                v = float(v)
            except ValueError:
                pass
        if t is str and isinstance(v, int) and not isinstance(v, bool):  # e.g. budget: 42
            v = str(v)
        if not isinstance(v, t) or (isinstance(v, bool) and t is not bool):
            raise ValueError(f"{source}: {k} must be {'on or off' if t is bool else t.__name__}, got {v!r}")
        if t is not bool and k in CHOICES and v not in CHOICES[k]:
            raise ValueError(f"{source}: {k} must be one of {CHOICES[k]}, got {v!r}")
        values[k] = v
    values.update(given)
    return cls(**values)

"""Argument checks shared by the environments, baselines, teachers and agents: an integer or a finite real
number within bounds, never a ``bool`` (``True`` is an ``int`` to Python), nothing silently clipped."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import numbers
import os
import zipfile
import zlib
from collections.abc import Mapping

import numpy as np

MAX_REWARD_WEIGHT = 1e6
"""Largest weight of a reward term given as an argument (a cost weight, a token weight, a penalty): with each term
bounded so, every step's reward and every episode's return stay finite float64 numbers (1e308 made them infinite)."""


def _bounds(low, high, low_open=False, high_open=False) -> str:
    low, high = (f"{b:g}" if isinstance(b, float) else b for b in (low, high))
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '>='} {low}"
    if high is not None:
        return f" {'<' if high_open else '<='} {high}"
    return ""


def check_known(what: str, value, known, shown=None) -> None:
    """``ValueError`` "unknown ``what`` ``value``; expected one of ..." unless ``value`` is in ``known`` (the
    message lists ``shown``, default ``known``); an unhashable ``value`` is unknown to a dict or set."""
    try:
        ok = value in known
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"unknown {what} {value!r}; expected one of {known if shown is None else shown}")


def check_int(name, value, low=None, high=None, *, none_ok=False):
    """``value`` as an ``int`` when it is an integer (Python or NumPy, not a bool) in ``[low, high]`` (either
    bound optional); ``None`` passes when ``none_ok``. Otherwise ``ValueError`` naming ``name``."""
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
            or (low is not None and value < low) or (high is not None and value > high):
        kind = {1: "a positive int", 0: "a non-negative int"}.get(low) if high is None else None
        kind = kind or "an int" + _bounds(low, high)
        raise ValueError(f"{name} must be {kind}{' or None' if none_ok else ''}, got {value!r}")
    return int(value)


def check_number(name, value, low=None, high=None, *, low_open=False, high_open=False, none_ok=False):
    """``value`` as a ``float`` when it is a finite real number (not a bool) within the bounds (``low_open`` /
    ``high_open``: strict); ``None`` passes when ``none_ok``. Otherwise ``ValueError`` naming ``name``."""
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or (low is not None and (value < low or (low_open and value == low))) \
            or (high is not None and (value > high or (high_open and value == high))):
        raise ValueError(f"{name} must be a finite number{_bounds(low, high, low_open, high_open)}"
                         f"{' or None' if none_ok else ''}, got {value!r}")
    return float(value)


def check_bool(name, value) -> bool:
    """``value`` as a ``bool`` when it is one (Python or NumPy); anything else (``0``, ``"no"``, ``None``, NaN)
    raises ``ValueError`` naming ``name`` instead of being read by its truth value."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def check_options(options, supported=None) -> dict:
    """A ``reset`` call's ``options`` as a dict: ``None`` is no option; a mapping may name only the keys in
    ``supported`` (``None``: any key). Anything else (a string, a list, unknown keys) raises naming what is
    supported."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
    unknown = [] if supported is None else [k for k in options if k not in supported]
    if unknown:
        raise ValueError(f"unknown reset options {sorted(map(str, unknown))}; supported: "
                         f"{', '.join(repr(k) for k in supported) or 'none'}")
    return dict(options)


def int_flag(low: int, high: int | None = None):
    """An argparse ``type`` for an integer flag of at least ``low`` (and at most ``high``): counts of weeks,
    episodes, seeds, steps, rounds (``low=1``, or 0 where 0 means "none"), first seeds (``low=0``). argparse
    refuses anything else before any work, naming the flag (exit status 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be an integer{_bounds(low, high)}, got {text!r}")
        return value

    parse.__name__ = f"int >= {low}"
    return parse


def number_flag(low=None, high=None, *, low_open: bool = False):
    """An argparse ``type`` for a real-number flag: finite and within the bounds (``low_open``: strictly above
    ``low``). argparse refuses anything else (NaN, inf, out of range) before any work, naming the flag (exit
    status 2)."""
    def parse(text: str) -> float:
        try:
            return check_number("value", float(text), low, high, low_open=low_open)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a finite number{_bounds(low, high, low_open)}, got "
                                             f"{text!r}") from None

    parse.__name__ = "number"
    return parse


def parse_seeds(text: str, name: str = "--seeds") -> list:
    """``"0,1,2"`` or inclusive ranges ``"12-60"``, or both (``"0-2,7"``): the seeds in order. A part that is neither
    a number nor a range (a negative number among them), an empty list or a seed named twice raises ``ValueError``
    naming ``name`` (the flag)."""
    seeds = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo and dash and hi.isdigit():  # "-1": a negative number, not a range
            raise ValueError(f"{name}: {part.strip()!r} is negative; seeds are integers >= 0 (like 0,1,2) or ranges "
                             "like 12-60")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"{name}: {part!r} is neither a number nor a range like 12-60")
        if int(hi or lo) < int(lo):
            raise ValueError(f"{name}: the range {part.strip()!r} runs backwards (write it low-high)")
        seeds += list(range(int(lo), int(hi or lo) + 1))
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"{name}: {text!r} names no number or one twice")
    return seeds


def seeds_flag(name: str):
    """An argparse ``type`` for a list of seeds (:func:`parse_seeds`): argparse refuses anything else before any
    work, with the reason (exit status 2)."""
    def parse(text: str) -> list:
        try:
            return parse_seeds(text, name)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix(f"{name}: ")) from None

    parse.__name__ = "seeds"
    return parse


EXTRAS = {"ray": "membudget[ray]", "optuna": "membudget[ray]", "ray.rllib": "ray[rllib]", "tree": "ray[rllib]",
          "minari": "membudget[minari]", "h5py": "membudget[minari]", "torchrl": "membudget[interop]",
          "tensordict": "membudget[interop]", "tianshou": "membudget[interop]", "rl_zoo3": "membudget[interop]",
          "supersuit": "membudget[interop]", "mkdocs": "membudget[docs]", "mabwiser": "membudget[test]"}
"""Modules of the optional extras: ``module: what to pip install``. A dotted name is looked up before its parents:
RLlib (``ray.rllib``) and its dependencies (dm-tree's ``tree``) come with ``ray[rllib]``, not with membudget's ray
extra (Ray core, Tune and Optuna)."""


def check_extras(modules) -> None:
    """Each of ``modules`` (dotted names) can be imported, or ``ModuleNotFoundError`` names the first missing one."""
    import importlib.util

    for name in modules:
        root = name.split(".")[0]
        if importlib.util.find_spec(root) is None or importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def missing_extra(error: ModuleNotFoundError) -> str | None:
    """The line a command prints for ``error``, a missing module of an optional extra: what it needs and the install
    command of :data:`EXTRAS` (the longest dotted part of the module's name found there), or None for a module of
    no extra."""
    parts = (error.name or "").split(".")
    for n in range(len(parts), 0, -1):
        module = ".".join(parts[:n])
        if module in EXTRAS:
            return f'this needs {module}, which is not installed: pip install "{EXTRAS[module]}"'
    return None


def make_folder(name: str, path: str) -> None:
    """The output folder ``path`` made (the last check, once everything else passed) or a ``ValueError`` naming
    ``name`` when it cannot be."""
    try:
        os.makedirs(path or ".", exist_ok=True)
    except OSError as e:
        raise ValueError(f"{name} {path!r} cannot be made: {e.strerror}") from None
    if not os.access(path or ".", os.W_OK | os.X_OK):
        raise ValueError(f"{name} {path!r} is not a writable folder")


def make_file_folder(name: str, path: str) -> None:
    """The folder of the output file ``path`` made (:func:`make_folder`, the last check, before any work) or a
    ``ValueError`` naming ``name`` and ``path``: its folder cannot be made, or ``path`` is a folder."""
    if os.path.isdir(path):
        raise ValueError(f"{name} {path!r} is a folder; give the path of a file")
    make_folder(f"{name} {path!r}: its folder", os.path.dirname(path))


def observation_entry(observation, key: str):
    """``observation[key]`` of a ``PMWeek-v0``-style ``Dict`` observation (one, or a batch), for the policies that
    read one (the baselines, the threshold gates, the schedules, the online planners): an observation that is no dict raises
    ``TypeError``, one without ``key`` ``ValueError`` saying it lacks the key (not a bare ``KeyError``)."""
    if not isinstance(observation, Mapping):
        raise TypeError(f"observation must be a dict observation (PMWeek-v0's Dict space, with the key {key!r}), got "
                        f"{type(observation).__name__}")
    if key not in observation:
        raise ValueError(f"observation lacks the {key!r} key this policy reads (PMWeek-v0's Dict observation has "
                         f"'budget', 'mask' and 'resources'), got the keys {sorted(map(str, observation))}")
    return observation[key]


MAX_CONFIG_BYTES = 1 << 20
"""Largest config file read: a ``--config`` file, or a run directory's ``config.json`` record (a few kB)."""


_INTEGER_SCALARS = frozenset({int, *(np.dtype(code).type for code in np.typecodes["AllInteger"]
                                     if np.can_cast(code, np.int64))})
"""Python's int and the NumPy integer scalar types that cast safely to int64 (not uint64, not bool)."""


def check_discrete_action(action, n: int) -> int:
    """``action`` as an ``int`` when it is a member of ``Discrete(n)`` in one of the forms Gymnasium's
    ``Discrete.contains`` accepts: a Python int, a NumPy integer scalar or a 0-d integer array (of a dtype that
    casts safely to int64) — but never a bool, as everywhere in the package. Anything else, a shape-(1,) array, a
    float or a string included, raises the same ``ValueError`` in every environment with a ``Discrete`` action
    space."""
    if type(action) in _INTEGER_SCALARS:  # the common case first: an int or a NumPy integer (SB3's actions)
        if 0 <= action < n:
            return int(action)
    elif isinstance(action, (np.integer, np.ndarray)) and action.shape == () and action.dtype.kind in "iu" \
            and np.can_cast(action.dtype, np.int64) and 0 <= action < n:
        return int(action)
    raise ValueError(f"action must be an integer in [0, {n}) (Discrete({n})): a Python int, a NumPy integer or a "
                     f"0-d integer array, got {action!r}")


def read_npz(path):
    """``np.load`` of a saved ``.npz`` archive, pickles refused; a file that is not a zip archive raises
    ``ValueError`` saying so (NumPy would read it as a pickle and speak of pickled data)."""
    path = os.fspath(path)
    if os.path.isfile(path) and not zipfile.is_zipfile(path):
        raise ValueError("not an .npz archive")
    return np.load(path, allow_pickle=False)


@contextlib.contextmanager
def reading_artefact(path, what: str):
    """Errors raised while reading a saved artefact become one ``ValueError`` naming the file: a file that is not
    one (missing, truncated, wrong entries) or one whose check (raised as ``ValueError`` inside) failed."""
    try:
        yield
    except (KeyError, OSError, EOFError, zipfile.BadZipFile, zlib.error, json.JSONDecodeError, TypeError) as e:
        raise ValueError(f"{path} is not a saved {what}: {type(e).__name__}: {e}") from None
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def constructor_repr(obj) -> str:
    """``Class(name=value, ...)`` of ``obj``'s constructor arguments as it stores them (scikit-learn's style of repr
    for the package's estimators, teachers and schedules); arguments it does not store are left out."""
    import inspect

    names = [n for n, p in inspect.signature(type(obj).__init__).parameters.items()
             if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    args = ", ".join(f"{n}={getattr(obj, n)!r}" for n in names if n in vars(obj))
    return f"{type(obj).__name__}({args})"


__all__ = ["EXTRAS", "MAX_CONFIG_BYTES", "MAX_REWARD_WEIGHT", "check_bool", "check_discrete_action", "check_extras", "check_int",
           "check_number", "check_options", "constructor_repr", "int_flag", "make_file_folder", "make_folder",
           "missing_extra", "number_flag", "observation_entry", "read_npz", "reading_artefact"]

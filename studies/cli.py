"""What the package's command lines do with a user's mistake: one line naming the argument, the bad value and what is
accepted, exit status 2, before any work and without writing anything; a missing optional extra is one line with
the install command. ``python -m membudget.train`` and ``python -m membudget.evaluate`` use these."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import sys

# The command lines import this module first, to refuse a mistake within a second or two: it imports nothing heavy
# (the checks that need the environments import them when they run). The checks the teachers' command line shares
# (optional extras, output folders) live in membudget.envs.validation, a floor it may import.
from membudget.envs.validation import EXTRAS, check_extras, make_folder, missing_extra  # noqa: F401  (re-exported)


def usage_error(prog: str, message: str):
    """Print ``prog: error: message`` on one line and exit with status 2 (argparse's convention)."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise SystemExit(2)


@contextlib.contextmanager
def user_input(prog: str):
    """Around the reading and checking of a user's input (flags, config files, model paths), before any work: a
    ``ValueError``, ``TypeError`` or ``FileNotFoundError`` becomes one line and exit status 2."""
    try:
        yield
    except (ValueError, TypeError, FileNotFoundError) as e:
        usage_error(prog, e)


@contextlib.contextmanager
def optional_extras(prog: str):
    """Around a command's work: an optional extra that is not installed becomes one line naming the install command
    (any other error propagates with its traceback)."""
    try:
        yield
    except ModuleNotFoundError as e:
        message = missing_extra(e)
        if message is None:
            raise
        usage_error(prog, message)


def evaluate_command(subcommand: str, argv=None) -> str:
    """The ``python -m membudget.evaluate`` command line a study ran with, as its page records it: ``subcommand``
    and ``argv`` (its flags, when called from Python), or the process's own arguments when ``argv`` is None."""
    argv = list(sys.argv[1:] if argv is None else [subcommand, *argv] if subcommand else argv)
    return "python -m membudget.evaluate " + " ".join(shlex.quote(a) for a in argv)


def resolve_quick(parser, args, quick: dict, defaults: dict) -> None:
    """The flags ``--quick`` sets (``quick``: attribute -> the value it sets; their argparse default is None): one
    given beside ``--quick`` at another value is refused in one line, not silently replaced; a flag not given takes
    ``quick``'s value with ``--quick``, else ``defaults``'."""
    for name, value in quick.items():
        flag, given = "--" + name.replace("_", "-"), getattr(args, name)
        if args.quick and given is not None and given != value:
            parser.error(f"--quick sets {flag} {value}; drop --quick to set {flag}")
        if given is None:
            setattr(args, name, value if args.quick else defaults[name])


def check_run_config(cfg) -> None:
    """The checks every training run's config passes before its run directory is made: budgets are levels of its
    task's environment, integers or none; seeds and first weeks are in ``[0, MAX_SEED]``; week counts positive;
    ``name`` is one folder name (the run directory stays inside ``out``); ``out`` can be made. Each failure is a
    ``ValueError`` naming the field."""
    from membudget.agents.configs import task_levels
    from membudget.envs.validation import check_int
    from membudget.studies.protocol import parse_budget

    levels = task_levels(getattr(cfg, "task", "pmweek"))
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name == "budget":
            parse_budget(value, levels)
        elif f.name == "budgets":
            for b in str(value).split(","):
                parse_budget(b.strip(), levels)
        elif f.name == "seed" or f.name.endswith("_seed"):
            check_int(f.name, value, 0, MAX_SEED)
        elif f.name == "name" and value:
            check_run_name(value)
        elif f.name.endswith("_weeks") and isinstance(value, int):
            check_int(f.name, value, 1)
    if hasattr(cfg, "out"):
        make_folder("out", cfg.out)


MAX_SEED = 2**32 - 1
"""Largest seed a command line takes (NumPy's legacy and torch's generators both take it; larger integers overflow
some of them)."""


def check_run_name(name) -> str:
    """A run directory's name: one folder name, so that the run stays inside ``out`` (no separator, not ``.`` or
    ``..``)."""
    if not isinstance(name, str) or name in (".", "..") or any(c in name for c in "/\\\0"):
        raise ValueError(f"name must be one folder name (no '/', not '.' or '..'), got {name!r}")
    return name


_ROLE = re.compile(r":(?:class|mod|func|meth|data|attr|obj|exc|ref):`(~?)([^`]+)`")


def plain(doc: str) -> str:
    """A docstring as plain text for ``--help``: Sphinx roles dropped (``~`` keeps the last name) and double
    backticks removed."""
    text = _ROLE.sub(lambda m: m.group(2).split(".")[-1] if m.group(1) else m.group(2), doc or "")
    return text.replace("``", "")


class Progress:
    """What a long command prints while it works, called with each stage's message (``progress("fit: gates")``)
    and, within a stage, the tasks done (``progress.count(3, 24)``).

    ``mode``: ``"auto"`` (a live line on a terminal, plain lines elsewhere), ``"on"`` (the live line), ``"plain"``
    or ``"off"``. The live line shows the stage, done/total and the time elapsed, ticking every second; plain lines
    (for logs, CI, notebooks) come at each stage and then at least every ``every`` seconds while it runs, each with
    the stage, done/total and the time elapsed, on ``stream`` (standard error)."""

    def __init__(self, mode: str = "auto", every: float = 5.0, stream=None):
        import threading
        import time

        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "on" if self.stream.isatty() else "plain"
        if mode not in ("on", "plain", "off"):
            raise ValueError(f"progress must be on, off, plain or auto, got {mode!r}")
        self.mode, self.every, self._time = mode, every, time.perf_counter
        self.start = self._time()
        self.stage, self.done, self.total, self._last = "", 0, 0, self.start
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread = None
        if mode != "off":
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()

    def __call__(self, message: str) -> None:
        with self._lock:
            self.stage, self.done, self.total = str(message), 0, 0
            self._show()

    def count(self, done: int, total: int) -> None:
        with self._lock:
            self.done, self.total = int(done), int(total)
            if self.mode == "on":
                self._show()

    def line(self) -> str:
        counted = f" {self.done}/{self.total}" if self.total else ""
        return f"{self.stage}{counted} [{self._time() - self.start:.0f} s]"

    def _show(self) -> None:
        if self.mode == "off":
            return
        self._last = self._time()
        if self.mode == "on":
            self.stream.write("\r\033[K" + self.line())
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(1.0 if self.mode == "on" else min(1.0, self.every)):
            with self._lock:
                if self.stage and (self.mode == "on" or self._time() - self._last >= self.every):
                    self._show()

    def close(self) -> None:
        """Stop the ticking (and end the live line)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.mode == "on" and self.stage:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def add_page_flag(parser, study: str, page: str) -> None:
    """``--out``: the path of a study's generated ``page`` (default: in a new run folder, :func:`page_path`)."""
    parser.add_argument("--out", default=None,
                        help=f"the page's path (default runs/{study}/<time>/{page}; docs/{page} regenerates the docs)")


def page_path(out, study: str, page: str) -> str:
    """``out`` (a study's ``--out``), or by default ``page`` in a new run folder of ``study``."""
    return os.path.join(run_folder(study), page) if out is None else out


def run_folder(study: str) -> str:
    """A new run folder of a study, ``runs/<study>/<YYYYmmdd-HHMMSS>``: where a study writes its page unless
    ``--out`` names another place (a study never writes over the tracked pages under docs/ by default)."""
    import time

    return os.path.join("runs", study, time.strftime("%Y%m%d-%H%M%S"))

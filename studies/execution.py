"""Execution backends of the studies and generators: ``--backend local|ray``.

A study splits its work into deterministic **tasks**: a picklable function and a list of small items that key
the tasks (policy, budget, week range, seed...). An executor's :meth:`Executor.map` returns the results in item
order, whatever the number of workers and the order in which they finish, so a study's numbers are a function of
its configuration and its task split alone: the local and the Ray backend give identical results bit for bit.

- :class:`Executor` (``--backend local``): a plain in-process loop.
- :class:`RayExecutor` (``--backend ray [--address ADDR]``): one ``ray.remote`` task per item with
  ``max_retries`` (a killed worker's task is run again elsewhere); results are gathered as they finish and put
  back in item order. Without an address it starts a new local cluster (``ray.init(address="local")``: never
  another process's cluster that happens to run on the machine), so the same command runs on a laptop;
  ``--address auto`` or ``ray://host:10001`` (or the ``RAY_ADDRESS`` environment variable) joins an existing one
  (membudget must be installed on its nodes).

Checkpoints (both backends): with ``checkpoint_dir`` set, every finished task is written to one file there as
soon as it finishes; a restarted study loads the finished tasks instead of running them again. A file's name
hashes the task function (with everything bound to it) and the item, so a changed configuration never reuses a
stale result. The hash names the function by its module and name, not its code: a directory records the membudget
version that wrote it (``VERSION``), and another version refuses it with a clear error, but an edit of the code
within one version is not detected (delete the directory after changing a task's code). Checkpoint files are
pickles of your own results: resume only from directories your runs wrote.

The lower floors take a ``map``-like callable (``map(fn, items) -> results in order``), never an executor type:
pass ``executor.map``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import pickle
import time
import uuid
import warnings

import numpy as np

from membudget.envs.validation import int_flag

BACKENDS = ("local", "ray")


def chunks(seeds, size: int) -> list:
    """``seeds`` (a range or a sequence of ints) cut into consecutive tuples of at most ``size`` (``size <= 0``:
    one chunk)."""
    seeds = tuple(int(s) for s in seeds)
    if size <= 0 or size >= len(seeds):
        return [seeds]
    return [seeds[i:i + size] for i in range(0, len(seeds), size)]


def task_id(fn, item) -> str:
    """The checkpoint name of one task: a hash of the function's content (its code reference and every argument
    bound to it, e.g. a fitted suite) and of the item. The hash walks the objects (arrays by their bytes, dicts
    and sets in sorted order), so it is the same in every process, unlike pickle bytes, which depend on set order
    and on which objects happen to be shared."""
    h = hashlib.sha256()
    _feed(h, fn, set())
    _feed(h, item, set())
    return h.hexdigest()[:24]


def _feed(h, obj, path):
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, range)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
        return
    if isinstance(obj, (np.ndarray, np.generic)):
        a = np.ascontiguousarray(obj)
        h.update(f"nd:{a.dtype.str}:{a.shape}:".encode())
        h.update(a.tobytes() if a.dtype.kind != "O" else repr(a.tolist()).encode())
        return
    if hasattr(obj, "detach") and hasattr(obj, "numpy"):  # a torch tensor
        _feed(h, obj.detach().cpu().numpy(), path)
        return
    if id(obj) in path:
        h.update(b"<cycle>;")
        return
    path.add(id(obj))
    if isinstance(obj, functools.partial):
        h.update(b"partial(")
        for part in (obj.func, obj.args, obj.keywords):
            _feed(h, part, path)
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__}[{len(obj)}](".encode())
        for x in obj:
            _feed(h, x, path)
    elif isinstance(obj, dict):
        h.update(f"{type(obj).__name__}{{{len(obj)}}}(".encode())
        for k, v in sorted(obj.items(), key=lambda kv: repr(kv[0])):
            _feed(h, k, path)
            _feed(h, v, path)
    elif isinstance(obj, (set, frozenset)):
        h.update(f"set{{{len(obj)}}}(".encode())
        for x in sorted(obj, key=repr):
            _feed(h, x, path)
    elif isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__"):  # functions, classes
        h.update(f"code:{obj.__module__}.{obj.__qualname__}(".encode())
    elif hasattr(obj, "__dict__") or hasattr(obj, "__slots__"):
        h.update(f"obj:{type(obj).__module__}.{type(obj).__qualname__}(".encode())
        state = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
        for name in getattr(type(obj), "__slots__", ()):
            if hasattr(obj, name):
                state[name] = getattr(obj, name)
        _feed(h, state, path)
    else:
        h.update(pickle.dumps(obj, protocol=4))
    h.update(b");")
    path.discard(id(obj))


def _create_whole(source: str, path: str) -> bool:
    """Create ``path`` with ``source``'s content unless it exists: a hard link (atomic: readers see the whole file
    or none); where the file system has no hard links, an exclusive create and a copy. False if ``path`` exists."""
    try:
        os.link(source, path)
        return True
    except FileExistsError:
        return False
    except OSError:   # no hard links here (FAT, some network and FUSE file systems)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            out.write(src.read())
        return True


def _check_version_file(checkpoint_dir: str) -> None:
    """``ValueError`` unless ``checkpoint_dir``'s ``VERSION`` names this membudget version."""
    from membudget import __version__

    for _ in range(50):   # a file system without hard links: the other process may still be writing it
        with open(os.path.join(checkpoint_dir, "VERSION"), "rb") as f:
            raw = f.read(64)
        if raw:
            break
        time.sleep(0.02)
    written = raw.decode("ascii", "replace").strip()
    if written != __version__:
        shown = written if written.isprintable() and len(raw) < 64 else repr(raw)
        raise ValueError(f"the checkpoints in {checkpoint_dir} were written by membudget {shown}, this is "
                         f"{__version__}: their results may come from other code; delete the directory or pass "
                         f"another --checkpoint-dir")


def check_checkpoint_dir(checkpoint_dir: str) -> None:
    """Make ``checkpoint_dir`` if needed, check that it is writable and that this membudget version wrote it: its
    ``VERSION`` file must name ``membudget.__version__``, else ``ValueError`` (its results may come from other
    code). A directory without one gets it, written whole (another process starting on the same directory reads
    the complete file or none); one that already holds checkpoints (from before these files) is taken as this
    version's with a ``RuntimeWarning``."""
    from membudget import __version__

    probe = os.path.join(checkpoint_dir, f".VERSION.{uuid.uuid4().hex}.tmp")
    try:
        os.makedirs(checkpoint_dir, exist_ok=True)
        with open(probe, "x") as f:   # the umask's permissions, as any file the runs write
            f.write(__version__ + "\n")
    except OSError as error:
        raise ValueError(f"the checkpoint directory {checkpoint_dir} cannot be written ({error})") from None
    try:
        older = [name for name in os.listdir(checkpoint_dir) if name.endswith(".pkl")]
        if _create_whole(probe, os.path.join(checkpoint_dir, "VERSION")):
            if older:
                warnings.warn(f"{checkpoint_dir} holds {len(older)} checkpoints and no VERSION file (written before "
                              f"checkpoint directories kept one); they are taken as membudget {__version__}'s",
                              RuntimeWarning, stacklevel=2)
            return
    finally:
        os.unlink(probe)
    _check_version_file(checkpoint_dir)


def checkpoint_dir_flag(value: str) -> str:
    """``--checkpoint-dir`` as argparse reads it: a directory this user cannot write (or make), or whose ``VERSION``
    names another membudget version, is refused in one line with the other flags, before anything is made (the
    executor makes the directory and writes its ``VERSION``, :func:`check_checkpoint_dir`)."""
    existing = os.path.abspath(value)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"the checkpoint directory {value} cannot be written ({existing} is not a "
                                         f"writable directory)")
    if os.path.isfile(os.path.join(value, "VERSION")):
        try:
            _check_version_file(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return value


class Executor:
    """The local backend: tasks run one after another in this process.

    Args:
        checkpoint_dir: if set, a directory for one file per finished task; finished tasks found there are
            loaded instead of run.
        progress: ``progress(message)`` after each finished task (``progress.count(done, total)`` where it has
            one, as :class:`~membudget.studies.cli.Progress` does).
    """

    backend = "local"

    def __init__(self, checkpoint_dir: str | None = None, progress=None):
        self.checkpoint_dir = checkpoint_dir
        self.progress = progress
        self.computed = 0
        """Tasks actually run (not loaded from a checkpoint) since this executor was made."""
        self.loaded = 0
        """Tasks loaded from a checkpoint."""
        if checkpoint_dir:
            check_checkpoint_dir(checkpoint_dir)

    def map(self, fn, items) -> list:
        """``[fn(item) for item in items]``, from checkpoints where they exist."""
        items = list(items)
        ids = [task_id(fn, it) for it in items] if self.checkpoint_dir else [None] * len(items)
        results, todo = [None] * len(items), []
        for i, tid in enumerate(ids):
            found, value = self._load(tid)
            if found:
                results[i] = value
                self.loaded += 1
            else:
                todo.append(i)
        done = len(items) - len(todo)
        for i, value in self._run(fn, items, todo):
            results[i] = value
            self._save(ids[i], value)
            self.computed += 1
            done += 1
            if hasattr(self.progress, "count"):  # a studies.cli.Progress: the count within its stage
                self.progress.count(done, len(items))
            elif self.progress:
                self.progress(f"task {done}/{len(items)} done")
        return results

    def _run(self, fn, items, todo):
        """Yield ``(index, fn(items[index]))`` for every index in ``todo``, in any order."""
        for i in todo:
            yield i, fn(items[i])

    def _path(self, tid):
        return os.path.join(self.checkpoint_dir, f"{tid}.pkl")

    def _load(self, tid):
        if tid is None or not os.path.exists(self._path(tid)):
            return False, None
        with open(self._path(tid), "rb") as f:
            return True, pickle.load(f)

    def _save(self, tid, value):
        if tid is None:
            return
        tmp = self._path(tid) + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(value, f, protocol=4)
        os.replace(tmp, self._path(tid))  # a task is either checkpointed whole or not at all

    def close(self):
        """Release the backend's resources (nothing for the local backend)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_FUNCTIONS = {}
"""A worker's task functions by object id: a study's function (a fitted suite, a label configuration) is
unpickled once per worker, not once per task."""


def _call(fn_box, item):
    (ref,) = fn_box  # boxed, so that Ray hands over the reference, not a fresh copy per task
    fn = _FUNCTIONS.get(ref.hex())
    if fn is None:
        import ray

        if len(_FUNCTIONS) >= 8:
            _FUNCTIONS.clear()
        fn = _FUNCTIONS[ref.hex()] = ray.get(ref)
    return fn(item)


class RayExecutor(Executor):
    """The Ray backend: one remote task per item (1 CPU each), retried up to ``max_retries`` times when its
    worker dies; results put back in item order.

    Args:
        address: ``None`` starts a new local cluster (``ray.init(address="local")``), unless the environment
            variable ``RAY_ADDRESS`` names one to join; ``"auto"`` or ``"ray://host:port"`` joins an existing one.
            Ignored when Ray is already initialised in this process.
        num_cpus: CPUs of the local cluster started when ``address`` is None (default: all).
        max_retries: re-runs of a task whose worker process died.
        checkpoint_dir, progress: as for :class:`Executor`.
    """

    backend = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None, max_retries: int = 3,
                 checkpoint_dir: str | None = None, progress=None):
        super().__init__(checkpoint_dir, progress)
        try:
            import ray
        except ImportError:  # named, so that the command lines' optional_extras print the install line
            raise ModuleNotFoundError('the ray backend needs Ray: pip install "membudget[ray]"', name="ray") from None
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            address = ray_address(address)
            ray.init(address=address, num_cpus=num_cpus if address == "local" else None,
                     include_dashboard=False, log_to_driver=False)
        self._remote = ray.remote(num_cpus=1, max_retries=max_retries)(_call)

    def _run(self, fn, items, todo):
        ray = self._ray
        if not todo:
            return
        fn_box = [ray.put(fn)]  # shipped once, not once per task
        pending = {self._remote.remote(fn_box, items[i]): i for i in todo}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                yield pending.pop(ref), ray.get(ref)

    def close(self):
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()


def ray_address(address: str | None) -> str | None:
    """The address membudget gives ``ray.init``: ``address`` when given, None (``ray.init`` reads it) when the
    ``RAY_ADDRESS`` environment variable names a cluster, else ``"local"``, a new local cluster (``ray.init()``
    alone would join any cluster already running on this machine)."""
    if address is None and not os.environ.get("RAY_ADDRESS"):
        return "local"
    return address


def make_executor(backend: str = "local", address: str | None = None, checkpoint_dir: str | None = None,
                  num_cpus: int | None = None, progress=None) -> Executor:
    """The executor of ``--backend``."""
    if backend == "local":
        if address:
            raise ValueError("--address needs --backend ray")
        return Executor(checkpoint_dir, progress)
    if backend == "ray":
        return RayExecutor(address, num_cpus, checkpoint_dir=checkpoint_dir, progress=progress)
    raise ValueError(f"unknown backend {backend!r}; known: {BACKENDS}")


def executor_from_flags(args, progress=None) -> Executor:
    """The executor of the flags of :func:`add_backend_flags` (a context manager that closes it)."""
    return make_executor(args.backend, args.address, args.checkpoint_dir, args.num_cpus, progress=progress)


def run_with_flags(args, build):
    """``build(progress=..., executor=...)`` with the executor of the backend flags (:func:`executor_from_flags`),
    its progress lines on stdout."""
    with executor_from_flags(args) as executor:
        return build(progress=lambda m: print(m, flush=True), executor=executor)


def executor_beside_pool(args, progress=None):
    """For a study with its own local process pool: ``contextlib.nullcontext()`` (the pool) on the plain local
    backend, else :func:`executor_from_flags` (``--backend ray``, ``--checkpoint-dir``, or an ``--address`` that
    :func:`make_executor` refuses without ``--backend ray``)."""
    import contextlib

    if args.backend == "local" and not args.checkpoint_dir and not args.address:
        return contextlib.nullcontext()
    return executor_from_flags(args, progress)


def add_backend_flags(parser: argparse.ArgumentParser) -> None:
    """``--backend``, ``--address``, ``--num-cpus`` and ``--checkpoint-dir`` on a study's command line."""
    g = parser.add_argument_group("execution")
    g.add_argument("--backend", choices=BACKENDS, default="local",
                   help="local: tasks in this process; ray: Ray tasks (a local cluster unless --address)")
    g.add_argument("--address", default=None, help="an existing Ray cluster (auto, or ray://host:10001)")
    g.add_argument("--num-cpus", type=int_flag(1), default=None, help="CPUs of the local Ray cluster (default: all)")
    g.add_argument("--checkpoint-dir", type=checkpoint_dir_flag, default=None,
                   help="one file per finished task; a restarted run loads them instead of recomputing")


def timed(fn):
    """``fn`` wrapped to return ``(result, (start, end, process id))``, the task's own wall-clock interval (the
    benchmarks' per-task times and the gaps between a worker's tasks)."""
    return _Timed(fn)


class _Timed:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, item):
        start = time.time()
        out = self.fn(item)
        return out, (start, time.time(), os.getpid())


__all__ = ["BACKENDS", "Executor", "RayExecutor", "add_backend_flags", "check_checkpoint_dir", "chunks",
           "executor_beside_pool", "executor_from_flags", "make_executor", "task_id", "timed"]

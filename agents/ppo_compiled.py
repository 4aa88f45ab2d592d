"""The compiled engine of :func:`membudget.agents.ppo.train_ppo` (``engine="compiled"``): the same PPO — the
per-resource actor on the candidates, the critic over the flattened observation, one week per slot and update, GAE,
epochs of minibatches, clipped ratio, value loss, entropy bonus, gradient clipping, Adam — with the work around
the matrix products cut down, for about 2.7 times the autograd engine's env steps per second on one CPU thread:

- the rollout's actor runs in numpy (:func:`rollout_actor`) on the candidates and its proposals come from the
  loop's numpy generator; the critic's values for the whole rollout come from one batched pass after it (they never
  choose an action);
- an epoch permutes its samples and their candidate rows (a sample's rows stay contiguous), and each minibatch's
  compiled call gathers its own rows and states (:func:`gathered_update`);
- the minibatch's gradients are written by hand (:func:`minibatch_grads`; equal to autograd's on
  :func:`~membudget.agents.ppo.ppo_losses` within float rounding when the products run in float32, tested), clipped
  and applied by an in-place Adam (:func:`adam_`, torch's update rule, tested), all in one function compiled by
  ``torch.compile`` (inductor, dynamic shapes, C++ wrapper; it needs a C++ compiler, and its first update compiles
  for several seconds) or, by default, exported and compiled ahead of time by AOTInductor into a package cached on
  disk (:class:`AOTIUpdate`, ``compiled_backend``: less Python per call);
- on a CPU that multiplies bfloat16 matrices natively (:func:`native_bf16`: measured once per process) the
  critic's products run in bfloat16 (bf16 operands and outputs, fp32 weights and elementwise work; the actor's stay
  float32); elsewhere (AVX2-only CPUs, where bf16 products are emulated and run tens of times slower than float32)
  in float32 (``critic_dtype``); its ``tanh`` is computed as ``2 sigmoid(2x) - 1`` (``torch.tanh`` costs several
  times ``torch.sigmoid`` on the CPUs measured).

So the numbers differ from the autograd engine's (another random stream, bf16 critic products): the engines are
compared by the quality they reach, not bit for bit (docs/studies.md, "Training throughput"). Supported: the
per-resource actor with two hidden layers and context on ``PMWeek-v0``, with ``init``, ``critic_warmup``,
``critic_counts``, ``ent_coef``, ``anneal_lr``; the flat-MLP ablation, ``bc_coef`` and the conversation task train
with the autograd engine.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import time
import uuid
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from .configs import COMPILED_BACKENDS

ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-5
CRITIC_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}
"""The critic's product dtypes of the compiled engine by name (``PPOConfig.critic_dtype``; ``auto``: by
:func:`native_bf16`)."""


@functools.cache
def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices at least as fast as float32 ones: a product at the critic's
    shape (320 × 317 @ 317 × 128, one thread, best of 15) timed in both dtypes, once per process. Native bf16
    (AVX512-BF16, AMX) makes it about twice as fast; emulated bf16 (AVX2) tens of times slower."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(320, 317, generator=g), torch.randn(317, 128, generator=g)
    best = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for dtype in (torch.float32, torch.bfloat16, torch.float32, torch.bfloat16):
            x, y = a.to(dtype), b.to(dtype)
            for _ in range(15):
                start = time.perf_counter()
                torch.mm(x, y)
                best[dtype] = min(best.get(dtype, np.inf), time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return bool(best[torch.bfloat16] <= best[torch.float32])


def critic_dtype_name(setting: str) -> str:
    """The critic's product dtype ``setting`` (``auto``, ``bfloat16`` or ``float32``) resolved for this CPU."""
    if setting == "auto":
        return "bfloat16" if native_bf16() else "float32"
    if setting not in CRITIC_DTYPES:
        raise ValueError(f"critic_dtype must be 'auto' or one of {sorted(CRITIC_DTYPES)}, got {setting!r}")
    return setting


def compiled_backend_name(setting: str) -> str:
    """The compiled backend ``setting`` (``auto`` or one of :data:`~membudget.agents.configs.COMPILED_BACKENDS`)
    resolved: ``auto`` is ``aoti`` with either critic dtype, the faster on every CPU measured (docs/speed.md)."""
    if setting == "auto":
        return "aoti"
    if setting not in COMPILED_BACKENDS:
        raise ValueError(f"compiled_backend must be 'auto' or one of {COMPILED_BACKENDS}, got {setting!r}")
    return setting


def _mm(a, b, dtype):
    if dtype is torch.float32:
        return torch.mm(a, b)
    return torch.mm(a.to(dtype), b.to(dtype)).float()


def sigmoid_tanh(z):
    """``tanh(z)`` as ``2 sigmoid(2z) - 1``, in place on ``z``."""
    return torch.sigmoid(z.mul_(2)).mul_(2).sub_(1)


def critic_values(critic_params, obs, dtype=torch.float32, tanh=torch.tanh):
    """The tanh MLP critic, given as its parameters (``[weight, bias]`` per layer), on ``obs`` with products in
    ``dtype``: ``(values (n,), activations)``, ``obs`` first among the activations (the backward pass reads
    them)."""
    acts = [obs]
    for weight, bias in zip(critic_params[:-2:2], critic_params[1:-2:2]):
        acts.append(tanh(_mm(acts[-1], weight.t(), dtype).add_(bias)))
    return torch.addmv(critic_params[-1], acts[-1], critic_params[-2][0]), acts


def critic_values_only(critic_params, obs, dtype=torch.float32):
    """:func:`critic_values` with :func:`sigmoid_tanh`, the values only, in three passes over each layer's
    activations instead of five and with the same numbers: the doubling inside ``sigmoid_tanh`` moves onto the
    layer's weight and bias (scaling by 2 is exact, in every partial sum too), and ``2s - 1`` is one operation (``2s``
    is exact, so there is one rounding either way)."""
    h, minus_one = obs, torch.tensor(-1.0)
    for weight, bias in zip(critic_params[:-2:2], critic_params[1:-2:2]):
        z = _mm(h, weight.t() * 2, dtype).add_(bias * 2)
        h = torch.add(minus_one, z.sigmoid_(), alpha=2, out=z)
    return torch.addmv(critic_params[-1], h, critic_params[-2][0])


class Minibatch(NamedTuple):
    """One minibatch of ``n`` samples (:meth:`CompiledPPO.minibatches`)."""

    x: torch.Tensor
    """The candidate rows (:func:`~membudget.agents.per_resource.candidate_rows`)."""
    obs: torch.Tensor
    """The critic's input, one row per sample."""
    sample: torch.Tensor
    """Each candidate row's sample in ``0..n-1``."""
    inv_count: torch.Tensor
    """``(n, 1)``: one over each sample's number of candidates (at least 1)."""
    proposed: torch.Tensor
    """Each candidate row's proposal bit."""
    old_logp: torch.Tensor
    """Each sample's log-probability under the rollout's actor."""
    adv: torch.Tensor
    """Each sample's advantage."""
    ret: torch.Tensor
    """Each sample's return."""


def minibatch_grads(actor_params, critic_params, minibatch: Minibatch, *, clip_coef, vf_coef, ent_coef,
                    critic_dtype=torch.float32, tanh=torch.tanh, with_actor=True):
    """Gradients of ``pg + vf_coef * v_loss - ent_coef * entropy`` (:func:`~membudget.agents.ppo.ppo_losses`) on
    ``minibatch`` for a :class:`~membudget.agents.per_resource.PerResourceNet` with two hidden layers and context and
    a tanh MLP critic, each given as its ``parameters()``: ``(actor_grads, critic_grads)`` in that order
    (``actor_grads`` is ``None`` with ``with_actor=False``: the loss is then ``vf_coef * v_loss`` alone). The
    coefficients may be floats or 0-d tensors (a compiled caller passes tensors, so that its graph does not depend
    on their values). The critic's products run in ``critic_dtype``, the actor's in float32."""
    x, obs, sample, inv_count, proposed, old_logp, adv, ret = minibatch
    n = adv.numel()
    values, acts = critic_values(critic_params, obs, critic_dtype, tanh)
    dv = (values - ret) * (vf_coef / n)
    critic_grads = [(dv @ acts[-1])[None], dv.sum()[None]]
    d = torch.outer(dv, critic_params[-2][0])
    for i in range(len(acts) - 2, -1, -1):
        d.mul_(1 - acts[i + 1].square())
        critic_grads = [_mm(d.t(), acts[i], critic_dtype), d.sum(0)] + critic_grads
        if i:
            d = _mm(d, critic_params[2 * i], critic_dtype)
    if not with_actor:
        return None, critic_grads

    w1, b1, w2, b2, w3, b3 = actor_params
    h = w1.shape[0]
    w2_row, w2_pool = w2[:, :h], w2[:, h:]  # the context layer's halves: each row's activation, its sample's mean
    z1 = torch.addmm(b1, x, w1.t())
    h1 = z1.relu()
    pooled = torch.zeros(n, h).index_add_(0, sample, h1).mul_(inv_count)
    z2 = torch.mm(h1, w2_row.t()).add_(torch.addmm(b2, pooled, w2_pool.t())[sample])
    h2 = z2.relu()
    logit = torch.addmv(b3, h2, w3[0])
    p = torch.sigmoid(logit)
    new_logp = torch.zeros(n).index_add_(0, sample, proposed * logit - nn.functional.softplus(logit))
    ratio = torch.exp(new_logp - old_logp)
    a = (adv - adv.mean()) / (adv.std() + 1e-8)
    low, high = 1 - clip_coef, 1 + clip_coef
    unclipped, clipped = -a * ratio, -a * ratio.clamp(low, high)
    # torch.max sends the gradient to the larger term; inside the clip range both terms are equal and both pass it
    passes = ((ratio >= low) & (ratio <= high)) | (unclipped > clipped)
    dlogit = torch.where(passes, -a, 0.0).mul_(ratio / n)[sample].mul_(proposed - p)
    dlogit += logit * p * (1 - p) * (ent_coef / n)
    dz2 = torch.outer(dlogit, w3[0]).mul_(z2 > 0)
    per_sample = torch.zeros(n, dz2.shape[1]).index_add_(0, sample, dz2)
    dz1 = torch.mm(dz2, w2_row).add_(torch.mm(per_sample, w2_pool).mul_(inv_count)[sample]).mul_(z1 > 0)
    actor_grads = [torch.mm(dz1.t(), x), dz1.sum(0),
                   torch.cat([torch.mm(dz2.t(), h1), torch.mm(per_sample.t(), pooled)], 1), per_sample.sum(0),
                   (dlogit @ h2)[None], dlogit.sum()[None]]
    return actor_grads, critic_grads


def clip_grads(grads, max_norm: float):
    """``grads`` scaled as :func:`torch.nn.utils.clip_grad_norm_` scales them (total 2-norm at most ``max_norm``)."""
    total = torch.stack([g.square().sum() for g in grads]).sum().sqrt()
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    return [g * scale for g in grads]


def adam_(params, grads, exp_avgs, exp_avg_sqs, step_size, bias2_sqrt, *, betas=ADAM_BETAS, eps=ADAM_EPS):
    """One step of torch's Adam (no weight decay, no amsgrad) in place. ``step_size = lr / (1 - beta1^t)`` and
    ``bias2_sqrt = sqrt(1 - beta2^t)`` come as tensors, so that a compiled step does not specialise on ``t``."""
    for param, grad, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        m.lerp_(grad, 1 - betas[0])
        v.mul_(betas[1]).addcmul_(grad, grad, value=1 - betas[1])
        param.sub_(step_size * m / (v.sqrt() / bias2_sqrt + eps))


def minibatch_update(adam_state, steps, minibatch: Minibatch, *, max_grad_norm, with_actor, **loss):
    """:func:`minibatch_grads` on ``minibatch``, :func:`clip_grads`, then :func:`adam_`: one function, so that one
    compiled graph does it all. ``adam_state``: per network (actor, critic) ``(params, exp_avgs, exp_avg_sqs)``,
    the parameters detached and updated in place; ``steps``: per network ``(step_size, bias2_sqrt)``."""
    actor_grads, critic_grads = minibatch_grads(adam_state[0][0], adam_state[1][0], minibatch, with_actor=with_actor,
                                                **loss)
    grads = clip_grads((actor_grads or []) + critic_grads, max_grad_norm)
    k = len(actor_grads) if with_actor else 0
    if with_actor:
        params, exp_avgs, exp_avg_sqs = adam_state[0]
        adam_(params, grads[:k], exp_avgs, exp_avg_sqs, *steps[0])
    params, exp_avgs, exp_avg_sqs = adam_state[1]
    adam_(params, grads[k:], exp_avgs, exp_avg_sqs, *steps[1])


def gathered_update(adam_state, steps, rows, obs, minibatch: Minibatch, **kw):
    """:func:`minibatch_update` on a minibatch whose ``x`` and ``obs`` hold indices into ``rows`` and ``obs`` (the
    epoch's arrays; :meth:`CompiledPPO.minibatches` with ``gather=False``): the compiled graph gathers them, so that
    the gathered rows go from cache to the products instead of through an epoch-sized copy in memory."""
    minibatch_update(adam_state, steps, minibatch._replace(x=torch.index_select(rows, 0, minibatch.x),
                                                           obs=torch.index_select(obs, 0, minibatch.obs)), **kw)


AOTI_FORMAT = 1
"""Bumped when :class:`AOTIUpdate`'s packages change meaning (part of their cache key)."""
_SOURCE_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
"""This module's source as imported (part of the packages' cache key: an edited update builds a new package)."""


def package_root() -> str:
    """Where :class:`AOTIUpdate` keeps its packages: ``$TORCHINDUCTOR_CACHE_DIR/membudget-aoti`` when the user set that
    variable (beside inductor's own cache, emptied with it), else ``~/.cache/membudget/aoti`` (``$XDG_CACHE_HOME`` if
    set), kept across reboots. Inductor writes its default directory (under /tmp) into the variable on its first
    compilation in a process, so that value counts as unset: the packages' place does not depend on what the process
    compiled before."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if inductor and os.path.abspath(inductor) != os.path.abspath(default_cache_dir()):
        return os.path.join(inductor, "membudget-aoti")
    xdg = os.environ.get("XDG_CACHE_HOME")  # a relative value is invalid and ignored (XDG Base Directory spec)
    return os.path.join(xdg if xdg and os.path.isabs(xdg) else os.path.expanduser("~/.cache"), "membudget", "aoti")


def compile_blocker(backend: str) -> str | None:
    """Why this machine cannot build the compiled engine's update through ``backend`` (``"aoti"`` or ``"inductor"``):
    no working C++ compiler, or for ``aoti`` a package folder (:func:`package_root`) it cannot create or write; None
    when nothing stands in the way. ``engine="auto"`` then trains with the autograd engine, an explicit
    ``engine="compiled"`` is refused before training."""
    from torch._inductor.cpp_builder import get_cpp_compiler

    try:
        get_cpp_compiler()
    except Exception as error:  # inductor's InvalidCxxCompiler and whatever its search raises
        return f"no working C++ compiler for torch's inductor ({type(error).__name__}: {error})"
    if backend == "aoti":
        root = package_root()
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as error:
            return f"the AOTInductor package folder {root} cannot be created ({error})"
        if not os.access(root, os.W_OK | os.X_OK):
            return f"the AOTInductor package folder {root} is not writable"
    return None


@functools.cache
def _cpu_flags() -> str:
    """The CPU's instruction-set flags (Linux ``/proc/cpuinfo``; else the platform's processor name): inductor
    compiles the packages with ``-march=native``, so a package built on one CPU may not run on another of the same
    vector capability (a shared home directory)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    import platform

    return f"{platform.machine()} {platform.processor()}"


_LOADED: dict = {}
"""Packages loaded in this process, by path: each load maps another copy of the package's library, never unloaded,
and a package holds no state (the weights are arguments), so runs in one process share one."""


class AOTIUpdate:
    """:func:`gathered_update` through AOTInductor: on the first call with actor updates on or off, the update for
    this engine's networks is exported (``torch.export``, the row and sample counts dynamic) and compiled into a
    package under :func:`package_root` (``~/.cache/membudget/aoti``, or ``$TORCHINDUCTOR_CACHE_DIR/membudget-aoti``
    when the user set that variable), keyed by torch's version, the CPU's vector capability and instruction-set
    flags, torch's thread count, this module's source, the networks' shapes, the critic's product dtype and tanh and
    whether the actor learns, or loaded from there (the loss's coefficients are arguments); later calls run the
    package. A minibatch with fewer than 2 candidate rows or samples (the package's smallest sizes) runs
    the uncompiled function.

    Why: ``torch.compile``'s Python side (guards, wrappers, argument handling) costs about 0.3 ms of each 1.5-3 ms
    minibatch call; the package's call measured 0.36 ms (AVX2) and 0.52 ms (AVX-512) faster per call than
    ``torch.compile``'s on the bench's update (docs/speed.md). Its kernels are not the inductor graph's to the bit
    (relative differences of about 2e-8 after one update), so runs are reproducible per backend."""

    def __init__(self):
        self.runners = {}

    def __call__(self, state, steps, rows, obs, minibatch: Minibatch, **kw):
        """:func:`gathered_update`'s arguments (``kw``: ``max_grad_norm``, ``with_actor`` and the loss's)."""
        if min(rows.shape[0], obs.shape[0], minibatch.x.shape[0], minibatch.adv.shape[0]) < 2:
            gathered_update(state, steps, rows, obs, minibatch, **kw)
            return
        with_actor = kw["with_actor"]
        both = steps if with_actor else [steps[1], steps[1]]  # the critic-only package ignores the actor's
        args = (*(t for net in state for part in net for t in part), *both[0], *both[1], rows, obs, *minibatch,
                kw["clip_coef"], kw["vf_coef"], kw["ent_coef"], kw["max_grad_norm"])
        run = self.runners.get(with_actor)
        if run is None:
            # the loader's own entry on the flat list: the package's Python wrapper parses its call spec and
            # flattens the arguments again on every call (about 40 us of each call)
            run = self.runners[with_actor] = self._package(state, args, with_actor, kw["critic_dtype"],
                                                           kw["tanh"]).loader.boxed_run
        run(list(args))

    @staticmethod
    def _package(state, args, with_actor, critic_dtype, tanh):
        sizes = tuple(len(net[0]) for net in state)
        # the thread count too: inductor writes it into the kernels' parallel loops
        key = hashlib.sha256(repr((AOTI_FORMAT, torch.__version__, torch.backends.cpu.get_cpu_capability(),
                                   _cpu_flags(), torch.get_num_threads(),
                                   [tuple(t.shape) for net in state for t in net[0]], str(critic_dtype),
                                   tanh.__name__, with_actor, _SOURCE_DIGEST)).encode()).hexdigest()[:24]
        path = os.path.join(package_root(), f"update-{key}.pt2")
        if path in _LOADED:
            return _LOADED[path]
        if os.path.exists(path):
            try:
                _LOADED[path] = torch._inductor.aoti_load_package(path)
                return _LOADED[path]
            except Exception as error:  # a truncated or damaged file (a crash, a full disk): built again once
                warnings.warn(f"the AOTInductor package {path} could not be loaded ({type(error).__name__}: "
                              f"{error}); building it again", RuntimeWarning, stacklevel=2)
        from torch.export import Dim

        rows, obs, k, n = (Dim(name, min=2) for name in ("rows", "states", "candidates", "samples"))
        per_minibatch = ({0: k}, {0: n}, {0: k}, {0: n}, {0: k}, {0: n}, {0: n}, {0: n})
        dynamic = (None,) * (3 * sum(sizes) + 4) + ({0: rows}, {0: obs}) + per_minibatch + (None,) * 4
        module = _Update(sizes, with_actor, critic_dtype, tanh)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # concurrent builds (also from containers whose processes share a PID) each write their own file, with the
        # umask's permissions, and rename it into place whole, the last rename winning; a failed build leaves nothing
        staging = f"{path[:-4]}.{uuid.uuid4().hex}.tmp.pt2"
        try:
            with warnings.catch_warnings():  # torch's own use of an API it deprecates, once per package
                warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)
                program = torch.export.export(module, args, dynamic_shapes=(dynamic,), strict=False)
                torch._inductor.aoti_compile_and_package(program, package_path=staging)
            with open(staging, "rb") as f:
                os.fsync(f.fileno())
            os.replace(staging, path)
        finally:
            if os.path.exists(staging):
                os.unlink(staging)
        _LOADED[path] = torch._inductor.aoti_load_package(path)
        return _LOADED[path]


class _Update(nn.Module):
    """:func:`gathered_update` on its tensors in one flat argument list (what :class:`AOTIUpdate` exports)."""

    def __init__(self, sizes, with_actor, critic_dtype, tanh):
        super().__init__()
        self.sizes, self.with_actor, self.critic_dtype, self.tanh = sizes, with_actor, critic_dtype, tanh

    def forward(self, *flat):
        a, c = self.sizes
        cuts = np.cumsum([0, a, a, a, c, c, c, 2, 2, 1, 1, 8, 1, 1, 1, 1]).tolist()
        p = [list(flat[i:j]) for i, j in itertools.pairwise(cuts)]
        steps = [tuple(p[6]), tuple(p[7])]
        gathered_update([p[0:3], p[3:6]], steps if self.with_actor else [None, steps[1]], p[8][0], p[9][0],
                        Minibatch(*p[10]), max_grad_norm=p[14][0], with_actor=self.with_actor, clip_coef=p[11][0],
                        vf_coef=p[12][0], ent_coef=p[13][0], critic_dtype=self.critic_dtype, tanh=self.tanh)
        return ()


def rollout_actor(weights, x, sample, n: int, rng):
    """The per-resource actor in numpy on candidate rows ``x`` (ordered by ``sample``, ``n`` samples) with the
    network's ``weights`` (its ``parameters()`` as arrays): ``(probabilities, proposed, log-probability per
    sample)``, the proposals drawn from ``rng``."""
    w1, b1, w2, b2, w3, b3 = weights
    h = w1.shape[0]
    h1 = x @ w1.T
    h1 += b1
    np.maximum(h1, 0, out=h1)
    # the context: each sample's mean first-layer activation through the second layer's pooled half, by sample
    counts = np.bincount(sample, minlength=n)
    mean = np.zeros((n, sample.size), dtype=np.float32)
    mean[sample, np.arange(sample.size)] = 1.0 / counts[sample]
    context = (mean @ h1) @ w2[:, h:].T
    context += b2
    h2 = h1 @ w2[:, :h].T
    h2 += context[sample]
    np.maximum(h2, 0, out=h2)
    logit = h2 @ w3[0] + b3[0]
    softplus = np.logaddexp(0, logit)
    p = np.exp(logit - softplus)  # sigmoid without overflow
    proposed = rng.random(p.shape[0]) < p
    logp = np.bincount(sample, weights=np.where(proposed, logit, 0) - softplus, minlength=n)
    return p, proposed, logp.astype(np.float32)


class Buffer:
    """float32 rows of shape ``row_shape`` appended in blocks (:meth:`take`) into one array that doubles when full:
    :meth:`filled` is the rows so far, contiguous, without a final concatenation."""

    def __init__(self, row_shape: tuple, capacity: int = 256):
        self.array, self.size = np.empty((capacity, *row_shape), dtype=np.float32), 0

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` rows, to be written (a view)."""
        if self.size + n > self.array.shape[0]:
            grown = np.empty((max(2 * self.array.shape[0], self.size + n), *self.array.shape[1:]), dtype=np.float32)
            grown[:self.size] = self.array[:self.size]
            self.array = grown
        self.size += n
        return self.array[self.size - n:self.size]

    def filled(self) -> np.ndarray:
        return self.array[:self.size]


class CompiledPPO:
    """The engine's state for one training run: the networks (updated in place), Adam's moments and step counts
    per network, and the compiled update. :meth:`rollout` plays the weeks of an update, :meth:`values` and the
    caller's GAE (:func:`membudget.agents.ppo.gae`) give advantages, :meth:`learn` runs the epochs."""

    def __init__(self, actor, critic, settings, rng, *, critic_dtype=torch.bfloat16, compile: bool = True,
                 backend: str = "inductor"):
        """``settings``: the run's :class:`~membudget.agents.ppo.PPOConfig` (its ``clip_coef``, ``ent_coef``,
        ``vf_coef``, ``max_grad_norm``, ``n_epochs`` and ``n_minibatches`` are read); ``rng``: the loop's numpy
        generator (proposals, minibatch order); ``backend``: one of
        :data:`~membudget.agents.configs.COMPILED_BACKENDS` (with ``compile=False`` the update runs uncompiled)."""
        if backend not in COMPILED_BACKENDS:
            raise ValueError(f"backend must be one of {COMPILED_BACKENDS}, got {backend!r}")
        # tensors, not floats: a compiled graph specialises on Python numbers, and one graph serves every run
        self.loss = dict({k: torch.tensor(float(getattr(settings, k))) for k in ("clip_coef", "vf_coef", "ent_coef")},
                         critic_dtype=critic_dtype, tanh=sigmoid_tanh)
        self.max_grad_norm = torch.tensor(float(settings.max_grad_norm))
        self.n_epochs, self.n_minibatches, self.rng = settings.n_epochs, settings.n_minibatches, rng
        self.state = []
        for net in (actor, critic):
            params = [p.detach() for p in net.parameters()]
            self.state.append((params, [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]))
        self.adam_steps = [0, 0]
        # per network Adam's (step_size, bias2_sqrt) of the current step: 0-d float32 arrays and tensors on the same
        # memory, written in place before each minibatch (a fresh torch.tensor per step cost more than Adam)
        self.step_arrays = [(np.zeros((), np.float32), np.zeros((), np.float32)) for _ in range(2)]
        self.steps = [tuple(torch.from_numpy(a) for a in pair) for pair in self.step_arrays]
        self.weights = [p.numpy() for p in self.state[0][0]]  # views: the in-place Adam steps show through
        if compile:
            # the networks' widths static (only the minibatch's row counts vary): a graph per network shape, its
            # kernels' loops and offsets fixed at compile time (the same arithmetic, so the same numbers)
            for params, exp_avgs, exp_avg_sqs in self.state:
                for t in params + exp_avgs + exp_avg_sqs:
                    for d in range(t.dim()):
                        torch._dynamo.mark_static(t, d)
        # cpp_wrapper: the graph's kernels and products are called from C++ rather than a Python wrapper (the same
        # kernels, so the same numbers; the Python call cost about 0.1 ms of each 2-3 ms minibatch on AVX2)
        if not compile:
            self.step_fn = gathered_update
        elif backend == "aoti":
            self.step_fn = AOTIUpdate()
        else:
            self.step_fn = torch.compile(gathered_update, dynamic=True, options={"cpp_wrapper": True})

    def rollout(self, venv, obs, reward_scale: float, with_counts: bool):
        """Play the weeks of ``venv`` (reset, first observation ``obs``) to their end: the batch :meth:`learn`
        takes (``rewards`` scaled by ``reward_scale``, ``(T, n_envs)``) and the number of steps ``T``."""
        n_envs = obs["mask"].shape[0]
        keys = ("resources", "budget", "mask", "counts") if with_counts else ("resources", "budget", "mask")
        # each state's flat critic input and each candidate's actor input written straight into growing buffers
        # (numpy's per-call costs, not bytes, dominate at these sizes; the same values as concatenating them)
        widths = np.cumsum([0, *(int(np.prod(obs[k].shape[1:])) for k in keys)]).tolist()
        states = Buffer((n_envs, widths[-1]))
        n_res, n_bud = obs["resources"].shape[2], obs["budget"].shape[1]
        rows = Buffer((n_res + n_bud + 1,))
        row_sample, row_prop, old_logp, rewards = [], [], [], []
        done = np.zeros(n_envs, dtype=bool)
        while not done.all():
            res, bud, mask = obs["resources"], obs["budget"], obs["mask"]
            state = states.take(1)[0]
            for k, a, b in zip(keys, widths, widths[1:]):
                state[:, a:b] = obs[k].reshape(n_envs, -1)
            s, r = np.nonzero(mask)
            x = rows.take(s.size)
            x[:, :n_res] = res[s, r]
            x[:, n_res:-1] = bud[s]
            x[:, -1] = 1.0
            p, proposed, logp = rollout_actor(self.weights, x, s, n_envs, self.rng)
            action = np.full(mask.shape, -1.0, dtype=np.float32)
            action[s, r] = np.where(proposed, np.maximum(p, 1e-6), -1.0)
            row_sample.append(s + len(rewards) * n_envs)
            obs, reward, terminated, truncated, _ = venv.step(action)
            row_prop.append(proposed)
            old_logp.append(logp)
            rewards.append(reward * reward_scale)
            done = terminated | truncated
            if done.any() and not done.all():
                raise RuntimeError("weeks of one rollout must end together (equal horizons)")
        # the critic's products read its input in critic_dtype anyway: stored so, the epochs gather half the bytes
        batch = {"obs": torch.as_tensor(states.filled().reshape(-1, widths[-1])).to(self.loss["critic_dtype"]),
                 "rows": torch.as_tensor(rows.filled()),
                 "row_sample": np.concatenate(row_sample), "proposed": np.concatenate(row_prop),
                 "old_logp": torch.as_tensor(np.concatenate(old_logp)),
                 "rewards": torch.as_tensor(np.stack(rewards), dtype=torch.float32)}
        return batch, len(rewards)

    def values(self, batch):
        """The critic's values of a :meth:`rollout`'s states, ``(T, n_envs)``."""
        T, n_envs = batch["rewards"].shape
        with torch.no_grad():
            # the engine's tanh is sigmoid_tanh (self.loss), which critic_values_only computes in fewer passes
            return critic_values_only(self.state[1][0], batch["obs"], self.loss["critic_dtype"]).reshape(T, n_envs)

    def minibatches(self, batch, adv, ret, gather: bool = True):
        """One epoch of a :meth:`rollout`'s ``batch`` with its advantages and returns (``T * n_envs`` along the first
        axis; a second axis is carried along): its samples in a random order, cut into ``n_minibatches``
        minibatches (:class:`Minibatch`). With ``gather=False`` a minibatch's ``x`` and ``obs`` are the indices of
        its rows in ``batch["rows"]`` and of its samples in ``batch["obs"]`` (:func:`gathered_update` gathers
        them)."""
        obs, rows = batch["obs"], batch["rows"]
        proposed = torch.as_tensor(batch["proposed"], dtype=torch.float32)
        n = adv.shape[0]
        counts = np.bincount(batch["row_sample"], minlength=n)
        starts = np.cumsum(counts) - counts
        mb = max(1, n // self.n_minibatches)
        # the samples in a random order; a sample's candidate rows are contiguous, so they follow in blocks
        order = self.rng.permutation(n)
        count = counts[order]
        ends = np.cumsum(count)
        row_order = torch.as_tensor(np.repeat(starts[order] - (ends - count), count) + np.arange(ends[-1]))
        # each row's sample within its minibatch (minibatches start at multiples of mb)
        row_sample = torch.as_tensor(np.repeat(np.arange(n) % mb, count))
        cuts = np.arange(mb, n, mb)
        row_cuts, cuts = ends[cuts - 1].tolist(), cuts.tolist()
        inv_count = torch.as_tensor(1.0 / np.maximum(count, 1), dtype=torch.float32)[:, None]
        order = torch.as_tensor(order)
        # the epoch's arrays in the new order, each cut into the minibatches' views at once (few host-side calls
        # per minibatch: between the compiled calls they run on cold caches)
        per_row = (torch.index_select(rows, 0, row_order) if gather else row_order, row_sample, proposed[row_order])
        per_sample = (torch.index_select(obs, 0, order) if gather else order, inv_count, batch["old_logp"][order],
                      adv[order], ret[order])
        for (x, sample, prop), (o, inv, old, a, r) in zip(zip(*(t.tensor_split(row_cuts) for t in per_row)),
                                                          zip(*(t.tensor_split(cuts) for t in per_sample))):
            yield Minibatch(x, o, sample, inv, prop, old, a, r)

    def learn(self, batch, adv, ret, *, learning_rate: float, with_actor: bool = True):
        """``n_epochs`` epochs of minibatch updates (:meth:`minibatches`) on a :meth:`rollout`'s ``batch`` with its
        advantages and returns (flat, ``T * n_envs``); with ``with_actor=False`` only the critic learns (a critic
        warm-up)."""
        nets = (0, 1) if with_actor else (1,)
        with torch.no_grad():
            for _ in range(self.n_epochs):
                for minibatch in self.minibatches(batch, adv, ret, gather=False):
                    for k in nets:
                        self.adam_steps[k] += 1
                        t = self.adam_steps[k]
                        # written in place (float32, as torch.tensor rounds them): the graph reads the same tensors
                        self.step_arrays[k][0][()] = learning_rate / (1 - ADAM_BETAS[0] ** t)
                        self.step_arrays[k][1][()] = (1 - ADAM_BETAS[1] ** t) ** 0.5
                    self.step_fn(self.state, self.steps if with_actor else [None, self.steps[1]], batch["rows"],
                                 batch["obs"], minibatch, max_grad_norm=self.max_grad_norm, with_actor=with_actor,
                                 **self.loss)

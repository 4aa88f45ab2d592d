"""Imitation of the hindsight DP (torch): behaviour cloning and DAgger.

The student is :class:`~membudget.agents.per_resource.PerResourceNet` — the network PPO trains too — and acts
as a :class:`~membudget.agents.per_resource.StudentPolicy` in ``action_mode="scores"``: a candidate whose
probability reaches ``threshold`` (0.5) is proposed with that probability as its score; the environment's executor
keeps the plan feasible.

- **BC** fits the student to the DP's schedules replayed on the training weeks (state = the observation before
  each step of the DP's own rollout, label = the resources the DP queries at that step).
- **DAgger** then rolls out the student in :class:`~membudget.wrappers.HindsightTeacher`, labels every state it
  visits with the wrapper's ``info["teacher_action"]`` (the resources the DP's optimal continuation from that state
  queries now), aggregates and refits.

Only candidates enter the loss (the executor never queries a non-candidate); positives are weighted by the
negative-to-positive ratio. Students save to plain-array ``.npz`` files, never pickle.

The same code paths serve ``ConversationPM-v0`` (``task=CONVERSATION``): the teacher is the conversation's exact
hindsight optimum (:class:`~membudget.teachers.conversation.ConversationOptimum`; DAgger labels a visited state
with its optimal continuation from there), the student reads the conversation's 34 resource features and
validation reports the conversation score.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from membudget.agents.per_resource import MAX_WIDTH, PerResourceNet, StudentPolicy
from membudget.agents.tasks import PMWEEK
from membudget.envs.pm import BUDGET_FEATURE_NAMES
from membudget.envs.validation import check_int, check_number


class Demonstrations:
    """Teacher-labelled states: ``resources (n, R, F)`` (F = 27 on PMWeek-v0), ``budget (n, 9)``, ``mask (n, R)``,
    ``labels (n, R)`` (1: the teacher queries the resource at that state). Anything else — strings, ``None``,
    non-finite values, shapes that do not match, a mask or labels other than 0 / 1 — raises ``ValueError`` naming
    the array."""

    def __init__(self, resources, budget, mask, labels):
        arrays = {}
        for name, value in (("resources", resources), ("budget", budget), ("mask", mask), ("labels", labels)):
            try:
                a = np.asarray(value)
            except ValueError as e:
                raise ValueError(f"{name} must be a regular array of numbers ({e})") from None
            if a.dtype.kind not in "biuf":
                raise ValueError(f"{name} must be numbers, got {type(value).__name__} of dtype {a.dtype}")
            if not np.isfinite(a).all():
                raise ValueError(f"{name} must be finite")
            arrays[name] = a.astype(np.float32)
        res = arrays["resources"]
        if res.ndim != 3 or 0 in res.shape[1:]:
            raise ValueError(f"resources must have shape (n, R, F), got {res.shape}")
        n, R, _ = res.shape
        for name, shape in (("budget", (n, len(BUDGET_FEATURE_NAMES))), ("mask", (n, R)), ("labels", (n, R))):
            if arrays[name].shape != shape:
                raise ValueError(f"{name} must have shape {shape} to match resources {res.shape}, got "
                                 f"{arrays[name].shape}")
        for name in ("mask", "labels"):
            if not np.isin(arrays[name], (0.0, 1.0)).all():
                raise ValueError(f"{name} must be 0 or 1")
        self.resources, self.budget, self.mask, self.labels = (arrays[k] for k in ("resources", "budget", "mask",
                                                                                   "labels"))

    def __len__(self):
        return len(self.labels)

    def arrays(self):
        return self.resources, self.budget, self.mask, self.labels

    @classmethod
    def concatenate(cls, parts):
        return cls(*(np.concatenate(a) for a in zip(*(p.arrays() for p in parts))))


def _state(obs, labels, out):
    for k, v in zip(("resources", "budget", "mask", "labels"), (obs["resources"], obs["budget"], obs["mask"], labels)):
        out[k].append(v)


def dp_demonstrations(seeds, budget, *, task=PMWEEK, **env_kw) -> Demonstrations:
    """States and labels of the teacher's own rollouts on the episodes ``seeds`` (``task``: :data:`PMWEEK`, the
    hindsight DP on weeks, or :data:`CONVERSATION`, the conversation's hindsight optimum)."""
    out = {k: [] for k in ("resources", "budget", "mask", "labels")}
    for s in seeds:
        env = task.make_env(budget, **env_kw)
        obs, _ = env.reset(seed=int(s))
        plan = {}
        for t, r in task.schedule(env):
            plan.setdefault(t, []).append(r)
        t, done = 0, False
        while not done:
            y = np.zeros(obs["mask"].size, dtype=np.float32)
            y[plan.get(t, [])] = 1.0
            _state(obs, y, out)
            obs, _, done, _, _ = env.step(np.where(y > 0, 1.0, -1.0).astype(np.float32))
            t += 1
    return Demonstrations(*(np.stack(out[k]) for k in ("resources", "budget", "mask", "labels")))


def fit_net(demos: Demonstrations, *, hidden=(64, 64), context=True, epochs=60, lr=3e-3, seed=0, batch=256,
            init: PerResourceNet | None = None) -> PerResourceNet:
    """Fit a :class:`PerResourceNet` (or continue ``init``) to teacher labels by class-weighted binary
    cross-entropy on the candidates."""
    check_int("epochs", epochs, 1)
    check_int("batch", batch, 1)
    check_number("lr", lr, 0, low_open=True)
    check_int("seed", seed, 0)
    torch.manual_seed(seed)
    net = PerResourceNet(hidden, context, n_resource_features=demos.resources.shape[-1]) if init is None else init
    res, bud, mask, y = (torch.as_tensor(a) for a in demos.arrays())
    pos = float((y * mask).sum())
    pos_weight = torch.tensor(max(1.0, (float(mask.sum()) - pos) / max(pos, 1.0)))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    net.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(y), generator=gen).split(batch):
            z = net(res[idx], bud[idx], mask[idx])[..., 0]
            per = torch.nn.functional.binary_cross_entropy_with_logits(z, y[idx], pos_weight=pos_weight,
                                                                       reduction="none")
            loss = (per * mask[idx]).sum() / mask[idx].sum().clamp(min=1.0)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return net.eval()


def _settings(hidden, context, epochs, seed) -> tuple:
    """The layer widths (an int ``h`` means ``(h, h)``), after checking the settings shared by BC and DAgger before
    any teacher call."""
    check_int("epochs", epochs, 1)
    check_int("seed", seed, 0)
    if not isinstance(context, (bool, np.bool_)):
        raise ValueError(f"context must be a bool, got {context!r}")
    if isinstance(hidden, (int, np.integer)) and not isinstance(hidden, bool):
        hidden = (int(hidden),) * 2
    if not isinstance(hidden, (tuple, list)) or not hidden:
        raise ValueError(f"hidden must be an int or a list of layer widths, got {hidden!r}")
    return tuple(check_int(f"hidden[{i}]", h, 1, MAX_WIDTH) for i, h in enumerate(hidden))


def fit_bc(train_seeds, budget, *, epochs=60, hidden=(64, 64), context=True, seed=0, progress=None, task=PMWEEK):
    """Behaviour cloning on the teacher's schedules of ``train_seeds`` at ``budget``; ``(policy, history)``.
    ``hidden``: layer widths of the :class:`PerResourceNet` (an int ``h`` means ``(h, h)``); ``task``:
    :data:`PMWEEK` or :data:`CONVERSATION`."""
    hidden = _settings(hidden, context, epochs, seed)
    start = time.perf_counter()
    demos = dp_demonstrations(train_seeds, budget, task=task)
    net = fit_net(demos, hidden=hidden, context=context, epochs=epochs, seed=seed)
    cfg = {"method": "bc", "budget": budget, "train_seeds": [int(s) for s in train_seeds], "epochs": epochs,
           "hidden": list(hidden), "context": context, "seed": seed, "teacher_calls": len(train_seeds)}
    policy = StudentPolicy(net, config=cfg)
    key = f"val_{task.quality}"
    history = [{"env_steps": len(demos), "wall_clock": time.perf_counter() - start,
                key: task.validate(policy, budget, task.validation_seeds)}]  # wall clock taken before the validation
    if progress:
        progress(f"bc: validation {task.quality} {history[-1][key]:.4f}")
    return policy, history


def fit_dagger(train_seeds, budget, *, iterations=4, epochs=60, hidden=(64, 64), context=True, seed=0,
               progress=None, task=PMWEEK):
    """DAgger from the BC student: roll out the current student on the training weeks, label each visited state
    with the DP's optimal continuation, aggregate with everything so far, refit; ``(policy, history)``.
    ``policy.config["teacher_calls"]`` counts the DP solves (one per demonstration week; in the DAgger rollouts
    one per week plus one per state the student reached off the teacher's plan; on conversations one per state).
    ``task``: :data:`PMWEEK` or :data:`CONVERSATION`."""
    check_int("iterations", iterations, 1)
    hidden = _settings(hidden, context, epochs, seed)
    start = time.perf_counter()
    demos = dp_demonstrations(train_seeds, budget, task=task)
    net = fit_net(demos, hidden=hidden, context=context, epochs=epochs, seed=seed)
    cfg = {"method": "dagger", "budget": budget, "train_seeds": [int(s) for s in train_seeds], "epochs": epochs,
           "hidden": list(hidden), "context": context, "seed": seed, "iterations": iterations}
    steps, calls = len(demos), len(train_seeds)
    policy = StudentPolicy(net, config=dict(cfg, teacher_calls=calls))
    validating = 0.0  # validation time is not training time
    key = f"val_{task.quality}"

    def point():
        nonlocal validating
        trained = time.perf_counter() - start - validating
        t = time.perf_counter()
        quality = task.validate(policy, budget, task.validation_seeds)
        validating += time.perf_counter() - t
        return {"env_steps": steps, "wall_clock": trained, key: quality}

    history = [point()]
    parts = [demos]
    for it in range(iterations):
        out = {k: [] for k in ("resources", "budget", "mask", "labels")}
        for s in train_seeds:
            env = task.teacher_env(budget)
            obs, info = env.reset(seed=int(s))
            done = False
            while not done:
                _state(obs, task.label(env, info).astype(np.float32), out)
                obs, _, done, _, info = env.step(policy.predict(obs)[0])
            calls += task.solves(env)
        new = Demonstrations(*(np.stack(out[k]) for k in ("resources", "budget", "mask", "labels")))
        steps += len(new)
        parts.append(new)
        net = fit_net(Demonstrations.concatenate(parts), hidden=hidden, context=context, epochs=epochs,
                      seed=seed + it + 1)
        policy = StudentPolicy(net, config=dict(cfg, teacher_calls=calls))
        history.append(point())
        if progress:
            progress(f"dagger iteration {it + 1}: validation {task.quality} {history[-1][key]:.4f}")
    return policy, history

"""Imitation of the hindsight DP (torch): behaviour cloning and DAgger.

The student is :class:`~membudget.agents.per_resource.PerResourceNet` — the network PPO trains too — and acts
as a :class:`~membudget.agents.per_resource.StudentPolicy` in ``action_mode="scores"``: a candidate whose
probability reaches 0.5 is proposed with that probability as its score; the environment's executor keeps the plan
feasible.

- **BC** fits the student to the DP's schedules replayed on the training weeks (state = the observation before
  each step of the DP's own rollout, label = the resources the DP queries at that step).
- **DAgger** then rolls out the student in :class:`~membudget.wrappers.HindsightTeacher`, labels every state it
  visits with the wrapper's ``info["teacher_action"]`` (the resources the DP's optimal continuation from that state
  queries now), aggregates and refits.

Only candidates enter the loss (the executor never queries a non-candidate); positives are weighted by the
negative-to-positive ratio. On ``PMWeek-v0`` the network fits inputs standardised over the candidates, the scaling
then folded into its first layer (:func:`fit_net`), and every fitted student gets the proposal threshold that
scores best on the validation weeks at its budget (:func:`calibrate_threshold`), folded into its head's bias
(:func:`with_threshold`). Without both, BC proposed too
much at B10 (threshold 0.5 on raw inputs) or too little at B20 (on standardised inputs); docs/studies.md lists the
trials. The settings are one frozen :class:`ImitationSettings`, :data:`DEFAULTS`, chosen on validation weeks
4000-4029. Students save to plain-array ``.npz`` files, never pickle.

The same code paths serve ``ConversationPM-v0`` (``task=CONVERSATION``): the teacher is the conversation's exact
hindsight optimum (:class:`~membudget.teachers.conversation.ConversationOptimum`; DAgger labels a visited state
with its optimal continuation from there), the student reads the conversation's 34 resource features and
validation reports the conversation score.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

from membudget.agents.configs import (CONVERSATION_DEFAULTS, DEFAULTS,  # noqa: F401 (re-exported)
                                      ImitationSettings)
from membudget.agents.per_resource import MAX_WIDTH, PerResourceNet, StudentPolicy, seeded_torch
from membudget.agents.tasks import CONVERSATION, PMWEEK
from membudget.envs.pm import BUDGET_FEATURE_NAMES
from membudget.envs.pm.env import scores_of
from membudget.envs.validation import check_int, check_number


def defaults(task=PMWEEK) -> ImitationSettings:
    """The default :class:`ImitationSettings` of ``task``."""
    return CONVERSATION_DEFAULTS if task is CONVERSATION else DEFAULTS


THRESHOLDS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98)
"""The proposal thresholds a calibration chooses from."""


def calibration_seeds(task=PMWEEK) -> range:
    """The episodes a student's threshold is calibrated on: PMWeek-v0's validation weeks 4000-4029 (never trained
    on, disjoint from every week a study reports on); other tasks: their validation episodes."""
    return range(4000, 4030) if task is PMWEEK else task.validation_seeds


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


class StateLog:
    """Labelled states as a rollout visits them (:meth:`add`); :meth:`demonstrations` stacks them."""

    def __init__(self):
        self.rows = []

    def add(self, obs, labels) -> None:
        self.rows.append((obs["resources"], obs["budget"], obs["mask"], labels))

    def demonstrations(self) -> Demonstrations:
        return Demonstrations(*(np.stack(column) for column in zip(*self.rows)))


def dp_demonstrations(seeds, budget, *, task=PMWEEK, **env_kw) -> Demonstrations:
    """States and labels of the teacher's own rollouts on the episodes ``seeds`` (``task``: :data:`PMWEEK`, the
    hindsight DP on weeks, or :data:`CONVERSATION`, the conversation's hindsight optimum)."""
    log = StateLog()
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
            log.add(obs, y)
            obs, _, done, _, _ = env.step(scores_of(y))
            t += 1
    return log.demonstrations()


def input_scaling(demos: Demonstrations) -> tuple:
    """``(mean, scale)`` of the network's input rows (:data:`~membudget.agents.per_resource.N_INPUT` values: the
    resource features, the budget features, the candidate bit) over the candidates of ``demos``: the per-feature
    mean and standard deviation (scale 1 where a feature is constant); the candidate bit is left as it is
    (mean 0, scale 1)."""
    res, bud, mask, _ = demos.arrays()
    rows = mask > 0
    x = np.concatenate([res[rows], np.broadcast_to(bud[:, None, :], (*mask.shape, bud.shape[-1]))[rows]], axis=-1)
    x = x.astype(np.float64)
    mean, scale = (x.mean(axis=0), x.std(axis=0)) if len(x) else (np.zeros(x.shape[-1]), np.ones(x.shape[-1]))
    scale[scale < 1e-8] = 1.0
    return np.append(mean, 0.0), np.append(scale, 1.0)


def _rescale_first_layer(net: PerResourceNet, mean, scale, *, fold: bool) -> None:
    """Fold the input scaling ``(x - mean) / scale`` into the network's first layer (``fold=True``: the network
    then reads raw observations) or take it out again (``fold=False``: the network reads scaled inputs)."""
    mean, scale = (torch.as_tensor(a, dtype=net.first.weight.dtype) for a in (mean, scale))
    with torch.no_grad():
        w = net.first.weight
        if fold:
            w.div_(scale)
            net.first.bias.sub_(w @ mean)
        else:
            net.first.bias.add_(w @ mean)
            w.mul_(scale)


def fit_net(demos: Demonstrations, *, hidden=DEFAULTS.hidden, context=DEFAULTS.context, epochs=DEFAULTS.epochs,
            lr=DEFAULTS.lr, seed=0, batch=DEFAULTS.batch, standardize=DEFAULTS.standardize,
            init: PerResourceNet | None = None) -> PerResourceNet:
    """Fit a :class:`PerResourceNet` (or continue ``init``) to teacher labels by class-weighted binary
    cross-entropy on the candidates (positives weighted by the negative-to-positive ratio), Adam, minibatches of
    ``batch`` states.

    ``standardize``: train on inputs scaled to mean 0 and standard deviation 1 over the candidates
    (:func:`input_scaling`), then fold the scaling into the first layer, so that the returned network reads raw
    observations like any other (same class, same saved form). PMWeek-v0's features differ in scale by up to 70
    times over the candidates (standard deviation about 0.01 for the window distances, 0.7 for the time of day)."""
    check_int("epochs", epochs, 1)
    check_int("batch", batch, 1)
    check_number("lr", lr, 0, low_open=True)
    check_int("seed", seed, 0)
    with seeded_torch(seed):  # the initial weights; the caller's global torch stream is left as it was
        net = PerResourceNet(hidden, context, n_resource_features=demos.resources.shape[-1]) if init is None else init
    res, bud, mask, y = (torch.as_tensor(a) for a in demos.arrays())
    if standardize:
        mean, scale = input_scaling(demos)
        n_res = res.shape[-1]
        res = (res - torch.as_tensor(mean[:n_res], dtype=res.dtype)) / torch.as_tensor(scale[:n_res], dtype=res.dtype)
        bud = (bud - torch.as_tensor(mean[n_res:-1], dtype=res.dtype)) / torch.as_tensor(scale[n_res:-1],
                                                                                          dtype=res.dtype)
        if init is not None:
            _rescale_first_layer(net, mean, scale, fold=False)
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
    if standardize:
        _rescale_first_layer(net, mean, scale, fold=True)
    return net.eval()


def with_threshold(net: PerResourceNet, threshold: float) -> PerResourceNet:
    """A copy of ``net`` whose student (threshold 0.5) proposes exactly the candidates ``net``'s proposes at
    ``threshold``: the head's bias lowered by ``logit(threshold)``. Its scores are a monotone function of the old
    ones, so with unit costs (the executor ranks proposals by score) it acts as ``net`` at ``threshold`` does, and
    whatever starts from the network — PPO's ``init``, a saved student — starts from that behaviour."""
    net = copy.deepcopy(net)
    if threshold != 0.5:
        with torch.no_grad():
            net.head.bias.sub_(float(np.log(threshold / (1.0 - threshold))))
    return net


class _RowNets:
    """Several students side by side: rows ``k * n .. (k + 1) * n - 1`` of a batched observation are acted on by
    ``StudentPolicy(nets[k])``, exactly as that student alone would."""

    def __init__(self, nets, n: int):
        self.students, self.n = [StudentPolicy(net) for net in nets], n

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        return np.concatenate([s.predict({k: v[i * self.n:(i + 1) * self.n] for k, v in observation.items()})[0]
                               for i, s in enumerate(self.students)]), state


def threshold_quality(net, budget, seeds, thresholds=THRESHOLDS, *, task=PMWEEK) -> np.ndarray:
    """The task's quality (Set F1 on PMWeek-v0) of ``with_threshold(net, t)``'s student for each ``t`` of
    ``thresholds`` on each of the episodes ``seeds`` at ``budget``: ``(len(thresholds), len(seeds))``, from one
    batched rollout."""
    seeds, thresholds = list(seeds), [float(t) for t in thresholds]
    policy = _RowNets([with_threshold(net, t) for t in thresholds], len(seeds))
    quality = task.rollout(policy, seeds * len(thresholds), budget=budget, action_mode="scores")[task.quality]
    return np.asarray(quality, dtype=np.float64).reshape(len(thresholds), len(seeds))


def calibrate_threshold(net, budget, seeds=None, thresholds=THRESHOLDS, *, task=PMWEEK) -> tuple:
    """``(threshold, {threshold: mean quality})``: the threshold of ``thresholds`` with the best mean quality
    (:func:`threshold_quality`) on ``seeds`` (default :func:`calibration_seeds`) at ``budget``; ties go to the
    first."""
    seeds = calibration_seeds(task) if seeds is None else seeds
    mean = threshold_quality(net, budget, seeds, thresholds, task=task).mean(axis=1)
    return float(thresholds[int(np.argmax(mean))]), {float(t): float(q) for t, q in zip(thresholds, mean)}


def _student(net, budget, calibrate, task, config) -> StudentPolicy:
    """The deployed student of ``net``: as fitted, or with its calibrated threshold folded into the head's bias
    (:func:`with_threshold`; the threshold and the calibration recorded in its config). Either acts at 0.5."""
    if not calibrate:
        return StudentPolicy(net, config=config)
    threshold, table = calibrate_threshold(net, budget, task=task)
    seeds = calibration_seeds(task)
    return StudentPolicy(with_threshold(net, threshold), config=dict(config, threshold=threshold, calibration={
        "episodes": [min(seeds), max(seeds)], task.quality: {str(t): q for t, q in table.items()}}))


FIT_SETTINGS = ("epochs", "hidden", "context", "lr", "batch", "standardize", "calibrate")
"""The settings a fit takes as keyword overrides (DAgger also ``iterations``)."""


def _settings(task, seed, settings, overrides, extra=()) -> dict:
    """The fit's settings: ``settings`` (None: ``task``'s :func:`defaults`) with the ``overrides`` that are not
    None; ``hidden`` as layer widths (an int ``h`` means ``(h, h)``); all checked, with ``seed``, before any
    teacher call."""
    allowed = FIT_SETTINGS + tuple(extra)
    unknown = sorted(set(overrides) - set(allowed))
    if unknown:
        raise TypeError(f"unknown setting(s) {', '.join(unknown)}; a fit takes {', '.join(allowed)}")
    base = defaults(task) if settings is None else settings
    if not isinstance(base, ImitationSettings):
        raise TypeError(f"settings must be an ImitationSettings, got {type(base).__name__}")
    out = {k: getattr(base, k) for k in allowed}
    out.update({k: v for k, v in overrides.items() if v is not None})
    check_int("epochs", out["epochs"], 1)
    check_int("batch", out["batch"], 1)
    check_number("lr", out["lr"], 0, low_open=True)
    check_int("seed", seed, 0)
    for flag in ("context", "standardize", "calibrate"):
        if not isinstance(out[flag], (bool, np.bool_)):
            raise ValueError(f"{flag} must be a bool, got {out[flag]!r}")
    hidden = out["hidden"]
    if isinstance(hidden, (int, np.integer)) and not isinstance(hidden, bool):
        hidden = (int(hidden),) * 2
    if not isinstance(hidden, (tuple, list)) or not hidden:
        raise ValueError(f"hidden must be an int or a list of layer widths, got {hidden!r}")
    out["hidden"] = tuple(check_int(f"hidden[{i}]", h, 1, MAX_WIDTH) for i, h in enumerate(hidden))
    out["context"] = bool(out["context"])
    out["standardize"] = bool(out["standardize"])
    out["calibrate"] = bool(out["calibrate"])
    return out


def _record(method, budget, train_seeds, fit, seed, **extra) -> dict:
    return {"method": method, "budget": budget, "train_seeds": [int(s) for s in train_seeds], **fit,
            "hidden": list(fit["hidden"]), "seed": seed, **extra}


def _net_settings(fit: dict) -> dict:
    return {k: v for k, v in fit.items() if k != "calibrate"}


def check_train_seeds(train_seeds) -> None:
    """``train_seeds`` are the training episodes' seeds (weeks on PMWeek-v0), a non-empty list, tuple, range or 1-D
    array of non-negative ints, not demonstrations (the teacher labels them itself); otherwise ``TypeError`` /
    ``ValueError`` naming it."""
    if not (isinstance(train_seeds, (list, tuple, range)) or isinstance(train_seeds, np.ndarray) and train_seeds.ndim):
        raise TypeError(f"train_seeds must be a list (or tuple, range, 1-D array) of episode seeds, e.g. [2000, "
                        f"2001], got {type(train_seeds).__name__}")
    if len(train_seeds) == 0:
        raise ValueError("train_seeds is empty: imitation needs at least one training episode's seed")
    for i, s in enumerate(train_seeds):
        check_int(f"train_seeds[{i}]", s, 0)


def fit_bc(train_seeds, budget, settings=None, *, seed=0, progress=None, task=PMWEEK, **overrides):
    """Behaviour cloning on the teacher's schedules of ``train_seeds`` at ``budget``; ``(policy, history)``.
    ``settings``: an :class:`ImitationSettings` (None: ``task``'s default, :func:`defaults`: :data:`DEFAULTS` on
    PMWeek-v0, chosen on validation weeks); ``overrides``: any of :data:`FIT_SETTINGS` (``hidden``: layer widths
    of the :class:`PerResourceNet`, an int ``h`` meaning ``(h, h)``); ``task``: :data:`PMWEEK` or
    :data:`CONVERSATION`. ``train_seeds``: :func:`check_train_seeds`."""
    check_train_seeds(train_seeds)
    fit = _settings(task, seed, settings, overrides)
    start = time.perf_counter()
    demos = dp_demonstrations(train_seeds, budget, task=task)
    net = fit_net(demos, seed=seed, **_net_settings(fit))
    policy = _student(net, budget, fit["calibrate"], task,
                      _record("bc", budget, train_seeds, fit, seed, teacher_calls=len(train_seeds)))
    key = f"val_{task.quality}"
    history = [{"env_steps": len(demos), "wall_clock": time.perf_counter() - start,  # calibration included
                key: task.validate(policy, budget, task.validation_seeds)}]  # wall clock taken before the validation
    if progress:
        progress(f"bc: validation {task.quality} {history[-1][key]:.4f}")
    return policy, history


def fit_dagger(train_seeds, budget, settings=None, *, seed=0, progress=None, task=PMWEEK, callback=None, **overrides):
    """DAgger from the BC student: roll out the current student on the training weeks, label each visited state
    with the DP's optimal continuation, aggregate with everything so far, refit; ``(policy, history)``.
    ``policy.config["teacher_calls"]`` counts the DP solves (one per demonstration week; in the DAgger rollouts
    one per week plus one per state the student reached off the teacher's plan; on conversations one per state).
    ``settings``, ``overrides`` (also ``iterations``) and ``task`` as in :func:`fit_bc`; ``callback(iteration,
    policy)``, if given, sees the student of every fit (iteration 0: the BC fit)."""
    check_train_seeds(train_seeds)
    fit = _settings(task, seed, settings, overrides, extra=("iterations",))
    iterations = check_int("iterations", fit.pop("iterations"), 1)
    start = time.perf_counter()
    demos = dp_demonstrations(train_seeds, budget, task=task)
    net = fit_net(demos, seed=seed, **_net_settings(fit))
    cfg = _record("dagger", budget, train_seeds, fit, seed, iterations=iterations)
    steps, calls = len(demos), len(train_seeds)
    policy = _student(net, budget, fit["calibrate"], task, dict(cfg, teacher_calls=calls))
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
    if callback:
        callback(0, policy)
    parts = [demos]
    for it in range(iterations):
        log = StateLog()
        for s in train_seeds:
            env = task.teacher_env(budget)
            obs, info = env.reset(seed=int(s))
            done = False
            while not done:
                log.add(obs, task.label(env, info).astype(np.float32))
                obs, _, done, _, info = env.step(policy.predict(obs)[0])
            calls += task.solves(env)
        new = log.demonstrations()
        steps += len(new)
        parts.append(new)
        net = fit_net(Demonstrations.concatenate(parts), seed=seed + it + 1, **_net_settings(fit))
        policy = _student(net, budget, fit["calibrate"], task, dict(cfg, teacher_calls=calls))
        history.append(point())
        if callback:
            callback(it + 1, policy)
        if progress:
            progress(f"dagger iteration {it + 1}: validation {task.quality} {history[-1][key]:.4f}")
    return policy, history

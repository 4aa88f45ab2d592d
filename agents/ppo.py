"""PPO on the native batched ``PMWeek-v0`` with the per-resource actor (CleanRL-style, one file of torch).

The actor is :class:`~membudget.agents.per_resource.PerResourceNet` — the class behaviour cloning and DAgger
fit — so PPO, BC, DAgger and distil-then-RL differ only in their learning signal. Each update plays one whole
week in every one of ``n_envs`` slots of :class:`~membudget.envs.pm.PMWeekVectorEnv` (weeks are development
weeks 2000-3999 in a seed-dependent order, :func:`~membudget.agents.rl.week_order`), so a rollout is
``n_envs × T`` steps with no autoreset and no bootstrapping.

The action is a masked Bernoulli proposal set played in ``action_mode="scores"``: each candidate is proposed
with probability ``p = sigmoid(logit)`` and a proposed resource carries ``p`` as its score, so the hard-cap
executor scans proposals by the policy's own probabilities — exactly how the deployed
:class:`~membudget.agents.per_resource.StudentPolicy` (deterministic: every candidate with ``p >= 0.5``) and the
BC / DAgger students act. Non-candidates are never proposed and carry no log-probability (the executor would
skip them). The critic is an MLP over the flattened observation (SB3's ``MultiInputPolicy`` critic); with
``critic_counts=True`` it also reads the running TP / FP / FN (``obs["counts"]`` of
``PMWeekEnv(observe_counts=True)``), which the reward depends on but BudgetPM's observation does not show.

The same loop trains on ``ConversationPM-v0`` (``task=CONVERSATION``, :mod:`membudget.agents.tasks`): its
conversations run side by side in Gymnasium's ``SyncVectorEnv`` (all of one horizon), the actor reads their 34
resource features, and validation reports the conversation score.

Distil-then-RL: ``init=`` a fitted student's network (the actor starts there, the critic from scratch) and,
optionally, ``bc_coef > 0`` with ``bc_data=(X_res, X_bud, M, Y)`` adds a behaviour-cloning loss on teacher
labels to every minibatch (a KL-to-teacher anchor against forgetting). ``critic_warmup=k`` trains only the critic
during the first ``k`` updates (the actor acts but stays fixed), so that a student is not moved by the advantages of
an untrained critic.
"""

from __future__ import annotations

import copy
import dataclasses
import time
import warnings

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from torch import nn

from membudget.agents.configs import (ACTORS, AUTO_COMPILED_STEPS, ENGINES, PPOConfig,  # noqa: F401 (re-exported)
                                      ppo_config)
from membudget.agents.per_resource import (FlatMLPNet, PerResourceNet, StudentPolicy, candidate_rows,
                                           obs_tensors, seeded_torch)
from membudget.agents.rl import update_weeks, week_order
from membudget.agents.tasks import PMWEEK, TASKS
from membudget.envs.validation import check_int


def _mlp(width, arch):
    layers = []
    for h in arch:
        layers += [nn.Linear(width, h), nn.Tanh()]
        width = h
    return nn.Sequential(*layers, nn.Linear(width, 1))


def new_actor(kind: str, hidden, context: bool, n_resources: int, n_features: int):
    """A fresh actor of :data:`ACTORS` for ``n_resources`` resources of ``n_features`` features, its output layer
    near zero (orthogonal, gain 0.01; bias 0): every candidate starts proposed with probability about 1/2."""
    net = (PerResourceNet(hidden, context, n_resource_features=n_features) if kind == "per-resource"
           else FlatMLPNet(n_resources, hidden, n_resource_features=n_features))
    nn.init.orthogonal_(net.head.weight, gain=0.01)
    nn.init.zeros_(net.head.bias)
    return net


def _flat(res, bud, mask, counts=None):
    parts = [res.flatten(1), bud, mask] + ([counts] if counts is not None else [])
    return torch.cat(parts, dim=1)


def _bernoulli_log_prob(logits, proposal):
    return proposal * nn.functional.logsigmoid(logits) + (1 - proposal) * nn.functional.logsigmoid(-logits)


def _bernoulli_entropy(logits):
    return -(torch.sigmoid(logits) * nn.functional.logsigmoid(logits)
             + torch.sigmoid(-logits) * nn.functional.logsigmoid(-logits))


def _per_sample(values, sample, n):
    """Sum of per-candidate ``values`` over each sample's candidates (0 for a sample without candidates)."""
    return torch.zeros(n, dtype=values.dtype).index_add_(0, sample, values)


def ppo_losses(logits, proposed, sample, old_logp, adv, values, returns, clip_coef):
    """One minibatch's clipped policy loss, value loss and mean entropy: ``(pg, v_loss, entropy)``.

    ``logits`` and ``proposed`` are per candidate row, ``sample`` gives each row's sample (``0..n-1``, ``n =
    old_logp.numel()``); a sample's log-probability and entropy sum over its candidates. ``values`` is the
    critic's prediction for the ``n`` samples."""
    n = old_logp.numel()
    new_logp = _per_sample(_bernoulli_log_prob(logits, proposed), sample, n)
    ratio = torch.exp(new_logp - old_logp)
    a = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = torch.max(-a * ratio, -a * ratio.clamp(1 - clip_coef, 1 + clip_coef)).mean()
    v_loss = 0.5 * ((values - returns) ** 2).mean()
    entropy = _per_sample(_bernoulli_entropy(logits), sample, n).mean()
    return pg, v_loss, entropy


def gae(rewards, values, gamma: float, gae_lambda: float):
    """Generalised advantage estimates of ``(T, n)`` rewards and value predictions of whole episodes (no
    bootstrap after the last step): float32 tensors in and out. The recursion runs in numpy in float32, operation
    for operation as torch ran it (the same numbers), without torch's per-operation dispatch over the ``T`` steps."""
    r, v = rewards.detach().numpy(), values.detach().numpy()
    T, n = r.shape
    adv, last, zeros = np.zeros_like(r), np.zeros(n, np.float32), np.zeros(n, np.float32)
    g, gl = np.float32(gamma), np.float32(gamma * gae_lambda)
    for t in reversed(range(T)):
        delta = r[t] + g * (v[t + 1] if t + 1 < T else zeros) - v[t]
        last = delta + gl * last
        adv[t] = last
    return torch.from_numpy(adv)


def _minibatch_rows(batch, row_sample, n: int):
    """The candidate rows of the samples ``batch`` (indices into ``n`` samples) and, per row, the position of its
    sample in ``batch``: ``(rows, local_sample)``."""
    in_batch = torch.zeros(n, dtype=torch.bool)
    in_batch[batch] = True
    local = torch.zeros(n, dtype=torch.long)
    local[batch] = torch.arange(batch.numel())
    rows = in_batch[row_sample].nonzero()[:, 0]
    return rows, local[row_sample[rows]]


def compiled_update(engine, venv, obs, *, reward_scale: float, critic_counts: bool, gamma: float, gae_lambda: float,
                    learning_rate: float, with_actor: bool = True) -> int:
    """One update of the compiled engine (a :class:`~membudget.agents.ppo_compiled.CompiledPPO`) on the weeks
    ``venv`` was reset to (first observation ``obs``): rollout, values, GAE, epochs; returns the steps per week."""
    batch, T = engine.rollout(venv, obs, reward_scale, critic_counts)
    values = engine.values(batch)
    adv = gae(batch["rewards"], values, gamma, gae_lambda)
    engine.learn(batch, adv.reshape(-1), (adv + values).reshape(-1), learning_rate=learning_rate,
                 with_actor=with_actor)
    return T


class AutogradEngine:
    """The eager engine: float32 torch with autograd, ``clip_grad_norm_`` and torch's Adam. It trains every actor of
    :data:`ACTORS` on every task, with the optional behaviour-cloning anchor (``bc_data``: teacher states
    ``(resources, budget, mask, labels)``, a weighted BCE on ``bc_coef``'s scale added to each minibatch)."""

    def __init__(self, actor, critic, cfg: PPOConfig, rng, bc_data=None):
        self.actor, self.critic, self.cfg, self.rng = actor, critic, cfg, rng
        self.params = list(actor.parameters()) + list(critic.parameters())
        self.opt = torch.optim.Adam(self.params, lr=cfg.learning_rate, eps=1e-5, foreach=True)
        self.bc = None
        if bc_data is not None:
            res, bud, mask, y = (torch.as_tensor(a, dtype=torch.float32) for a in bc_data)
            pos = float((y * mask).sum())
            self.bc = res, bud, mask, y, torch.tensor(max(1.0, (float(mask.sum()) - pos) / max(pos, 1.0)))

    def update(self, venv, obs, learning_rate: float, with_actor: bool) -> int:
        """One rollout of the weeks ``venv`` was reset to (first observation ``obs``) and its epochs of minibatch
        updates (the critic alone unless ``with_actor``); returns the number of steps per week."""
        for g in self.opt.param_groups:
            g["lr"] = learning_rate
        batch, T = self._rollout(venv, obs)
        self._learn(batch, with_actor)
        return T

    def _rollout(self, venv, obs):
        cfg, actor, n_envs = self.cfg, self.actor, self.cfg.n_envs
        buf = {k: [] for k in ("res", "bud", "mask", "counts", "proposed", "logp", "val", "rew")}
        done = np.zeros(n_envs, dtype=bool)
        while not done.all():
            res, bud, mask, _ = obs_tensors(obs)
            counts = torch.as_tensor(obs["counts"], dtype=torch.float32) if cfg.critic_counts else None
            with torch.no_grad():
                out, sample, resource = actor.forward_candidates(res, bud, mask)
                p = torch.sigmoid(out[:, 0])
                proposed = (torch.rand(p.shape) < p).float()
                logp = _per_sample(_bernoulli_log_prob(out[:, 0], proposed), sample, n_envs)
                val = self.critic(_flat(res, bud, mask, counts))[:, 0]
            action = np.full(mask.shape, -1.0, dtype=np.float32)
            action[sample.numpy(), resource.numpy()] = np.where(proposed.numpy() > 0, p.clamp(min=1e-6).numpy(),
                                                                -1.0)
            obs, reward, terminated, truncated, _ = venv.step(action)
            rew = torch.as_tensor(reward * cfg.reward_scale, dtype=torch.float32)
            for k, v in (("res", res), ("bud", bud), ("mask", mask), ("counts", counts), ("proposed", proposed),
                         ("logp", logp), ("val", val), ("rew", rew)):
                buf[k].append(v)
            done = terminated | truncated
            _check_weeks_end_together(done)
        rew, val = torch.stack(buf["rew"]), torch.stack(buf["val"])
        adv = gae(rew, val, cfg.gamma, cfg.gae_lambda)
        res, bud, mask = (torch.cat(buf[k]) for k in ("res", "bud", "mask"))
        rows, row_sample, row_resource = candidate_rows(res, bud, mask)
        batch = {"res": res, "bud": bud, "mask": mask, "rows": rows, "row_sample": row_sample,
                 "row_resource": row_resource, "proposed": torch.cat(buf["proposed"]),  # candidate_rows' row order
                 "old_logp": torch.cat(buf["logp"]), "adv": adv.reshape(-1), "ret": (adv + val).reshape(-1),
                 "critic_in": _flat(res, bud, mask, torch.cat(buf["counts"]) if cfg.critic_counts else None)}
        return batch, len(buf["rew"])

    def _learn(self, batch, with_actor: bool):
        cfg, actor = self.cfg, self.actor
        n = batch["adv"].numel()
        if n < cfg.n_minibatches:  # (a task of TASKS is checked before training: PPOConfig.check_rollout)
            raise ValueError(f"n_minibatches must be at most the {n} samples of a rollout, got {cfg.n_minibatches}")
        mb = n // cfg.n_minibatches
        for _ in range(cfg.n_epochs):
            order = torch.as_tensor(self.rng.permutation(n))
            for start in range(0, n, mb):
                b = order[start:start + mb]
                r, sample = _minibatch_rows(b, batch["row_sample"], n)
                if isinstance(actor, PerResourceNet):
                    logits = actor.forward_rows(batch["rows"][r], sample, b.numel())[:, 0]
                else:
                    logits = actor(batch["res"][b], batch["bud"][b], batch["mask"][b])[
                        sample, batch["row_resource"][r], 0]
                pg, v_loss, entropy = ppo_losses(logits, batch["proposed"][r], sample, batch["old_logp"][b],
                                                 batch["adv"][b], self.critic(batch["critic_in"][b])[:, 0],
                                                 batch["ret"][b], cfg.clip_coef)
                loss = pg + cfg.vf_coef * v_loss - cfg.ent_coef * entropy
                if not with_actor:
                    loss = cfg.vf_coef * v_loss
                elif self.bc is not None and cfg.bc_coef > 0:
                    bc = self._bc_loss(mb)
                    if bc is not None:
                        loss = loss + cfg.bc_coef * bc
                self.opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                self.opt.step()

    def _bc_loss(self, mb: int):
        res, bud, mask, y, pos_weight = self.bc
        j = torch.as_tensor(self.rng.integers(0, y.shape[0], size=min(mb, y.shape[0])))
        z, bs, br = self.actor.forward_candidates(res[j], bud[j], mask[j])
        if not bs.numel():  # no candidate among the drawn states
            return None
        return nn.functional.binary_cross_entropy_with_logits(z[:, 0], y[j][bs, br], pos_weight=pos_weight)


class CompiledEngine:
    """The compiled engine (:class:`~membudget.agents.ppo_compiled.CompiledPPO`) behind the engine interface."""

    def __init__(self, actor, critic, cfg: PPOConfig, rng):
        from membudget.agents.ppo_compiled import (CRITIC_DTYPES, CompiledPPO, compiled_backend_name,
                                                   critic_dtype_name)

        self.cfg, self.critic_dtype = cfg, critic_dtype_name(cfg.critic_dtype)
        self.backend = compiled_backend_name(cfg.compiled_backend)
        self.ppo = CompiledPPO(actor, critic, cfg, rng, critic_dtype=CRITIC_DTYPES[self.critic_dtype],
                               backend=self.backend)

    def update(self, venv, obs, learning_rate: float, with_actor: bool) -> int:
        cfg = self.cfg
        return compiled_update(self.ppo, venv, obs, reward_scale=cfg.reward_scale, critic_counts=cfg.critic_counts,
                               gamma=cfg.gamma, gae_lambda=cfg.gae_lambda, learning_rate=learning_rate,
                               with_actor=with_actor)


def _check_weeks_end_together(done: np.ndarray) -> None:
    if done.any() and not done.all():
        raise RuntimeError("weeks of one rollout must end together (equal horizons)")


def choose_engine(cfg: PPOConfig, task, actor) -> str:
    """The engine that trains ``actor`` under ``cfg`` on ``task`` (``auto`` resolved); an explicit ``compiled``
    that cannot train the configuration, or that this machine cannot build
    (:func:`~membudget.agents.ppo_compiled.compile_blocker`: no C++ compiler, an unwritable package folder), raises
    ``ValueError`` saying why, before training; ``auto`` then trains with ``autograd`` and warns why."""
    from membudget.agents.ppo_compiled import compile_blocker, compiled_backend_name

    per_resource = isinstance(actor, PerResourceNet)
    if cfg.engine == "auto":
        fits = task is PMWEEK and per_resource and actor.context and len(actor.hidden) == 2 and cfg.bc_coef == 0
        if not fits or cfg.total_timesteps < AUTO_COMPILED_STEPS:
            return "autograd"
        blocker = compile_blocker(compiled_backend_name(cfg.compiled_backend))
        if blocker:
            warnings.warn(f"engine='auto' trains with the autograd engine: {blocker}", RuntimeWarning, stacklevel=2)
            return "autograd"
        return "compiled"
    if cfg.engine == "compiled":
        if task is not PMWEEK:
            raise ValueError(f"engine='compiled' trains on PMWeek-v0 only; {task.name} trains with engine='autograd'")
        if not per_resource or not actor.context or len(actor.hidden) != 2:
            raise ValueError("engine='compiled' trains the per-resource actor with two hidden layers and context "
                             "(hidden=(h1, h2), context=True, actor='per-resource', or such an init)")
        if cfg.bc_coef > 0:
            raise ValueError("engine='compiled' has no behaviour-cloning loss; bc_coef > 0 needs engine='autograd'")
        blocker = compile_blocker(compiled_backend_name(cfg.compiled_backend))
        if blocker:
            raise ValueError(f"engine='compiled' cannot be built here: {blocker}; engine='autograd' trains without "
                             "compiling")
    return cfg.engine


class LearningCurve:
    """A run's learning curve: a row per point (``env_steps``, ``wall_clock`` — training seconds, the evaluations
    excluded — the validation quality and, with test seeds, the test quality), the best point's actor weights
    (``keep_best``) and the callback that sees each row."""

    def __init__(self, actor, validate, eval_seeds, test_seeds, quality: str, keep_best: bool, report=None):
        self.actor, self.validate, self.eval_seeds, self.test_seeds = actor, validate, eval_seeds, test_seeds
        self.keep_best, self.report = keep_best, report
        self.val_key, self.test_key = f"val_{quality}", f"test_{quality}"
        self.rows, self.best, self.eval_time, self.start = [], {self.val_key: -np.inf}, 0.0, time.perf_counter()

    def record(self, steps: int) -> None:
        t = time.perf_counter()
        row = {"env_steps": steps, "wall_clock": t - self.start - self.eval_time,
               self.val_key: self.validate(self.eval_seeds)}
        if self.test_seeds is not None:
            row[self.test_key] = self.validate(self.test_seeds)
        self.rows.append(row)
        if self.keep_best and row[self.val_key] > self.best[self.val_key]:
            self.best = {self.val_key: row[self.val_key], "env_steps": steps,
                         "state": copy.deepcopy(self.actor.state_dict())}
        self.eval_time += time.perf_counter() - t
        if self.report:
            self.report(dict(row))

    def selected_steps(self, steps: int) -> int:
        """The env steps of the actor the run returns (restoring the best point's weights with ``keep_best``)."""
        if not self.keep_best:
            return steps
        self.actor.load_state_dict(self.best["state"])
        return self.best["env_steps"]


def _networks(cfg: PPOConfig, venv, init, task_name: str):
    """The actor (a copy of ``init``, or a new one) and the critic, in this order of torch's random draws."""
    n_res, n_features = venv.single_observation_space["resources"].shape
    if init is not None:
        if init.n_resource_features != n_features:
            raise ValueError(f"init reads {init.n_resource_features} features per resource, {task_name} observes "
                             f"{n_features}")
        actor = copy.deepcopy(init)
    else:
        actor = new_actor(cfg.actor, cfg.hidden, cfg.context, n_res, n_features)
    flat_dim = sum(int(np.prod(s.shape)) for s in venv.single_observation_space.spaces.values())
    return actor, _mlp(flat_dim, cfg.critic_arch)


def train_ppo(budget="B10", config: PPOConfig | None = None, *, seed: int = 0, task=PMWEEK,
              init: PerResourceNet | None = None, bc_data=None, eval_seeds=None, test_seeds=None, report=None,
              **overrides):
    """Train the per-resource actor with PPO at one budget; returns ``(StudentPolicy, history)``.

    ``config``: the settings (:class:`PPOConfig`; default its validated settings, the study's PPO); ``overrides``:
    fields of it to replace, e.g. ``train_ppo("B5", n_envs=8, engine="autograd")``.

    ``task``: :data:`~membudget.agents.tasks.PMWEEK` (default) or :data:`~membudget.agents.tasks.CONVERSATION`
    (``ConversationPM-v0``, its conversations side by side; the same loop, network class and settings), or its
    name in :data:`~membudget.agents.tasks.TASKS`.
    Training plays the task's training episodes in a seed-dependent order; ``eval_seeds`` defaults to the first
    ``eval_episodes`` of its validation episodes; ``init``: a fitted student's network the actor starts from (distil-then-RL); ``bc_data``:
    ``(resources, budget, mask, labels)`` of teacher states for ``bc_coef > 0``.

    ``actor``: :data:`ACTORS` — the per-resource network (``hidden``, ``context``) or the flat-MLP ablation
    (``hidden``; same loop, loss and settings, so only the architecture differs).

    ``history`` rows: ``env_steps``, ``wall_clock`` (training seconds, evaluation excluded), ``val_set_f1`` (the
    deterministic policy on ``eval_seeds``; ``val_score`` on conversations) and, with ``test_seeds``,
    ``test_set_f1`` (``test_score``; for reporting a curve on held-out episodes; nothing in training reads it),
    recorded every ``eval_every`` steps (0: only at the start and end). With ``keep_best=True`` the returned
    policy is the actor of the recorded point with the best validation quality (early stopping on the validation
    episodes; ``config["selected_env_steps"]`` says which).
    ``report(row)``, if given, receives each history row as it is recorded (e.g. a Tune trial's ``tune.report``, or a
    progress line).

    ``engine``: :data:`ENGINES` — ``"compiled"`` (:mod:`membudget.agents.ppo_compiled`: the same algorithm and
    settings, about 2.7 times the env steps per second (bench/ppo.py), other numerics; the per-resource actor with
    two hidden layers and context on ``PMWeek-v0``, no ``bc_coef``), ``"autograd"`` (eager torch, float32; every
    actor and task) or ``"auto"`` (the default: compiled where it can, else autograd; the policy's ``config``
    records which).

    ``seed`` seeds torch's global generator for the run (the networks' initial weights, the autograd engine's
    proposals) inside a forked generator: the caller's global torch stream is left as it was. ``torch_threads``
    (when not 0) sets torch's thread count for the rest of the process, as ``torch.set_num_threads`` does."""
    cfg = ppo_config(config, **overrides)
    check_int("seed", seed, 0)
    if cfg.bc_coef > 0 and bc_data is None:
        raise ValueError("bc_coef > 0 needs bc_data=(resources, budget, mask, labels) of teacher states")
    if isinstance(task, str):
        if task not in TASKS:
            raise ValueError(f"task must be one of {sorted(TASKS)} (or a task object), got {task!r}")
        task = TASKS[task]
    for name, known in TASKS.items():  # n_minibatches against the task's rollout, before any work
        if known is task:
            cfg.check_rollout(name)
    if cfg.torch_threads:
        torch.set_num_threads(int(cfg.torch_threads))
    with seeded_torch(seed):
        return _train(cfg, budget, seed, task, init, bc_data, eval_seeds, test_seeds, report)


def _train(cfg: PPOConfig, budget, seed: int, task, init, bc_data, eval_seeds, test_seeds, report):
    """:func:`train_ppo`'s run once its arguments are checked, torch's global generator seeded with ``seed``."""
    rng = np.random.default_rng(seed)
    env_kwargs = task.env_kwargs(per_step_cap=cfg.per_step_cap, cost_profile=cfg.cost_profile,
                                 late_policy=cfg.late_policy)
    if eval_seeds is None:
        eval_seeds = range(task.validation_seeds[0], task.validation_seeds[0] + cfg.eval_episodes)
    venv = task.vector_env(cfg.n_envs, budget, observe_counts=cfg.critic_counts, **env_kwargs)
    weeks = week_order(seed, task.train_seeds)
    actor, critic = _networks(cfg, venv, init, task.name)
    engine = choose_engine(cfg, task, actor)
    trainer = (CompiledEngine(actor, critic, cfg, rng) if engine == "compiled"
               else AutogradEngine(actor, critic, cfg, rng, bc_data))
    curve = LearningCurve(actor, lambda seeds: task.validate(StudentPolicy(copy.deepcopy(actor)), budget,
                                                             list(seeds), **env_kwargs),
                          eval_seeds, test_seeds, task.quality, cfg.keep_best, report)
    steps, update = 0, 0
    # numpy's BLAS on as many threads as torch: two training processes on two cores otherwise spin each other's
    # BLAS threads (the compiled engine's rollout ran 3-7x slower so)
    with threadpool_limits(limits=int(cfg.torch_threads) if cfg.torch_threads else None, user_api="blas"):
        curve.record(steps)
        while steps < cfg.total_timesteps:
            lr = cfg.learning_rate * (1.0 - steps / cfg.total_timesteps) if cfg.anneal_lr else cfg.learning_rate
            obs, _ = venv.reset(seed=update_weeks(weeks, update, cfg.n_envs))
            played = trainer.update(venv, obs, lr, with_actor=update >= cfg.critic_warmup) * cfg.n_envs
            steps, update = steps + played, update + 1
            if cfg.eval_every and steps // cfg.eval_every != (steps - played) // cfg.eval_every:
                curve.record(steps)
        if curve.rows[-1]["env_steps"] != steps:
            curve.record(steps)
        venv.close()
    settings = dataclasses.asdict(cfg)
    settings.update(method="ppo", env=task.name, budget=budget, seed=seed, init=init is not None,
                    n_resources=venv.single_observation_space["resources"].shape[0],
                    actor="per-resource" if isinstance(actor, PerResourceNet) else "flat-mlp", engine=engine,
                    critic_dtype=trainer.critic_dtype if engine == "compiled" else "float32",
                    compiled_backend=trainer.backend if engine == "compiled" else "none",
                    selected_env_steps=curve.selected_steps(steps))
    return StudentPolicy(actor, config=settings), curve.rows

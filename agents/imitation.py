"""Imitation of the hindsight DP (in-house, torch): behaviour cloning and DAgger.

The student scores each resource with one small network applied to that resource's 27 features plus the 9
budget features (shared weights over the resource axis, like the logistic gates), so it is permutation-
equivariant over resources. It acts in ``action_mode="scores"``: a candidate whose probability reaches
``threshold`` (0.5) is proposed with that probability as its score; the environment's executor keeps the plan
feasible.

- **BC** fits the student to the DP's schedules replayed on the training weeks (state = the observation before
  each step of the DP's own rollout, label = the resources the DP queries at that step).
- **DAgger** then rolls out the student, labels every state it visits with the DP's optimal continuation from
  that state (:func:`dagger_labels`: the resources the continuation queries now), aggregates and refits.

Only candidate rows enter the loss (the executor never queries a non-candidate). Students save to plain-array
``.npz`` files (weights, input scaling, config), never pickle.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

VALIDATION_SEEDS = tuple(range(4000, 4010))


class StudentPolicy:
    """A fitted per-resource student (numpy forward pass) following the policy protocol."""

    def __init__(self, weights, mean, scale, threshold=0.5, config=None):
        self.weights = [np.asarray(w, dtype=np.float64) for w in weights]
        self.mean, self.scale = np.asarray(mean, np.float64), np.asarray(scale, np.float64)
        self.threshold = float(threshold)
        self.config = dict(config or {})

    def probabilities(self, observation) -> np.ndarray:
        res = np.asarray(observation["resources"], dtype=np.float64)
        bud = np.asarray(observation["budget"], dtype=np.float64)
        single = res.ndim == 2
        res, bud = (res[None], bud[None]) if single else (res, bud)
        x = np.concatenate([res, np.repeat(bud[:, None, :], res.shape[1], axis=1)], axis=2)
        h = (x - self.mean) / self.scale
        for i in range(0, len(self.weights) - 2, 2):
            h = np.maximum(h @ self.weights[i] + self.weights[i + 1], 0.0)
        z = (h @ self.weights[-2] + self.weights[-1])[..., 0]
        p = 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, without overflow
        return p[0] if single else p

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        p = self.probabilities(observation)
        mask = np.asarray(observation["mask"]).astype(bool)
        action = np.where(mask & (p >= self.threshold), np.clip(p, 1e-6, 1.0), -1.0).astype(np.float32)
        return action, state

    def save(self, path):
        arrays = {f"w{i}": w for i, w in enumerate(self.weights)}
        np.savez(os.fspath(path), mean=self.mean, scale=self.scale, threshold=np.array(self.threshold),
                 config=np.array(json.dumps(self.config)), n_weights=np.array(len(self.weights)), **arrays)

    @classmethod
    def load(cls, path):
        with np.load(os.fspath(path), allow_pickle=False) as z:
            weights = [z[f"w{i}"] for i in range(int(z["n_weights"]))]
            return cls(weights, z["mean"], z["scale"], float(z["threshold"]), json.loads(str(z["config"])))


def _env(budget, **kw):
    from membudget.envs.pm import PMWeekEnv

    return PMWeekEnv(budget=budget, action_mode="scores", **kw)


def _features(obs):
    res, bud = obs["resources"], obs["budget"]
    return np.concatenate([res, np.repeat(bud[None, :], res.shape[0], axis=0)], axis=1).astype(np.float32)


def dp_demonstrations(seeds, budget, **env_kw):
    """States and labels of the DP's own rollouts: ``(X (n, R, 36), mask (n, R), y (n, R))``."""
    from membudget.teachers import HindsightDP

    X, M, Y = [], [], []
    for s in seeds:
        env = _env(budget, **env_kw)
        obs, _ = env.reset(seed=int(s))
        plan = {}
        for t, r in HindsightDP.from_env(env).solve(env.episode).schedule:
            plan.setdefault(t, []).append(r)
        for t in range(env.episode.horizon):
            y = np.zeros(obs["mask"].size, dtype=np.float32)
            y[plan.get(t, [])] = 1.0
            X.append(_features(obs))
            M.append(obs["mask"].astype(bool))
            Y.append(y)
            a = np.where(y > 0, 1.0, -1.0).astype(np.float32)
            obs, *_ = env.step(a)
    return np.stack(X), np.stack(M), np.stack(Y)


def dagger_labels(env) -> np.ndarray:
    """The DP teacher's label for the state ``env`` is in: which resources its optimal continuation queries now."""
    from membudget.teachers import HindsightDP

    e = env.unwrapped
    y = np.zeros(e._core.n_resources, dtype=np.float32)
    t = int(e._core.t[0])
    y[[r for s, r in HindsightDP.from_env(e).continuation(e).schedule if s == t]] = 1.0
    return y


def _fit(X, M, Y, *, hidden=64, epochs=60, lr=3e-3, seed=0, batch=512):
    import torch

    torch.manual_seed(seed)
    rows = M.reshape(-1)
    x = X.reshape(-1, X.shape[-1])[rows].astype(np.float64)
    y = Y.reshape(-1)[rows]
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    xt = torch.tensor((x - mean) / scale, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                              torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
    pos = float(y.sum())
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(max(1.0, (y.size - pos) / max(pos, 1.0))))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(yt), generator=gen).split(batch):
            opt.zero_grad()
            loss_fn(net(xt[idx])[:, 0], yt[idx]).backward()
            opt.step()
    weights = []
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            weights += [layer.weight.detach().numpy().T.astype(np.float64), layer.bias.detach().numpy().astype(np.float64)]
    return weights, mean, scale


def _validate(policy, budget, seeds=VALIDATION_SEEDS):
    from membudget.envs.pm.rollout import rollout

    return float(rollout(policy, seeds, budget=budget, action_mode="scores")["set_f1"].mean())


def fit_bc(train_seeds, budget, *, epochs=60, hidden=64, seed=0, progress=None):
    """Behaviour cloning on the DP's schedules of ``train_seeds`` at ``budget``; ``(policy, history)``."""
    start = time.perf_counter()
    X, M, Y = dp_demonstrations(train_seeds, budget)
    weights, mean, scale = _fit(X, M, Y, hidden=hidden, epochs=epochs, seed=seed)
    cfg = {"method": "bc", "budget": budget, "train_seeds": [int(s) for s in train_seeds], "epochs": epochs,
           "hidden": hidden, "seed": seed}
    policy = StudentPolicy(weights, mean, scale, config=cfg)
    history = [{"env_steps": int(len(X)), "wall_clock": time.perf_counter() - start,
                "val_set_f1": _validate(policy, budget)}]  # wall clock taken before the validation
    if progress:
        progress(f"bc: validation Set F1 {history[-1]['val_set_f1']:.4f}")
    return policy, history


def fit_dagger(train_seeds, budget, *, iterations=4, epochs=60, hidden=64, seed=0, progress=None):
    """DAgger from the BC student: roll out the current student on the training weeks, label each visited state
    with the DP's optimal continuation, aggregate with everything so far, refit; ``(policy, history)``."""
    start = time.perf_counter()
    X, M, Y = dp_demonstrations(train_seeds, budget)
    weights, mean, scale = _fit(X, M, Y, hidden=hidden, epochs=epochs, seed=seed)
    cfg = {"method": "dagger", "budget": budget, "train_seeds": [int(s) for s in train_seeds], "epochs": epochs,
           "hidden": hidden, "seed": seed, "iterations": iterations}
    policy = StudentPolicy(weights, mean, scale, config=cfg)
    steps = len(X)
    validating = 0.0  # validation time is not training time

    def point():
        nonlocal validating
        trained = time.perf_counter() - start - validating
        t = time.perf_counter()
        f1 = _validate(policy, budget)
        validating += time.perf_counter() - t
        return {"env_steps": steps, "wall_clock": trained, "val_set_f1": f1}

    history = [point()]
    xs, ms, ys = [X], [M], [Y]
    for it in range(iterations):
        nx, nm, ny = [], [], []
        for s in train_seeds:
            env = _env(budget)
            obs, _ = env.reset(seed=int(s))
            done = False
            while not done:
                nx.append(_features(obs))
                nm.append(obs["mask"].astype(bool))
                ny.append(dagger_labels(env))
                obs, _, done, _, _ = env.step(policy.predict(obs)[0])
        steps += len(nx)
        xs.append(np.stack(nx))
        ms.append(np.stack(nm))
        ys.append(np.stack(ny))
        weights, mean, scale = _fit(np.concatenate(xs), np.concatenate(ms), np.concatenate(ys), hidden=hidden,
                                    epochs=epochs, seed=seed + it + 1)
        policy = StudentPolicy(weights, mean, scale, config=cfg)
        history.append(point())
        if progress:
            progress(f"dagger iteration {it + 1}: validation Set F1 {history[-1]['val_set_f1']:.4f}")
    return policy, history

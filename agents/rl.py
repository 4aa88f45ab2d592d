"""PPO allocators on ``PMWeek-v0`` (Stable-Baselines3 and sb3-contrib), trained on the native vector env.

- :func:`train_ppo_allocator`: ``PPO("MultiInputPolicy")`` on :class:`DevWeeksVecEnv` at one budget
  (``action_mode="binary"``: a ``MultiBinary(R)`` proposal set; the hard-cap executor keeps every executed query
  feasible);
- the same with ``algo="maskable_ppo"``: sb3-contrib's ``MaskablePPO``, whose action distribution is restricted
  to the candidate mask (``env_method("action_masks")``);
- :func:`train_conditioned_ppo`: one ``PPO`` trained across several budgets at once on
  :class:`ConcatBudgetVecEnv` (one :class:`DevWeeksVecEnv` per budget, concatenated); the target-fraction budget
  feature (``obs["budget"][..., 0]``) is what tells the policy its budget.

Training weeks are development seeds: every slot of every training environment plays identified weeks from the
range 2000-3999 (a seed-dependent permutation, cycled), so no held-out week (4000-4029 analysis, 8000-8029,
9000-9029) and no validation week (4000-4009) is ever trained on. :class:`LearningCurveCallback` records
``(env_steps, wall_clock, val_set_f1)`` every ``eval_every`` environment steps on validation weeks 4000-4009
(``wall_clock``: training seconds so far, evaluation time excluded).

:func:`load_policy` loads any trained model by path (an SB3 ``.zip``, an imitation student ``.npz`` or a run
directory of ``python -m membudget.train``) as a policy-protocol object with the environment arguments it needs.
"""

from __future__ import annotations

import os
import time

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback

from membudget.agents.sb3_vec import NativeVecEnv, PMWeekSB3VecEnv

TRAIN_SEEDS = range(2000, 4000)
"""Development weeks the learners train on (never 4000-4009 validation, never the held-out ranges)."""
VALIDATION_SEEDS = range(4000, 4010)
"""Validation weeks of the learning curves."""
CONDITIONED_BUDGETS = ("B5", "B10", "B15", "B20")


def week_order(seed: int, seeds=TRAIN_SEEDS) -> np.ndarray:
    """The seed-dependent order in which the training weeks are played (a permutation of ``seeds``)."""
    return np.random.default_rng(seed).permutation(np.asarray(list(seeds), dtype=np.int64))


class DevWeeksVecEnv(PMWeekSB3VecEnv):
    """:class:`PMWeekSB3VecEnv` whose every week is an identified development week: slot ``i`` of the
    ``n``-slot env plays ``weeks[i], weeks[i + n], weeks[i + 2n], ...`` (cycled), where ``weeks`` is
    :func:`week_order` ``(seed)``. Same-step autoreset and terminal observations as SB3 expects."""

    def __init__(self, num_envs: int = 8, seed: int = 0, train_seeds=TRAIN_SEEDS, **env_kwargs):
        super().__init__(num_envs, **env_kwargs)
        self.weeks = week_order(seed, train_seeds)
        if self.weeks.size < num_envs:
            raise ValueError(f"need at least num_envs={num_envs} training weeks, got {self.weeks.size}")
        self._next = 0
        self.weeks_played = 0

    def _take(self, k: int) -> list:
        idx = (self._next + np.arange(k)) % self.weeks.size
        self._next = int((self._next + k) % self.weeks.size)
        self.weeks_played += k
        return [int(w) for w in self.weeks[idx]]

    def reset(self):
        obs, _ = self.venv.reset(seed=self._take(self.num_envs))
        self._reset_seeds()
        return obs

    def _autoreset_seeds(self, dones):
        seeds = [None] * self.num_envs
        for i, s in zip(np.flatnonzero(dones), self._take(int(dones.sum()))):
            seeds[i] = s
        return seeds


def _union_space(space_list):
    """The Dict space covering every budget's observation space (Box bounds: elementwise min / max)."""
    first = space_list[0]
    out = {}
    for key, sp in first.spaces.items():
        if isinstance(sp, spaces.Box):
            low = np.min([s[key].low for s in space_list], axis=0)
            high = np.max([s[key].high for s in space_list], axis=0)
            out[key] = spaces.Box(low, high, dtype=sp.dtype)
        else:
            if any(s[key] != sp for s in space_list):
                raise ValueError(f"observation key {key!r} differs between budgets")
            out[key] = sp
    return spaces.Dict(out)


class ConcatBudgetVecEnv(NativeVecEnv):
    """Several :class:`PMWeekSB3VecEnv` (one per budget) as one SB3 ``VecEnv``: slots ``[k*n, (k+1)*n)`` play
    budget ``budgets[k]``. ``slot_budgets`` lists each slot's budget level and ``slot_target_fractions`` the
    target fraction its observations carry in ``obs["budget"][:, 0]``. Keyword arguments go to every part."""

    def __init__(self, budgets=CONDITIONED_BUDGETS, envs_per_budget: int = 8, seed: int = 0,
                 train_seeds=TRAIN_SEEDS, **env_kwargs):
        if not budgets:
            raise ValueError("budgets must name at least one budget")
        self.budgets = tuple(budgets)
        self.parts = [DevWeeksVecEnv(envs_per_budget, seed=seed, train_seeds=train_seeds, budget=b, **env_kwargs)
                      for b in self.budgets]
        self.n_per = envs_per_budget
        obs_space = _union_space([p.observation_space for p in self.parts])
        super().__init__(envs_per_budget * len(self.parts), obs_space, self.parts[0].action_space)
        self.slot_budgets = [b for b in self.budgets for _ in range(envs_per_budget)]
        self.slot_target_fractions = np.repeat([p.venv.target_fraction for p in self.parts], envs_per_budget)

    @staticmethod
    def _cat(obs_list):
        return {k: np.concatenate([o[k] for o in obs_list]) for k in obs_list[0]}

    def reset(self):
        return self._cat([p.reset() for p in self.parts])

    def step_wait(self):
        obs, rews, dones, infos = [], [], [], []
        for k, p in enumerate(self.parts):
            o, r, d, i = p.step(self._actions[k * self.n_per:(k + 1) * self.n_per])
            obs.append(o), rews.append(r), dones.append(d), infos.extend(i)
        return self._cat(obs), np.concatenate(rews), np.concatenate(dones), infos

    def close(self):
        for p in self.parts:
            p.close()

    def get_attr(self, attr_name, indices=None):
        if attr_name == "budget":
            return [self.slot_budgets[i] for i in self._get_indices(indices)]
        return [getattr(self.parts[i // self.n_per].venv, attr_name) for i in self._get_indices(indices)]

    def action_masks(self) -> np.ndarray:
        return np.concatenate([p.action_masks() for p in self.parts])


def masks_from_obs(obs) -> np.ndarray:
    """sb3-contrib's flat MultiBinary mask ``[r0=0, r0=1, r1=0, r1=1, ...]`` from (batched) observations:
    proposing a resource is allowed only for current candidates."""
    m = np.asarray(obs["mask"]).astype(bool)
    out = np.ones(m.shape[:-1] + (2 * m.shape[-1],), dtype=bool)
    out[..., 1::2] = m
    return out


class MaskedPolicy:
    """Policy protocol around a ``MaskablePPO`` model: the candidate mask is taken from each observation."""

    def __init__(self, model):
        self.model = model

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        return self.model.predict(observation, state=state, episode_start=episode_start,
                                  deterministic=deterministic, action_masks=masks_from_obs(observation))


def as_policy(model):
    """The policy-protocol view of a trained SB3 / sb3-contrib model."""
    from sb3_contrib import MaskablePPO

    return MaskedPolicy(model) if isinstance(model, MaskablePPO) else model


def validation_f1(policy, budgets, seeds=VALIDATION_SEEDS, env_kwargs=None) -> dict:
    """Mean Set F1 per budget on the validation weeks."""
    from membudget.evaluate import rollout

    kw = dict(env_kwargs or {})
    return {b: float(rollout(policy, seeds, budget=b, **kw)["set_f1"].mean()) for b in budgets}


class LearningCurveCallback(BaseCallback):
    """Every ``eval_every`` environment steps (and at the end) record ``env_steps``, ``wall_clock`` (training
    seconds, evaluation excluded), ``val_set_f1`` (mean over ``budgets``) and ``val_set_f1_<budget>`` of the
    deterministic policy on the validation weeks."""

    def __init__(self, budgets, eval_every: int = 10000, seeds=VALIDATION_SEEDS, env_kwargs=None):
        super().__init__()
        self.budgets, self.eval_every, self.seeds = list(budgets), int(eval_every), list(seeds)
        self.env_kwargs = dict(env_kwargs or {})
        self.history: list = []
        self._eval_time = 0.0
        self._last = -1

    def _on_training_start(self):
        self._t0 = time.perf_counter()
        self._record()

    def _record(self):
        if self.num_timesteps == self._last:
            return
        self._last = self.num_timesteps
        t = time.perf_counter()
        f1 = validation_f1(as_policy(self.model), self.budgets, self.seeds, self.env_kwargs)
        row = {"env_steps": int(self.num_timesteps), "wall_clock": t - self._t0 - self._eval_time,
               "val_set_f1": float(np.mean(list(f1.values())))}
        row.update({f"val_set_f1_{b}": v for b, v in f1.items()})
        self.history.append(row)
        self._eval_time += time.perf_counter() - t

    def _on_step(self) -> bool:
        if self.eval_every > 0 and self.num_timesteps // self.eval_every != (
                self.num_timesteps - self.training_env.num_envs) // self.eval_every:
            self._record()
        return True

    def _on_training_end(self):
        self._record()

    @property
    def train_seconds(self) -> float:
        return self.history[-1]["wall_clock"] if self.history else 0.0


def _ppo_kwargs(algo, n_steps, batch_size, n_epochs, learning_rate, gamma, gae_lambda, ent_coef, net_arch, seed):
    return dict(n_steps=n_steps, batch_size=batch_size, n_epochs=n_epochs, learning_rate=learning_rate, gamma=gamma,
                gae_lambda=gae_lambda, ent_coef=ent_coef, seed=seed, verbose=0, device="cpu",
                policy_kwargs={"net_arch": list(net_arch)})


def _learn(algo, venv, total_timesteps, callback, progress_bar, torch_threads, **kw):
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    if algo not in ("ppo", "maskable_ppo"):
        raise ValueError(f"algo must be 'ppo' or 'maskable_ppo', got {algo!r}")
    if total_timesteps <= 0:
        raise ValueError(f"total_timesteps must be positive, got {total_timesteps}")
    if torch_threads:
        torch.set_num_threads(int(torch_threads))
    cls = PPO if algo == "ppo" else MaskablePPO
    model = cls("MultiInputPolicy", venv, **kw)
    model.learn(total_timesteps=total_timesteps, callback=callback, progress_bar=bool(progress_bar))
    return model


def train_ppo_allocator(budget="B10", *, algo: str = "ppo", total_timesteps: int = 200_000, seed: int = 0,
                        n_envs: int = 16, n_steps: int = 128, batch_size: int = 512, n_epochs: int = 5,
                        learning_rate: float = 3e-4, gamma: float = 1.0, gae_lambda: float = 0.95,
                        ent_coef: float = 0.0, net_arch=(128, 128), eval_every: int = 20_000,
                        per_step_cap: int = 2, cost_profile: str = "unit", late_policy: str = "expire",
                        progress_bar: bool = False, torch_threads: int = 1):
    """Train PPO (``algo="ppo"``) or MaskablePPO (``"maskable_ppo"``) at one budget on development weeks;
    returns ``(model, history)`` (the learning curve rows of :class:`LearningCurveCallback`)."""
    env_kwargs = dict(per_step_cap=per_step_cap, cost_profile=cost_profile, late_policy=late_policy)
    venv = DevWeeksVecEnv(n_envs, seed=seed, budget=budget, **env_kwargs)
    cb = LearningCurveCallback([budget], eval_every, env_kwargs=env_kwargs)
    model = _learn(algo, venv, total_timesteps, cb, progress_bar, torch_threads,
                   **_ppo_kwargs(algo, n_steps, batch_size, n_epochs, learning_rate, gamma, gae_lambda, ent_coef,
                                 net_arch, seed))
    venv.close()
    return model, cb.history


def train_conditioned_ppo(budgets=CONDITIONED_BUDGETS, *, total_timesteps: int = 400_000, seed: int = 0,
                          envs_per_budget: int = 8, n_steps: int = 128, batch_size: int = 512, n_epochs: int = 5,
                          learning_rate: float = 3e-4, gamma: float = 1.0, gae_lambda: float = 0.95,
                          ent_coef: float = 0.0, net_arch=(128, 128), eval_every: int = 40_000,
                          per_step_cap: int = 2, cost_profile: str = "unit", late_policy: str = "expire",
                          progress_bar: bool = False, torch_threads: int = 1):
    """One budget-conditioned PPO trained across ``budgets`` at once (:class:`ConcatBudgetVecEnv`); returns
    ``(model, history)`` with validation Set F1 per budget and their mean."""
    env_kwargs = dict(per_step_cap=per_step_cap, cost_profile=cost_profile, late_policy=late_policy)
    venv = ConcatBudgetVecEnv(budgets, envs_per_budget, seed=seed, **env_kwargs)
    cb = LearningCurveCallback(budgets, eval_every, env_kwargs=env_kwargs)
    model = _learn("ppo", venv, total_timesteps, cb, progress_bar, torch_threads,
                   **_ppo_kwargs("ppo", n_steps, batch_size, n_epochs, learning_rate, gamma, gae_lambda, ent_coef,
                                 net_arch, seed))
    venv.close()
    return model, cb.history


def load_policy(path: str):
    """``(policy, env_kwargs)`` for a trained model: a run directory of ``python -m membudget.train`` (its
    ``config.json`` names the learner), an SB3 / sb3-contrib ``.zip`` (PPO or MaskablePPO, told apart by the
    policy class recorded in the archive) or an imitation student ``.npz``
    (``action_mode="scores"``)."""
    if os.path.isdir(path):
        for name in ("model.zip", "model.npz"):
            if os.path.exists(os.path.join(path, name)):
                return load_policy(os.path.join(path, name))
        raise FileNotFoundError(f"{path} holds no model.zip or model.npz")
    if not os.path.exists(path):
        raise FileNotFoundError(f"no model at {path}")
    if path.endswith(".npz"):
        from membudget.agents.imitation import StudentPolicy

        return StudentPolicy.load(path), {"action_mode": "scores"}
    if not path.endswith(".zip"):
        raise ValueError(f"unknown model format {path!r}: expected a .zip (SB3) or .npz (imitation student)")
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    import zipfile

    with zipfile.ZipFile(path) as z:
        data = z.read("data").decode() if "data" in z.namelist() else ""
    if "sb3_contrib.common.maskable" in data:
        return MaskedPolicy(MaskablePPO.load(path, device="cpu")), {"action_mode": "binary"}
    return PPO.load(path, device="cpu"), {"action_mode": "binary"}


# ---------------------------------------------------------------------------------------------------------------
# The RL-versus-distillation benchmark (python -m membudget.evaluate rl-vs-distillation)
# ---------------------------------------------------------------------------------------------------------------

class SchedulePolicy:
    """Replays fixed per-week schedules (``[(step, resource), ...]``, one per week in rollout order) as a
    binary-action policy: the hindsight DP and the current-greedy oracle evaluated through the same loop."""

    def __init__(self, schedules, n_resources: int):
        self.plans = []
        for sched in schedules:
            plan = {}
            for t, r in sched:
                plan.setdefault(int(t), []).append(int(r))
            self.plans.append(plan)
        self.n_resources = n_resources
        self.t = 0

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        n = np.asarray(observation["mask"]).shape[0]
        if n != len(self.plans):
            raise ValueError(f"{len(self.plans)} schedules for a batch of {n} weeks")
        if episode_start is not None and np.all(episode_start):
            self.t = 0
        a = np.zeros((n, self.n_resources), dtype=np.int8)
        for i, plan in enumerate(self.plans):
            for r in plan.get(self.t, ()):
                a[i, r] = 1
        self.t += 1
        return a, state


BENCH_FULL = dict(budgets=("B5", "B10", "B20"), eval_seeds=tuple(range(8000, 8030)) + tuple(range(9000, 9030)),
                  ppo_steps=200_000, maskable_steps=60_000, conditioned_steps=400_000, ppo_eval_every=40_000,
                  maskable_eval_every=20_000, conditioned_eval_every=80_000, n_envs=16, n_steps=128,
                  imitation_weeks=40, epochs=60, dagger_iterations=3, bootstrap=100_000, suite=None)
BENCH_QUICK = dict(budgets=("B10",), eval_seeds=(8000, 8001, 9000, 9001), ppo_steps=512, maskable_steps=512,
                   conditioned_steps=512, ppo_eval_every=0, maskable_eval_every=0, conditioned_eval_every=0,
                   n_envs=4, n_steps=32, imitation_weeks=2, epochs=3, dagger_iterations=1, bootstrap=1000,
                   suite=dict(dev_seeds=range(2000, 2005), temporal_budgets=("B10",),
                              analysis_seeds=range(4000, 4002)))
BASELINES = ("Sequential", "Myopic", "Static", "DeadlineOutcome")
LEARNED = ("PPO", "MaskablePPO", "PPO-conditioned", "BC", "DAgger")


def _paired(x, ref, n):
    from membudget.evaluate import bootstrap_ci

    d = np.asarray(x, float) - np.asarray(ref, float)
    d = d[~np.isnan(d)]
    return bootstrap_ci(d, n) if d.size else (float("nan"),) * 3


def run_benchmark(quick: bool = False, seed: int = 0, progress=None, **overrides) -> dict:
    """Train every learned allocator, evaluate everything on the held-out weeks; returns the results dict
    (``per_week``: ``{(budget, method): rollout metrics}``, ``training``, ``curves``, settings)."""
    from membudget.agents.imitation import fit_bc, fit_dagger
    from membudget.agents.suite import fit_suite
    from membudget.envs.pm import budget_levels, generate_episode
    from membudget.envs.pm.world import WorldConfig
    from membudget.evaluate import evaluate_policy, rollout
    from membudget.teachers import CurrentGreedy, HindsightDP

    P = dict(BENCH_QUICK if quick else BENCH_FULL)
    P.update(overrides)
    say = progress or (lambda msg: None)
    budgets, seeds = list(P["budgets"]), list(P["eval_seeds"])
    levels = budget_levels()
    t_start = time.perf_counter()
    say("fit the gates (development weeks)")
    suite = fit_suite(**(P["suite"] or {}), progress=lambda m: say(f"fit: {m}"))
    per_week, training, curves = {}, {}, {}
    cond_budgets = list(budgets) if quick else list(CONDITIONED_BUDGETS)
    ppo_kw = dict(n_steps=P["n_steps"], seed=seed, batch_size=min(512, P["n_envs"] * P["n_steps"]))

    say(f"train PPO-conditioned on {cond_budgets}")
    per_budget = max(1, P["n_envs"] // 2)
    model, hist = train_conditioned_ppo(cond_budgets, total_timesteps=P["conditioned_steps"],
                                        envs_per_budget=per_budget, eval_every=P["conditioned_eval_every"],
                                        **{**ppo_kw, "batch_size": min(512, per_budget * len(cond_budgets)
                                                                       * P["n_steps"])})
    training["PPO-conditioned"] = {"budgets": "/".join(cond_budgets), "env_steps": int(model.num_timesteps),
                                   "wall_clock": hist[-1]["wall_clock"]}
    curves["PPO-conditioned"] = hist
    conditioned = model
    for b in budgets:
        ep_seeds = seeds
        for name, algo, steps, every in (("PPO", "ppo", P["ppo_steps"], P["ppo_eval_every"]),
                                         ("MaskablePPO", "maskable_ppo", P["maskable_steps"], P["maskable_eval_every"])):
            say(f"train {name} at {b}")
            model, hist = train_ppo_allocator(b, algo=algo, total_timesteps=steps, n_envs=P["n_envs"],
                                              eval_every=every, **ppo_kw)
            training[(name, b)] = {"env_steps": int(model.num_timesteps), "wall_clock": hist[-1]["wall_clock"]}
            curves[(name, b)] = hist
            per_week[(b, name)] = rollout(as_policy(model), ep_seeds, budget=b, per_step_cap=2)
        per_week[(b, "PPO-conditioned")] = rollout(conditioned, ep_seeds, budget=b, per_step_cap=2)
        train_seeds = list(TRAIN_SEEDS)[: P["imitation_weeks"]]
        for name, fit in (("BC", lambda: fit_bc(train_seeds, b, epochs=P["epochs"], seed=seed)),
                          ("DAgger", lambda: fit_dagger(train_seeds, b, iterations=P["dagger_iterations"],
                                                        epochs=P["epochs"], seed=seed))):
            say(f"train {name} at {b}")
            student, hist = fit()
            training[(name, b)] = {"env_steps": int(hist[-1]["env_steps"]), "wall_clock": hist[-1]["wall_clock"]}
            curves[(name, b)] = hist
            per_week[(b, name)] = rollout(student, ep_seeds, budget=b, per_step_cap=2, action_mode="scores")
        say(f"teachers and baselines at {b}")
        weeks = [generate_episode(s) for s in ep_seeds]
        n_res = len(WorldConfig().resources)
        dp = [HindsightDP(budget=levels[b], per_step_cap=2).solve(w) for w in weeks]
        per_week[(b, "HindsightDP")] = rollout(SchedulePolicy([s.schedule for s in dp], n_res), ep_seeds,
                                               budget=b, per_step_cap=2)
        replay_gap = float(np.max(np.abs(per_week[(b, "HindsightDP")]["set_f1"] - np.array([s.f1 for s in dp]))))
        if replay_gap > 1e-9:
            raise RuntimeError(f"replaying the DP's schedules does not reproduce its Set F1 at {b} (gap {replay_gap})")
        greedy = [CurrentGreedy(budget=levels[b], per_step_cap=2).solve(w) for w in weeks]
        per_week[(b, "CurrentGreedy")] = rollout(SchedulePolicy([s.schedule for s in greedy], n_res), ep_seeds,
                                                 budget=b, per_step_cap=2)
        for name in BASELINES:
            if name in ("Myopic", "Sequential") and (name.lower(), b) not in suite.temporal:
                continue
            per_week[(b, name)] = evaluate_policy(suite, name, b, ep_seeds)
    return {"params": P, "quick": quick, "seed": seed, "budgets": budgets, "seeds": seeds, "per_week": per_week,
            "training": training, "curves": curves, "conditioned_budgets": cond_budgets,
            "seconds": time.perf_counter() - t_start}


ORDER = ("HindsightDP", "CurrentGreedy", "PPO", "MaskablePPO", "PPO-conditioned", "BC", "DAgger", "Sequential",
         "Myopic", "Static", "DeadlineOutcome")


def goal_check(res, budget="B10", share=0.95) -> dict:
    """Best learned allocator's mean Set F1 against ``share`` of the hindsight DP's at ``budget``."""
    pw = res["per_week"]
    if (budget, "HindsightDP") not in pw:
        return {"budget": budget, "available": False}
    dp = float(pw[(budget, "HindsightDP")]["set_f1"].mean())
    best = max(LEARNED, key=lambda m: pw[(budget, m)]["set_f1"].mean() if (budget, m) in pw else -1)
    f1 = float(pw[(budget, best)]["set_f1"].mean())
    return {"budget": budget, "available": True, "best": best, "best_f1": f1, "dp_f1": dp, "ratio": f1 / dp,
            "met": f1 >= share * dp, "share": share}


def format_benchmark(res, command: str = "") -> str:
    pw, n_boot = res["per_week"], res["params"]["bootstrap"]
    seeds = res["seeds"]
    ranges = ", ".join(f"{lo}-{hi}" for lo, hi in _ranges(seeds))
    L = ["# RL versus distillation on PMWeek-v0", "",
         f"Held-out weeks {ranges} ({len(seeds)} weeks), unit prices, N_max 2, late policy expire. Learned "
         "allocators train on development weeks from 2000 upward (validation weeks 4000-4009 for the learning "
         "curves); gates fitted on development weeks 2000-2019. Differences are paired against Sequential over the "
         f"same weeks, percentile bootstrap 95% intervals ({n_boot:,} resamples; on-time recall over weeks with a due "
         "positive). The hindsight DP replays its optimal schedule per week (an upper bound that sees the whole "
         "week); current-greedy replays the future-blind greedy oracle's schedule."
         + (" **Quick mode: tiny training budgets, not a result.**" if res["quick"] else ""), ""]
    L += ["| budget | method | Set F1 | vs Sequential [95% CI] | on-time recall | vs Sequential [95% CI] | "
          "realized cost | vs Sequential [95% CI] |", "|" + "---|" * 8]
    for b in res["budgets"]:
        ref = pw.get((b, "Sequential"))
        for m in ORDER:
            if (b, m) not in pw:
                continue
            r = pw[(b, m)]
            cells = []
            for k in ("set_f1", "on_time_recall", "realized_cost"):
                mean = np.nanmean(r[k])
                if ref is None or m == "Sequential":
                    ci = "reference" if m == "Sequential" else ""
                else:
                    d, lo, hi = _paired(r[k], ref[k], n_boot)
                    fmt = "+.2f" if k == "realized_cost" else "+.4f"
                    ci = f"{d:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"
                cells += [f"{mean:.2f}" if k == "realized_cost" else f"{mean:.4f}", ci]
            L.append(f"| {b} | {m} | " + " | ".join(cells) + " |")
    L += ["", "Training (wall clock excludes the learning-curve evaluations; env steps: environment transitions used "
          "for training — for BC / DAgger the DP-demonstration and student-rollout steps):", "",
          "| method | budget | env steps | wall clock (s) | final validation Set F1 |", "|---|---|---|---|---|"]
    for key, t in res["training"].items():
        name, b = (key, t["budgets"]) if isinstance(key, str) else key
        hist = res["curves"][key]
        L.append(f"| {name} | {b} | {t['env_steps']:,} | {t['wall_clock']:.1f} | {hist[-1]['val_set_f1']:.4f} |")
    g = goal_check(res)
    if g["available"]:
        L += ["", f"**Goal check** (best learned allocator ≥ {g['share']:.0%} of the hindsight DP's Set F1 at B10 on "
              f"held-out weeks): best learned = {g['best']} {g['best_f1']:.4f}, hindsight DP {g['dp_f1']:.4f}, "
              f"ratio {g['ratio']:.3f} — **{'met' if g['met'] else 'not met'}**."]
    L += ["", "![learning curves](rl_vs_distillation_curves.png)", "",
          f"command: `{command.strip()}`   ({res['seconds']:.0f} s)", ""]
    return "\n".join(L)


def _ranges(seeds):
    out, start, prev = [], None, None
    for s in seeds:
        if start is None:
            start = prev = s
        elif s == prev + 1:
            prev = s
        else:
            out.append((start, prev))
            start = prev = s
    out.append((start, prev))
    return out


def plot_curves(res, path):
    """Validation Set F1 against environment steps of every learned method, one panel per budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = res["budgets"]
    fig, axes = plt.subplots(1, len(budgets), figsize=(4.4 * len(budgets), 3.6), squeeze=False)
    for ax, b in zip(axes[0], budgets):
        for key, hist in res["curves"].items():
            name = key if isinstance(key, str) else key[0]
            if not isinstance(key, str) and key[1] != b:
                continue
            col = f"val_set_f1_{b}" if isinstance(key, str) else "val_set_f1"
            pts = [(max(r["env_steps"], 1), r.get(col, r.get("val_set_f1"))) for r in hist]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=name)
        if (b, "HindsightDP") in res["per_week"]:
            ax.axhline(res["per_week"][(b, "HindsightDP")]["set_f1"].mean(), color="k", ls="--", lw=0.8,
                       label="hindsight DP (held-out)")
        ax.set_xscale("log")
        ax.set_title(b)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("Set F1, validation weeks 4000-4009")
    axes[0][0].legend(fontsize=7)
    g = goal_check(res)
    if g["available"]:
        fig.suptitle(f"goal (best learned ≥ 95% of DP at B10): {g['best']} {g['best_f1']:.3f} / DP {g['dp_f1']:.3f}"
                     f" = {g['ratio']:.3f} — {'met' if g['met'] else 'not met'}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def benchmark_main(argv=None):
    """``python -m membudget.evaluate rl-vs-distillation [--quick] [--seed S] [--out FILE.md]``."""
    import argparse
    import shlex
    import sys

    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate rl-vs-distillation",
                                     description="PPO, MaskablePPO, budget-conditioned PPO, BC and DAgger against "
                                                 "the hindsight DP, current-greedy and BudgetPM's gates")
    parser.add_argument("--quick", action="store_true", help="tiny training budgets (for tests)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None,
                        help="Markdown file (default docs/rl_vs_distillation.md; with --quick: none)")
    parser.add_argument("--progress-bar", choices=("on", "off", "auto"), default="auto")
    args = parser.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else ["rl-vs-distillation", *argv])
    command = "python -m membudget.evaluate " + " ".join(shlex.quote(a) for a in argv)
    show = sys.stderr.isatty() if args.progress_bar == "auto" else args.progress_bar == "on"
    say = (lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", file=sys.stderr, flush=True)) if show else None
    res = run_benchmark(quick=args.quick, seed=args.seed, progress=say)
    text = format_benchmark(res, command)
    print(text)
    out = args.out if args.out is not None else ("" if args.quick else "docs/rl_vs_distillation.md")
    if out:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w") as f:
            f.write(text)
        plot_curves(res, os.path.join(os.path.dirname(out) or ".", "rl_vs_distillation_curves.png"))
    return res

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
directory of ``python -m membudget.train``) as a policy-protocol object with the environment arguments it needs;
it never runs code from the file unless told to trust it (``trust_remote_code=True``).
"""

from __future__ import annotations

import time

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback

from membudget.agents.configs import (CONDITIONED_BUDGETS, POLICIES, TRAIN_SEEDS,  # noqa: F401 (re-exported)
                                      VALIDATION_SEEDS, ConditionedPPOAllocatorConfig, PPOAllocatorConfig,
                                      SB3PPOSettings, _PMWeekPPOSettings)
from membudget.agents.sb3_files import model_file
from membudget.agents.sb3_vec import NativeVecEnv, PMWeekSB3VecEnv
from membudget.envs.pm.rollout import rollout
from membudget.envs.validation import MAX_CONFIG_BYTES, check_int



def week_order(seed: int, seeds=TRAIN_SEEDS) -> np.ndarray:
    """The seed-dependent order in which the training weeks are played (a permutation of ``seeds``)."""
    return np.random.default_rng(seed).permutation(np.asarray(list(seeds), dtype=np.int64))


def update_weeks(weeks: np.ndarray, update: int, n_envs: int) -> list:
    """The weeks (as ints) that update ``update`` of an ``n_envs``-week rollout plays from the order ``weeks``
    (:func:`week_order`): the next ``n_envs`` of them, cycled."""
    return [int(w) for w in weeks[(update * n_envs + np.arange(n_envs)) % weeks.size]]


class DevWeeksVecEnv(PMWeekSB3VecEnv):
    """:class:`PMWeekSB3VecEnv` whose every week is an identified development week: slot ``i`` of the
    ``n``-slot env plays ``weeks[i], weeks[i + n], weeks[i + 2n], ...`` (cycled), where ``weeks`` is
    :func:`week_order` ``(seed)``. Same-step autoreset and terminal observations as SB3 expects."""

    def __init__(self, num_envs: int = 8, seed: int = 0, train_seeds=TRAIN_SEEDS, **env_kwargs):
        check_int("num_envs", num_envs, 1)
        check_int("seed", seed, 0)
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
    kw = dict(env_kwargs or {})
    return {b: float(rollout(policy, seeds, budget=b, **kw)["set_f1"].mean()) for b in budgets}


class LearningCurveCallback(BaseCallback):
    """Every ``eval_every`` environment steps (and at the end) record ``env_steps``, ``wall_clock`` (training
    seconds, evaluation excluded), ``val_set_f1`` (mean over ``budgets``) and ``val_set_f1_<budget>`` of the
    deterministic policy on the validation weeks."""

    def __init__(self, budgets, eval_every: int = 10000, seeds=VALIDATION_SEEDS, env_kwargs=None):
        super().__init__()
        self.budgets, self.eval_every, self.seeds = list(budgets), check_int("eval_every", eval_every, 0), list(seeds)
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


def _learn(algo, venv, cfg: _PMWeekPPOSettings, seed, callback, progress_bar):
    from membudget.agents.per_resource import MaskablePerResourceActorCriticPolicy, PerResourceActorCriticPolicy

    if cfg.policy == "mlp":
        policy, arch = "MultiInputPolicy", {"net_arch": list(cfg.net_arch)}
    else:
        policy = MaskablePerResourceActorCriticPolicy if algo == "maskable_ppo" else PerResourceActorCriticPolicy
        arch = {"critic_arch": tuple(cfg.net_arch)}
    model = cfg.new_model(policy, venv, seed, algo=algo, policy_kwargs=arch)
    model.learn(total_timesteps=cfg.total_timesteps, callback=callback, progress_bar=bool(progress_bar))
    return model


def train_ppo_allocator(budget="B10", config: PPOAllocatorConfig | None = None, *, algo: str = "ppo", seed: int = 0,
                        progress_bar: bool = False, **overrides):
    """Train PPO (``algo="ppo"``) or MaskablePPO (``"maskable_ppo"``) at one budget on development weeks;
    returns ``(model, history)`` (the learning curve rows of :class:`LearningCurveCallback`). ``config``: the
    settings (:class:`PPOAllocatorConfig`, default its defaults); ``overrides``: fields of it to replace, e.g.
    ``train_ppo_allocator("B5", n_envs=4, policy="mlp")`` (``policy``: the per-resource actor, ``net_arch`` then
    being the critic's, or SB3's flat MLP, :data:`POLICIES`)."""
    cfg = PPOAllocatorConfig.resolve(config, **overrides)
    if algo not in ("ppo", "maskable_ppo"):
        raise ValueError(f"algo must be 'ppo' or 'maskable_ppo', got {algo!r}")
    check_int("seed", seed, 0)
    venv = DevWeeksVecEnv(cfg.n_envs, seed=seed, budget=budget, **cfg.env_kwargs())
    cb = LearningCurveCallback([budget], cfg.eval_every, env_kwargs=cfg.env_kwargs())
    model = _learn(algo, venv, cfg, seed, cb, progress_bar)
    venv.close()
    return model, cb.history


def train_conditioned_ppo(budgets=CONDITIONED_BUDGETS, config: ConditionedPPOAllocatorConfig | None = None, *,
                          seed: int = 0, progress_bar: bool = False, **overrides):
    """One budget-conditioned PPO trained across ``budgets`` at once (:class:`ConcatBudgetVecEnv`); returns
    ``(model, history)`` with validation Set F1 per budget and their mean. ``config``:
    :class:`ConditionedPPOAllocatorConfig` (default its defaults); ``overrides``: fields of it to replace."""
    cfg = ConditionedPPOAllocatorConfig.resolve(config, **overrides)
    check_int("seed", seed, 0)
    budgets = tuple(budgets)
    if budgets:  # (none: ConcatBudgetVecEnv refuses it)
        cfg.check_budgets(len(budgets))
    venv = ConcatBudgetVecEnv(budgets, cfg.envs_per_budget, seed=seed, **cfg.env_kwargs())
    cb = LearningCurveCallback(budgets, cfg.eval_every, env_kwargs=cfg.env_kwargs())
    model = _learn("ppo", venv, cfg, seed, cb, progress_bar)
    venv.close()
    return model, cb.history


PMWEEK_LEARNERS = ("ppo", "sb3-ppo", "sb3-maskable-ppo", "sb3-ppo-conditioned", "bc", "dagger")
"""The ``python -m membudget.train`` subcommands whose runs are PMWeek-v0 models (:func:`load_policy` takes them;
a test ties this to the command registry)."""
OTHER_RUNS = ("tiers", "replay-ppo", "proactive-ppo", "rllib-ppo", "sweep")
"""The other subcommands: their runs are refused by their record, naming what they trained."""


def run_record(path: str):
    """``(subcommand, config)`` recorded in the ``config.json`` of the run directory ``path`` (or of the folder of
    its ``model.zip`` / ``model.npz``), or None where there is no such record or it cannot be read. The record is
    read as data (``json``, at most :data:`~membudget.envs.validation.MAX_CONFIG_BYTES`, as config files are); it
    only words a refusal or a check of settings: the model itself is checked as any other file."""
    import json
    import os

    if os.path.isdir(path):
        folder = path
    elif os.path.basename(path) in ("model.zip", "model.npz"):
        folder = os.path.dirname(path) or "."
    else:
        return None
    record = os.path.join(folder, "config.json")
    try:
        if not os.path.isfile(record) or os.path.getsize(record) > MAX_CONFIG_BYTES:
            return None
        with open(record, encoding="utf-8") as f:
            meta = json.loads(f.read())
    except (OSError, ValueError, RecursionError):  # unreadable, not UTF-8, not JSON, nested too deeply
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("subcommand"), str):
        return None
    cfg = meta.get("config")
    return meta["subcommand"], cfg if isinstance(cfg, dict) else {}


def _other_environment(sub: str, cfg: dict) -> str:
    """What a run of ``python -m membudget.train <sub>`` (one of :data:`OTHER_RUNS`) trained, as a refusal names
    it."""
    from membudget.agents.proactive_ppo import ENV_IDS as PROACTIVE_IDS
    from membudget.agents.replay_ppo import LATEST_VERSION as REPLAY_LATEST, VERSIONS as REPLAY_VERSIONS
    from membudget.agents.rllib import RLLIB_ENVS
    from membudget.agents.tier_router import ENV_ID as TIERS_ID

    def short(env_id):
        return f"a {env_id.rpartition('/')[2]} model"

    version = cfg.get("version")
    if sub == "tiers":
        return short(TIERS_ID)
    if sub == "replay-ppo":
        return short(f"ReplayStream-v{version if version in REPLAY_VERSIONS else REPLAY_LATEST}")
    if sub == "proactive-ppo":
        return short(PROACTIVE_IDS.get(version, PROACTIVE_IDS[max(PROACTIVE_IDS)]))
    if sub == "rllib-ppo" and isinstance(cfg.get("env"), str) and cfg["env"] in RLLIB_ENVS:
        return f"an RLlib {RLLIB_ENVS[cfg['env']].rpartition('/')[2]} model"
    if sub == "sweep":
        return "a hyperparameter search"
    return "not a PMWeek-v0 model"


def _check_run_environment(path: str) -> None:
    """Refuse a run of one of :data:`OTHER_RUNS` by its record, naming what it trained. A record naming a PMWeek
    learner, or a subcommand of no other version, is left to the model's own checks."""
    record = run_record(path)
    if record is None or record[0] not in OTHER_RUNS:
        return
    sub, cfg = record
    raise ValueError(f"{path} is {_other_environment(sub, cfg)} (python -m membudget.train {sub})"
                     f"{', not a model' if sub == 'sweep' else ''}; --model takes PMWeek-v0 models (runs of "
                     f"python -m membudget.train {', '.join(PMWEEK_LEARNERS)})")


def load_policy(path: str, *, trust_remote_code: bool = False):
    """``(policy, env_kwargs)`` for a model trained on PMWeek-v0: a run directory of ``python -m membudget.train``
    (its ``config.json`` names the learner), an SB3 / sb3-contrib ``.zip`` (PPO or MaskablePPO, told apart by the
    policy class recorded in the archive) or a per-resource student ``.npz`` (``action_mode="scores"``; a
    student of another task is refused).

    A ``.zip`` is loaded without running any code from it (:func:`membudget.agents.sb3_files.load_sb3_model`:
    only the weights and plain data are read, everything pickled is rebuilt from membudget's own code);
    ``trust_remote_code=True`` unpickles the whole archive as SB3 does, which runs whatever code it holds. A file
    that is not such a model raises ``ValueError`` naming it; a run directory (or its ``model.zip`` /
    ``model.npz``) whose ``config.json`` records a run of another environment is refused as such first."""
    _check_run_environment(path)
    path = model_file(path)
    if path.endswith(".npz"):
        from membudget.agents.per_resource import StudentPolicy
        from membudget.envs.pm import RESOURCE_FEATURE_NAMES

        student = StudentPolicy.load(path)
        if student.net.n_resource_features != len(RESOURCE_FEATURE_NAMES):
            raise ValueError(f"{path} reads {student.net.n_resource_features} features per resource, PMWeek-v0 "
                             f"observes {len(RESOURCE_FEATURE_NAMES)}: a model of another task (ConversationPM-v1 "
                             "students load with StudentPolicy.load)")
        return student, {"action_mode": "scores"}
    from membudget.agents.sb3_files import load_sb3_model

    return as_policy(load_sb3_model(path, trust_remote_code=trust_remote_code)), {"action_mode": "binary"}

"""LIMBO's study on ``membudget/ReplayStream-v1`` (``version=0``: v0) (LIMBO): every baseline, LinUCB and PPO
compared.

- :func:`run_policy`: one stream (one seed) with any policy-protocol policy (baselines, the oracle, SB3 models);
- :func:`run_bandit`: one stream with LIMBO's online loop (``select`` before the task, ``update`` after it);
- :func:`select_alpha`: LinUCB's alpha (its decay and model: disjoint or hybrid) chosen on development streams;
- :func:`evaluate`: every agent on every (family, profile) over seeds 42, 43, 44 (the paper's);
- :func:`format_results`: the issue's table, LinUCB's action mix and UCB-bonus decay, and the comparison
  with LIMBO's claims. ``python -m membudget.evaluate replay`` prints it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
import dataclasses
from dataclasses import dataclass

import numpy as np

from membudget.agents.linucb import MAX_MAGNITUDE, HybridLinUCB, LinUCB
from membudget.agents.replay_ppo import LATEST_VERSION, VERSIONS, ReplayStreamPPOConfig, make_env, train_ppo
from membudget.baselines.replay import HindsightOracle, reference_baselines
from membudget.envs.replay.world import ACTIONS, BUDGETS, MODES
from membudget.envs.validation import check_known, int_flag, number_flag, parse_seeds
from membudget.studies.cli import evaluate_command, plain, run_folder
from membudget.studies.execution import Executor, add_backend_flags, executor_from_flags
from membudget.studies.protocol import bootstrap_ci, provenance, save_figure, study_subplots
from membudget.studies.runs import (TrainCommand, model_to_bytes, ppo_from_bytes, record_training, start_run,
                                   write_metrics)

PAPER_SEEDS = (42, 43, 44)
# LIMBO's "memory-augmented baselines" (replay, compression, retrieval); GSC is voting without memory and is
# compared separately ("strictly dominates GSC"), as in the paper
MEMORY_BASELINES = ("fixed-k1", "fixed-k4", "fixed-k8", "fixed-k16", "compressed-k4", "retrieved-k1",
                    "retrieved-k4")
# LinUCB's alpha chosen by select_alpha(version=0) on v0's development seeds 0-9 (highest mean reward over all six
# settings); v1's settings: V1_BANDIT
SELECTED_ALPHA = 0.2
# f_a of HybridLinUCB on ReplayStream: indicators of the action's replay mode and of its budget tier
REPLAY_ACTION_FEATURES = np.array([[float(m == mode) for m in MODES] + [float(b == budget) for b in BUDGETS]
                                   for mode in MODES for budget in BUDGETS])


@dataclasses.dataclass(frozen=True)
class Bandit:
    """LIMBO's two-head LinUCB as the replay studies set it: ``alpha``, its decay τ (``alpha_decay``; None:
    constant), the ridge ``l2_lambda`` and the model (``hybrid_own`` None: disjoint heads per action, LIMBO's; a
    number: :class:`HybridLinUCB` over :data:`REPLAY_ACTION_FEATURES` with that ``own_l2_lambda``)."""

    alpha: float = SELECTED_ALPHA
    alpha_decay: float | None = None
    l2_lambda: float = 1.0
    hybrid_own: float | None = None

    def make(self, cost_weight=0.5):
        """A fresh agent with these settings and the reward's cost weight ``w``."""
        kwargs = {"alpha": self.alpha, "alpha_decay": self.alpha_decay, "l2_lambda": self.l2_lambda,
                  "cost_weight": cost_weight}
        if self.hybrid_own is None:
            return LinUCB(**kwargs)
        return HybridLinUCB(action_features=REPLAY_ACTION_FEATURES, own_l2_lambda=self.hybrid_own, **kwargs)

    def label(self) -> str:
        return (f"alpha {self.alpha:g}, decay {'none' if self.alpha_decay is None else f'{self.alpha_decay:g}'}, "
                + ("disjoint" if self.hybrid_own is None else f"hybrid own-lambda {self.hybrid_own:g}"))


V1_BANDIT = Bandit(1.0, 100.0, hybrid_own=None)
"""LinUCB's settings chosen on ReplayStream-v1's development seeds 0-9 over alpha, its decay τ (alpha · τ / (τ + n)
after n tasks) and the model (``python -m membudget.evaluate replay-alpha --decays ... --hybrids ...``): disjoint
heads per action, LIMBO's; the hybrid model (Li et al. 2010) sharing :data:`REPLAY_ACTION_FEATURES` did not win."""
BANDITS = {0: Bandit(SELECTED_ALPHA), 1: V1_BANDIT}
"""LinUCB's settings per ReplayStream version, each chosen on that version's development seeds."""


def _bandit_of(version) -> Bandit:
    """LinUCB's settings chosen on ``version``'s development seeds (:data:`BANDITS`), the version checked."""
    check_known("ReplayStream version", version, VERSIONS)
    return BANDITS[version]


def bandit_grid(alphas, decays=(None,), hybrids=(None,), l2_lambda=1.0) -> tuple:
    """Every :class:`Bandit` of the product of ``alphas``, ``decays`` and ``hybrids`` (in that nesting)."""
    return tuple(Bandit(float(a), None if d is None else float(d), float(l2_lambda), None if h is None else float(h))
                 for a in alphas for d in decays for h in hybrids)


def _result(actions, correct, tokens, bonus=None, rewards=None):
    correct, tokens = np.asarray(correct, dtype=bool), np.asarray(tokens, dtype=np.int64)
    out = {"actions": np.asarray(actions, dtype=np.int64), "correct": correct, "tokens": tokens,
           "accuracy": float(correct.mean()), "total_tokens": int(tokens.sum())}
    if bonus is not None:
        out["bonus"] = np.asarray(bonus, dtype=np.float64)
    if rewards is not None:
        out["mean_reward"] = float(np.mean(rewards))
    return out


def run_policy(policy, *, family="db", profile="mid", seed=42, **env_kwargs) -> dict:
    """Play one stream with ``policy`` (policy protocol). The policy's ``env_kwargs`` (fixed-k baselines) are
    applied; a privileged policy that needs the environment (``HindsightOracle``) is given it via
    ``policy.env`` when that attribute is ``None``. Returns per-task ``actions``, ``correct``, ``tokens`` and the
    stream's ``accuracy`` and ``total_tokens`` (and ``mean_reward``, the environment's reward per task, except for
    a stream-level baseline)."""
    env = make_env(family, profile, **{**env_kwargs, **getattr(policy, "env_kwargs", {})})
    if hasattr(policy, "env") and policy.env is None:
        policy.env = env
    obs, _ = env.reset(seed=seed)
    actions, correct, tokens, rewards = [], [], [], []
    done, state, start = False, None, True
    while not done:
        a, state = policy.predict(obs, state=state, episode_start=np.array([start]), deterministic=True)
        obs, reward, terminated, truncated, info = env.step(int(np.asarray(a).reshape(())))
        rewards.append(reward)
        actions.append(int(np.asarray(a).reshape(())))
        correct.append(info["correct"])
        tokens.append(info["tokens"])
        done, start = terminated or truncated, False
    if hasattr(policy, "score_stream"):  # stream-level baseline (self-consistency): its own outcomes
        correct, tokens = policy.score_stream(env)
        rewards = None  # the environment's rewards were for one sample, not the vote
    env.close()
    return _result(actions, correct, tokens, rewards=rewards)


def run_bandit(agent, *, family="db", profile="mid", seed=42, record_heads=False, **env_kwargs) -> dict:
    """LIMBO's online loop on one stream: ``agent.select(obs)`` before each task, ``agent.update(obs, action,
    correct, cost)`` after it (``cost`` = the environment's normalised cost). The agent keeps learning across
    calls; pass a fresh one per stream. Adds ``bonus`` (UCB bonus of each chosen action) and ``mean_reward``
    (the environment's reward per task, correct − w · cost); with ``record_heads``, ``heads`` ``(T, A, 2)``: the
    agent's correctness and cost estimates of every action when it chose (``predict_heads``)."""
    env = make_env(family, profile, **env_kwargs)
    obs, _ = env.reset(seed=seed)
    actions, correct, tokens, bonus, rewards, heads = [], [], [], [], [], []
    done = False
    while not done:
        if record_heads:
            heads.append(agent.predict_heads(obs)[0])
        a = agent.select(obs)
        bonus.append(agent.last_bonus_)
        nxt, reward, terminated, truncated, info = env.step(a)
        rewards.append(reward)
        agent.update(obs, a, float(info["correct"]), info["cost"])
        actions.append(a)
        correct.append(info["correct"])
        tokens.append(info["tokens"])
        obs, done = nxt, terminated or truncated
    env.close()
    out = _result(actions, correct, tokens, bonus, rewards)
    if record_heads:
        out["heads"] = np.asarray(heads)
    return out


DEV_SEEDS = tuple(range(10))
SELECTION_CRITERIA = ("reward", "fixed-scale")
ALPHA_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)


def stream_of(family, profile, seed, version=LATEST_VERSION):
    """The drawn stream (``env.unwrapped.stream``: every task's tokens and success probability per action)."""
    env = make_env(family, profile, version=version)
    env.reset(seed=int(seed))
    stream = env.unwrapped.stream
    env.close()
    return stream


def check_development_seeds(seeds) -> None:
    """Raise unless ``seeds`` are disjoint from the report's :data:`PAPER_SEEDS` (choices and diagnoses are made on
    development streams only)."""
    overlap = {int(x) for x in seeds} & set(PAPER_SEEDS)
    if overlap:
        raise ValueError(f"development seeds must be disjoint from the report's seeds {PAPER_SEEDS}; got {overlap}")


def fixed_scale_reward(run, stream, cost_weight=0.5) -> float:
    """Accuracy − w · mean tokens / the stream's largest token count: the bandit's reward with cost on a scale no
    policy moves (the environment divides by the running maximum of the tokens played, so an early costly action
    makes later tasks look cheap)."""
    return float(run["accuracy"] - cost_weight * run["tokens"].mean() / stream.tokens.max())


def alpha_task(cost_weight, item, version=LATEST_VERSION) -> tuple[float, float, float, float]:
    """One development stream of :func:`select_alpha`, keyed by ``(bandit, family, profile, seed)``: a fresh
    LinUCB's (:class:`Bandit`) ``(mean reward, fixed-scale reward, accuracy, mean tokens per task)`` on
    ReplayStream-v{version}."""
    bandit, family, profile, seed = item
    r = run_bandit(bandit.make(cost_weight), family=family, profile=profile, seed=seed, cost_weight=cost_weight,
                   version=version)
    return (r["mean_reward"], fixed_scale_reward(r, stream_of(family, profile, seed, version), cost_weight),
            r["accuracy"], float(r["tokens"].mean()))


def _alpha_task_item(fixed, item):
    cost_weight, version = fixed
    return alpha_task(cost_weight, item, version=version)


def select_alpha(grid=bandit_grid(ALPHA_GRID), seeds=DEV_SEEDS, families=("db", "os"),
                 profiles=("strong", "mid", "weak"), *, cost_weight=0.5, executor=None, version=LATEST_VERSION,
                 criterion="reward") -> tuple[Bandit, dict]:
    """Choose LinUCB's settings among the :class:`Bandit` s of ``grid`` (:func:`bandit_grid`: alphas, decays τ of
    alpha, models) on development streams (seeds 0-9, disjoint from the report's 42-44): the one with the highest
    mean per-task ``criterion`` over every (family, profile) and seed: ``"reward"`` (correct − w · cost, the
    bandit's own objective) or ``"fixed-scale"`` (:func:`fixed_scale_reward`). Returns ``(best, {bandit: (mean
    reward, mean fixed-scale reward, mean accuracy, mean tokens per task)})``. ``executor`` (default: in this
    process) runs one task per (bandit, family, profile, seed)."""
    if criterion not in SELECTION_CRITERIA:
        raise ValueError(f"criterion must be one of {SELECTION_CRITERIA}, got {criterion!r}")
    check_development_seeds(seeds)
    streams = [(f, p, int(s)) for f in families for p in profiles for s in seeds]
    grid = tuple(dict.fromkeys(grid))
    items = [(bandit, *stream) for bandit in grid for stream in streams]
    out = (executor or Executor()).map(functools.partial(_alpha_task_item, (cost_weight, version)), items)
    scores = {}
    for i, pair in enumerate(grid):
        runs = out[i * len(streams):(i + 1) * len(streams)]
        scores[pair] = tuple(float(np.mean([r[j] for r in runs])) for j in range(4))
    column = SELECTION_CRITERIA.index(criterion)
    best = max(scores, key=lambda a: scores[a][column])
    return best, scores


DIAGNOSIS_WINDOWS = ((0, 100), (100, 300), (300, 500))


def diagnose_bandit(family="db", profile="strong", seeds=DEV_SEEDS, *, bandit=None, cost_weight=0.5,
                    version=LATEST_VERSION, action=0, windows=DIAGNOSIS_WINDOWS) -> dict:
    """Why a fresh LinUCB (``bandit``; None: the version's own, :data:`BANDITS`) per development stream chooses what
    it does, measured against each stream's true success probabilities (``stream.prob``). Returns ``mean_reward``
    (the environment's, cost over the running maximum), ``fixed_scale_reward`` (accuracy − w · mean tokens / the
    stream's largest token count, a scale no policy moves), ``top_action_tasks`` (per stream, the tasks of its most
    played action) and, per window of tasks
    ``(lo, hi)``: ``share`` of ``action`` (default 0, no replay at the low tier), mean ``bonus``, ``head_rmse``
    (root-mean-square error of the correctness head over all actions) and, over the tasks where another action was
    chosen, ``head_error`` on ``action``, ``margin`` (true reward of ``action`` − that of the chosen one, with the
    environment's cost: tokens / max(running maximum, tokens)) and ``gain`` (true success probability of the
    chosen one − that of ``action``)."""
    check_development_seeds(seeds)
    bandit = _bandit_of(version) if bandit is None else bandit
    rows, mean_reward, fixed, top = [], [], [], []
    for seed in seeds:
        r = run_bandit(bandit.make(cost_weight), family=family, profile=profile, seed=seed, record_heads=True,
                       cost_weight=cost_weight, version=version)
        s = stream_of(family, profile, seed, version)
        t = np.arange(s.n_tasks)
        running = np.maximum.accumulate(np.concatenate([[0], r["tokens"][:-1]]))
        true_reward = s.prob - cost_weight * s.tokens / np.maximum(running[:, None], s.tokens)
        a = r["actions"]
        rows.append(np.column_stack([t, a == action, r["bonus"],
                                     np.sqrt(np.mean((r["heads"][:, :, 0] - s.prob) ** 2, axis=1)),
                                     r["heads"][:, action, 0] - s.prob[:, action],
                                     true_reward[:, action] - true_reward[t, a], s.prob[t, a] - s.prob[:, action]]))
        mean_reward.append(r["mean_reward"])
        fixed.append(fixed_scale_reward(r, s, cost_weight))
        top.append(int(np.bincount(a).max()))
    rows = np.concatenate(rows)
    out = {"mean_reward": float(np.mean(mean_reward)), "fixed_scale_reward": float(np.mean(fixed)),
           "top_action_tasks": top, "windows": []}
    for lo, hi in windows:
        w = (rows[:, 0] >= lo) & (rows[:, 0] < hi)
        other = w & (rows[:, 1] == 0)
        out["windows"].append({"tasks": (lo, hi), "share": float(rows[w, 1].mean()), "bonus": float(rows[w, 2].mean()),
                               "head_rmse": float(rows[w, 3].mean()),
                               **{k: float(rows[other, c].mean()) if other.any() else float("nan")
                                  for k, c in (("head_error", 4), ("margin", 5), ("gain", 6))}})
    return out


def action_profile(family="db", profile="strong", seeds=DEV_SEEDS, *, cost_weight=0.5,
                   version=LATEST_VERSION) -> dict:
    """What each action is worth on the development streams, from their true success probabilities: per action
    (``ACTIONS`` order) the mean success probability ``prob``, the mean ``tokens`` per task and the
    ``fixed_scale_reward`` (prob − w · tokens / the stream's largest token count, averaged over the streams), and
    ``gap``: the best action's fixed-scale reward minus each action's. A gap far below the s.d. of a task's
    correctness (about 0.4) cannot be resolved from a 500-task stream's outcomes."""
    check_development_seeds(seeds)
    streams = [stream_of(family, profile, seed, version) for seed in seeds]
    prob = np.mean([st.prob.mean(0) for st in streams], axis=0)
    tokens = np.mean([st.tokens.mean(0) for st in streams], axis=0)
    reward = np.mean([st.prob.mean(0) - cost_weight * st.tokens.mean(0) / st.tokens.max() for st in streams], axis=0)
    return {"prob": prob, "tokens": tokens, "fixed_scale_reward": reward, "gap": reward.max() - reward}


def diagnose_main(argv=None):
    """``python -m membudget.evaluate replay-diagnose``: :func:`diagnose_bandit` for one or more LinUCB settings
    (``--configs alpha:decay[:own]``, decay ``none`` for a constant alpha, ``own`` the hybrid model's ``λ_own``)."""
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate replay-diagnose",
                                     description=plain(diagnose_bandit.__doc__))
    parser.add_argument("--family", default="db", choices=("db", "os"))
    parser.add_argument("--profile", default="strong", choices=("strong", "mid", "weak"))
    parser.add_argument("--env-version", type=int, choices=VERSIONS, default=LATEST_VERSION)
    parser.add_argument("--seeds", nargs="+", type=int_flag(0), default=list(DEV_SEEDS),
                        help="development seeds (default 0-9; disjoint from 42-44)")
    parser.add_argument("--configs", nargs="+", type=_config_flag, default=None,
                        help=f"alpha:decay[:own] (own: HybridLinUCB's own_l2_lambda; default disjoint LinUCB; "
                             f"default: the version's own, {V1_BANDIT.alpha:g}:{V1_BANDIT.alpha_decay:g} on v1, "
                             f"{SELECTED_ALPHA:g}:none on v0)")
    parser.add_argument("--l2-lambda", type=number_flag(1.0 / MAX_MAGNITUDE, MAX_MAGNITUDE), default=1.0)
    args = parser.parse_args(argv)
    if args.configs is None:
        own = BANDITS[args.env_version]
        args.configs = [(own.alpha, own.alpha_decay, own.hybrid_own)]
    print(f"LinUCB on ReplayStream-v{args.env_version} {args.family} x {args.profile}, development seeds {args.seeds}; "
          "per window: share of (none, low), mean bonus, correctness-head RMSE over the actions; when another "
          "action is chosen: head error on (none, low), true reward margin of (none, low), true accuracy gain")
    prof = action_profile(args.family, args.profile, args.seeds, version=args.env_version)
    print("true value of each action (means over the streams): success probability, tokens per task, fixed-scale "
          "reward, gap to the best")
    for i, (mode, budget) in enumerate(ACTIONS):
        label = f"({mode}, {budget})"
        print(f"  {label:<22} p {prof['prob'][i]:.4f}  tokens {prof['tokens'][i]:6.0f}  reward "
              f"{prof['fixed_scale_reward'][i]:.4f}  gap {prof['gap'][i]:.4f}")
    results = {}
    for alpha, decay, own in args.configs:
        bandit = Bandit(alpha, decay, args.l2_lambda, own)
        d = results[(alpha, decay, own)] = diagnose_bandit(args.family, args.profile, args.seeds, bandit=bandit,
                                                           version=args.env_version)
        print(f"{bandit.label()}: mean reward {d['mean_reward']:.4f}, "
              f"fixed-scale reward {d['fixed_scale_reward']:.4f}; tasks of each stream's most played action "
              f"{min(d['top_action_tasks'])}-{max(d['top_action_tasks'])}")
        for w in d["windows"]:
            print(f"  tasks {w['tasks'][0]:>3}-{w['tasks'][1]:<3} share {w['share']:.2f}  bonus {w['bonus']:.3f}  "
                  f"rmse {w['head_rmse']:.3f}  head error {w['head_error']:+.3f}  margin {w['margin']:+.3f}  "
                  f"gain {w['gain']:+.3f}")
    return results


def _config_flag(text):
    """``--configs`` entries: ``alpha:decay`` or ``alpha:decay:own``."""
    alpha, sep, rest = text.partition(":")
    decay, _, own = rest.partition(":")
    try:
        a = float(alpha)
    except ValueError:
        a = float("nan")
    if not sep or not np.isfinite(a) or a < 0:
        raise argparse.ArgumentTypeError(f"a config is alpha:decay[:own] with alpha >= 0, decay 'none' or > 0 and "
                                         f"own > 0, got {text!r}")
    return a, _decay_flag(decay), _hybrid_flag(own) if own else None


def ppo_task(total_timesteps, seed, cost_weight, item, version=LATEST_VERSION) -> bytes:
    """PPO trained for one ``(family, profile)`` of :func:`evaluate` on ReplayStream-v{version}; returns the saved
    model (a zip, as bytes)."""
    family, profile = item
    return model_to_bytes(train_ppo(family=family, profile=profile, total_timesteps=total_timesteps, seed=seed,
                                    cost_weight=cost_weight, version=version))


def stream_task(bandit, cost_weight, ppo_models, item, version=LATEST_VERSION) -> dict:
    """One stream of :func:`evaluate`, keyed by ``(agent, family, profile, seed)``: a reference baseline, a fresh
    LinUCB, PPO (``ppo_models[(family, profile)]``, the bytes of :func:`ppo_task`) or the oracle, on
    ReplayStream-v{version}."""
    agent, family, profile, seed = item
    if agent == "linucb":
        return run_bandit(bandit.make(cost_weight), family=family, profile=profile, seed=seed, cost_weight=cost_weight,
                          version=version)
    if agent == "ppo":
        policy = ppo_from_bytes(ppo_models[(family, profile)])
    elif agent == "oracle":
        policy = HindsightOracle(None)
    else:
        policy = reference_baselines()[agent]
    return run_policy(policy, family=family, profile=profile, seed=seed, version=version)


def _stream_task_item(fixed, item):
    bandit, cost_weight, ppo_models, version = fixed
    return stream_task(bandit, cost_weight, ppo_models, item, version=version)


def evaluate(families=("db", "os"), profiles=("strong", "mid", "weak"), seeds=PAPER_SEEDS, *, bandit=None,
             cost_weight=0.5, ppo_timesteps=0, ppo_seed=0, executor=None, version=LATEST_VERSION) -> list[dict]:
    """Every agent on every (family, profile) and seed. One row per (family, profile, agent) with ``runs`` (the
    per-seed results of :func:`run_policy` / :func:`run_bandit`). ``executor`` (default: in this process) runs one
    task per (agent, family, profile, seed), after one PPO training task per (family, profile) when
    ``ppo_timesteps`` (trained on the version played). ``version``: the ReplayStream version played;
    ``bandit``: LinUCB's settings (:class:`Bandit`; None: the version's own, :data:`BANDITS`)."""
    bandit = _bandit_of(version) if bandit is None else bandit
    executor = executor or Executor()
    settings = [(f, p) for f in families for p in profiles]
    ppo_models = {}
    if ppo_timesteps:
        ppo_models = dict(zip(settings, executor.map(
            functools.partial(ppo_task, ppo_timesteps, ppo_seed, cost_weight, version=version), settings)))
    agents = [*reference_baselines(), "linucb", *(["ppo"] if ppo_timesteps else []), "oracle"]
    keys = [(agent, f, p) for f, p in settings for agent in agents]
    seeds = [int(s) for s in seeds]
    runs = executor.map(functools.partial(_stream_task_item, (bandit, cost_weight, ppo_models, version)),
                        [(*key, s) for key in keys for s in seeds])
    n = len(seeds)
    return [{"family": f, "profile": p, "agent": agent, "runs": runs[i * n:(i + 1) * n]}
            for i, (agent, f, p) in enumerate(keys)]


# ------------------------------------------------------------------------------------------------- reporting


def summarize(row, n_resamples=10000) -> dict:
    """Mean over seeds of accuracy and total tokens per stream, with 95% bootstrap intervals over the pooled tasks
    (``membudget.evaluate.bootstrap_ci``; total tokens = per-task mean × stream length)."""
    correct = np.concatenate([r["correct"] for r in row["runs"]]).astype(float)
    tokens = np.concatenate([r["tokens"] for r in row["runs"]]).astype(float)
    n = row["runs"][0]["tokens"].size
    acc = bootstrap_ci(correct, n_resamples)
    tok = bootstrap_ci(tokens, n_resamples)
    return {"accuracy": acc, "total_tokens": tuple(v * n for v in tok),
            "seed_accuracy": [r["accuracy"] for r in row["runs"]]}


def pareto_front(points: dict) -> set:
    """Names whose (cost, accuracy) no other point weakly dominates with one strict improvement."""
    front = set()
    for a, (ca, xa) in points.items():
        if not any((cb <= ca and xb >= xa and (cb < ca or xb > xa)) for b, (cb, xb) in points.items() if b != a):
            front.add(a)
    return front


def action_mix(runs, window=50, n_windows=10):
    """Share of each memory mode and of each budget tier per window of ``window`` tasks, mean over runs:
    ``(modes (n_windows, 4), budgets (n_windows, 3))``."""
    acts = np.stack([r["actions"][:window * n_windows] for r in runs]).reshape(len(runs), n_windows, window)
    modes = np.stack([(acts // len(BUDGETS) == m).mean(axis=(0, 2)) for m in range(len(MODES))], axis=1)
    budgets = np.stack([(acts % len(BUDGETS) == b).mean(axis=(0, 2)) for b in range(len(BUDGETS))], axis=1)
    return modes, budgets


def bonus_decay(runs, window=50, n_windows=10):
    """Mean UCB bonus of the chosen action per window, mean over runs, ``(n_windows,)``."""
    b = np.stack([r["bonus"][:window * n_windows] for r in runs]).reshape(len(runs), n_windows, window)
    return b.mean(axis=(0, 2))


def format_results(rows, n_resamples=10000) -> str:
    lines = []
    settings = sorted({(r["family"], r["profile"]) for r in rows}, key=lambda fp: (fp[0], "smw".index(fp[1][0])))
    claims = []
    for family, profile in settings:
        sub = [r for r in rows if (r["family"], r["profile"]) == (family, profile)]
        summ = {r["agent"]: summarize(r, n_resamples) for r in sub}
        head = f"{family} × {profile}"
        lines.append(f"\n{head}\n{'agent':<15}{'accuracy [95% CI]':<26}{'total tokens per stream [95% CI]':<36}"
                     f"{'per-seed accuracy':<20}")
        for name, s in summ.items():
            a, t = s["accuracy"], s["total_tokens"]
            lines.append(f"{name:<15}{a[0]:.3f} [{a[1]:.3f}, {a[2]:.3f}]{'':<4}"
                         f"{t[0] / 1e3:9.1f}k [{t[1] / 1e3:.1f}k, {t[2] / 1e3:.1f}k]{'':<6}"
                         + " ".join(f"{x:.3f}" for x in s["seed_accuracy"]))
        pts = {n: (s["total_tokens"][0], s["accuracy"][0]) for n, s in summ.items() if n != "oracle"}
        front = pareto_front(pts)
        mem = {n: pts[n] for n in MEMORY_BASELINES if n in pts}
        strongest = max(mem, key=lambda n: (mem[n][1], -mem[n][0]))
        lin = pts["linucb"]
        delta = 100 * (lin[1] - mem[strongest][1])
        saving = 100 * (1 - lin[0] / mem[strongest][0])
        gsc = pts.get("gsc-n5")
        dom_gsc = gsc is not None and lin[1] > gsc[1] and lin[0] < gsc[0]
        by_agent = {r["agent"]: r["runs"] for r in sub}
        paired = paired_comparison(by_agent["linucb"], by_agent[strongest], n_resamples)
        claims.append((family, profile, "linucb" in front, strongest, delta, saving, dom_gsc, paired))
        lines.append(f"frontier: {', '.join(sorted(front))}")
        overall = max(pts, key=lambda n: (pts[n][1], -pts[n][0]))
        if overall not in mem:
            d_all = 100 * (lin[1] - pts[overall][1])
            lines.append(f"(strongest of all non-oracle agents: {overall}, LinUCB {d_all:+.1f} points at "
                         f"{100 * (1 - lin[0] / pts[overall][0]):.0f}% lower cost)")
        lines.append(f"LinUCB vs strongest memory baseline ({strongest}): {delta:+.1f} points at {saving:.0f}% lower "
                     f"cost; strictly dominates GSC: {'yes' if dom_gsc else 'no'}")
        lin_row = next(r for r in sub if r["agent"] == "linucb")
        modes, budgets = action_mix(lin_row["runs"])
        decay = bonus_decay(lin_row["runs"])
        lines.append("LinUCB action mix per window of 50 tasks (memory modes " + "/".join(MODES)
                     + " | budget tiers low/medium/high) and mean UCB bonus of the chosen action:")
        for w in range(modes.shape[0]):
            lines.append(f"  window {w + 1:>2}: " + " ".join(f"{x:5.2f}" for x in modes[w]) + "  | "
                         + " ".join(f"{x:5.2f}" for x in budgets[w]) + f"  | bonus {decay[w]:.3f}")
        first, last = decay[:2].mean(), decay[-2:].mean()
        lines.append(f"  bonus first 100 tasks {first:.3f} -> last 100 {last:.3f} ({100 * (1 - last / first):.0f}% "
                     f"lower; LIMBO Qwen OS: 0.347 -> 0.115, 67% lower); monotone in "
                     f"{int(np.sum(np.diff(decay) < 0))}/{len(decay) - 1} transitions (LIMBO: 8/9)")
    lines.append("\nComparison with LIMBO's claims (on the frontier in every setting; within -3.8...+0.6 points of the "
                 "strongest memory baseline at 26-83% lower cost; strictly dominates GSC)")
    lines.append(f"{'setting':<14}{'on frontier':>12}{'strongest':>15}{'delta pts':>11}{'cost saving':>13}"
                 f"{'in claim':>10}{'dominates GSC':>15}")
    for family, profile, on_front, strongest, delta, saving, dom, _ in claims:
        ok = -3.8 <= delta <= 0.6 and 26 <= saving <= 83
        lines.append(f"{family + ' × ' + profile:<14}{'yes' if on_front else 'no':>12}{strongest:>15}{delta:>+11.1f}"
                     f"{saving:>12.0f}%{'yes' if ok else 'no':>10}{'yes' if dom else 'no':>15}")
    lines.append("\nPaired 95% bootstrap intervals over the pooled tasks (same streams, same tasks): LinUCB − strongest "
                 "memory baseline in accuracy points, and LinUCB's cost saving")
    for family, profile, _, strongest, _, _, _, (d, sv) in claims:
        lines.append(f"{family + ' × ' + profile:<14}{strongest:>15}  {100 * d[0]:+.1f} [{100 * d[1]:+.1f}, "
                     f"{100 * d[2]:+.1f}] points   saving {100 * sv[0]:.0f}% [{100 * sv[1]:.0f}%, {100 * sv[2]:.0f}%]")
    return "\n".join(lines)


def paired_comparison(runs_a, runs_b, n_resamples=10000, seed=0):
    """Agent A against agent B on the same streams (the same seeds, so task ``t`` of one is task ``t`` of the other):
    ``((mean accuracy difference, lo, hi), (cost saving 1 − tokens A / tokens B, lo, hi))`` with 95% bootstrap
    intervals from resampling the pooled tasks (pairs kept together)."""
    ca = np.concatenate([r["correct"] for r in runs_a]).astype(float)
    cb = np.concatenate([r["correct"] for r in runs_b]).astype(float)
    ta = np.concatenate([r["tokens"] for r in runs_a]).astype(float)
    tb = np.concatenate([r["tokens"] for r in runs_b]).astype(float)
    if ca.shape != cb.shape:
        raise ValueError("paired comparison needs runs over the same streams")
    idx = np.random.default_rng(seed).integers(0, ca.size, size=(n_resamples, ca.size))
    diffs = (ca - cb)[idx].mean(axis=1)
    savings = 1.0 - ta[idx].sum(axis=1) / tb[idx].sum(axis=1)
    d = (float((ca - cb).mean()), *np.quantile(diffs, [0.025, 0.975]).tolist())
    s = (float(1.0 - ta.sum() / tb.sum()), *np.quantile(savings, [0.025, 0.975]).tolist())
    return d, s


def plot_replay_frontier(rows, path):
    """Cost–accuracy plane per (family, profile) of ReplayStream: every agent's mean total tokens per stream
    against its mean accuracy, the empirical Pareto frontier (oracle excluded) drawn as a line."""
    settings = sorted({(r["family"], r["profile"]) for r in rows},
                      key=lambda fp: (fp[0], ("strong", "mid", "weak").index(fp[1])))
    ncol = min(3, len(settings))
    nrow = -(-len(settings) // ncol)
    fig, axes = study_subplots(nrow, ncol, figsize=(4.2 * ncol, 3.6 * nrow), squeeze=False)
    for ax, (family, profile) in zip(axes.flat, settings):
        pts = {r["agent"]: (np.mean([run["total_tokens"] for run in r["runs"]]),
                            np.mean([run["accuracy"] for run in r["runs"]]))
               for r in rows if (r["family"], r["profile"]) == (family, profile)}
        front = sorted((pts[n] for n in pareto_front({n: p for n, p in pts.items() if n != "oracle"})))
        ax.plot([p[0] for p in front], [p[1] for p in front], color="0.7", zorder=0, label="frontier")
        for name, (c, a) in pts.items():
            marker = "*" if name == "linucb" else "D" if name == "oracle" else "o"
            ax.scatter([c], [a], marker=marker, s=80 if name == "linucb" else 25, zorder=2)
            ax.annotate(name, (c, a), fontsize=6, xytext=(3, 2), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_title(f"{family} × {profile}", fontsize=9)
        ax.set_xlabel("total tokens per 500-task stream")
        ax.set_ylabel("accuracy")
    for ax in list(axes.flat)[len(settings):]:
        ax.set_visible(False)
    save_figure(fig, path)


def select_alpha_main(argv=None):
    """``python -m membudget.evaluate replay-alpha``: LinUCB's alpha chosen on development seeds 0-9
    (:func:`select_alpha`), with the score of every alpha of the grid."""
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate replay-alpha",
                                     description=plain(select_alpha.__doc__))
    parser.add_argument("--env-version", type=int, choices=VERSIONS, default=LATEST_VERSION,
                        help="ReplayStream version (default 1; 0 is the original world)")
    parser.add_argument("--seeds", nargs="+", type=int_flag(0), default=list(DEV_SEEDS),
                        help="development seeds (default 0-9; disjoint from 42-44)")
    parser.add_argument("--alphas", nargs="+", type=number_flag(0, MAX_MAGNITUDE), default=list(ALPHA_GRID))
    parser.add_argument("--decays", nargs="+", type=_decay_flag, default=[None],
                        help="decays τ of alpha (alpha · τ / (τ + n) after n tasks; 'none': constant; "
                             "default none)")
    parser.add_argument("--hybrids", nargs="+", type=_hybrid_flag, default=[None],
                        help="LinUCB models: 'none' (disjoint heads per action, LIMBO's) or HybridLinUCB's "
                             "own-action ridge lambda (shared mode and tier features; default none)")
    parser.add_argument("--criterion", choices=SELECTION_CRITERIA, default="reward",
                        help="what the choice maximises: the environment's mean reward (cost over the running "
                             "maximum of tokens) or the fixed-scale reward (cost over the stream's largest token "
                             "count; default reward)")
    add_backend_flags(parser)
    args = parser.parse_args(argv)
    with executor_from_flags(args) as executor:
        best, scores = select_alpha(bandit_grid(args.alphas, args.decays, args.hybrids), args.seeds,
                                    executor=executor, version=args.env_version, criterion=args.criterion)
    print(f"LinUCB alpha on ReplayStream-v{args.env_version}, development seeds {args.seeds}, all six family x "
          "profile settings, 500-task streams")
    print(f"{'alpha':>6} {'decay':>6} {'hybrid':>7} {'mean reward':>12} {'fixed-scale':>12} {'accuracy':>9} "
          f"{'tokens/task':>12}")
    for b, (r, fixed, acc, tok) in scores.items():
        tau, own = b.alpha_decay, b.hybrid_own
        print(f"{b.alpha:>6.2f} {'none' if tau is None else f'{tau:g}':>6} {'none' if own is None else f'{own:g}':>7} "
              f"{r:>12.4f} {fixed:>12.4f} {acc:>9.3f} {tok:>12.0f}" + ("  <- selected" if b == best else ""))
    print(f"selected by the {args.criterion} criterion")
    return best


def _none_or_positive(what: str):
    """An argparse ``type``: ``none`` or a finite number > 0 (``what`` names it in the error)."""
    def parse(text):
        if text.lower() == "none":
            return None
        value = float(text)
        if not value > 0 or not np.isfinite(value):
            raise argparse.ArgumentTypeError(f"a {what} must be 'none' or a finite number > 0, got {text!r}")
        return value

    return parse


_hybrid_flag = _none_or_positive("hybrid own-lambda")
"""``--hybrids`` / ``--hybrid-own`` entries: ``none`` (disjoint LinUCB) or HybridLinUCB's ``λ_own``."""
_decay_flag = _none_or_positive("decay")
"""``--decays`` / ``--alpha-decay`` entries: ``none`` (constant alpha) or the decay τ."""


def replay_main(argv=None):
    """``python -m membudget.evaluate replay``: thin over :func:`evaluate` and
    :func:`format_results`."""
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate replay",
                                     description="LIMBO's comparison on ReplayStream-v1 (--env-version 0: v0): "
                                                 "accuracy and total tokens of every agent per family x profile, "
                                                 "with intervals")
    parser.add_argument("--families", nargs="+", default=["db", "os"], choices=("db", "os"))
    parser.add_argument("--profiles", nargs="+", default=["strong", "mid", "weak"], choices=("strong", "mid", "weak"))
    parser.add_argument("--seeds", nargs="+", type=int_flag(0), default=list(PAPER_SEEDS))
    parser.add_argument("--alpha", type=number_flag(0, MAX_MAGNITUDE), default=None,
                        help="LinUCB exploration scale (default: chosen on development seeds 0-9 of the version: "
                             f"{V1_BANDIT.alpha} on v1, {SELECTED_ALPHA} on v0)")
    parser.add_argument("--alpha-decay", type=_decay_flag, default=argparse.SUPPRESS,
                        help="LinUCB's decay τ of alpha ('none': constant; default: chosen with alpha on v1: "
                             f"{V1_BANDIT.alpha_decay}; none on v0)")
    parser.add_argument("--hybrid-own", type=_hybrid_flag, default=argparse.SUPPRESS,
                        help="LinUCB's model: 'none' (disjoint heads per action) or HybridLinUCB's own-action ridge "
                             f"lambda (default: chosen with alpha on v1: {V1_BANDIT.hybrid_own}; none on v0)")
    parser.add_argument("--l2-lambda", type=number_flag(1.0 / MAX_MAGNITUDE, MAX_MAGNITUDE), default=1.0)
    parser.add_argument("--cost-weight", type=number_flag(0, MAX_MAGNITUDE), default=0.5)
    parser.add_argument("--env-version", type=int, choices=VERSIONS, default=LATEST_VERSION,
                        help="ReplayStream version (default 1; 0 is the original world)")
    parser.add_argument("--ppo-timesteps", type=int_flag(0), default=0, help="train and add PPO (0: skip)")
    parser.add_argument("--ppo-seed", type=int_flag(0), default=0)
    parser.add_argument("--bootstrap", type=int_flag(1), default=10000)
    parser.add_argument("--out", default=None, help="directory for results.json, results.md, replay_frontier.png "
                                                    "(default runs/replay/<time>; '' writes nothing)")
    add_backend_flags(parser)
    args = parser.parse_args(argv)
    default = BANDITS[args.env_version]
    args.alpha = default.alpha if args.alpha is None else args.alpha
    args.alpha_decay = getattr(args, "alpha_decay", default.alpha_decay)
    args.hybrid_own = getattr(args, "hybrid_own", default.hybrid_own)
    if args.out is None:
        args.out = run_folder("replay")
    command = evaluate_command("replay", argv)
    start = time.perf_counter()
    with executor_from_flags(args) as executor:
        rows = evaluate(args.families, args.profiles, args.seeds,
                        bandit=Bandit(args.alpha, args.alpha_decay, args.l2_lambda, args.hybrid_own),
                        cost_weight=args.cost_weight, ppo_timesteps=args.ppo_timesteps, ppo_seed=args.ppo_seed,
                        executor=executor, version=args.env_version)
    n_tasks = rows[0]["runs"][0]["tokens"].size
    text = (f"ReplayStream-v{args.env_version}, seeds {args.seeds}, {n_tasks}-task streams, "
            f"LinUCB alpha={args.alpha} "
            + (f"decay={args.alpha_decay:g} " if args.alpha_decay is not None else "")
            + (f"hybrid own-lambda={args.hybrid_own:g} " if args.hybrid_own is not None else "")
            + f"lambda={args.l2_lambda} w={args.cost_weight}; intervals: 95% bootstrap over the pooled tasks\n"
            + format_results(rows, args.bootstrap))
    print(text)
    print(f"\ncommand: {command.strip()}   ({time.perf_counter() - start:.1f} s)")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        out_rows = []
        for r in rows:
            s = summarize(r, args.bootstrap)
            out_rows.append({"family": r["family"], "profile": r["profile"], "agent": r["agent"],
                             "accuracy": s["accuracy"], "total_tokens": s["total_tokens"],
                             "seed_accuracy": s["seed_accuracy"],
                             "seed_total_tokens": [run["total_tokens"] for run in r["runs"]],
                             "seed_actions": [run["actions"].tolist() for run in r["runs"]]})
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump({"config": vars(args), "command": command, **provenance(),
                       "seeds": args.seeds, "rows": out_rows}, f, indent=1)
        with open(os.path.join(args.out, "results.md"), "w") as f:
            f.write("```\n" + text + "\n```\n\ncommand: `" + command.strip() + "`\n")
        plot_replay_frontier(rows, os.path.join(args.out, "replay_frontier.png"))
    return rows


@dataclass(frozen=True)
class ReplayPPOConfig(ReplayStreamPPOConfig):
    """PPO on ReplayStream (v1 by default; membudget.agents.replay_ppo.train_ppo; every field is a command-line flag
    of the same name): :class:`~membudget.agents.replay_ppo.ReplayStreamPPOConfig`'s fields beside the run's own."""
    family: str = "db"
    """Task family (db, os)."""
    profile: str = "mid"
    """Backbone profile (strong, mid, weak)."""
    seed: int = 0
    """Seeds the policy and the training streams (reset(seed=seed) then unseeded resets)."""
    eval_seeds: str = "42,43,44"
    """Evaluation streams for metrics.csv, comma-separated or ranges (LIMBO's seeds)."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: replay-ppo-<family>-<profile>-seed<seed>)."""

    def __post_init__(self):
        super().__post_init__()
        parse_seeds(self.eval_seeds, "eval_seeds")


def train_replay_ppo(cfg: ReplayPPOConfig, command: str = "") -> str:
    """Train PPO on ReplayStream-v{version}, evaluate it on the evaluation streams and save; returns the run
    directory."""
    eval_seeds = parse_seeds(cfg.eval_seeds, "eval_seeds")
    env_kwargs = dict(n_tasks=cfg.n_tasks, cost_weight=cfg.cost_weight, version=cfg.version)
    run_dir = start_run("replay-ppo", cfg, command, f"replay-ppo-{cfg.family}-{cfg.profile}-seed{cfg.seed}")
    start = time.perf_counter()
    model = train_ppo(cfg.family, cfg.profile, ReplayStreamPPOConfig.of(cfg), seed=cfg.seed)
    train_seconds = time.perf_counter() - start
    model.save(os.path.join(run_dir, "model.zip"))
    rows = []
    for s in eval_seeds:
        res = run_policy(model, family=cfg.family, profile=cfg.profile, seed=s, **env_kwargs)
        rows.append((s, res["accuracy"], res["total_tokens"], res["mean_reward"]))
    write_metrics(run_dir, ["seed", "accuracy", "total_tokens", "mean_reward"], rows)
    record_training(run_dir, train_seconds, model.num_timesteps)
    print(f"{run_dir}: accuracy {np.mean([r[1] for r in rows]):.3f}, total tokens per stream "
          f"{np.mean([r[2] for r in rows]) / 1e3:.1f}k, mean reward {np.mean([r[3] for r in rows]):.3f} "
          f"(seeds {', '.join(map(str, eval_seeds))})")
    return run_dir


TRAIN_COMMANDS = {"replay-ppo": TrainCommand(ReplayPPOConfig, "SB3 PPO on ReplayStream-v1 (--version 0: v0)",
                                             train_replay_ppo)}

"""ProactMem's study on ``membudget/ProactiveStream-v1`` (``--env-version 0``: v0) (ProactMem): memory layers,
baselines and PPO compared.

- :func:`run_policy`: one policy-protocol policy (a baseline of :mod:`membudget.baselines.proactive`, an SB3
  model) over held-out streams.
- PPO: :func:`membudget.agents.proactive_ppo.train_ppo`.
- :func:`evaluate`: every policy per scope on the held-out streams, with ProactMem's metrics pooled over streams per
  scope and over all scopes, 95% bootstrap intervals over streams, and paired differences for the paper's
  memory-layer findings; :func:`intervals` (computed once), :func:`format_results`, :func:`plot_ablation` and
  :func:`main`
  (``python -m membudget.evaluate proactive [--env-version 0|1] [--backend local|ray]``), which writes
  ``docs/proactive_stream.md`` (v1, with v0's tables below, re-rendered from ``proactive_stream_v0.json`` of the
  same folder) or ``proactive_stream_v0.json`` (v0);
  :func:`policy_task` and :func:`ppo_task` are :func:`evaluate`'s tasks.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time

from dataclasses import dataclass

import numpy as np

from membudget.agents.proactive_ppo import (ENV_IDS, HELD_OUT_FIRST_SEED, LATEST_VERSION, WARM_STARTS,
                                            ProactiveStreamPPOConfig,
                                            check_training_seeds, make_env, predict_action, train_ppo)
from membudget.baselines.proactive import POLICIES, SOURCES, FullHierarchy
from membudget.envs.proactive.env import F, episode_metrics
from membudget.envs.validation import check_int, int_flag
from membudget.studies.cli import evaluate_command, run_folder
from membudget.studies.execution import Executor, add_backend_flags, chunks, executor_from_flags
from membudget.studies.protocol import provenance, save_figure, study_subplots
from membudget.studies.runs import TrainCommand, record_training, start_run, write_metrics

SCOPE_NAMES = ("sports", "home", "code")
METRICS = ("relevance", "coverage", "effectiveness", "intrusion", "balance", "frequency")
BASELINES = ("Never", "Always", "EventOnly", "EventTrajectory", "FullHierarchy", "WithoutReplayGate",
             "WithoutValidation")
PPO_NAMES = {"none": "PPO", "full-hierarchy": "PPO (warm start)"}
"""The study's name of PPO per warm start (:data:`~membudget.agents.proactive_ppo.WARM_STARTS`)."""


def run_policy(policy, scope, seeds, **env_kwargs) -> list:
    """Run ``policy`` on the streams ``seeds`` of ``scope``; one dict per stream: the episode metrics plus the share
    of events at each realised depth."""
    kwargs = dict(getattr(policy, "env_kwargs", {}) or {}, **env_kwargs)
    env = make_env(scope, **kwargs)
    runs = []
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        depths = np.zeros(4)
        while True:
            obs, _, terminated, _, info = env.step(predict_action(policy, obs))
            if info["sub_step"] == 0:
                depths[info["depth"] + 1] += 1
            if terminated:
                break
        m = dict(info["episode_metrics"])
        m.update(seed=int(seed), depth_share=(depths / depths.sum()).tolist())
        runs.append(m)
    env.close()
    return runs


def pooled(runs) -> dict:
    """Seed 002's metrics from confusion counts pooled over ``runs``, plus tokens per event."""
    counts = {k: int(sum(r[k] for r in runs)) for k in ("tp", "fp", "fn", "tn")}
    out = episode_metrics(**counts)
    out["tokens_per_event"] = sum(r["total_tokens"] for r in runs) / max(1, sum(r["n_events"] for r in runs))
    return out


def bootstrap(runs, n_resamples=2000, seed=0, other=None) -> dict:
    """95% percentile intervals of every pooled metric over resampled streams; with ``other`` (runs of another
    policy on the same streams, same order) the interval of the paired difference ``runs − other``."""
    rng = np.random.default_rng(seed)
    n = len(runs)
    keys = METRICS + ("tokens_per_event",)
    draws = {k: np.empty(n_resamples) for k in keys}
    for b in range(n_resamples):
        idx = rng.integers(0, n, n)
        m = pooled([runs[i] for i in idx])
        if other is not None:
            o = pooled([other[i] for i in idx])
            m = {k: m[k] - o[k] for k in keys}
        for k in keys:
            draws[k][b] = m[k]
    point = pooled(runs)
    if other is not None:
        ref = pooled(other)
        point = {k: point[k] - ref[k] for k in keys}
    return {k: (point[k], float(np.quantile(draws[k], 0.025)), float(np.quantile(draws[k], 0.975))) for k in keys}


def policy_task(models, item, version=LATEST_VERSION) -> list:
    """One task of :func:`evaluate`: ``item = (policy name, scope, stream seeds)`` -> :func:`run_policy`'s runs on
    ProactiveStream-v``version``. Baselines are built in the task; a PPO (a name of :data:`PPO_NAMES`) is
    ``models[(name, scope)]`` (a policy trained by :func:`ppo_task`)."""
    name, scope, seeds = item
    policy = models[(name, scope)] if name in PPO_NAMES.values() else POLICIES[name]()
    return run_policy(policy, scope, seeds, version=version)


def ppo_task(total_timesteps, seed, scope, version=LATEST_VERSION, warm_start="none"):
    """One PPO training of :func:`evaluate` (seeded by ``seed``, started from ``warm_start``): ``scope`` ->
    ``(policy, training seconds)``; the SB3 policy alone travels back (it predicts as the model does), not the model
    with its environments."""
    model = train_ppo(scope=scope, total_timesteps=total_timesteps, seed=seed, version=version, warm_start=warm_start)
    model.policy.optimizer = None  # not needed to predict, and pickling changes its attributes (the checkpoint key)
    return model.policy, model.train_seconds


def evaluate(scopes=SCOPE_NAMES, n_streams=20, *, ppo_timesteps=0, ppo_seed=0, ppo_starts=("none",), progress=print,
             executor=None, chunk_streams=0, version=LATEST_VERSION) -> dict:
    """Every baseline (and PPO when ``ppo_timesteps``, once per warm start in ``ppo_starts``, named by
    :data:`PPO_NAMES`) on streams ``HELD_OUT_FIRST_SEED ...`` of each scope. Returns ``{scope: {policy: runs}}``.

    The work runs as tasks of ``executor`` (default: the local backend): one per (baseline, scope, stream range of
    ``chunk_streams`` streams; ``0``: all streams), then one PPO training per scope and one PPO evaluation per
    (scope, stream range). Streams are independent and every task seeds itself from its key, so the results do
    not depend on the backend or on ``chunk_streams``."""
    unknown = [w for w in ppo_starts if w not in WARM_STARTS]
    if unknown or not ppo_starts or len(set(ppo_starts)) < len(ppo_starts):
        raise ValueError(f"ppo_starts must be distinct warm starts of {WARM_STARTS}, got {tuple(ppo_starts)!r}")
    executor = executor or Executor()
    seeds = range(HELD_OUT_FIRST_SEED, HELD_OUT_FIRST_SEED + n_streams)
    items = [(name, scope, part) for scope in scopes for name in BASELINES for part in chunks(seeds, chunk_streams)]
    start = time.perf_counter()
    runs = executor.map(functools.partial(policy_task, {}, version=version), items)
    progress(f"baselines: {len(items)} tasks, {time.perf_counter() - start:.1f} s ({executor.backend} backend)")
    for start in ppo_starts if ppo_timesteps else ():
        name = PPO_NAMES[start]
        trained = executor.map(functools.partial(ppo_task, ppo_timesteps, ppo_seed, version=version,
                                                 warm_start=start), scopes)
        for scope, (_, seconds) in zip(scopes, trained):
            progress(f"{scope:6s} {name} trained {seconds:.0f} s on {ppo_timesteps} steps")
        ppo_items = [(name, scope, part) for scope in scopes for part in chunks(seeds, chunk_streams)]
        models = {(name, scope): policy for scope, (policy, _) in zip(scopes, trained)}
        items += ppo_items
        runs += executor.map(functools.partial(policy_task, models, version=version), ppo_items)
    results = {scope: {} for scope in scopes}
    for (name, scope, _), part in zip(items, runs):
        results[scope].setdefault(name, []).extend(part)
    return results


DEVELOPMENT_SEEDS = range(10)
"""Development streams: what the study chooses from data (the break-even sources) it chooses on these."""


def rule_sources(scope, seeds, version=LATEST_VERSION, intrusion_penalty=0.5) -> dict:
    """The full-hierarchy rule's interventions on streams ``seeds`` split by what fired them (current evidence, a
    carried anchor, a corroborated regularity): ``{source: [tp, fp]}``. A source pays in reward only where its
    precision is above the break-even ``intrusion_penalty / (1 + intrusion_penalty)``."""
    rule, env = POLICIES["FullHierarchy"](), make_env(scope, version=version, intrusion_penalty=intrusion_penalty)
    counts = {source: [0, 0] for source in SOURCES}
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        while True:
            source = rule.source(obs) if obs[F["phase"]] else None
            obs, _, terminated, _, info = env.step(predict_action(rule, obs))
            if source and info["decision"]:
                counts[source][0 if info["label"] else 1] += 1
            if terminated:
                break
    env.close()
    return counts


def format_sources(sources, intrusion_penalty=0.5) -> str:
    """:func:`rule_sources` of every scope as a table."""
    lines = [f"The full-hierarchy rule's interventions by what fired them (break-even precision at intrusion penalty "
             f"{intrusion_penalty}: {intrusion_penalty / (1 + intrusion_penalty):.3f}; a reward-maximising policy "
             "drops a source below it):", "", "| scope | source | TP | FP | precision |", "|---|---|---|---|---|"]
    for scope, counts in sources.items():
        for source, (tp, fp) in counts.items():
            lines.append(f"| {scope} | {source} | {tp} | {fp} | {tp / (tp + fp) if tp + fp else 0.0:.3f} |")
    return "\n".join(lines)


def break_even_sources(sources, intrusion_penalty=0.5) -> tuple:
    """The sources of a :func:`rule_sources` count whose precision is above the break-even
    ``intrusion_penalty / (1 + intrusion_penalty)``: each pays in reward, the others lose it."""
    even = intrusion_penalty / (1 + intrusion_penalty)
    return tuple(s for s, (tp, fp) in sources.items() if tp + fp and tp / (tp + fp) > even)


def break_even_rule(scopes, seeds, version=LATEST_VERSION, intrusion_penalty=0.5) -> dict:
    """Per scope the full-hierarchy rule restricted to its sources above break-even on :data:`DEVELOPMENT_SEEDS`
    (the reward-maximising choice among the rule's sources), run on ``seeds``: ``{scope: (sources, runs)}``."""
    out = {}
    for scope in scopes:
        kept = break_even_sources(rule_sources(scope, DEVELOPMENT_SEEDS, version, intrusion_penalty),
                                  intrusion_penalty)
        out[scope] = kept, run_policy(FullHierarchy(kept), scope, seeds, version=version,
                                      intrusion_penalty=intrusion_penalty)
    return out


def format_break_even(rules, results, n_resamples=2000, intrusion_penalty=0.5) -> str:
    """:func:`break_even_rule` next to the full rule and each PPO of ``results`` (PPO's column always, "—" where it
    did not run): effectiveness and return."""
    ppos = [n for n in PPO_NAMES.values() if n == "PPO" or any(n in res for res in results.values())]
    names = ("FullHierarchy", *ppos)
    lines = [f"The full-hierarchy rule restricted to its sources above break-even (precision > "
             f"{intrusion_penalty / (1 + intrusion_penalty):.3f} on development streams {DEVELOPMENT_SEEDS.start}-"
             f"{DEVELOPMENT_SEEDS.stop - 1}, the reward-maximising choice among its sources), on the same held-out "
             "streams:", "", "| scope | sources kept | effectiveness (95% CI) | return / stream | "
             + " | ".join(f"{n} effectiveness, return" for n in names) + " |", "|---|---|---|---|" + "---|" * len(names)]
    for scope, (kept, runs) in rules.items():
        e = bootstrap(runs, n_resamples)["effectiveness"]
        cells = [f"{pooled(results[scope][n])['effectiveness']:.3f}, "
                 f"{np.mean([r['return'] for r in results[scope][n]]):.2f}" if n in results[scope] else "—"
                 for n in names]
        lines.append(f"| {scope} | {' + '.join(kept) or 'none'} | {e[0]:.3f} [{e[1]:.3f}, {e[2]:.3f}] | "
                     f"{np.mean([r['return'] for r in runs]):.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


FINDING_REPLAY = "removing replay costs more effectiveness than removing validation"
FINDINGS = (
    ("trajectories raise effectiveness", "EventTrajectory", "EventOnly", "effectiveness", +1),
    ("the full hierarchy raises effectiveness further", "FullHierarchy", "EventTrajectory", "effectiveness", +1),
    ("the full hierarchy lowers intrusion", "FullHierarchy", "EventTrajectory", "intrusion", -1),
)


def findings(results, n_resamples=2000) -> list:
    """The paper's memory-layer findings (ProactMem §5.4) checked per scope and pooled: rows of
    ``(finding, scope, difference, lo, hi, agrees)``; *agrees* means the 95% interval of the paired difference
    lies on the paper's side of 0. The replay-versus-validation finding is the difference of effectiveness
    *w/o validation − w/o replay gate* (positive when removing replay costs more)."""
    rows = []
    for scope, res in with_pooled(results).items():
        for text, a, b, metric, sign in FINDINGS:
            d, lo, hi = bootstrap(res[a], n_resamples, other=res[b])[metric]
            rows.append((text, scope, d, lo, hi, (lo > 0) if sign > 0 else (hi < 0)))
        # removing replay costs more than removing validation ⟺ w/o validation − w/o replay > 0
        d, lo, hi = bootstrap(res["WithoutValidation"], n_resamples, other=res["WithoutReplayGate"])["effectiveness"]
        rows.append((FINDING_REPLAY, scope, d, lo, hi, lo > 0))
    return rows


def with_pooled(results) -> dict:
    """``results`` plus a ``"pooled"`` scope holding every scope's streams of the policies they share."""
    names = set.intersection(*(set(r) for r in results.values()))
    return {**results, "pooled": {n: [run for scope in results for run in results[scope][n]] for n in names}}


def intervals(results, n_resamples=2000) -> dict:
    """``{scope (and "pooled"): {policy: bootstrap(runs)}}``: every pooled metric with its 95% interval."""
    return {scope: {name: bootstrap(runs, n_resamples) for name, runs in res.items()}
            for scope, res in with_pooled(results).items()}


def format_results(results, cis, n_resamples=2000) -> str:
    """The per-scope and pooled tables (intervals ``cis`` from :func:`intervals`) and the findings."""
    lines = []
    header = ("| policy | relevance | coverage | effectiveness (95% CI) | intrusion | balance | frequency | "
              "tokens / event | return / stream | depth share (none / ev / +tr / +rg) |")
    for scope, res in with_pooled(results).items():
        positives = sum(r["tp"] + r["fn"] for r in res["Never"])
        events = sum(r["n_events"] for r in res["Never"])
        n_streams = len(res["Never"])
        lines += ["", f"**{scope}** — {n_streams} streams, {events} events, {positives} reference opportunities", "",
                  header, "|" + "---|" * 10]
        for name in [n for n in (*BASELINES, *PPO_NAMES.values()) if n in res]:
            runs, ci = res[name], cis[scope][name]
            share = np.mean([r["depth_share"] for r in runs], axis=0)
            e = ci["effectiveness"]
            lines.append(f"| {name} | {ci['relevance'][0]:.3f} | {ci['coverage'][0]:.3f} | "
                         f"{e[0]:.3f} [{e[1]:.3f}, {e[2]:.3f}] | {ci['intrusion'][0]:.3f} | {ci['balance'][0]:.3f} | "
                         f"{ci['frequency'][0]:.2f}× | {ci['tokens_per_event'][0]:.0f} | "
                         f"{np.mean([r['return'] for r in runs]):.2f} | "
                         + " / ".join(f"{x:.2f}" for x in share) + " |")
    lines += ["", "Seed 002's memory-layer findings in our world (paired bootstrap over streams, 95%; the last "
              "finding's difference is effectiveness w/o validation − w/o replay gate):", "",
              "| finding | scope | difference [95% CI] | agrees |", "|---|---|---|---|"]
    for text, scope, d, lo, hi, ok in findings(results, n_resamples):
        lines.append(f"| {text} | {scope} | {d:+.3f} [{lo:+.3f}, {hi:+.3f}] | {'yes' if ok else 'no'} |")
    return "\n".join(lines)


def plot_ablation(cis, path, version=LATEST_VERSION) -> None:
    """Seed 002 Figure 4 in our world: effectiveness and intrusion of the memory layers per scope (intervals ``cis``
    from :func:`intervals`)."""
    names = ("EventOnly", "EventTrajectory", "FullHierarchy", "WithoutReplayGate", "WithoutValidation")
    labels = ("event-only", "event + trajectory", "ProactMem (full)", "w/o replay gate", "w/o validation")
    scopes = list(cis)
    fig, axes = study_subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / len(names)
    for ax, metric in zip(axes, ("effectiveness", "intrusion")):
        for k, (name, label) in enumerate(zip(names, labels)):
            vals, errs = [], []
            for scope in scopes:
                p, lo, hi = cis[scope][name][metric]
                vals.append(p)
                errs.append((p - lo, hi - p))
            x = np.arange(len(scopes)) + (k - len(names) / 2 + 0.5) * width
            ax.bar(x, vals, width, yerr=np.array(errs).T, capsize=2, label=label)
        ax.set_xticks(np.arange(len(scopes)), scopes)
        ax.set_title(metric)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"ProactiveStream-v{version}: memory-layer ablation (95% bootstrap over held-out streams)")
    save_figure(fig, path)


def main(argv=None):
    """``python -m membudget.evaluate proactive``."""
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate proactive",
                                     description="ProactMem's comparison on ProactiveStream-v1 (or v0)")
    parser.add_argument("--env-version", type=int, choices=tuple(ENV_IDS), default=LATEST_VERSION,
                        help="ProactiveStream version (v1 writes proactive_stream.md with v0's tables below, from "
                             "proactive_stream_v0.json in --out when there; v0 writes proactive_stream_v0.json)")
    parser.add_argument("--scopes", nargs="+", default=list(SCOPE_NAMES), choices=SCOPE_NAMES)
    parser.add_argument("--streams", type=int_flag(2), default=20, help="held-out streams per scope")
    parser.add_argument("--ppo-timesteps", type=int_flag(0), default=0, help="train and add PPO per scope (0: skip)")
    parser.add_argument("--ppo-seed", type=int_flag(0), default=0)
    parser.add_argument("--ppo-starts", nargs="+", default=["none"], choices=WARM_STARTS,
                        help="PPO's warm starts, each trained and added (none: SB3's initialisation, the row 'PPO'; "
                             "full-hierarchy: a behaviour clone of the full-hierarchy rule, 'PPO (warm start)')")
    parser.add_argument("--bootstrap", type=int_flag(100), default=2000)
    parser.add_argument("--out", default=None, help="directory for proactive_stream.md / .json / _ablation.png "
                                                    "(default runs/proactive/<time>; docs regenerates the docs)")
    parser.add_argument("--chunk-streams", type=int_flag(0), default=0,
                        help="streams per evaluation task (0: one task per policy and scope)")
    add_backend_flags(parser)
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = run_folder("proactive")
    command = evaluate_command("proactive", argv)
    start = time.perf_counter()
    with executor_from_flags(args) as executor:
        results = evaluate(args.scopes, args.streams, ppo_timesteps=args.ppo_timesteps, ppo_seed=args.ppo_seed,
                           ppo_starts=tuple(args.ppo_starts), executor=executor, chunk_streams=args.chunk_streams,
                           version=args.env_version)
    cis = intervals(results, args.bootstrap)
    seeds = range(HELD_OUT_FIRST_SEED, HELD_OUT_FIRST_SEED + args.streams)
    text = (results_text(args.env_version, args.streams, args.bootstrap, results, cis) + "\n\n"
            + format_sources({scope: rule_sources(scope, seeds, args.env_version) for scope in args.scopes})
            + "\n\n" + format_break_even(break_even_rule(args.scopes, seeds, args.env_version), results,
                                         args.bootstrap))
    print(text)
    print(f"\ncommand: {command}   ({time.perf_counter() - start:.1f} s)")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        suffix = "" if args.env_version == 1 else "_v0"
        with open(os.path.join(args.out, f"proactive_stream{suffix}.json"), "w") as f:
            json.dump({"config": vars(args), "command": command, **provenance(),
                       "results": results}, f, indent=1)
        plot_ablation(cis, os.path.join(args.out, f"proactive_ablation{suffix}.png"), args.env_version)
        if args.env_version == 1:
            with open(os.path.join(args.out, "proactive_stream.md"), "w") as f:
                f.write("# ProactiveStream-v1 results\n\n" + text + "\n\n![memory-layer ablation]"
                        f"(proactive_ablation.png)\n\ncommand: `{command}`\n" + kept_v0(args.out))
    return results


def results_text(version, n_streams, n_resamples, results, cis) -> str:
    return (f"ProactiveStream-v{version}, held-out streams {HELD_OUT_FIRST_SEED}-{HELD_OUT_FIRST_SEED + n_streams - 1}"
            f" per scope; metrics pooled over streams (ProactMem appendix B.4); intervals: 95% bootstrap over streams "
            f"({n_resamples} resamples)\n" + format_results(results, cis, n_resamples))


def kept_v0(folder) -> str:
    """v0's section of the page, re-rendered from ``proactive_stream_v0.json`` in ``folder`` (the results and
    command of the last v0 run there); empty when there is none."""
    path = os.path.join(folder, "proactive_stream_v0.json")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        saved = json.load(f)
    results, config = saved["results"], saved["config"]
    cis = intervals(results, config["bootstrap"])
    return ("\n## ProactiveStream-v0 (kept)\n\n" + results_text(0, config["streams"], config["bootstrap"], results, cis)
            + "\n\n![memory-layer ablation, v0](proactive_ablation_v0.png)\n\n"
            f"command: `{saved['command']}`" + ("" if "--env-version" in saved["command"] else
                                                 " (run before v1 existed: today with `--env-version 0`)") + "\n")


@dataclass(frozen=True)
class ProactivePPOConfig(ProactiveStreamPPOConfig):
    """PPO on ProactiveStream (v1 by default; membudget.agents.proactive_ppo.train_ppo; every field is a flag):
    :class:`~membudget.agents.proactive_ppo.ProactiveStreamPPOConfig`'s fields beside the run's own."""

    scope: str = "sports"
    """Scope of the streams (sports, home, code)."""
    seed: int = 0
    """Seeds the policy and the training streams (copy i starts at stream seed + i, then unseeded resets)."""
    eval_streams: int = 20
    """Held-out streams (seeds 10000 onwards) of the final evaluation."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: proactive-ppo-<scope>-seed<seed>)."""

    def __post_init__(self):
        super().__post_init__()
        check_training_seeds(self, self.seed)
        check_int("eval_streams", self.eval_streams, 1)
        check_int("total_timesteps", self.total_timesteps, 1)


def train_proactive_ppo(cfg: ProactivePPOConfig, command: str = "") -> str:
    """Train PPO on ProactiveStream-v{version}, evaluate it on held-out streams and save; returns the run
    directory."""
    run_dir = start_run("proactive-ppo", cfg, command, f"proactive-ppo-{cfg.scope}-seed{cfg.seed}")
    settings = ProactiveStreamPPOConfig.of(cfg)
    env_kwargs = settings.env_kwargs()
    model = train_ppo(cfg.scope, settings, seed=cfg.seed)
    model.save(os.path.join(run_dir, "model.zip"))
    runs = run_policy(model, cfg.scope, range(HELD_OUT_FIRST_SEED, HELD_OUT_FIRST_SEED + cfg.eval_streams),
                      **env_kwargs)
    fields = ["seed", "tp", "fp", "fn", "tn", "relevance", "coverage", "effectiveness", "intrusion", "balance",
              "frequency", "total_tokens", "n_events", "return"]
    write_metrics(run_dir, fields, [[r[k] for k in fields] for r in runs])
    record_training(run_dir, model.train_seconds, model.num_timesteps)
    m = pooled(runs)
    print(f"{run_dir}: effectiveness {m['effectiveness']:.3f}, relevance {m['relevance']:.3f}, coverage "
          f"{m['coverage']:.3f}, intrusion {m['intrusion']:.4f}, {m['tokens_per_event']:.0f} tokens per event on "
          f"held-out streams {HELD_OUT_FIRST_SEED}-{HELD_OUT_FIRST_SEED + cfg.eval_streams - 1} "
          f"(training {model.train_seconds:.1f} s)")
    return run_dir


TRAIN_COMMANDS = {"proactive-ppo": TrainCommand(ProactivePPOConfig, "SB3 PPO (memory depth and decision) on "
                                                                    "ProactiveStream-v1 (--version 0: v0)",
                                                train_proactive_ppo)}

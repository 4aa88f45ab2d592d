"""Behaviour cloning and DAgger of the hindsight DP with the per-resource network on ``PMWeek-v0``: the trials
that chose their settings (:data:`membudget.agents.imitation.DEFAULTS`) and the held-out measurement of the result.

``--search`` fits every trial of :data:`TRIALS` (or those named by ``--trials``) at each of its budgets (or only
``--budget``) for each learner seed and scores it on the validation weeks 4000-4029 only, beside the hindsight DP
on the same weeks (at threshold 0.5, calibrated and cross-fitted: :func:`scores`); one JSON line per fit goes to
``--out`` (resumable: fits already there are skipped; several runs may share the file) and the table of every
trial is printed from that file (``--table FILE`` prints it again). A trial names all its settings (not changes to
the current defaults), so the table stays reproducible after the defaults change. The teacher's demonstrations are
solved once per week and budget and kept in memory (and in ``--cache DIR`` if given). DAgger trials score the
student of every iteration (``dagger@k``: after k DAgger iterations; ``@0`` is its BC fit).

``--held-out`` measures what a user gets: ``python -m membudget.train bc`` / ``dagger`` with its default settings,
for each learner seed, evaluated like ``python -m membudget.evaluate --model`` on the held-out weeks 8000-8029 and
9000-9029, beside the hindsight DP on the same weeks (goal: BC at 95% of the DP or more). Nothing is chosen
there.

Every table prints the CPU capability (``torch.backends.cpu.get_cpu_capability()``) beside the timings; fits run
with one torch thread.

``python -m membudget.bench.imitation --search [--trials all|A,B] [--budget B5|B10|B20] [--seeds 0,1,2] [--out FILE]
[--cache DIR]``; ``python -m membudget.bench.imitation --table FILE``;
``python -m membudget.bench.imitation --held-out [--methods bc,dagger] [--budgets B10] [--seeds 0,1,2] [--out FILE]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time

import numpy as np

VALIDATION = tuple(range(4000, 4030))
"""The weeks the settings are chosen on."""
HELD_OUT = tuple(range(8000, 8030)) + tuple(range(9000, 9030))
"""The weeks the chosen settings are reported on."""
FIRST_WEEK = 2000
"""Demonstrations come from development weeks FIRST_WEEK, FIRST_WEEK + 1, ..."""

BEFORE = dict(method="bc", weeks=40, epochs=60, width=64, context=True, lr=3e-3, batch=256, standardize=False,
              calibrate=False)
"""The settings of commit 22941b3 (BC's settings before they were re-chosen for the per-resource network)."""


def _trial(description, **changes):
    return {"description": description, **BEFORE, **changes}


ALL, B10_B20, B10 = ("B5", "B10", "B20"), ("B10", "B20"), ("B10",)

TRIALS = {
    # Diagnosis: what the student of f9a9592 did that the per-resource network of 22941b3 does not.
    "before": _trial("22941b3's BC: 40 weeks, 60 epochs, width 64, lr 3e-3, batch 256 states, raw inputs",
                     budgets=ALL),
    "f9a9592": _trial("f9a9592's student: standardised inputs, no context, no candidate bit, batch 512 candidates",
                      method="f9a9592", batch=512, budgets=ALL),
    "std": _trial("before + standardised inputs", standardize=True, budgets=ALL),
    "no-context": _trial("before without the context", context=False, budgets=B10),
    "std-no-context": _trial("before + standardised inputs, without the context", standardize=True, context=False,
                             budgets=B10),
    # Epochs, learning rate and weeks, one change at a time (standardised and raw inputs).
    "std e15": _trial("std, 15 epochs", standardize=True, epochs=15, budgets=ALL),
    "std e30": _trial("std, 30 epochs (chosen)", standardize=True, epochs=30, budgets=ALL),
    "std e120": _trial("std, 120 epochs", standardize=True, epochs=120, budgets=B10_B20),
    "std lr1e-3": _trial("std, learning rate 1e-3", standardize=True, lr=1e-3, budgets=B10_B20),
    "std 200 weeks": _trial("std, 200 weeks", standardize=True, weeks=200, budgets=B10_B20),
    "raw e30": _trial("before, 30 epochs", epochs=30, budgets=B10),
    "raw e120": _trial("before, 120 epochs", epochs=120, budgets=B10),
    "raw 200 weeks": _trial("before, 200 weeks", weeks=200, budgets=B10_B20),
    # Width and weeks again with the 30 epochs chosen above.
    "std e30 w128": _trial("std, 30 epochs, width 128", standardize=True, epochs=30, width=128, budgets=B10_B20),
    "std e30 100 weeks": _trial("std, 30 epochs, 100 weeks", standardize=True, epochs=30, weeks=100,
                                budgets=B10_B20),
    # DAgger: the student of every iteration; "calibrated": every student acts (and collects) with its calibrated
    # threshold.
    "dagger before": _trial("22941b3's DAgger (raw inputs, threshold 0.5)", method="dagger", iterations=4,
                            budgets=B10),
    "dagger std e30 calibrated": _trial("DAgger, standardised inputs, 30 epochs per fit, calibrated thresholds",
                                        method="dagger", iterations=4, standardize=True, epochs=30, calibrate=True,
                                        budgets=ALL),
}
"""Every trial of the search, with all its settings (``method``: bc, dagger — iterations — or f9a9592, the
student of that commit) and the budgets it runs at. Every network is scored at threshold 0.5, calibrated and
cross-fitted (:func:`scores`; f9a9592's student at 0.5 only). ``--search`` runs them all
(docs/imitation_search.jsonl)."""


def cpu() -> str:
    import torch

    return f"{torch.backends.cpu.get_cpu_capability()} ({platform.machine()}, {os.cpu_count()} logical CPUs)"


# ------------------------------------------------------------------------------------------------ evaluation

_DP: dict = {}


def dp_f1(budget: str, weeks) -> np.ndarray:
    """The hindsight DP's Set F1 on each of ``weeks`` at ``budget`` (per_step_cap 2)."""
    from membudget.envs.pm import budget_levels, generate_episode
    from membudget.teachers import HindsightDP

    dp = HindsightDP(budget=budget_levels()[budget], per_step_cap=2)
    for w in weeks:
        if (budget, w) not in _DP:
            _DP[budget, w] = dp.solve(generate_episode(w)).f1
    return np.array([_DP[budget, w] for w in weeks])


def set_f1(policy, budget: str, weeks) -> np.ndarray:
    """``policy``'s Set F1 on each of ``weeks`` (scores mode, per_step_cap 2: what ``evaluate --model`` runs)."""
    from membudget.envs.pm.rollout import rollout

    return rollout(policy, weeks, budget=budget, per_step_cap=2, action_mode="scores")["set_f1"]


# ------------------------------------------------------------------------------------------------ demonstrations

class DemoCache:
    """The DP's demonstrations per (budget, week), solved once (kept in ``directory`` as one ``.npz`` per budget
    when given)."""

    def __init__(self, directory=None):
        self.directory, self.weeks = directory, {}

    def _file(self, budget):
        return os.path.join(self.directory, f"dp_demonstrations_{budget}.npz")

    def _load(self, budget):
        if self.directory and os.path.exists(self._file(budget)) and budget not in self.weeks:
            with np.load(self._file(budget), allow_pickle=False) as z:
                arrays, week = [z[k] for k in ("resources", "budget", "mask", "labels")], z["week"]
            self.weeks[budget] = {int(w): [a[week == w] for a in arrays] for w in np.unique(week)}
        self.weeks.setdefault(budget, {})

    def _save(self, budget):
        weeks = self.weeks[budget]
        order = sorted(weeks)
        arrays = [np.concatenate([weeks[w][i] for w in order]) for i in range(4)]
        week = np.concatenate([np.full(len(weeks[w][0]), w) for w in order])
        os.makedirs(self.directory, exist_ok=True)
        np.savez(self._file(budget), week=week, **dict(zip(("resources", "budget", "mask", "labels"), arrays)))

    def get(self, budget, weeks):
        from membudget.agents.imitation import Demonstrations, dp_demonstrations

        self._load(budget)
        have = self.weeks[budget]
        missing = [w for w in weeks if w not in have]
        for w in missing:
            have[w] = list(dp_demonstrations([w], budget).arrays())
        if missing and self.directory:
            self._save(budget)
        return Demonstrations(*(np.concatenate([have[w][i] for w in weeks]) for i in range(4)))


# ------------------------------------------------------------------------------------------------ f9a9592's student

class _F9Student:
    """The student of commit f9a9592: an MLP on each candidate's 27 + 9 standardised features (no candidate bit,
    no context), scores mode with threshold 0.5."""

    def __init__(self, net, mean, scale):
        self.net, self.mean, self.scale = net, mean, scale

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        import torch

        res, bud = (np.asarray(observation[k], np.float64) for k in ("resources", "budget"))
        x = np.concatenate([res, np.repeat(bud[:, None, :], res.shape[1], axis=1)], axis=2)
        with torch.no_grad():
            z = self.net(torch.tensor((x - self.mean) / self.scale, dtype=torch.float32))[..., 0].numpy()
        p = 0.5 * (1.0 + np.tanh(0.5 * z.astype(np.float64)))
        mask = np.asarray(observation["mask"]).astype(bool)
        return np.where(mask & (p >= 0.5), np.clip(p, 1e-6, 1.0), -1.0).astype(np.float32), state


def fit_f9a9592(demos, *, epochs=60, width=64, lr=3e-3, seed=0, batch=512):
    """f9a9592's ``_fit``: candidate rows fitted independently (minibatches of 512 rows), class-weighted BCE."""
    import torch

    torch.manual_seed(seed)
    res, bud, mask, labels = demos.arrays()
    X = np.concatenate([res, np.repeat(bud[:, None, :], res.shape[1], axis=1)], axis=2)
    rows = mask.reshape(-1) > 0
    x = X.reshape(-1, X.shape[-1])[rows].astype(np.float64)
    y = labels.reshape(-1)[rows]
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    xt, yt = torch.tensor((x - mean) / scale, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                              torch.nn.ReLU(), torch.nn.Linear(width, 1))
    pos = float(y.sum())
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(max(1.0, (y.size - pos) / max(pos, 1.0))))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(yt), generator=gen).split(batch):
            opt.zero_grad()
            loss_fn(net(xt[idx])[:, 0], yt[idx]).backward()
            opt.step()
    return _F9Student(net, mean, scale)


# ------------------------------------------------------------------------------------------------ the search

def _read(path) -> list:
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _append(path, row):
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def _unfold(net, threshold):
    """The network before :func:`~membudget.agents.imitation.with_threshold` folded ``threshold`` into it."""
    import copy

    import torch

    net = copy.deepcopy(net)
    if threshold != 0.5:
        with torch.no_grad():
            net.head.bias.add_(float(np.log(threshold / (1.0 - threshold))))
    return net


def scores(net, budget) -> dict:
    """A fitted network's validation Set F1 three ways, from its Set F1 at every threshold of
    :data:`~membudget.agents.imitation.THRESHOLDS` on every week of :data:`VALIDATION`: at threshold 0.5; at the
    threshold best on all 30 weeks (what a calibrated fit deploys; in-sample for the threshold); cross-fitted (the
    threshold chosen on weeks 4000-4014 scored on 4015-4029 and the other way round: no week scores a threshold
    chosen on it)."""
    from membudget.agents.imitation import THRESHOLDS, threshold_quality

    grid = threshold_quality(net, budget, VALIDATION)
    half = len(VALIDATION) // 2
    first, second = grid[:, :half], grid[:, half:]
    crossed = np.concatenate([first[np.argmax(second.mean(axis=1))], second[np.argmax(first.mean(axis=1))]])
    best = int(np.argmax(grid.mean(axis=1)))
    return {"val_at_half": float(grid[THRESHOLDS.index(0.5)].mean()), "val_calibrated": float(grid[best].mean()),
            "calibrated_threshold": THRESHOLDS[best], "val_crossfit": float(crossed.mean()),
            "val_by_threshold": {str(t): float(q) for t, q in zip(THRESHOLDS, grid.mean(axis=1))}}


def run_trial(name, budget, seed, demos: DemoCache, say=print) -> list:
    """Fit trial ``name`` once (learner ``seed``) and score it on :data:`VALIDATION` (:func:`scores`); one row per
    student (DAgger: one per iteration)."""
    from membudget.agents.imitation import fit_dagger, fit_net

    t = TRIALS[name]
    weeks = list(range(FIRST_WEEK, FIRST_WEEK + t["weeks"]))
    settings = {k: t[k] for k in ("epochs", "lr", "batch", "standardize", "context")}
    base = {"trial": name, "budget": budget, "seed": seed, "cpu": cpu(),
            **{k: v for k, v in t.items() if k not in ("description", "budgets")}}
    dp = float(dp_f1(budget, VALIDATION).mean())
    rows = []
    start = time.perf_counter()
    if t["method"] == "dagger":
        clock = {"validating": 0.0}

        def score(iteration, policy):
            v = time.perf_counter()
            threshold = policy.config.get("threshold", 0.5)  # folded into the head's bias: unfold to score
            row = dict(base, iteration=iteration, dp_val_set_f1=dp, teacher_calls=policy.config["teacher_calls"],
                       student_threshold=threshold, **scores(_unfold(policy.net, threshold), budget))
            clock["validating"] += time.perf_counter() - v
            rows.append(dict(row, fit_s=time.perf_counter() - start - clock["validating"]))

        fit_dagger(weeks, budget, iterations=t["iterations"], hidden=t["width"], seed=seed, callback=score,
                   calibrate=t["calibrate"], **settings)
    else:
        data = demos.get(budget, weeks)
        fit_start = time.perf_counter()
        if t["method"] == "f9a9592":
            policy = fit_f9a9592(data, epochs=t["epochs"], width=t["width"], lr=t["lr"], seed=seed,
                                  batch=t["batch"])
            fit_s = time.perf_counter() - fit_start
            found = {"val_at_half": float(set_f1(policy, budget, VALIDATION).mean())}
        else:
            net = fit_net(data, hidden=(t["width"],) * 2, seed=seed, **settings)
            fit_s = time.perf_counter() - fit_start
            found = scores(net, budget)
        rows.append(dict(base, dp_val_set_f1=dp, fit_s=fit_s, teacher_calls=t["weeks"], **found))
    for r in rows:
        say(f"{_label(r)} {budget} seed {seed}: validation Set F1 at 0.5 {r['val_at_half']:.4f}"
            + (f", calibrated {r['val_calibrated']:.4f} (threshold {r['calibrated_threshold']}), cross-fitted "
               f"{r['val_crossfit']:.4f}" if "val_crossfit" in r else "")
            + f"; DP {dp:.4f}; fit {r['fit_s']:.0f} s")
    return rows


def search(trials, budgets, seeds, out=None, cache=None, say=print) -> list:
    """Run ``trials`` at each of their budgets (only those in ``budgets`` when given) for ``seeds``, skipping the
    fits already in ``out``."""
    import torch

    torch.set_num_threads(1)
    done = {(r["trial"], r["budget"], r["seed"]) for r in _read(out)}
    demos = DemoCache(cache)
    say(f"CPU: {cpu()}")
    rows = []
    for name in trials:
        for budget in TRIALS[name]["budgets"]:
            if budgets and budget not in budgets:
                continue
            for seed in seeds:
                if (name, budget, seed) in done:
                    continue
                for row in run_trial(name, budget, seed, demos, say):
                    _append(out, row)
                    rows.append(row)
    return rows


def _label(row) -> str:
    return row["trial"] + (f" @{row['iteration']}" if "iteration" in row else "")


def _budget_order(budget) -> int:
    return int(str(budget).lstrip("B")) if str(budget).lstrip("B").isdigit() else 0


def _cells(rs, key, fmt="{:.4f}") -> tuple:
    values = [r.get(key) for r in rs]
    if any(v is None for v in values):
        return "—", "—"
    return ", ".join(fmt.format(v) for v in values), f"{np.mean(values):.4f}"


def table(rows) -> str:
    """The search's table: one line per trial (and DAgger iteration) and budget; validation Set F1 per learner seed
    and mean at threshold 0.5, calibrated (the chosen thresholds) and cross-fitted (:func:`scores`); the
    cross-fitted mean's share of the DP; fit seconds."""
    groups: dict = {}
    for r in sorted(rows, key=lambda r: _budget_order(r["budget"])):
        groups.setdefault((r["budget"], _label(r)), []).append(r)
    lines = ["| budget | trial | weeks | epochs | width | lr | batch | inputs | context | at 0.5: seeds | mean | "
             "calibrated: thresholds | mean | cross-fitted: seeds | mean | of the DP | fit s (CPU) |",
             "|" + "---|" * 17]
    for (budget, label), rs in groups.items():
        rs = sorted(rs, key=lambda r: r["seed"])
        r = rs[0]
        f9 = r["method"] == "f9a9592"
        crossed = [x.get("val_crossfit") for x in rs]
        share = "—" if None in crossed else f"{np.mean(crossed) / r['dp_val_set_f1']:.1%}"
        lines.append(
            f"| {budget} | {label} | {r['weeks']} | {r['epochs']} | {r['width']} | {r['lr']:g} | {r['batch']}"
            f"{' candidates' if f9 else ''} | {'standardised' if r['standardize'] or f9 else 'raw'} | "
            f"{'yes' if r['context'] and not f9 else 'no'} | " + " | ".join(_cells(rs, "val_at_half")) + " | "
            + _cells(rs, "calibrated_threshold", "{:g}")[0] + f" | {_cells(rs, 'val_calibrated')[1]} | "
            + " | ".join(_cells(rs, "val_crossfit")) + f" | {share} | "
              f"{np.mean([x['fit_s'] for x in rs]):.0f} ({r['cpu'].split()[0]}) |")
    dps = {r["budget"]: r["dp_val_set_f1"] for r in sorted(rows, key=lambda r: _budget_order(r["budget"]))}
    lines.append("")
    lines.append("Hindsight DP on the validation weeks 4000-4029: "
                 + ", ".join(f"{b} {v:.4f}" for b, v in dps.items()) + ".")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ held-out

def held_out(methods, budgets, seeds, out=None, say=print, flags=None) -> list:
    """``python -m membudget.train <method> --budget B --seed S`` (its subcommand, run here with one torch thread)
    with every other setting at its default (or ``flags``, ``{field: value}``, for a smoke test), then the model
    evaluated on :data:`HELD_OUT`; one row per run."""
    import torch

    from membudget.agents.rl import load_policy
    from membudget.studies.rl_vs_distillation import TRAIN_COMMANDS
    from membudget.studies.runs import resolve_config

    torch.set_num_threads(1)
    say(f"CPU: {cpu()}")
    done = {(r["method"], r["budget"], r["seed"]) for r in _read(out)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for budget in budgets:
            dp = dp_f1(budget, HELD_OUT)
            for method in methods:
                for seed in seeds:
                    if (method, budget, seed) in done:
                        continue
                    given = {"budget": budget, "seed": seed, "out": tmp, "learning_curve": "off",
                             "progress_bar": "off", **(flags or {})}
                    command = f"python -m membudget.train {method} --budget {budget} --seed {seed}" + "".join(
                        f" --{k.replace('_', '-')} {v}" for k, v in (flags or {}).items())
                    cmd = TRAIN_COMMANDS[method]
                    start = time.perf_counter()
                    run_dir = cmd.function()(resolve_config(cmd.config, given, {}, cmd.defaults), command)
                    seconds = time.perf_counter() - start
                    policy, env_kwargs = load_policy(run_dir)
                    f1 = set_f1(policy, budget, HELD_OUT)
                    with open(os.path.join(run_dir, "config.json")) as f:
                        config = json.load(f)
                    row = {"method": method, "budget": budget, "seed": seed, "command": command,
                           "held_out_set_f1": float(f1.mean()), "dp_held_out_set_f1":
                           float(dp.mean()), "ratio": float(f1.mean() / dp.mean()), "per_week": f1.tolist(),
                           "train_s": seconds, "cpu": cpu(), "settings": config.get("config", config),
                           "student": policy.config}
                    _append(out, row)
                    rows.append(row)
                    say(f"{method} {budget} seed {seed}: held-out Set F1 {row['held_out_set_f1']:.4f} = "
                        f"{row['ratio']:.1%} of the DP's {row['dp_held_out_set_f1']:.4f} ({seconds:.0f} s)")
    return rows


def held_out_table(rows) -> str:
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["budget"], r["method"]), []).append(r)
    lines = ["| budget | method | seeds: held-out Set F1 | mean ± s.d. | hindsight DP | of the DP | train s (CPU) |",
             "|" + "---|" * 7]
    for (budget, method), rs in sorted(groups.items(), key=lambda kv: (_budget_order(kv[0][0]), kv[0][1])):
        rs = sorted(rs, key=lambda r: r["seed"])
        f1 = np.array([r["held_out_set_f1"] for r in rs])
        dp = rs[0]["dp_held_out_set_f1"]
        sd = f1.std(ddof=1) if len(f1) > 1 else 0.0
        lines.append(f"| {budget} | {method} | " + ", ".join(f"{r['seed']}: {r['held_out_set_f1']:.4f}" for r in rs)
                     + f" | {f1.mean():.4f} ± {sd:.4f} | {dp:.4f} | {f1.mean() / dp:.1%} (lowest seed "
                       f"{f1.min() / dp:.1%}) | {np.mean([r['train_s'] for r in rs]):.0f} "
                       f"({rs[0]['cpu'].split()[0]}) |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.imitation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--search", action="store_true", help="the trials on the validation weeks 4000-4029")
    mode.add_argument("--held-out", action="store_true", help="train bc / dagger's defaults on weeks 8000+ / 9000+")
    mode.add_argument("--table", metavar="FILE", help="print the table of a --search (or --held-out) file")
    parser.add_argument("--trials", default="all", help="comma-separated trial names (default: all)")
    parser.add_argument("--budget", default=None, help="--search: only this budget level (default: each trial's)")
    parser.add_argument("--budgets", default="B10", help="--held-out: comma-separated budget levels")
    parser.add_argument("--methods", default="bc,dagger", help="--held-out: bc, dagger or both")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated learner seeds")
    parser.add_argument("--out", default=None, help="JSON lines, one per fit (resumable)")
    parser.add_argument("--cache", default=None, help="--search: directory keeping the DP's demonstrations")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.table:
        rows = _read(args.table)
        print(held_out_table(rows) if rows and "held_out_set_f1" in rows[0] else table(rows))
        return
    if args.search:
        names = list(TRIALS) if args.trials == "all" else [t.strip() for t in args.trials.split(",")]
        unknown = [n for n in names if n not in TRIALS]
        if unknown:
            raise SystemExit(f"unknown trials {unknown}; known: {list(TRIALS)}")
        rows = search(names, [args.budget] if args.budget else None, seeds, args.out, args.cache)
        print(table(_read(args.out) if args.out else rows))
    else:
        rows = held_out([m.strip() for m in args.methods.split(",")], [b.strip() for b in args.budgets.split(",")],
                        seeds, args.out)
        print(held_out_table(_read(args.out) if args.out else rows))


if __name__ == "__main__":
    main()

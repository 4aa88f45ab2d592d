"""The evaluation protocol's primitives (DESIGN §5), shared by every study: rollouts of a policy on held-out
weeks, paired percentile-bootstrap intervals over complete weeks, policies of the BudgetPM suite evaluated by name
and budget, the cap sweep of the natural schedules, package versions and the machine for run records, a progress
line."""

from __future__ import annotations

import functools
import os
import platform

import numpy as np

from membudget.envs.pm.levels import parse_budget  # noqa: F401  (the command lines' budget check, exported here)
from membudget.envs.pm.rollout import rollout
from membudget.envs.validation import check_int, check_number

SWEEP_CAPS = tuple(int(c) for c in np.round(np.linspace(5, 210, 20)))


def bootstrap_ci(values, n_resamples: int = 10000, seed: int = 0, level: float = 0.95):
    """Mean and percentile bootstrap interval over the entries of ``values`` (complete weeks). For a paired
    comparison pass the per-week differences."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("values must be a non-empty 1-D array")
    check_int("n_resamples", n_resamples, 1)
    check_int("seed", seed, 0)
    check_number("level", level, 0, 1, low_open=True, high_open=True)
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    # Blocks of 1,000 resamples (an even count of draws, so the stream is that of one draw of all the indices): a
    # block's arrays stay under a megabyte, where a fresh process would map and fault in new pages for each block
    # of 10,000 — twice the time.
    for lo in range(0, n_resamples, 1000):
        hi = min(n_resamples, lo + 1000)
        means[lo:hi] = x[rng.integers(0, x.size, size=(hi - lo, x.size))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    return float(x.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha))


def seed_ranges(seeds) -> str:
    """Seeds as the pages write them: runs of consecutive seeds as ``lo-hi``, comma-separated (``8000-8029,
    9000-9029``)."""
    runs = []
    for s in seeds:
        if runs and s == runs[-1][1] + 1:
            runs[-1][1] = s
        else:
            runs.append([s, s])
    return ", ".join(f"{lo}-{hi}" if hi > lo else f"{lo}" for lo, hi in runs)


EVAL_SETTINGS = {"per_step_cap": 2, "cost_profile": "unit", "late_policy": "expire"}
"""The environment settings every policy of the evaluation plays (its tables' header: unit prices, N_max 2, late
policy expire); the budget and the load are the evaluation's own arguments."""


def check_model_settings(path: str) -> None:
    """Refuse a trained model whose run directory (``path`` itself, or the folder of its ``model.zip`` /
    ``model.npz``) records in its ``config.json`` other environment settings than :data:`EVAL_SETTINGS`: scored in
    the evaluation's settings, it would be compared with the gates in a setting it was not trained for, with
    nothing to say so. A model without such a record (:func:`membudget.agents.rl.run_record`) is not checked."""
    from membudget.agents.rl import run_record

    record = run_record(path)
    trained = {} if record is None else record[1]
    differ = {k: trained[k] for k, v in EVAL_SETTINGS.items() if k in trained and trained[k] != v}
    if differ:
        got = ", ".join(f"{k} {v!r}" for k, v in differ.items())
        want = ", ".join(f"{k} {EVAL_SETTINGS[k]!r}" for k in differ)
        raise ValueError(f"model {path!r} was trained with {got} (its run's config.json); the evaluation plays every "
                         f"policy with {want}, so its figures would not be comparable: the run's own figures, in its "
                         f"settings, are in its metrics.csv")


def evaluate_policy(suite, name, budget, seeds, load=0, repetitions=3, trust_model=False):
    """Per-week metrics of one policy at one budget (stochastic policies averaged over ``repetitions``).
    ``trust_model``: load a ``model:PATH`` with ``trust_remote_code`` (it may run code from the file)."""
    reps = []
    for r in range(repetitions if name == "RandomFeasible" else 1):
        if name.startswith("model:"):  # a trained model by path
            from membudget.agents.rl import load_policy

            policy, kw = load_policy(name[len("model:"):], trust_remote_code=trust_model)
        else:
            policy, kw = suite.policy(name, budget, seed=r)
        env_kw = {"budget": budget, "per_step_cap": EVAL_SETTINGS["per_step_cap"], "load": load, **kw}
        reps.append(rollout(policy, seeds, **env_kw))
    return {k: np.mean([rep[k] for rep in reps], axis=0) for k in reps[0]}


def available(name, budget, suite) -> bool:
    if name.startswith("model:"):
        return True
    if name in ("Myopic", "Sequential"):
        return any(k == (name.lower(), budget) for k in suite.temporal)
    if name == "PacingLB":
        return budget in suite.pacing_lb
    if budget is None and name in ("PeriodicOutcome", "DeadlineOutcome", "DeadlineBackoffOutcome", "Pacing"):
        return False  # a cadence needs a finite cap
    return True


def cost_to_match(sweep_rows, target_f1, target_recall):
    """Smallest mean realized cost over the sweep whose mean Set F1 and on-time recall both reach the targets
    (None if no cap does)."""
    ok = [r["cost"] for r in sweep_rows if r["f1"] >= target_f1 and r["recall"] >= target_recall]
    return min(ok) if ok else None


def sweep_point(suite, load, item):
    """One point of the cap sweep as a task: mean Set F1 / on-time recall / realized cost of the natural schedule
    ``name`` at ``cap`` on the weeks ``seeds`` (``item = (name, cap, seeds)``)."""
    name, cap, seeds = item
    res = evaluate_policy(suite, name, int(cap), list(seeds), load)
    return {"cap": int(cap), "f1": float(res["set_f1"].mean()),
            "recall": float(np.nanmean(res["on_time_recall"])), "cost": float(res["realized_cost"].mean())}


def cap_sweeps(suite, names, seeds, caps=SWEEP_CAPS, load=0, map=map) -> dict:
    """``{name: [row per cap]}``: mean Set F1 / on-time recall / realized cost of each natural schedule of ``names``
    at each cap, one :func:`sweep_point` task per (schedule, cap) in one ``map`` (``map(fn, items)`` -> results
    in item order, e.g. an executor's ``map``)."""
    items = [(name, int(cap), tuple(seeds)) for name in names for cap in caps]
    rows = list(map(functools.partial(sweep_point, suite, load), items))
    return {name: rows[i * len(caps):(i + 1) * len(caps)] for i, name in enumerate(names)}


def sweep(suite, name, seeds, caps=SWEEP_CAPS, load=0, map=map):
    """The cap sweep of one natural schedule (:func:`cap_sweeps`)."""
    return cap_sweeps(suite, (name,), seeds, caps, load, map)[name]


def package_versions() -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("membudget", "numpy", "gymnasium", "numba", "stable-baselines3", "sb3-contrib", "torch",
                 "scikit-learn", "pettingzoo"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def machine() -> dict:
    """The machine a run comes from, for its record: a training run repeats exactly on the same kind of CPU only
    (docs/speed.md, "Same seed, another CPU"). The CPU's model name and its family / model / stepping (from
    ``/proc/cpuinfo`` where there is one; otherwise ``platform.processor()`` and None), the logical cores, the
    platform, and torch's vector capability (``torch.backends.cpu.get_cpu_capability()``; None where torch is not
    imported, so that recording it never imports torch). Always the same keys."""
    import sys

    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if not key:
                    break  # the first processor's block is enough
                info.setdefault(key, value.strip())
    except OSError:
        pass
    ident = (f"family {info['cpu family']}, model {info['model']}, stepping {info.get('stepping', '?')}"
             if "cpu family" in info and "model" in info else None)
    torch = sys.modules.get("torch")
    return {"cpu": info.get("model name") or platform.processor() or None, "cpu_id": ident,
            "logical_cores": os.cpu_count(), "platform": platform.platform(), "architecture": platform.machine(),
            "torch_cpu_capability": None if torch is None else torch.backends.cpu.get_cpu_capability()}


def provenance() -> dict:
    """What a run record says of where it comes from: ``{"versions": package_versions(), "machine": machine()}``."""
    return {"versions": package_versions(), "machine": machine()}


def machine_line(m: dict | None = None) -> str:
    """The line a generated page names its machine with (``m``: a :func:`machine` record; default this one's): the
    CPU, its family / model / stepping, the logical cores and torch's CPU capability where torch is loaded. A
    trained learner repeats exactly only on the same kind of CPU (docs/speed.md, "Same seed, another CPU"), so a
    page with learned rows says where its figures come from."""
    m = machine() if m is None else m
    ident = f" ({m['cpu_id']})" if m["cpu_id"] else ""
    cap = m["torch_cpu_capability"]
    return (f"machine: {m['cpu'] or 'unknown CPU'}{ident}, {m['logical_cores']} logical cores"
            + (f", torch CPU capability {cap}" if cap else ""))


def write_page(path, text) -> str:
    """Write a generated page (creating its folder); returns the folder."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return folder


def study_subplots(*args, **kwargs):
    """``(fig, axes)`` of ``matplotlib.pyplot.subplots(*args, **kwargs)`` on the Agg backend (studies draw to
    files); :func:`save_figure` writes and closes it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(fig, path) -> None:
    """A study's figure laid out, saved to ``path`` at 120 dpi and closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


__all__ = ["SWEEP_CAPS", "available", "bootstrap_ci", "cap_sweeps", "cost_to_match", "evaluate_policy",
           "package_versions", "parse_budget", "rollout", "save_figure", "study_subplots", "sweep", "sweep_point",
           "write_page"]

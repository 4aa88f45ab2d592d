"""ReplayStream-v1's backbone profiles fitted to LIMBO's figures on development streams.

``python -m membudget.studies.limbo_calibration [--seeds 0 1 2 3 4]`` fits, per (profile, family), the outcome
parameters ``base, G, F, H, L, M`` of :data:`membudget.envs.replay.world_v1.PROFILE_PARAMS_V1` (``ref`` and
``tier`` kept) so that the expected accuracy (mean success probability) of the six fixed baselines on development
streams (seeds 0-9 only, never the report's 42-44) matches :data:`~membudget.envs.replay.world_v1.TARGETS_V1` (the
paper's stated figures weighted 1, the shapes 0.3),
by bounded least squares; it prints the fitted values and the fit, which the world's table was set from (rounded).
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.optimize import least_squares

from membudget.envs.replay.world import FAMILY_PARAMS, _draw, _outcomes
from membudget.envs.replay.world_v1 import PROFILE_PARAMS_V1, TARGETS_V1, replay_v1, with_many_shot

DEV_SEEDS = tuple(range(10))
FITTED = ("base", "G", "F", "H", "L", "M")
# baseline -> (recent_k, retrieve_k, action at the lowest tier)
COLUMNS = {"none": (4, 1, 0), "fixed-k4": (4, 1, 3), "fixed-k16": (16, 4, 3), "compressed-k4": (4, 1, 6),
           "retrieved-k1": (4, 1, 9), "retrieved-k4": (16, 4, 9)}
# the paper's stated figures and the order it reports (retrieval below fixed k = 16) weigh fully; the other
# shapes (fixed k = 4, compressed k = 4) less
WEIGHTS = {"none": 1.0, "fixed-k16": 1.0, "retrieved-k1": 1.0, "fixed-k4": 0.3, "compressed-k4": 0.3,
           "retrieved-k4": 1.0}
BOUNDS = {"base": (0.05, 0.95), "G": (0.05, 4.0), "F": (0.0, 2.0), "H": (0.0, 1.5), "L": (0.0, 0.5), "M": (0.0, 3.0)}


def _cases(profile, family, seeds, n_tasks):
    """The pp-independent part of each development stream (draws, replay state per (recent_k, retrieve_k))."""
    pp = PROFILE_PARAMS_V1[(profile, family)]
    out = []
    for s in seeds:
        d = _draw(np.random.default_rng(s), FAMILY_PARAMS[family], pp, n_tasks)
        out.append((d, {(rk, qk): replay_v1(d, rk, qk) for rk, qk in {c[:2] for c in COLUMNS.values()}}))
    return out


def expected_accuracy(pp, cases) -> dict:
    """Mean success probability of each baseline of :data:`COLUMNS` over the cases."""
    acc = {n: [] for n in COLUMNS}
    for d, reps in cases:
        for name, (rk, qk, a) in COLUMNS.items():
            rp = with_many_shot(reps[(rk, qk)], pp)
            acc[name].append(float(_outcomes(d, rp, pp)[0][:, a].mean()))
    return {n: float(np.mean(v)) for n, v in acc.items()}


def fit(profile, family, seeds=DEV_SEEDS[:5], n_tasks=500):
    """Fit ``FITTED`` for one setting; returns ``(params, expected accuracy per baseline)``."""
    overlap = set(seeds) & {42, 43, 44}
    if overlap:
        raise ValueError(f"calibration uses development seeds only; got the report's {sorted(overlap)}")
    cases = _cases(profile, family, seeds, n_tasks)
    start = dict(PROFILE_PARAMS_V1[(profile, family)])
    target = TARGETS_V1[(profile, family)]

    def params(x):
        return {**start, **dict(zip(FITTED, x))}

    def residual(x):
        acc = expected_accuracy(params(x), cases)
        return np.array([WEIGHTS[n] * (acc[n] - target[n]) for n in COLUMNS])

    x0 = np.array([np.clip(start[k], *BOUNDS[k]) for k in FITTED])
    res = least_squares(residual, x0, bounds=([BOUNDS[k][0] for k in FITTED], [BOUNDS[k][1] for k in FITTED]),
                        diff_step=0.02, max_nfev=200)
    p = params(res.x)
    return p, expected_accuracy(p, cases)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.studies.limbo_calibration",
                                     description="fit ReplayStream-v1's profiles on development streams")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(DEV_SEEDS[:5]))
    parser.add_argument("--settings", nargs="+", default=[f"{p}:{f}" for p, f in TARGETS_V1])
    args = parser.parse_args(argv)
    for item in args.settings:
        profile, family = item.split(":")
        p, acc = fit(profile, family, args.seeds)
        print(f'("{profile}", "{family}"): dict(' + ", ".join(
            f"{k}={round(v, 3)}" for k, v in p.items()) + "),")
        print("    fit: " + "  ".join(f"{n} {acc[n]:.3f} (target {TARGETS_V1[(profile, family)][n]:.3f})"
                                      for n in COLUMNS))


if __name__ == "__main__":
    main()

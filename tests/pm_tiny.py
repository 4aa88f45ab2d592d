"""Random tiny PM weeks for exactness tests (shared by the teacher tests)."""

import numpy as np

from membudget.envs.pm import episode_from_dict
from membudget.envs.pm.episode_io import FORMAT

CLASSES = ("clock", "snapshot", "delta")


def tiny_episode(rng, T, R, costs):
    """A random valid week with T steps, R resources (resource 0 is the clock)."""
    names = ["clock", "a", "b"][:R]
    rows = []
    for i in range(int(rng.integers(1, 7))):
        kind = "time" if R == 1 or rng.random() < 0.3 else "channel"
        res = 0 if kind == "time" else int(rng.integers(1, R))
        af = int(rng.integers(0, T))
        au = int(rng.integers(af, T))
        ds = int(rng.integers(0, T))
        de = int(rng.integers(ds, T))
        if rng.random() < 0.15:
            onset = deadline = None
        else:
            onset = int(rng.integers(0, T))
            deadline = int(rng.integers(onset, T))
        rows.append(dict(id=f"I{i}", kind=kind, resource=names[res], active_from=af, active_until=au,
                         declared_start=ds, declared_end=de, onset=onset, deadline=deadline,
                         polarity=["positive", "positive", "lure", "stale"][int(rng.integers(0, 4))],
                         registered=bool(rng.random() < 0.9), priority=1, miss_cost=1.0, cross_day=False,
                         update_sensitive=False, version=0, visible_outcome="none"))
    vis = {"tp": 0, "fp": 0, "fn": 0}
    for j in range(int(rng.integers(0, 3))):
        out = ["tp", "fn", "fp", "tn"][int(rng.integers(0, 4))]
        vis[out] = vis.get(out, 0) + 1
        on = int(rng.integers(0, T))
        rows.append(dict(id=f"V{j}", kind="visible", resource=None, active_from=0, active_until=on,
                         declared_start=on, declared_end=on, onset=on, deadline=on,
                         polarity="positive" if out in ("tp", "fn") else "lure", registered=True, priority=1,
                         miss_cost=1.0, cross_day=False, update_sensitive=False, version=0, visible_outcome=out))
    vis.pop("tn", None)
    return episode_from_dict({
        "format": FORMAT, "horizon": T,
        "calendar": {"day": [0] * T, "hour": [8.0] * T, "weekday": [0] * T}, "cost_profile": "custom",
        "resources": [{"name": names[r], "class": CLASSES[min(r, 2)], "cost": int(costs[r])} for r in range(R)],
        "intentions": rows, "updates": [], "visible_outcomes": vis, "hints": [[0.0] * R for _ in range(T)],
        "meta": {},
    })


def instances(seed, n):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        T, R = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        costs = np.ones(R, dtype=int) if rng.random() < 0.5 else rng.integers(1, 4, R)
        n_max = [None, 1, 2, 3][int(rng.integers(0, 4))]
        cost_cap = None if rng.random() < 0.7 else int(rng.integers(1, 5))
        budget = None if rng.random() < 0.2 else int(rng.integers(1, 8))
        yield (tiny_episode(rng, T, R, costs), dict(budget=budget, per_step_cap=n_max, per_step_cost_cap=cost_cap,
               late_policy=["expire", "execute"][int(rng.integers(0, 2))], lookahead=int(rng.integers(0, 3))))

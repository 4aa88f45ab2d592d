"""The PM week: world configuration, episode data and the seeded generator.

An :class:`Episode` is everything that happens in one week, drawn at reset and independent of the agent's
actions: the calendar, the queryable resources and their prices, the stored intentions (with their hidden
onsets and deadlines), the updates the user made and whether the compiler registered them, the fixed outcomes
of the visible intentions, and the retriever's hint signal. :func:`generate_episode` is a pure function of
``(seed, config, cost_profile, load)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

#: Onset/deadline value of a trigger that never holds inside the horizon (``null`` in episode files).
NEVER = 1 << 30

KINDS = ("time", "channel", "visible")
KIND_TIME, KIND_CHANNEL, KIND_VISIBLE = 0, 1, 2
POLARITIES = ("positive", "lure", "stale")
POS, LURE, STALE = 0, 1, 2
RESOURCE_CLASSES = ("clock", "snapshot", "delta")
VISIBLE_OUTCOMES = ("none", "tp", "fn", "fp", "tn")
UPDATE_KINDS = ("cancel", "override", "reschedule")

#: Per-class prices of each cost profile and the integer scale applied to prices *and* budgets, so that the
#: executor and the teachers work in integer units (mild: 0.5/1/2 x2 -> 1/2/4; skewed: 0.25/1/4 x4 -> 1/4/16).
COST_PROFILES = {
    "unit": ({"clock": 1.0, "snapshot": 1.0, "delta": 1.0}, 1),
    "mild": ({"clock": 0.5, "snapshot": 1.0, "delta": 2.0}, 2),
    "skewed": ({"clock": 0.25, "snapshot": 1.0, "delta": 4.0}, 4),
}

DEFAULT_RESOURCES = (
    ("clock", "clock"),
    ("email", "delta"),
    ("calendar", "delta"),
    ("shipment_status", "snapshot"),
    ("appointment_portal", "snapshot"),
    ("bank_balance", "snapshot"),
    ("ci_status", "snapshot"),
    ("ticket_tracker", "delta"),
    ("inventory", "snapshot"),
    ("approval_queue", "delta"),
    ("weather", "snapshot"),
)


@dataclass(frozen=True)
class WorldConfig:
    """Parameters of the week generator. The defaults are calibrated to PM-Bench's v9 week and BudgetPM's
    PM-Bench statistics (``python -m membudget.envs.pm calibrate`` prints measured against target)."""

    horizon: int = 80
    """Steps per episode (T)."""
    n_days: int = 7
    """Days the horizon spans; steps are spread evenly (80 over 7 gives days of 12 or 11 steps)."""
    resources: tuple = DEFAULT_RESOURCES
    """(name, class) per queryable resource; exactly one must be the ``clock`` class."""
    day_start_hour: float = 8.0
    """Hour of the first step of each day."""
    day_end_hour: float = 21.0
    """Hour of the last step of each day."""
    n_time: float = 26.0
    """Mean number of time-based tasks per week (resource = clock)."""
    n_channel: float = 15.0
    """Mean number of hidden-channel tasks per week."""
    n_visible: float = 42.0
    """Mean number of visible (cue-triggered, never queried) tasks per week."""
    n_visible_lures: float = 64.0
    """Mean number of visible look-alike cues per week."""
    n_channel_lures: float = 10.0
    """Mean number of channel lures per week (a channel shows a look-alike state of a stored intention)."""
    n_updates: float = 11.0
    """Mean number of user updates (cancel / override / reschedule) per week."""
    p_update_registered: float = 0.7
    """Probability that the compiler registers an update; a missed one leaves a stale version in the ledger."""
    p_unregistered: float = 0.12
    """Probability that the compiler fails to store a hidden task at all (an unrecoverable miss)."""
    p_cross_day: float = 0.08
    """Probability that a task is stated on an earlier day than its window."""
    p_onset_in_window: float = 0.8
    """Probability that a channel trigger occurs inside its declared window (else after it)."""
    p_lure_in_window: float = 0.2
    """Probability that a channel lure's look-alike state shows inside its declared window."""
    channel_window: tuple = (3, 12)
    """Range (inclusive) of declared-window lengths of channel tasks, in steps."""
    time_grace: tuple = (0, 2)
    """Range (inclusive) of steps a time-based task stays on time after its declared time."""
    channel_slack: tuple = (1, 4)
    """Range (inclusive) of steps a channel trigger stays on time after its onset."""
    lookahead: int = 2
    """Steps before a declared window in which its resource already counts as a candidate."""
    ledger_expiry: int = 6
    """Steps after the end of its declared window that an intention stays in the ledger."""
    p_visible_hit: float = 0.78
    """Probability that the controller executes a visible task on time."""
    p_visible_false_alarm: float = 0.06
    """Probability that the controller acts on a visible look-alike cue."""
    hint_noise: float = 0.12
    """Standard deviation of the retriever's hint noise."""
    hint_width: float = 1.5
    """Width (steps) of the hint bump around a trigger's onset."""

    def __post_init__(self):
        if self.horizon < 1 or self.n_days < 1 or self.n_days > self.horizon:
            raise ValueError(f"need 1 <= n_days <= horizon, got horizon={self.horizon}, n_days={self.n_days}")
        classes = [c for _, c in self.resources]
        if classes.count("clock") != 1 or any(c not in RESOURCE_CLASSES for c in classes):
            raise ValueError(f"resources need exactly one 'clock' and classes in {RESOURCE_CLASSES}, got {classes}")
        for name in ("p_update_registered", "p_unregistered", "p_cross_day", "p_onset_in_window",
                     "p_lure_in_window", "p_visible_hit", "p_visible_false_alarm"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability, got {p}")


def resource_costs(classes, cost_profile: str) -> np.ndarray:
    """Integer prices of resources of the given classes under a cost profile."""
    if cost_profile not in COST_PROFILES:
        raise ValueError(f"unknown cost_profile {cost_profile!r}; expected one of {sorted(COST_PROFILES)}")
    prices, scale = COST_PROFILES[cost_profile]
    return np.array([round(prices[c] * scale) for c in classes], dtype=np.int64)


@dataclass(eq=False)
class Episode:
    """One frozen week. Intention fields are parallel arrays (struct of arrays), one entry per intention.

    ``onset``/``deadline`` equal :data:`NEVER` for a trigger that never holds inside the horizon; ``resource`` is
    -1 for visible intentions; ``visible_outcome`` indexes :data:`VISIBLE_OUTCOMES` (``none`` for queried kinds).
    """

    horizon: int
    step_day: np.ndarray
    step_hour: np.ndarray
    weekday: np.ndarray
    resource_names: tuple
    resource_classes: tuple
    costs: np.ndarray
    cost_profile: str
    ids: tuple
    kind: np.ndarray
    resource: np.ndarray
    active_from: np.ndarray
    active_until: np.ndarray
    declared_start: np.ndarray
    declared_end: np.ndarray
    onset: np.ndarray
    deadline: np.ndarray
    polarity: np.ndarray
    priority: np.ndarray
    miss_cost: np.ndarray
    cross_day: np.ndarray
    update_sensitive: np.ndarray
    version: np.ndarray
    registered: np.ndarray
    visible_outcome: np.ndarray
    hints: np.ndarray
    updates: tuple = ()
    meta: dict = field(default_factory=dict)

    @property
    def n_resources(self) -> int:
        return len(self.resource_names)

    @property
    def n_intentions(self) -> int:
        return len(self.ids)

    def visible_counts(self) -> dict:
        """TP/FP/FN of the visible intentions, fixed at reset."""
        vo = self.visible_outcome
        return {k: int(np.sum(vo == VISIBLE_OUTCOMES.index(k))) for k in ("tp", "fp", "fn")}


_INT_FIELDS = ("kind", "resource", "active_from", "active_until", "declared_start", "declared_end", "onset",
               "deadline", "polarity", "priority", "version", "visible_outcome")
_BOOL_FIELDS = ("cross_day", "update_sensitive", "registered")
_ALL_FIELDS = _INT_FIELDS + _BOOL_FIELDS + ("miss_cost",)


def calendar(config: WorldConfig):
    """Day index, hour of day and weekday (0 = Monday) of every step."""
    t_total, d = config.horizon, config.n_days
    per_day = np.full(d, t_total // d)
    per_day[: t_total % d] += 1
    step_day = np.repeat(np.arange(d), per_day)
    within = np.concatenate([np.arange(n) for n in per_day])
    span = config.day_end_hour - config.day_start_hour
    step_hour = config.day_start_hour + span * within / np.maximum(np.repeat(per_day, per_day) - 1, 1)
    return step_day, step_hour, step_day % 7


class _Draw:
    """Vectorised draws of one block of intentions (all randomness from the episode's generator)."""

    def __init__(self, rng, config, step_day, day_first, channels):
        self.rng, self.c, self.step_day, self.day_first, self.channels = rng, config, step_day, day_first, channels
        self.last = config.horizon - 1

    def stated(self, ds):
        """When the user states a task whose window starts at ``ds``: usually the same day, sometimes earlier."""
        rng, n = self.rng, ds.size
        day = self.step_day[ds]
        cross = (day >= 1) & (rng.random(n) < self.c.p_cross_day)
        first = self.day_first[np.maximum(0, day - 2)]
        early = rng.integers(first, np.maximum(self.day_first[day], first + 1))
        same = np.maximum(0, ds - rng.integers(1, 7, n))
        return np.where(cross, early, same), cross

    def block(self, kind, ds, de, onset, deadline, resource, polarity, p_unreg, outcome=None):
        rng, n = self.rng, ds.size
        af, cross = self.stated(ds)
        return {
            "kind": np.full(n, kind), "resource": resource, "active_from": af,
            "active_until": np.minimum(self.last, de + self.c.ledger_expiry), "declared_start": ds,
            "declared_end": de, "onset": onset, "deadline": deadline, "polarity": np.full(n, polarity),
            "priority": rng.integers(1, 4, n), "version": np.zeros(n, dtype=np.int64),
            "visible_outcome": np.zeros(n, dtype=np.int64) if outcome is None else outcome,
            "cross_day": cross, "update_sensitive": np.zeros(n, dtype=bool),
            "registered": rng.random(n) >= p_unreg, "miss_cost": rng.uniform(0.5, 3.0, n),
        }

    def time_window(self, ds):
        g0, g1 = self.c.time_grace
        return np.minimum(self.last, ds + self.rng.integers(g0, g1 + 1, ds.size))

    def channel_window(self, n):
        ds = self.rng.integers(0, max(1, self.c.horizon - 3), n)
        w0, w1 = self.c.channel_window
        return ds, np.minimum(self.last, ds + self.rng.integers(w0, w1 + 1, n))

    def channel_trigger(self, ds, de, p_in):
        rng, n = self.rng, ds.size
        inside = rng.random(n) < p_in
        onset = np.where(inside, rng.integers(ds, de + 1), de + rng.integers(1, 9, n))
        s0, s1 = self.c.channel_slack
        deadline = np.minimum(self.last, onset + rng.integers(s0, s1 + 1, n))
        never = onset > self.last
        return np.where(never, NEVER, onset), np.where(never, NEVER, deadline)

    def time_tasks(self, n):
        ds = self.rng.integers(0, self.c.horizon, n)
        de = self.time_window(ds)
        clock = np.full(n, [c for _, c in self.c.resources].index("clock"))
        return self.block(KIND_TIME, ds, de, ds.copy(), de.copy(), clock, POS, self.c.p_unregistered)

    def channel_tasks(self, n, polarity, p_in, p_unreg):
        ds, de = self.channel_window(n)
        onset, deadline = self.channel_trigger(ds, de, p_in)
        res = self.channels[self.rng.integers(0, self.channels.size, n)]
        return self.block(KIND_CHANNEL, ds, de, onset, deadline, res, polarity, p_unreg)

    def visible(self, n, polarity):
        rng = self.rng
        onset = rng.integers(0, self.c.horizon, n)
        deadline = np.minimum(self.last, onset + rng.integers(0, 3, n))
        if polarity == POS:
            outcome = np.where(rng.random(n) < self.c.p_visible_hit, 1, 2)  # tp / fn
        else:
            outcome = np.where(rng.random(n) < self.c.p_visible_false_alarm, 3, 4)  # fp / tn
        return self.block(KIND_VISIBLE, onset, deadline, onset, deadline.copy(), np.full(n, -1), polarity, 0.0,
                          outcome)


def _concat(blocks):
    return {f: np.concatenate([b[f] for b in blocks]) for f in _ALL_FIELDS}


def generate_episode(seed=None, config: WorldConfig | None = None, cost_profile: str = "unit", load: int = 0,
                     *, rng: np.random.Generator | None = None) -> Episode:
    """The week that a ``PMWeek-v0`` environment with this seed and configuration plays.

    Either ``seed`` (an int, seeded like ``env.reset(seed=seed)``) or an explicit ``rng`` is used. ``load`` adds
    ``load`` extra hidden-channel trigger opportunities per day *after* the base week is drawn, so the base week
    is identical for every load (paired weeks).
    """
    config = config or WorldConfig()
    if rng is None:
        from gymnasium.utils import seeding

        rng, _ = seeding.np_random(seed)
    if isinstance(load, bool) or not isinstance(load, (int, np.integer)) or load < 0:
        raise ValueError(f"load must be a non-negative int, got {load!r}")
    classes = tuple(c for _, c in config.resources)
    costs = resource_costs(classes, cost_profile)
    last = config.horizon - 1
    step_day, step_hour, weekday = calendar(config)
    day_first = np.searchsorted(step_day, np.arange(config.n_days))
    channels = np.array([i for i, c in enumerate(classes) if c != "clock"])
    draw = _Draw(rng, config, step_day, day_first, channels)
    n_time, n_chan, n_lure, n_upd, n_vis, n_vlure = rng.poisson(
        [config.n_time, config.n_channel, config.n_channel_lures, config.n_updates, config.n_visible,
         config.n_visible_lures])
    a = _concat([draw.time_tasks(n_time),
                 draw.channel_tasks(n_chan, POS, config.p_onset_in_window, config.p_unregistered),
                 draw.channel_tasks(n_lure, LURE, config.p_lure_in_window, 0.0)])
    prefix = ["T"] * n_time + ["C"] * n_chan + ["L"] * n_lure
    a, updates, new_prefix = _apply_updates(draw, a, n_time + n_chan, n_upd, prefix)
    vis = _concat([draw.visible(n_vis, POS), draw.visible(n_vlure, LURE)])
    a = _concat([a, vis])
    ids = _ids(new_prefix + ["V"] * (n_vis + n_vlure), a["version"], updates)
    hints = _hints(rng, config, a, len(classes))
    if load:  # drawn last, so the base week (and its hints) is the same for every load
        extra = draw.channel_tasks(load * config.n_days, POS, 1.0, 0.0)
        hints = np.clip(hints + _bumps(config, extra, len(classes)), 0.0, 1.0)
        a = _concat([a, extra])
        ids = ids + tuple(f"X{i + 1:03d}" for i in range(extra["kind"].size))
    return Episode(horizon=config.horizon, step_day=step_day, step_hour=step_hour, weekday=weekday,
                   resource_names=tuple(n for n, _ in config.resources), resource_classes=classes, costs=costs,
                   cost_profile=cost_profile, ids=ids, hints=hints, updates=updates,
                   meta={"seed": seed, "load": int(load)}, **a)


def _apply_updates(draw: _Draw, a: dict, n_tasks: int, n_upd: int, prefix: list):
    """User updates. Each arrives strictly between a task's statement and its trigger, so the old version is
    never due (a *stale* negative); a registered update removes it from the ledger, a missed one leaves it there.
    Override / reschedule add a new positive version, stored only if the update was registered."""
    rng, c, last = draw.rng, draw.c, draw.last
    room = np.minimum(a["onset"][:n_tasks], last) - a["active_from"][:n_tasks]
    pool = np.flatnonzero(a["registered"][:n_tasks] & (room >= 2))
    n_upd = min(int(n_upd), pool.size)
    targets = np.sort(rng.choice(pool, size=n_upd, replace=False)) if n_upd else np.zeros(0, dtype=np.int64)
    u = rng.integers(a["active_from"][targets] + 1, np.minimum(a["onset"][targets], last) + 1)
    kinds = rng.integers(0, 3, n_upd)
    registered = rng.random(n_upd) < c.p_update_registered
    a["polarity"][targets] = STALE
    a["update_sensitive"][targets] = True
    a["active_until"][targets] = np.where(registered, u - 1, a["active_until"][targets])
    versioned = (kinds != 0) & (u < last)
    old = targets[versioned]
    uu = u[versioned]
    ds = np.minimum(last, np.maximum(uu, a["declared_start"][old] + rng.integers(2, 13, old.size)))
    is_time = a["kind"][old] == KIND_TIME
    de_time = draw.time_window(ds)
    w0, w1 = c.channel_window
    de_chan = np.minimum(last, ds + rng.integers(w0, w1 + 1, old.size))
    de = np.where(is_time, de_time, de_chan)
    on_chan, dl_chan = draw.channel_trigger(ds, de, c.p_onset_in_window)
    moved = draw.channels[rng.integers(0, draw.channels.size, old.size)]
    res = np.where(is_time | (kinds[versioned] == 2), a["resource"][old], moved)
    new = {
        "kind": a["kind"][old], "resource": res, "active_from": uu,
        "active_until": np.minimum(last, de + c.ledger_expiry), "declared_start": ds, "declared_end": de,
        "onset": np.where(is_time, ds, on_chan), "deadline": np.where(is_time, de, dl_chan),
        "polarity": np.full(old.size, POS), "priority": a["priority"][old], "version": a["version"][old] + 1,
        "visible_outcome": np.zeros(old.size, dtype=np.int64), "cross_day": a["cross_day"][old],
        "update_sensitive": np.ones(old.size, dtype=bool), "registered": registered[versioned],
        "miss_cost": a["miss_cost"][old],
    }
    base_ids = _ids(prefix, a["version"], ())
    updates = []
    for k, target in enumerate(targets):
        nid = f"{base_ids[target]}v2" if versioned[k] else None
        updates.append({"step": int(u[k]), "kind": UPDATE_KINDS[kinds[k]], "target": base_ids[target],
                        "registered": bool(registered[k]), "new_id": nid})
    merged = _concat([a, new])
    return merged, tuple(updates), prefix + [None] * int(versioned.sum())


_ID_TABLE = {}


def _ids(prefix: list, version, updates) -> tuple:
    """Ids ``T001``, ``C004``, ... numbered per prefix; new versions are named by the update that made them."""
    counts = {}
    out = []
    new_ids = iter(u["new_id"] for u in updates if u["new_id"] is not None)
    for p in prefix:
        if p is None:
            out.append(next(new_ids))
            continue
        k = counts.get(p, 0)
        counts[p] = k + 1
        table = _ID_TABLE.get(p)
        if table is None or k >= len(table):
            table = _ID_TABLE[p] = [f"{p}{i + 1:03d}" for i in range(max(1000, 2 * k))]
        out.append(table[k])
    return tuple(out)


def _bumps(config: WorldConfig, a: dict, n_res: int) -> np.ndarray:
    """Retriever relevance rising towards each hidden trigger's onset (positives and look-alikes alike)."""
    hidden = (a["kind"] != KIND_VISIBLE) & (a["onset"] < NEVER)
    d = np.arange(config.horizon)[:, None] - a["onset"][hidden][None, :]
    bump = 0.7 * np.exp(-0.5 * (d / config.hint_width) ** 2) * (d <= 1)
    out = np.zeros((n_res, config.horizon))
    np.add.at(out, a["resource"][hidden], bump.T)
    return out.T


def _hints(rng: np.random.Generator, config: WorldConfig, a: dict, n_res: int) -> np.ndarray:
    noise = rng.normal(0.0, config.hint_noise, size=(config.horizon, n_res))
    base = 0.1 * rng.random((config.horizon, n_res))
    return np.clip(base + noise + _bumps(config, a, n_res), 0.0, 1.0)


def replace(episode: Episode, **changes) -> Episode:
    """A copy of ``episode`` with some fields replaced (arrays are copied, never shared)."""
    fields = {f.name: getattr(episode, f.name) for f in dataclasses.fields(episode)}
    fields = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in fields.items()}
    fields.update(changes)
    return Episode(**fields)

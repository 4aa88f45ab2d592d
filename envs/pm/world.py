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


class _Builder:
    """Accumulates intentions during generation."""

    def __init__(self):
        self.rows = []

    def add(self, **row) -> int:
        self.rows.append(row)
        return len(self.rows) - 1

    def to_arrays(self) -> dict:
        out = {"ids": tuple(r["id"] for r in self.rows)}
        for f in _INT_FIELDS:
            out[f] = np.array([r[f] for r in self.rows], dtype=np.int64)
        for f in _BOOL_FIELDS:
            out[f] = np.array([r[f] for r in self.rows], dtype=bool)
        out["miss_cost"] = np.array([r["miss_cost"] for r in self.rows], dtype=np.float64)
        return out


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
    if not isinstance(load, (int, np.integer)) or load < 0:
        raise ValueError(f"load must be a non-negative int, got {load!r}")
    costs = resource_costs([c for _, c in config.resources], cost_profile)
    t_total = config.horizon
    last = t_total - 1
    step_day, step_hour, weekday = calendar(config)
    day_first = np.searchsorted(step_day, np.arange(config.n_days))
    names = tuple(n for n, _ in config.resources)
    classes = tuple(c for _, c in config.resources)
    clock = classes.index("clock")
    channels = np.array([i for i, c in enumerate(classes) if c != "clock"])
    b = _Builder()
    counter = {"T": 0, "C": 0, "L": 0, "V": 0, "X": 0}

    def new_id(prefix):
        counter[prefix] += 1
        return f"{prefix}{counter[prefix]:03d}"

    def stated_step(ds):
        """When the user states a task whose window starts at ``ds``: usually the same day, sometimes earlier."""
        day = step_day[ds]
        if day >= 1 and rng.random() < config.p_cross_day:
            first = day_first[max(0, day - 2)]
            return int(rng.integers(first, day_first[day])), True
        return int(max(0, ds - rng.integers(1, 7))), False

    def common(ds, de, cross, kind):
        return dict(declared_start=ds, declared_end=de, cross_day=cross, priority=int(rng.integers(1, 4)),
                    miss_cost=float(rng.uniform(0.5, 3.0)), kind=kind, update_sensitive=False, version=0,
                    visible_outcome=0)

    def channel_trigger(ds, de, p_in):
        if rng.random() < p_in:
            onset = int(rng.integers(ds, de + 1))
        else:
            onset = int(de + rng.integers(1, 9))
        if onset > last:
            return NEVER, NEVER
        return onset, int(min(last, onset + rng.integers(config.channel_slack[0], config.channel_slack[1] + 1)))

    def add_time_task(prefix="T"):
        ds = int(rng.integers(0, t_total))
        de = int(min(last, ds + rng.integers(config.time_grace[0], config.time_grace[1] + 1)))
        af, cross = stated_step(ds)
        return b.add(id=new_id(prefix), resource=clock, active_from=af,
                     active_until=min(last, de + config.ledger_expiry), onset=ds, deadline=de, polarity=POS,
                     registered=bool(rng.random() >= config.p_unregistered), **common(ds, de, cross, KIND_TIME))

    def channel_window():
        ds = int(rng.integers(0, max(1, t_total - 3)))
        de = int(min(last, ds + rng.integers(config.channel_window[0], config.channel_window[1] + 1)))
        return ds, de

    def add_channel_task(prefix="C", polarity=POS, p_in=None, p_unreg=None):
        ds, de = channel_window()
        onset, deadline = channel_trigger(ds, de, config.p_onset_in_window if p_in is None else p_in)
        af, cross = stated_step(ds)
        p_unreg = config.p_unregistered if p_unreg is None else p_unreg
        return b.add(id=new_id(prefix), resource=int(rng.choice(channels)), active_from=af,
                     active_until=min(last, de + config.ledger_expiry), onset=onset, deadline=deadline,
                     polarity=polarity, registered=bool(rng.random() >= p_unreg),
                     **common(ds, de, cross, KIND_CHANNEL))

    hidden = [add_time_task() for _ in range(rng.poisson(config.n_time))]
    hidden += [add_channel_task() for _ in range(rng.poisson(config.n_channel))]
    for _ in range(rng.poisson(config.n_channel_lures)):
        add_channel_task("L", polarity=LURE, p_in=config.p_lure_in_window, p_unreg=0.0)

    # Updates arrive strictly between a task's statement and its trigger, so its old version is never due.
    updates = []
    updatable = [i for i in hidden if b.rows[i]["registered"]
                 and min(b.rows[i]["onset"], last) - b.rows[i]["active_from"] >= 2]
    n_upd = min(rng.poisson(config.n_updates), len(updatable))
    for i in rng.choice(np.array(updatable, dtype=np.int64), size=n_upd, replace=False) if n_upd else []:
        old = b.rows[int(i)]
        u = int(rng.integers(old["active_from"] + 1, min(old["onset"], last) + 1))
        kind = UPDATE_KINDS[int(rng.integers(0, 3))]
        registered = bool(rng.random() < config.p_update_registered)
        old["polarity"] = STALE
        old["update_sensitive"] = True
        if registered:
            old["active_until"] = u - 1
        new = None
        if kind != "cancel" and u < last:
            shift = int(rng.integers(2, 13))
            ds = int(min(last, max(u, old["declared_start"] + shift)))
            if old["kind"] == KIND_TIME:
                de = int(min(last, ds + rng.integers(config.time_grace[0], config.time_grace[1] + 1)))
                onset, deadline, res = ds, de, old["resource"]
            else:
                de = int(min(last, ds + rng.integers(config.channel_window[0], config.channel_window[1] + 1)))
                onset, deadline = channel_trigger(ds, de, config.p_onset_in_window)
                res = old["resource"] if kind == "reschedule" else int(rng.choice(channels))
            nid = old["id"] + f"v{old['version'] + 2}"
            b.add(id=nid, resource=res, active_from=u, active_until=min(last, de + config.ledger_expiry),
                  onset=onset, deadline=deadline, polarity=POS, registered=registered, declared_start=ds,
                  declared_end=de, cross_day=old["cross_day"], priority=old["priority"],
                  miss_cost=old["miss_cost"], kind=old["kind"], update_sensitive=True,
                  version=old["version"] + 1, visible_outcome=0)
            new = nid
        updates.append({"step": u, "kind": kind, "target": old["id"], "registered": registered, "new_id": new})

    def add_visible(polarity):
        onset = int(rng.integers(0, t_total))
        deadline = int(min(last, onset + rng.integers(0, 3)))
        af, cross = stated_step(onset)
        if polarity == POS:
            outcome = "tp" if rng.random() < config.p_visible_hit else "fn"
        else:
            outcome = "fp" if rng.random() < config.p_visible_false_alarm else "tn"
        row = common(onset, deadline, cross, KIND_VISIBLE)
        row["visible_outcome"] = VISIBLE_OUTCOMES.index(outcome)
        b.add(id=new_id("V"), resource=-1, active_from=af, active_until=min(last, deadline + config.ledger_expiry),
              onset=onset, deadline=deadline, polarity=polarity, registered=True, **row)

    for _ in range(rng.poisson(config.n_visible)):
        add_visible(POS)
    for _ in range(rng.poisson(config.n_visible_lures)):
        add_visible(LURE)

    arrays = b.to_arrays()
    hints = _hints(rng, config, arrays, len(names))
    # Load is drawn last, so the base week (and its hints) is the same for every load.
    if load:
        before = len(b.rows)
        for _ in range(load * config.n_days):
            add_channel_task("X", p_in=1.0, p_unreg=0.0)
        arrays = b.to_arrays()
        extra = {k: (v[before:] if isinstance(v, np.ndarray) else v) for k, v in arrays.items()}
        hints = np.clip(hints + _bumps(config, extra, len(names)), 0.0, 1.0)
    return Episode(horizon=t_total, step_day=step_day, step_hour=step_hour, weekday=weekday,
                   resource_names=names, resource_classes=classes, costs=costs, cost_profile=cost_profile,
                   hints=hints, updates=tuple(updates), meta={"seed": seed, "load": int(load)}, **arrays)


def _bumps(config: WorldConfig, a: dict, n_res: int) -> np.ndarray:
    """Retriever relevance rising towards each hidden trigger's onset (positives and look-alikes alike)."""
    t = np.arange(config.horizon)[:, None]
    out = np.zeros((config.horizon, n_res))
    hidden = (a["kind"] != KIND_VISIBLE) & (a["onset"] < NEVER)
    for r in range(n_res):
        on = a["onset"][hidden & (a["resource"] == r)]
        if on.size:
            d = t - on[None, :]
            out[:, r] = np.sum(0.7 * np.exp(-0.5 * (d / config.hint_width) ** 2) * (d <= 1), axis=1)
    return out


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

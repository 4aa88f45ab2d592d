"""The PM week: world configuration, episode data and the seeded generator.

An :class:`Episode` is everything that happens in one week, drawn at reset and independent of the agent's
actions: the calendar, the queryable resources and their prices, the stored intentions (with their hidden
onsets and deadlines), the updates the user made and whether the compiler registered them, the fixed outcomes
of the visible intentions, and the retriever's hint signal. :func:`generate_episode` is a pure function of
``(seed, config, cost_profile, load)``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import namedtuple
from dataclasses import dataclass, field

import numba
import numpy as np
from numba.np.random.generator_core import next_uint32
from numba.np.random.random_methods import bounded_lemire_uint64, buffered_bounded_lemire_uint32

from ..validation import check_int, check_known, check_number

#: Onset/deadline value of a trigger that never holds inside the horizon (``null`` in episode files).
NEVER = 1 << 30


def named_indices(typename: str, names: tuple):
    """A namedtuple of the positions of ``names`` (``named_indices("T", ("a", "b")).b == 1``): column numbers by name
    that cannot drift from the names, and that numba kernels read as compile-time constants."""
    return namedtuple(typename, names)(*range(len(names)))


KINDS = ("time", "channel", "visible")
KIND_TIME, KIND_CHANNEL, KIND_VISIBLE = 0, 1, 2
POLARITIES = ("positive", "lure", "stale")
POS, LURE, STALE = 0, 1, 2
RESOURCE_CLASSES = ("clock", "snapshot", "delta")
VISIBLE_OUTCOMES = ("none", "tp", "fn", "fp", "tn")
OUTCOME = named_indices("VisibleOutcome", VISIBLE_OUTCOMES)
UPDATE_KINDS = ("cancel", "override", "reschedule")
UPDATE_CANCEL, UPDATE_OVERRIDE, UPDATE_RESCHEDULE = range(3)

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


MAX_HORIZON = 100_000
"""Largest horizon a week may have (the kernels' tables hold step indices in int32)."""
MAX_MEAN_COUNT = 10_000.0
"""Largest mean number of intentions of one kind per week."""
MAX_LOAD = 100
"""Largest opportunity load k (extra hidden-channel trigger opportunities per day)."""
MAX_RESOURCES = 1_000
"""Most resources a week may have."""
MAX_INTENTIONS = 1_000_000
"""Most intentions a week may hold."""
MAX_COST = 1_000_000
"""Largest price of one query. With at most MAX_RESOURCES queries per step over MAX_HORIZON steps, no spend
exceeds 1e14, far inside int64."""
MAX_BUDGET = 10**12
"""Largest episode budget (an int), so that budgets and spends add without overflow."""


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
    p_update_registered: float = 0.9
    """Probability that the compiler registers an update; a missed one leaves a stale version in the ledger."""
    p_unregistered: float = 0.15
    """Probability that the compiler fails to store a hidden task at all (an unrecoverable miss)."""
    p_cross_day: float = 0.12
    """Probability that a task is stated on an earlier day than its window."""
    p_onset_in_window: float = 0.65
    """Probability that a channel trigger occurs inside its declared window (else after it)."""
    p_lure_in_window: float = 0.05
    """Probability that a channel lure's look-alike state shows inside its declared window."""
    channel_window: tuple = (3, 10)
    """Range (inclusive) of declared-window lengths of channel tasks, in steps."""
    time_grace: tuple = (0, 0)
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
        # tuples keep the config hashable (it keys cached per-world constants)
        for name in ("resources", "channel_window", "time_grace", "channel_slack"):
            value = getattr(self, name)
            if isinstance(value, list):
                value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
                object.__setattr__(self, name, value)
        if not isinstance(self.resources, tuple) or not 1 <= len(self.resources) <= MAX_RESOURCES or any(
                not (isinstance(r, tuple) and len(r) == 2 and all(isinstance(x, str) for x in r))
                for r in self.resources):
            raise ValueError(f"resources must be 1..{MAX_RESOURCES} (name, class) pairs of strings, "
                             f"got {self.resources!r}"[:300])
        names = [n for n, _ in self.resources]
        if len(set(names)) != len(names):
            raise ValueError(f"resource names must be unique, got {names}")
        # each number is stored as the int or float it was checked as: the generator's numba kernel is compiled per
        # argument type, so an int given for a float field (hint_width=2, p_cross_day=0) or a NumPy scalar would
        # compile it anew (seconds, on a first reset) and give the week's draws other types
        _set = functools.partial(object.__setattr__, self)
        _set("horizon", check_int("horizon", self.horizon, 1, MAX_HORIZON))
        _set("n_days", check_int("n_days", self.n_days, 1, self.horizon))
        _set("day_start_hour", check_number("day_start_hour", self.day_start_hour, 0, 24, high_open=True))
        _set("day_end_hour", check_number("day_end_hour", self.day_end_hour, self.day_start_hour, 24, high_open=True))
        for name in ("n_time", "n_channel", "n_visible", "n_visible_lures", "n_channel_lures", "n_updates"):
            _set(name, check_number(name, getattr(self, name), 0, MAX_MEAN_COUNT))
        _set("hint_noise", check_number("hint_noise", self.hint_noise, 0, 10))
        _set("hint_width", check_number("hint_width", self.hint_width, 0, MAX_HORIZON, low_open=True))
        for name in ("channel_window", "time_grace", "channel_slack"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or len(value) != 2:
                raise ValueError(f"{name} must be a range (lo, hi), got {value!r}")
            lo = check_int(f"{name}[0]", value[0], 0, MAX_HORIZON)
            _set(name, (lo, check_int(f"{name}[1]", value[1], lo, MAX_HORIZON)))
        for name in ("lookahead", "ledger_expiry"):
            _set(name, check_int(name, getattr(self, name), 0, MAX_HORIZON))
        for name in ("p_update_registered", "p_unregistered", "p_cross_day", "p_onset_in_window",
                     "p_lure_in_window", "p_visible_hit", "p_visible_false_alarm"):
            _set(name, check_number(name, getattr(self, name), 0, 1))
        classes = [c for _, c in self.resources]
        if classes.count("clock") != 1 or any(c not in RESOURCE_CLASSES for c in classes):
            raise ValueError(f"resources need exactly one 'clock' and classes in {RESOURCE_CLASSES}, got {classes}")


def resource_costs(classes, cost_profile: str) -> np.ndarray:
    """Integer prices of resources of the given classes under a cost profile."""
    check_known("cost_profile", cost_profile, COST_PROFILES, sorted(COST_PROFILES))
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


# Columns of the integer and boolean tables, the update table and the counts returned by the generator kernel
# (a row of the integer table is written whole, in this order).
_GEN_INT = ("kind", "resource", "active_from", "active_until", "declared_start", "declared_end", "onset",
            "deadline", "polarity", "priority", "version", "visible_outcome")
_GEN_BOOL = ("cross_day", "update_sensitive", "registered")
_GEN_UPDATE = ("step", "kind", "target", "registered", "new_row")
_GEN_COUNTS = ("time", "channel", "lure", "new_version", "visible", "load")
GI = named_indices("GeneratedInt", _GEN_INT)
GB = named_indices("GeneratedBool", _GEN_BOOL)
GU = named_indices("GeneratedUpdate", _GEN_UPDATE)
GC = named_indices("GeneratedCounts", _GEN_COUNTS)


@numba.njit(cache=True)
def _integers(rng, low, high):
    """``rng.integers(low, high)`` drawn exactly as numba draws it (the same bits, so the same weeks), without
    the one-element array numba allocates on each such call (most of the generator's time)."""
    if low >= high:
        raise ValueError("low >= high")
    span = high - 1 - low
    if span == 0:
        return low
    if span < 0xFFFFFFFF:
        return low + np.int64(buffered_bounded_lemire_uint32(rng.bit_generator, span))
    if span == 0xFFFFFFFF:
        return low + np.int64(next_uint32(rng.bit_generator))
    return low + np.int64(bounded_lemire_uint64(rng.bit_generator, span))


@numba.njit(cache=True)
def _stated(rng, ds, step_day, day_first, p_cross):
    """When the user states a task whose window starts at ``ds``: usually the same day, sometimes earlier."""
    day = step_day[ds]
    if day >= 1 and rng.random() < p_cross:
        return _integers(rng, day_first[max(0, day - 2)], day_first[day]), True
    return max(0, ds - _integers(rng, 1, 7)), False


@numba.njit(cache=True)
def _channel_trigger(rng, ds, de, p_in, last, s0, s1):
    if rng.random() < p_in:
        onset = _integers(rng, ds, de + 1)
    else:
        onset = de + _integers(rng, 1, 9)
    if onset > last:
        return NEVER, NEVER
    return onset, min(last, onset + _integers(rng, s0, s1 + 1))


@numba.njit(cache=True)
def _draw_week(rng, args):
    """Every random draw of a week, in a fixed order, with ``args`` from :func:`draw_arguments`. Rows: time tasks,
    channel tasks, channel lures, new versions made by updates, visible tasks, visible lures, load extras."""
    T, step_day, day_first, channels, clock, n_res, means, probs, ranges, expiry, hint_noise, hint_width, load, \
        n_days = args
    last = T - 1
    m_time, m_chan, m_lure, m_upd, m_vis, m_vlure = means
    p_unreg, p_cross, p_in, p_lure_in, p_reg, p_hit, p_fa = probs
    g0, g1, w0, w1, s0, s1 = ranges
    n_time = rng.poisson(m_time)
    n_chan = rng.poisson(m_chan)
    n_lure = rng.poisson(m_lure)
    if channels.size == 0:  # a world of the clock alone
        n_chan = 0
        n_lure = 0
    n_upd = rng.poisson(m_upd)
    n_vis = rng.poisson(m_vis)
    n_vlure = rng.poisson(m_vlure)
    n_load = load * n_days
    n_max = n_time + n_chan + n_lure + n_upd + n_vis + n_vlure + n_load
    I = np.zeros((n_max, len(_GEN_INT)), dtype=np.int64)
    B = np.zeros((n_max, len(_GEN_BOOL)), dtype=np.bool_)
    mc = np.zeros(n_max)
    nch = channels.size
    row = 0
    for j in range(n_time + n_chan + n_lure):
        kind = KIND_TIME if j < n_time else KIND_CHANNEL
        if kind == KIND_TIME:
            ds = _integers(rng, 0, T)
            de = min(last, ds + _integers(rng, g0, g1 + 1))
            onset, deadline, res = ds, de, clock
        else:
            ds = _integers(rng, 0, max(1, T - 3))
            de = min(last, ds + _integers(rng, w0, w1 + 1))
            onset, deadline = _channel_trigger(rng, ds, de, p_in if j < n_time + n_chan else p_lure_in, last, s0,
                                               s1)
            res = channels[_integers(rng, 0, nch)]
        af, cross = _stated(rng, ds, step_day, day_first, p_cross)
        lure = j >= n_time + n_chan
        I[row] = (kind, res, af, min(last, de + expiry), ds, de, onset, deadline, LURE if lure else POS,
                  _integers(rng, 1, 4), 0, OUTCOME.none)
        mc[row] = rng.uniform(0.5, 3.0)
        B[row, GB.cross_day] = cross
        B[row, GB.registered] = lure or rng.random() >= p_unreg
        row += 1
    # Updates arrive strictly between a task's statement and its trigger, so the old version is never due.
    n_tasks = n_time + n_chan
    pool = np.empty(n_tasks, dtype=np.int64)
    n_pool = 0
    for i in range(n_tasks):
        if B[i, GB.registered] and min(I[i, GI.onset], last) - I[i, GI.active_from] >= 2:
            pool[n_pool] = i
            n_pool += 1
    n_upd = min(n_upd, n_pool)
    for k in range(n_upd):  # partial Fisher-Yates: a uniform sample without replacement
        j = k + _integers(rng, 0, n_pool - k)
        pool[k], pool[j] = pool[j], pool[k]
    targets = np.sort(pool[:n_upd])
    U = np.full((n_upd, len(_GEN_UPDATE)), -1, dtype=np.int64)
    for k in range(n_upd):
        i = targets[k]
        u = _integers(rng, I[i, GI.active_from] + 1, min(I[i, GI.onset], last) + 1)
        kind = _integers(rng, 0, 3)
        registered = rng.random() < p_reg
        I[i, GI.polarity] = STALE
        B[i, GB.update_sensitive] = True
        if registered:
            I[i, GI.active_until] = u - 1
        U[k, GU.step], U[k, GU.kind], U[k, GU.target], U[k, GU.registered] = u, kind, i, 1 if registered else 0
        if kind != UPDATE_CANCEL and u < last:
            ds = min(last, max(u, I[i, GI.declared_start] + _integers(rng, 2, 13)))
            if I[i, GI.kind] == KIND_TIME:
                de = min(last, ds + _integers(rng, g0, g1 + 1))
                onset, deadline, res = ds, de, I[i, GI.resource]
            else:
                de = min(last, ds + _integers(rng, w0, w1 + 1))
                onset, deadline = _channel_trigger(rng, ds, de, p_in, last, s0, s1)
                res = I[i, GI.resource] if kind == UPDATE_RESCHEDULE else channels[_integers(rng, 0, nch)]
            I[row] = (I[i, GI.kind], res, u, min(last, de + expiry), ds, de, onset, deadline, POS, I[i, GI.priority],
                      I[i, GI.version] + 1, OUTCOME.none)
            mc[row] = mc[i]
            B[row, GB.cross_day], B[row, GB.update_sensitive], B[row, GB.registered] = B[i, GB.cross_day], True, \
                registered
            U[k, GU.new_row] = row
            row += 1
    n_new = row - n_tasks - n_lure
    for j in range(n_vis + n_vlure):
        lure = j >= n_vis
        onset = _integers(rng, 0, T)
        deadline = min(last, onset + _integers(rng, 0, 3))
        af, cross = _stated(rng, onset, step_day, day_first, p_cross)
        if lure:
            outcome = OUTCOME.fp if rng.random() < p_fa else OUTCOME.tn
        else:
            outcome = OUTCOME.tp if rng.random() < p_hit else OUTCOME.fn
        I[row] = (KIND_VISIBLE, -1, af, min(last, deadline + expiry), onset, deadline, onset, deadline,
                  LURE if lure else POS, _integers(rng, 1, 4), 0, outcome)
        mc[row] = rng.uniform(0.5, 3.0)
        B[row, GB.cross_day], B[row, GB.registered] = cross, True
        row += 1
    hints = np.empty((T, n_res))
    for t in range(T):
        for r in range(n_res):
            hints[t, r] = 0.1 * rng.random() + rng.normal(0.0, hint_noise)
    _add_bumps(hints, I, 0, row, hint_width)
    _clip01(hints)
    # Load is drawn last, so the base week (and its hints) is the same for every load.
    base = row
    for j in range(n_load):
        ds = _integers(rng, 0, max(1, T - 3))
        de = min(last, ds + _integers(rng, w0, w1 + 1))
        onset, deadline = _channel_trigger(rng, ds, de, 1.0, last, s0, s1)
        res = channels[_integers(rng, 0, nch)]
        af, cross = _stated(rng, ds, step_day, day_first, p_cross)
        I[row] = (KIND_CHANNEL, res, af, min(last, de + expiry), ds, de, onset, deadline, POS, _integers(rng, 1, 4),
                  0, OUTCOME.none)
        mc[row] = rng.uniform(0.5, 3.0)
        B[row, GB.cross_day], B[row, GB.registered] = cross, True
        row += 1
    if n_load:
        _add_bumps(hints, I, base, row, hint_width)
        _clip01(hints)
    counts = np.array([n_time, n_chan, n_lure, n_new, n_vis + n_vlure, n_load])
    return I[:row], B[:row], mc[:row], U, hints, counts


@numba.njit(cache=True)
def _add_bumps(hints, I, lo, hi, width):
    """Retriever relevance rising towards each hidden trigger's onset (positives and look-alikes alike)."""
    T = hints.shape[0]
    bump = np.empty(8)  # by step minus onset, -6 ... 1
    for k in range(-6, 2):
        d = k / width
        bump[k + 6] = 0.7 * np.exp(-0.5 * d * d)
    for i in range(lo, hi):
        onset = I[i, GI.onset]
        if I[i, GI.kind] == KIND_VISIBLE or onset >= NEVER:
            continue
        for t in range(max(0, onset - 6), min(T, onset + 2)):
            hints[t, I[i, GI.resource]] += bump[t - onset + 6]


@numba.njit(cache=True)
def _clip01(x):
    for t in range(x.shape[0]):
        for r in range(x.shape[1]):
            x[t, r] = min(1.0, max(0.0, x[t, r]))


@functools.lru_cache(maxsize=64)
def _world_constants(config: WorldConfig):
    step_day, step_hour, weekday = calendar(config)
    classes = tuple(c for _, c in config.resources)
    costs = {p: resource_costs(classes, p) for p in COST_PROFILES}
    for a in (step_day, step_hour, weekday, *costs.values()):
        a.setflags(write=False)  # shared by every episode of this world
    return dict(
        step_day=step_day, step_hour=step_hour, weekday=weekday, classes=classes,
        names=tuple(n for n, _ in config.resources),
        day_first=np.searchsorted(step_day, np.arange(config.n_days)).astype(np.int64),
        channels=np.array([i for i, c in enumerate(classes) if c != "clock"], dtype=np.int64),
        clock=classes.index("clock"),
        means=tuple(float(x) for x in (config.n_time, config.n_channel, config.n_channel_lures, config.n_updates,
                                       config.n_visible, config.n_visible_lures)),
        probs=(config.p_unregistered, config.p_cross_day, config.p_onset_in_window, config.p_lure_in_window,
               config.p_update_registered, config.p_visible_hit, config.p_visible_false_alarm),
        ranges=(*config.time_grace, *config.channel_window, *config.channel_slack),
        costs=costs,
    )


_ID_TABLE = {}


def _numbered(prefix: str, n: int) -> list:
    """``[prefix001, prefix002, ...]`` (cached)."""
    table = _ID_TABLE.get(prefix)
    if table is None or len(table) < n:
        table = _ID_TABLE[prefix] = [f"{prefix}{i + 1:03d}" for i in range(max(1000, 2 * n))]
    return table[:n]


@functools.lru_cache(maxsize=64)
def draw_arguments(config: WorldConfig, load: int = 0) -> tuple:
    """The arguments after ``rng`` of the week-drawing kernel ``_draw_week`` for a world and load."""
    w = _world_constants(config)
    return (config.horizon, w["step_day"], w["day_first"], w["channels"], w["clock"], len(w["names"]), w["means"],
            w["probs"], w["ranges"], config.ledger_expiry, config.hint_noise, config.hint_width, int(load),
            config.n_days)


def check_generation(config: WorldConfig, cost_profile: str, load: int):
    """Refuse a cost profile, load or world that :func:`generate_episode` cannot draw a week for."""
    check_known("cost_profile", cost_profile, COST_PROFILES, sorted(COST_PROFILES))
    check_int("load", load, 0, MAX_LOAD)
    if load and _world_constants(config)["channels"].size == 0:
        raise ValueError("load adds channel triggers, but this world has no channel resources")
    if load * config.n_days > MAX_INTENTIONS:
        raise ValueError(f"load {load} adds {load * config.n_days} intentions over the world's {config.n_days} days; "
                         f"a week holds at most {MAX_INTENTIONS}")


def generate_episode(seed=None, config: WorldConfig | None = None, cost_profile: str = "unit", load: int = 0,
                     *, rng: np.random.Generator | None = None) -> Episode:
    """The week that a ``PMWeek-v0`` environment with this seed and configuration plays.

    Draws come from ``rng`` when given (``seed`` is then only recorded in ``meta``), else from a generator seeded
    like ``env.reset(seed=seed)``. ``load`` adds
    ``load`` extra hidden-channel trigger opportunities per day *after* the base week is drawn, so the base week
    is identical for every load (paired weeks).
    """
    seed = check_int("seed", seed, 0, none_ok=True)
    config = config or WorldConfig()
    check_generation(config, cost_profile, load)
    w = _world_constants(config)
    if rng is None:
        from gymnasium.utils import seeding

        rng, _ = seeding.np_random(seed)
    I, B, mc, U, hints, counts = _draw_week(rng, draw_arguments(config, load))
    if I.shape[0] > MAX_INTENTIONS:  # a week that validate_episode, and so saving or replaying it, would refuse
        raise ValueError(f"the week drew {I.shape[0]} intentions, more than a week holds ({MAX_INTENTIONS}); lower "
                         f"the load or the world's mean counts")
    n_time, n_chan, n_lure, n_new, n_vis, n_load = counts.tolist()
    ids = _numbered("T", n_time) + _numbered("C", n_chan) + _numbered("L", n_lure)
    updates = []
    for step, kind, target, registered, new in U.tolist():
        new_id = None
        if new >= 0:
            new_id = ids[target] + "v2"
            ids.append(new_id)
        updates.append({"step": step, "kind": UPDATE_KINDS[kind], "target": ids[target],
                        "registered": bool(registered), "new_id": new_id})
    ids += _numbered("V", n_vis) + _numbered("X", n_load)
    cols = {name: I[:, j] for j, name in enumerate(_GEN_INT)}
    cols.update({name: B[:, j] for j, name in enumerate(_GEN_BOOL)})
    return Episode(horizon=config.horizon, step_day=w["step_day"], step_hour=w["step_hour"], weekday=w["weekday"],
                   resource_names=w["names"], resource_classes=w["classes"], costs=w["costs"][cost_profile],
                   cost_profile=cost_profile, ids=tuple(ids), miss_cost=mc, hints=hints, updates=tuple(updates),
                   meta={"seed": seed, "load": int(load)}, **cols)


def episode_from_state(bit_generator_state: dict, config: WorldConfig, cost_profile: str, seed=None,
                       load: int = 0) -> Episode:
    """The week a generator in ``bit_generator_state`` (its ``bit_generator.state``) draws next, as
    :func:`generate_episode` with that generator gives it; ``seed`` is recorded in ``meta``."""
    bit_generator = getattr(np.random, bit_generator_state["bit_generator"])()
    bit_generator.state = bit_generator_state
    return generate_episode(seed, config, cost_profile, load, rng=np.random.Generator(bit_generator))


def replace(episode: Episode, **changes) -> Episode:
    """A copy of ``episode`` with some fields replaced (arrays are copied, never shared)."""
    fields = {f.name: getattr(episode, f.name) for f in dataclasses.fields(episode)}
    fields = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in fields.items()}
    fields.update(changes)
    return Episode(**fields)

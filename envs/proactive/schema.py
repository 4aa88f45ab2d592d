"""Public event schema of ``ProactiveStream-v0`` (ProactMem): scopes, canonical facts, the stream container.

Every event of every scope is one row of a :class:`Stream`: a time (minutes since the stream's epoch, a Monday
00:00 local time), an event kind, a set of canonical *checkable facts* (a bitmask over the scope's fact vocabulary,
ProactMem's typed fields ``F(e)`` of eq. 5), an ``observed`` flag (False: the device or sensor produced no data for
this event, so nothing can be checked — ProactMem's *censored* observations), numeric public values in [0, 1] and the
object the event concerns (Code: an issue or pull-request number; −1 elsewhere). Reference labels and the latent
world that produced them live in separate fields that no observation reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MINUTES_PER_DAY = 1440
ALL_DAYS = 0b1111111
WORKDAYS = 0b0011111
WEEKEND = 0b1100000
MAX_FACTS = 32


@dataclass(frozen=True)
class ScopeSpec:
    """One application scope: its public vocabulary and its memory / decision constants."""

    name: str
    kinds: tuple
    """Event kinds (``Stream.kind`` indexes this)."""
    facts: tuple
    """Canonical checkable facts ``field=value`` (bit ``i`` of ``Stream.facts`` is ``facts[i]``), at most 32."""
    values: tuple
    """Numeric public fields (columns of ``Stream.values``), each normalised to [0, 1]."""
    triggers: tuple
    """Facts that can be a regularity's trigger ``g``."""
    behaviours: tuple
    """Facts that can be a regularity's expected behaviour ``p`` (and the behaviours the memory features track)."""
    actionable: tuple
    """Occurrence states of a matched regularity that make a service timely in this scope (``pending`` — suggest
    before the usual time — or ``deviated`` — check in after the usual window passed without the behaviour)."""
    services: tuple
    """Service actions the assistant can propose in this scope (intervention-control keys use them)."""
    event_tokens: int
    """Tokens one event costs in the decision context."""
    segment_tokens: int
    """Tokens one trajectory segment costs."""
    regularity_tokens: int
    """Tokens one retrieved regularity costs (its trigger, behaviour, window, replay statistics and sources)."""
    matching_overhead_tokens: int
    """Fixed tokens of the regularity layer (the current-condition matching summary)."""
    lead: int
    """Lead of regularity matching in minutes (an occurrence is *upcoming* from ``start − lead``)."""
    grace: int
    """Grace of regularity matching in minutes (a *deviated* occurrence stays applicable until ``end + grace``); the
    reference labels use the same grace for a check-in after the window. Seed 002 uses 30 minutes; scopes whose
    events are sparser widen it to the spacing of their events (Home 60: segments are 50 minutes apart, so with 30
    the first segment after a window would never fall in the grace; Code 180: repository events come hours apart)."""
    proposal_pad: int
    """Minutes the deterministic proposer widens a proposed window on each side of the observed behaviour times."""

    def __post_init__(self):
        if len(self.facts) > MAX_FACTS or len(set(self.facts)) != len(self.facts):
            raise ValueError(f"{self.name}: facts must be at most {MAX_FACTS} distinct names")
        for name in self.triggers + self.behaviours:
            if name not in self.facts:
                raise ValueError(f"{self.name}: {name!r} is not a fact of the scope")

    def fact(self, name: str) -> int:
        """Index of a fact by name."""
        return self.facts.index(name)

    def bit(self, name: str) -> int:
        """Bitmask of one fact."""
        return 1 << self.facts.index(name)

    @property
    def trigger_ids(self) -> tuple:
        return tuple(self.facts.index(n) for n in self.triggers)

    @property
    def behaviour_ids(self) -> tuple:
        return tuple(self.facts.index(n) for n in self.behaviours)


@dataclass
class Routine:
    """A latent conditional behavioural regularity of the generator (never observed): on days in ``weekdays`` while
    the routine is in force (``first_day <= day < last_day``), after the trigger fact occurs the behaviour follows
    within the time-of-day window ``[start, end]`` unless the person skips it that day."""

    trigger: int
    behaviour: int
    start: int
    end: int
    weekdays: int
    first_day: int
    last_day: int
    skip_prob: float
    service: int


@dataclass
class Stream:
    """One isolated event stream (a participant, a home or a repository).

    Public fields (an agent may read them): ``time``, ``kind``, ``facts``, ``observed``, ``values``,
    ``object_id``. Reference fields (evaluation only, never observed): ``label`` (ProactMem eq. 9), ``support``
    (1: the current event supports the opportunity (A), 2: history does (B), 3: both), ``episode`` (the
    opportunity episode an event belongs to, −1 none), ``service`` (the service of the episode, −1 none) and the
    latent ``routines``.
    """

    scope: str
    stream_id: str
    time: np.ndarray
    kind: np.ndarray
    facts: np.ndarray
    observed: np.ndarray
    values: np.ndarray
    object_id: np.ndarray
    label: np.ndarray
    support: np.ndarray
    episode: np.ndarray
    service: np.ndarray
    routines: tuple = field(default_factory=tuple)

    def __len__(self) -> int:
        return int(self.time.size)

    @property
    def n_days(self) -> int:
        return int(self.time[-1] // MINUTES_PER_DAY) + 1 if len(self) else 0

    def day(self, t: int) -> int:
        return int(self.time[t] // MINUTES_PER_DAY)

    def minute_of_day(self, t: int) -> int:
        return int(self.time[t] % MINUTES_PER_DAY)

    def weekday(self, t: int) -> int:
        return int(self.time[t] // MINUTES_PER_DAY) % 7

    def has(self, t: int, fact: int) -> bool:
        return bool((int(self.facts[t]) >> fact) & 1)

    def validate(self, spec: ScopeSpec) -> None:
        """Raise ``ValueError`` if the arrays are inconsistent with each other or with ``spec``."""
        n = len(self)
        for name in ("kind", "facts", "observed", "object_id", "label", "support", "episode", "service"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"stream {self.stream_id}: {name} must have shape ({n},)")
        if self.values.shape != (n, len(spec.values)):
            raise ValueError(f"stream {self.stream_id}: values must have shape ({n}, {len(spec.values)})")
        if n and (np.any(np.diff(self.time) < 0) or self.time[0] < 0):
            raise ValueError(f"stream {self.stream_id}: times must be non-negative and non-decreasing")
        if np.any((self.kind < 0) | (self.kind >= len(spec.kinds))):
            raise ValueError(f"stream {self.stream_id}: kind out of range")
        if np.any(self.facts >> len(spec.facts)):
            raise ValueError(f"stream {self.stream_id}: facts use bits beyond the scope's vocabulary")
        if np.any(self.facts[~self.observed] != 0):
            raise ValueError(f"stream {self.stream_id}: unobserved events carry no facts")
        if not np.all(np.isfinite(self.values)) or np.any((self.values < 0) | (self.values > 1)):
            raise ValueError(f"stream {self.stream_id}: values must lie in [0, 1]")
        if not np.all(np.isin(self.label, (0, 1))):
            raise ValueError(f"stream {self.stream_id}: labels must be 0 or 1")

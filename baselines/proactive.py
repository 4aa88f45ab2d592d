"""Hand-written policies for ``ProactiveStream-v0`` and ``-v1`` (ProactMem's memory-layer comparison).

Every policy reads only the observation (``predict`` takes one ``(d,)`` or a batch ``(n, d)``): in the depth
sub-step it returns its memory depth, in the decide sub-step its rule on what that depth retrieved. The rules are
the deterministic stand-in for the paper's shared decision prompt: intervene when the current event supports a
service (the scope's public ``evidence`` predicate) or when history does — from event memory or trajectories, a
behaviour that on most previous days happened about now (Sports, ``pending``) or in the last two hours (Home and
Code, ``deviated``) and has not happened today; from regularity memory, a matched *active* regularity in the scope's
actionable occurrence state. The memory ablations (*w/o replay gate*, *w/o trajectory validation*) are the
full-hierarchy rule on an environment built with ``memory="no_replay_gate"`` / ``"no_validation"``; their
``env_kwargs`` say so. On v1 every rule also intervenes on a follow-up whose anchor a consulted layer holds
(``ev_carried``; with trajectories, ``tr_carried``); on v0 those features do not exist and the rules are v0's.
"""

from __future__ import annotations

import numpy as np

from membudget.envs.proactive.env import F, N_BEHAVIOURS, N_FEATURES
from membudget.envs.proactive.env_v1 import FEATURE_NAMES_V1, N_FEATURES_V1

F_V1 = {name: i for i, name in enumerate(FEATURE_NAMES_V1)}

USUAL_THRESHOLD = 0.6
"""Share of the previous days (event memory) or of the cycle's daily records (trajectories) on which a behaviour
must have happened for the routine proxy to fire."""
CORROBORATION = 0.3
"""ProactiveStream-v1: share of the last seven days' validated records on which a matched regularity's behaviour
must have happened for the full-hierarchy rule to act on the regularity (chosen on development streams 0-9)."""


class _Rule:
    """Depth ``depth`` in the depth sub-step, :meth:`decide` in the decide sub-step."""

    depth = 0
    env_kwargs: dict = {}

    def decide(self, obs: np.ndarray) -> bool:
        raise NotImplementedError

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        obs = np.asarray(observation, dtype=np.float32)
        if obs.ndim not in (1, 2) or obs.shape[-1] not in (N_FEATURES, N_FEATURES_V1):
            raise ValueError(f"observation must have shape (d,) or (n, d) with d = {N_FEATURES} (v0) or "
                             f"{N_FEATURES_V1} (v1), got {obs.shape}")
        rows = obs.reshape(-1, obs.shape[-1])
        actions = np.array([int(self.decide(o)) if o[F["phase"]] else self.depth for o in rows], dtype=np.int64)
        return (actions[0] if obs.ndim == 1 else actions), state

    def __repr__(self):
        return f"{type(self).__name__}()"


def _routine_proxy(obs, prefix: str, threshold: float = USUAL_THRESHOLD) -> bool:
    """A behaviour usually happens about now / has usually happened by now on the days of one layer, and not today."""
    window = "usual_now" if obs[F["scope_sports"]] else "usual_before"
    for b in range(N_BEHAVIOURS):
        if obs[F[f"{prefix}_{window}{b}"]] >= threshold and not obs[F[f"ev_today{b}"]]:
            return True
    return False


def _carried(obs, layers) -> bool:
    """ProactiveStream-v1: the current follow-up's anchor is in one of the consulted ``layers`` (never on v0)."""
    return obs.shape[-1] == N_FEATURES_V1 and any(obs[F_V1[f"{layer}_carried"]] for layer in layers)


class Never(_Rule):
    """Never intervene (event memory only)."""

    def decide(self, obs):
        return False


class Always(_Rule):
    """Propose an intervention at every event; intervention control removes the duplicates."""

    def decide(self, obs):
        return True


class EventOnly(_Rule):
    """Current evidence, or the routine proxy over the events in the 72-hour context."""

    def decide(self, obs):
        return (bool(obs[F["evidence"]]) or _carried(obs, ("ev",))
                or (bool(obs[F["feasible"]]) and _routine_proxy(obs, "ev")))


class EventTrajectory(_Rule):
    """Current evidence, or the routine proxy over the longer history: the cycle's validated daily trajectories once
    they cover at least three days (the days event memory holds), event memory before that."""

    depth = 1

    def decide(self, obs):
        if obs[F["evidence"]] or _carried(obs, ("ev", "tr")):
            return True
        layer = "tr" if obs[F["tr_days"]] * 7 >= 3 - 1e-6 else "ev"
        return bool(obs[F["feasible"]]) and _routine_proxy(obs, layer)


SOURCES = ("evidence", "carried", "routine")
"""What can make the full-hierarchy rule intervene: current evidence, a carried anchor (v1), a regularity."""


class FullHierarchy(_Rule):
    """ProactMem's rule: current evidence, or an applicable active regularity in an actionable occurrence state. On
    v1, whose trajectory view holds the last seven days, the contextual assessment also asks the trajectories to
    corroborate the regularity (its behaviour on at least :data:`CORROBORATION` of those days), and a follow-up
    whose anchor a layer holds is acted on. ``sources`` (default all of :data:`SOURCES`) restricts the rule to
    interventions that those sources fire."""

    depth = 2

    def __init__(self, sources=SOURCES):
        unknown = set(sources) - set(SOURCES)
        if unknown:
            raise ValueError(f"unknown sources {sorted(unknown)}; choose among {SOURCES}")
        self.sources = tuple(s for s in SOURCES if s in sources)

    def __repr__(self):
        extra = "" if self.sources == SOURCES else f"sources={self.sources}"
        return f"{type(self).__name__}({extra})"

    def source(self, obs):
        """What makes the rule intervene: ``"evidence"``, ``"carried"`` (v1), ``"routine"``, or None (abstain)."""
        if obs[F["evidence"]]:
            return "evidence"
        if _carried(obs, ("ev", "tr")):
            return "carried"
        routine = bool(obs[F["feasible"]]) and bool(obs[F["rg_actionable"]])
        if obs.shape[-1] == N_FEATURES_V1:
            routine = routine and _routine_proxy(obs, "tr", CORROBORATION)
        return "routine" if routine else None

    def decide(self, obs):
        return self.source(obs) in self.sources


class WithoutReplayGate(FullHierarchy):
    """The full-hierarchy rule with regularities admitted without replay thresholds (ProactMem Table 4)."""

    env_kwargs = {"memory": "no_replay_gate"}


class WithoutValidation(FullHierarchy):
    """The full-hierarchy rule with trajectory facts kept unchecked (ProactMem Table 4)."""

    env_kwargs = {"memory": "no_validation"}


POLICIES = {cls.__name__: cls for cls in (Never, Always, EventOnly, EventTrajectory, FullHierarchy,
                                          WithoutReplayGate, WithoutValidation)}

__all__ = ["CORROBORATION", "POLICIES", "SOURCES", "USUAL_THRESHOLD", *POLICIES]

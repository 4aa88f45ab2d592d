"""Hand-written policies for ``ProactiveStream-v0`` (ProactMem's memory-layer comparison).

Every policy reads only the observation (``predict`` takes one ``(d,)`` or a batch ``(n, d)``): in the depth
sub-step it returns its memory depth, in the decide sub-step its rule on what that depth retrieved. The rules are
the deterministic stand-in for the paper's shared decision prompt: intervene when the current event supports a
service (the scope's public ``evidence`` predicate) or when history does — from event memory or trajectories, a
behaviour that on most previous days happened about now (Sports, ``pending``) or in the last two hours (Home and
Code, ``deviated``) and has not happened today; from regularity memory, a matched *active* regularity in the scope's
actionable occurrence state. The memory ablations (*w/o replay gate*, *w/o trajectory validation*) are the
full-hierarchy rule on an environment built with ``memory="no_replay_gate"`` / ``"no_validation"``; their
``env_kwargs`` say so.
"""

from __future__ import annotations

import numpy as np

from membudget.envs.proactive.env import F, N_BEHAVIOURS

USUAL_THRESHOLD = 0.6
"""Share of the previous days (event memory) or of the cycle's daily records (trajectories) on which a behaviour
must have happened for the routine proxy to fire."""


class _Rule:
    """Depth ``depth`` in the depth sub-step, :meth:`decide` in the decide sub-step."""

    depth = 0
    env_kwargs: dict = {}

    def decide(self, obs: np.ndarray) -> bool:
        raise NotImplementedError

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        obs = np.asarray(observation, dtype=np.float32)
        if obs.ndim not in (1, 2) or obs.shape[-1] != len(F):
            raise ValueError(f"observation must have shape ({len(F)},) or (n, {len(F)}), got {obs.shape}")
        rows = obs.reshape(-1, obs.shape[-1])
        actions = np.array([int(self.decide(o)) if o[F["phase"]] else self.depth for o in rows], dtype=np.int64)
        return (actions[0] if obs.ndim == 1 else actions), state

    def __repr__(self):
        return f"{type(self).__name__}()"


def _routine_proxy(obs, prefix: str) -> bool:
    """A behaviour usually happens about now / has usually happened by now on the days of one layer, and not today."""
    window = "usual_now" if obs[F["scope_sports"]] else "usual_before"
    for b in range(N_BEHAVIOURS):
        if obs[F[f"{prefix}_{window}{b}"]] >= USUAL_THRESHOLD and not obs[F[f"ev_today{b}"]]:
            return True
    return False


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
        return bool(obs[F["evidence"]]) or (bool(obs[F["feasible"]]) and _routine_proxy(obs, "ev"))


class EventTrajectory(_Rule):
    """Current evidence, or the routine proxy over the longer history: the cycle's validated daily trajectories once
    they cover at least three days (the days event memory holds), event memory before that."""

    depth = 1

    def decide(self, obs):
        if obs[F["evidence"]]:
            return True
        layer = "tr" if obs[F["tr_days"]] * 7 >= 3 - 1e-6 else "ev"
        return bool(obs[F["feasible"]]) and _routine_proxy(obs, layer)


class FullHierarchy(_Rule):
    """ProactMem's rule: current evidence, or an applicable active regularity in an actionable occurrence state."""

    depth = 2

    def decide(self, obs):
        return bool(obs[F["evidence"]]) or (bool(obs[F["feasible"]]) and bool(obs[F["rg_actionable"]]))


class WithoutReplayGate(FullHierarchy):
    """The full-hierarchy rule with regularities admitted without replay thresholds (ProactMem Table 4)."""

    env_kwargs = {"memory": "no_replay_gate"}


class WithoutValidation(FullHierarchy):
    """The full-hierarchy rule with trajectory facts kept unchecked (ProactMem Table 4)."""

    env_kwargs = {"memory": "no_validation"}


POLICIES = {cls.__name__: cls for cls in (Never, Always, EventOnly, EventTrajectory, FullHierarchy,
                                          WithoutReplayGate, WithoutValidation)}

__all__ = ["POLICIES", "USUAL_THRESHOLD", *POLICIES]

"""``membudget/ProactiveStream-v1``: ProactiveStream-v0's task on the v1 world, whose carried opportunities need
evidence beyond the event window that the daily trajectories hold (ProactMem)."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from .env import FEATURE_NAMES, N_FEATURES, ProactiveStreamEnv
from .world_v1 import CARRIED_FACTS, check_scope_v1, generate_stream_v1

FEATURE_NAMES_V1 = FEATURE_NAMES + ("ev_carried", "tr_carried")
"""v0's features, then whether the current event is a follow-up whose entity's anchor the event layer holds, and
whether the trajectory layer does (decide sub-step, the layers consulted; 0 otherwise)."""
N_FEATURES_V1 = len(FEATURE_NAMES_V1)


class ProactiveStreamV1Env(ProactiveStreamEnv):
    """
    ## Description

    ProactiveStream-v0's proactive assistant (per event: memory depth, then intervene or abstain; ProactMem) on the
    v1 world (:mod:`membudget.envs.proactive.world_v1`): besides v0's routine (history) and current-evidence
    opportunities, each scope has **carried opportunities** — a follow-up event (Sports: a check-in prompt; Home:
    the medication cabinet opened; Code: an update pushed to a pull request) is an opportunity when an anchor of
    the same entity (a reported setback, a carer's visit that changed the care plan, changes requested on the pull
    request) happened within the last seven days, mostly beyond the 72-hour / 100-event window. The
    source-validated daily trajectories carry the anchors: v1's trajectory view ``W_t`` is the accepted records of
    the last seven completed days (rolling, :class:`~membudget.envs.proactive.memory.ProactiveMemory`'s
    ``rolling_view``; v0: the current cycle's, 0-6 records), so a completed day's activities and changed
    circumstances stay in view for a week. Regularities (replay-gated) are v0's, on top.

    ## Action Space

    ``Discrete(3)`` in both sub-steps, as in v0: depth 0 events, 1 + trajectories, 2 + regularities; decide 0
    abstain, 1 immediate, 2 scheduled.

    ## Observation Space

    ``Box(0, 1, (127,), float32)`` (``N_FEATURES_V1``; names in ``FEATURE_NAMES_V1``): v0's 125 features, then
    ``ev_carried`` (decide sub-step, any depth: the current event is a follow-up and an anchor of its entity is
    among the events in the event window) and ``tr_carried`` (decide sub-step, depth ≥ 1: ... among the events
    cited by the accepted segments of the trajectory view). The two appended facts of each scope are fact bits 20-21
    (Sports), 13-14 (Home) and 18-19 (Code).

    ## Rewards

    As in v0: depth sub-step ``−token_weight · tokens``; decide sub-step ``+1`` on an opportunity, ``−intrusion_penalty``
    on a negative, 0 for an abstention.

    ## Starting State

    ``reset(seed=s)`` draws v1 stream ``s`` of the scope; ``options={"stream": Stream}`` replays a given stream
    (of the v1 vocabulary).

    ## Episode End

    As in v0: terminates after the decision on the last event, never truncates; the same ``info`` keys after
    reset and either sub-step: ``event``, ``sub_step``, ``depth``, ``tokens``, ``downgraded``, ``proposed``,
    ``mode``, ``service``, ``decision``, ``suppressed``, ``label``; ``info["episode_metrics"]`` at the end.

    ## Arguments

    As in v0: ``scope``, ``n_days``, ``memory`` (``"full"``, ``"no_replay_gate"``, ``"no_validation"``),
    ``intrusion_penalty`` (0.5), ``token_weight`` (2e-6), ``token_budget``, ``hallucination_rate`` (0.1),
    ``render_mode``.

    ## Version History

    - v1: carried opportunities (anchors and follow-ups per entity, two facts appended per scope), a rolling
      seven-day trajectory view, the two ``*_carried`` features, Sports' routines skipped 1.6 times as often
      (``SPORTS_SKIP_V1``), and Code's routines as review, triage and merge sessions of 2-3 hours skipped at 0.25
      (``CODE_TEMPLATES_V1``, ``CODE_SKIP_V1``), a maintainer's review no longer also a ``response=maintainer`` and
      ``kind=pr_review`` among the proposer's triggers (``TRIGGERS_V1``).
    - v0: initial version (``membudget/ProactiveStream-v0``, kept unchanged).
    """

    _name = "ProactiveStream-v1"
    _scopes = staticmethod(check_scope_v1)
    _generate = staticmethod(generate_stream_v1)
    _memory_options = {"rolling_view": True}

    def __init__(self, scope="sports", n_days=None, memory="full", intrusion_penalty=0.5, token_weight=2e-6,
                 token_budget=None, hallucination_rate=0.1, render_mode=None):
        super().__init__(scope=scope, n_days=n_days, memory=memory, intrusion_penalty=intrusion_penalty,
                         token_weight=token_weight, token_budget=token_budget,
                         hallucination_rate=hallucination_rate, render_mode=render_mode)
        self.observation_space = spaces.Box(0.0, 1.0, (N_FEATURES_V1,), dtype=np.float32)

    def _precompute(self):
        super()._precompute()
        n = len(self.stream)
        self._static = np.concatenate([self._static, np.zeros((n, 2), np.float32)], axis=1)
        self._carried = np.zeros((n, 2), np.float32)
        self._record_anchors = {}
        anchor, follow = (self.scope_spec.bit(f) for f in CARRIED_FACTS[self.scope])
        self._is_anchor = (self.stream.facts & anchor) != 0
        self._follow_bit = follow

    def _anchors(self, record) -> set:
        """The entities whose anchor the record's accepted segments cite."""
        key = id(record)
        if key not in self._record_anchors:
            s = self.stream
            cited = {c for segment in record.segments for c in segment.citations}
            self._record_anchors[key] = (record, {int(s.object_id[c]) for c in cited
                                                  if self._is_anchor[c] and s.observed[c]})
        return self._record_anchors[key][1]

    def _extend(self):
        t0 = self._ready
        super()._extend()
        s, trace, anchor = self.stream, self._memory.advance(self._ready - 1), self._is_anchor
        for t in np.flatnonzero((s.facts[t0:self._ready] & self._follow_bit) != 0).tolist():
            t += t0
            lo, entity = trace.event_lo[t], s.object_id[t]
            self._carried[t, 0] = bool(np.any(anchor[lo:t] & (s.object_id[lo:t] == entity)))
            self._carried[t, 1] = any(entity in self._anchors(r) for r in trace.cycle_records[t])

    def _obs(self) -> np.ndarray:
        obs = super()._obs()                           # the static row carries two zero columns for these
        if self._phase == 1 and self._depth >= 0:
            k = 1 + (self._depth >= 1)
            obs[N_FEATURES:N_FEATURES + k] = self._carried[min(self._t, self._n - 1), :k]
        return obs


__all__ = ["FEATURE_NAMES_V1", "N_FEATURES_V1", "ProactiveStreamV1Env"]

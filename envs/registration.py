"""All environment ids, registered in one place with string entry points."""

import gymnasium as gym

ENTRY_POINTS = {
    "membudget/PMWeek-v0": ("membudget.envs.pm.env:PMWeekEnv", "membudget.envs.pm.vector:PMWeekVectorEnv"),
    "membudget/ReplayStream-v0": ("membudget.envs.replay.env:ReplayStreamEnv", None),
    "membudget/ReplayStream-v1": ("membudget.envs.replay.env_v1:ReplayStreamV1Env", None),
    "membudget/TierRouting-v0": ("membudget.envs.tiers.env:TierRoutingEnv", None),
    "membudget/ProactiveStream-v0": ("membudget.envs.proactive.env:ProactiveStreamEnv", None),
    "membudget/ProactiveStream-v1": ("membudget.envs.proactive.env_v1:ProactiveStreamV1Env", None),
    "membudget/PMWeekFlat-v0": ("membudget.envs.pm.flat:make_flat", None),
    "membudget/ConversationPM-v1": ("membudget.envs.conversation.env:ConversationPMEnv", None),
    "membudget/ConversationPM-v0": ("membudget.envs.conversation.env:ConversationPMv0Env", None),
}
"""``id: (entry point, native vector entry point or None)``."""
ENV_IDS = tuple(ENTRY_POINTS)
VARIANTS = {"membudget/PMWeekFlat-v0": "membudget/PMWeek-v0",
            "membudget/ConversationPM-v0": "membudget/ConversationPM-v1"}
"""Ids that are another id's environment in another form or an earlier world (documented on its page, in its
Version History): ``variant: base id``."""


def register_envs() -> None:
    for env_id, (entry_point, vector_entry_point) in ENTRY_POINTS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, vector_entry_point=vector_entry_point)

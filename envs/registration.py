"""All environment ids, registered in one place with string entry points."""

import gymnasium as gym

ENV_IDS = ("membudget/PMWeek-v0", "membudget/ReplayStream-v0", "membudget/TierRouting-v0",
           "membudget/ProactiveStream-v0")


def register_envs() -> None:
    if "membudget/PMWeek-v0" not in gym.registry:
        gym.register(
            id="membudget/PMWeek-v0",
            entry_point="membudget.envs.pm.env:PMWeekEnv",
            vector_entry_point="membudget.envs.pm.vector:PMWeekVectorEnv",
        )
    if "membudget/ReplayStream-v0" not in gym.registry:
        gym.register(
            id="membudget/ReplayStream-v0",
            entry_point="membudget.envs.replay.env:ReplayStreamEnv",
        )
    if "membudget/TierRouting-v0" not in gym.registry:
        gym.register(
            id="membudget/TierRouting-v0",
            entry_point="membudget.envs.tiers.env:TierRoutingEnv",
        )
    if "membudget/ProactiveStream-v0" not in gym.registry:
        gym.register(
            id="membudget/ProactiveStream-v0",
            entry_point="membudget.envs.proactive.env:ProactiveStreamEnv",
        )

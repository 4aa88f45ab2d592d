"""ProactiveStream-v0 streams and trajectories are pinned: a faster generator, memory trace or step must reproduce,
for the same seed, exactly the streams (every public and reference field, the latent routines), the memory trace
and the rollouts (observations, rewards, infos) that the reference implementation produced. The digests below
were recorded with the implementation of commit ea7fc34 (before the speed work) and must never be regenerated to
make a change pass."""

import hashlib

import numpy as np
import pytest
from membudget.envs.proactive import ProactiveStreamEnv, generate_stream

PINNED = {
    "stream": {
        ('sports', 0, None): "eb426520c080343c673324c14d46c4f74d64decb39c459629bf41beb3744da0a",
        ('sports', 0, 14): "30e0662ec172191b3908e4b76df694a9de5cd302f3ad2d4fefc101db75faeffd",
        ('sports', 1, None): "5089f2f1c709bdb21ff04b3ef24dec844ca8bafe739f711b61391b1c02663691",
        ('sports', 1, 14): "d5a64dfa7951c95ccc886707fe756e6f38aa0cf4a35832b5cf6c3d5d3935abc1",
        ('sports', 7, None): "d42deade5b2b1c3db27ba1c2767b1a5c66b657c6a90b74b551c048b7eeab928e",
        ('sports', 7, 14): "46c6b20822bbad9481040a142e3567a64706e2c63280597cb2d880451cdbd682",
        ('sports', 123, None): "d7f622f4012f4276b1ad898a2cbf836046d6fb0b903bb2ba41adcfe5780b6d88",
        ('sports', 123, 14): "123ced6aafd6dfd9d1e8a297fa8e8fab2cf237d7fbe2d4efe425bb8059b80eba",
        ('home', 0, None): "159a2a5a291917c27fd6dbb5c0697a7ef54d05fa663a16e34027d88fa84c4f7a",
        ('home', 0, 14): "9cca5aeee3ef922a2ae0794471cb5bf00cc8a544b72fbc42c6ce6f37027c03eb",
        ('home', 1, None): "ff6f5ea0fb2bb2670e45f631d1c35f230799ba11c8b3426bb7b0307fddf3592b",
        ('home', 1, 14): "9eb9ba3e7fcff23b97ea05d9a997ddba1edb07fae4d90481251e9547c5e40b61",
        ('home', 7, None): "28cd58976fd8dca7e650da805d3c400ae6e797236bca56b4cd20bf3dc8498f56",
        ('home', 7, 14): "26ef554b23c66ccd92284cac836a7d4e2460b3e39ccfa5f50ba394e99f42134c",
        ('home', 123, None): "56a80ba503d973fbac4b3867e6c8421949aacc3bcabf0d037421d9c94d31cc4e",
        ('home', 123, 14): "5ef8e8d126e64c9b30f88e10d2b82f63690c413c23c5a00a0b7aee6bb549c61b",
        ('code', 0, None): "d4cf193cb071e7daf1728d3de0d6807eebcbdb42697a1bd0fc829ff0b432432f",
        ('code', 0, 14): "baddc63f6da994c809eec925d9433244b33aecc875c1d40a5853e481ae8a084d",
        ('code', 1, None): "d9043ebb63f13570787c1e1d1b7bc9c2cffd7a3bae660bb2bdc5b828871107d4",
        ('code', 1, 14): "9e1946021ec6547e0b34edd6642d8930348f44e9f0f3d531f28de1110ff1bb32",
        ('code', 7, None): "69c6e0410fa72101a5929e42c6af6d394f94a2736fd2baae1bdfc45f5131723c",
        ('code', 7, 14): "21d523be2640faec9de1bc02bc7caceb29a46f00b2729a8dde20dbe904bbb11f",
        ('code', 123, None): "803315e2f15ae13e2ab36f97f990c95d6573e9ee65fc29edafc4055cc62b097c",
        ('code', 123, 14): "cb5e831a68bea910346a320b3c7787c29421f570a77ad4d05c20ec76bbc9a31d",
        ('code', 5, 200): "eb8d4a4b6d29681ade8296bc89e289455b4b02f06c2835cc661aa2cebdab9c5c",
        ('sports', 9, 150): "b6eb40cf716db6944ea4fe401ce3d24c76145202151a96d573bca95488ad7989",
    },
    "rollout": {
        ('sports', 3, 'full', None): "ae64d5770d283ad52724000eea1ce018e93020a784f7d041d39f7e7f82b59a95",
        ('home', 4, 'full', None): "80f93916ff2c52dc90b366fa8c7ce80ca0ead4fadee7bad24a0e566516b2b557",
        ('code', 11, 'full', None): "f7aca8311e0733c1dd082f4fca7f4314a83d78e6bd8924572b3f6cb256d4f95b",
        ('sports', 8, 'no_replay_gate', None): "82a6680584fdd73f356b853f245fa77328ba1e893ba097f083f30120057ef599",
        ('home', 2, 'no_validation', None): "81a35b792414eca11aec36f3ab4ca5d55c39d6a93f4b62cdfd2549663b66b9cd",
        ('code', 6, 'no_replay_gate', 30000): "d654721dd75014629f84afa0d92ea915e234304f6464c0579bc6085f74d19e17",
        ('home', 12, 'full', 50000): "227d13c8f15b8e1b967d4f4a7b9b97c9d67b9f3e46ab39723ef75ebd8100ddb3",
    },
}


def _update(h, value):
    h.update(np.ascontiguousarray(value).tobytes() if isinstance(value, np.ndarray) else repr(value).encode())


def _plain(info):
    """Info items with numpy scalars as Python numbers (a digest of values, not of their Python types)."""
    return sorted((k, _plain(v) if isinstance(v, dict) else np.asarray(v).item()) for k, v in info.items())


def stream_digest(stream) -> str:
    h = hashlib.sha256()
    for name in ("time", "kind", "facts", "observed", "values", "object_id", "label", "support", "episode",
                 "service"):
        array = getattr(stream, name)
        _update(h, (name, str(array.dtype), array.shape))
        _update(h, array)
    _update(h, stream.routines)
    return h.hexdigest()


def rollout_digest(scope, seed, memory, token_budget, n_days=None) -> str:
    """Reset with ``seed`` and play uniformly random actions (a fixed generator) to the end of the stream."""
    env = ProactiveStreamEnv(scope=scope, memory=memory, token_budget=token_budget, n_days=n_days)
    h = hashlib.sha256()
    obs, info = env.reset(seed=seed)
    _update(h, obs)
    _update(h, _plain(info))
    actions = np.random.default_rng(seed + 1).integers(0, 3, size=2 * len(env.stream))
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(int(a))
        _update(h, obs)
        _update(h, (float(reward), terminated, truncated, _plain(info)))
        if terminated:
            break
    assert terminated
    _update(h, stream_digest(env.stream))
    return h.hexdigest()


STREAM_CASES = [(scope, seed, n_days) for scope in ("sports", "home", "code") for seed in (0, 1, 7, 123)
                for n_days in (None, 14)] + [("code", 5, 200), ("sports", 9, 150)]
ROLLOUT_CASES = [("sports", 3, "full", None), ("home", 4, "full", None), ("code", 11, "full", None),
                 ("sports", 8, "no_replay_gate", None), ("home", 2, "no_validation", None),
                 ("code", 6, "no_replay_gate", 30_000), ("home", 12, "full", 50_000)]


@pytest.mark.parametrize("scope, seed, n_days", STREAM_CASES)
def test_streams_are_pinned(scope, seed, n_days):
    assert stream_digest(generate_stream(seed, scope=scope, n_days=n_days)) == PINNED["stream"][(scope, seed, n_days)]


@pytest.mark.parametrize("scope, seed, memory, token_budget", ROLLOUT_CASES)
def test_rollouts_are_pinned(scope, seed, memory, token_budget):
    assert rollout_digest(scope, seed, memory, token_budget) == PINNED["rollout"][(scope, seed, memory, token_budget)]

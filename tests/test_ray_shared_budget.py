"""The shared-quota study on the Ray backend (a simulated cluster; skipped where Ray is not installed)."""

import numpy as np


def test_ray_shared_quota_equals_local(cluster):
    from membudget.agents import StaticGate
    from membudget.studies.execution import RayExecutor
    from membudget.studies.shared_quota import measure
    from membudget.teachers import build_label_dataset

    static = StaticGate().fit(build_label_dataset(range(2000, 2005), []))
    kw = {"timesteps": 256, "agent_counts": (2, 3), "levels": ("B10",), "progress": lambda m: None,
          "bases": (6000,), "static": static}
    np.testing.assert_equal(measure(**kw), measure(**kw, executor=RayExecutor()))

import os
import sys

import pytest

# helpers shared between test modules (tests/pm_tiny.py) import by name under --import-mode=importlib
sys.path.insert(0, os.path.dirname(__file__))

if os.environ.get("PYTEST_XDIST_WORKER"):
    # the workers share the cores: one torch (OpenMP) thread each, set before any test module imports torch
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's addopts): one worker per core this process may use, at most 4 (each worker pays
    its own start-up: torch's import, numba's cache loads)."""
    return max(1, min(4, len(os.sched_getaffinity(0))))


@pytest.fixture(autouse=True, scope="session")
def _sb3_default_logs_in_one_pytest_folder(tmp_path_factory):
    """SB3's default logger makes an empty ``SB3-<date>`` folder in the temporary directory at every ``learn()``;
    the tests that build SB3 models directly, as users do, send it to one pytest folder (``SB3_LOGDIR``)."""
    before = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3-default-logs"))
    yield
    if before is None:
        os.environ.pop("SB3_LOGDIR", None)
    else:
        os.environ["SB3_LOGDIR"] = before


@pytest.fixture(scope="session")
def cluster():
    """A simulated Ray cluster of three 1-CPU nodes, one for the whole session (skipped where Ray is not installed):
    its start and its workers' imports are paid once, not per test module."""
    Cluster = pytest.importorskip("ray.cluster_utils").Cluster
    import ray

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(2):
        c.add_node(num_cpus=1)
    ray.init(address=c.address, log_to_driver=False)
    c.wait_for_nodes()
    yield c
    ray.shutdown()
    c.shutdown()


def pytest_collection_modifyitems(config, items):
    """Leave the tests marked ``slow`` out of a plain run; ``-m`` or a test named by
    its node id (``path::name``) runs them: ``-m slow`` alone, ``-m "slow or not slow"`` with the rest."""
    if config.option.markexpr or any("::" in str(a) for a in config.args):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture
def tiny_labels():
    """A valid three-row ``LabelDataset`` at one budget (B5 = 10 queries), every array zero: for checks of arguments
    and of array shapes."""
    import numpy as np

    from membudget.teachers import LabelDataset

    return LabelDataset(features=np.zeros((3, 27), np.float32), week=np.zeros(3, np.int64),
                        step=np.zeros(3, np.int64), resource=np.zeros(3, np.int64), outcome=np.zeros(3, np.int8),
                        due=np.zeros(3, np.int8), budgets=np.array([10]), budget_names=np.array(["B5"]),
                        myopic=np.zeros((1, 3), np.int8), sequential=np.zeros((1, 3), np.int8),
                        budget_features_myopic=np.zeros((1, 3, 9), np.float32),
                        budget_features_sequential=np.zeros((1, 3, 9), np.float32), meta={})

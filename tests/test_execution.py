"""Execution backends (studies/execution.py): item-order results, checkpoints and resume, and — where Ray is
installed — equality of the Ray backend with the local one on a simulated 3-node cluster, a worker killed during
a run, and resume from a checkpoint written by another backend."""

import dataclasses
import functools
import os

import numpy as np
import pytest

from membudget.studies.execution import Executor, chunks, task_id
from membudget.teachers import build_label_dataset


def _logged_square(log_dir, fail_on, item):
    """item**2, appending one line per call to ``log_dir/<item>``; raises on ``fail_on`` while the file
    ``log_dir/FAIL`` exists, and ends its own process (a killed worker) on its first call for ``-item``."""
    with open(os.path.join(log_dir, str(abs(item))), "a") as f:
        f.write("x")
    if item == fail_on and os.path.exists(os.path.join(log_dir, "FAIL")):
        raise RuntimeError("interrupted")
    if item < 0 and os.path.getsize(os.path.join(log_dir, str(abs(item)))) == 1:
        os._exit(1)
    return abs(item) ** 2


def _read(path):
    with open(path) as f:
        return f.read()


def _calls(log_dir, item):
    path = os.path.join(log_dir, str(abs(item)))
    return os.path.getsize(path) if os.path.exists(path) else 0


def test_chunks_cover_the_range_in_order():
    assert chunks(range(5), 2) == [(0, 1), (2, 3), (4,)]
    assert chunks(range(3), 0) == [(0, 1, 2)]
    assert chunks([7], 4) == [(7,)]


def test_task_id_depends_on_function_arguments_and_item():
    f = functools.partial(_logged_square, "/a", 3)
    assert task_id(f, 1) == task_id(functools.partial(_logged_square, "/a", 3), 1)
    assert task_id(f, 1) != task_id(f, 2)
    assert task_id(f, 1) != task_id(functools.partial(_logged_square, "/a", 4), 1)


def test_task_id_is_the_same_in_every_process():
    import subprocess
    import sys

    code = ("import functools, numpy as np; from membudget.studies.execution import task_id; "
            "from membudget.envs.pm import WorldConfig; "
            "a = np.arange(5.0); print(task_id(functools.partial(dict, names={'static', 'due', 'boosted'}, "
            "world=WorldConfig(), arrays=[a, a]), ('Static', 'B10', (9000, 9001))))")
    ids = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(ids) == 1  # set order (hash seed) and object sharing do not change it
    a = np.arange(5.0)
    assert task_id(functools.partial(dict, arrays=[a, a]), 0) == task_id(
        functools.partial(dict, arrays=[a, a.copy()]), 0)


def test_local_checkpoints_resume_after_an_interruption(tmp_path):
    log, ckpt = tmp_path / "log", tmp_path / "ckpt"
    log.mkdir()
    (log / "FAIL").touch()
    fn = functools.partial(_logged_square, str(log), 3)
    with pytest.raises(RuntimeError, match="interrupted"):
        Executor(str(ckpt)).map(fn, range(6))
    assert len(list(ckpt.glob("*.pkl"))) == 3  # items 0, 1, 2 finished before the failure
    (log / "FAIL").unlink()
    ex = Executor(str(ckpt))
    assert ex.map(fn, range(6)) == [0, 1, 4, 9, 16, 25]
    assert (ex.loaded, ex.computed) == (3, 3)
    assert [_calls(log, i) for i in range(6)] == [1, 1, 1, 2, 1, 1]  # only the interrupted task ran twice
    assert Executor(str(ckpt)).map(fn, [5, 0]) == [25, 0]  # loaded in the order asked
    assert [_calls(log, i) for i in range(6)] == [1, 1, 1, 2, 1, 1]


def test_a_checkpoint_directory_of_another_version_is_refused_before_any_work(tmp_path, monkeypatch):
    import membudget
    from membudget.studies.execution import make_executor

    log, ckpt = tmp_path / "log", tmp_path / "ckpt"
    log.mkdir()
    fn = functools.partial(_logged_square, str(log), None)
    assert Executor(str(ckpt)).map(fn, range(3)) == [0, 1, 4]
    assert (ckpt / "VERSION").read_text().strip() == membudget.__version__
    monkeypatch.setattr(membudget, "__version__", "99.0")  # an upgrade: results of other code in the directory
    with pytest.raises(ValueError, match=r"written by membudget .*this is 99\.0.*another --checkpoint-dir"):
        make_executor("local", checkpoint_dir=str(ckpt))
    assert [_calls(log, i) for i in range(3)] == [1, 1, 1]
    fresh = tmp_path / "fresh"
    ex = Executor(str(fresh))
    assert ex.map(fn, range(3)) == [0, 1, 4] and (ex.loaded, ex.computed) == (0, 3)
    assert (fresh / "VERSION").read_text().strip() == "99.0"


def test_the_version_file_is_written_whole_and_a_bad_directory_is_refused_in_one_line(tmp_path, monkeypatch):
    import os
    import threading

    import membudget
    from membudget.studies.execution import check_checkpoint_dir

    # many first users of one new directory at once: each reads a complete VERSION (never an empty one)
    errors = []

    def first_use(d):
        try:
            check_checkpoint_dir(str(d))
        except Exception as error:  # noqa: BLE001 - collected for the assertion
            errors.append(error)

    for k in range(20):
        threads = [threading.Thread(target=first_use, args=(tmp_path / f"new{k}",)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert all((tmp_path / f"new{k}" / "VERSION").read_text() == membudget.__version__ + "\n" for k in range(20))
    assert not [n for k in range(20) for n in os.listdir(tmp_path / f"new{k}") if n != "VERSION"]  # no probe left

    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(tmp_path / "new0" / "VERSION").st_mode & 0o777 == 0o666 & ~umask   # not private to this user

    def no_hard_links(src, dst):
        raise PermissionError(1, "Operation not permitted")   # as on FAT and some network file systems

    monkeypatch.setattr(os, "link", no_hard_links)
    check_checkpoint_dir(str(tmp_path / "no-links"))
    check_checkpoint_dir(str(tmp_path / "no-links"))   # and read back
    assert (tmp_path / "no-links" / "VERSION").read_text() == membudget.__version__ + "\n"
    monkeypatch.undo()

    (tmp_path / "a-file").write_text("")
    with pytest.raises(ValueError, match="cannot be written"):
        check_checkpoint_dir(str(tmp_path / "a-file" / "ckpt"))
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "VERSION").write_bytes(b"\x00\x01" * 100)
    with pytest.raises(ValueError, match=r"written by membudget b'\\x00\\x01"):
        check_checkpoint_dir(str(garbage))
    older = tmp_path / "older"
    older.mkdir()
    (older / "0123abcd.pkl").write_bytes(b"")
    with pytest.warns(RuntimeWarning, match="holds 1 checkpoints and no VERSION file"):
        check_checkpoint_dir(str(older))
    assert (older / "VERSION").read_text().strip() == membudget.__version__


def test_the_training_command_refuses_another_version_s_checkpoints_in_one_line(tmp_path, monkeypatch, capsys):
    import membudget
    from membudget import train

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "VERSION").write_text("0.0.1\n")
    with pytest.raises(SystemExit) as exit_info:
        train.main(["bc", "--seeds", "0", "--checkpoint-dir", str(ckpt), "--out", str(tmp_path / "runs")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "written by membudget 0.0.1" in err and f"this is {membudget.__version__}" in err
    assert "Traceback" not in err


class _Reversed(Executor):
    """Tasks finishing in the reverse order (as remote workers may)."""

    def _run(self, fn, items, todo):
        for i in reversed(todo):
            yield i, fn(items[i])


def test_results_come_back_in_item_order_whatever_the_finishing_order(tmp_path):
    from same_fields import assert_same_fields  # imported here: Ray workers import this module without tests/

    fn = functools.partial(_logged_square, str(tmp_path), None)
    assert _Reversed().map(fn, [3, 1, 2]) == [9, 1, 4]
    assert_same_fields(build_label_dataset([2000, 2001], ["B10"], chunk_weeks=1, map=_Reversed().map),
                       build_label_dataset([2000, 2001], ["B10"], chunk_weeks=0))


def test_label_dataset_does_not_depend_on_the_task_split():
    from same_fields import assert_same_fields

    whole = build_label_dataset(range(2000, 2003), ["B10"], chunk_weeks=0)
    split = build_label_dataset(range(2000, 2003), ["B10"], chunk_weeks=2)
    assert_same_fields(whole, split)


def test_breakdown_accounts_for_every_worker_second():
    from membudget.bench.ray_scaling import breakdown

    # One map from 0 to 1 s on 2 workers in a run of 1.5 s: worker 1 runs tasks 0.1-0.5 and 0.55-0.9 (the last),
    # worker 2 runs 0.2-0.6 and then has nothing left to run.
    parts = breakdown([(0.0, 1.0, [(0.1, 0.5, 1), (0.55, 0.9, 1), (0.2, 0.6, 2)])], workers=2, wall=1.5)
    expected = {"tasks": 0.4 + 0.35 + 0.4, "overhead": 0.1 + 0.05 + 0.1 + 0.2, "idle": 0.4, "driver": 1.0}
    assert parts == pytest.approx(expected)
    assert sum(parts.values()) == pytest.approx(2 * 1.5)


@pytest.fixture(scope="module")
def small_suite():
    from membudget.studies.suite import fit_suite

    return fit_suite(**SMALL_SUITE)


SMALL_SUITE = {"dev_seeds": range(2000, 2005), "temporal_budgets": ("B10",), "analysis_seeds": range(4000, 4002)}


class _Recording(Executor):
    """The local backend, keeping the items of every map."""

    def __init__(self):
        super().__init__()
        self.maps = []

    def map(self, fn, items):
        self.maps.append(list(items))
        return super().map(fn, items)


@pytest.mark.slow
def test_evaluation_rows_are_tasks_with_their_paired_intervals(small_suite):
    from membudget.studies import budgetpm
    from membudget.studies.protocol import bootstrap_ci, evaluate_policy

    cfg = budgetpm.EvalConfig(policies=["RandomFeasible", "Static", "Sequential"], budgets=["B5", "B10"],
                              first_seed=9000, n_weeks=4, bootstrap=500, rows_per_task=2)
    ex = _Recording()
    rows, _ = budgetpm.run(cfg, suite=small_suite, executor=ex)
    weeks = tuple(range(9000, 9004))
    # One map: per budget, every k-th row in ceil(rows / 2) tasks, each naming the reference (Sequential has no
    # B5 row), so that no task waits for another.
    assert ex.maps == [[("B5", ("RandomFeasible", "Static"), weeks, "Static"),
                        ("B10", ("RandomFeasible", "Sequential"), weeks, "Static"),
                        ("B10", ("Static",), weeks, "Static")]]
    assert [(r["budget"], r["policy"]) for r in rows] == [("B5", "RandomFeasible"), ("B5", "Static"),
                                                          ("B10", "RandomFeasible"), ("B10", "Static"),
                                                          ("B10", "Sequential")]
    for r in rows:
        direct = evaluate_policy(small_suite, r["policy"], r["budget"], list(weeks), 0, 3)
        assert np.array_equal(r["set_f1"], direct["set_f1"])
        if r["policy"] == "Static":
            assert "diff_vs_reference" not in r
        else:
            ref = evaluate_policy(small_suite, "Static", r["budget"], list(weeks))["set_f1"]
            assert r["diff_vs_reference"] == bootstrap_ci(direct["set_f1"] - ref, 500)
    for k in (1, 5):  # the split is not part of the numbers
        other, _ = budgetpm.run(dataclasses.replace(cfg, rows_per_task=k), suite=small_suite)
        assert budgetpm.format_table(other, "Static") == budgetpm.format_table(rows, "Static")
        for a, b in zip(rows, other):
            assert np.array_equal(a["set_f1"], b["set_f1"]) and a.get("diff_vs_reference") == b.get(
                "diff_vs_reference")
    with pytest.raises(ValueError, match="rows_per_task"):
        budgetpm.run(dataclasses.replace(cfg, rows_per_task=0), suite=small_suite)


class _ReversedRecording(_Recording):
    """:class:`_Recording` with the tasks finishing in the reverse order."""

    _run = _Reversed._run


@pytest.mark.slow
def test_cap_sweep_is_one_map_of_the_table_executor_and_equals_the_serial_sweep(small_suite):
    from membudget.studies import budgetpm
    from membudget.studies.protocol import SWEEP_CAPS, evaluate_policy

    cfg = budgetpm.EvalConfig(policies=["Static", "DeadlineOutcome"], budgets=["B10"], first_seed=9000, n_weeks=2,
                              bootstrap=200, sweep=True)
    ex = _ReversedRecording()
    rows, sweeps = budgetpm.run(cfg, suite=small_suite, executor=ex)
    weeks = (9000, 9001)
    assert ex.maps[1:] == [[(name, cap, weeks) for name in budgetpm.SWEPT for cap in SWEEP_CAPS]]
    assert list(sweeps) == list(budgetpm.SWEPT)
    for name, points in sweeps.items():  # the serial loop the sweep replaces
        assert [p["cap"] for p in points] == list(SWEEP_CAPS)
        for cap, p in zip(SWEEP_CAPS, points):
            res = evaluate_policy(small_suite, name, cap, list(weeks))
            assert p == {"cap": cap, "f1": float(res["set_f1"].mean()),
                         "recall": float(np.nanmean(res["on_time_recall"])),
                         "cost": float(res["realized_cost"].mean())}
    local_rows, local_sweeps = budgetpm.run(cfg, suite=small_suite)
    assert local_sweeps == sweeps
    assert budgetpm.format_table(local_rows, "Static", local_sweeps) == budgetpm.format_table(rows, "Static", sweeps)
    assert "Cost to match" in budgetpm.format_table(rows, "Static", sweeps)
    with pytest.raises(ValueError, match="--address needs --backend ray"):  # refused before the gates are fitted
        budgetpm.run(budgetpm.parse_args(["--sweep", "--address", "auto"]))


# --- Ray: the simulated cluster of conftest.py ----------------------------------------------------------------

def _node_of(_item):
    import time

    import ray

    time.sleep(0.5)  # long enough that a busy node's tasks spill to the others
    return ray.get_runtime_context().get_node_id()


def test_ray_tasks_spread_over_nodes_and_keep_item_order(cluster, tmp_path):
    from membudget.studies.execution import RayExecutor

    ex = RayExecutor()
    assert ex.map(functools.partial(_logged_square, str(tmp_path), None), range(8)) == [i * i for i in range(8)]
    assert len(set(ex.map(_node_of, range(6)))) >= 2  # the remote workers import membudget on other nodes


def test_ray_label_dataset_equals_local(cluster):
    from same_fields import assert_same_fields

    from membudget.studies.execution import RayExecutor

    local = build_label_dataset(range(2000, 2004), ["B5", "B10"], chunk_weeks=0)
    remote = build_label_dataset(range(2000, 2004), ["B5", "B10"], chunk_weeks=1, map=RayExecutor().map)
    assert_same_fields(local, remote)


@pytest.mark.parametrize("chunk_weeks", [0, 2])
def test_ray_evaluation_table_equals_local(cluster, small_suite, chunk_weeks):
    from membudget.studies import budgetpm
    from membudget.studies.execution import RayExecutor
    from membudget.studies.suite import fit_suite

    cfg = budgetpm.EvalConfig(policies=["RandomFeasible", "Static", "Sequential", "DeadlineOutcome", "PacingLB"],
                              budgets=["B5", "B10"], first_seed=9000, n_weeks=6, chunk_weeks=chunk_weeks,
                              bootstrap=2000)
    suite_ray = fit_suite(**SMALL_SUITE, map=RayExecutor().map) if chunk_weeks else small_suite
    local, _ = budgetpm.run(cfg, suite=small_suite)
    remote, _ = budgetpm.run(cfg, suite=suite_ray, executor=RayExecutor())
    assert budgetpm.format_table(local, "Static") == budgetpm.format_table(remote, "Static")
    assert len(local) == len(remote) == 9
    for a, b in zip(local, remote):
        for k in ("set_f1", "on_time_recall", "realized_cost", "spend_per_quarter"):
            assert np.array_equal(a[k], b[k], equal_nan=True)
        assert a.get("diff_vs_reference") == b.get("diff_vs_reference")


def test_ray_retries_a_killed_worker_and_recomputes_one_task(cluster, tmp_path):
    from membudget.studies.execution import RayExecutor

    fn = functools.partial(_logged_square, str(tmp_path), None)
    items = [0, 1, 2, -3, 4, 5]  # the worker running -3 dies on its first attempt
    assert RayExecutor().map(fn, items) == [0, 1, 4, 9, 16, 25]
    assert [_calls(tmp_path, i) for i in range(6)] == [1, 1, 1, 2, 1, 1]


@pytest.mark.parametrize("env_address, address, expected", [
    (None, None, ("local", 3)), ("ray://h:1", None, (None, None)), (None, "auto", ("auto", None))])
def test_ray_executor_starts_its_own_local_cluster_unless_told_to_join(monkeypatch, env_address, address, expected):
    """Without an address, a new local cluster (never a cluster another process runs on the machine); RAY_ADDRESS
    or --address joins one, without a CPU count."""
    ray = pytest.importorskip("ray")
    from membudget.studies.execution import RayExecutor

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append((kw["address"], kw["num_cpus"])))
    if env_address:
        monkeypatch.setenv("RAY_ADDRESS", env_address)
    else:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    RayExecutor(address=address, num_cpus=3)
    assert calls == [expected]


def test_ray_resumes_a_local_checkpoint(cluster, tmp_path):
    from membudget.studies.execution import RayExecutor

    log, ckpt = tmp_path / "log", tmp_path / "ckpt"
    log.mkdir()
    (log / "FAIL").touch()
    fn = functools.partial(_logged_square, str(log), 4)
    with pytest.raises(RuntimeError):
        Executor(str(ckpt)).map(fn, range(6))
    (log / "FAIL").unlink()
    ex = RayExecutor(checkpoint_dir=str(ckpt))
    assert ex.map(fn, range(6)) == [0, 1, 4, 9, 16, 25]
    assert (ex.loaded, ex.computed) == (4, 2)
    assert [_calls(log, i) for i in range(6)] == [1, 1, 1, 1, 2, 1]


def test_ray_three_seed_training_run_equals_local(cluster, tmp_path):
    from membudget import train

    args = ["ppo", "--engine", "autograd", "--total-timesteps", "640", "--n-envs", "8", "--n-minibatches", "2", "--eval-every",
            "640", "--eval-weeks", "2", "--learning-curve", "off", "--progress-bar", "off", "--seeds", "0,1,2"]
    local = train.main(args + ["--out", str(tmp_path / "local")])
    remote = train.main(args + ["--out", str(tmp_path / "ray"), "--backend", "ray"])
    assert [os.path.basename(d) for d in local] == [f"ppo-B10-seed{s}" for s in range(3)]
    texts = [[_read(os.path.join(d, "metrics.csv")) for d in run] for run in (local, remote)]
    assert texts[0] == texts[1]
    weights = []
    for a, b in zip(local, remote):
        with np.load(os.path.join(a, "model.npz")) as x, np.load(os.path.join(b, "model.npz")) as y:
            assert sorted(x.files) == sorted(y.files)
            assert all(np.array_equal(x[k], y[k]) for k in x.files)
            weights.append(b"".join(x[k].tobytes() for k in sorted(x.files)))
    assert len(set(weights)) == 3  # the seeds differ (two short runs may still score alike on 2 weeks)

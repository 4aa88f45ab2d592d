"""The shared argument checks of ``membudget.envs.validation``."""

from __future__ import annotations

import numpy as np
import pytest

from membudget.envs.validation import check_int, check_number


def test_check_int_accepts_python_and_numpy_ints_within_bounds():
    assert check_int("n", 3, 1) == 3 and type(check_int("n", np.int64(3), 1, 3)) is int
    assert check_int("cap", None, 1, none_ok=True) is None
    for bad, match in ((True, "n must be a positive int"), (2.0, "n must be a positive int"), (0, "positive int"),
                       (None, "positive int, got None")):
        with pytest.raises(ValueError, match=match):
            check_int("n", bad, 1)
    with pytest.raises(ValueError, match=r"k must be an int in \[1, 4\] or None, got 5"):
        check_int("k", 5, 1, 4, none_ok=True)
    with pytest.raises(ValueError, match="load must be a non-negative int"):
        check_int("load", -1, 0)
    with pytest.raises(ValueError, match="window must be an int >= 2"):
        check_int("window", 1, 2)


def test_check_number_rejects_bools_non_finite_and_out_of_bounds():
    assert check_number("w", np.float32(0.5), 0) == 0.5 and type(check_number("w", 1, 0)) is float
    assert check_number("w", 0, 0) == 0.0 and check_number("w", None, none_ok=True) is None
    for bad in (True, float("nan"), float("inf"), "1", None):
        with pytest.raises(ValueError, match="w must be a finite number"):
            check_number("w", bad, 0)
    with pytest.raises(ValueError, match="eps must be a finite number > 0"):
        check_number("eps", 0.0, 0, low_open=True)
    with pytest.raises(ValueError, match=r"noise must be a finite number in \[0, 0.5\], got 0.6"):
        check_number("noise", 0.6, 0, 0.5)
    with pytest.raises(ValueError, match=r"p must be a finite number in \[0, 1\)"):
        check_number("p", 1.0, 0, 1, high_open=True)


@pytest.mark.parametrize("kwargs", [dict(horizon=80.5), dict(horizon=float("nan")), dict(horizon=True),
                                    dict(n_time="26"), dict(n_time=float("inf")), dict(lookahead=1.5),
                                    dict(channel_window=(3, 1.5)), dict(p_unregistered=float("nan")),
                                    dict(day_end_hour=7.0), dict(horizon=10 ** 9)])
def test_world_config_refuses_wrong_types_and_sizes(kwargs):
    from membudget.envs.pm import WorldConfig

    with pytest.raises(ValueError, match=next(iter(kwargs)).split("_")[0]):
        WorldConfig(**kwargs)


def test_load_is_bounded_on_every_path():
    from membudget.envs.pm import PMWeekEnv, generate_episode

    for make in (lambda: PMWeekEnv(load=10 ** 12), lambda: generate_episode(0, load=10 ** 12)):
        with pytest.raises(ValueError, match="load"):
            make()


def _resave(src, dst, **changes):
    with np.load(src, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    for k in [k for k, v in changes.items() if v is None]:
        del arrays[k]
    np.savez(dst, **arrays)


def test_saved_students_are_validated_at_load(tmp_path):
    from membudget.agents.imitation import fit_bc
    from membudget.agents.per_resource import StudentPolicy

    student, _ = fit_bc([2000], "B10", epochs=1, hidden=8)
    good = tmp_path / "s.npz"
    student.save(good)
    w = "param/first.weight"
    with np.load(good) as z:
        shape = z[w].shape
    cases = {"shape": {w: np.zeros((shape[0], shape[1] + 1), np.float32)},
             "finite": {w: np.full(shape, np.nan, np.float32)},
             "threshold": {"threshold": np.array(2.0)},
             "parameters": {w: None}}
    for match, change in cases.items():
        bad = tmp_path / f"{match}.npz"
        _resave(good, bad, **change)
        with pytest.raises(ValueError, match=match):
            StudentPolicy.load(bad)
    (tmp_path / "cut.npz").write_bytes(good.read_bytes()[:200])
    with pytest.raises(ValueError, match="cut.npz"):
        StudentPolicy.load(tmp_path / "cut.npz")
    assert np.array_equal(StudentPolicy.load(good).net.first.weight.detach().numpy(),
                          student.net.first.weight.detach().numpy())


def test_saved_gates_are_validated_at_load(tmp_path):
    import json

    from membudget.baselines.schedules import RelevanceGate
    from membudget.teachers import build_label_dataset

    gate = RelevanceGate().fit(build_label_dataset(range(2000, 2003), ["B20"]), levels={b: 5.0 for b in
                                                                                       ("B20", "B40", "B60", "B80")})
    good = tmp_path / "g.npz"
    gate.save(good)
    cases = {"finite number": {"thresholds": np.array(json.dumps({"B20": float("nan")}))},
             "unknown keys": {"config": np.array(json.dumps({"budget": "B20", "color": "red"}))},
             "not a RelevanceGate": {"kind": np.array("StaticGate")}}
    for match, change in cases.items():
        bad = tmp_path / "bad.npz"
        _resave(good, bad, **change)
        with pytest.raises(ValueError, match=match):
            RelevanceGate.load(bad)


def test_proactive_stream_length_is_bounded():
    from membudget.envs.proactive import ProactiveStreamEnv

    with pytest.raises(ValueError, match="n_days"):
        ProactiveStreamEnv(n_days=100_000).reset(seed=0)

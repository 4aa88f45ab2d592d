"""The fast paths of the PM kernels: integer draws without numba's per-call arrays, weeks drawn straight into the
core (in one batch at autoreset) equal to generated Episodes, and a step kernel that allocates nothing per week."""

import numpy as np
import pytest
from gymnasium.utils import seeding
from numba.core.runtime import _nrt_python, rtsys

from membudget.envs.pm import PMWeekEnv, PMWeekVectorEnv, WorldConfig, generate_episode
from membudget.envs.pm.core import PMWeekCore, generator_list
from membudget.envs.pm.world import KIND_VISIBLE, _integers, draw_arguments, episode_from_state
from same_fields import assert_same_fields

R = 11


@pytest.mark.parametrize("low, high", [(0, 1), (0, 2), (3, 80), (-5, 7), (0, 2**32 - 1), (0, 2**32),
                                       (0, 2**32 + 1), (-(2**40), 2**41), (0, 2**62)])
def test_integers_draws_what_rng_integers_draws(low, high):
    ours, ref = np.random.default_rng(7), np.random.default_rng(7)
    for k in range(200):
        if k % 3 == 0:  # interleave other draws, as the generator does
            assert ours.random() == ref.random()
        assert _integers(ours, low, high) == ref.integers(low, high)
    with pytest.raises(ValueError, match="low >= high"):
        _integers(ours, high, high)


@pytest.mark.parametrize("config", [{}, {"cost_profile": "skewed", "load": 2}])
def test_vector_weeks_are_the_single_envs_weeks(config):
    """Weeks drawn in a batch (reset and autoreset) are the Episodes the single environments generate, seed and
    meta included (an Episode the core did not keep is drawn again from the generator's state)."""
    n, seed = 4, 40
    venv = PMWeekVectorEnv(num_envs=n, max_episode_steps=3, **config)
    singles = [PMWeekEnv(**config) for _ in range(n)]
    venv.reset(seed=seed)
    for i, env in enumerate(singles):
        env.reset(seed=seed + i)
        assert_same_fields(venv.unwrapped.core.episode(i), env.episode)
        assert_same_fields(env.episode, generate_episode(seed + i, cost_profile=config.get("cost_profile", "unit"),
                                                    load=config.get("load", 0)))
    actions = np.zeros((n, R), dtype=np.int8)
    for _ in range(4):  # 3 steps truncate every week, the 4th resets them all from their own generators
        venv.step(actions)
    for i, env in enumerate(singles):
        env.reset()
        assert_same_fields(venv.unwrapped.core.episode(i), env.episode)


def _load_state(core, i):
    k = int(core.n_int[i])
    names = ("table", "miss_cost", "cal", "hints", "vis_step", "live_from", "live_order")
    return {name: getattr(core, name)[i, :k] if name in ("table", "miss_cost", "live_from", "live_order")
            else getattr(core, name)[i] for name in names} | {
        name: getattr(core, name)[i] for name in ("n_int", "n_total", "horizon", "costs", "cost_ratio", "is_clock",
                                                  "remaining", "counters", "last_q")}


def test_drawing_into_the_core_equals_loading_the_episode():
    """``draw_into`` fills slots as ``load`` of the generated Episodes does, week after week; a week that does
    not fit the tables (a new core's hold one intention) is left for ``load``, which grows them."""
    world = WorldConfig(horizon=30, n_days=3)
    kwargs = {"budget": 9, "per_step_cap": 2, "per_step_cost_cap": None, "late_policy": "expire", "b_frac": 0.1}
    drawn, loaded = PMWeekCore(2, R, **kwargs), PMWeekCore(2, R, **kwargs)
    gens = generator_list([seeding.np_random(s)[0] for s in (5, 6)])
    refs = [seeding.np_random(s)[0] for s in (5, 6)]
    slots = np.array([1, 0])
    for round_ in range(4):
        states = [gens[i].bit_generator.state for i in slots]
        fitted = drawn.draw_into(slots, gens, world, "mild", 0)
        for j, i in enumerate(slots):
            if not fitted[j]:
                drawn.load(i, episode_from_state(states[j], world, "mild"), world.lookahead)
            loaded.load(i, generate_episode(None, world, "mild", rng=refs[i]), world.lookahead)
            a, b = _load_state(drawn, i), _load_state(loaded, i)
            for name in a:
                assert np.array_equal(a[name], b[name]), (i, name)
        assert round_ > 0 or not fitted.any()


def test_step_kernel_allocates_nothing_per_week():
    """The numba allocations of a step (without autoresets) do not grow with the number of weeks."""
    counts = []
    for n in (2, 64):
        venv = PMWeekVectorEnv(num_envs=n)
        venv.reset(seed=0)
        actions = np.ones((n, R), dtype=np.int8)
        venv.step(actions)
        _nrt_python.memsys_enable_stats()
        try:
            before = rtsys.get_allocation_stats().alloc
            for _ in range(20):
                venv.step(actions)
            counts.append(rtsys.get_allocation_stats().alloc - before)
        finally:
            _nrt_python.memsys_disable_stats()
    assert counts[0] == counts[1]


def test_vector_env_pickles_and_continues_identically():
    """The numba list of generators is left out of the pickle and rebuilt from the generators when next needed."""
    import pickle

    venv = PMWeekVectorEnv(num_envs=3, max_episode_steps=5)
    venv.reset(seed=1)
    actions = np.ones((3, R), dtype=np.int8)
    for _ in range(7):  # past an autoreset, so the list exists
        venv.step(actions)
    clone = pickle.loads(pickle.dumps(venv))
    for _ in range(12):
        a, b = venv.step(actions)[0], clone.step(actions)[0]
        for key in a:
            assert np.array_equal(a[key], b[key])
    assert_same_fields(venv.unwrapped.core.episode(2), clone.unwrapped.core.episode(2))


def test_njit_leaf_compiles_without_reference_counting_and_refuses_an_allocation():
    """``njit_leaf`` helpers read and write the arrays they are given as ``njit`` would, with numba's reference
    counting off (the point of the decorator); one that allocates is refused at compile time rather than run
    without the counting its array would need."""
    import numba

    from membudget.envs.jit import njit_leaf

    def scaled_sum(a, w):
        s = 0.0
        for i in range(a.size):
            a[i] *= w
            s += a[i]
        return s

    def fresh(n):
        return np.zeros(n)

    leaf, plain = njit_leaf(scaled_sum), numba.njit(scaled_sum)
    a, b = np.arange(5.0), np.arange(5.0)
    assert leaf(a, 1.5) == plain(b, 1.5) == 15.0
    np.testing.assert_array_equal(a, b)
    assert leaf.targetoptions["_nrt"] is False
    with pytest.raises(numba.core.errors.TypingError):
        njit_leaf(fresh)(3)


def test_joining_intentions_move_each_live_row_at_most_twice_a_step(monkeypatch):
    """The step kernel, run as Python with its live-row copies counted: intentions that join the live rows are
    merged in by index, so a step copies each live row at most twice (once to make room, once when finished rows
    are dropped), however many join. Inserted one at a time, each joining intention shifted every live row of a
    higher index: a dense week's step was quadratic in its live intentions. The live rows stay in index order and
    the Python run gives the compiled kernel's observations and rewards."""
    from types import SimpleNamespace

    from membudget.envs.pm import core as core_module
    from membudget.envs.pm.core import _KERNEL_STATE, L_INDEX, CoreState, step_outputs

    world = WorldConfig(n_time=300, n_channel=300, n_channel_lures=300, n_updates=0, n_visible=0, n_visible_lures=0)
    kwargs = {"budget": None, "per_step_cap": None, "per_step_cost_cap": None, "late_policy": "expire",
              "b_frac": 1.0}
    ep = generate_episode(0, world)
    python, compiled = PMWeekCore(1, R, **kwargs), PMWeekCore(1, R, **kwargs)
    for core in (python, compiled):
        core.load(0, ep, world.lookahead)
    copies = [0]

    def counted(live, live_miss, n, src, dst):
        copies[0] += 1
        live[n, dst] = live[n, src]
        live_miss[n, dst] = live_miss[n, src]

    monkeypatch.setattr(core_module, "_copy_live", counted)
    ref = SimpleNamespace(state=CoreState(*(getattr(python, name) for name in _KERNEL_STATE)))
    out_py, out_c = step_outputs(1, R), step_outputs(1, R)
    rows, rng = np.zeros(1, dtype=np.int64), np.random.default_rng(0)
    n_joined = 0
    for t in range(40):
        scores = (rng.random((1, R)) < 0.3).astype(np.float64)
        before, entered = int(python.n_live[0]), int(python.n_entered[0])
        copies[0] = 0
        core_module._advance.py_func(ref, rows, np.ones(1, dtype=bool), True, scores,
                                     (out_py.selected, out_py.skipped, out_py.reward, out_py.events, out_py.metrics,
                                      out_py.resources, out_py.budget, out_py.mask))
        joined = int(python.n_entered[0]) - entered
        n_joined += joined
        assert copies[0] <= 2 * before + joined, (t, before, joined, copies[0])
        live = python.live[0, :int(python.n_live[0]), L_INDEX]
        assert np.all(np.diff(live) > 0)
        compiled.advance(rows, np.ones(1, dtype=bool), True, scores, out_c)
        for a, b in zip(out_py, out_c):
            assert np.array_equal(a, b), t
    assert n_joined > 300  # the week was dense: many joined while many were live


def test_a_week_with_more_intentions_grows_only_the_intention_tables():
    """Loading a week with more hidden intentions than the tables hold replaces only the per-intention arrays (a
    longer week only the per-step ones), the other slots' contents kept: the per-step arrays are most of the
    memory at long horizons, and copying them at each new largest week made a first reset of 50 shared-budget
    agents at a horizon of 100,000 take 15 s."""
    kwargs = {"budget": None, "per_step_cap": 2, "per_step_cost_cap": None, "late_policy": "expire", "b_frac": 1.0}
    small, dense = WorldConfig(horizon=50), WorldConfig(horizon=50, n_time=200)
    core, ref = PMWeekCore(2, R, **kwargs), PMWeekCore(2, R, **kwargs)
    few, many = generate_episode(0, small), generate_episode(1, dense)
    core.load(0, few, 2)
    steps = {name: getattr(core, name) for name in ("cal", "hints", "vis_step", "q_hist", "c_hist")}
    table = core.table
    core.load(1, many, 2)
    assert core.table is not table and core.table.shape[1] >= int(np.sum(many.kind != KIND_VISIBLE))
    assert all(getattr(core, name) is a for name, a in steps.items())
    longer = generate_episode(2, WorldConfig(horizon=70))
    table = core.table
    core.load(1, longer, 2)
    assert core.table is table and core.hints.shape[1] == 70
    for i, ep in enumerate((few, longer)):
        ref.load(i, ep, 2)
    for i in range(2):
        a, b = _load_state(core, i), _load_state(ref, i)
        for name in a:
            assert np.array_equal(a[name], b[name]), (i, name)


def test_world_numbers_keep_the_generator_kernels_argument_types():
    """A WorldConfig stores each number as the int or float it is checked as, so an int given for a float field, a
    NumPy integer for an int field, gives the week generator's kernel the same argument types as the defaults
    (other types compiled it anew: seconds and ~90 MB on a first reset) and the same weeks as the equal floats."""
    import numba

    given = WorldConfig(horizon=np.int32(80), hint_width=3, hint_noise=0, p_cross_day=0, n_time=26,
                        channel_window=(np.int16(3), 10), lookahead=np.uint8(2))
    same = WorldConfig(hint_width=3.0, hint_noise=0.0, p_cross_day=0.0)
    assert given == same and numba.typeof(draw_arguments(given)) == numba.typeof(draw_arguments(WorldConfig()))
    assert type(given.hint_width) is float and type(given.horizon) is int and type(given.channel_window[0]) is int
    assert_same_fields(generate_episode(3, given), generate_episode(3, same))

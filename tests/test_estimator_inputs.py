"""Input checks found missing by a user trial of the wheel: each bad argument is refused where it enters, with a
``ValueError`` / ``TypeError`` naming the argument, the value and what is accepted (nothing silently accepted,
nothing failing later with a bare ``KeyError`` / ``AttributeError``)."""

import inspect
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest

import membudget  # noqa: F401  (registers the environments)
from membudget.envs.registration import ENV_IDS


# --- 1. BudgetMemReward wraps TierRouting-v0 only -----------------------------------------------------------------

def test_budgetmem_reward_refuses_another_environment_when_built():
    from membudget.envs.tiers.wrappers import BudgetMemReward

    with pytest.raises(TypeError, match=r"^BudgetMemReward wraps TierRouting-v0 environments only.*env=PMWeekEnv"):
        BudgetMemReward(gym.make("membudget/PMWeek-v0"))
    with pytest.raises(TypeError, match="env=NoneType"):
        BudgetMemReward(None)
    env = BudgetMemReward(gym.make("membudget/TierRouting-v0"))  # wrapped by gym.make: still a TierRoutingEnv
    env.reset(seed=0)
    terminated = False
    while not terminated:
        _, reward, terminated, _, info = env.step(1)
    assert np.isfinite(reward) and "normalized" in info["episode_metrics"]


# --- 2. the shared-budget env refuses unknown reset options, in both forms ----------------------------------------

@pytest.mark.parametrize("form", ["parallel_env", "env"])
@pytest.mark.parametrize("options, unknown", [({"junk": 1}, "junk"), ({"episode": 3}, "episode")])
def test_shared_budget_refuses_unknown_reset_options(form, options, unknown):
    from membudget.envs import shared_budget

    env = getattr(shared_budget, form)(n_agents=2)
    with pytest.raises(ValueError, match=rf"^unknown reset options \['{unknown}'\]; supported: none"):
        env.reset(seed=0, options=options)
    with pytest.raises(TypeError, match="options must be a dict or None"):
        env.reset(seed=0, options="junk")
    env.reset(seed=0, options={})
    env.reset(seed=0, options=shared_budget.API_TEST_OPTIONS)  # PettingZoo's api tests pass it


# --- 3. values that were silently accepted ------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    ({"oracle_feature": "yes"}, r"^oracle_feature must be a bool, got 'yes'"),
    ({"oracle_feature": 1}, r"^oracle_feature must be a bool, got 1"),
    ({"seed": -1}, r"^seed must be a non-negative int, got -1"),
    ({"seed": 1.5}, r"^seed must be a non-negative int, got 1.5"),
    ({"samples": 0}, r"^samples must be an int in \[1, 100000\] or None, got 0"),
])
def test_online_teacher_checks_its_arguments_when_built(kwargs, match):
    from membudget.envs.pm import PMWeekEnv
    from membudget.wrappers.online_teacher import OnlineTeacher

    with pytest.raises(ValueError, match=match):
        OnlineTeacher(PMWeekEnv(budget="B10"), **kwargs)


@pytest.mark.parametrize("expected", ["x", 1, None, np.float64(1.0)])
def test_hindsight_teacher_expected_must_be_a_bool(expected):
    from membudget.wrappers.teacher import HindsightTeacher

    with pytest.raises(ValueError, match="^expected must be a bool, got " + re.escape(repr(expected))):
        HindsightTeacher(gym.make("membudget/TierRouting-v0"), expected=expected)


def test_hindsight_teacher_expected_applies_to_tier_routing_only():
    from membudget.envs.pm import PMWeekEnv
    from membudget.wrappers.teacher import HindsightTeacher

    with pytest.raises(ValueError, match=r"^expected=True applies to TierRouting-v0 only"):
        HindsightTeacher(PMWeekEnv(budget="B10"), expected=True)


@pytest.mark.parametrize("make", ["LinUCB", "HybridLinUCB"])
def test_linucb_refuses_a_negative_cost(make):
    from membudget.agents import linucb

    kw = {"action_features": np.eye(3)[:, :2]} if make == "HybridLinUCB" else {}
    b = getattr(linucb, make)(n_actions=3, **kw).fit(np.zeros((2, 4)), [0, 1], [1.0, 0.0], [0.1, 0.2])
    before = [a.copy() for a in (b.A_inv_, b.b_, b.theta_)]
    for cost in (-5.0, np.float32(-0.5), -1):
        with pytest.raises(ValueError, match=r"^cost must be >= 0 \(an observed cost.*got -"):
            b.update(np.ones(4), 1, 1.0, cost)
    with pytest.raises(ValueError, match=r"^cost must be finite"):
        b.update(np.ones(4), 1, 1.0, -np.inf)
    with pytest.raises(ValueError, match=r"^cost must be >= 0 .*got -0.2 at index 1"):
        b.partial_fit(np.ones((2, 4)), [0, 1], [1.0, 0.0], [0.1, -0.2])
    with pytest.raises(ValueError, match=r"^cost must be >= 0 .*got -0.2$"):
        b.fit(np.ones((2, 4)), [0, 1], [1.0, 0.0], -0.2)
    for was, now in zip(before, (b.A_inv_, b.b_, b.theta_)):
        np.testing.assert_array_equal(was, now)  # a refused update changes nothing
    b.update(np.ones(4), 1, 1.0, 0.0)  # a zero cost is one


@pytest.mark.filterwarnings("ignore:.*render_mode:UserWarning")  # Gymnasium's own warning, before the constructor
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_environments_refuse_an_unknown_render_mode(env_id):
    with pytest.raises(ValueError, match=r"^render_mode must be None or one of .*metadata\['render_modes'\] "
                                         r"\['ansi', 'human', 'rgb_array'\], got 'x'"):
        gym.make(env_id, render_mode="x")


def test_vector_and_shared_budget_environments_refuse_an_unknown_render_mode():
    from membudget.envs import shared_budget
    from membudget.envs.pm import PMWeekVectorEnv

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for make in (lambda: PMWeekVectorEnv(num_envs=2, render_mode="x"),
                     lambda: shared_budget.parallel_env(render_mode="x"),
                     lambda: shared_budget.env(render_mode=["ansi"])):
            with pytest.raises(ValueError, match=r"^render_mode must be None or one of .*got"):
                make()
    for mode in shared_budget.raw_env.metadata["render_modes"]:
        shared_budget.parallel_env(render_mode=mode)


# --- 4. wrong-typed arguments get a message naming them -----------------------------------------------------------

@pytest.mark.parametrize("gate", ["StaticGate", "BoostedGate", "TemporalGate", "RelevanceGate"])
@pytest.mark.parametrize("dataset", [None, [], "labels.npz"])
def test_gates_fit_names_what_the_dataset_must_be(gate, dataset):
    from membudget.agents import gates
    from membudget.baselines import schedules

    cls = getattr(gates, gate, None) or getattr(schedules, gate)
    with pytest.raises(TypeError, match=r"^dataset must be a LabelDataset .*got " + type(dataset).__name__):
        cls().fit(dataset)


def test_gates_fit_names_what_levels_must_be(tiny_labels):
    from membudget.agents.gates import StaticGate

    ds = tiny_labels
    with pytest.raises(TypeError, match=r"^levels must be a dict .*got list"):
        StaticGate().fit(ds, ["B20"])
    with pytest.raises(ValueError, match=r"^levels\['B20'\] must be a finite number >= 0, got 'x'"):
        StaticGate().fit(ds, {"B20": "x"})


@pytest.mark.parametrize("seeds, error, match", [
    ([], ValueError, r"^train_seeds is empty"),
    (range(0), ValueError, r"^train_seeds is empty"),
    (None, TypeError, r"^train_seeds must be a list .*of episode seeds.*got NoneType"),
    ("B10", TypeError, r"^train_seeds must be a list .*got str"),
    ([2000, -1], ValueError, r"^train_seeds\[1\] must be a non-negative int, got -1"),
])
@pytest.mark.parametrize("fit", ["fit_bc", "fit_dagger"])
def test_imitation_names_what_its_first_argument_must_be(fit, seeds, error, match):
    from membudget.agents import imitation

    with pytest.raises(error, match=match):
        getattr(imitation, fit)(seeds, "B10")


def _policy(name):
    from membudget.baselines import pm, schedules

    if name == "RelevanceGate":  # a calibrated gate (its threshold set by hand)
        gate = schedules.RelevanceGate()
        gate.thresholds_ = {"B20": 0.5}
        return gate
    if name == "PeriodicOutcome":
        return schedules.PeriodicOutcome(scorer=None, cap=2)
    return getattr(pm, name)()


@pytest.mark.parametrize("name, observation, key", [
    ("AllRelevant", {"x": 1}, "mask"),
    ("RandomFeasible", {"x": 1}, "mask"),
    ("RelevanceGate", {"mask": np.ones(11)}, "resources"),
    ("RelevanceGate", {"resources": np.zeros((11, 27))}, "mask"),
    ("PeriodicOutcome", {"resources": np.zeros((11, 27)), "mask": np.ones(11)}, "budget"),
])
def test_baselines_say_which_observation_key_is_missing(name, observation, key):
    with pytest.raises(ValueError, match=rf"^observation lacks the '{key}' key .*got the keys"):
        _policy(name).predict(observation)


def test_baselines_refuse_an_observation_that_is_no_dict():
    from membudget.baselines import AllRelevant

    for observation in (None, np.ones(11)):
        with pytest.raises(TypeError, match=r"^observation must be a dict observation .*'mask'"):
            AllRelevant().predict(observation)


# --- 5. docstrings of the entry points ----------------------------------------------------------------------------

def test_entry_points_and_tier_baselines_have_docstrings():
    from membudget.baselines import tiers
    from membudget.envs import shared_budget

    for fn in (shared_budget.parallel_env, shared_budget.env):
        doc = inspect.getdoc(fn)
        assert doc and "raw_env" in doc and "PettingZoo" in doc
    for cls in (tiers.AllLow, tiers.AllMid, tiers.AllHigh):
        assert vars(cls).get("__doc__"), cls.__name__  # its own, not FixedTier's
        assert cls.__name__[3:].upper() in cls.__doc__

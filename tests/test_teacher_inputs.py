"""Bad arguments to the teachers and the worlds' generators: a clear error naming the argument, before any work."""

import numpy as np
import pytest

from membudget.envs.conversation.world import generate_conversation
from membudget.envs.pm import PMWeekEnv, generate_episode
from membudget.envs.pm.world import MAX_HORIZON
from membudget.envs.proactive.world import generate_stream as proactive_stream
from membudget.envs.replay.world import generate_stream as replay_stream
from membudget.teachers import HindsightDP
from membudget.teachers.dual_bound import InformationRelaxationBound
from membudget.teachers.observed import AgentView
from membudget.teachers.online import HindsightPlanner
from membudget.teachers.posterior import PosteriorSampler

GENERATORS = [generate_episode, generate_conversation, proactive_stream, replay_stream]


@pytest.mark.parametrize("generate", GENERATORS, ids=lambda f: f"{f.__module__}.{f.__name__}")
@pytest.mark.parametrize("seed", [-1, 1.5, "a", True])
def test_generators_refuse_a_seed_that_is_not_a_non_negative_int(generate, seed):
    with pytest.raises(ValueError, match=r"seed must be a non-negative int or None, got"):
        generate(seed)


@pytest.mark.parametrize("generate, field", [(generate_episode, "hints"), (generate_conversation, "token_similarity")],
                         ids=["PMWeek", "ConversationPM"])
def test_generators_take_a_numpy_int_seed_as_the_same_int(generate, field):
    a, b = generate(np.int64(3)), generate(3)
    assert a.meta == b.meta and type(a.meta["seed"]) is int
    assert np.array_equal(getattr(a, field), getattr(b, field))


def test_hindsight_dp_refuses_a_negative_exact_cost_and_a_lookahead_past_the_worlds_bound():
    ep = generate_episode(9000)
    with pytest.raises(ValueError, match=r"exact_cost must be a non-negative int, got -3"):
        HindsightDP(budget=21).solve(ep, exact_cost=-3)
    with pytest.raises(ValueError, match=rf"lookahead must be an int in \[0, {MAX_HORIZON}\]"):
        HindsightDP(budget=21, lookahead=MAX_HORIZON + 1).solve(ep)
    assert HindsightDP(budget=21).solve(ep, exact_cost=0).cost == 0  # no query at all: a schedule


def test_hindsight_dp_names_a_missing_episode_once():
    with pytest.raises(ValueError, match=r"^episode: expected an Episode, got NoneType$"):
        HindsightDP(budget=21).solve(None)


def test_online_planner_refuses_a_negative_seed_when_fitted_and_a_non_observation_when_predicting():
    with pytest.raises(ValueError, match=r"seed must be a non-negative int, got -1"):
        HindsightPlanner(env=AgentView(PMWeekEnv(budget="B10")), seed=-1).fit()
    env = AgentView(PMWeekEnv(budget="B10"))
    planner = HindsightPlanner(env=env, n_samples=2).fit()
    env.reset(seed=0)
    for bad in (None, 3):
        with pytest.raises(TypeError, match=r"observation must be a dict observation .* got"):
            planner.predict(bad)
    with pytest.raises(ValueError, match=r"observation lacks the 'mask' key"):
        planner.predict({"resources": np.zeros((11, 27))})


def test_posterior_sampler_refuses_an_observation_of_another_type():
    sampler = PosteriorSampler(n_particles=4).fit()
    with pytest.raises(TypeError, match=r"observed must be an Observed .* or None, got str"):
        sampler.sample("junk", 2)


@pytest.mark.parametrize("kwargs, match", [
    (dict(step=-1), r"step must be a finite number > 0, got -1"),
    (dict(step=0), r"step must be a finite number > 0, got 0"),
    (dict(step=float("nan")), r"step must be a finite number > 0"),
    (dict(start=(0.008,)), r"start must be a pair \(alpha, beta\)"),
    (dict(start=(0.008, float("inf"))), r"start\[1\] must be a finite number"),
])
def test_dual_bound_refuses_a_search_that_could_not_run(kwargs, match):
    bound = InformationRelaxationBound(budget=21).fit()
    with pytest.raises(ValueError, match=match):
        bound.solve(generate_episode(9000), **kwargs)


def test_the_online_teachers_are_named_in_the_teachers_package():
    import membudget.teachers as teachers
    from membudget.teachers import dual_bound, observed, online, posterior

    assert teachers.HindsightPlanner is online.HindsightPlanner
    assert teachers.RolloutPlanner is online.RolloutPlanner and teachers.BayesFeatureGate is online.BayesFeatureGate
    assert teachers.AgentView is observed.AgentView and teachers.PosteriorSampler is posterior.PosteriorSampler
    assert teachers.InformationRelaxationBound is dual_bound.InformationRelaxationBound
    assert {"HindsightPlanner", "InformationRelaxationBound"} <= set(teachers.__all__) & set(dir(teachers))
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchTeacher'"):
        teachers.NoSuchTeacher  # noqa: B018


def test_a_bayes_feature_gate_on_a_binary_environment_is_refused_before_anything_is_built():
    from membudget.teachers.online import BayesFeatureGate

    gate = BayesFeatureGate(env=AgentView(PMWeekEnv(budget="B10")), n_samples=2)
    with pytest.raises(ValueError, match=r"env must be an action_mode='scores' environment.*got action_mode 'binary'"):
        gate.fit()
    assert not [k for k in vars(gate) if k.endswith("_")]  # a failed fit leaves it unfitted
    with pytest.raises(RuntimeError, match="not fitted yet"):
        gate.predict({"mask": np.ones(11)})


def test_the_posterior_samplers_show_their_arguments_and_name_themselves_when_unfitted():
    from membudget.teachers.conversation_online import ConversationPosterior

    for obj, name in ((PosteriorSampler(n_particles=32), "PosteriorSampler"),
                      (ConversationPosterior(n_particles=32), "ConversationPosterior")):
        assert repr(obj).startswith(f"{name}(") and "n_particles=32" in repr(obj)
    with pytest.raises(RuntimeError, match=r"this PosteriorSampler is not fitted yet; call fit\(\) first"):
        PosteriorSampler().sample(None, 2)
    with pytest.raises(RuntimeError, match=r"this ConversationPosterior is not fitted yet"):
        ConversationPosterior().sample(None, 2)

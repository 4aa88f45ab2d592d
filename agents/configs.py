"""Every learner's settings, one frozen typed dataclass each with a docstring per field, the defaults the settings
chosen on validation data: the native PPO (:class:`PPOConfig`), the Stable-Baselines3 learners
(:class:`SB3PPOSettings` and the PMWeek allocators' configs; the tier router's, the ProactiveStream and ReplayStream
PPOs' subclass it in their modules). Kept apart from the training code, which imports torch and SB3: the command
lines build their flags from these classes and refuse a bad value in a fraction of a second."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from membudget.envs.pm.env import check_arguments
from membudget.envs.validation import check_int, check_number

TRAIN_SEEDS = range(2000, 4000)
"""Development weeks the learners train on (never 4000-4009 validation, never the held-out ranges)."""
VALIDATION_SEEDS = range(4000, 4010)
"""Validation weeks of the learning curves."""
CONDITIONED_BUDGETS = ("B5", "B10", "B15", "B20")

TASK_NAMES = ("pmweek", "conversation")
"""The command-line names of the tasks the PMWeek learners train on (:data:`membudget.agents.tasks.TASKS`)."""


TRAIN_RANGES = {"pmweek": (2000, 4000), "conversation": (2000, 3000)}
"""``[first, end)`` of each task's development episodes (its ``train_range``)."""


def task_levels(name: str) -> dict:
    """The budget levels of the task ``name`` (its ``levels``), read without importing the learners' code: a
    command line checks a budget with them before any heavy import."""
    if name == "conversation":
        from membudget.envs.conversation.levels import LEVELS
    else:
        from membudget.envs.pm.levels import LEVELS
    return LEVELS


def task_horizon(name: str) -> int:
    """Steps per episode of the task ``name`` (:data:`TASK_NAMES`; its world's default horizon, which every episode a
    learner trains on has: 80 steps a PMWeek-v0 week, 66 messages a ConversationPM-v1 conversation), read without
    importing the learners' code."""
    if name == "conversation":
        from membudget.envs.conversation.world import WORLD_V1 as world
    else:
        from membudget.envs.pm.world import WorldConfig

        world = WorldConfig()
    return world.horizon


MAX_WIDTH = 4096
"""Widest hidden layer a per-resource network may have."""


def check_widths(name: str, widths) -> tuple:
    """``widths`` as a tuple of layer widths in 1..MAX_WIDTH (at least one); anything else raises ``ValueError``
    naming ``name``."""
    widths = tuple(widths) if isinstance(widths, (tuple, list)) else ()
    if not widths:
        raise ValueError(f"{name} must name at least one layer width, got {widths!r}")
    return tuple(check_int(f"{name}[{i}]", h, 1, MAX_WIDTH) for i, h in enumerate(widths))


COMPILED_BACKENDS = ("inductor", "aoti")
"""How the compiled engine runs its minibatch update (``PPOConfig.compiled_backend``): ``inductor``
(``torch.compile``) or ``aoti`` (the same function exported and compiled ahead of time by AOTInductor into a
package cached on disk, :class:`~membudget.agents.ppo_compiled.AOTIUpdate`: the same arithmetic up to float
rounding, less Python per call); ``auto``: ``aoti``, with either critic dtype (the faster on every CPU measured,
docs/speed.md; until 2026-12-05 ``auto`` kept ``inductor`` with bfloat16 products)."""
ENGINES = ("auto", "autograd", "compiled")
"""Engines of :func:`train_ppo`: eager torch with autograd in float32 (the reference), or
:mod:`membudget.agents.ppo_compiled` (hand-written gradients compiled by inductor, :data:`COMPILED_BACKENDS`,
the critic's products in bfloat16 where the CPU has them natively; about 2.7 times the env steps per second
(bench/ppo.py), not bit-equal); ``auto``: the compiled engine for runs of at least :data:`AUTO_COMPILED_STEPS`
steps where it trains the configuration (the per-resource actor with two hidden layers and context on PMWeek-v0,
no behaviour-cloning loss), the autograd engine elsewhere."""
AUTO_COMPILED_STEPS = 1_000_000
"""The shortest run ``engine="auto"`` trains with the compiled engine: below it, the first compilation on a machine
(tens of seconds with an empty inductor cache, docs/speed.md) costs more than the compiled engine saves."""

ACTORS = ("per-resource", "flat-mlp")
"""Actors of :func:`train_ppo`: the shared per-resource network (every PMWeek learner's policy class) or the
flat-MLP ablation (:class:`~membudget.agents.per_resource.FlatMLPNet`)."""


class Resolvable:
    """A frozen config that :meth:`resolve` completes from a base config and keyword overrides."""

    @classmethod
    def resolve(cls, config=None, **overrides):
        """``config`` (default: this class's defaults) with the fields named in ``overrides`` replaced; a name that
        is not a field is a ``TypeError`` naming it."""
        config = cls() if config is None else config
        if not isinstance(config, cls):
            raise TypeError(f"config must be a {cls.__name__}, got {type(config).__name__}")
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"unknown {cls.__name__} settings {unknown}; the settings are its fields")
        return dataclasses.replace(config, **overrides)


@dataclass(frozen=True)
class PPOConfig(Resolvable):
    """The native PPO's settings. The defaults are the settings chosen on the validation weeks 4000-4029 (the trials
    are listed in docs/studies.md): ``train_ppo(budget)`` with no config trains the PPO of the RL-versus-distillation
    study, and ``python -m membudget.train ppo`` is generated from these fields."""

    total_timesteps: int = 4_000_000
    """Environment steps to train for (whole episodes: rounded up to n_envs × the horizon)."""
    n_envs: int = 64
    """Episodes played per update."""
    n_epochs: int = 4
    """PPO epochs per update."""
    n_minibatches: int = 16
    """Minibatches per epoch."""
    learning_rate: float = 1e-3
    """Adam learning rate."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over the run."""
    gamma: float = 1.0
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_coef: float = 0.2
    """PPO clipping range."""
    ent_coef: float = 0.003
    """Entropy bonus (over the candidates' Bernoullis)."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    reward_scale: float = 100.0
    """Factor on the rewards PPO learns from: the critic then fits returns of order 1 instead of Set F1 increments of
    order 0.01 (the policy gradient is unchanged up to advantage normalisation)."""
    actor: str = "per-resource"
    """per-resource (the policy class every PMWeek learner shares) or flat-mlp (the architecture ablation)."""
    hidden: tuple = (64, 64)
    """Layer widths of the actor."""
    context: bool = True
    """The resources see the candidates' mean first-layer activation."""
    critic_arch: tuple = (128, 128)
    """Hidden layer sizes of the critic (an MLP over the flattened observation)."""
    critic_counts: bool = False
    """The critic also reads the running TP / FP / FN (PMWeekEnv(observe_counts=True))."""
    bc_coef: float = 0.0
    """Weight of a behaviour-cloning loss on teacher demonstrations (bc_data) in every minibatch (0: none)."""
    critic_warmup: int = 0
    """Updates at the start that train only the critic (the actor acts but stays fixed)."""
    keep_best: bool = True
    """Return the actor of the learning-curve point with the best validation quality (early stopping)."""
    eval_every: int = 250_000
    """Learning-curve point every this many environment steps (0: only at the start and the end)."""
    eval_episodes: int = 30
    """Validation episodes of a learning-curve point: the first this many of the task's validation range (weeks
    4000-4029 on PMWeek-v0, conversations from 3000 on ConversationPM-v1)."""
    engine: str = "auto"
    """auto (compiled for runs of at least AUTO_COMPILED_STEPS steps where it trains the configuration, else
    autograd; the run's config records the choice), compiled (hand-written gradients compiled by inductor; the
    per-resource actor with two hidden layers and context on PMWeek-v0, no bc_coef) or autograd (eager torch,
    float32: everything)."""
    critic_dtype: str = "auto"
    """The compiled engine's critic products: auto (bfloat16 where this CPU multiplies bf16 natively, else float32;
    recorded in the run's config), bfloat16 or float32. Results are reproducible per (engine, critic_dtype)."""
    compiled_backend: str = "auto"
    """How the compiled engine runs its minibatch update: inductor (torch.compile), aoti (the same update compiled
    ahead of time by AOTInductor into a package cached on disk: less Python per call, docs/speed.md; float rounding
    differs from inductor's) or auto (aoti, with either critic dtype; recorded in the run's config). Results are
    reproducible per (engine, critic_dtype, compiled_backend)."""
    torch_threads: int = 1
    """torch.set_num_threads (and numpy's BLAS threads) for training (0: leave the defaults)."""
    per_step_cap: int = 2
    """Per-step query cap N_max of the training and validation environments."""
    cost_profile: str = "unit"
    """Cost profile (unit, mild, skewed)."""
    late_policy: str = "expire"
    """Late policy of the controller (expire, execute)."""

    def __post_init__(self):
        for name in ("total_timesteps", "n_envs", "n_epochs", "n_minibatches", "eval_episodes"):
            check_int(name, getattr(self, name), 1)
        for name in ("eval_every", "critic_warmup", "torch_threads"):
            check_int(name, getattr(self, name), 0)
        check_environment_settings(self)
        check_number("learning_rate", self.learning_rate, 0, low_open=True)
        check_number("gamma", self.gamma, 0, 1)
        check_number("gae_lambda", self.gae_lambda, 0, 1)
        for name in ("clip_coef", "reward_scale", "max_grad_norm"):
            check_number(name, getattr(self, name), 0, low_open=True)
        for name in ("ent_coef", "vf_coef", "bc_coef"):
            check_number(name, getattr(self, name), 0)
        for name in ("anneal_lr", "context", "critic_counts", "keep_best"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.actor not in ACTORS:
            raise ValueError(f"actor must be one of {ACTORS}, got {self.actor!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {self.engine!r}")
        if self.critic_dtype not in ("auto", "bfloat16", "float32"):
            raise ValueError(f"critic_dtype must be auto, bfloat16 or float32, got {self.critic_dtype!r}")
        if self.compiled_backend not in ("auto", *COMPILED_BACKENDS):
            raise ValueError(f"compiled_backend must be auto or one of {COMPILED_BACKENDS}, got "
                             f"{self.compiled_backend!r}")
        object.__setattr__(self, "hidden", check_widths("hidden", self.hidden))
        object.__setattr__(self, "critic_arch", check_widths("critic_arch", self.critic_arch))

    def check_rollout(self, task: str = "pmweek") -> None:
        """``n_minibatches`` against a rollout on the task ``task`` (:data:`TASK_NAMES`): a rollout is ``n_envs``
        whole episodes, ``n_envs`` × the task's horizon samples (:func:`task_horizon`), and every minibatch needs at
        least one of them; more minibatches than samples raise ``ValueError`` naming the settings (nothing is
        shrunk to fit). :func:`~membudget.agents.ppo.train_ppo` checks the task it trains on, before any work; a
        command's config, which names its task, when it is made."""
        horizon = task_horizon(task)
        samples = self.n_envs * horizon
        if self.n_minibatches > samples:
            raise ValueError(f"n_minibatches must be at most the {samples} samples of a rollout (n_envs {self.n_envs} "
                             f"x {horizon} steps per {task} episode): a minibatch needs at least one sample, got "
                             f"{self.n_minibatches}")


def check_environment_settings(config) -> None:
    """A PMWeek learner's environment settings (``per_step_cap``, ``cost_profile``, ``late_policy``), checked by
    the environment's own argument check before any work (a learner needs a per-step cap: None is refused)."""
    check_int("per_step_cap", config.per_step_cap, 1)
    check_arguments(None, config.per_step_cap, None, config.cost_profile, config.late_policy, 0, None, "binary")


def ppo_config(config: PPOConfig | None = None, **overrides) -> PPOConfig:
    """``config`` (default :class:`PPOConfig`'s validated settings) with the fields in ``overrides`` replaced."""
    return PPOConfig.resolve(config, **overrides)



POLICIES = ("per-resource", "mlp")
"""Actor of the SB3 learners: the shared per-resource network (:mod:`membudget.agents.per_resource`, the class
every PMWeek learner uses) or SB3's flat ``MultiInputPolicy`` MLP (the architecture ablation)."""


@dataclass(frozen=True)
class SB3PPOSettings(Resolvable):
    """Stable-Baselines3 PPO's settings: one definition for every SB3 learner of the package (the PMWeek allocators
    below, the tier router, the ProactiveStream and ReplayStream PPOs). The defaults are SB3's own; each learner's
    config subclasses this class and sets its own defaults (``total_timesteps`` always), so a learner's default
    lives in its config alone. ``Config.resolve(config, **overrides)`` is how a training function reads it."""

    total_timesteps: int
    """Environment steps to train for."""
    n_steps: int = 2048
    """PPO rollout length per environment per update."""
    batch_size: int = 64
    """PPO minibatch size."""
    n_epochs: int = 10
    """PPO epochs per update."""
    learning_rate: float = 3e-4
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    ent_coef: float = 0.0
    """Entropy bonus."""
    net_arch: tuple = (64, 64)
    """Hidden layer sizes of the policy and value networks (of the critic alone under the PMWeek allocators'
    per-resource actor, which has its own layers)."""
    torch_threads: int = 1
    """torch.set_num_threads for training (0: leave torch's default)."""

    MIN_TIMESTEPS: ClassVar[int] = 1
    """The fewest ``total_timesteps`` a learner accepts (0 where a run may skip PPO, e.g. a router warm-started by
    behaviour cloning alone)."""

    def __post_init__(self):
        # checked before any work: SB3 answers a batch of 1 or a one-step rollout with a bare AssertionError, and
        # trains nothing for 0 steps
        check_int("total_timesteps", self.total_timesteps, self.MIN_TIMESTEPS)
        for name in ("n_steps", "n_epochs"):
            check_int(name, getattr(self, name), 1)
        check_int("batch_size", self.batch_size, 2)
        if hasattr(self, "n_envs"):
            check_int("n_envs", self.n_envs, 1)
        rollout = self.n_steps * getattr(self, "n_envs", 1)
        if rollout < 2:
            raise ValueError(f"n_steps x n_envs must be at least 2 (PPO's advantages need two steps), got {rollout}")
        envs = self.rollout_envs()
        if envs is not None:
            self.check_rollout(*envs)
        check_int("torch_threads", self.torch_threads, 0)
        check_number("learning_rate", self.learning_rate, 0, low_open=True)
        check_number("gamma", self.gamma, 0, 1)
        check_number("gae_lambda", self.gae_lambda, 0, 1)
        check_number("ent_coef", self.ent_coef, 0)
        object.__setattr__(self, "net_arch", check_widths("net_arch", self.net_arch))

    def rollout_envs(self) -> tuple | None:
        """``(environments stepped together, how the config sets that number)``: its ``n_envs`` field, else one
        environment (the tier router, the ReplayStream PPO); None where the config alone does not say (the
        conditioned PPO: ``envs_per_budget`` × the budgets of the run, checked once they are known)."""
        return (self.n_envs, f"n_envs {self.n_envs}") if hasattr(self, "n_envs") else (1, "one environment")

    def check_rollout(self, n_envs: int, envs: str) -> None:
        """``batch_size`` against the rollout of ``n_envs`` environments (``envs``: how the config sets that number,
        for the message): a minibatch larger than the rollout's ``n_steps`` × ``n_envs`` samples cannot be drawn
        (SB3 would silently train on the whole rollout instead), so it raises ``ValueError`` naming the settings. A
        rollout that ``batch_size`` does not divide is accepted: SB3 warns and trains a smaller last minibatch."""
        rollout = self.n_steps * n_envs
        if self.batch_size > rollout:
            raise ValueError(f"batch_size must be at most the {rollout} samples of a rollout (n_steps {self.n_steps} "
                             f"x {envs}): a minibatch cannot be larger than the rollout it is drawn from, got "
                             f"{self.batch_size} (a batch_size that does not divide the rollout is accepted: the "
                             "last minibatch is then smaller)")

    @classmethod
    def of(cls, config):
        """This class's fields read off ``config`` (e.g. a command's config, which subclasses it)."""
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls)})

    def new_model(self, policy, env, seed: int, algo: str = "ppo", policy_kwargs=None):
        """SB3 ``PPO`` (``algo="maskable_ppo"``: sb3-contrib's ``MaskablePPO``) on ``env`` with these settings, on
        the CPU (small MLPs), after setting torch's threads, with :func:`silent_logger`; ``policy_kwargs`` default:
        ``net_arch``."""
        import torch

        if self.torch_threads:
            torch.set_num_threads(int(self.torch_threads))
        if algo == "maskable_ppo":
            from sb3_contrib import MaskablePPO as cls
        else:
            from stable_baselines3 import PPO as cls
        model = cls(policy, env, n_steps=self.n_steps, batch_size=self.batch_size, n_epochs=self.n_epochs,
                    learning_rate=self.learning_rate, gamma=self.gamma, gae_lambda=self.gae_lambda,
                    ent_coef=self.ent_coef, seed=seed, device="cpu", verbose=0,
                    policy_kwargs={"net_arch": list(self.net_arch)} if policy_kwargs is None else policy_kwargs)
        model.set_logger(silent_logger())
        return model


def silent_logger():
    """An SB3 logger that keeps the last values (``model.logger.name_to_value``) and writes nothing. SB3's own
    logger at ``verbose=0`` creates an empty ``SB3-<date>`` folder in the temporary directory at every ``learn``;
    a model given this one does not (``model.set_logger(...)`` with another logger restores any output)."""
    from stable_baselines3.common.logger import Logger

    return Logger(folder=None, output_formats=[])


@dataclass(frozen=True)
class _PMWeekPPOSettings(SB3PPOSettings):
    """What the two PMWeek allocators share: SB3's own PPO settings with short rollouts, a large minibatch and no
    discount (not a tuned arm: the tuned PMWeek PPO is the native one, :class:`~membudget.agents.ppo.PPOConfig`),
    the actor and the environment settings."""

    n_steps: int = 128
    batch_size: int = 512
    n_epochs: int = 5
    gamma: float = 1.0
    net_arch: tuple = (128, 128)
    policy: str = "per-resource"
    """Actor: per-resource (the shared per-resource network every PMWeek learner uses) or mlp (SB3's flat
    MultiInputPolicy, the architecture ablation)."""
    per_step_cap: int = 2
    """Per-step query cap N_max of the training and validation environments."""
    cost_profile: str = "unit"
    """Cost profile (unit, mild, skewed)."""
    late_policy: str = "expire"
    """Late policy of the controller (expire, execute)."""

    def __post_init__(self):
        super().__post_init__()
        check_int("total_timesteps", self.total_timesteps, 1)
        check_environment_settings(self)
        check_int("eval_every", self.eval_every, 0)
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")

    def env_kwargs(self) -> dict:
        """The environment settings of training and validation."""
        return dict(per_step_cap=self.per_step_cap, cost_profile=self.cost_profile, late_policy=self.late_policy)


@dataclass(frozen=True)
class PPOAllocatorConfig(_PMWeekPPOSettings):
    """:func:`train_ppo_allocator`'s settings; ``python -m membudget.train sb3-ppo`` / ``sb3-maskable-ppo`` are
    generated from these fields."""

    total_timesteps: int = 200_000
    n_envs: int = 16
    """Weeks stepped together in the native vector env."""
    eval_every: int = 20_000
    """Learning-curve point every this many environment steps (Set F1 on validation weeks 4000-4009; 0: only at
    the start and the end)."""

    def __post_init__(self):
        super().__post_init__()
        check_int("n_envs", self.n_envs, 1)


@dataclass(frozen=True)
class ConditionedPPOAllocatorConfig(_PMWeekPPOSettings):
    """:func:`train_conditioned_ppo`'s settings; ``python -m membudget.train sb3-ppo-conditioned`` is generated
    from these fields."""

    total_timesteps: int = 400_000
    """Environment steps to train for (over all budgets together)."""
    envs_per_budget: int = 8
    """Weeks per budget stepped together."""
    eval_every: int = 40_000
    """Learning-curve point every this many environment steps (validation weeks 4000-4009, every budget; 0: only
    at the start and the end)."""

    def __post_init__(self):
        super().__post_init__()
        check_int("envs_per_budget", self.envs_per_budget, 1)

    def rollout_envs(self):
        """None: the run's budgets, which this config does not hold, multiply ``envs_per_budget``
        (:func:`~membudget.agents.rl.train_conditioned_ppo` checks the rollout once it has them)."""
        return None

    def check_budgets(self, n_budgets: int) -> None:
        """``batch_size`` against a rollout across ``n_budgets`` budgets (:meth:`check_rollout`)."""
        self.check_rollout(self.envs_per_budget * n_budgets,
                           f"envs_per_budget {self.envs_per_budget} x {n_budgets} budgets")


@dataclass(frozen=True)
class ImitationSettings:
    """How BC and DAgger fit the student. :data:`DEFAULTS` are the settings chosen for ``PMWeek-v0`` on validation
    weeks 4000-4029 (``python -m membudget.bench.imitation --search``; docs/studies.md lists the trials):
    :func:`~membudget.agents.imitation.fit_bc`, :func:`~membudget.agents.imitation.fit_dagger`, ``python -m membudget.train bc | dagger`` and the RL-versus-distillation
    study all read them from here."""

    weeks: int = 40
    """Development weeks of teacher demonstrations (from week 2000)."""
    epochs: int = 30
    """Passes over the demonstrations per fit (more make the standardised student overconfident: at B20 it then
    proposes too little)."""
    width: int = 64
    """Width of both hidden layers of the :class:`PerResourceNet`."""
    context: bool = True
    """The resources see the candidates' mean first-layer activation."""
    lr: float = 3e-3
    """Adam learning rate."""
    batch: int = 256
    """States per minibatch."""
    standardize: bool = True
    """Fit on inputs scaled to mean 0 and standard deviation 1, folded into the first layer afterwards
    (:func:`fit_net`)."""
    iterations: int = 1
    """DAgger iterations after the BC fit (with the calibrated student, 1 and 2 tied on validation weeks and 3-4
    lost Set F1)."""
    calibrate: bool = True
    """Give every fitted student the proposal threshold of :data:`THRESHOLDS` with the best mean quality on the
    task's calibration episodes at the fit's budget (:func:`calibration_seeds`; PMWeek-v0: the validation weeks
    4000-4029, where PPO keeps its best point too), folded into the head's bias (:func:`with_threshold`); off: the
    network as fitted (threshold 0.5)."""

    @property
    def hidden(self) -> tuple:
        """The layer widths, ``(width, width)``."""
        return (self.width, self.width)


DEFAULTS = ImitationSettings()
"""The settings of BC and DAgger on ``PMWeek-v0``, chosen on validation weeks 4000-4029."""
CONVERSATION_DEFAULTS = ImitationSettings(weeks=12, epochs=60, width=64, context=True, lr=3e-3, batch=256,
                                          standardize=False, iterations=4, calibrate=False)
"""The settings of BC and DAgger on ``ConversationPM-v1`` (the conversation study's, not re-chosen when
:data:`DEFAULTS` were)."""

"""The study's settings, torch-free so that ``python -m membudget.train`` checks a subcommand's flags before any
heavy import: the run configs of the PMWeek training subcommands (:data:`TRAIN_COMMANDS`, whose runs live in
:mod:`~membudget.studies.rl_vs_distillation.training`), the comparison's settings (:data:`BENCH_FULL`,
:data:`BENCH_QUICK`) and its learners (:data:`LEARNERS`)."""

from __future__ import annotations

from dataclasses import dataclass

from membudget.agents.configs import (CONDITIONED_BUDGETS, DEFAULTS as IMITATION, MAX_WIDTH, TASK_NAMES,
                                      TRAIN_RANGES, ConditionedPPOAllocatorConfig, PPOAllocatorConfig, PPOConfig)
from membudget.envs.validation import check_int
from membudget.studies.runs import TrainCommand

PER_STEP_CAP = 2
"""N_max of the study's protocol (docs/protocol.md): at most two queries per step."""


@dataclass(frozen=True)
class RunOutput:
    """Settings every PMWeek training subcommand shares (every field is a command-line flag of the same name)."""

    eval_first_seed: int = 4010
    """First episode of the final evaluation (never trained on). On PMWeek-v0, weeks 4010-4029 lie in the
    validation range of docs/protocol.md, which PPO's best-checkpoint selection (``eval_episodes`` weeks from 4000)
    and the students' threshold calibration (4000-4029) also read: an in-selection figure, optimistic. The
    held-out weeks 8000-8029 / 9000-9029 are kept for final figures: ``--eval-first-seed 8000 --eval-weeks 30``,
    or ``python -m membudget.evaluate --model RUN --first-seed 8000 --n-weeks 30`` later. On ConversationPM-v1
    conversations 4000-4029 are BudgetPM's held-out analysis conversations (its validation conversations are
    3000-3009). The run's summary line says which kind it evaluated on."""
    eval_weeks: int = 20
    """Number of weeks of the final evaluation (at every budget)."""
    out: str = "runs"
    """Parent directory of the run directory."""
    name: str = ""
    """Run directory name (default: <subcommand>-<budget>-seed<seed>; ppo, bc and dagger name a task other than
    pmweek after the subcommand, e.g. ppo-conversation-B60-seed0)."""
    progress_bar: str = "auto"
    """Show progress: on, off or auto (on when attached to a terminal)."""
    learning_curve: str = "on"
    """Write learning_curve.csv / learning_curve.png (on, off)."""


@dataclass(frozen=True)
class SB3PPOConfig(RunOutput, PPOAllocatorConfig):
    """Stable-Baselines3 PPO / sb3-contrib MaskablePPO on PMWeek-v0 at one budget (membudget.agents.rl; every field
    is a flag): :class:`~membudget.agents.rl.PPOAllocatorConfig`'s fields beside the run's own."""

    budget: str = "B10"
    """Episode budget: a level (B5...B80), an integer or none."""
    seed: int = 0
    """Seeds the policy, the order of the training weeks (development seeds 2000-3999) and everything else."""


@dataclass(frozen=True)
class ConditionedPPOConfig(RunOutput, ConditionedPPOAllocatorConfig):
    """One budget-conditioned PPO trained across several budgets at once (membudget.agents.rl; every field is a
    flag): :class:`~membudget.agents.rl.ConditionedPPOAllocatorConfig`'s fields beside the run's own."""

    budgets: str = ",".join(CONDITIONED_BUDGETS)
    """Comma-separated budget levels trained at once (the target-fraction feature tells the policy which)."""
    seed: int = 0
    """Seeds the policy, the order of the training weeks (development seeds 2000-3999) and everything else."""

    def __post_init__(self):
        super().__post_init__()
        if self.budget_names():  # (none: the run refuses its --budgets)
            self.check_budgets(len(self.budget_names()))

    def budget_names(self) -> list:
        """The budget levels of ``budgets``, in order (blank entries dropped)."""
        return [b.strip() for b in str(self.budgets).split(",") if b.strip()]


@dataclass(frozen=True)
class BCConfig(RunOutput):
    """Behaviour cloning from the hindsight DP (membudget.agents.imitation; every field is a flag); DAgger's config,
    :class:`DAggerConfig`, adds its iterations. The defaults are :data:`membudget.agents.imitation.DEFAULTS`, the
    settings chosen on validation weeks; the learning rate, minibatch and input standardisation are always theirs."""

    budget: str = "B10"
    """Budget level (B5...B80)."""
    seed: int = 0
    """Seeds the student's initialisation and minibatch order."""
    train_first_seed: int = 2000
    """First training week (development range 2000-3999)."""
    train_weeks: int = IMITATION.weeks
    """Number of consecutive training weeks."""
    epochs: int = IMITATION.epochs
    """Training epochs per fit."""
    hidden: int = IMITATION.width
    """Width of both hidden layers of the per-resource network."""
    context: str = "on" if IMITATION.context else "off"
    """on: the resources see the candidates' mean first-layer activation (off: independent resources)."""
    task: str = "pmweek"
    """Environment: pmweek (PMWeek-v0; training weeks in 2000-3999) or conversation (ConversationPM-v1, from its
    exact hindsight optimum; training conversations in 2000-2999, budget levels B10...B80)."""
    torch_threads: int = 1
    """torch.set_num_threads for training (0: leave torch's default). Float sums depend on the thread count: with
    one thread a run gives the same weights on every core count, under --seeds and in the studies."""

    def __post_init__(self):
        check_int("epochs", self.epochs, 1)
        check_int("torch_threads", self.torch_threads, 0)
        check_int("hidden", self.hidden, 1, MAX_WIDTH)
        check_int("train_weeks", self.train_weeks, 1)
        first, end = TRAIN_RANGES.get(self.task, TRAIN_RANGES["pmweek"])
        if not (isinstance(self.train_first_seed, int) and first <= self.train_first_seed
                and self.train_first_seed + self.train_weeks <= end):
            raise ValueError(f"train_first_seed and train_weeks must keep the training episodes in {self.task}'s "
                             f"development range {first}-{end - 1}, got {self.train_first_seed} and "
                             f"{self.train_weeks}")


@dataclass(frozen=True)
class DAggerConfig(BCConfig):
    """DAgger from the hindsight DP (membudget.agents.imitation; every field is a flag): :class:`BCConfig`'s fields
    and the DAgger iterations after the BC fit."""

    iterations: int = IMITATION.iterations
    """DAgger iterations after the BC fit (at least 1)."""

    def __post_init__(self):
        super().__post_init__()
        check_int("iterations", self.iterations, 1)


ImitationConfig = DAggerConfig
"""The name both commands' config had before ``bc`` got its own, :class:`BCConfig` (without ``iterations``)."""


@dataclass(frozen=True)
class NativePPOConfig(RunOutput, PPOConfig):
    """PPO with the per-resource actor on the native vector env (membudget.agents.ppo; every field is a flag): the
    PPO settings are :class:`~membudget.agents.ppo.PPOConfig`'s fields with its validated defaults (the study's
    PPO), beside the run's own."""

    budget: str = "B10"
    """Episode budget: a level (B5...B80), an integer or none."""
    seed: int = 0
    """Seeds the networks, the proposals and the order of the training weeks (development seeds 2000-3999)."""
    init_from: str = ""
    """Start the actor from a fitted student (a bc / dagger run directory or its model.npz): distil-then-RL
    (validated there with learning rate 3e-4 and critic warm-up 20)."""
    bc_weeks: int = 40
    """Development weeks whose DP schedules the behaviour-cloning loss uses (with bc_coef > 0)."""
    task: str = "pmweek"
    """Environment: pmweek (PMWeek-v0) or conversation (ConversationPM-v1: the 12 development conversations,
    validation conversations from 3000, budget levels B10...B80; unit costs, no counts for the critic; engine
    autograd)."""

    def __post_init__(self):
        super().__post_init__()
        if self.task in TASK_NAMES:  # (another: refused by its flag's choices and by the run)
            self.check_rollout(self.task)



def initial_student(cfg: NativePPOConfig):
    """The student ``--init-from`` names (a bc / dagger run directory or its ``model.npz``), read and checked: a
    missing file raises ``FileNotFoundError``, anything but a saved student ``ValueError``, both naming the path."""
    import os

    path = os.path.join(cfg.init_from, "model.npz") if os.path.isdir(cfg.init_from) else cfg.init_from
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--init-from {cfg.init_from!r}: no student there (a bc / dagger run directory or "
                                "its model.npz)")
    from membudget.agents.per_resource import StudentPolicy  # torch: only once there is a file to read

    return StudentPolicy.load(path)


def check_native(cfg: NativePPOConfig) -> None:
    """``ppo``'s inputs: the student ``--init-from`` names, if any."""
    if cfg.init_from:
        initial_student(cfg)


_RUNS = "membudget.studies.rl_vs_distillation.training:"
TRAIN_COMMANDS = {
    "ppo": TrainCommand(NativePPOConfig, "PPO with the per-resource actor on the native vector env: the study's "
                                         "learner and settings (distil-then-RL with --init-from)",
                        _RUNS + "train_native", check=check_native),
    "sb3-ppo": TrainCommand(SB3PPOConfig, "Stable-Baselines3 PPO on PMWeek-v0 at one budget (per-resource actor; "
                                          "--policy mlp: SB3's flat MultiInputPolicy)",
                            _RUNS + "train_sb3", {"total_timesteps": 20_000}),
    "sb3-maskable-ppo": TrainCommand(SB3PPOConfig, "sb3-contrib MaskablePPO (candidate mask) on PMWeek-v0 at one "
                                                   "budget", _RUNS + "train_sb3_maskable", {"total_timesteps": 20_000}),
    "sb3-ppo-conditioned": TrainCommand(ConditionedPPOConfig, "one budget-conditioned SB3 PPO across B5-B20",
                                        _RUNS + "train_conditioned", {"total_timesteps": 40_000}),
    "bc": TrainCommand(BCConfig, "behaviour cloning of the hindsight DP", _RUNS + "train_bc"),
    "dagger": TrainCommand(DAggerConfig, "DAgger from the hindsight DP", _RUNS + "train_dagger"),
}
"""The PMWeek learners' ``python -m membudget.train`` subcommands. The SB3 ones train a short run unless
``--total-timesteps`` says otherwise (the library's defaults, :class:`~membudget.agents.rl.PPOAllocatorConfig`'s
200,000 steps and :class:`~membudget.agents.rl.ConditionedPPOAllocatorConfig`'s 400,000, were never tuned
either: the SB3 path is not a tuned arm)."""

BENCH_FULL = dict(
    budgets=("B5", "B10", "B20"), learner_seeds=(0, 1, 2),
    eval_seeds=tuple(range(8000, 8030)) + tuple(range(9000, 9030)), val_seeds=tuple(range(4000, 4030)),
    ppo=PPOConfig(),
    finetune=PPOConfig(total_timesteps=1_000_000, learning_rate=3e-4, critic_warmup=20),
    counts_steps=1_000_000, sb3_steps=300_000, imitation_weeks=IMITATION.weeks, epochs=IMITATION.epochs,
    dagger_iterations=IMITATION.iterations,
    bootstrap=100_000, workers=2, suite=None)
"""The full comparison. PPO's settings (``ppo``: :class:`~membudget.agents.ppo.PPOConfig`'s defaults; ``finetune``,
distil-then-RL's) were chosen on validation weeks 4000-4029 only (docs/studies.md lists the trials)."""
BENCH_QUICK = dict(
    budgets=("B10",), learner_seeds=(0, 1), eval_seeds=(8000, 8001, 9000, 9001), val_seeds=(4000, 4001),
    ppo=PPOConfig(total_timesteps=2 * 8 * 80, n_envs=8, n_minibatches=2, eval_every=8 * 80),
    finetune=PPOConfig(total_timesteps=8 * 80, n_envs=8, n_minibatches=2, learning_rate=3e-4, critic_warmup=1,
                       eval_every=8 * 80),
    counts_steps=8 * 80, sb3_steps=256, imitation_weeks=2, epochs=3, dagger_iterations=1, bootstrap=1000,
    workers=1, suite=dict(dev_seeds=range(2000, 2005), temporal_budgets=("B10",), analysis_seeds=range(4000, 4002)))
REFERENCES = ("HindsightDP", "CurrentGreedy", "Sequential", "Myopic", "Static")


@dataclass(frozen=True)
class Learner:
    """One learner of the comparison: what :func:`~membudget.studies.rl_vs_distillation.jobs.training_job` trains
    for it."""

    label: str
    """Its name in the tables and the saved results."""
    family: str
    """``ppo`` (:func:`membudget.agents.ppo.train_ppo`), ``bc``, ``dagger`` or ``sb3-ppo``."""
    settings: str = "ppo"
    """PPO only: the comparison's entry holding its :class:`~membudget.agents.configs.PPOConfig` (``ppo`` or
    ``finetune``)."""
    init: str = ""
    """PPO only: the learner whose student its actor starts from (distil-then-RL)."""
    counts_critic: bool = False
    """PPO only: its critic also reads the running TP / FP / FN."""
    actor: str = "per-resource"
    """PPO only: ``per-resource`` or ``flat-mlp`` (the architecture ablation; autograd engine)."""
    b10_only: bool = False
    """Trained at B10 only."""


LEARNER_SPECS = {learner.label: learner for learner in (
    Learner("PPO", "ppo"), Learner("DAgger→PPO", "ppo", settings="finetune", init="DAgger"),
    Learner("BC", "bc"), Learner("DAgger", "dagger"),
    Learner("PPO + counts critic", "ppo", counts_critic=True, b10_only=True),
    Learner("PPO, flat MLP", "ppo", actor="flat-mlp", b10_only=True), Learner("SB3 PPO", "sb3-ppo", b10_only=True))}
"""The learners by label. Every learner uses the per-resource network
(:class:`~membudget.agents.per_resource.PerResourceNet`) but the architecture ablation. PPO:
:func:`membudget.agents.ppo.train_ppo`; DAgger→PPO: the same PPO started from the DAgger student; PPO + counts
critic: its critic also reads the running TP / FP / FN; PPO, flat MLP: the same PPO loop and settings with a flat
MLP actor (:class:`~membudget.agents.per_resource.FlatMLPNet`); SB3 PPO: Stable-Baselines3 with the per-resource
actor (binary proposals, SB3's own settings and a small step budget: the SB3 path, not a tuned arm). The last three
at B10 only."""
LEARNERS = tuple(LEARNER_SPECS)
B10_ONLY = tuple(label for label, learner in LEARNER_SPECS.items() if learner.b10_only)

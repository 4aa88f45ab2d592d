"""Rendering shared by every environment: ``render_mode="ansi"`` returns the current state as a string,
``"human"`` prints it, ``"rgb_array"`` returns a picture of the episode so far, an ``(H, W, 3)`` uint8 array of
:data:`FRAME_SIZE` drawn on matplotlib's Agg canvas (no display needed; what Gymnasium's ``RecordVideo`` and a
notebook's ``plt.imshow`` take). Another mode is refused by the environment's constructor (``ValueError`` listing
its ``metadata["render_modes"]``), rather than warned about by Gymnasium and ignored by ``render()``.

An environment records what its picture needs only when ``render_mode="rgb_array"`` (its ``_pictures`` flag);
with any other mode stepping does no work for rendering.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

RENDER_MODES = ("ansi", "human", "rgb_array")
FRAME_SIZE = (480, 800)
"""``(height, width)`` of every ``rgb_array`` frame, in pixels (multiples of 16, as video encoders want)."""
DPI = 100

# colours of the pictures (the green / red markers differ in shape too, for readers who cannot tell the colours apart)
C_EMPTY, C_CANDIDATE, C_QUERIED, C_FUTURE = "#ffffff", "#c6dbef", "#2171b5", "#f0f0f0"
C_GOOD, C_BAD, C_MISS, C_NEUTRAL = "#1a9850", "#d73027", "#fd8d3c", "#969696"


def check_render_mode(render_mode, name: str):
    """``render_mode`` as given when it is None or one of :data:`RENDER_MODES` (every environment's
    ``metadata["render_modes"]``); anything else raises ``ValueError`` naming the environment ``name``."""
    if render_mode is not None and not (isinstance(render_mode, str) and render_mode in RENDER_MODES):
        raise ValueError(f"render_mode must be None or one of {name}'s metadata['render_modes'] "
                         f"{list(RENDER_MODES)}, got {render_mode!r}")
    return render_mode


def render_output(render_mode, text_fn, picture_fn):
    """What ``render()`` returns for ``render_mode`` (``text_fn`` / ``picture_fn`` run only when needed)."""
    if render_mode == "rgb_array":
        return picture_fn()
    if render_mode == "ansi":
        return text_fn()
    if render_mode == "human":
        print(text_fn())
    elif render_mode is None:
        gym.logger.warn("render() was called without a render_mode; pass render_mode='ansi', 'human' or "
                        "'rgb_array'")
    return None


class Render:
    """``render()`` from the environment's ``_text()`` and ``_picture()`` (put it first among the bases so it
    overrides ``gym.Env.render``)."""

    def render(self):
        """The current state as text (``render_mode="ansi"``), printed (``"human"``) or the episode so far as an
        ``(H, W, 3)`` uint8 picture (``"rgb_array"``)."""
        return render_output(self.render_mode, self._text, self._picture)

    @property
    def _pictures(self) -> bool:
        """Whether the environment records what its picture needs."""
        return self.render_mode == "rgb_array"

    def __getstate__(self):
        """A copy or a pickle leaves out the cached figure (``_view``): its canvas does not survive copying, and the
        next ``render()`` draws a new one from the recorded timeline."""
        return dict(self.__dict__, _view=None) if "_view" in self.__dict__ else dict(self.__dict__)


def new_figure(size=FRAME_SIZE):
    """A matplotlib ``Figure`` of ``size`` ``(height, width)`` pixels on its own Agg canvas (no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[1] / DPI, size[0] / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def figure_array(fig) -> np.ndarray:
    """The drawn figure as an ``(H, W, 3)`` uint8 array."""
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def blank_frame(text: str) -> np.ndarray:
    """A frame that only says ``text`` (before the first reset)."""
    fig = new_figure()
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=12)
    return figure_array(fig)


class Timeline:
    """What a rows × steps picture of a PM week (rows: resources) or a conversation (rows: memories) shows,
    recorded step by step: the candidates at each step, the queries, and the events each query resolved, by row
    and step (:data:`EVENTS`: executed on time, executed wrongly, a positive missed)."""

    EVENTS = ("executed on time (TP)", "false execution (FP)", "missed (FN)")

    def __init__(self, n_rows: int, horizon: int):
        self.candidate = np.zeros((n_rows, horizon), dtype=bool)
        self.queried = np.zeros((n_rows, horizon), dtype=bool)
        self.events = np.zeros((len(self.EVENTS), n_rows, horizon), dtype=np.int64)

    @property
    def horizon(self) -> int:
        return self.candidate.shape[1]


_EVENT_STYLE = ((C_GOOD, "o"), (C_BAD, "X"), (C_MISS, "v"))


def timeline_legend(fig, y: float = 0.005, events=Timeline.EVENTS):
    """One legend row at the bottom of ``fig`` for :class:`TimelineView`'s cells and markers (``events``: the
    names of the three event markers)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=C_CANDIDATE, edgecolor="#999999", label="candidate"),
               Patch(facecolor=C_QUERIED, edgecolor="#999999", label="queried")]
    handles += [Line2D([], [], linestyle="", marker=m, color=c, markeredgecolor="white", markersize=8, label=lab)
                for (c, m), lab in zip(_EVENT_STYLE, events)]
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, y), ncol=len(handles), fontsize=8,
               frameon=False, handletextpad=0.4, columnspacing=1.2)


class TimelineView:
    """A :class:`Timeline` drawn into the subplot spec ``spec`` of ``fig``: rows × steps cells (white: not a
    candidate, light blue: a candidate, dark blue: queried, grey: steps not played yet), a marker per event, and
    below them the budget left over the steps (the spend when ``budget`` is None). The axes, labels and lines are
    built once; :meth:`update` sets what changes, so each frame of a video redraws only the canvas.

    ``days``: ``(first step, name)`` of each day (dotted lines between days, the names on the time axis in place of
    step numbers); ``group_size``: rows per group (lines between groups, e.g. the agents of a shared budget)."""

    def __init__(self, fig, spec, row_labels, horizon: int, budget, days=(), step_name: str = "step",
                 group_size: int = 0):
        from matplotlib.colors import ListedColormap

        n_rows = len(row_labels)
        self.fig, self.horizon, self.budget = fig, horizon, budget
        grid = spec.subgridspec(2, 1, height_ratios=(5, 1), hspace=0.08)
        ax, bax = self.ax, self.bax = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
        self.cells = ax.imshow(np.zeros((n_rows, horizon)), cmap=ListedColormap(
            [C_EMPTY, C_CANDIDATE, C_QUERIED, C_FUTURE]), vmin=0, vmax=3, aspect="auto", interpolation="nearest",
            extent=(-0.5, horizon - 0.5, n_rows - 0.5, -0.5))
        self.markers = [ax.scatter([], [], s=34, c=colour, marker=marker, edgecolors="white", linewidths=0.6,
                                   zorder=3) for colour, marker in _EVENT_STYLE]
        ax.set_yticks(range(n_rows), row_labels, fontsize=7 if n_rows <= 12 else 5)
        ax.set_yticks(np.arange(n_rows + 1) - 0.5, minor=True)
        ax.grid(which="minor", axis="y", color="#d9d9d9", linewidth=0.5)
        ax.tick_params(which="minor", length=0)
        ax.tick_params(labelbottom=False)
        if group_size:
            for g in range(group_size, n_rows, group_size):
                ax.axhline(g - 0.5, color="black", linewidth=1.2)
        self.now = []
        for a in (ax, bax):
            for d, _ in days[1:]:
                a.axvline(d - 0.5, color="#636363", linestyle=":", linewidth=0.8)
            self.now.append(a.axvline(-0.5, color="black", linewidth=1.0))
            a.set_xlim(-0.5, horizon - 0.5)
        self.title = ax.set_title("", fontsize=9, loc="left")
        (self.curve,) = bax.step([], [], where="post", color=C_QUERIED, linewidth=1.5)
        if budget is not None:
            bax.set_ylim(0, max(1.0, float(budget)) * 1.05)
        bax.set_ylabel("spent" if budget is None else "budget\nleft", fontsize=7)
        bax.tick_params(labelsize=7)
        if days:
            ends = [d for d, _ in days[1:]] + [horizon]
            bax.set_xticks([(d + e - 1) / 2 for (d, _), e in zip(days, ends)], [name for _, name in days])
        bax.set_xlabel(step_name, fontsize=8)

    def update(self, timeline: Timeline, now: int, spent, title: str):
        """Show ``timeline`` after ``now`` steps, with the cumulative spend ``spent`` after each of them
        (``spent[0] = 0``) and ``title``."""
        code = timeline.candidate.astype(np.int8) + timeline.queried * (2 - timeline.candidate)
        code[:, now + 1:] = 3
        self.cells.set_data(code)
        for markers, events in zip(self.markers, timeline.events):
            rows, steps = np.nonzero(events)
            markers.set_offsets(np.column_stack([steps, rows]))
        for line in self.now:
            line.set_xdata([now - 0.5, now - 0.5])
            line.set_visible(now < self.horizon)
        spent = np.asarray(spent, dtype=float)
        left = spent if self.budget is None else self.budget - spent
        self.curve.set_data(np.arange(len(left) + 1) - 0.5, np.append(left, left[-1]))
        if self.budget is None:
            self.bax.set_ylim(0, max(1.0, float(spent[-1])) * 1.05)
        self.title.set_text(title)

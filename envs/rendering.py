"""Text rendering shared by every environment: ``render_mode="ansi"`` returns the current state as a string,
``"human"`` prints it. Another mode warns, as Gymnasium does for a mode an environment does not declare, and
``render()`` then returns ``None`` (so library defaults such as SB3's ``make_vec_env`` passing ``"rgb_array"``
still build the environment)."""

from __future__ import annotations

import gymnasium as gym

RENDER_MODES = ("ansi", "human")


def check_render_mode(render_mode, name: str):
    """``render_mode`` as given; a mode other than None, "ansi" and "human" warns."""
    if render_mode is not None and render_mode not in RENDER_MODES:
        gym.logger.warn(f"{name} renders {list(RENDER_MODES)} only; render_mode {render_mode!r} is not supported "
                        "and render() will return None")
    return render_mode


def render_text(render_mode, text_fn):
    """What ``render()`` returns for ``render_mode`` (``text_fn`` builds the text only when needed)."""
    if render_mode == "ansi":
        return text_fn()
    if render_mode == "human":
        print(text_fn())
    elif render_mode is None:
        gym.logger.warn("render() was called without a render_mode; pass render_mode='ansi' or 'human'")
    return None


class TextRender:
    """``render()`` from the environment's ``_text()`` (put it first among the bases so it overrides
    ``gym.Env.render``)."""

    def render(self):
        """The current state as text (``render_mode="ansi"``) or printed (``"human"``)."""
        return render_text(self.render_mode, self._text)

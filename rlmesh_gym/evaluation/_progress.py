"""The progress bar over counted episodes (tqdm: a notebook widget in Jupyter, text elsewhere)."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, TextIO

__all__ = ["EpisodeProgress", "progress_wanted"]


def _in_notebook() -> bool:
    # An IPython kernel (Jupyter, VS Code notebooks) as opposed to a terminal IPython shell.
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    get_ipython = getattr(shell, "get_ipython", None)
    instance = get_ipython() if get_ipython is not None else None
    return instance is not None and type(instance).__name__ == "ZMQInteractiveShell"


def progress_wanted(progress: bool, stream: TextIO | None = None) -> bool:
    """Whether to show a bar: asked for, and the output is a terminal or a notebook."""
    if not progress:
        return False
    if _in_notebook():
        return True
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class EpisodeProgress:
    """A bar that advances by one per counted episode and shows the running mean return.

    A tqdm notebook widget in Jupyter when ipywidgets is installed, a text bar on stderr
    otherwise; without tqdm installed it shows nothing (the bar is a convenience).
    """

    __slots__ = ("_bar", "_total_return", "_count")

    def __init__(self, total: int, description: str) -> None:
        self._total_return = 0.0
        self._count = 0
        self._bar: Any = None
        options = {"total": total, "desc": description, "unit": "ep", "leave": True, "dynamic_ncols": True}
        try:
            # The notebook widget needs ipywidgets; without it tqdm.auto would warn and fail, so
            # pick the text bar ourselves (it renders fine in a notebook's output too).
            if _in_notebook() and importlib.util.find_spec("ipywidgets") is not None:
                from tqdm.notebook import tqdm
            else:
                from tqdm.std import tqdm
        except ImportError:
            return
        self._bar = tqdm(**options)

    def update(self, episode_return: float) -> None:
        """One more episode counted."""
        self._count += 1
        self._total_return += episode_return
        if self._bar is not None:
            self._bar.set_postfix_str(f"mean return {self._total_return / self._count:.2f}", refresh=False)
            self._bar.update(1)

    def add_total(self, episodes: int) -> None:
        """Expect ``episodes`` more (``target_ci``'s estimate session, sized after its pilot)."""
        if self._bar is not None:
            self._bar.total += episodes
            self._bar.refresh()

    def close(self) -> None:
        """Finish the bar (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

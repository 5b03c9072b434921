"""Rendering without a display, quietly: :func:`headless_video`.

pygame (SDL) renders ``rgb_array`` frames off screen, but when it initialises its video without
a display it first tries Wayland, which prints ``error: XDG_RUNTIME_DIR is invalid or not set in
the environment.`` to stderr: it reads like a failure and is none. Where there is no display
(neither ``DISPLAY`` nor ``WAYLAND_DISPLAY``) and the user has not chosen an SDL video driver,
our own rendering calls run with ``SDL_VIDEODRIVER=dummy``, SDL's off-screen driver, and the
variable is put back as it was afterwards: the process environment a user sees is unchanged,
and a machine with a display, or an ``SDL_VIDEODRIVER`` of the user's, is left alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TypeVar

__all__ = ["headless_video", "quietly_headless"]

_Result = TypeVar("_Result")


@contextlib.contextmanager
def headless_video() -> Iterator[None]:
    """Within the block, SDL uses its dummy video driver when there is no display and none is chosen.

    >>> import os
    >>> before = os.environ.get("SDL_VIDEODRIVER")
    >>> with headless_video():
    ...     pass
    >>> os.environ.get("SDL_VIDEODRIVER") == before
    True
    """
    environ = os.environ
    if environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY") or "SDL_VIDEODRIVER" in environ:
        yield
        return
    environ["SDL_VIDEODRIVER"] = "dummy"
    try:
        yield
    finally:
        environ.pop("SDL_VIDEODRIVER", None)


def quietly_headless(function: Callable[[], _Result]) -> Callable[[], _Result]:
    """``function``, called within :func:`headless_video`."""

    def call() -> _Result:
        with headless_video():
            return function()

    return call

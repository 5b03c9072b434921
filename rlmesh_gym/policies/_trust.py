"""The one refusal for a policy file whose loading would execute code from it."""

from __future__ import annotations

from rlmesh_gym._audience import fix

__all__ = ["pickle_refusal"]


def pickle_refusal(source: object, holds: str) -> str:
    """The message refusing ``source``, which ``holds`` what loading would execute as code."""
    return (
        f"{source} {holds}; loading it executes code from the file, so it is refused by default. Pass "
        f"{fix('allow_pickle=True', '--allow-pickle')} only if you trust the file"
    )

"""Running a user's code while a policy or env is built: importing a named module, calling a
named factory. Whatever it raises, or a ``sys.exit`` in it, becomes one ``ValueError`` naming
it; on the command line what it prints goes to stderr, so stdout carries only the command's
own output (``--json`` stays parseable)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, redirect_stdout

from rlmesh_gym._audience import on_command_line

__all__ = ["running_user_code"]


@contextmanager
def running_user_code(what: str) -> Iterator[None]:
    """Run the block as ``what`` (e.g. ``"importing module 'x' for --import"``).

    ``ImportError`` passes through for the caller to word (it knows the fix to suggest);
    ``KeyboardInterrupt`` passes through.

    Raises:
        ValueError: the block raised any other exception, or called ``sys.exit``.
    """
    with redirect_stdout(sys.stderr) if on_command_line() else nullcontext():
        try:
            yield
        except ImportError:
            raise
        except SystemExit as exit_:
            raise ValueError(
                f"{what} called sys.exit({exit_.code!r}); a module to import or a factory to call must "
                "not end the process"
            ) from None
        except Exception as error:
            raise ValueError(f"{what} raised {type(error).__name__}: {error}") from error

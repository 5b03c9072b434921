"""How subcommands report problems: one ``rlmesh-gym: error:`` / ``warning:`` line on stderr."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["report_error", "report_run_failure", "report_warning"]


def report_error(message: str, code: int) -> int:
    """Print ``message`` as the command's error and return ``code`` (the exit code)."""
    print(f"rlmesh-gym: error: {message}", file=sys.stderr)
    return code


def report_warning(message: str) -> None:
    """Print ``message`` as a warning; the command goes on."""
    print(f"rlmesh-gym: warning: {message}", file=sys.stderr, flush=True)


def report_run_failure(exc: BaseException, *, json_output: bool = False) -> int:
    """Report what ``evaluate()`` or ``compare()`` raised and return the exit code: 130 on
    Ctrl+C, 1 for an evaluation that failed after it started or a server that could not be
    reached, 2 for bad input (an unknown env, an unloadable policy, a policy that does not fit
    the env's spaces, bad values).

    The episodes a failed evaluation counted are the user's work: its partial result is printed
    on stdout (as JSON with ``json_output``) before the error line, and so is an interrupted
    one's when the evaluation kept it (``EvaluationInterrupted``, a Ray evaluation).
    """
    from rlmesh_gym.evaluation import EvaluationError, EvaluationInterrupted, PolicyMismatchError
    from rlmesh_gym.runtime import RuntimeDriverError

    if isinstance(exc, KeyboardInterrupt):
        if isinstance(exc, EvaluationInterrupted):
            _print_partial(exc.partial, json_output)
        return report_error("interrupted", 130)
    if isinstance(exc, PolicyMismatchError):  # bad input, found on the first predict
        return report_error(str(exc), 2)
    if isinstance(exc, EvaluationError):
        _print_partial(exc.partial, json_output)
        return report_error(str(exc), 1)
    if isinstance(exc, ConnectionError):  # a server that could not be reached or refused us
        return report_error(str(exc), 1)
    if isinstance(exc, (ValueError, TypeError, OSError, ImportError, RuntimeDriverError)):
        return report_error(str(exc), 2)
    # anything else raised while building the env or loading a policy
    return report_error(f"{type(exc).__name__}: {exc}", 2)


def _print_partial(partial: Any, json_output: bool) -> None:
    if partial is not None and (partial.episodes or partial.pilot_episodes):
        print(partial.to_json(indent=2) if json_output else partial, flush=True)

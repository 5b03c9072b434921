"""``rlmesh-gym episodes FILE``: print a summary of an episode recording."""

from __future__ import annotations

import argparse
import os
import warnings
from typing import Any

from rlmesh_gym.cli._report import report_error, report_warning

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``episodes`` subcommand."""
    parser = subparsers.add_parser(
        "episodes",
        help="summarise an episode recording (written by eval --record)",
        description=(
            "Print what a recording holds: its header (env, lanes, autoreset mode, seed, options), "
            "one row per episode, and aggregate returns and lengths."
        ),
    )
    parser.add_argument("file", metavar="FILE", help="a recording written by 'rlmesh-gym eval --record FILE'")
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        metavar="N",
        help="list at most N episodes (default: all); the aggregate always covers every episode",
    )
    parser.add_argument(
        "--html",
        metavar="OUT.html",
        default=None,
        help="also write one self-contained HTML page (summary table, return histogram and an episode "
        "player for the episode picked in the table; opens offline)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Carry out ``rlmesh-gym episodes``; return the exit code."""
    from rlmesh_gym.recording import RecordingFormatError, RecordingWarning, load_recording

    if args.limit is not None and args.limit < 0:
        return report_error(f"--limit must be at least 0, got {args.limit}", 2)
    if os.path.isdir(args.file):
        return report_error(f"{args.file} is a directory, not a recording file", 2)
    if not os.path.exists(args.file):
        return report_error(f"no such recording file: {args.file}", 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RecordingWarning)
        try:
            recording = load_recording(args.file)
        except (RecordingFormatError, ValueError) as exc:  # ValueError: a FIFO or device
            return report_error(str(exc), 2)
        except OSError as exc:
            return report_error(f"cannot read {args.file}: {exc.strerror or exc}", 2)
    for warning in caught:
        if issubclass(warning.category, RecordingWarning):
            report_warning(str(warning.message))
    print(_render(recording, args.limit))
    if args.html is not None:
        try:
            written = recording.to_html(args.html)
        except OSError as exc:
            return report_error(f"cannot write {args.html}: {exc.strerror or exc}", 2)
        except ImportError as exc:
            return report_error(str(exc), 2)
        print(f"\nwrote {written} ({os.path.getsize(written) / 1e6:.1f} MB): open it in a browser")
    return 0


def _render(recording: Any, limit: int | None) -> str:
    header = recording.header
    options = header.options
    frame_lanes = options.get("frame_lanes") or []
    lines = [
        f"recording   {recording.path}" + ("  (partial: cut off or damaged)" if recording.partial else ""),
        f"format      version {header.version}, written by {header.writer or 'unknown'}",
        f"env         {header.env_id or '(no id)'}",
        f"lanes       {header.num_envs} (recorded: {header.describe_lanes()})",
        f"autoreset   {header.autoreset_mode}",
        f"base seed   {header.base_seed}",
        f"env kwargs  {_env_kwargs_text(header)}",
        f"options     step_stride={options.get('step_stride')} observations={options.get('observations')} "
        f"frame_lanes={list(frame_lanes)} frame_stride={options.get('frame_stride')}",
    ]
    for session in recording.sessions:
        lines.append(f"session     {session.get('session_id')} route {session.get('route_id')}")
    for end in recording.ends:
        totals = ""
        if "total_steps" in end:
            totals = f" ({end['total_steps']} steps, {end['total_episodes']} episodes)"
        lines.append(f"{end.get('status', 'end'):<11} {end.get('reason', '')}{totals}")
    if not recording.ends:
        lines.append("end         none recorded (the writer stopped before the session ended)")
    lines.append("")
    rows = recording.episode_table(limit)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        lines.append("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    hidden = len(recording.episodes) - (len(rows) - 1)
    if hidden > 0:
        lines.append(f"... {hidden} more episode(s) (use --limit to show more)")
    lines.append("")
    for label, text in recording.summary_lines():
        lines.append(f"{label:<11} {text}")
    return "\n".join(lines)


def _env_kwargs_text(header: Any) -> str:
    """The env's make kwargs as replay will use them, or why there are none."""
    if header.env_kwargs:
        return ", ".join(f"{key}={value!r}" for key, value in sorted(header.env_kwargs.items()))
    if header.env_kwargs_note:
        return f"not stored ({header.env_kwargs_note})"
    return "none"

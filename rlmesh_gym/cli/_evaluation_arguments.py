"""The options ``eval`` and ``compare`` share, defined once: how many episodes run on how many
lanes from which seed, what is printed or recorded, and how long a run may take."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = [
    "DEFAULT_EPISODES",
    "DEFAULT_NUM_ENVS",
    "DEFAULT_SEED",
    "add_episode_arguments",
    "add_output_arguments",
    "add_progress_and_device_arguments",
    "check_episode_arguments",
    "evaluation_options",
    "run_options",
]

DEFAULT_EPISODES = 100
DEFAULT_NUM_ENVS = 8
DEFAULT_SEED = 0


def add_episode_arguments(parser: argparse.ArgumentParser, *, episodes_help: str) -> None:
    """``--episodes K``, ``--num-envs N`` and ``--seed S``."""
    parser.add_argument(
        "--episodes",
        type=int,
        default=DEFAULT_EPISODES,
        metavar="K",
        help=f"{episodes_help} (default: {DEFAULT_EPISODES})",
    )
    parser.add_argument(
        "--num-envs",
        type=int,
        default=DEFAULT_NUM_ENVS,
        metavar="N",
        help=f"lanes of the vector env (default: {DEFAULT_NUM_ENVS})",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        metavar="S",
        help=f"base seed of the episodes' reset seeds (default: {DEFAULT_SEED})",
    )


def add_output_arguments(parser: argparse.ArgumentParser, *, record_metavar: str, record_help: str) -> None:
    """``--json``, ``--record`` and ``--max-steps``."""
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of tables")
    parser.add_argument("--record", default=None, metavar=record_metavar, help=record_help)
    parser.add_argument(
        "--frame-lanes",
        default=None,
        metavar="LANES",
        help="with --record: also record the rendered frames of these lanes, comma-separated (0 or 0,2); "
        "the env is built with render_mode=rgb_array",
    )
    parser.add_argument(
        "--frame-stride",
        type=int,
        default=None,
        metavar="K",
        help="with --frame-lanes: record a frame every K-th step of an episode (default: 1, every step)",
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=None,
        metavar="STEPS",
        help="fail a run after this many vector steps if its episodes are not done yet (default: no cap)",
    )


def add_progress_and_device_arguments(parser: argparse.ArgumentParser) -> None:
    """``--no-progress`` and ``--device``."""
    parser.add_argument("--no-progress", action="store_true", help="never show progress bars")
    parser.add_argument("--device", default="cpu", help="torch device of the policies (default: cpu)")


def check_episode_arguments(args: argparse.Namespace, *, min_episodes: int, why: str = "") -> str | None:
    """What is wrong with ``--episodes``, ``--num-envs`` or ``--max-steps``, or ``None``."""
    if args.episodes < min_episodes:
        return f"--episodes must be at least {min_episodes}{why}, got {args.episodes}"
    if args.num_envs < 1:
        return f"--num-envs must be at least 1, got {args.num_envs}"
    if args.max_steps is not None and args.max_steps < 1:
        return f"--max-steps must be at least 1, got {args.max_steps}"
    return _frame_problem(args)


def _frame_lanes(text: str) -> list[int] | None:
    try:
        lanes = [int(part) for part in text.split(",")]
    except ValueError:
        return None
    return lanes if all(lane >= 0 for lane in lanes) and len(set(lanes)) == len(lanes) else None


def _frame_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with ``--frame-lanes`` or ``--frame-stride``, or ``None``."""
    if args.frame_lanes is None:
        return (
            "--frame-stride needs --frame-lanes (the lanes whose frames are recorded)"
            if (args.frame_stride is not None)
            else None
        )
    if args.record is None:
        return "--frame-lanes needs --record FILE (frames are stored in the recording)"
    lanes = _frame_lanes(args.frame_lanes)
    if lanes is None:
        return (
            "--frame-lanes must be distinct lane numbers >= 0 separated by commas (0 or 0,2), "
            f"got {args.frame_lanes!r}"
        )
    too_high = [lane for lane in lanes if lane >= args.num_envs]
    if too_high and not getattr(args, "env_address", None):
        last = args.num_envs - 1
        return f"--frame-lanes {too_high} do not exist: lanes are 0..{last} (--num-envs {args.num_envs})"
    if args.frame_stride is not None and args.frame_stride < 1:
        return f"--frame-stride must be at least 1, got {args.frame_stride}"
    return None


def _record(args: argparse.Namespace) -> Any:
    """``--record``, with the frame options as :class:`~rlmesh_gym.recording.RecordingOptions`."""
    if args.frame_lanes is None:
        return args.record
    from rlmesh_gym.recording import RecordingOptions

    lanes = _frame_lanes(args.frame_lanes)
    assert lanes is not None  # checked by check_episode_arguments
    return RecordingOptions(args.record, frame_lanes=lanes, frame_stride=args.frame_stride or 1)


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The everyday keyword arguments of ``evaluate()``/``compare()``/``evaluate_fleet()`` these
    options give (the rest go in :func:`evaluation_options`)."""
    return {
        "progress": not (args.no_progress or args.json),
        "record": _record(args),
        "device": args.device,
    }


def evaluation_options(args: argparse.Namespace, **more: Any) -> Any:
    """The ``EvaluationOptions`` of ``--max-steps`` and ``--allow-pickle``, with ``more`` fields."""
    from rlmesh_gym.evaluation import EvaluationOptions

    return EvaluationOptions(max_steps=args.max_steps, allow_pickle=args.allow_pickle, **more)

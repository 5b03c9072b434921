"""``rlmesh-gym compare``: evaluate several policies on the same seeded episodes and print their
paired comparison (or JSON)."""

from __future__ import annotations

import argparse
from typing import Any

from rlmesh_gym.cli._env_arguments import add_vectorization_argument
from rlmesh_gym.cli._policy_arguments import POLICY_METAVAR
from rlmesh_gym.cli._report import report_error, report_run_failure

__all__ = ["register", "run"]

DEFAULT_EPISODES = 100
DEFAULT_NUM_ENVS = 8
DEFAULT_SEED = 0


def register(subparsers: Any) -> None:
    """Add the ``compare`` subcommand."""
    parser = subparsers.add_parser(
        "compare",
        help="compare policies on the same seeded episodes (paired differences, 95%% CIs)",
        description=(
            "Evaluate every --policy on exactly the same seeded episodes of ENV_ID (DISABLED autoreset) "
            "and print each policy's mean and IQM return with 95%% bootstrap CIs, and for each pair the "
            "mean paired difference with its CI and the probability of improvement P(a > b)."
        ),
    )
    parser.add_argument("env_id", metavar="ENV_ID", help="a registered Gymnasium env id")
    parser.add_argument(
        "--policy",
        action="append",
        required=True,
        metavar="[NAME=]POLICY",
        help=(
            f"a policy to compare (give it twice or more): {POLICY_METAVAR}, optionally named as "
            "NAME=POLICY (default name: POLICY)"
        ),
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=DEFAULT_EPISODES,
        metavar="K",
        help=f"episodes per policy, the same for all (default: {DEFAULT_EPISODES})",
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
        help=f"base seed of the episodes (default: {DEFAULT_SEED})",
    )
    add_vectorization_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON instead of tables")
    parser.add_argument(
        "--record", default=None, metavar="DIR", help="record each policy's episodes to DIR/NAME.rec"
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=None,
        metavar="STEPS",
        help="fail a policy's run after this many vector steps if its episodes are not done (default: none)",
    )
    parser.add_argument("--no-progress", action="store_true", help="never show the progress bars")
    parser.add_argument("--device", default="cpu", help="torch device of the policies (default: cpu)")
    parser.add_argument(
        "--allow-pickle",
        action="store_true",
        help="allow --policy files holding a whole pickled module (runs code from the file)",
    )
    parser.set_defaults(func=run)


def _named_policies(values: list[str]) -> dict[str, str]:
    """``NAME=POLICY`` or ``POLICY`` (named after itself) -> {name: policy}; ValueError on clashes."""
    policies: dict[str, str] = {}
    for value in values:
        name, separator, policy = value.partition("=")
        if not separator:
            name, policy = value, value
        if not name or not policy:
            raise ValueError(f"--policy {value!r}: expected POLICY or NAME=POLICY with both parts non-empty")
        if name in policies:
            raise ValueError(f"--policy name {name!r} given twice; name them apart with NAME=POLICY")
        policies[name] = policy
    if len(policies) < 2:
        raise ValueError(f"compare needs at least two --policy options, got {len(policies)}")
    return policies


def run(args: argparse.Namespace) -> int:
    """Carry out ``rlmesh-gym compare``; return the exit code."""
    if args.episodes < 2:
        return report_error(
            f"--episodes must be at least 2 (a confidence interval needs 2), got {args.episodes}", 2
        )
    if args.num_envs < 1:
        return report_error(f"--num-envs must be at least 1, got {args.num_envs}", 2)
    if args.max_steps is not None and args.max_steps < 1:
        return report_error(f"--max-steps must be at least 1, got {args.max_steps}", 2)
    try:
        policies = _named_policies(args.policy)
    except ValueError as exc:
        return report_error(str(exc), 2)

    from rlmesh_gym.evaluation import compare

    try:
        comparison = compare(
            args.env_id,
            policies,
            episodes=args.episodes,
            num_envs=args.num_envs,
            seed=args.seed,
            vectorization=args.vectorization,
            progress=not (args.no_progress or args.json),
            record=args.record,
            device=args.device,
            allow_pickle=args.allow_pickle,
            max_steps=args.max_steps,
        )
    except (KeyboardInterrupt, Exception) as exc:
        return report_run_failure(exc, json_output=args.json)
    print(comparison.to_json(indent=2) if args.json else comparison)
    return 0

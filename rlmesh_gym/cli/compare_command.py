"""``rlmesh-gym compare``: evaluate several policies on the same seeded episodes and print their
paired comparison (or JSON)."""

from __future__ import annotations

import argparse
from typing import Any

from rlmesh_gym.cli._env_arguments import add_env_package_arguments, add_vectorization_argument, env_kwargs_of
from rlmesh_gym.cli._evaluation_arguments import (
    add_episode_arguments,
    add_output_arguments,
    add_progress_and_device_arguments,
    check_episode_arguments,
    evaluation_options,
    run_options,
)
from rlmesh_gym.cli._policy_arguments import POLICY_METAVAR, add_policy_loading_arguments, load_into_factory
from rlmesh_gym.cli._report import report_error, report_run_failure

__all__ = ["register", "run"]


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
    parser.add_argument(
        "env_id", metavar="ENV_ID", help="a Gymnasium env id, or MODULE:ENV_ID from an env package"
    )
    parser.add_argument(
        "--policy",
        action="append",
        required=True,
        metavar="[NAME=]POLICY",
        help=(
            f"a policy to compare (give it twice or more): {POLICY_METAVAR}, optionally named as "
            "NAME=POLICY (default name: POLICY). With --policy-factory each is a state_dict file"
        ),
    )
    add_episode_arguments(parser, episodes_help="episodes per policy, the same for all")
    add_vectorization_argument(parser)
    add_env_package_arguments(parser)
    add_output_arguments(
        parser, record_metavar="DIR", record_help="record each policy's episodes to DIR/NAME.rec"
    )
    add_progress_and_device_arguments(parser)
    add_policy_loading_arguments(parser)
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


def _loaded_into_factory(policies: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    """Each state_dict file of ``policies`` loaded into ``--policy-factory``'s module; ``ValueError``
    names the policy that does not load."""
    loaded = {}
    for name, path in policies.items():
        try:
            loaded[name] = load_into_factory(path, args)
        except (ValueError, TypeError, OSError) as exc:
            raise ValueError(f"--policy {name!r} with --policy-factory: {exc}") from exc
    return loaded


def run(args: argparse.Namespace) -> int:
    """Carry out ``rlmesh-gym compare``; return the exit code."""
    problem = check_episode_arguments(args, min_episodes=2, why=" (a confidence interval needs 2)")
    if problem is not None:
        return report_error(problem, 2)
    try:
        policies = _named_policies(args.policy)
        env_kwargs = env_kwargs_of(args)
    except ValueError as exc:
        return report_error(str(exc), 2)

    from rlmesh_gym.evaluation import compare

    try:
        if args.policy_factory is not None:
            policies = _loaded_into_factory(policies, args)
        comparison = compare(
            args.env_id,
            policies,
            episodes=args.episodes,
            num_envs=args.num_envs,
            seed=args.seed,
            **run_options(args),
            options=evaluation_options(args, vectorization=args.vectorization, env_kwargs=env_kwargs or None),
        )
    except (KeyboardInterrupt, Exception) as exc:
        return report_run_failure(exc, json_output=args.json)
    print(comparison.to_json(indent=2) if args.json else comparison)
    return 0

"""``rlmesh-gym eval``: evaluate a policy on an env and print a summary table (or JSON)."""

from __future__ import annotations

import argparse
from typing import Any

from rlmesh_gym.cli._env_arguments import (
    add_autoreset_argument,
    add_env_package_arguments,
    add_vectorization_argument,
    env_kwargs_of,
)
from rlmesh_gym.cli._evaluation_arguments import (
    add_episode_arguments,
    add_output_arguments,
    add_progress_and_device_arguments,
    check_episode_arguments,
    evaluation_options,
    run_options,
)
from rlmesh_gym.cli._policy_arguments import (
    POLICY_METAVAR,
    add_policy_loading_arguments,
    policy_from_arguments,
)
from rlmesh_gym.cli._report import report_error, report_run_failure

__all__ = ["register", "run"]

DEFAULT_ENV_ID = "CartPole-v1"
DEFAULT_REQUEST_TIMEOUT = 300.0  # seconds; the runtime's default env/model limits
DEFAULT_CONNECT_TIMEOUT = 30.0  # seconds; long enough for a server started just before to come up


def register(subparsers: Any) -> None:
    """Add the ``eval`` subcommand."""
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a policy on a Gymnasium env (default: CartPole-v1 with the shipped trained policy)",
        description=(
            "Evaluate a policy on a Gymnasium env through the rlmesh runtime driver and print a summary. "
            "Episodes are split over the lanes by per-lane quotas, so short episodes are not "
            "over-sampled; the same env, policy, seed and lane count give the same episodes."
        ),
    )
    parser.add_argument(
        "env_id",
        nargs="?",
        default=DEFAULT_ENV_ID,
        metavar="ENV_ID",
        help=f"a Gymnasium env id, or MODULE:ENV_ID from an env package (default: {DEFAULT_ENV_ID})",
    )
    parser.add_argument(
        "--policy",
        default=None,
        metavar=POLICY_METAVAR,
        help=(
            "a saved policy file (torch.export .pt2, TorchScript, or a Stable-Baselines3 .zip), "
            "'sb3:PATH.zip', 'package.module:attr' (an nn.Module, a factory, a RuntimeModel or a "
            "numpy callable), 'random', or 'pretrained:NAME' (default: the shipped policy for ENV_ID)"
        ),
    )
    add_episode_arguments(parser, episodes_help="episodes to evaluate")
    add_autoreset_argument(parser, evaluation=True)
    add_vectorization_argument(parser)
    add_env_package_arguments(parser)
    add_output_arguments(parser, record_metavar="FILE", record_help="record the episodes to FILE (msgpack)")
    parser.add_argument(
        "--target-ci",
        type=float,
        default=None,
        metavar="HALF_WIDTH",
        help="run K episodes as a pilot, then as many rounds of K as the pilot says the mean return's "
        "95%% CI needs for half-width HALF_WIDTH (at most --max-episodes in all)",
    )
    parser.add_argument(
        "--max-episodes",
        type=int,
        default=None,
        metavar="CAP",
        help="with --target-ci: never use more than CAP episodes, pilot included (default: 100 rounds)",
    )
    add_progress_and_device_arguments(parser)
    parser.add_argument(
        "--env-address",
        action="append",
        default=None,
        metavar="HOST:PORT|@FILE",
        help="evaluate on the rlmesh env server at HOST:PORT instead of building ENV_ID (the server sets "
        "the lanes and autoreset mode; --num-envs, --autoreset and --vectorization do not apply). Repeat "
        "it, or give @FILE (one address per line, # comments), to evaluate over a fleet of servers at once",
    )
    parser.add_argument(
        "--on-server-failure",
        default="raise",
        choices=("raise", "reassign"),
        help="with several env servers: when one fails, stop with the episodes counted so far (raise, "
        "default) or run its remaining episodes on the other servers (reassign)",
    )
    parser.add_argument(
        "--policy-address",
        default=None,
        metavar="HOST:PORT",
        help="take actions from the rlmesh model server at HOST:PORT instead of --policy "
        "(tokens for either server come from $RLMESH_GYM_TOKEN)",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=DEFAULT_REQUEST_TIMEOUT,
        metavar="SECONDS",
        help="with --env-address/--policy-address: how long to wait for each reply "
        f"(default: {DEFAULT_REQUEST_TIMEOUT:g})",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=DEFAULT_CONNECT_TIMEOUT,
        metavar="SECONDS",
        help="with --env-address/--policy-address: how long to wait for each server to answer, e.g. "
        f"one started just before (default: {DEFAULT_CONNECT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="evaluate on a Ray cluster, the lanes split into --shards Ray tasks: 'local' (start one on "
        "this machine for the run, loopback only), 'auto' (the running cluster, or $RAY_ADDRESS), "
        "'ray://HOST:PORT' or a GCS address HOST:PORT (needs rlmesh-gym[ray])",
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=None,
        metavar="M",
        help="with --ray: how many Ray tasks share the --num-envs lanes (default: 2, at most --num-envs)",
    )
    add_policy_loading_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Carry out ``rlmesh-gym eval``; return the exit code."""
    problem = check_episode_arguments(args, min_episodes=1)
    if problem is not None:
        return report_error(problem, 2)
    if not args.request_timeout > 0:
        return report_error(
            f"--request-timeout must be a positive number of seconds, got {args.request_timeout}", 2
        )
    if not args.connect_timeout > 0:
        return report_error(
            f"--connect-timeout must be a positive number of seconds, got {args.connect_timeout}", 2
        )
    if args.env_address is not None and args.env_kwargs:
        return report_error("--env-kwargs apply to an env built here, not to one served at --env-address", 2)
    if args.ray is not None or args.shards is not None:
        from rlmesh_gym.cli._ray_eval import ray_problem

        problem = ray_problem(args)
        if problem is not None:
            return report_error(problem, 2)
    try:
        env_kwargs = env_kwargs_of(args)
    except ValueError as exc:
        return report_error(str(exc), 2)
    if args.env_address is not None:
        from rlmesh_gym.cli._fleet_eval import env_addresses, run_fleet_eval

        try:
            addresses = env_addresses(args.env_address)
        except ValueError as exc:
            return report_error(str(exc), 2)
        if len(addresses) > 1:
            if args.target_ci is not None or args.max_episodes is not None:
                return report_error(
                    "--target-ci and --max-episodes apply to one env server or an in-process env, "
                    "not a fleet; choose the episode count on one server first",
                    2,
                )
            return run_fleet_eval(args, addresses)
        args.env_address = addresses[0]
    if args.env_address is not None or args.policy_address is not None:
        from rlmesh_gym.cli._remote_eval import run_remote_eval

        return run_remote_eval(args)
    if args.ray is not None:
        from rlmesh_gym.cli._ray_eval import run_ray_eval

        return run_ray_eval(args, env_kwargs)
    try:
        policy = policy_from_arguments(args)
    except (ValueError, TypeError) as exc:
        return report_error(str(exc), 2)
    if policy is None:
        from rlmesh_gym.envs.env_ids import env_spec
        from rlmesh_gym.policies.resolve import default_policy

        try:
            env_spec(args.env_id)  # an unknown id is the clearer message than "no shipped policy"
            policy = default_policy(args.env_id)
        except (ValueError, ImportError) as exc:
            return report_error(str(exc), 2)

    from rlmesh_gym.evaluation import evaluate

    try:
        result = evaluate(
            args.env_id,
            policy,
            episodes=args.episodes,
            num_envs=args.num_envs,
            seed=args.seed,
            autoreset=args.autoreset,
            **run_options(args),
            target_ci=args.target_ci,
            options=evaluation_options(
                args,
                vectorization=args.vectorization,
                env_kwargs=env_kwargs or None,
                max_episodes=args.max_episodes,
            ),
        )
    except (KeyboardInterrupt, Exception) as exc:
        return report_run_failure(exc, json_output=args.json)
    if args.json:
        print(result.to_json(indent=2))
    else:
        print(result)
    return 0

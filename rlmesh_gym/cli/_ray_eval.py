"""``rlmesh-gym eval ENV_ID --ray ADDRESS [--shards M]``: the lanes as shards on a Ray cluster."""

from __future__ import annotations

import argparse
from typing import Any

from rlmesh_gym.cli._evaluation_arguments import evaluation_options, run_options
from rlmesh_gym.cli._policy_arguments import policy_from_arguments
from rlmesh_gym.cli._report import report_error, report_run_failure

__all__ = ["ray_problem", "run_ray_eval"]


def ray_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with ``--ray`` and ``--shards`` together with the other options, or ``None``."""
    if args.ray is None:
        return "--shards needs --ray ADDRESS (the Ray cluster whose tasks run the shards)"
    if args.env_address is not None:
        return (
            "--ray builds ENV_ID in the Ray workers; it cannot be combined with --env-address (a fleet of "
            "env servers): choose one"
        )
    if args.policy_address is not None:
        return "--ray runs the policy in the Ray workers; it cannot be combined with --policy-address"
    if args.target_ci is not None or args.max_episodes is not None:
        return "--target-ci and --max-episodes apply to an in-process evaluation, not to --ray"
    if args.shards is not None and args.shards < 1:
        return f"--shards must be at least 1, got {args.shards}"
    return None


def run_ray_eval(args: argparse.Namespace, env_kwargs: dict[str, Any]) -> int:
    """Evaluate ENV_ID over the Ray cluster at ``--ray``; print the result (or the partial one)."""
    from rlmesh_gym.evaluation import RayCluster, evaluate_on_ray

    try:
        policy = policy_from_arguments(args)
        if policy is None:
            from rlmesh_gym.envs.env_ids import env_spec
            from rlmesh_gym.policies.resolve import default_policy

            env_spec(args.env_id)  # an unknown id is the clearer message than "no shipped policy"
            policy = default_policy(args.env_id)
        # Without --shards: the default number, but never more than the lanes.
        shards = min(RayCluster().shards, args.num_envs) if args.shards is None else args.shards
        cluster = RayCluster(args.ray, shards=shards, imports=tuple(args.import_modules))
    except (ValueError, TypeError, ImportError) as exc:
        return report_error(str(exc), 2)
    try:
        result = evaluate_on_ray(
            args.env_id,
            policy,
            cluster=cluster,
            episodes=args.episodes,
            num_envs=args.num_envs,
            seed=args.seed,
            autoreset=args.autoreset,
            **run_options(args),
            options=evaluation_options(args, vectorization=args.vectorization, env_kwargs=env_kwargs or None),
        )
    except (KeyboardInterrupt, Exception) as exc:
        return report_run_failure(exc, json_output=args.json)
    print(result.to_json(indent=2) if args.json else result)
    return 0

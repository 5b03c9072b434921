"""``rlmesh-gym eval`` against one rlmesh env server (``--env-address``) and/or a model server
(``--policy-address``), instead of an env and policy built in this process."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from typing import Any

from rlmesh_gym.cli._env_arguments import env_kwargs_of
from rlmesh_gym.cli._evaluation_arguments import evaluation_options, run_options
from rlmesh_gym.cli._policy_arguments import policy_from_arguments
from rlmesh_gym.cli._report import report_run_failure
from rlmesh_gym.cli._serving import TOKEN_VARIABLE

__all__ = ["run_remote_eval"]


def run_remote_eval(args: argparse.Namespace) -> int:
    """``rlmesh-gym eval`` with ``--env-address`` and/or ``--policy-address``; return the exit code.

    With ``--env-address`` the env is the server's (its lanes and autoreset mode; ``--num-envs``,
    ``--autoreset`` and ``--vectorization`` do not apply) and the default policy is the shipped
    one for the server's env id. With ``--policy-address`` the actions come from that model
    server, configured with the env's contract. Tokens come from ``$RLMESH_GYM_TOKEN``.
    """
    try:
        result = asyncio.run(_remote_eval(args))
    except (KeyboardInterrupt, Exception) as error:
        return report_run_failure(error, json_output=args.json)
    print(result.to_json(indent=2) if args.json else result)
    return 0


async def _remote_eval(args: argparse.Namespace) -> Any:
    from rlmesh_gym.envs.resolve import EVALUATION_AUTORESET, make_env
    from rlmesh_gym.evaluation import evaluate_async
    from rlmesh_gym.policies.resolve import default_policy
    from rlmesh_gym.serve import RemoteEnv, RemoteModel

    token = os.environ.get(TOKEN_VARIABLE) or None
    env: Any = None
    model: Any = None
    owned_env = False
    try:
        if args.env_address is not None:
            env = await RemoteEnv.connect(
                args.env_address,
                token=token,
                connect_timeout=args.connect_timeout,
                request_timeout=args.request_timeout,
            )
        else:
            env = make_env(
                args.env_id,
                num_envs=args.num_envs,
                autoreset=args.autoreset or EVALUATION_AUTORESET,  # as evaluate() builds one
                vectorization=args.vectorization,
                env_kwargs=env_kwargs_of(args) or None,
            )
            owned_env = True
        if args.policy_address is not None:
            if args.policy is not None:
                raise ValueError("pass either --policy or --policy-address, not both")
            model = await RemoteModel.connect(
                args.policy_address,
                token=token,
                contract=env.contract,
                connect_timeout=args.connect_timeout,
                request_timeout=args.request_timeout,
            )
            policy: Any = model
        else:
            policy = policy_from_arguments(args)
            if policy is None:
                policy = default_policy(env.contract.id, served_at=args.env_address)
        result = await evaluate_async(
            env,
            policy,
            episodes=args.episodes,
            seed=args.seed,
            **run_options(args),
            target_ci=args.target_ci,
            options=evaluation_options(args, max_episodes=args.max_episodes),
        )
    except BaseException:
        # Ctrl+C (a cancellation) or an error is what the user must see: a close failing on the
        # interrupted stream must not replace it.
        with contextlib.suppress(Exception):
            await _close_peers(model, env, owned_env)
        raise
    await _close_peers(model, env, owned_env)
    return result


async def _close_peers(model: Any, env: Any, owned_env: bool) -> None:
    try:
        if model is not None:
            await model.close()
    finally:
        if env is not None and (owned_env or not env.closed):
            await env.close(5.0)

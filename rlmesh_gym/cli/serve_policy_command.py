"""``rlmesh-gym serve-policy``: serve a policy on rlmesh's gRPC ModelService from the shell.

``serve-policy [POLICY]`` serves the policy until Ctrl+C or SIGTERM (or an allowed remote
Shutdown), then stops cleanly. A served policy needs the env's spaces. By default it takes them
from the contract each route sends in ``ConfigureRoute`` (the policy is bound on the first one;
routes with other spaces are refused while a route is open). ``--env-id ENV_ID`` binds it at
startup and lets it act once on the env's first observation, so a policy that cannot act in
that env fails before serving; ``--contract-from HOST:PORT`` binds it to a running env server's
spaces (its handshake). A policy that hangs inside a call does not stop the server from
answering or stopping (docs/serving.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from rlmesh_gym.cli._policy_arguments import (
    POLICY_METAVAR,
    add_policy_loading_arguments,
    policy_from_arguments,
)
from rlmesh_gym.cli._report import report_error
from rlmesh_gym.cli._serving import add_endpoint_arguments, endpoint_options, run_server, serve_until_stopped

__all__ = ["DEFAULT_ADDRESS", "register", "run"]

DEFAULT_ADDRESS = "127.0.0.1:50052"


def register(subparsers: Any) -> None:
    """Add the ``serve-policy`` subcommand."""
    policy = subparsers.add_parser(
        "serve-policy",
        help="serve a policy over rlmesh's gRPC ModelService",
        description=(
            "Serve POLICY as an rlmesh model endpoint until Ctrl+C or SIGTERM. Its spaces come from each "
            "route's ConfigureRoute contract, or from --env-id / --contract-from at startup."
        ),
    )
    policy.add_argument(
        "policy",
        nargs="?",
        default="pretrained:cartpole",
        metavar="POLICY",
        help=(
            f"{POLICY_METAVAR}: a saved policy file, an SB3 zip, 'package.module:attr' (an nn.Module, a "
            "factory, a RuntimeModel or a numpy callable), 'random', or 'pretrained:NAME' (default: "
            "pretrained:cartpole, the shipped CartPole policy)"
        ),
    )
    source = policy.add_mutually_exclusive_group()
    source.add_argument(
        "--env-id", metavar="ENV_ID", help="bind the policy to this Gymnasium env's spaces now"
    )
    source.add_argument(
        "--contract-from",
        metavar="HOST:PORT",
        help="bind the policy to the contract of the env server at HOST:PORT now (handshake only)",
    )
    policy.add_argument(
        "--seed", type=int, default=None, help="sampling seed (random or stochastic policies)"
    )
    policy.add_argument(
        "--stochastic", action="store_true", help="sample actions instead of taking the most likely one"
    )
    policy.add_argument("--device", default="cpu", help="torch device of the policy (default: cpu)")
    add_policy_loading_arguments(policy)
    add_endpoint_arguments(policy, DEFAULT_ADDRESS)
    policy.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Carry out ``rlmesh-gym serve-policy``; return the exit code."""
    try:
        options = endpoint_options(args)
        from rlmesh_gym.serve import ModelServer
    except (ValueError, ImportError) as error:
        return report_error(str(error), 2)
    try:
        model = _load_policy(args)
    except (ValueError, TypeError, OSError, ImportError) as error:
        return report_error(str(error), 2)

    async def serve() -> None:
        bound = "spaces from each route's contract"
        contract = None
        served = model
        if args.env_id is not None:
            contract, served = await _policy_checked_in_env(model, args.policy, args.env_id)
            bound = f"bound to {args.env_id}"
        elif args.contract_from is not None:
            from rlmesh_gym.serve import fetch_contract

            contract = await fetch_contract(
                args.contract_from, token=options["token"], edition_pin=args.edition_pin
            )
            bound = f"bound to {contract.id} from {args.contract_from}"
        if contract is not None and args.env_id is None:
            served = _bound(model, contract, args.policy, "--contract-from")
        banner = (
            f"serving policy {args.policy} ({bound}, edition pin {args.edition_pin}, "
            f"token {'on' if options['token'] else 'off'})"
        )
        await serve_until_stopped(ModelServer(served, **options), banner)

    return run_server(serve)


def _bound(model: Any, contract: Any, policy: str, flag: str) -> Any:
    """``model`` bound to ``contract``'s spaces (``bind`` configures it in place or returns the
    bound model); ValueError when it has no ``bind``, naming ``flag``, which needs one."""
    from rlmesh_gym.runtime.seams import BindableModel

    if not isinstance(model, BindableModel):
        raise ValueError(f"policy {policy!r} has no bind(contract); serve it without {flag}")
    bound = model.bind(contract)
    return model if bound is None else bound


async def _policy_checked_in_env(model: Any, policy: str, env_id: str) -> tuple[Any, Any]:
    """Bind ``model`` to ``env_id``'s spaces and let it act once on a real first observation.

    Binding alone only checks that the spaces can be encoded; a policy built for another env
    (CartPole's network on MountainCar's observations) fails only when it acts. Returns the
    env's contract and the bound model; ValueError names the policy, the env and what failed.
    """
    from rlmesh_gym.envs.resolve import make_env
    from rlmesh_gym.proto import env_pb2, model_pb2
    from rlmesh_gym.runtime.message_form import MessageFormEnv, as_message_model
    from rlmesh_gym.runtime.seams import BindableModel

    env = make_env(env_id, num_envs=1)
    try:
        contract = env.contract
        if not isinstance(model, BindableModel):
            raise ValueError(f"policy {policy!r} has no bind(contract); serve it without --env-id")
        try:
            model = _bound(model, contract, policy, "--env-id")
            messages = MessageFormEnv(env)
            reset = await messages.reset(env_pb2.ResetRequest(seeds=[0]))
            request = model_pb2.PredictRequest(
                context=model_pb2.PredictContext(
                    session_id="serve-policy-check",
                    route_id=env_id,
                    request_id="serve-policy-check:0",
                    slots=[model_pb2.PredictSlot(env_index=0, episode_id=reset.response.episode_ids[0])],
                )
            )
            request.observation.CopyFrom(reset.response.observation)
            prediction = await as_message_model(model).predict(request)
            await messages.step(env_pb2.StepRequest(action=prediction.response.action))
        except Exception as error:
            raise ValueError(
                f"policy {policy!r} cannot act in {env_id}: {error} (serve a policy built for {env_id}'s "
                "spaces)"
            ) from error
        return contract, model
    finally:
        await env.close(5.0)


def _load_policy(args: argparse.Namespace) -> Any:
    """An unbound RuntimeModel for POLICY; it gets its spaces later through ``bind``."""
    if args.policy_factory is not None:
        return policy_from_arguments(args, deterministic=not args.stochastic)
    from rlmesh_gym.policies.resolve import pretrained_module, resolve_policy

    if args.policy.startswith("pretrained:"):
        shipped = pretrained_module().PRETRAINED
        name = args.policy.removeprefix("pretrained:")
        if name not in shipped:
            raise ValueError(f"no shipped policy {name!r}; shipped: {', '.join(sorted(shipped))}")
    return resolve_policy(
        args.policy,
        None,
        seed=args.seed,
        device=args.device,
        deterministic=not args.stochastic,
        allow_pickle=args.allow_pickle,
    )

"""``rlmesh-gym serve-env`` and ``rlmesh-gym serve-policy``: rlmesh gRPC endpoints from the shell.

``serve-env ENV_ID`` serves a Gymnasium env (as a ``GymVectorEnv``) on rlmesh's EnvService;
``serve-policy [POLICY]`` serves a policy on rlmesh's ModelService. Both run until Ctrl+C or
SIGTERM (or an allowed remote Shutdown), then stop cleanly: open sessions are told the server
is going away, the port is released and the env is closed.

A served policy needs the env's spaces. By default it takes them from the contract each route
sends in ``ConfigureRoute`` (the policy is bound on the first one; routes with other spaces are
refused while a route is open). ``--env-id ENV_ID`` binds it at startup and lets it act once on
the env's first observation, so a policy that cannot act in that env fails before serving;
``--contract-from HOST:PORT`` binds it to a running env server's spaces (its handshake).
A served env or policy that hangs inside a call does not stop the server from answering or
stopping (docs/serving.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import threading
import warnings
from typing import Any

from rlmesh_gym.cli._env_arguments import (
    add_autoreset_argument,
    add_env_package_arguments,
    add_vectorization_argument,
    env_kwargs_of,
)
from rlmesh_gym.cli._policy_arguments import (
    POLICY_METAVAR,
    add_policy_factory_argument,
    policy_from_arguments,
)
from rlmesh_gym.cli._report import report_error, report_run_failure, report_warning
from rlmesh_gym.cli._served_env import add_served_env_arguments, build_served_env
from rlmesh_gym.spaces.limits import (
    DEFAULT_MAX_SPACE_ELEMENTS,
    MAX_SPACE_ELEMENTS_ENV,
    set_max_space_elements,
)

__all__ = ["register", "run_remote_eval", "run_serve_env", "run_serve_policy"]

DEFAULT_ENV_ADDRESS = "127.0.0.1:50051"
DEFAULT_MODEL_ADDRESS = "127.0.0.1:50052"
TOKEN_VARIABLE = "RLMESH_GYM_TOKEN"


def register(subparsers: Any) -> None:
    """Add the ``serve-env`` and ``serve-policy`` subcommands."""
    env = subparsers.add_parser(
        "serve-env",
        help="serve a Gymnasium env over rlmesh's gRPC EnvService",
        description=(
            "Serve ENV_ID as an rlmesh env endpoint (one client session at a time) until Ctrl+C or "
            "SIGTERM. rlmesh's runtime and clients, and 'rlmesh-gym eval --env-address', can drive it."
        ),
    )
    env.add_argument("env_id", metavar="ENV_ID", help="a registered Gymnasium env id, or MODULE:ENV_ID")
    env.add_argument(
        "--num-envs", type=int, default=1, metavar="N", help="lanes stepped together (default: 1)"
    )
    add_autoreset_argument(env)
    add_vectorization_argument(env)
    add_env_package_arguments(env)
    env.add_argument(
        "--render",
        action="store_true",
        help="build the env with render_mode='rgb_array' so Render returns PNGs",
    )
    add_served_env_arguments(env)
    env.add_argument(
        "--strict-autoreset-reward",
        action="store_true",
        help="under NEXT_STEP, refuse a non-zero reward on a lane's autoreset step with an INTERNAL error, "
        "as rlmesh's env server does (default: accept it; it is not counted)",
    )
    _add_endpoint_arguments(env, DEFAULT_ENV_ADDRESS)
    env.set_defaults(func=run_serve_env)

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
    policy.add_argument(
        "--allow-pickle",
        action="store_true",
        help="allow a policy file holding a whole pickled module (runs code from the file)",
    )
    add_policy_factory_argument(policy)
    _add_endpoint_arguments(policy, DEFAULT_MODEL_ADDRESS)
    policy.set_defaults(func=run_serve_policy)


def _add_endpoint_arguments(parser: argparse.ArgumentParser, default_address: str) -> None:
    parser.add_argument(
        "--address",
        default=default_address,
        metavar="HOST:PORT",
        help=f"where to listen (default: {default_address}; port 0 picks a free port). Binding anything "
        "but 127.0.0.1 without --token prints a warning",
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"require this token ('authorization' metadata) on every call (default: ${TOKEN_VARIABLE}, "
        "else none)",
    )
    parser.add_argument(
        "--edition-pin",
        default="b3",
        metavar="PIN",
        help="edition pin peers must match: b3 (rlmesh 0.1.0b3, default), rc1, or a 64-hex SHA-256",
    )
    parser.add_argument(
        "--allow-remote-shutdown", action="store_true", help="let a Shutdown call stop the server"
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="end a session whose client sends nothing for this long; the server goes on (default: never)",
    )
    parser.add_argument(
        "--idle-shutdown",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop the whole server once no call or session has been open for this long, as rlmesh's "
        "idle timeout (default: never)",
    )
    parser.add_argument(
        "--max-message-mb",
        type=float,
        default=256.0,
        metavar="MB",
        help="largest gRPC message sent or received, in MiB (default: 256, as rlmesh)",
    )
    parser.add_argument(
        "--max-space-elements",
        type=int,
        default=None,
        metavar="N",
        help="refuse a declared space one value of which holds more than N elements, before allocating "
        f"anything for it (default: ${MAX_SPACE_ELEMENTS_ENV}, else {DEFAULT_MAX_SPACE_ELEMENTS})",
    )


def _endpoint_options(args: argparse.Namespace) -> dict[str, Any]:
    """The server keyword arguments common to both commands; ValueError names a bad flag."""
    for flag, value in (("--idle-timeout", args.idle_timeout), ("--idle-shutdown", args.idle_shutdown)):
        if value is not None and not value > 0:
            raise ValueError(f"{flag} must be > 0 seconds, got {value}")
    if not 0.001 <= args.max_message_mb <= 2047:
        raise ValueError(f"--max-message-mb must be between 0.001 and 2047, got {args.max_message_mb}")
    if args.max_space_elements is not None:
        if args.max_space_elements < 1:
            raise ValueError(f"--max-space-elements must be >= 1, got {args.max_space_elements}")
        set_max_space_elements(args.max_space_elements)
    token = args.token if args.token is not None else os.environ.get(TOKEN_VARIABLE) or None
    return {
        "address": args.address,
        "token": token,
        "edition_pin": args.edition_pin,
        "allow_remote_shutdown": args.allow_remote_shutdown,
        "idle_timeout": args.idle_timeout,
        "idle_shutdown": args.idle_shutdown,
        "max_message_bytes": int(args.max_message_mb * 1024 * 1024),
    }


async def _serve_until_stopped(server: Any, banner: str) -> None:
    """Start ``server``, print where it listens, and stop it on Ctrl+C, SIGTERM or remote Shutdown."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    installed = []
    # asyncio signal handlers need the main thread of a POSIX process; elsewhere (Windows, or a
    # caller's worker thread) Ctrl+C arrives as KeyboardInterrupt instead.
    if sys.platform != "win32" and threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
            installed.append(signum)
    try:
        from rlmesh_gym.serve.endpoint import InsecureBindWarning

        with warnings.catch_warnings():
            # Printed below as one plain line instead of a Python warning with a source location.
            warnings.simplefilter("ignore", InsecureBindWarning)
            await server.start()
        if server.exposure_warning:
            report_warning(server.exposure_warning)
        try:
            print(f"rlmesh-gym: {banner} on {server.address}", flush=True)
        except BrokenPipeError:  # nobody reads the banner (`| head -0`): stop serving, quietly
            await server.stop(grace=0)
            raise
        stopped = asyncio.ensure_future(server.wait_closed())
        signalled = asyncio.ensure_future(stop.wait())
        await asyncio.wait({stopped, signalled}, return_when=asyncio.FIRST_COMPLETED)
        signalled.cancel()
        await server.stop(grace=2.0)
        await stopped
        reason = server.stop_reason
        suffix = f" ({reason})" if reason not in (None, "stopped") else ""
        print(f"rlmesh-gym: stopped serving on {server.address}{suffix}", flush=True)
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


def run_serve_env(args: argparse.Namespace) -> int:
    """Carry out ``rlmesh-gym serve-env``; return the exit code."""
    if args.num_envs < 1:
        return report_error(f"--num-envs must be at least 1, got {args.num_envs}", 2)
    try:
        options = _endpoint_options(args)
        from rlmesh_gym.serve import EnvServer
    except (ValueError, ImportError) as error:
        return report_error(str(error), 2)
    from rlmesh_gym.runtime import AutoresetMode

    try:
        extra = {**env_kwargs_of(args), **({"render_mode": "rgb_array"} if args.render else {})}
        env = build_served_env(args, **extra)
    except ValueError as error:
        return report_error(str(error), 2)
    contract = env.contract
    mode = AutoresetMode.from_wire(contract.autoreset_mode).name
    banner = (
        f"serving {contract.id} ({env.num_envs} lane(s), autoreset {mode}, edition pin {args.edition_pin}, "
        f"token {'on' if options['token'] else 'off'})"
    )

    async def serve() -> None:
        server = EnvServer(env, strict_autoreset_reward=args.strict_autoreset_reward, **options)
        try:
            await _serve_until_stopped(server, banner)
        finally:
            if server.call_in_progress:
                # Closing an env that is inside a call could block or crash; the process exits anyway.
                report_warning(
                    "the env is still inside a call that never returned (a hung step?); not closing it"
                )
            else:
                await env.close(5.0)

    return _run_server(serve)


def run_serve_policy(args: argparse.Namespace) -> int:
    """Carry out ``rlmesh-gym serve-policy``; return the exit code."""
    try:
        options = _endpoint_options(args)
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
        if args.env_id is not None:
            contract = await _policy_checked_in_env(model, args.policy, args.env_id)
            bound = f"bound to {args.env_id}"
        elif args.contract_from is not None:
            from rlmesh_gym.serve import fetch_contract

            contract = await fetch_contract(
                args.contract_from, token=options["token"], edition_pin=args.edition_pin
            )
            bound = f"bound to {contract.id} from {args.contract_from}"
        if contract is not None and args.env_id is None:
            bind = getattr(model, "bind", None)
            if bind is None:
                raise ValueError(f"policy {args.policy!r} has no bind(contract); serve it without --env-id")
            bind(contract)
        banner = (
            f"serving policy {args.policy} ({bound}, edition pin {args.edition_pin}, "
            f"token {'on' if options['token'] else 'off'})"
        )
        await _serve_until_stopped(ModelServer(model, **options), banner)

    return _run_server(serve)


def _run_server(serve: Any) -> int:
    from rlmesh_gym.serve import RemoteConnectionError

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader of the output went away; cli.main ends quietly
        raise
    except OSError as error:  # includes RemoteConnectionError (--contract-from) and a taken port
        code = 2 if isinstance(error, RemoteConnectionError) else 1
        return report_error(str(error), code)
    except (ValueError, TypeError) as error:
        return report_error(str(error), 2)
    return 0


async def _policy_checked_in_env(model: Any, policy: str, env_id: str) -> Any:
    """Bind ``model`` to ``env_id``'s spaces and let it act once on a real first observation.

    Binding alone only checks that the spaces can be encoded; a policy built for another env
    (CartPole's network on MountainCar's observations) fails only when it acts. Returns the
    env's contract; ValueError names the policy, the env and what failed.
    """
    from rlmesh_gym.envs.resolve import make_env
    from rlmesh_gym.proto import env_pb2, model_pb2

    env = make_env(env_id, num_envs=1)
    try:
        contract = env.contract
        bind = getattr(model, "bind", None)
        if bind is None:
            raise ValueError(f"policy {policy!r} has no bind(contract); serve it without --env-id")
        try:
            bind(contract)
            reset = await env.reset(env_pb2.ResetRequest(seeds=[0]))
            request = model_pb2.PredictRequest(
                context=model_pb2.PredictContext(
                    session_id="serve-policy-check",
                    route_id=env_id,
                    request_id="serve-policy-check:0",
                    slots=[model_pb2.PredictSlot(env_index=0, episode_id=reset.response.episode_ids[0])],
                )
            )
            request.observation.CopyFrom(reset.response.observation)
            prediction = await model.predict(request)
            await env.step(env_pb2.StepRequest(action=prediction.response.action))
        except Exception as error:
            raise ValueError(
                f"policy {policy!r} cannot act in {env_id}: {error} (serve a policy built for {env_id}'s "
                "spaces)"
            ) from error
        return contract
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


class _UsageError(ValueError):
    """A command line that cannot work, found before anything was connected."""


async def _remote_eval(args: argparse.Namespace) -> Any:
    from rlmesh_gym.envs.resolve import make_env
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
                autoreset=args.autoreset,
                vectorization=args.vectorization,
            )
            owned_env = True
        if args.policy_address is not None:
            if args.policy is not None:
                raise _UsageError("pass either --policy or --policy-address, not both")
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
            progress=not (args.no_progress or args.json),
            record=args.record,
            device=args.device,
            allow_pickle=args.allow_pickle,
            max_steps=args.max_steps,
            target_ci=args.target_ci,
            max_episodes=args.max_episodes,
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

"""``rlmesh-gym inspect``: print the rlmesh contract of a Gymnasium env."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rlmesh_gym.cli._env_arguments import add_autoreset_argument, add_env_package_arguments, env_kwargs_of
from rlmesh_gym.cli._report import report_error

__all__ = ["contract_summary", "register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``inspect`` subcommand."""
    parser = subparsers.add_parser(
        "inspect",
        help="print the rlmesh contract of a Gymnasium env (spaces, autoreset, lanes, metadata)",
        description="Build ENV_ID as a vector env and print the contract the rlmesh runtime sees.",
    )
    parser.add_argument(
        "env_id", metavar="ENV_ID", help="a registered Gymnasium env id, or MODULE:ENV_ID for an env package"
    )
    parser.add_argument("--num-envs", type=int, default=1, metavar="N", help="lanes (default: 1)")
    add_autoreset_argument(parser)
    add_env_package_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the contract as JSON")
    parser.set_defaults(func=run)


def contract_summary(contract: Any) -> dict[str, Any]:
    """The readable parts of an ``EnvContract``: spaces as gymnasium reprs, metadata as Python values."""
    from rlmesh_gym.runtime import AutoresetMode
    from rlmesh_gym.spaces import gym_space
    from rlmesh_gym.spaces.meta import from_meta_map

    return {
        "id": contract.id,
        "num_envs": int(contract.num_envs),
        "autoreset": AutoresetMode.from_wire(contract.autoreset_mode).value,
        "render_mode": contract.render_mode or None,
        "observation_space": repr(gym_space(contract.observation_space, name="observation_space")),
        "action_space": repr(gym_space(contract.action_space, name="action_space")),
        "metadata": from_meta_map(contract.metadata) if contract.HasField("metadata") else {},
    }


def _format(summary: dict[str, Any]) -> str:
    rows = [
        ("id", summary["id"]),
        ("num_envs", str(summary["num_envs"])),
        ("autoreset", summary["autoreset"]),
        ("render_mode", summary["render_mode"] or "(none)"),
        ("observation_space", summary["observation_space"]),
        ("action_space", summary["action_space"]),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    metadata = summary["metadata"]
    if metadata:
        lines.append("metadata")
        key_width = max(len(str(key)) for key in metadata)
        lines.extend(f"  {key!s:<{key_width}}  {value!r}" for key, value in sorted(metadata.items()))
    else:
        lines.append(f"{'metadata':<{width}}  (none)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Carry out ``rlmesh-gym inspect``; return the exit code."""
    if args.num_envs < 1:
        return report_error(f"--num-envs must be at least 1, got {args.num_envs}", 2)
    from rlmesh_gym.envs.resolve import make_env

    try:
        env = make_env(args.env_id, args.num_envs, args.autoreset, env_kwargs=env_kwargs_of(args))
    except ValueError as exc:  # a bad option, an unknown id, or an env that cannot be built
        return report_error(str(exc), 2)
    try:
        summary = contract_summary(env.contract)
    finally:
        env.close_sync()
    if args.json:
        print(json.dumps(summary, indent=2, default=repr))
    else:
        print(_format(summary))
    return 0

"""``rlmesh-gym eval`` over several env servers: ``--env-address A --env-address B`` or ``@FILE``."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Sequence

from rlmesh_gym.cli._evaluation_arguments import evaluation_options, run_options
from rlmesh_gym.cli._policy_arguments import policy_from_arguments
from rlmesh_gym.cli._report import report_error, report_run_failure
from rlmesh_gym.cli._serving import TOKEN_VARIABLE

__all__ = ["env_addresses", "run_fleet_eval"]


def env_addresses(values: Sequence[str]) -> list[str]:
    """The addresses of the ``--env-address`` values, each ``HOST:PORT`` or ``@FILE``.

    A file holds one address per line; blank lines and ``#`` comments are skipped.
    ``ValueError`` names an unreadable or empty file and an address given twice.
    """
    addresses: list[str] = []
    for value in values:
        if not value.startswith("@"):
            addresses.append(value.strip())
            continue
        path = value[1:]
        try:
            with open(path, encoding="utf-8") as lines:
                found = [line.split("#", 1)[0].strip() for line in lines]
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read env addresses from {path!r}: {exc}") from exc
        found = [address for address in found if address]
        if not found:
            raise ValueError(f"{path!r} holds no env address (expected one HOST:PORT per line)")
        addresses.extend(found)
    if any(not address for address in addresses):
        raise ValueError("--env-address must be HOST:PORT or @FILE, got an empty value")
    twice = sorted({a for a in addresses if addresses.count(a) > 1})
    if twice:
        raise ValueError(
            f"env server {twice[0]} is given twice; a server runs one session at a time "
            "(serve more lanes with serve-env --num-envs instead)"
        )
    return addresses


def run_fleet_eval(args: argparse.Namespace, addresses: list[str]) -> int:
    """Evaluate over the env servers at ``addresses``; print the result (or the partial one)."""
    from rlmesh_gym.evaluation import evaluate_fleet

    if args.policy is not None and args.policy_address is not None:
        return report_error("pass either --policy or --policy-address, not both", 2)
    token = os.environ.get(TOKEN_VARIABLE) or None
    try:
        policy = policy_from_arguments(args)
        if policy is None and args.policy_address is None:
            policy = _shipped_policy(addresses[0], token)
        result = evaluate_fleet(
            addresses,
            policy,
            episodes=args.episodes,
            seed=args.seed,
            on_server_failure=args.on_server_failure,
            **run_options(args),
            options=evaluation_options(args),
            token=token,
            connect_timeout=args.connect_timeout,
            request_timeout=args.request_timeout,
            policy_address=args.policy_address,
        )
    except (KeyboardInterrupt, Exception) as exc:
        return report_run_failure(exc, json_output=args.json)
    print(result.to_json(indent=2) if args.json else result)
    return 0


def _shipped_policy(address: str, token: str | None) -> str:
    """The shipped policy of the env the first server serves; ``ValueError`` when there is none."""
    from rlmesh_gym.policies.resolve import default_policy
    from rlmesh_gym.serve import fetch_contract

    contract = asyncio.run(fetch_contract(address, token=token))
    return default_policy(contract.id, served_at=address)

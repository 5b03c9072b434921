"""The command-line options that say how a policy is loaded, shared by ``eval``, ``compare`` and
``serve-policy``."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["POLICY_METAVAR", "add_policy_loading_arguments", "load_into_factory", "policy_from_arguments"]

POLICY_METAVAR = "PATH|sb3:PATH|module:attr|random|pretrained:NAME"


def add_policy_loading_arguments(parser: argparse.ArgumentParser) -> None:
    """``--allow-pickle``, and ``--policy-factory module:attr``: the nn.Module a state_dict file is
    loaded into."""
    parser.add_argument(
        "--allow-pickle",
        action="store_true",
        help="allow a policy file holding a whole pickled module (runs code from the file)",
    )
    parser.add_argument(
        "--policy-factory",
        default=None,
        metavar="module:attr",
        help="for a policy file holding a state_dict: the class or zero-argument function that builds "
        "the nn.Module to load it into (e.g. rlmesh_gym.policies.pretrained:MLPPolicy)",
    )


def policy_from_arguments(args: argparse.Namespace, *, deterministic: bool = True) -> Any:
    """``args.policy`` as given, or with ``--policy-factory`` an unbound ``TorchPolicy`` holding the
    state_dict file ``args.policy`` loaded into the factory's module.

    Raises:
        ValueError: ``--policy-factory`` without a policy file, or a factory that cannot be used.
    """
    if args.policy_factory is None:
        return args.policy
    if args.policy is None:
        raise ValueError("--policy-factory needs --policy PATH, the state_dict file to load into it")
    return load_into_factory(args.policy, args, deterministic=deterministic)


def load_into_factory(path: str, args: argparse.Namespace, *, deterministic: bool = True) -> Any:
    """An unbound ``TorchPolicy``: the state_dict file ``path`` loaded into the module that
    ``--policy-factory`` builds, on ``--device``.

    Raises:
        ValueError: a factory that cannot be used, or a file that does not load into its module.
    """
    from rlmesh_gym.policies import TorchPolicy
    from rlmesh_gym.policies.resolve import import_reference

    factory_reference = args.policy_factory
    factory = import_reference(factory_reference, what="--policy-factory")
    if not callable(factory):
        raise ValueError(
            f"--policy-factory {factory_reference!r} names a {type(factory).__name__}, expected a class or "
            "a zero-argument function returning the nn.Module"
        )
    return TorchPolicy.load(
        path, factory=factory, device=args.device, deterministic=deterministic, seed=args.seed
    )

"""Env ids from env packages: ``module:EnvId``, imported modules, and unknown-id errors naming both."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

import gymnasium

from rlmesh_gym._audience import fix
from rlmesh_gym._user_code import running_user_code

__all__ = [
    "UnknownEnvIdError",
    "contract_env_id",
    "env_spec",
    "import_env_packages",
    "registered_env_id",
    "unknown_env_id",
]


class UnknownEnvIdError(ValueError, gymnasium.error.UnregisteredEnv):
    """An env id gymnasium does not know; the message says how to name envs from env packages.

    A ``ValueError`` for callers of this package, and still gymnasium's ``UnregisteredEnv``.
    """


def unknown_env_id(env_id: str, error: BaseException) -> UnknownEnvIdError:
    """The error for ``env_id`` that gymnasium refused with ``error``, naming both ways to register it."""
    module, _, name = env_id.rpartition(":")
    if module:
        hint = f"importing {module!r} did not register {name!r}; gymnasium.pprint_registry() lists the ids"
    else:
        # ALE's ids are the ones users meet most; any other package is named PACKAGE.
        package = "ale_py" if name.startswith("ALE/") else "PACKAGE"
        hint = (
            f"if it comes from an env package, name the package in the id ({package}:{env_id}) or import "
            f"it first ({fix(f'import {package}', f'--import {package}')})"
        )
    return UnknownEnvIdError(f"unknown env id {env_id!r}: {str(error).rstrip('.')}; {hint}")


def registered_env_id(env_id: str) -> str:
    """The id gymnasium registered, however ``env_id`` is spelled: ``module:EnvId`` gives ``EnvId``.

    >>> registered_env_id("minigrid:MiniGrid-Empty-5x5-v0"), registered_env_id("CartPole-v1")
    ('MiniGrid-Empty-5x5-v0', 'CartPole-v1')
    """
    return env_id.rpartition(":")[2]


def contract_env_id(env: gymnasium.Env | gymnasium.vector.VectorEnv) -> str:
    """The id an env's contract carries: its spec's id; for a ``SyncVectorEnv`` built by hand
    (no spec), its first env's spec id; else the class name of the env (or of its first env).

    >>> class Walk1D(gymnasium.Env):
    ...     pass
    >>> contract_env_id(gymnasium.make("CartPole-v1")), contract_env_id(Walk1D())
    ('CartPole-v1', 'Walk1D')
    """
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    unwrapped = env.unwrapped
    if isinstance(unwrapped, gymnasium.vector.SyncVectorEnv) and unwrapped.envs:
        return contract_env_id(unwrapped.envs[0])
    return type(unwrapped).__name__


def env_spec(env_id: str) -> gymnasium.envs.registration.EnvSpec:
    """gymnasium's spec of ``env_id``, importing ``module`` first for a ``module:EnvId`` id.

    Raises:
        UnknownEnvIdError: gymnasium has no such id (the message names both ways to register it).
        ValueError: the module of a ``module:EnvId`` id cannot be imported.
    """
    module, _, name = env_id.rpartition(":")
    if module:
        import_env_packages([module])
    try:
        return gymnasium.spec(name)
    except gymnasium.error.UnregisteredEnv as error:
        raise unknown_env_id(env_id, error) from error


def import_env_packages(modules: Iterable[str]) -> None:
    """Import each module, so that the env ids it registers with gymnasium become known.

    Raises:
        ValueError: a module cannot be imported, raises while it is, or calls ``sys.exit`` (the
            message names it and the error).
    """
    for module in modules:
        try:
            with running_user_code(f"importing env package {module!r}"):
                importlib.import_module(module)
        except ImportError as error:
            raise ValueError(
                f"cannot import env package {module!r}: {error}; install the package that provides "
                "it, or run from the directory that holds it, or add that directory to PYTHONPATH"
            ) from error

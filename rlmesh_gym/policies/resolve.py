"""Turn what users name as a policy (a module, a callable, a file, ``"random"``,
``"pretrained:NAME"``, ``"sb3:PATH.zip"``, ``"package.module:attr"``, a RuntimeModel) into the
``RuntimeModel`` the driver or a ``ModelServer`` runs; used by ``evaluate()``, ``compare()``,
the fleet and the command line (docs/design/layering.md#inputs).

:func:`resolve_policy` is the entry point; :func:`default_policy` is the rule for "no policy
given" (the policy shipped for the env id, else a clear error).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any

from rlmesh_gym._audience import fix
from rlmesh_gym._regular_file import require_regular_file
from rlmesh_gym._user_code import running_user_code
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.seams import BindableModel, is_array_model, is_runtime_model

__all__ = [
    "default_policy",
    "describe_policy",
    "import_reference",
    "load_policy_object",
    "policy_file",
    "pretrained_module",
    "resolve_policy",
    "shipped_policy",
]

_PRETRAINED_PREFIX = "pretrained:"
_SB3_PREFIX = "sb3:"


def _torch_loaded() -> Any:
    # Torch objects can only exist if torch was imported; never import it just to check.
    return sys.modules.get("torch")


def _is_torch_module(obj: Any) -> bool:
    torch = _torch_loaded()
    if torch is None:
        return False
    return isinstance(obj, (torch.nn.Module, torch.jit.ScriptModule, torch.jit.ScriptFunction))


def _takes_tensors(fn: Any) -> bool:
    """Whether a callable's first parameter is annotated ``torch.Tensor`` (the torch-callable signal)."""
    torch = _torch_loaded()
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if not parameters:
        return False
    annotation = parameters[0].annotation
    if isinstance(annotation, str):  # postponed annotations: compare the written name
        return annotation in ("torch.Tensor", "Tensor")
    return torch is not None and annotation is torch.Tensor


def describe_policy(policy: Any) -> str:
    """A short human-readable name of what was passed as ``policy`` (for results and the CLI).

    An object whose class defines its own ``__str__`` describes itself (a ``RemoteModel`` names
    its server, a ``TorchPolicy`` loaded from a file names the file).
    """
    if isinstance(policy, str):
        return policy
    if isinstance(policy, os.PathLike):
        return os.fspath(policy)
    cls: type[object] = type(policy)
    if cls.__str__ is not object.__str__ and not _is_torch_module(policy):
        return str(policy)
    if inspect.isfunction(policy) or inspect.ismethod(policy):
        return f"{policy.__module__}.{policy.__qualname__}"
    return cls.__qualname__


def pretrained_module() -> Any:
    """``rlmesh_gym.policies.pretrained``; an ``ImportError`` saying how to get torch without it."""
    try:
        from rlmesh_gym.policies import pretrained
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        raise ImportError(
            "the shipped policies are torch modules, and torch is not installed: "
            "pip install 'rlmesh-gym[torch]'"
        ) from exc
    return pretrained


def shipped_policy(env_id: str) -> str | None:
    """The ``"pretrained:NAME"`` reference of the policy shipped for ``env_id``, or ``None``."""
    for name, entry in sorted(pretrained_module().PRETRAINED.items()):
        if entry.env_id == env_id:
            return f"{_PRETRAINED_PREFIX}{name}"
    return None


def default_policy(env_id: str, *, served_at: str | None = None) -> str:
    """The policy to use when none is given: the shipped policy for ``env_id``.

    ``served_at`` names the server whose env this is, for the message.

    Raises:
        ValueError: no policy is shipped for ``env_id`` (the message says what to pass instead).
        ImportError: torch, which the shipped policies need, is not installed.
    """
    reference = shipped_policy(env_id)
    if reference is not None:
        return reference
    where = "" if served_at is None else f" served at {served_at}"
    raise ValueError(
        f"no {fix('policy', '--policy')} given and no shipped policy for {env_id!r}{where}; pass "
        + fix(
            "a policy (a path, 'package.module:attr', 'random', a module, a callable or a RuntimeModel)",
            "--policy PATH, --policy package.module:attr, --policy random or --policy-address HOST:PORT",
        )
    )


def import_reference(reference: str, *, what: str = "policy") -> Any:
    """The object ``"package.module:attr"`` names (``attr`` may be dotted), not called.

    ``what`` names the option in error messages. A module that is not installed is searched for
    in the working directory too when the command line runs (see ``rlmesh_gym.cli.main``).
    """
    module_name, _, attr = reference.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{what} reference {reference!r} must look like 'package.module:attr'")
    try:
        with running_user_code(f"importing module {module_name!r} for {what} {reference!r}"):
            target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"cannot import module {module_name!r} for {what} {reference!r}: {exc} (install the package "
            "that provides it, or run from the directory that holds it, or add that directory to "
            "PYTHONPATH)"
        ) from exc
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(
                f"module {module_name!r} has no attribute {attr!r} ({what} {reference!r})"
            ) from None
    return target


def load_policy_object(reference: str) -> Any:
    """Import ``"package.module:attr"`` (``attr`` may be dotted) and return the object.

    A class or a zero-argument factory is called to produce the policy; any other object
    (an ``nn.Module`` instance, a ``RuntimeModel``, a policy callable taking observations) is
    returned as is.
    """
    target = import_reference(reference)
    if inspect.isclass(target) or (_is_factory(target) and not _is_torch_module(target)):
        with running_user_code(f"calling factory {reference!r} with no arguments"):
            target = target()
    return target


def _is_factory(obj: Any) -> bool:
    # A plain function that can be called with no arguments builds the policy; a function that
    # needs an argument is the policy itself (it takes observations).
    if not (inspect.isfunction(obj) or inspect.ismethod(obj)):
        return False
    try:
        inspect.signature(obj).bind()
    except TypeError:
        return False
    return True


def policy_file(policy: Any) -> tuple[str, bool] | None:
    """The file ``policy`` names and whether it was named ``sb3:PATH``, or ``None`` when it names
    none (``"random"``, ``"pretrained:NAME"``, ``"package.module:attr"``, an object).

    The same reading as :func:`resolve_policy`'s: a ``str`` or ``os.PathLike`` path, or
    ``"sb3:PATH.zip"``; a string that is no existing file is not a path. A Ray evaluation reads
    such a file on the driver and loads it in its workers.

    >>> policy_file("random"), policy_file("sb3:model.zip")
    (None, ('model.zip', True))
    """
    if isinstance(policy, os.PathLike):
        return os.fspath(policy), False
    if not isinstance(policy, str) or policy == "random" or policy.startswith(_PRETRAINED_PREFIX):
        return None
    if policy.startswith(_SB3_PREFIX):
        return policy[len(_SB3_PREFIX) :], True
    return (policy, False) if os.path.exists(policy) else None


def resolve_policy(
    policy: Any,
    contract: env_pb2.EnvContract | None,
    *,
    seed: int | None,
    device: str,
    deterministic: bool,
    allow_pickle: bool = False,
) -> Any:
    """Turn ``policy`` into a ``RuntimeModel`` bound to ``contract`` (unbound when it is ``None``).

    An unbound model gets its spaces later from ``bind(contract)``, as
    :class:`~rlmesh_gym.serve.ModelServer` does on each route's ``ConfigureRoute``.

    * ``"random"``: ``RandomPolicy`` seeded with ``seed``;
    * ``"pretrained:NAME"``: a policy shipped with the package (``"pretrained:cartpole"``);
    * a path (``str`` or ``os.PathLike``) to a ``torch.export`` program (``.pt2``), a TorchScript
      archive (``torch.jit.save``), a Stable-Baselines3 ``model.save()`` zip, or a whole pickled
      module (``torch.save(module, path)``); a file whose loading would run code from it (a
      pickled module, a program or SB3 zip holding pickled objects) only when ``allow_pickle``
      is true; for a ``state_dict`` pass ``TorchPolicy.load(path, factory=...)``;
    * ``"sb3:PATH.zip"``: a Stable-Baselines3 ``model.save()`` zip (``SB3Policy.load``, with
      ``allow_pickle``);
    * a Stable-Baselines3 algorithm or policy object: ``SB3Policy`` (SB3's own preprocessing,
      deterministic actions unless ``deterministic`` is false);
    * ``"package.module:attr"``: the object it names (see :func:`load_policy_object`);
    * a ``RuntimeModel`` (anything with an ``async predict``): used as is (``bind(contract)``
      is called when it has one and a contract is given);
    * an ``nn.Module``, TorchScript module or function: ``TorchPolicy``;
    * a callable whose first parameter is annotated ``torch.Tensor``: ``TorchPolicy``;
    * any other callable: ``CallablePolicy`` (numpy arrays in, numpy/array-like actions out).
    """
    if isinstance(policy, os.PathLike):
        return _load_path(
            os.fspath(policy),
            contract,
            device=device,
            deterministic=deterministic,
            seed=seed,
            allow_pickle=allow_pickle,
        )
    if isinstance(policy, str):
        if policy == "random":
            from rlmesh_gym.policies import RandomPolicy

            return RandomPolicy(seed, contract)
        if policy.startswith(_SB3_PREFIX):
            from rlmesh_gym.policies.sb3_policy import SB3Policy

            return SB3Policy.load(
                policy[len(_SB3_PREFIX) :],
                contract,
                device=device,
                deterministic=deterministic,
                allow_pickle=allow_pickle,
            )
        if policy.startswith(_PRETRAINED_PREFIX):
            module = pretrained_module().load_pretrained(policy[len(_PRETRAINED_PREFIX) :])
            from rlmesh_gym.policies import TorchPolicy  # after the check that torch is there

            return TorchPolicy(module, contract, device=device, deterministic=deterministic, seed=seed)
        if os.path.exists(policy):
            return _load_path(
                policy,
                contract,
                device=device,
                deterministic=deterministic,
                seed=seed,
                allow_pickle=allow_pickle,
            )
        if ":" in policy:
            return resolve_policy(
                load_policy_object(policy), contract, seed=seed, device=device, deterministic=deterministic
            )
        raise ValueError(
            f"policy {policy!r} is not 'random', 'pretrained:NAME', an existing file, 'sb3:PATH.zip' "
            "or 'package.module:attr'"
        )
    if is_array_model(policy) or is_runtime_model(policy):
        if contract is not None and isinstance(policy, BindableModel):
            bound = policy.bind(contract)
            # bind() may configure in place (returning None) or return the bound model.
            return policy if bound is None else bound
        return policy
    from rlmesh_gym.policies.sb3_policy import SB3Policy, is_sb3_model

    if is_sb3_model(policy):
        return SB3Policy(policy, contract, deterministic=deterministic)
    if _is_torch_module(policy) or (callable(policy) and _takes_tensors(policy)):
        from rlmesh_gym.policies import TorchPolicy

        return TorchPolicy(policy, contract, device=device, deterministic=deterministic, seed=seed)
    if callable(policy):
        from rlmesh_gym.policies import CallablePolicy

        return CallablePolicy(policy, contract)
    raise TypeError(
        "policy must be an nn.Module, a TorchScript module, a Stable-Baselines3 model, a RuntimeModel, "
        "a callable, 'random', 'pretrained:NAME', 'sb3:PATH.zip', 'package.module:attr' or a path; "
        f"got {type(policy).__module__}."
        f"{type(policy).__qualname__}"
    )


def _load_path(
    path: str,
    contract: env_pb2.EnvContract | None,
    *,
    device: str,
    deterministic: bool,
    seed: int | None,
    allow_pickle: bool,
) -> Any:
    from rlmesh_gym.policies.sb3_policy import SB3Policy, is_sb3_zip

    # Before anything opens it: a FIFO or device would block the first read forever.
    require_regular_file(
        path,
        "policy",
        "a policy file (a torch.export program, TorchScript archive, "
        "state_dict, pickled module or Stable-Baselines3 zip)",
    )
    if is_sb3_zip(path):
        return SB3Policy.load(
            path, contract, device=device, deterministic=deterministic, allow_pickle=allow_pickle
        )
    from rlmesh_gym.policies import TorchPolicy

    try:
        return TorchPolicy.load(
            path, contract, allow_pickle=allow_pickle, device=device, deterministic=deterministic, seed=seed
        )
    except (ValueError, TypeError):
        raise
    except Exception as exc:  # torch.load reports unreadable files with assorted exception types
        raise ValueError(f"cannot load policy from {path!r}: {type(exc).__name__}: {exc}") from exc

"""Turn what users pass to ``evaluate()`` (env ids, gymnasium envs, modules, callables, paths,
names) into the runtime's two seams: a ``RuntimeEnv`` and a ``RuntimeModel``."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from typing import Any

from rlmesh_gym.proto import env_pb2

__all__ = [
    "AUTORESET_NAMES",
    "ResolvedEnv",
    "autoreset_name",
    "describe_policy",
    "import_reference",
    "load_policy_object",
    "resolve_env",
    "resolve_policy",
    "shipped_policy",
]

AUTORESET_NAMES = ("next_step", "same_step", "disabled")
VECTORIZATIONS = ("sync", "async")
_MODE_NAMES = {
    env_pb2.AUTORESET_MODE_NEXT_STEP: "next_step",
    env_pb2.AUTORESET_MODE_SAME_STEP: "same_step",
    env_pb2.AUTORESET_MODE_DISABLED: "disabled",
    # The driver treats UNSPECIFIED as DISABLED (docs/design/wire.md#env-contract).
    env_pb2.AUTORESET_MODE_UNSPECIFIED: "disabled",
}
_PRETRAINED_PREFIX = "pretrained:"
_SB3_PREFIX = "sb3:"


def autoreset_name(mode: int) -> str:
    """The ``evaluate()`` spelling of a contract's ``autoreset_mode``."""
    try:
        return _MODE_NAMES[mode]
    except KeyError:
        raise ValueError(f"env contract has unknown autoreset mode {mode}") from None


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value.lower() not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")
    return value.lower()


@dataclass(slots=True)
class ResolvedEnv:
    """A ``RuntimeEnv`` ready for the driver, and whether ``evaluate()`` made it (and so closes it)."""

    env: Any
    env_id: str
    num_envs: int
    autoreset: str
    vectorization: str | None
    owned: bool


def _is_runtime_env(obj: Any) -> bool:
    return hasattr(obj, "contract") and all(
        inspect.iscoroutinefunction(getattr(obj, name, None)) for name in ("reset", "step")
    )


def _gym_env_id(env: Any, contract: env_pb2.EnvContract) -> str:
    if contract.id:
        return contract.id
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(env).__name__


def resolve_env(
    env: Any,
    *,
    num_envs: int | None,
    autoreset: str | None,
    vectorization: str | None,
    env_kwargs: dict[str, Any] | None,
) -> ResolvedEnv:
    """Build or wrap ``env`` as a ``RuntimeEnv``.

    * an env id (``str``): ``GymVectorEnv.make(env_id, num_envs, autoreset, vectorization,
      **env_kwargs)``; owned (closed at the end);
    * a ``gymnasium.Env`` or ``gymnasium.vector.VectorEnv``: wrapped in ``GymVectorEnv``; not owned;
    * a ``GymVectorEnv`` or any ``RuntimeEnv`` with a ``contract`` (e.g. a remote env): used as
      is; not owned.

    For an env that already exists, ``num_envs`` / ``autoreset`` default to its own and must
    match it when given; ``vectorization`` and ``env_kwargs`` apply to env ids only.
    """
    if num_envs is not None and (isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1):
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    if autoreset is not None:
        autoreset = _check_choice("autoreset", autoreset, AUTORESET_NAMES)
    if vectorization is not None:
        vectorization = _check_choice("vectorization", vectorization, VECTORIZATIONS)

    if isinstance(env, str):
        return _make_env(env, num_envs or 1, autoreset or "next_step", vectorization or "sync", env_kwargs)

    if env_kwargs:
        raise ValueError("env_kwargs apply only when env is an env id; build the env with them yourself")
    if vectorization is not None:
        raise ValueError(
            "vectorization applies only when env is an env id; this env was built already "
            "(pass an env id, or build a gymnasium SyncVectorEnv/AsyncVectorEnv yourself)"
        )
    if _is_runtime_env(env):
        runtime_env = env
    else:
        runtime_env = _wrap_gymnasium(env)
    contract = runtime_env.contract
    lanes = int(contract.num_envs) or int(getattr(runtime_env, "num_envs", 0) or 1)
    mode = autoreset_name(contract.autoreset_mode)
    if num_envs is not None and num_envs != lanes:
        raise ValueError(
            f"num_envs={num_envs} does not match the env passed in, which has {lanes} lane(s); "
            "leave num_envs unset for an env you built, or pass an env id"
        )
    if autoreset is not None and autoreset != mode:
        raise ValueError(
            f"autoreset={autoreset!r} does not match the env passed in, which uses {mode!r}; "
            "leave autoreset unset for an env you built, or pass an env id"
        )
    return ResolvedEnv(
        env=runtime_env,
        env_id=_gym_env_id(env, contract),
        num_envs=lanes,
        autoreset=mode,
        vectorization=None,
        owned=False,
    )


def _make_env(
    env_id: str, num_envs: int, autoreset: str, vectorization: str, env_kwargs: dict[str, Any] | None
) -> ResolvedEnv:
    from rlmesh_gym.envs import GymVectorEnv

    # An unknown id raises UnknownEnvIdError (a ValueError) naming the module:EnvId form.
    runtime_env = GymVectorEnv.make(
        env_id,
        num_envs=num_envs,
        autoreset=autoreset,
        vectorization=vectorization,
        # The adapter takes its own plain copy of each observation batch, so the vector env's
        # deep copy (copy=True, gymnasium's default) would be wasted work.
        vector_kwargs={"copy": False},
        **(env_kwargs or {}),
    )
    return ResolvedEnv(
        env=runtime_env,
        env_id=env_id,
        num_envs=num_envs,
        autoreset=autoreset,
        vectorization=vectorization,
        owned=True,
    )


def _wrap_gymnasium(env: Any) -> Any:
    import gymnasium

    from rlmesh_gym.envs import GymVectorEnv

    if isinstance(env, (gymnasium.Env, gymnasium.vector.VectorEnv)):
        return GymVectorEnv(env)
    raise TypeError(
        "env must be an env id (str), a gymnasium Env or VectorEnv, a GymVectorEnv, or a RuntimeEnv "
        f"with a .contract; got {type(env).__module__}.{type(env).__qualname__}"
    )


# -- policies -------------------------------------------------------------------------------


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


def _is_runtime_model(obj: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(obj, "predict", None))


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


def import_reference(reference: str, *, what: str = "policy") -> Any:
    """The object ``"package.module:attr"`` names (``attr`` may be dotted), not called.

    ``what`` names the option in error messages. A module that is not installed is searched for
    in the working directory too when the command line runs (see ``rlmesh_gym.cli.main``).
    """
    module_name, _, attr = reference.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{what} reference {reference!r} must look like 'package.module:attr'")
    try:
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
        try:
            target = target()
        except Exception as exc:
            raise ValueError(f"calling factory {reference!r} with no arguments failed: {exc}") from exc
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
      module (``torch.save(module, path)``) when ``allow_pickle`` is true (loading it runs code
      from the file); for a ``state_dict`` pass ``TorchPolicy.load(path, factory=...)``;
    * ``"sb3:PATH.zip"``: a Stable-Baselines3 ``model.save()`` zip (``SB3Policy.load``);
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
                policy[len(_SB3_PREFIX) :], contract, device=device, deterministic=deterministic
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
    if _is_runtime_model(policy):
        bind = getattr(policy, "bind", None)
        if contract is not None and callable(bind):
            bound = bind(contract)
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

    if is_sb3_zip(path):
        return SB3Policy.load(path, contract, device=device, deterministic=deterministic)
    from rlmesh_gym.policies import TorchPolicy

    try:
        return TorchPolicy.load(
            path, contract, allow_pickle=allow_pickle, device=device, deterministic=deterministic, seed=seed
        )
    except (ValueError, TypeError):
        raise
    except Exception as exc:  # torch.load reports unreadable files with assorted exception types
        raise ValueError(f"cannot load policy from {path!r}: {type(exc).__name__}: {exc}") from exc

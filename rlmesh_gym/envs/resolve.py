"""The one path from what a user names as an env (an env id, a gymnasium env, a RuntimeEnv) to the
env the driver runs; used by ``evaluate()``, ``compare()``, the command line, serving and replay.

One error behaviour (docs/design/layering.md#inputs):

* a bad option (``num_envs``, ``autoreset``, ``vectorization``) raises ``ValueError`` before
  anything is built;
* an env id gymnasium does not know raises :class:`~rlmesh_gym.envs.env_ids.UnknownEnvIdError`
  (a ``ValueError``, and gymnasium's ``UnregisteredEnv``) naming both ways to register it;
* anything else that fails while the env is built (gymnasium's errors, the env constructor's
  own, a space with no rlmesh form) raises :class:`EnvBuildError` (a ``ValueError``) naming the
  env id, the error's type and its message, chained to the original.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import gymnasium

from rlmesh_gym.envs._not_an_env import not_an_env
from rlmesh_gym.envs.env_ids import UnknownEnvIdError, unknown_env_id
from rlmesh_gym.envs.gym_vector import GymVectorEnv, check_num_envs, parse_vectorization
from rlmesh_gym.envs.headless import headless_video
from rlmesh_gym.runtime.autoreset import AutoresetMode
from rlmesh_gym.runtime.seams import is_array_env, is_runtime_env

__all__ = ["EVALUATION_AUTORESET", "EnvBuildError", "ResolvedEnv", "make_env", "make_gym_env", "resolve_env"]

EVALUATION_AUTORESET = AutoresetMode.SAME_STEP
"""The mode of a vector env ``evaluate()`` (and ``rlmesh-gym eval``) builds from an env id unless
told otherwise: a finished lane resets within its last step, so the same episodes as under
NEXT_STEP take one vector step fewer each."""


class EnvBuildError(ValueError):
    """An env id whose env could not be built; the message names the id and what went wrong."""

    def __init__(self, env_id: str, error: BaseException) -> None:
        super().__init__(f"cannot build env {env_id!r}: {type(error).__name__}: {error}")
        self.env_id = env_id


@contextmanager
def _building(env_id: str) -> Iterator[None]:
    try:
        yield
    except UnknownEnvIdError:
        raise
    except gymnasium.error.UnregisteredEnv as error:  # gymnasium.make's own unknown-id errors
        raise unknown_env_id(env_id, error) from error
    except Exception as error:  # env constructors raise any type for bad kwargs or missing extras
        raise EnvBuildError(env_id, error) from error


def make_gym_env(env_id: str, **env_kwargs: Any) -> gymnasium.Env:
    """One plain ``gymnasium.Env`` of ``env_id`` (``"module:EnvId"`` imports the module first),
    for callers that step gymnasium themselves (``replay_episode``) or serve a single env.

    Raises:
        UnknownEnvIdError: gymnasium does not know ``env_id``.
        EnvBuildError: building the env failed.
    """
    with _building(env_id):
        return gymnasium.make(env_id, **env_kwargs)


def make_env(
    env_id: str,
    num_envs: int = 1,
    autoreset: AutoresetMode | str | None = None,
    vectorization: str = "sync",
    *,
    vector: bool = True,
    offload: bool = False,
    env_kwargs: Mapping[str, Any] | None = None,
) -> GymVectorEnv:
    """``num_envs`` lanes of ``env_id`` as a :class:`GymVectorEnv`.

    With ``vector`` (the default) the lanes are a gymnasium vector env built by
    :meth:`GymVectorEnv.make` (``autoreset`` defaults to ``next_step``). With ``vector=False``
    the env is one plain ``gymnasium.Env`` (one lane, DISABLED autoreset, the env's own info
    dicts), as upstream rlmesh's single-env ``EnvServer`` serves it; ``num_envs`` must then be 1,
    ``autoreset`` unset or ``disabled`` and ``vectorization`` ``sync``.

    Raises:
        ValueError: a bad option (nothing was built).
        UnknownEnvIdError: gymnasium does not know ``env_id``.
        EnvBuildError: building the env failed.
    """
    check_num_envs(num_envs)
    if autoreset is not None:
        mode = AutoresetMode.parse(autoreset)
    else:
        mode = AutoresetMode.NEXT_STEP if vector else AutoresetMode.DISABLED
    vectorization = parse_vectorization(vectorization)
    kwargs = dict(env_kwargs or {})
    if not vector:
        if num_envs != 1 or mode is not AutoresetMode.DISABLED or vectorization != "sync":
            raise ValueError(
                "a single env (vector=False) has one lane, DISABLED autoreset and sync vectorization; got "
                f"num_envs={num_envs}, autoreset={mode.value!r}, vectorization={vectorization!r}"
            )
        env = make_gym_env(env_id, **kwargs)
        with _building(env_id):
            try:
                return GymVectorEnv(env, offload=offload)
            except BaseException:
                env.close()
                raise
    # Async workers render in their own processes, with the environment they started with.
    with _building(env_id), headless_video() if kwargs.get("render_mode") == "rgb_array" else nullcontext():
        return GymVectorEnv.make(env_id, num_envs, mode, vectorization, offload=offload, **kwargs)


@dataclass(slots=True)
class ResolvedEnv:
    """A ``RuntimeEnv`` ready for the driver, what it is, and whether the resolver built it.

    ``owned`` is true for an env built from an env id: whoever resolved it closes it.
    ``vectorization`` is ``None`` for an env that was passed in already built.
    """

    env: Any
    env_id: str
    num_envs: int
    autoreset: AutoresetMode
    vectorization: str | None
    owned: bool


def resolve_env(
    env: Any,
    *,
    num_envs: int | None = None,
    autoreset: AutoresetMode | str | None = None,
    vectorization: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> ResolvedEnv:
    """Build or wrap ``env`` as a ``RuntimeEnv``.

    * an env id (``str``): :func:`make_env` with ``num_envs`` (default 1) lanes, ``autoreset``
      (default ``next_step``), ``vectorization`` (default ``sync``) and ``env_kwargs``; owned;
    * a ``gymnasium.Env`` or ``gymnasium.vector.VectorEnv``: wrapped in ``GymVectorEnv``; not owned;
    * a ``GymVectorEnv`` or any other array-form env
      (:func:`~rlmesh_gym.runtime.seams.is_array_env`), or a message-form ``RuntimeEnv``
      (:func:`~rlmesh_gym.runtime.seams.is_runtime_env`, e.g. a remote env): used as is; not owned.

    For an env that already exists, ``num_envs`` / ``autoreset`` default to its own and must
    match it when given; ``vectorization`` and ``env_kwargs`` apply to env ids only.

    >>> resolved = resolve_env("CartPole-v1", num_envs=2)
    >>> resolved.num_envs, resolved.autoreset.value, resolved.owned
    (2, 'next_step', True)
    >>> resolved.env.close_sync()
    """
    if num_envs is not None:
        check_num_envs(num_envs)
    mode = None if autoreset is None else AutoresetMode.parse(autoreset)
    if vectorization is not None:
        vectorization = parse_vectorization(vectorization)

    if isinstance(env, str):
        lanes = num_envs or 1
        mode = mode or AutoresetMode.NEXT_STEP
        vectorization = vectorization or "sync"
        built = make_env(env, lanes, mode, vectorization, env_kwargs=env_kwargs)
        return ResolvedEnv(built, env, lanes, mode, vectorization, owned=True)

    if env_kwargs:
        raise ValueError("env_kwargs apply only when env is an env id; build the env with them yourself")
    if vectorization is not None:
        raise ValueError(
            "vectorization applies only when env is an env id; this env was built already "
            "(pass an env id, or build a gymnasium SyncVectorEnv/AsyncVectorEnv yourself)"
        )
    runtime_env = env if is_array_env(env) or is_runtime_env(env) else _wrap_gymnasium(env)
    contract = runtime_env.contract
    lanes = int(contract.num_envs) or int(getattr(runtime_env, "num_envs", 0) or 1)
    own_mode = AutoresetMode.from_wire(contract.autoreset_mode)
    if num_envs is not None and num_envs != lanes:
        raise ValueError(
            f"num_envs={num_envs} does not match the env passed in, which has {lanes} lane(s); "
            "leave num_envs unset for an env you built, or pass an env id"
        )
    if mode is not None and mode is not own_mode:
        raise ValueError(
            f"autoreset={mode.value!r} does not match the env passed in, which uses {own_mode.value!r}; "
            "leave autoreset unset for an env you built, or pass an env id"
        )
    return ResolvedEnv(runtime_env, _env_id(env, contract.id), lanes, own_mode, None, owned=False)


def _env_id(env: Any, contract_id: str) -> str:
    if contract_id:
        return contract_id
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(env).__name__


def _wrap_gymnasium(env: Any) -> GymVectorEnv:
    if isinstance(env, (gymnasium.Env, gymnasium.vector.VectorEnv)):
        return GymVectorEnv(env)
    raise not_an_env(
        env,
        "env must be an env id (str), a gymnasium Env or VectorEnv, a GymVectorEnv, or a RuntimeEnv "
        "with a .contract",
    )

"""Any rlmesh env as a Gymnasium env: :class:`RlmeshVectorEnv` and, for one lane, :class:`RlmeshEnv`.

The way back from :class:`~rlmesh_gym.envs.GymVectorEnv`: a ``RuntimeEnv`` (in-process, or a
remote env server through :class:`~rlmesh_gym.serve.RemoteEnv`) seen through gymnasium's own
API, so Stable-Baselines3, CleanRL-style loops and gymnasium's wrappers take it:

* :class:`RlmeshVectorEnv` is a ``gymnasium.vector.VectorEnv`` of the env's lanes, in the
  contract's autoreset mode;
* :class:`RlmeshEnv` is a ``gymnasium.Env`` of a one-lane env.

Spaces come from the contract (``gym_space``), infos from the env's infos (a ``MetaMap`` across a
process edge, in gymnasium's layout again), seeds pass through, ``render()`` reads the env's
frames and ``close()`` closes the env. Each adapter owns an event loop in a daemon thread
(``rlmesh_gym/envs/_env_loop.py``), so it works from plain scripts and from inside a running
loop (Jupyter) alike.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import gymnasium
import numpy as np
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space

from rlmesh_gym.envs._env_loop import EnvLoop
from rlmesh_gym.envs._infos import lane_info
from rlmesh_gym.envs._wire_infos import info_dict, is_batched, python_scalars, restore_batched
from rlmesh_gym.envs.gym_vector import parse_autoreset_mode
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.autoreset import AutoresetMode
from rlmesh_gym.runtime.message_form import MessageEnvPort
from rlmesh_gym.runtime.seams import (
    ArrayRuntimeEnv,
    CompletedEpisode,
    EnvResetBatch,
    EnvStepBatch,
    RendersFrames,
    RuntimeEnv,
    is_array_env,
    is_runtime_env,
)
from rlmesh_gym.spaces.batch import SpaceBatch
from rlmesh_gym.spaces.codec import CodecError, SpaceCodec
from rlmesh_gym.spaces.meta import from_meta_map
from rlmesh_gym.spaces.spec import gym_space

__all__ = ["EnvSource", "RlmeshEnv", "RlmeshVectorEnv"]

EnvSource: TypeAlias = RuntimeEnv | ArrayRuntimeEnv | Callable[[], Awaitable[Any]]
"""What the adapters take: an env (array or message form, with a ``contract``), or a function
returning an awaitable of one, run on the adapter's own loop (an env bound to its event loop,
such as a gRPC client: ``lambda: RemoteEnv.connect("127.0.0.1:50051")``)."""

_CLOSE_TIMEOUT = 5.0  # seconds the env gets to close by default


class _Session:
    """The env behind an adapter: its loop, contract, spaces and codecs, and the array-form calls."""

    def __init__(self, source: EnvSource, thread_name: str) -> None:
        self.loop = EnvLoop(thread_name)
        env: Any = None
        try:
            if _is_env(source):
                env = source
            elif callable(source):
                env = self.loop.call(source)
                if not _is_env(env):
                    raise TypeError(
                        f"the env factory returned {type(env).__name__}; expected a RuntimeEnv "
                        "(async reset/step, or reset_arrays/step_arrays, and a contract)"
                    )
            else:
                raise TypeError(
                    f"expected a RuntimeEnv (async reset/step, or reset_arrays/step_arrays, and a "
                    f"contract) or a function returning an awaitable of one, got {type(source).__name__}"
                )
            self.env = env
            contract = getattr(env, "contract", None)
            if not isinstance(contract, env_pb2.EnvContract):
                raise TypeError(f"{type(env).__name__}.contract is not an EnvContract: {contract!r:.80}")
            self.contract = env_pb2.EnvContract()
            self.contract.CopyFrom(contract)
            self.num_envs = max(1, int(contract.num_envs))
            self.observation_codec = SpaceCodec(contract.observation_space, name="observation")
            self.action_codec = SpaceCodec(contract.action_space, name="action")
            self.observation_space = gym_space(contract.observation_space, name="observation_space")
            self.action_space = gym_space(contract.action_space, name="action_space")
            self.mode = AutoresetMode.from_wire(contract.autoreset_mode)
            self.port: ArrayRuntimeEnv = (
                env if is_array_env(env) else MessageEnvPort(env, self.observation_codec, self.num_envs, 0, 0)
            )
        except BaseException:
            try:
                if env is not None:
                    self._close_env(env, _CLOSE_TIMEOUT)  # refused, yet ours (a connected session)
            except Exception as error:  # the refusal is the error to raise; say the close failed too
                warnings.warn(
                    f"closing the refused env failed: {type(error).__name__}: {error}", RuntimeWarning, 2
                )
            finally:
                self.loop.close()
            raise
        self.episode_ids: list[str] = [""] * self.num_envs

    def metadata(self) -> dict[str, Any]:
        """The contract's metadata as a dict (the env's own ``metadata``)."""
        return from_meta_map(self.contract.metadata)

    def reset(
        self, env_indices: Sequence[int], seeds: Sequence[int], options: Mapping[str, Any] | None
    ) -> EnvResetBatch:
        batch: EnvResetBatch = self.loop.call(self.port.reset_arrays, list(env_indices), list(seeds), options)
        self.episode_ids = list(batch.episode_ids)
        return batch

    def step(self, actions: Any) -> tuple[EnvStepBatch, list[str]]:
        """One step with an action batch; also the lanes' episode ids before it."""
        try:
            batch = SpaceBatch.from_values(self.action_codec, actions, self.num_envs)
        except CodecError as error:
            raise ValueError(
                f"invalid actions for {self.num_envs} lane(s) of {self.action_space}: {error}"
            ) from error
        result: EnvStepBatch = self.loop.call(self.port.step_arrays, batch)
        before, self.episode_ids = self.episode_ids, list(result.episode_ids)
        return result, before

    def observations(self, observation: SpaceBatch | None) -> Any:
        """The observation batch as the caller's own (writable) values."""
        if observation is None:
            raise RuntimeError(f"{self.contract.id}: the env sent no observation")
        return _owned(observation.values)

    def lane(self, values: Any, lane: int) -> Any:
        """Lane ``lane`` of a batch of observations."""
        codec = self.observation_codec
        return codec.handler.lane(codec, values, lane)

    def final_observation(self, value: Any, from_message: bool) -> Any:
        """A terminal observation out of a ``final_info``: nested lists on the wire, a value otherwise."""
        if not from_message or value is None:
            return value
        codec = self.observation_codec
        return self.lane(_owned(codec.normalize_batch(codec.batch_of_one(value), 1)), 0)

    def finished_here(self, step: EnvStepBatch, before: Sequence[str]) -> list[CompletedEpisode]:
        """The episodes this step ended (not those interrupted by the reset before it)."""
        return [
            episode
            for episode in step.completed
            if 0 <= episode.env_index < self.num_envs and before[episode.env_index] == episode.episode_id
        ]

    def render_frames(self, lanes: Sequence[int] | None) -> list[Any] | None:
        """The env's frames (``render_frames``, awaited if it is async), or ``None`` if it has none."""
        if not isinstance(self.env, RendersFrames):
            return None
        frames = self.loop.call(self.env.render_frames, None if lanes is None else list(lanes))
        return None if frames is None else list(frames)

    def close(self, timeout: float) -> None:
        """Close the env within ``timeout`` seconds, then the loop (always)."""
        if self.loop.closed:
            return
        try:
            self._close_env(self.env, timeout)
        finally:
            self.loop.close()

    def _close_env(self, env: Any, timeout: float) -> None:
        close = getattr(env, "close", None)
        if close is not None:
            self.loop.call(close, timeout, timeout=timeout + 1.0)


class _SessionBacked:
    """What both adapters read from their session: the contract and the wrapped env."""

    _session: _Session

    @property
    def contract(self) -> env_pb2.EnvContract:
        """The env's contract (a copy)."""
        contract = env_pb2.EnvContract()
        contract.CopyFrom(self._session.contract)
        return contract

    @property
    def env(self) -> Any:
        """The wrapped rlmesh env."""
        return self._session.env


class RlmeshVectorEnv(_SessionBacked, VectorEnv):
    """A rlmesh env as a ``gymnasium.vector.VectorEnv`` of its lanes.

    Args:
        env: A ``RuntimeEnv`` with a ``contract``: in array form (``reset_arrays``/``step_arrays``,
            e.g. :class:`~rlmesh_gym.envs.GymVectorEnv`) or message form (``reset``/``step``
            with protobuf requests, e.g. a connected client); or a function returning an
            awaitable of one, which runs on the adapter's own event loop (a gRPC client must be
            made there: ``RlmeshVectorEnv(lambda: RemoteEnv.connect(address))``, or use
            :func:`rlmesh_gym.serve.connect_gym_vector_env`). The adapter owns the env from
            then on: :meth:`close` closes it, and so does a constructor that refuses it.

    ``num_envs``, ``single_observation_space``, ``single_action_space`` and ``render_mode`` come
    from the contract; ``metadata`` is the env's metadata with ``"autoreset_mode"`` the
    contract's mode (a ``gymnasium.vector.AutoresetMode``), which this vector env follows:
    NEXT_STEP and DISABLED pass the env's results on as they are; under SAME_STEP the terminal
    observations and infos the env reports with each finished episode come back as
    ``infos["final_obs"]`` / ``infos["final_info"]`` (with their ``_`` masks), as gymnasium's
    own vector envs put them. Under DISABLED, ``reset(options={"reset_mask": mask})`` resets
    the lanes the mask selects.

    Seeds: ``reset(seed=s)`` gives lane ``i`` the seed ``s + i`` (gymnasium's rule); a list gives
    one seed per lane, all ints or all ``None`` (the rlmesh reset takes a seed for every lane it
    resets or none).

    Errors of the env arrive as :class:`~rlmesh_gym.runtime.errors.EnvRpcError`; actions that do
    not fit the action space raise ``ValueError`` before anything is sent.
    """

    def __init__(self, env: EnvSource) -> None:
        session = _Session(env, "rlmesh-gym-vector-env")
        self._session = session
        self.num_envs = session.num_envs
        self.single_observation_space = session.observation_space
        self.single_action_space = session.action_space
        self.observation_space = batch_space(session.observation_space, self.num_envs)
        self.action_space = batch_space(session.action_space, self.num_envs)
        self.metadata = {**session.metadata(), "autoreset_mode": parse_autoreset_mode(session.mode)}
        self.render_mode = session.contract.render_mode or None
        self.spec = None
        self.closed = False
        self._same_step = session.mode is AutoresetMode.SAME_STEP

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every lane, or under DISABLED the lanes ``options["reset_mask"]`` selects.

        Returns the full-width observation batch and the batched infos.
        """
        self._check_open("reset")
        remaining = dict(options) if options else {}
        mask = remaining.pop("reset_mask", None)
        n = self.num_envs
        lane_seeds = _lane_seeds(seed, n)
        if mask is None:
            lanes: list[int] = []
            chosen = lane_seeds
        else:
            selected = np.asarray(mask)
            if selected.dtype != np.bool_ or selected.shape != (n,):
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of shape ({n},), got {mask!r:.80}"
                )
            lanes = np.flatnonzero(selected).tolist()
            if not lanes:
                raise ValueError("options['reset_mask'] selects no lane; set the lanes to reset")
            chosen = [lane_seeds[lane] for lane in lanes]
        if isinstance(seed, int):
            super().reset(seed=seed)  # gymnasium's own RNG of the vector env
        batch = self._session.reset(lanes, _seeds_or_none(chosen), remaining or None)
        return self._session.observations(batch.observation), self._infos(batch.infos)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One action per lane: observations, rewards, terminations, truncations and infos."""
        self._check_open("step")
        session = self._session
        batch, before = session.step(actions)
        infos = self._infos(batch.infos)
        if self._same_step and "final_obs" not in infos:
            for episode in session.finished_here(batch, before):
                final, from_message = info_dict(episode.final_info)
                terminal = session.final_observation(final.pop("final_obs", None), from_message)
                self._add_info(
                    infos,
                    {"final_obs": terminal, "final_info": python_scalars(final, (np.bool_,))},
                    episode.env_index,
                )
        return (
            session.observations(batch.observation),
            np.array(batch.rewards, dtype=np.float64),
            np.array(batch.terminated, dtype=np.bool_),
            np.array(batch.truncated, dtype=np.bool_),
            infos,
        )

    def render(self) -> tuple[Any, ...] | None:
        """One frame per lane under ``render_mode="rgb_array"``; ``None`` otherwise (or when the
        env gives no frames)."""
        self._check_open("render")
        if self.render_mode != "rgb_array":
            return None
        frames = self._session.render_frames(None)
        return None if frames is None else tuple(frames)

    def close(self, **kwargs: Any) -> None:
        """Close the env (its session, for a remote one) and the adapter's loop (idempotent).

        ``close(timeout=5.0)``: how long the env gets to close. The loop stops and the adapter
        is closed even when the env's close fails (its error is raised).
        """
        if self.closed:
            return
        try:
            self.close_extras(**kwargs)
        finally:
            self.closed = True

    def close_extras(self, *, timeout: float = _CLOSE_TIMEOUT, **kwargs: Any) -> None:
        """Close the env within ``timeout`` seconds, then the loop."""
        self._session.close(timeout)

    def __del__(self) -> None:
        # At interpreter exit the loop's daemon thread may already be frozen: waiting would hang.
        # (No session: the constructor failed and cleaned up after itself.)
        if "_session" in self.__dict__ and not self.closed and not sys.is_finalizing():
            self.close()

    def __repr__(self) -> str:
        return (
            f"RlmeshVectorEnv({self._session.contract.id}, num_envs={self.num_envs}, "
            f"autoreset={self._session.mode.name})"
        )

    def _infos(self, raw: Any) -> dict[str, Any]:
        infos, from_message = info_dict(raw)
        if is_batched(infos, self.num_envs):
            return restore_batched(infos, self.num_envs) if from_message else infos
        return self._add_info({}, infos, 0)  # a single env's own dict, as one lane

    def _check_open(self, operation: str) -> None:
        if self.closed:
            raise RuntimeError(f"{operation} on a closed {type(self).__name__}")


class RlmeshEnv(_SessionBacked, gymnasium.Env):
    """A one-lane rlmesh env as a ``gymnasium.Env``.

    Args:
        env: As for :class:`RlmeshVectorEnv`, with ``contract.num_envs`` 1 (a served single env,
            or a vector env of one lane). Use :func:`rlmesh_gym.serve.connect_gym_env` for an
            env server.

    A gymnasium ``Env`` does not autoreset: call ``reset()`` after an episode ends. Over an env
    that autoresets under SAME_STEP, the step that ends an episode still returns its terminal
    observation and info (from the finished episode's ``final_info``). ``metadata`` is the
    env's metadata without ``"autoreset_mode"``; infos are the env's own dict (lane 0's slice
    of a vector env's batched infos). ``reset(seed=s)`` seeds the env with ``s``.
    """

    def __init__(self, env: EnvSource) -> None:
        session = _Session(env, "rlmesh-gym-env")
        if session.num_envs != 1:
            lanes = session.num_envs
            session.close(_CLOSE_TIMEOUT)
            raise ValueError(
                f"the env has {lanes} lanes; RlmeshEnv is one lane: use RlmeshVectorEnv for a vector env"
            )
        self._session = session
        self.observation_space = session.observation_space
        self.action_space = session.action_space
        metadata = session.metadata()
        metadata.pop("autoreset_mode", None)
        self.metadata = metadata
        self.render_mode = session.contract.render_mode or None
        self.spec = None
        self._same_step = session.mode is AutoresetMode.SAME_STEP
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env (with ``seed`` when given); the first observation and its info."""
        self._check_open("reset")
        super().reset(seed=seed)
        batch = self._session.reset([], [] if seed is None else [seed], options or None)
        observation = self._session.lane(self._session.observations(batch.observation), 0)
        return observation, self._info(batch.infos)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Apply ``action``: observation, reward, terminated, truncated and info."""
        self._check_open("step")
        session = self._session
        try:
            actions = session.action_codec.batch_of_one(action)
        except CodecError as error:
            raise ValueError(f"invalid action for {self.action_space}: {error}") from error
        batch, before = session.step(actions)
        terminated, truncated = bool(batch.terminated[0]), bool(batch.truncated[0])
        observation = session.lane(session.observations(batch.observation), 0)
        info = self._info(batch.infos)
        if self._same_step and (terminated or truncated):
            # The env already rolled into its next episode: report the one that ended.
            for episode in session.finished_here(batch, before):
                final, from_message = info_dict(episode.final_info)
                observation = session.final_observation(final.pop("final_obs", None), from_message)
                info = python_scalars(final)
        return observation, float(batch.rewards[0]), terminated, truncated, info

    def render(self) -> Any:
        """The env's frame under ``render_mode="rgb_array"``; ``None`` otherwise (or when it gives none)."""
        self._check_open("render")
        if self.render_mode != "rgb_array":
            return None
        frames = self._session.render_frames([0])
        return None if not frames else frames[0]

    def close(self, timeout: float = _CLOSE_TIMEOUT) -> None:
        """Close the env (its session, for a remote one) within ``timeout`` seconds, and the loop.

        Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._session.close(timeout)

    def __del__(self) -> None:
        if "_session" in self.__dict__ and not self._closed and not sys.is_finalizing():
            self.close()

    def __repr__(self) -> str:
        return f"RlmeshEnv({self._session.contract.id}, autoreset={self._session.mode.name})"

    __str__ = __repr__  # gymnasium.Env's own str() says only "<RlmeshEnv instance>" without a spec

    def _info(self, raw: Any) -> dict[str, Any]:
        info, from_message = info_dict(raw)
        if info and is_batched(info, 1):
            return python_scalars(lane_info(restore_batched(info, 1) if from_message else info, 0))
        return info

    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise RuntimeError(f"{operation} on a closed {type(self).__name__}")


def _is_env(obj: object) -> bool:
    return is_array_env(obj) or is_runtime_env(obj)


def _lane_seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    """One seed (or ``None``) per lane, as gymnasium's vector envs spread ``seed``."""
    if seed is None:
        return [None] * n
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return [int(seed) + lane for lane in range(n)]
    if isinstance(seed, (str, bytes)) or not isinstance(seed, Sequence) or len(seed) != n:
        raise ValueError(f"seed must be None, an int or a sequence of {n} ints or Nones, got {seed!r:.80}")
    return [None if value is None else int(value) for value in seed]


def _seeds_or_none(seeds: Sequence[int | None]) -> list[int]:
    """The seeds of the lanes reset: all of them, or none (``[]``) when every one is ``None``."""
    given = [value for value in seeds if value is not None]
    if given and len(given) != len(seeds):
        raise ValueError(
            f"seed={list(seeds)} mixes ints and None; a rlmesh reset seeds every lane it resets or none"
        )
    return given


def _owned(values: Any) -> Any:
    """``values`` with every array writable (a copy of any read-only view on message bytes)."""
    if isinstance(values, np.ndarray):
        return values if values.flags.writeable else values.copy()
    if isinstance(values, dict):
        return {key: _owned(value) for key, value in values.items()}
    if isinstance(values, tuple):
        return tuple(_owned(value) for value in values)
    return values

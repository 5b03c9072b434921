"""A gymnasium vector env (or a single env) as a :class:`~rlmesh_gym.runtime.RuntimeEnv`.

:class:`GymVectorEnv` is the env side of the runtime in both forms of the seam: the array form
(``reset_arrays``/``step_arrays``: numpy batches, per-lane episode ids, ``CompletedEpisode``
records, infos as the env returned them; what the driver calls in-process) and, derived from it,
the message form of the rlmesh wire (``reset``/``step``: message bytes, ``completed_episodes``
with full ``EpisodeMetadata``; what a server calls), in all three gymnasium autoreset modes:

=============  =============================================================================
NEXT_STEP      The done step completes the episode and keeps its id; the lane's next step is
               gymnasium's reset step: not counted, and the new (unseeded) id appears there.
SAME_STEP      The episode completes and the new id rolls in the same step; gymnasium's
               ``final_obs``/``final_info`` of the lane go into the episode's ``final_info``.
DISABLED       A done lane is idle (id ``""``) until reset; partial resets (``env_indices``)
               use gymnasium's ``reset_mask``, and every episode carries its exact seed.
=============  =============================================================================

A single :class:`gymnasium.Env` is one lane under DISABLED.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.spaces import Discrete, MultiDiscrete, Space
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv, VectorEnv
from gymnasium.vector import AutoresetMode as GymAutoresetMode

from rlmesh_gym._daemon_thread import DaemonThreadExecutor
from rlmesh_gym.envs._infos import lane_info
from rlmesh_gym.envs._not_an_env import not_an_env
from rlmesh_gym.envs._raise_site import raise_site
from rlmesh_gym.envs.env_ids import contract_env_id, unknown_env_id
from rlmesh_gym.envs.episodes import LaneEpisodes
from rlmesh_gym.envs.headless import quietly_headless
from rlmesh_gym.envs.one_lane import OneLaneVector, lane_zero_info
from rlmesh_gym.envs.reset_plan import EnvResetShape, InvalidReset, ResetPlan, plan_reset
from rlmesh_gym.envs.seed_width import SeedWidth, lane_reset_probe
from rlmesh_gym.proto import env_pb2, spaces_pb2
from rlmesh_gym.runtime.autoreset import AutoresetMode
from rlmesh_gym.runtime.errors import EnvRpcError
from rlmesh_gym.runtime.message_form import detached, episode_metadata, reset_response, step_response
from rlmesh_gym.runtime.seams import (
    DrainsEpisodes,
    EnvResetBatch,
    EnvStepBatch,
    RendersFrames,
    RuntimeEnv,
    RuntimeEnvReset,
    RuntimeEnvStep,
    TracksEpisodeIds,
)
from rlmesh_gym.runtime.telemetry import EndpointTelemetry
from rlmesh_gym.spaces import space_spec
from rlmesh_gym.spaces.batch import SpaceBatch
from rlmesh_gym.spaces.codec import CodecError, SpaceCodec
from rlmesh_gym.spaces.meta import MetaConversionError, from_meta_map, to_meta_map

__all__ = ["GymVectorEnv", "parse_autoreset_mode"]

_VECTORIZATIONS = ("sync", "async")
_CONTEXT_CLOSE_TIMEOUT = 5.0  # seconds: how long a with-block's close waits for an offloaded close
_SAME_STEP_FINAL_KEYS = frozenset({"final_obs", "_final_obs", "final_info", "_final_info"})


def parse_autoreset_mode(value: GymAutoresetMode | AutoresetMode | str) -> GymAutoresetMode:
    """The gymnasium autoreset mode ``value`` names (see :meth:`AutoresetMode.parse` for the spellings).

    >>> parse_autoreset_mode("same_step"), parse_autoreset_mode("NextStep")
    (<AutoresetMode.SAME_STEP: 'SameStep'>, <AutoresetMode.NEXT_STEP: 'NextStep'>)
    """
    return GymAutoresetMode[AutoresetMode.parse(value).name]


def check_num_envs(num_envs: object) -> int:
    """``num_envs`` when it is a lane count (an int >= 1); ``ValueError`` otherwise."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    return num_envs


def parse_vectorization(value: object) -> str:
    """``"sync"`` or ``"async"`` (any case), as ``gymnasium.make_vec`` spells it; ``ValueError`` otherwise."""
    if not isinstance(value, str) or value.strip().lower() not in _VECTORIZATIONS:
        raise ValueError(f"unknown vectorization {value!r}; expected 'sync' or 'async'")
    return value.strip().lower()


class GymVectorEnv(RuntimeEnv, DrainsEpisodes, RendersFrames, TracksEpisodeIds):
    """A gymnasium ``VectorEnv`` (Sync, Async or custom) or a single ``Env`` as a RuntimeEnv.

    Args:
        env: The env to drive. A ``gymnasium.vector.VectorEnv`` keeps its ``num_envs`` lanes and
            its autoreset mode; a ``gymnasium.Env`` becomes one lane under DISABLED.
        autoreset_mode: Only needed for a vector env whose ``metadata`` has no
            ``"autoreset_mode"`` (custom vector envs); it must agree with the metadata otherwise.
        offload: Run every env call in a dedicated worker thread instead of inline on the event
            loop. Inline calls are cheaper (a thread hop costs more than a CartPole step) but
            block the loop, so a driver timeout or cancellation cannot interrupt them; with
            ``offload=True`` the driver's timeouts and cancellation take effect while a slow env
            call is still running (the call itself still runs to completion in its thread).

    The contract (:attr:`contract`) carries the per-lane spaces, the env's metadata, render
    mode, lane count and autoreset mode. Everything the wrapped env raises comes back as
    :class:`~rlmesh_gym.runtime.errors.EnvRpcError`; after an env failure the adapter refuses
    further resets and steps (close it). Bad requests (malformed actions, seeds or lane
    indices) raise a recoverable ``EnvRpcError`` and leave the env untouched.

    Closing: ``await env.close(timeout)`` (the RuntimeEnv seam), ``env.close_sync()`` from
    synchronous code, or a ``with`` / ``async with`` block, which closes the env on exit.

    Example::

        import asyncio
        from rlmesh_gym.envs import GymVectorEnv
        from rlmesh_gym.proto import env_pb2

        async def main():
            async with GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset="disabled") as env:
                reset = await env.reset(env_pb2.ResetRequest(seeds=[1, 2]))
                action = env_pb2.StepRequest()
                action.action.bytes.data = (1).to_bytes(8, "little") * 2   # Discrete actions are int64
                step = await env.step(action)
                print(step.response.episode_ids == reset.response.episode_ids)   # True

        asyncio.run(main())

        with GymVectorEnv.make("CartPole-v1") as env:   # only to read the contract
            print(env.contract.observation_space)
    """

    def __init__(
        self,
        env: VectorEnv | gymnasium.Env,
        *,
        autoreset_mode: GymAutoresetMode | AutoresetMode | str | None = None,
        offload: bool = False,
    ) -> None:
        if isinstance(env, VectorEnv):
            vector = True
            num_envs = int(env.num_envs)
            observation_space, action_space = env.single_observation_space, env.single_action_space
        elif isinstance(env, gymnasium.Env):
            vector = False
            num_envs = 1
            observation_space, action_space = env.observation_space, env.action_space
        else:
            raise not_an_env(env, "GymVectorEnv wraps a gymnasium.vector.VectorEnv or a gymnasium.Env")
        self._env = env
        self._num_envs = num_envs
        # gymnasium's Sync/AsyncVectorEnv take one seed per lane and honour options["reset_mask"];
        # custom vector envs (e.g. CartPoleVectorEnv from make_vec's default mode) take one int seed
        # for their single RNG and may ignore reset_mask.
        per_lane_resets = not vector or isinstance(env.unwrapped, (SyncVectorEnv, AsyncVectorEnv))
        self._warned_single_seed = False
        self._seed_width = SeedWidth(lane_reset_probe(env))  # 64-bit or 32-bit seeds (seed_width.py)
        self._mode = _resolve_autoreset_mode(env, vector, autoreset_mode)
        if (
            isinstance(env, AsyncVectorEnv)
            and not getattr(env, "shared_memory", True)
            and self._mode is GymAutoresetMode.NEXT_STEP
        ):
            warnings.warn(
                "AsyncVectorEnv(shared_memory=False) under NEXT_STEP does not clear a worker's pending "
                "autoreset on reset (gymnasium 1.4): a lane reset right after it finished is reset again, "
                "unseeded, on the next step instead of being stepped. Use shared_memory=True (the default).",
                RuntimeWarning,
                stacklevel=2,
            )
        self._observation_space = observation_space
        self._action_space = action_space
        self._contract = _build_contract(env, num_envs, self._mode, observation_space, action_space)
        self._observation_codec = SpaceCodec(self._contract.observation_space, name="observation")
        self._action_codec = SpaceCodec(self._contract.action_space, name="action")
        # Discrete/MultiDiscrete actions are range-checked (the codec checks only structure).
        self._discrete_range = (
            (int(action_space.start), int(action_space.start) + int(action_space.n))
            if isinstance(action_space, Discrete)
            else None
        )
        self._multi_discrete_nvec = (
            np.asarray(action_space.nvec, dtype=np.int64) if isinstance(action_space, MultiDiscrete) else None
        )
        self._episodes = LaneEpisodes(num_envs, AutoresetMode.parse(self._mode).wire)
        self._reset_shape = EnvResetShape(
            num_envs,
            per_lane=per_lane_resets,
            disabled=self._mode is GymAutoresetMode.DISABLED,
            mode_name=self._mode.name,
            env_name=type(env.unwrapped).__name__,
        )
        self._step_telemetry = EndpointTelemetry("env.step")
        self._reset_telemetry = EndpointTelemetry("env.reset")
        self._no_lanes = bytes(num_envs)  # a mask with no lane set
        # A single env becomes a vector of one lane here; everything below drives `_lanes`.
        if isinstance(env, VectorEnv):
            self._lanes: VectorEnv | OneLaneVector = env
            self._lane_info: Callable[[Mapping[str, Any], int], dict[str, Any]] = lane_info
        else:
            self._lanes = OneLaneVector(env, self._observation_codec.batch_of_one)
            self._lane_info = lane_zero_info
        self._failure_where = "" if vector else " (lane 0)"  # named in errors of a single env
        # A DISABLED vector env refuses steps while a lane waits for its reset; a single env is
        # stepped as gymnasium lets it be.
        self._disabled_vector = vector and self._mode is GymAutoresetMode.DISABLED
        self._same_step = self._mode is GymAutoresetMode.SAME_STEP
        self._executor = DaemonThreadExecutor("rlmesh-gym-env") if offload else None
        self._step_env: Callable[[Any], tuple[Any, Any, Any, Any, Mapping[str, Any]]] = self._lanes.step
        self._steps_taken = 0
        self._has_reset = False
        self._closed = False
        self._failure: str | None = None
        self._ready = False  # open, not failed and reset at least once: the step fast path

    @classmethod
    def make(
        cls,
        env_id: str,
        num_envs: int = 1,
        autoreset: GymAutoresetMode | AutoresetMode | str = "next_step",
        vectorization: str = "sync",
        *,
        offload: bool = False,
        vector_kwargs: Mapping[str, Any] | None = None,
        wrappers: Sequence[Callable[[gymnasium.Env], gymnasium.Wrapper]] | None = None,
        **env_kwargs: Any,
    ) -> GymVectorEnv:
        """Build ``num_envs`` lanes of ``env_id`` with ``gymnasium.make_vec`` and wrap them.

        ``autoreset`` is ``"next_step"``, ``"same_step"`` or ``"disabled"`` (case-insensitive), an
        :class:`~rlmesh_gym.runtime.AutoresetMode` or a ``gymnasium.vector.AutoresetMode``;
        ``vectorization`` is ``"sync"`` or ``"async"``.
        ``vector_kwargs`` go to the vector env constructor, ``wrappers`` wrap each sub-env, and
        ``env_kwargs`` go to each sub-env's constructor. ``copy`` defaults to ``False`` (the
        adapter takes its own plain copy of each observation batch, cheaper than gymnasium's
        deep copy); pass ``vector_kwargs={"copy": True}`` if you also step :attr:`env` yourself and
        keep its observations.

        ``env_id`` may name the package that registers it, ``"module:EnvId"``
        (``"minigrid:MiniGrid-Empty-5x5-v0"``); an unknown id raises
        :class:`~rlmesh_gym.envs.env_ids.UnknownEnvIdError` (a ``ValueError`` and gymnasium's
        ``UnregisteredEnv``) saying so.
        """
        check_num_envs(num_envs)
        mode = parse_autoreset_mode(autoreset)
        vectorization = parse_vectorization(vectorization)
        kwargs = dict(vector_kwargs or {})
        if "autoreset_mode" in kwargs:
            raise ValueError("pass the autoreset mode as autoreset=..., not in vector_kwargs")
        kwargs["autoreset_mode"] = mode
        kwargs.setdefault("copy", False)
        try:
            env = gymnasium.make_vec(
                env_id,
                num_envs=num_envs,
                vectorization_mode=vectorization,
                vector_kwargs=kwargs,
                wrappers=wrappers,
                **env_kwargs,
            )
        except gymnasium.error.UnregisteredEnv as error:
            raise unknown_env_id(env_id, error) from error
        try:
            return cls(env, offload=offload)
        except BaseException:
            env.close()  # e.g. a space with no rlmesh form: do not leak the lanes (or their processes)
            raise

    @property
    def contract(self) -> env_pb2.EnvContract:
        """The env's contract (a fresh copy): id, per-lane spaces, metadata, lanes, autoreset mode."""
        contract = env_pb2.EnvContract()
        contract.CopyFrom(self._contract)
        return contract

    @property
    def num_envs(self) -> int:
        """Number of lanes."""
        return self._num_envs

    @property
    def autoreset_mode(self) -> GymAutoresetMode:
        """The gymnasium autoreset mode the lanes run under (DISABLED for a single env)."""
        return self._mode

    @property
    def env(self) -> VectorEnv | gymnasium.Env:
        """The wrapped gymnasium env."""
        return self._env

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    @property
    def episode_ids(self) -> list[str]:
        """The current episode id of every lane (``""`` for a lane with no running episode)."""
        return self._episodes.ids

    def __repr__(self) -> str:
        return (
            f"GymVectorEnv({self._contract.id}, num_envs={self._num_envs}, "
            f"autoreset={self._mode.name}, env={type(self._env).__name__})"
        )

    async def reset(self, request: env_pb2.ResetRequest) -> RuntimeEnvReset:
        """Reset every lane (``env_indices`` empty) or only the listed lanes (DISABLED only).

        The message form of :meth:`reset_arrays`: ``options`` (a ``MetaMap``) becomes the env's
        ``options`` dict, and the response carries the observation batch as message bytes and
        the infos as a ``MetaMap``.
        """
        options = None
        if request.HasField("options"):
            try:
                options = from_meta_map(request.options)
            except (MetaConversionError, ValueError, TypeError) as error:
                raise EnvRpcError(
                    "env.reset",
                    self._steps_taken,
                    f"reset options could not be decoded: {error}",
                    recoverable=True,
                ) from error
        batch = await self.reset_arrays(list(request.env_indices), list(request.seeds), options)
        return RuntimeEnvReset(self._message(reset_response, batch, "env.reset"), detached(batch.telemetry))

    async def reset_arrays(
        self, env_indices: Sequence[int], seeds: Sequence[int], options: Mapping[str, Any] | None = None
    ) -> EnvResetBatch:
        """Reset every lane (``env_indices`` empty) or only the listed lanes (DISABLED only).

        ``seeds`` is empty (unseeded) or has one seed per reset lane, aligned with
        ``env_indices`` for a partial reset; ``options`` is the env's ``options`` dict. The
        result carries the full-width observation batch, the env's infos and one episode id
        per lane: a fresh one for each reset lane, the current one for the others. A reset lane
        whose episode was still running has it completed as interrupted; it is reported in the
        next step's ``completed``.
        """
        operation = "env.reset"
        started = time.perf_counter_ns()
        # A whole-vector reset is gymnasium's way back to a known state after a failure (and what
        # rlmesh's env server does for its next client); steps and partial resets stay refused.
        self._check_usable(operation, recovering=not env_indices)
        plan = self._plan_reset(env_indices, seeds, options)
        try:
            observation, infos = await self._call(self._reset_env, plan.seed, plan.options)
            batch = self._observation_batch(observation)
        except EnvRpcError:
            raise
        except Exception as error:
            raise self._env_failed(operation, self._steps_taken, error) from error
        self._failure = None
        self._episodes.start(plan.lanes, self._seed_width.given(plan.lane_seeds))
        self._has_reset = True
        self._ready = True
        return EnvResetBatch(
            batch,
            self._episodes.ids,
            infos or None,
            self._reset_telemetry.stamp(time.perf_counter_ns() - started),
        )

    async def step(self, request: env_pb2.StepRequest) -> RuntimeEnvStep:
        """Apply one action per lane and report rewards, masks, infos, ids and finished episodes.

        The message form of :meth:`step_arrays`: ``request.action`` holds ``num_envs`` actions
        as message bytes; ``env_indices`` must be empty.
        """
        if request.env_indices:
            self._refuse_step(self._steps_taken + 1, list(request.env_indices))
        actions = request.action
        batch = await self.step_arrays(
            SpaceBatch.from_bytes(self._action_codec, actions.bytes.data, self._num_envs)
            if actions.HasField("bytes")
            else None
        )
        return RuntimeEnvStep(self._message(step_response, batch, "env.step"), detached(batch.telemetry))

    async def step_arrays(self, actions: SpaceBatch | None) -> EnvStepBatch:
        """Apply one action per lane: rewards, masks, infos, ids and finished episodes.

        ``actions`` holds ``num_envs`` actions of the action space. See the module docstring
        for how each autoreset mode rolls episode ids. Infos and ``final_info`` are the
        Python objects the env returned (SAME_STEP: the terminal observation and info of a
        finished lane go to its episode's ``final_info``).
        """
        started = time.perf_counter_ns()
        step = self._steps_taken + 1
        if not self._ready or (self._disabled_vector and not self._episodes.all_active):
            self._refuse_step(step)
        values = self._action_values(actions, step)
        try:
            observation, rewards, terminated, truncated, infos = await self._call(self._step_env, values)
            batch = self._observation_batch(observation)
            rewards, terminated, truncated = _lane_arrays(rewards, terminated, truncated, self._num_envs)
            no_lanes = self._no_lanes
            completed, finished = self._episodes.record_step(
                rewards,
                terminated,
                truncated,
                any_done=terminated.tobytes() != no_lanes or truncated.tobytes() != no_lanes,
            )
            if infos:
                for episode in finished:
                    episode.final_info = self._final_info(infos, episode.env_index) or None
                if self._same_step and finished:
                    # The terminal obs/info moved into each finished episode's final_info.
                    infos = {key: value for key, value in infos.items() if key not in _SAME_STEP_FINAL_KEYS}
        except EnvRpcError:
            raise
        except Exception as error:
            raise self._env_failed("env.step", step, error) from error
        self._steps_taken = step
        return EnvStepBatch(
            batch,
            rewards,
            terminated,
            truncated,
            self._episodes.ids,
            completed,
            infos or None,
            self._step_telemetry.stamp(time.perf_counter_ns() - started),
        )

    def _message(self, convert: Callable[[Any], Any], batch: Any, operation: str) -> Any:
        """``convert(batch)``: the message form of a result; infos the wire cannot carry fail the env."""
        try:
            return convert(batch)
        except (MetaConversionError, CodecError, TypeError, ValueError) as error:
            raise self._env_failed(operation, self._steps_taken, error) from error

    async def close(self, timeout: float) -> None:
        """Close the wrapped env (idempotent). Later resets and steps raise ``EnvRpcError``.

        Inline, the env's own ``close`` cannot be interrupted, so ``timeout`` only reaches
        ``AsyncVectorEnv.close``. With ``offload=True`` the close runs in the worker thread (after
        any call still running there) and a close that takes longer than ``timeout`` raises
        ``TimeoutError`` while the thread keeps closing.
        """
        future = self._start_close(timeout)
        if future is None:
            return
        done, _ = await asyncio.wait({asyncio.wrap_future(future)}, timeout=max(timeout, 0.0))
        self._finish_close(future, timeout, done=bool(done))

    def close_sync(self, timeout: float = _CONTEXT_CLOSE_TIMEOUT) -> None:
        """:meth:`close` for synchronous code (idempotent): blocks until the env is closed.

        What ``with`` calls on exit; e.g. for an env built only to read its :attr:`contract`.
        """
        future = self._start_close(timeout)
        if future is None:
            return
        concurrent.futures.wait({future}, timeout=max(timeout, 0.0))
        self._finish_close(future, timeout, done=future.done())

    def __enter__(self) -> GymVectorEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close_sync(_CONTEXT_CLOSE_TIMEOUT)

    async def __aenter__(self) -> GymVectorEnv:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close(_CONTEXT_CLOSE_TIMEOUT)

    def _start_close(self, timeout: float) -> concurrent.futures.Future[None] | None:
        """Begin closing: inline (done on return, ``None``) or in the worker thread (its future)."""
        if self._closed:
            return None
        self._closed = True
        self._ready = False
        if self._executor is None:
            try:
                self._close_env(timeout)
            except Exception as error:
                raise EnvRpcError.wrap("env.close", self._steps_taken, error) from error
            return None
        executor = self._executor
        future = executor.submit(self._close_env, timeout)
        executor.shutdown(wait=False)
        return future

    def _finish_close(self, future: concurrent.futures.Future[None], timeout: float, *, done: bool) -> None:
        if not done:
            raise TimeoutError(
                f"closing {self!r} did not finish within {timeout}s (an earlier env call may still be "
                "running in the worker thread); the close goes on in the background"
            )
        try:
            future.result()
        except Exception as error:
            raise EnvRpcError.wrap("env.close", self._steps_taken, error) from error

    def drain_episodes(self) -> list[env_pb2.EpisodeMetadata]:
        """End every running episode as truncated and return them, after any interrupted ones.

        This is what an env server's ``CloseResponse.final_episodes`` carries. The env stays
        open; every lane is idle until the next reset.
        """
        return [episode_metadata(episode) for episode in self._episodes.drain()]

    def render_frames(self, lanes: Sequence[int] | None = None) -> list[np.ndarray | None]:
        """One RGB frame per lane (``None`` where the env gave none); needs ``render_mode="rgb_array"``.

        Single env: ``[env.render()]``. Vector env: the frames of ``env.render()``, split per lane.
        With ``lanes``, only those lanes are rendered (the others are ``None``) where the vector
        env exposes its sub-envs (``SyncVectorEnv``); an ``AsyncVectorEnv`` renders every lane.
        """
        self._check_usable("env.render")
        if self._env.render_mode != "rgb_array":
            raise ValueError(
                f"render_frames needs an env built with render_mode='rgb_array'; "
                f"this env has render_mode={self._env.render_mode!r}"
            )
        if lanes is not None:
            bad = [lane for lane in lanes if not 0 <= lane < self._num_envs]
            if bad:
                raise ValueError(f"render_frames: lanes {bad} do not exist (the env has {self._num_envs})")
        render = quietly_headless(self._render_function(lanes))
        if self._executor is None:
            rendered = render()
        else:
            rendered = self._executor.submit(render).result()
        if rendered is None:
            frames = [None] * self._num_envs
        else:
            frames = list(rendered)
        if len(frames) != self._num_envs:
            raise ValueError(f"env.render() returned {len(frames)} frames for {self._num_envs} lanes")
        return [None if frame is None else np.asarray(frame) for frame in frames]

    def _render_function(self, lanes: Sequence[int] | None) -> Callable[[], Any]:
        """What renders the frames: the chosen sub-envs alone when they are reachable, else every lane."""
        sub_envs = getattr(self._lanes, "envs", None)
        if lanes is None or sub_envs is None or len(sub_envs) != self._num_envs:
            return self._lanes.render
        chosen = frozenset(lanes)
        return lambda: [env.render() if lane in chosen else None for lane, env in enumerate(sub_envs)]

    # -- env calls (inline or in the worker thread) -------------------------------------------

    async def _call(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)``: inline on the loop, or in the worker thread with ``offload=True``."""
        try:
            if self._executor is None:
                return function(*args)
            return await self._offloaded(function, *args)
        except Exception as error:
            _release_locals(error)
            raise

    async def _offloaded(self, function: Callable[..., Any], *args: Any) -> Any:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)
        except asyncio.CancelledError:
            # The call goes on in the worker thread; its result never reaches the book-keeping.
            self._failure = (
                "an env call was cancelled while running in the worker thread, so the env state is unknown"
            )
            self._ready = False
            raise

    def _reset_env(self, seed: Any, options: dict[str, Any] | None) -> tuple[Any, Mapping[str, Any]]:
        # A fresh options dict for each try: gymnasium pops "reset_mask" out of the one it gets.
        lanes = self._lanes
        return self._seed_width.reset(
            lambda given: lanes.reset(seed=given, options=None if options is None else dict(options)), seed
        )

    def _observation_batch(self, observation: Any) -> SpaceBatch:
        """The step's observation batch, private to it: a vector env built with ``copy=False``
        reuses one buffer, and a policy or hook may keep what it was given."""
        codec = self._observation_codec
        values = codec.normalize_batch(observation, self._num_envs)
        if values is observation:  # not converted, so possibly the env's own buffer
            values = values.copy()
        return SpaceBatch.from_normalized(codec, values, self._num_envs)

    def _close_env(self, timeout: float) -> None:
        if isinstance(self._env, AsyncVectorEnv):
            try:
                self._env.close(timeout=timeout)
            except BaseException as error:
                # gymnasium's close stops at the first dead worker's broken pipe, before it has
                # told the others to close: end every worker still running here.
                _terminate_workers(self._env)
                _release_locals(error)
                raise
        else:
            self._lanes.close()

    # -- request checks ------------------------------------------------------------------------

    def _check_usable(self, operation: str, *, recovering: bool = False) -> None:
        if self._closed:
            raise EnvRpcError(operation, self._steps_taken, "the env is closed; create a new one")
        if self._failure is not None and not recovering:
            raise EnvRpcError(
                operation,
                self._steps_taken,
                f"the env is unusable after an earlier failure ({self._failure}); "
                "reset every lane (an empty env_indices) to recover, or close it",
            )

    def _refuse_step(self, step: int, env_indices: list[int] | None = None) -> None:
        """Raise the error that keeps this step from running."""
        operation = "env.step"
        self._check_usable(operation)
        if env_indices:
            raise EnvRpcError(
                operation,
                step,
                f"subset stepping (StepRequest.env_indices={env_indices}) is not supported; "
                f"send one action for each of the {self._num_envs} lanes and leave env_indices empty",
                recoverable=True,
            )
        if not self._has_reset:
            raise EnvRpcError(
                operation,
                step,
                "the env was stepped before its first reset; reset it first",
                recoverable=True,
            )
        lanes = self._episodes.idle_lanes().tolist()
        raise EnvRpcError(
            operation,
            step,
            f"lanes {lanes} have no running episode (under DISABLED autoreset a finished lane waits "
            f"for a reset); reset them with ResetRequest(env_indices={lanes}) before stepping",
            recoverable=True,
        )

    def _plan_reset(
        self, env_indices: Sequence[int], seeds: Sequence[int], options: Mapping[str, Any] | None
    ) -> ResetPlan:
        """The validated reset, or a recoverable EnvRpcError saying why it is refused."""
        try:
            plan = plan_reset(self._reset_shape, env_indices, seeds, options)
        except InvalidReset as error:
            raise EnvRpcError("env.reset", self._steps_taken, str(error), recoverable=True) from None
        if plan.single_seed is not None:
            self._warn_single_seed(plan.single_seed)
        return plan

    def _warn_single_seed(self, seed: int) -> None:
        if self._warned_single_seed:
            return
        self._warned_single_seed = True
        name = type(self._env.unwrapped).__name__
        warnings.warn(
            f"{name} is a custom gymnasium vector env whose reset takes one int seed for its single RNG, "
            f"not one seed per lane: the adapter seeds it with the first lane's seed ({seed}), so a run is "
            "reproducible as a whole, but no episode records a seed and none can be replayed alone. For "
            'per-lane seeds build the env with gymnasium.make_vec(..., vectorization_mode="sync").',
            RuntimeWarning,
            stacklevel=4,
        )

    def _action_values(self, actions: SpaceBatch | None, step: int) -> Any:
        """The action batch as the env takes it, range-checked; a recoverable EnvRpcError if unusable."""
        n = self._num_envs
        codec = self._action_codec
        try:
            if actions is None:
                values = codec.decode_batch(b"", n)
            elif actions.rows == n and codec.same_space(actions.codec):
                values = actions.values
            else:
                values = codec.decode_batch(actions.data, n)
        except (CodecError, ValueError, TypeError) as error:
            raise EnvRpcError(
                "env.step",
                step,
                f"invalid action batch: expected {n} action(s) of {self._action_space} "
                f"({_received_bytes(actions)} bytes received): {error}",
                recoverable=True,
            ) from error
        if self._discrete_range is not None:
            # Python min/max over a short list beat numpy reductions at these sizes.
            low, high = self._discrete_range
            flat = values.tolist()
            if min(flat) < low or max(flat) >= high:
                self._refuse_actions(values, (values < low) | (values >= high), step)
        elif self._multi_discrete_nvec is not None:
            outside = (values < 0) | (values >= self._multi_discrete_nvec)
            if outside.any():
                self._refuse_actions(values, outside, step)
        return values

    def _refuse_actions(self, values: np.ndarray, outside: np.ndarray, step: int) -> None:
        lanes = sorted(set(np.argwhere(outside)[:, 0].tolist()))
        raise EnvRpcError(
            "env.step",
            step,
            f"actions of lanes {lanes} are outside {self._action_space}: "
            f"{[values[lane].tolist() for lane in lanes]}",
            recoverable=True,
        )

    # -- responses -----------------------------------------------------------------------------

    def _final_info(self, infos: Mapping[str, Any], lane: int) -> dict[str, Any]:
        if not self._same_step:
            return self._lane_info(infos, lane) if infos else {}
        final: dict[str, Any] = {}
        terminal = infos.get("final_info")
        if isinstance(terminal, Mapping):
            mask = infos.get("_final_info")
            if mask is None or mask[lane]:
                final.update(lane_info(terminal, lane))
        final_obs = infos.get("final_obs")
        if final_obs is not None:
            mask = infos.get("_final_obs")
            if mask is None or mask[lane]:
                final["final_obs"] = final_obs[lane]
        return final

    def _env_failed(self, operation: str, step: int, error: BaseException) -> EnvRpcError:
        where = self._failure_where
        message = f"{operation}{where} raised {type(error).__name__}: {error}{raise_site(error)}"
        self._failure = message
        self._ready = False
        failure = EnvRpcError(operation, step, message)
        failure.__cause__ = error
        return failure


def _resolve_autoreset_mode(
    env: VectorEnv | gymnasium.Env, vector: bool, override: GymAutoresetMode | AutoresetMode | str | None
) -> GymAutoresetMode:
    requested = None if override is None else parse_autoreset_mode(override)
    metadata = getattr(env, "metadata", None)
    declared = metadata.get("autoreset_mode") if isinstance(metadata, Mapping) else None
    if declared is not None:
        try:
            mode = parse_autoreset_mode(declared)
        except ValueError as error:
            raise ValueError(f"env.metadata['autoreset_mode'] is invalid: {error}") from None
        if requested is not None and requested is not mode:
            raise ValueError(
                f"autoreset_mode={requested.name} disagrees with env.metadata['autoreset_mode']={mode.name}"
            )
    elif not vector:
        mode = requested or GymAutoresetMode.DISABLED
    elif requested is None:
        raise ValueError(
            f"the vector env {type(env).__name__} has no metadata['autoreset_mode']; pass "
            "GymVectorEnv(env, autoreset_mode=...) to say how it autoresets"
        )
    else:
        mode = requested
    if not vector and mode is not GymAutoresetMode.DISABLED:
        raise ValueError(
            f"a single gymnasium.Env has no autoreset, so it runs under DISABLED, not {mode.name}; "
            "wrap it in a vector env (gymnasium.vector.SyncVectorEnv([lambda: env], autoreset_mode=...)) "
            "for autoreset"
        )
    return mode


def _build_contract(
    env: VectorEnv | gymnasium.Env,
    num_envs: int,
    mode: GymAutoresetMode,
    observation_space: Space,
    action_space: Space,
) -> env_pb2.EnvContract:
    contract = env_pb2.EnvContract(
        id=contract_env_id(env),
        render_mode=getattr(env, "render_mode", None) or "",
        num_envs=num_envs,
        autoreset_mode=AutoresetMode.parse(mode).wire,
    )
    contract.observation_space.CopyFrom(space_spec(observation_space, name="observation_space"))
    contract.action_space.CopyFrom(space_spec(action_space, name="action_space"))
    metadata = getattr(env, "metadata", None)
    if metadata is not None:
        contract.metadata.CopyFrom(_metadata_map(metadata))
    return contract


def _metadata_map(metadata: Mapping[str, Any]) -> spaces_pb2.MetaMap:
    """``env.metadata`` as a MetaMap; an entry MetaValue cannot hold is left out with a warning."""
    try:
        return to_meta_map(dict(metadata))
    except (MetaConversionError, TypeError, ValueError):
        pass
    converted = spaces_pb2.MetaMap()
    for key, value in metadata.items():
        try:
            entry = to_meta_map({key: value})
        except (MetaConversionError, TypeError, ValueError) as error:
            warnings.warn(
                f"env.metadata[{key!r}] ({type(value).__name__}) cannot be sent as rlmesh metadata "
                f"and is left out of the contract: {error}",
                RuntimeWarning,
                stacklevel=4,
            )
            continue
        for name, meta_value in entry.entries.items():
            converted.entries[name].CopyFrom(meta_value)
    return converted


def _lane_arrays(
    rewards: Any, terminated: Any, truncated: Any, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rewards = np.asarray(rewards, dtype=np.float64)
    terminated = np.asarray(terminated, dtype=np.bool_)
    truncated = np.asarray(truncated, dtype=np.bool_)
    if rewards.shape != (n,) or terminated.shape != (n,) or truncated.shape != (n,):
        raise ValueError(
            f"the env returned rewards/terminated/truncated of shapes {rewards.shape}/{terminated.shape}/"
            f"{truncated.shape}; expected ({n},) each"
        )
    return rewards, terminated, truncated


def _received_bytes(actions: SpaceBatch | None) -> int:
    """The size of an action batch as sent (0 for none, or if it does not even encode)."""
    try:
        return actions.nbytes if actions is not None else 0
    except (CodecError, ValueError, TypeError):
        return 0


def _release_locals(error: BaseException) -> None:
    """Free the local variables of the frames ``error`` passed through (its traceback stays).

    A send to a dead AsyncVectorEnv worker fails with its pickled message, a memoryview of a
    BytesIO, still in those frames. Kept, they sit in a reference cycle with the error, and
    Python 3.12 can tear that cycle down in the wrong order at exit: "SystemError: deallocated
    BytesIO object has exported buffers", then a crash.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        current = current.__cause__ or current.__context__


def _terminate_workers(env: AsyncVectorEnv, grace: float = 5.0) -> None:
    """Terminate (then kill) every worker process of ``env`` still alive, and reap them all."""
    processes = [process for process in getattr(env, "processes", ()) if process is not None]
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(grace)
        if process.is_alive():
            process.kill()
            process.join(grace)
    for pipe in getattr(env, "parent_pipes", ()):
        if pipe is not None:
            pipe.close()

"""A gymnasium vector env (or a single env) as an array-form runtime env.

:class:`GymVectorEnv` is the env side of the runtime in the array form of the seam
(``reset_arrays``/``step_arrays``: numpy batches, per-lane episode ids, ``CompletedEpisode``
records, infos as the env returned them; what the driver calls), in all three gymnasium
autoreset modes:

=============  =============================================================================
NEXT_STEP      The done step completes the episode and keeps its id; the lane's next step is
               gymnasium's reset step: not counted, and the new (unseeded) id appears there.
SAME_STEP      The episode completes and the new id rolls in the same step; gymnasium's
               ``final_obs``/``final_info`` of the lane go into the episode's ``final_info``.
DISABLED       A done lane is idle (id ``""``) until reset; partial resets (``env_indices``)
               use gymnasium's ``reset_mask``, and every episode carries its exact seed.
=============  =============================================================================

A single :class:`gymnasium.Env` is one lane under DISABLED. The message form (protobuf
requests and responses, what a gRPC server speaks) is
:class:`~rlmesh_gym.runtime.message_form.MessageFormEnv` around it. The pieces around the
adapter live in modules of their own: the contract (:mod:`~rlmesh_gym.envs.contract`), episode
ids and records (:mod:`~rlmesh_gym.envs.episodes`), reset checks
(:mod:`~rlmesh_gym.envs.reset_plan`), the offload thread (:mod:`~rlmesh_gym.envs.offload`),
frames (:mod:`~rlmesh_gym.envs.frames`), AsyncVectorEnv workers
(:mod:`~rlmesh_gym.envs.async_workers`) and the SAME_STEP loop of an env :meth:`GymVectorEnv.make`
built (:mod:`~rlmesh_gym.envs.same_step_lanes`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import operator
import warnings
from collections.abc import Callable, Mapping, Sequence
from time import perf_counter_ns
from typing import Any

import gymnasium
import numpy as np
from gymnasium.spaces import Discrete, MultiDiscrete
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv, VectorEnv
from gymnasium.vector import AutoresetMode as GymAutoresetMode

from rlmesh_gym.envs._infos import lane_info
from rlmesh_gym.envs._not_an_env import not_an_env
from rlmesh_gym.envs._raise_site import raise_site
from rlmesh_gym.envs.async_workers import close_vector_env, release_locals
from rlmesh_gym.envs.contract import autoreset_mode_of, build_contract, parse_autoreset_mode
from rlmesh_gym.envs.env_ids import unknown_env_id
from rlmesh_gym.envs.episodes import LaneEpisodes
from rlmesh_gym.envs.frames import lane_frames
from rlmesh_gym.envs.offload import EnvCallThread
from rlmesh_gym.envs.one_lane import OneLaneVector, lane_zero_info
from rlmesh_gym.envs.reset_plan import EnvResetShape, InvalidReset, ResetPlan, plan_reset
from rlmesh_gym.envs.same_step_lanes import SameStepLanes
from rlmesh_gym.envs.seed_width import SeedWidth, lane_reset_probe
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.autoreset import AutoresetMode
from rlmesh_gym.runtime.errors import EnvRpcError
from rlmesh_gym.runtime.message_form import episode_metadata
from rlmesh_gym.runtime.seams import (
    ArrayRuntimeEnv,
    DrainsEpisodes,
    EnvResetBatch,
    EnvStepBatch,
    RendersFrames,
    TracksEpisodeIds,
)
from rlmesh_gym.runtime.telemetry import EndpointTelemetry
from rlmesh_gym.spaces.batch import SpaceBatch
from rlmesh_gym.spaces.codec import CodecError, SpaceCodec

__all__ = ["GymVectorEnv", "check_num_envs", "parse_autoreset_mode", "parse_vectorization"]

_VECTORIZATIONS = ("sync", "async")
_CONTEXT_CLOSE_TIMEOUT = 5.0  # seconds: how long a with-block's close waits for an offloaded close
_SAME_STEP_FINAL_KEYS = frozenset({"final_obs", "_final_obs", "final_info", "_final_info"})
_FLOAT64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)


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


class GymVectorEnv(ArrayRuntimeEnv, DrainsEpisodes, RendersFrames, TracksEpisodeIds):
    """A gymnasium ``VectorEnv`` (Sync, Async or custom) or a single ``Env`` as an array-form runtime env.

    Args:
        env: The env to drive. A ``gymnasium.vector.VectorEnv`` keeps its ``num_envs`` lanes and
            its autoreset mode; a ``gymnasium.Env`` becomes one lane under DISABLED.
        autoreset_mode: Only needed for a vector env whose ``metadata`` has no
            ``"autoreset_mode"`` (custom vector envs); it must agree with the metadata otherwise.
        offload: Run every env call in a dedicated worker thread instead of inline on the event
            loop (:mod:`rlmesh_gym.envs.offload`). Inline calls are cheaper but block the loop,
            so a driver timeout or cancellation cannot interrupt them; with ``offload=True`` the
            driver's timeouts and cancellation take effect while a slow env call is still
            running (the call itself still runs to completion in its thread).

    The contract (:attr:`contract`) carries the per-lane spaces, the env's metadata, render
    mode, lane count and autoreset mode. Everything the wrapped env raises comes back as
    :class:`~rlmesh_gym.runtime.errors.EnvRpcError`; after an env failure the adapter refuses
    further steps and partial resets until a whole-vector reset. Bad requests (malformed
    actions, seeds or lane indices) raise a recoverable ``EnvRpcError`` and leave the env
    untouched.

    The driver calls :meth:`reset_arrays` and :meth:`step_arrays`; for the message form
    (``reset(ResetRequest)``/``step(StepRequest)``) wrap the env in
    :class:`~rlmesh_gym.runtime.message_form.MessageFormEnv`.

    Closing: ``await env.close(timeout)``, ``env.close_sync()`` from synchronous code, or a
    ``with`` / ``async with`` block, which closes the env on exit.

    Example::

        import asyncio
        from rlmesh_gym.envs import GymVectorEnv
        from rlmesh_gym.proto import env_pb2
        from rlmesh_gym.runtime.message_form import MessageFormEnv

        async def main():
            async with GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset="disabled") as env:
                reset = await env.reset_arrays([], [1, 2])
                print(reset.observation.values.shape, reset.episode_ids != ["", ""])   # (2, 4) True
                messages = MessageFormEnv(env)   # the same env in the message form
                action = env_pb2.StepRequest()
                action.action.bytes.data = (1).to_bytes(8, "little") * 2   # Discrete actions are int64
                step = await messages.step(action)
                print(list(step.response.episode_ids) == reset.episode_ids)   # True

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
        self._mode = autoreset_mode_of(env, vector, autoreset_mode)
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
        self._action_space = action_space
        self._contract = build_contract(env, num_envs, self._mode, observation_space, action_space)
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
        self._lane_shape = (num_envs,)
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
        self._thread = EnvCallThread(self._lost_track) if offload else None
        self._step_env: Callable[[Any], tuple[Any, Any, Any, Any, Mapping[str, Any]]] = self._lanes.step
        self._same_step_lanes: SameStepLanes | None = None  # make()'s own SAME_STEP loop
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
            adapter = cls(env, offload=offload)
        except BaseException:
            env.close()  # e.g. a space with no rlmesh form: do not leak the lanes (or their processes)
            raise
        if type(env) is SyncVectorEnv and mode is GymAutoresetMode.SAME_STEP:
            # Built here, so plainly gymnasium's: its sub-envs are stepped by the adapter's own
            # SAME_STEP loop, which skips batching the final observations and infos.
            adapter._same_step_lanes = lanes = SameStepLanes(env)
            adapter._step_env = lanes.step
        return adapter

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
    def runs_inline(self) -> bool:
        """Whether calls run inline on the event loop (not ``offload=True``): the driver then
        awaits them plainly (:class:`~rlmesh_gym.runtime.seams.RunsInline`)."""
        return self._thread is None

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
        started = perf_counter_ns()
        # A whole-vector reset is gymnasium's way back to a known state after a failure (and what
        # rlmesh's env server does for its next client); steps and partial resets stay refused.
        self._check_usable(operation, recovering=not env_indices)
        plan = self._plan_reset(env_indices, seeds, options)
        lanes = self._lanes
        try:
            reset = (lanes, self._seed_width, plan.seed, plan.options)
            if self._thread is None:
                observation, infos = _reset_lanes(*reset)
            else:
                observation, infos = await self._thread.call(_reset_lanes, *reset)
            batch = self._observation_batch(observation)
        except EnvRpcError:
            raise
        except Exception as error:
            raise self._env_failed(operation, self._steps_taken, error) from error
        self._failure = None
        if self._same_step_lanes is not None:
            self._same_step_lanes.reset_lanes()  # every lane was reset: none stays out
        self._episodes.start(plan.lanes, self._seed_width.given(plan.lane_seeds))
        self._has_reset = True
        self._ready = True
        return EnvResetBatch(
            batch,
            self._episodes.ids,
            infos or None,
            self._reset_telemetry.stamp(perf_counter_ns() - started),
        )

    async def step_arrays(self, actions: SpaceBatch | None) -> EnvStepBatch:
        """Apply one action per lane: rewards, masks, infos, ids and finished episodes.

        ``actions`` holds ``num_envs`` actions of the action space. See the module docstring
        for how each autoreset mode rolls episode ids. Infos and ``final_info`` are the
        Python objects the env returned (SAME_STEP: the terminal observation and info of a
        finished lane go to its episode's ``final_info``).
        """
        started = perf_counter_ns()
        step = self._steps_taken + 1
        if not self._ready or (self._disabled_vector and not self._episodes.all_active):
            self._refuse_step(step)
        n = self._num_envs
        action_codec = self._action_codec
        try:
            if actions is not None and actions.rows == n and action_codec.same_space(actions.codec):
                values = actions.values  # the policy's own batch (decoded here if it came as bytes)
            else:
                values = action_codec.decode_batch(b"" if actions is None else actions.data, n)
        except (CodecError, ValueError, TypeError) as error:
            raise self._invalid_actions(actions, step, error) from error
        discrete = self._discrete_range
        if discrete is not None:
            # Python min/max over a short list beat numpy reductions at these sizes.
            flat = values.tolist()
            if min(flat) < discrete[0] or max(flat) >= discrete[1]:
                self._refuse_actions(values, (values < discrete[0]) | (values >= discrete[1]), step)
        elif self._multi_discrete_nvec is not None:
            outside = (values < 0) | (values >= self._multi_discrete_nvec)
            if outside.any():
                self._refuse_actions(values, outside, step)
        try:
            # The vector env's own step, called here directly (inline) or in the offload thread.
            if self._thread is None:
                observation, rewards, terminated, truncated, infos = self._step_env(values)
            else:
                observation, rewards, terminated, truncated, infos = await self._thread.call(
                    self._step_env, values
                )
            # The step's observation batch, private to it: a vector env built with copy=False
            # reuses one buffer, and a policy or hook may keep what it was given (the SAME_STEP
            # loop's batch is new every step).
            codec = self._observation_codec
            observed = codec.normalize_batch(observation, n)
            same_step_lanes = self._same_step_lanes
            private = observed is not observation or same_step_lanes is not None
            batch = SpaceBatch(codec, n, observed if private else observed.copy())
            if same_step_lanes is None:
                rewards, terminated, truncated, done = self._lane_arrays(rewards, terminated, truncated)
            else:  # its lane arrays are fresh and of these dtypes; it saw who finished
                self._check_lane_shapes(rewards, terminated, truncated)
                done = same_step_lanes.finished_lanes()
            completed, finished = self._episodes.record_step(rewards, terminated, truncated, done=done)
            if same_step_lanes is not None:
                for episode in finished:
                    episode.final_info = same_step_lanes.final_info(episode.env_index)
            elif infos:
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
            self._step_telemetry.stamp(perf_counter_ns() - started),
        )

    def _lane_arrays(
        self, rewards: Any, terminated: Any, truncated: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int] | None]:
        """A step's rewards (float64) and masks (bool), checked to have one entry per lane, and
        ``[]`` when no lane is done (``None``: some are, found by ``record_step``)."""
        rewards = np.asarray(rewards, dtype=_FLOAT64)
        terminated = np.asarray(terminated, dtype=_BOOL)
        truncated = np.asarray(truncated, dtype=_BOOL)
        self._check_lane_shapes(rewards, terminated, truncated)
        no_lanes = self._no_lanes
        quiet = terminated.tobytes() == no_lanes and truncated.tobytes() == no_lanes
        return rewards, terminated, truncated, [] if quiet else None

    def _check_lane_shapes(self, rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> None:
        lane_shape = self._lane_shape
        if rewards.shape != lane_shape or terminated.shape != lane_shape or truncated.shape != lane_shape:
            raise ValueError(
                f"the env returned rewards/terminated/truncated of shapes {rewards.shape}/"
                f"{terminated.shape}/{truncated.shape}; expected {lane_shape} each"
            )

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

    @property
    def can_retire_lanes(self) -> bool:
        """Whether :meth:`retire_lanes` is available: the env was built by :meth:`make` under
        SAME_STEP on a ``SyncVectorEnv``, so the adapter steps its sub-envs itself."""
        return self._same_step_lanes is not None

    def retire_lanes(self, lanes: Sequence[int]) -> None:
        """Let each of ``lanes`` play out its next episode, then stop it until the next reset.

        The next episode is the running one, or, for a lane marked before a reset, the one the
        reset starts. When it ends the lane is not reset: the step reports the episode's end and
        terminal observation as usual (no new episode id rolls in), and from then on the lane
        is idle (id ``""``) and each step reports that observation, reward 0 and no done flag
        without stepping its sub-env; a reset steps every lane again. ``evaluate()`` marks a
        lane when its next episode is the last one it counts there. Raises ``ValueError`` when
        :attr:`can_retire_lanes` is false or for a lane outside ``0..num_envs-1``.
        """
        same_step_lanes = self._same_step_lanes
        if same_step_lanes is None:
            raise ValueError(
                f"{self!r} cannot retire lanes: only an env GymVectorEnv.make built under SAME_STEP with "
                "sync vectorization steps its sub-envs itself"
            )
        try:
            lanes = [operator.index(lane) for lane in lanes]
        except TypeError:
            raise TypeError(f"lanes must be a sequence of ints, got {lanes!r}") from None
        outside = [lane for lane in lanes if not 0 <= lane < self._num_envs]
        if outside:
            raise ValueError(
                f"lanes {outside} are not lanes of this env; expected ints in 0..{self._num_envs - 1}"
            )
        self._check_usable("retire_lanes")
        same_step_lanes.retire(lanes)
        self._episodes.retire(lanes)

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
        run = _call_inline if self._thread is None else self._thread.call_sync
        return lane_frames(self._env, self._lanes, self._num_envs, lanes, run)

    # -- closing --------------------------------------------------------------------------------

    def _start_close(self, timeout: float) -> concurrent.futures.Future[None] | None:
        """Begin closing: inline (done on return, ``None``) or in the worker thread (its future)."""
        if self._closed:
            return None
        self._closed = True
        self._ready = False
        env: Any = self._env if isinstance(self._env, AsyncVectorEnv) else self._lanes
        if self._thread is None:
            try:
                close_vector_env(env, timeout)
            except Exception as error:
                raise EnvRpcError.wrap("env.close", self._steps_taken, error) from error
            return None
        return self._thread.close(lambda: close_vector_env(env, timeout))

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

    # -- state and checks ------------------------------------------------------------------------

    def _lost_track(self) -> None:
        """An offloaded call was cancelled: it goes on in the thread, its result never recorded."""
        self._failure = (
            "an env call was cancelled while running in the worker thread, so the env state is unknown"
        )
        self._ready = False

    def _observation_batch(self, observation: Any) -> SpaceBatch:
        """The step's observation batch, private to it: a vector env built with ``copy=False``
        reuses one buffer, and a policy or hook may keep what it was given."""
        codec = self._observation_codec
        values = codec.normalize_batch(observation, self._num_envs)
        if values is observation:  # not converted, so possibly the env's own buffer
            values = values.copy()
        return SpaceBatch(codec, self._num_envs, values)

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

    def _refuse_step(self, step: int) -> None:
        """Raise the error that keeps this step from running."""
        operation = "env.step"
        self._check_usable(operation)
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

    def _invalid_actions(self, actions: SpaceBatch | None, step: int, error: Exception) -> EnvRpcError:
        """The recoverable error of an action batch that does not decode."""
        return EnvRpcError(
            "env.step",
            step,
            f"invalid action batch: expected {self._num_envs} action(s) of {self._action_space} "
            f"({_received_bytes(actions)} bytes received): {error}",
            recoverable=True,
        )

    def _refuse_actions(self, values: np.ndarray, outside: np.ndarray, step: int) -> None:
        lanes = sorted(set(np.argwhere(outside)[:, 0].tolist()))
        raise EnvRpcError(
            "env.step",
            step,
            f"actions of lanes {lanes} are outside {self._action_space}: "
            f"{[values[lane].tolist() for lane in lanes]}",
            recoverable=True,
        )

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
        """``error`` (raised by the env or our checks of what it returned) as the env's failure."""
        release_locals(error)
        message = (
            f"{operation}{self._failure_where} raised {type(error).__name__}: {error}{raise_site(error)}"
        )
        self._failure = message
        self._ready = False
        failure = EnvRpcError(operation, step, message)
        failure.__cause__ = error
        return failure


def _reset_lanes(
    lanes: Any, seed_width: SeedWidth, seed: Any, options: dict[str, Any] | None
) -> tuple[Any, Mapping[str, Any]]:
    # A fresh options dict for each try: gymnasium pops "reset_mask" out of the one it gets.
    return seed_width.reset(
        lambda given: lanes.reset(seed=given, options=None if options is None else dict(options)), seed
    )


def _call_inline(function: Callable[[], Any]) -> Any:
    return function()


def _received_bytes(actions: SpaceBatch | None) -> int:
    """The size of an action batch as sent (0 for none, or if it does not even encode)."""
    try:
        return actions.nbytes if actions is not None else 0
    except (CodecError, ValueError, TypeError):
        return 0

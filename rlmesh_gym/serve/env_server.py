"""Serve any env with a ``contract`` as an rlmesh EnvService: a message-form
:class:`~rlmesh_gym.runtime.RuntimeEnv`, or an array-form env such as
:class:`~rlmesh_gym.envs.GymVectorEnv` (seen through
:class:`~rlmesh_gym.runtime.message_form.MessageFormEnv`).

rlmesh's own runtime (``rlmesh.PyModel.run_local``), its env clients and our
:class:`~rlmesh_gym.serve.env_client.RemoteEnv` can then drive the env over gRPC::

    import asyncio
    from rlmesh_gym.envs import GymVectorEnv
    from rlmesh_gym.serve import EnvServer

    async def main():
        env = GymVectorEnv.make("CartPole-v1", num_envs=8)
        async with EnvServer(env, address="127.0.0.1:50051") as server:
            await server.wait_closed()          # until stop() or an allowed remote Shutdown

    asyncio.run(main())

Session rules (docs/design/wire.md#env-session, #env-requests): one ``Join`` stream at a time
(a second one fails with FAILED_PRECONDITION); requests are handled in arrival order with
exactly one response each, echoing ``request_id``; errors travel in-band as ``EnvError`` and
the stream stays open; a ``Close`` ends every running episode as truncated
(``final_episodes``) and completes the stream. When a stream ends without ``Close`` (the
client vanished) or is ended by the server (idle timeout, server stop), running episodes are
ended the same way and discarded, so the next client starts clean. The env itself stays open
between sessions; closing it is the owner's job.

A single reset seed for a vector env (what rlmesh's clients send for ``reset(seed=42)``) is
expanded to ``seed, seed+1, ...``, the seeds gymnasium gives the lanes for an int seed.

Error codes and texts are upstream's (docs/serving.md lists each, and the few deliberate
differences): lane and seed checks of partial resets, subset stepping and a render mask with two
lanes are ``INVALID_ACTION``; under NEXT_STEP a lane stepped with no episode, a lane done on its
autoreset step and (with ``strict_autoreset_reward``) a reward there are ``INTERNAL``, as are
per-lane vectors of the wrong length. A recoverable
:class:`~rlmesh_gym.runtime.errors.EnvRpcError` from the env (a bad action, bad seeds) is
``INVALID_ACTION``; a :class:`~rlmesh_gym.runtime.errors.OperationTimeoutError`, or a request
that ran past its ``timeout_ms``, is ``TIMEOUT``; every other failure (the env raised, an empty
request, a reply too large to send) is ``INTERNAL``.

The env's calls run in the server's call thread (:mod:`rlmesh_gym._daemon_thread`), never on the
event loop, so an env stuck in ``step`` does not stop handshakes or the server's own stop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import grpc
import numpy as np

from rlmesh_gym._daemon_thread import wait_for_call
from rlmesh_gym._deadline import wait_within
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.errors import EnvRpcError, OperationTimeoutError
from rlmesh_gym.runtime.message_form import as_message_env
from rlmesh_gym.runtime.seams import (
    ArrayRuntimeEnv,
    DrainsEpisodes,
    RendersFrames,
    RuntimeEnv,
    TracksEpisodeIds,
)
from rlmesh_gym.serve._lifecycle import ServerLifecycle
from rlmesh_gym.serve._session import SessionGuard
from rlmesh_gym.serve._telemetry import endpoint_telemetry
from rlmesh_gym.serve.endpoint import DEFAULT_MAX_MESSAGE_BYTES
from rlmesh_gym.serve.handshake import DEFAULT_EDITION_PIN, ENV_CAPABILITIES
from rlmesh_gym.serve.png import png_of_frame

__all__ = ["SESSION_BUSY_MESSAGE", "EnvServer"]

logger = logging.getLogger("rlmesh_gym.serve")

SESSION_BUSY_MESSAGE = (
    "environment already has an active Join session; only one client may be connected at a time"
)
"""Upstream's FAILED_PRECONDITION text for a second concurrent ``Join``."""

# How long a session that ended without Close waits for its episodes to be ended; a hung env call
# delays that drain until it returns, and must not keep the session's handler (or a stop) waiting.
_ABANDONED_DRAIN_SECONDS = 1.0

_INVALID_ACTION = env_pb2.ENV_ERROR_CODE_INVALID_ACTION
_INTERNAL = env_pb2.ENV_ERROR_CODE_INTERNAL
_TIMEOUT = env_pb2.ENV_ERROR_CODE_TIMEOUT
# Upstream's recoverability rule: only these codes are recoverable.
_RECOVERABLE_CODES = frozenset(
    (_TIMEOUT, _INVALID_ACTION, env_pb2.ENV_ERROR_CODE_NOT_READY, env_pb2.ENV_ERROR_CODE_BUSY)
)


class _RequestFailed(Exception):
    """One request's in-band ``EnvError``."""

    def __init__(self, code: env_pb2.EnvErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class EnvServer(ServerLifecycle):
    """An rlmesh EnvService endpoint for one env, one client session at a time.

    Args:
        env: The env to serve, with a ``contract`` (``EnvContract``): a message-form
            :class:`~rlmesh_gym.runtime.RuntimeEnv` or an array-form env such as
            :class:`~rlmesh_gym.envs.GymVectorEnv`. Optional extras
            it may have: ``drain_episodes()`` (the running episodes, ended as truncated, for
            ``Close``) and ``render_frames()`` (one frame per lane, for ``Render``).
        address: ``HOST:PORT`` to bind; port 0 picks a free port (see :attr:`address`).
            Binding anything but loopback without a token warns (:attr:`exposure_warning`).
        token: If set, every RPC must carry it as ``authorization`` metadata.
        edition_pin: ``"b3"`` (rlmesh 0.1.0b3, default), ``"rc1"`` or a 64-hex SHA-256 that
            clients must offer (docs/design/wire.md#handshake).
        allow_remote_shutdown: Whether a ``Shutdown`` RPC may stop the server.
        idle_timeout: End a session whose client sent nothing, or left a reply unread, for this
            many seconds (``None``: never), freeing the one session slot for the next client.
        idle_shutdown: Stop the whole server (:attr:`stop_reason` ``"idle timeout"``) once no RPC
            has been in flight for this many seconds (``None``: never), as upstream's
            ``idle_timeout``. An open ``Join`` stream counts as in flight until it ends, so this
            never fires during a session; combine it with ``idle_timeout`` to cut quiet clients off.
        max_message_bytes: gRPC send and receive limit (256 MiB by default, as upstream).
        strict_autoreset_reward: Under NEXT_STEP, refuse a non-zero reward on a lane's autoreset
            step with upstream's INTERNAL error. By default it is accepted (the env does not count
            it and warns once), because vector reward wrappers shift that step's reward too.
    """

    _role = "env"
    _noun = "environment"
    _messages = env_pb2
    _capabilities = ENV_CAPABILITIES
    _service = "rlmesh.env.v1.EnvService"

    def __init__(
        self,
        env: RuntimeEnv | ArrayRuntimeEnv,
        *,
        address: str = "127.0.0.1:0",
        token: str | None = None,
        edition_pin: str = DEFAULT_EDITION_PIN,
        allow_remote_shutdown: bool = False,
        idle_timeout: float | None = None,
        idle_shutdown: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        strict_autoreset_reward: bool = False,
    ) -> None:
        try:
            messages = as_message_env(env)
        except TypeError:
            raise TypeError(
                "EnvServer needs a RuntimeEnv (async reset() and step() and a .contract) or an array-form "
                f"env such as GymVectorEnv; got {type(env).__module__}.{type(env).__qualname__}"
            ) from None
        contract = env.contract  # type: ignore[union-attr]
        if not isinstance(contract, env_pb2.EnvContract):
            raise TypeError(
                f"EnvServer needs an env whose .contract is an EnvContract; {type(env).__name__}'s is "
                f"{type(contract).__name__}"
            )
        if idle_timeout is not None and not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be > 0 seconds or None, got {idle_timeout!r}")
        super().__init__(
            address=address,
            token=token,
            edition_pin=edition_pin,
            allow_remote_shutdown=allow_remote_shutdown,
            max_message_bytes=max_message_bytes,
            idle_shutdown=idle_shutdown,
        )
        self._env = env
        self._message_env = messages  # what reset and step requests go to
        self._contract = env_pb2.EnvContract()
        self._contract.CopyFrom(contract)
        self._num_envs = max(1, int(getattr(env, "num_envs", contract.num_envs) or 1))
        self._contract.num_envs = self._num_envs
        self._idle_timeout = idle_timeout
        self._session: SessionGuard | None = None
        self._sessions_served = 0
        self._idle: asyncio.Event | None = None
        self._draining = 0  # ended sessions whose episodes are still being ended
        self._next_step = self._contract.autoreset_mode == env_pb2.AUTORESET_MODE_NEXT_STEP
        self._strict_autoreset_reward = bool(strict_autoreset_reward)
        # NEXT_STEP lanes that completed on the last step: their next step is the env's autoreset.
        self._awaiting_autoreset: set[int] = set()

    @property
    def env(self) -> RuntimeEnv | ArrayRuntimeEnv:
        """The env being served (as it was given)."""
        return self._env

    @property
    def contract(self) -> env_pb2.EnvContract:
        """The contract sent in every compatible handshake (``num_envs`` set from the env)."""
        return self._contract

    @property
    def session_active(self) -> bool:
        """Whether a client currently holds the one ``Join`` session."""
        return self._session is not None

    async def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no client holds the session and the last one's episodes are ended.

        Returns ``False`` if ``timeout`` seconds passed first.
        """
        if self._session is None and not self._draining:
            return True
        if self._idle is None:
            self._idle = asyncio.Event()
        try:
            await wait_within(self._idle.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    @property
    def sessions_served(self) -> int:
        """How many ``Join`` sessions have ended so far (closed, abandoned or interrupted)."""
        return self._sessions_served

    async def _on_stop(self) -> None:
        if self._session is not None:
            self._session.interrupt(grpc.StatusCode.UNAVAILABLE, "env server is shutting down")

    # -- RPCs ----------------------------------------------------------------------------------

    def _handshake(self, request: env_pb2.HandshakeRequest) -> env_pb2.HandshakeResponse:
        response = super()._handshake(request)
        if response.compatible:
            response.env_contract.CopyFrom(self._contract)
        return response

    async def _join(
        self, requests: AsyncIterator[env_pb2.JoinRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[env_pb2.JoinResponse]:
        if self._session is not None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, SESSION_BUSY_MESSAGE)
        guard = SessionGuard("env", self._idle_timeout)
        self._session = guard
        closed = False
        peer = context.peer()
        logger.info("env session opened by %s", peer)
        try:
            # tonic clients wait for the response headers before sending anything.
            await context.send_initial_metadata(())
            while (request := await guard.next_request(requests, context)) is not None:
                response = await self._handle(request)
                closed = response.WhichOneof("kind") == "close"
                guard.replying()
                yield response
                if closed:
                    return
        except asyncio.CancelledError:
            await guard.abort_if_interrupted(context, f"env session of {peer}")
            raise
        finally:
            guard.close()
            # Queued before the slot is freed: the next client's calls run after this drain.
            pending = None if closed else self._submit_drain()
            self._session = None
            self._sessions_served += 1
            self._draining += 1
            # Shielded: grpc may cancel this handler again while it waits (the client is gone).
            await asyncio.shield(self._end_session(pending, peer))

    async def _end_session(
        self, pending: asyncio.Future[list[env_pb2.EpisodeMetadata]] | None, peer: str
    ) -> None:
        """Wait (bounded) for an abandoned session's episodes to be ended, then report the server idle."""
        try:
            dropped = await self._drain(pending, timeout=_ABANDONED_DRAIN_SECONDS)
        finally:
            self._draining -= 1
        if dropped:
            logger.info("env session of %s ended without Close; %d episode(s) discarded", peer, len(dropped))
        if self._idle is not None and self._session is None and not self._draining:
            self._idle.set()
            self._idle = None

    async def _handle(self, request: env_pb2.JoinRequest) -> env_pb2.JoinResponse:
        started = time.perf_counter_ns()
        kind = request.WhichOneof("kind")
        response = env_pb2.JoinResponse(request_id=request.request_id)
        operation = f"env.{kind}" if kind is not None else "env.unknown"
        try:
            if kind == "step":
                await self._step(request.step, response)
            elif kind == "reset":
                await self._reset(request.reset, response)
            elif kind == "render":
                await self._render(request.render, response)
            elif kind == "close":
                response.close.final_episodes.extend(await self._drain(self._submit_drain()))
            else:
                raise _RequestFailed(_INTERNAL, "empty request")
            self._check_size(response, operation)
        except _RequestFailed as failure:
            response.error.code = failure.code
            response.error.message = failure.message
            response.error.is_recoverable = failure.code in _RECOVERABLE_CODES
            logger.debug("env %s request %r failed: %s", operation, request.request_id, failure.message)
        response.telemetry.CopyFrom(endpoint_telemetry(operation, started))
        return response

    async def _reset(self, request: env_pb2.ResetRequest, response: env_pb2.JoinResponse) -> None:
        started = time.monotonic()
        lanes = self._num_envs
        if request.env_indices:
            _check_partial_reset(list(request.env_indices), len(request.seeds), lanes)
        if (
            len(request.seeds) == 1
            and lanes > 1
            and not request.env_indices
            and request.seeds[0] + lanes <= 2**63
        ):
            # rlmesh clients send reset(seed=42) on a vector env as one seed; upstream servers pass
            # it to gymnasium, which seeds lane i with 42 + i. Give the env exactly those seeds.
            first = request.seeds[0]
            request.ClearField("seeds")
            request.seeds.extend(first + lane for lane in range(lanes))
        try:
            result = await self._calls.call(self._message_env.reset, request)
        except Exception as error:
            raise _failure("reset", error) from error
        _check_deadline("env.reset", request.timeout_ms, started)
        response.reset.CopyFrom(result.response)
        if request.env_indices:
            self._awaiting_autoreset.difference_update(request.env_indices)
        else:
            self._awaiting_autoreset.clear()

    async def _step(self, request: env_pb2.StepRequest, response: env_pb2.JoinResponse) -> None:
        started = time.monotonic()
        if request.env_indices:
            raise _RequestFailed(
                _INVALID_ACTION, "subset stepping (StepRequest.env_indices) is not supported"
            )
        if self._next_step:
            self._check_lanes_have_episodes()
        try:
            result = await self._calls.call(self._message_env.step, request)
        except Exception as error:
            raise _failure("step", error) from error
        _check_deadline("env.step", request.timeout_ms, started)
        self._check_step(result.response)
        response.step.CopyFrom(result.response)

    def _check_lanes_have_episodes(self) -> None:
        """Upstream's NEXT_STEP rule: every lane stepped has an episode or a pending autoreset."""
        if not isinstance(self._env, TracksEpisodeIds):
            return  # the env does not say; it checks for itself
        for lane, episode in enumerate(self._env.episode_ids):
            if not episode and lane not in self._awaiting_autoreset:
                raise _RequestFailed(
                    _INTERNAL,
                    f"NEXT_STEP lane {lane} was stepped with no active episode and no pending autoreset; "
                    "reset the lane before stepping it, and the env may only autoreset the step after a "
                    "completion",
                )

    def _check_step(self, step: env_pb2.StepResponse) -> None:
        """Upstream's checks of what the env reported: full-width lane vectors, and under NEXT_STEP
        a fresh observation (not done; reward 0 with ``strict_autoreset_reward``) after a completion."""
        lanes = self._num_envs
        for name in ("rewards", "terminated_mask", "truncated_mask"):
            length = len(getattr(step, name))
            if length not in (0, lanes):
                raise _RequestFailed(
                    _INTERNAL,
                    f"StepResponse.{name} has length {length}, which is neither empty nor the env's lane "
                    f"count {lanes}; a partial per-lane vector would silently mask lanes",
                )
        if not self._next_step:
            return
        done = [
            lane
            for lane in range(lanes)
            if (step.terminated_mask and step.terminated_mask[lane])
            or (step.truncated_mask and step.truncated_mask[lane])
        ]
        for lane in sorted(self._awaiting_autoreset):
            if lane in done:
                self._awaiting_autoreset.clear()
                raise _RequestFailed(
                    _INTERNAL,
                    f"NEXT_STEP lane {lane} reported a terminal step where its autoreset observation was "
                    "expected; after a completion the env must deliver one fresh (non-terminal) observation",
                )
            reward = step.rewards[lane] if step.rewards else 0.0
            if self._strict_autoreset_reward and reward != 0.0:
                self._awaiting_autoreset.clear()
                raise _RequestFailed(
                    _INTERNAL,
                    f"NEXT_STEP lane {lane} carried a non-zero reward ({_rust_float(reward)}) on its "
                    "autoreset observation; the fresh observation after a completion must carry reward 0",
                )
        self._awaiting_autoreset = set(done)

    async def _render(self, request: env_pb2.RenderRequest, response: env_pb2.JoinResponse) -> None:
        selected = [lane for lane, flag in enumerate(request.mask) if flag]
        if len(selected) > 1:
            raise _RequestFailed(
                _INVALID_ACTION,
                f"render requests support at most one env_index (the mask selects lanes {selected})",
            )
        lane = selected[0] if selected else 0
        if lane >= self._num_envs:
            raise _RequestFailed(
                _INVALID_ACTION,
                f"render mask selects lane {lane}, but the env has lanes 0..{self._num_envs - 1}",
            )
        response.render.SetInParent()
        if not isinstance(self._env, RendersFrames) or self._contract.render_mode != "rgb_array":
            return  # this env does not render frames: no png_frame, as upstream
        render_frames = self._env.render_frames
        started = time.monotonic()
        try:
            frames = await self._calls.call(render_frames)
            frame = None if frames is None else frames[lane]
            png = None if frame is None else png_of_frame(frame)
            if png is not None:
                response.render.png_frame = png
        except Exception as error:
            raise _RequestFailed(_INTERNAL, f"render failed: {type(error).__name__}: {error}") from error
        _check_deadline("env.render", request.timeout_ms, started)

    def _submit_drain(self) -> asyncio.Future[list[env_pb2.EpisodeMetadata]] | None:
        """Queue the env's ``drain_episodes`` behind its earlier calls (``None``: it has none)."""
        self._awaiting_autoreset.clear()
        if not isinstance(self._env, DrainsEpisodes):
            return None
        return self._calls.submit_async(self._env.drain_episodes)

    async def _drain(
        self, pending: asyncio.Future[list[env_pb2.EpisodeMetadata]] | None, timeout: float | None = None
    ) -> list[env_pb2.EpisodeMetadata]:
        if pending is None:
            return []
        try:
            return list(await wait_for_call(pending, timeout))
        except asyncio.TimeoutError:
            # The env is inside a call that has not returned; the drain runs once it does.
            logger.warning(
                "env server: the env is still busy in an earlier call; its episodes end when it returns"
            )
            return []
        except Exception:
            logger.exception("env server: ending the running episodes failed")
            return []

    def _check_size(self, response: env_pb2.JoinResponse, operation: str) -> None:
        problem = self._oversize_reply(response, operation)
        if problem is not None:
            raise _RequestFailed(_INTERNAL, problem)


def _failure(verb: str, error: Exception) -> _RequestFailed:
    if isinstance(error, OperationTimeoutError):
        return _RequestFailed(_TIMEOUT, str(error))
    if isinstance(error, EnvRpcError):
        if error.recoverable:
            return _RequestFailed(_INVALID_ACTION, error.message)
        return _RequestFailed(_INTERNAL, f"{verb} failed: {error.message}")
    return _RequestFailed(_INTERNAL, f"{verb} failed: {type(error).__name__}: {error}")


def _check_partial_reset(env_indices: list[int], seeds: int, lanes: int) -> None:
    """Upstream's checks of a partial reset's lanes and seeds (INVALID_ACTION), in upstream's order."""
    seen: set[int] = set()
    for index in env_indices:
        if index < 0:
            raise _RequestFailed(_INVALID_ACTION, f"partial reset: negative env_index {index}")
        if index >= lanes:
            raise _RequestFailed(
                _INVALID_ACTION, f"partial reset: env_index {index} out of range for num_envs {lanes}"
            )
        if index in seen:
            raise _RequestFailed(_INVALID_ACTION, f"partial reset: duplicate env_index {index}")
        seen.add(index)
    if seeds and seeds != len(env_indices):
        raise _RequestFailed(
            _INVALID_ACTION,
            f"partial reset: seeds length {seeds} does not match env_indices length {len(env_indices)} "
            "(provide one seed per reset lane, or none)",
        )


def _rust_float(value: float) -> str:
    """``value`` as upstream prints a float32: shortest round-trip digits, no trailing ``.0``."""
    text = str(np.float32(value))
    return text[:-2] if text.endswith(".0") else text


def _check_deadline(operation: str, timeout_ms: int, started: float) -> None:
    # The env cannot be interrupted; as upstream, a late reply is replaced by TIMEOUT.
    if timeout_ms > 0 and (time.monotonic() - started) * 1000.0 > timeout_ms:
        raise _RequestFailed(_TIMEOUT, f"{operation} timed out after {timeout_ms}ms")

"""A Ray shard's task, in its worker: what travels to it and back, and the run of its session.

``ray_shards`` (the driver) sends a :class:`ShardJob` to :func:`shard_stream`, a generator Ray
streams; see that module's docstring for the layout of a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import os
import pickle
import queue
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from rlmesh_gym._audience import command_line_audience
from rlmesh_gym.evaluation._evaluate import EvaluationError, PolicyMismatchError, SessionEvaluation
from rlmesh_gym.evaluation._result import EvalResult, EvalTimings
from rlmesh_gym.evaluation._settings import EvaluationSettings
from rlmesh_gym.recording.episode_record import EpisodeRecord
from rlmesh_gym.runtime import RouteCancelledError, RuntimeLimits

if TYPE_CHECKING:
    from rlmesh_gym.recording import RecordingOptions

__all__ = [
    "POLL_SECONDS",
    "Batch",
    "End",
    "Failure",
    "PolicyFile",
    "ShardJob",
    "StopFlag",
    "failure_of",
    "shard_list",
    "shard_stream",
]

# How often a shard looks for news from its session and for a stop: part of a Ctrl+C's delay.
POLL_SECONDS = 0.25


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyFile:
    """A policy file read on the driver: written under its own name in the worker and loaded there."""

    name: str
    data: bytes
    sb3: bool  # named as sb3:PATH


@dataclasses.dataclass(frozen=True, slots=True)
class ShardJob:
    """Everything one shard's task needs (pickled by Ray)."""

    index: int
    first_lane: int
    quotas: tuple[int, ...]
    env_id: str
    imports: tuple[str, ...]
    policy: Any
    policy_name: str
    policy_seed: int | None
    # The shard's session: its episodes, the run's seed, ids, autoreset, limits and options, and
    # as ``record`` its part's RecordingOptions (lanes numbered in the shard) or None.
    settings: EvaluationSettings
    batch: int
    stop_name: str
    namespace: str | None
    command_line: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Batch:
    """Episodes a shard counted (global lanes), sent as they are counted."""

    shard: int
    records: tuple[EpisodeRecord, ...]
    pid: int
    worker_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class Failure:
    """Why a shard ended early. ``kind``: ``"input"`` (nothing ran: a bad env, policy or option),
    ``"mismatch"`` (the policy failed on the first observations), ``"failed"`` (the session
    failed after it started) or ``"stopped"`` (the driver asked it to stop)."""

    kind: str
    type_name: str
    message: str
    details: str  # the worker's traceback
    category: str  # the builtin class the driver raises for an input error it cannot unpickle
    pickled: bytes | None  # the input error itself, when it pickles


@dataclasses.dataclass(frozen=True, slots=True)
class End:
    """A shard's last item: all its counted episodes and how it ended."""

    shard: int
    records: tuple[EpisodeRecord, ...]
    batches: int
    timings: EvalTimings | None
    started_ns: int  # wall clock (time.time_ns) around the session, for the run's wall time
    ended_ns: int
    failure: Failure | None
    part: bytes | None
    contract: bytes | None
    pid: int
    worker_id: str


def failure_of(kind: str, error: BaseException) -> Failure:
    """What a shard sends about ``error``, which ended it as ``kind``."""
    details = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    category = next(
        (c.__name__ for c in (ValueError, TypeError, ImportError, OSError) if isinstance(error, c)),
        "Exception",
    )
    pickled = None
    if kind == "input":
        with contextlib.suppress(Exception):
            pickled = pickle.dumps(error)
            pickle.loads(pickled)  # an exception whose __init__ takes other arguments does not
    return Failure(kind, type(error).__name__, str(error) or type(error).__name__, details, category, pickled)


class _Done:
    """The session thread's last message to the task's loop."""


_DONE = _Done()


class _ShardRun:
    """One shard's task, in its Ray worker: the session runs on a thread of its own while the
    task's generator yields what it counted."""

    def __init__(self, job: ShardJob) -> None:
        self.job = job
        self.ray: Any = importlib.import_module("ray")
        self.pid = os.getpid()
        self.worker_id = str(self.ray.get_runtime_context().get_worker_id())
        self.messages: queue.Queue[tuple[EpisodeRecord, ...] | _Done] = queue.Queue()
        self.pending: list[EpisodeRecord] = []
        self.outcome: Any = None  # the session's EvalResult, or what it raised
        self.started_ns = self.ended_ns = 0

    def items(self) -> Iterator[Batch | End]:
        with tempfile.TemporaryDirectory(prefix="rlmesh-gym-shard-") as scratch:
            try:
                evaluation = self._prepare(scratch)
            except Exception as error:
                yield self._end((), 0, None, failure_of("input", error), None, None)
                return
            session = threading.Thread(
                target=self._run, args=(evaluation,), name="rlmesh-gym-shard-session", daemon=True
            )
            session.start()
            batches, stopped, looked = 0, False, 0.0
            while True:
                try:
                    message = self.messages.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    message = None
                if isinstance(message, _Done):
                    break
                if message is not None:
                    batches += 1
                    yield Batch(self.job.index, message, self.pid, self.worker_id)
                if not stopped and time.monotonic() - looked >= POLL_SECONDS:
                    looked = time.monotonic()
                    if self._stop_requested():
                        evaluation.cancel()  # thread-safe: the session ends after its step
                        stopped = True
            session.join()
            yield self._ended(evaluation, batches, stopped, scratch)

    def _prepare(self, scratch: str) -> SessionEvaluation:
        """The shard's env, model and session; raises what a bad input raises in-process."""
        from rlmesh_gym.envs.env_ids import import_env_packages
        from rlmesh_gym.envs.resolve import resolve_env
        from rlmesh_gym.evaluation._blocking import run_blocking
        from rlmesh_gym.evaluation._lane_seeds import lane_ordinal_seeds
        from rlmesh_gym.policies.resolve import resolve_policy

        job = self.job
        settings = job.settings
        import_env_packages(job.imports)
        policy = self._policy(scratch)
        resolved = resolve_env(
            job.env_id,
            num_envs=len(job.quotas),
            autoreset=settings.autoreset,
            vectorization=settings.vectorization,
            env_kwargs=settings.env_kwargs,
        )
        try:
            if settings.seed is not None:
                # Lane j is seeded as global lane first_lane + j of the num_envs-lane run (whose
                # session and route ids the driver put in the settings).
                seeded = lane_ordinal_seeds(
                    resolved.env,
                    len(job.quotas),
                    settings.seed,
                    cast(str, settings.session_id),
                    cast(str, settings.route_id),
                    job.first_lane,
                )
                resolved = dataclasses.replace(resolved, env=seeded)
            model = resolve_policy(
                policy,
                resolved.env.contract,
                seed=job.policy_seed,
                device=settings.device,
                deterministic=settings.deterministic,
                allow_pickle=settings.allow_pickle,
            )
            if settings.record is not None:
                options = cast("RecordingOptions", settings.record)  # the driver sends RecordingOptions
                part = dataclasses.replace(options, path=os.path.join(scratch, "part.rec"))
                settings = dataclasses.replace(settings, record=part)
            return SessionEvaluation(
                resolved,
                model,
                settings,
                policy_name=job.policy_name,
                quotas=job.quotas,
                on_counted=self._counted,
            )
        except BaseException:
            timeout = (job.settings.limits or RuntimeLimits()).service_close_timeout
            run_blocking(lambda: resolved.env.close(timeout), lambda: None)
            raise

    def _policy(self, scratch: str) -> Any:
        policy = self.job.policy
        if not isinstance(policy, PolicyFile):
            return policy
        path = os.path.join(scratch, policy.name)
        with open(path, "wb") as out:
            out.write(policy.data)
        return f"sb3:{path}" if policy.sb3 else path

    def _run(self, evaluation: SessionEvaluation) -> None:
        self.started_ns = time.time_ns()
        try:
            self.outcome = asyncio.run(evaluation.run())
        except BaseException as error:  # handed to the task's loop
            self.outcome = error
        finally:
            self.ended_ns = time.time_ns()
            self.messages.put(_DONE)

    def _global(self, record: EpisodeRecord) -> EpisodeRecord:
        return dataclasses.replace(record, lane=self.job.first_lane + record.lane, shard=self.job.index)

    def _counted(self, record: EpisodeRecord) -> None:
        # On the session's thread. A batch is a fixed number of episodes, so that a retried
        # task yields as many objects as its first attempt (Ray replays a generator by count).
        self.pending.append(self._global(record))
        if len(self.pending) == self.job.batch:
            self.messages.put(tuple(self.pending))
            self.pending.clear()

    def _stop_requested(self) -> bool:
        try:
            self.ray.get_actor(self.job.stop_name, namespace=self.job.namespace)
        except ValueError:  # no such actor: no stop asked for
            return False
        return True

    def _ended(self, evaluation: SessionEvaluation, batches: int, stopped: bool, scratch: str) -> End:
        outcome = self.outcome
        failure = None
        if isinstance(outcome, EvalResult):
            result = outcome
        elif isinstance(outcome, EvaluationError):
            result = outcome.partial
            if isinstance(outcome, PolicyMismatchError):
                kind = "mismatch"
            elif stopped and isinstance(outcome.__cause__, RouteCancelledError):
                kind = "stopped"
            else:
                kind = "failed"
            failure = failure_of(kind, outcome)
        else:  # not an outcome of the session (an error while it was set up or closed)
            result = evaluation.partial_result()
            failure = failure_of("failed", outcome)
        part = None
        if self.job.settings.record is not None:
            path = os.path.join(scratch, "part.rec")
            if os.path.exists(path):
                with open(path, "rb") as stream:
                    part = stream.read()
        contract = evaluation.resolved.env.contract.SerializeToString(deterministic=True)
        records = tuple(self._global(record) for record in result.episodes)
        return self._end(records, batches, result.timings, failure, part, contract)

    def _end(
        self,
        records: tuple[EpisodeRecord, ...],
        batches: int,
        timings: EvalTimings | None,
        failure: Failure | None,
        part: bytes | None,
        contract: bytes | None,
    ) -> End:
        return End(
            self.job.index,
            records,
            batches,
            timings,
            self.started_ns,
            self.ended_ns,
            failure,
            part,
            contract,
            self.pid,
            self.worker_id,
        )


def shard_stream(job: ShardJob) -> Iterator[Batch | End]:
    """One shard's Ray task: a generator, so Ray streams what it yields to the driver."""
    with command_line_audience() if job.command_line else contextlib.nullcontext():
        yield from _ShardRun(job).items()


def shard_list(job: ShardJob) -> list[Batch | End]:
    """One shard's Ray task for a Ray Client connection (``ray://``), which cannot stream a
    generator: every item at once, at the end."""
    return list(shard_stream(job))


class StopFlag:
    """Its existence, as a named actor, asks every shard of a run to stop."""

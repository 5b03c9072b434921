"""Evaluate on a Ray cluster: the lanes split into shards, one Ray task each, one :class:`EvalResult`.

Usage (docs/evaluation.md, "On a Ray cluster")::

    result = evaluate_on_ray("CartPole-v1", "pretrained:cartpole", cluster=RayCluster("local", shards=4),
                             episodes=100, num_envs=8, seed=0)

How a run is laid out (the reasons: docs/design/evaluation.md, "Ray shards"):

* The ``num_envs`` lanes are split into ``shards`` contiguous slices (the first
  ``num_envs % shards`` one lane longer): shard ``s`` holds global lanes ``a .. a + n - 1`` and
  their quotas ``lane_quotas(episodes, num_envs)[a : a + n]``. A shard whose quotas are all 0
  runs nothing.
* Each shard is one Ray task, a streaming generator. In its worker it builds an ``n``-lane
  vector env from the env id, resolves the policy and runs the single-env path of
  :func:`evaluate` (``SessionEvaluation``) with its quotas, as the session and route of the
  ``num_envs``-lane run (``default_ids(env_id, num_envs)``), its lane ``j`` seeded as global lane
  ``a + j`` (``LaneOrdinalSeeds(first_lane=a)``). Under SAME_STEP and NEXT_STEP only the cold
  reset is seeded, so every lane plays the episodes it plays in-process.
* The task yields its counted episodes (global lanes, ``shard`` set) in batches of a fixed
  number of episodes, never by time, so that a retried task yields as many objects as the first
  attempt; then one last item: all its episodes again (the authoritative list: after a retry,
  those of the attempt that finished), its timings, its recording part's bytes and how it ended.
* A worker or node lost mid-run is Ray's to retry (``max_retries``, ``retry_exceptions=False``),
  and the retry replays the same episodes. Every other failure (a bad input, a policy that does
  not fit or raises, ``max_steps``) is caught in the task and sent as its last item, so it is
  never retried.
* A stop (Ctrl+C, or another shard failed) is a named actor the shards look for: each ends its
  session after the current step and sends its last item. Shards still running ``stop_grace``
  seconds later are cancelled with ``ray.cancel(force=True)``.

``ray`` is imported only when a run starts (``pip install 'rlmesh-gym[ray]'``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import pickle
import signal
import threading
import time
import uuid
import warnings
from typing import Any

from rlmesh_gym._audience import on_command_line
from rlmesh_gym._regular_file import require_regular_file
from rlmesh_gym.evaluation._evaluate import (
    EvaluationError,
    EvaluationInterrupted,
    PolicyMismatchError,
    default_ids,
)
from rlmesh_gym.evaluation._options import EvaluationOptions, check_options, fields_set
from rlmesh_gym.evaluation._progress import EpisodeProgress, progress_wanted
from rlmesh_gym.evaluation._quotas import lane_quotas
from rlmesh_gym.evaluation._ray_cluster import RayCluster, connected, is_client
from rlmesh_gym.evaluation._ray_worker import (
    POLL_SECONDS,
    Batch,
    End,
    Failure,
    PolicyFile,
    ShardJob,
    StopFlag,
    shard_list,
    shard_stream,
)
from rlmesh_gym.evaluation._result import EvalResult, EvalTimings, combined_timings
from rlmesh_gym.evaluation._settings import EvaluationSettings
from rlmesh_gym.policies.resolve import describe_policy, policy_file
from rlmesh_gym.recording.episode_record import EpisodeRecord
from rlmesh_gym.runtime.autoreset import AutoresetMode
from rlmesh_gym.runtime.seeds import reset_seed

__all__ = ["RayCluster", "evaluate_on_ray"]

# How long one ready item may take to arrive at the driver (a large recording part included).
_GET_TIMEOUT = 120.0
# How long force-cancelled shards get to report before the driver stops waiting for them.
_CANCEL_WAIT = 10.0
# Batches per shard (about): progress arrives this often, whatever the episodes' length.
_BATCHES_PER_SHARD = 16
# EvaluationOptions a Ray run cannot honour: hooks would run (and keep their state) in the
# workers; max_episodes goes with evaluate()'s target_ci, which a Ray run does not take.
_NOT_ON_RAY = ("hooks", "max_episodes")


class _Interrupts:
    """Counts Ctrl+C while a run waits for its shards: the first asks for a stop, the second stops
    waiting. On the main thread SIGINT is caught here, so a Ctrl+C never lands inside Ray's calls."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is threading.main_thread() and (
            signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.count >= 2:
            raise KeyboardInterrupt


@dataclasses.dataclass(slots=True)
class _Shard:
    """One shard on the driver: its lanes, its task and what it sent."""

    job: ShardJob
    handle: Any = None
    received: list[EpisodeRecord] = dataclasses.field(default_factory=list)
    batches: int = 0
    end: End | None = None
    lost: BaseException | None = None
    first_pid: int | None = None

    @property
    def lanes(self) -> str:
        first = self.job.first_lane
        return f"lanes {first}-{first + len(self.job.quotas) - 1}"

    @property
    def records(self) -> tuple[EpisodeRecord, ...]:
        """Its episodes: those of its last item, else those it sent in batches."""
        return self.end.records if self.end is not None else tuple(self.received)

    @property
    def failure(self) -> Failure | None:
        return self.end.failure if self.end is not None else None


def _key(record: EpisodeRecord) -> tuple[Any, ...]:
    """What makes two runs' episodes the same episode (ids and wall times differ every run)."""
    return (
        record.lane,
        record.seed,
        record.episode_return,
        record.length,
        record.terminated,
        record.truncated,
    )


class _RayRun:
    """A prepared Ray evaluation: checked arguments, the shards' jobs; no connection yet."""

    def __init__(self, env: Any, policy: Any, cluster: Any, settings: EvaluationSettings) -> None:
        if not isinstance(env, str):
            raise TypeError(
                "evaluate_on_ray() takes an env id (a str such as 'CartPole-v1' or 'package:EnvId'): each "
                "Ray worker builds its lanes from the id, EvaluationOptions.env_kwargs and "
                f"RayCluster.imports; got {type(env).__module__}.{type(env).__qualname__}. Evaluate an env "
                "object in-process with evaluate()"
            )
        if isinstance(cluster, str):
            # Shards not chosen: the default number, but never more than the lanes.
            default = RayCluster().shards
            lanes = settings.num_envs if isinstance(settings.num_envs, int) else default
            cluster = RayCluster(cluster, shards=max(1, min(default, lanes)))
        if not isinstance(cluster, RayCluster):
            raise TypeError(
                f"cluster must be a Ray address (str) or a RayCluster, got {type(cluster).__qualname__}"
            )
        from rlmesh_gym.envs.gym_vector import check_num_envs, parse_vectorization
        from rlmesh_gym.envs.resolve import EVALUATION_AUTORESET

        self.env_id = env
        self.cluster = cluster
        self.settings = settings
        num_envs = cluster.shards if settings.num_envs is None else settings.num_envs
        check_num_envs(num_envs)
        if cluster.shards > num_envs:
            raise ValueError(
                f"RayCluster.shards={cluster.shards} is more than num_envs={num_envs}: every shard runs at "
                "least one lane; ask for fewer shards or more lanes"
            )
        self.num_envs = num_envs
        mode = EVALUATION_AUTORESET if settings.autoreset is None else AutoresetMode.parse(settings.autoreset)
        self.autoreset = mode
        self.vectorization = parse_vectorization(settings.vectorization or "sync")
        self.record = self._recording_options(settings.record)
        self.policy = _payload(policy)
        self.policy_name = describe_policy(policy)
        session, route = default_ids(env, num_envs)
        self.session_id = settings.session_id or session
        self.route_id = settings.route_id or route
        self.quotas = lane_quotas(settings.episodes, num_envs)
        self.gpus = cluster.gpus_for(settings.device)
        self.interrupts = _Interrupts()
        self.stop_name = f"rlmesh-gym-stop-{uuid.uuid4().hex}"
        self.failed: _Shard | None = None

    @classmethod
    def from_arguments(cls, env: Any, policy: Any, cluster: Any, arguments: dict[str, Any]) -> _RayRun:
        options = check_options(arguments.pop("options"))
        given = fields_set(options, _NOT_ON_RAY)
        if given:
            raise ValueError(
                f"EvaluationOptions {', '.join(given)} cannot be given for a Ray evaluation: hooks would "
                "run in the Ray workers, whose state never comes back, and max_episodes goes with "
                "evaluate()'s target_ci; evaluate in-process with evaluate() for either"
            )
        return cls(env, policy, cluster, EvaluationSettings.of(options, **arguments))

    @staticmethod
    def _recording_options(record: Any) -> Any:
        if record is None:
            return None
        from rlmesh_gym.recording import RecordingOptions

        options = record if isinstance(record, RecordingOptions) else RecordingOptions(record)
        if options.frame_lanes:
            raise ValueError(
                "a Ray evaluation cannot record frames (RecordingOptions.frame_lanes / --frame-lanes): "
                "record without frames, or evaluate in-process with evaluate()"
            )
        return options

    # -- the shards ------------------------------------------------------------------------------

    def _jobs(self, namespace: str | None) -> list[ShardJob]:
        """One job per shard with something to count (a shard whose quotas are all 0 runs nothing)."""
        settings, cluster = self.settings, self.cluster
        jobs = []
        first = 0
        for index in range(cluster.shards):
            lanes = self.num_envs // cluster.shards + (1 if index < self.num_envs % cluster.shards else 0)
            quotas = self.quotas[first : first + lanes]
            if sum(quotas):
                jobs.append(
                    ShardJob(
                        index=index,
                        first_lane=first,
                        quotas=quotas,
                        env_id=self.env_id,
                        imports=tuple(cluster.imports),
                        policy=self.policy,
                        policy_name=self.policy_name,
                        policy_seed=self._policy_seed(first),
                        settings=dataclasses.replace(
                            settings,
                            episodes=sum(quotas),
                            num_envs=None,
                            autoreset=self.autoreset.value,
                            vectorization=self.vectorization,
                            record=self._part(first, lanes, index),
                            progress=False,
                            session_id=self.session_id,
                            route_id=self.route_id,
                        ),
                        batch=max(1, math.ceil(sum(quotas) / _BATCHES_PER_SHARD)),
                        stop_name=self.stop_name,
                        namespace=namespace,
                        command_line=on_command_line(),
                    )
                )
            first += lanes
        return jobs

    def _policy_seed(self, first_lane: int) -> int | None:
        """The seed of a shard's policy: the run's for the shard of lane 0 (so one shard samples as
        in-process evaluate() does), one derived from it and the shard's first lane for the others
        (a sampling policy's stream is per policy object; equal seeds would repeat one stream)."""
        seed = self.settings.seed
        if seed is None or first_lane == 0:
            return seed
        return reset_seed(seed, self.session_id, f"{self.route_id}-policy", 0, first_lane)

    def _part(self, first_lane: int, lanes: int, index: int) -> Any:
        if self.record is None:
            return None
        from rlmesh_gym.recording.fleet import part_options

        return part_options(self.record, first_lane, lanes, f"shard-{index}")

    def _part_path(self, index: int) -> str:
        return f"{os.fspath(self.record.path)}.part-shard-{index}"

    # -- running ---------------------------------------------------------------------------------

    def run(self) -> EvalResult:
        target = self._reserve_recording()  # a bad path fails before any cluster is started
        try:
            with connected(self.cluster) as ray:
                return self._run(ray, target)
        finally:
            if target is not None:
                target.close()  # a no-op once merged

    def _reserve_recording(self) -> Any:
        if self.record is None:
            return None
        from rlmesh_gym.recording.fleet import MergeTarget

        return MergeTarget(self.record)

    def _check_resources(self, ray: Any) -> None:
        # A local cluster never grows: a shard it cannot place would wait forever.
        if self.cluster.address != "local":
            return
        total = ray.cluster_resources()
        for name, wanted, option in (
            ("CPU", self.cluster.cpus_per_shard, "cpus_per_shard"),
            ("GPU", self.gpus, "gpus_per_shard"),
        ):
            if wanted > total.get(name, 0.0):
                raise ValueError(
                    f"a shard asks for {wanted:g} {name}(s) (RayCluster.{option}"
                    + (f", from device={self.settings.device!r}" if name == "GPU" else "")
                    + f"), but the local Ray cluster has {total.get(name, 0.0):g}"
                )

    def _run(self, ray: Any, target: Any) -> EvalResult:
        self._check_resources(ray)
        namespace = ray.get_runtime_context().namespace
        shards = [_Shard(job) for job in self._jobs(namespace)]
        client = is_client(ray)
        task = ray.remote(shard_list if client else shard_stream)
        bar = None
        if progress_wanted(self.settings.progress):
            description = f"{self.env_id} x{self.num_envs} on {self.cluster.shards} Ray shards"
            bar = EpisodeProgress(self.settings.episodes, description)
        result: EvalResult | None = None
        in_flight: BaseException | None = None
        stop_flag: Any = None
        try:
            with self.interrupts:
                for shard in shards:
                    shard.handle = self._submit(task, shard)
                stop_flag = self._drive(ray, shards, bar, client)
            result = self._outcome(shards)
        except BaseException as error:
            in_flight = error
            raise
        finally:
            if bar is not None:
                bar.close()
            for shard in shards:
                if shard.handle is not None and shard.end is None and shard.lost is None:
                    with contextlib.suppress(Exception):
                        ray.cancel(shard.handle, force=True)
            if stop_flag is not None:
                with contextlib.suppress(Exception):
                    ray.kill(stop_flag)
            if target is not None:
                try:
                    self._merge(target, shards)
                except OSError as merge_error:
                    # An interrupt in flight goes on (the parts stay on disk); any other outcome
                    # becomes an EvaluationError that keeps the result.
                    if in_flight is None or isinstance(in_flight, Exception):
                        carried = result if in_flight is None else getattr(in_flight, "partial", None)
                        if carried is None:
                            carried = self._result(shards, complete=False)
                        prefix = f"Ray evaluation of {self.env_id}"
                        if in_flight is not None:
                            prefix += f" failed ({in_flight}), and"
                        raise EvaluationError(f"{prefix}: {merge_error}", carried) from merge_error
        assert result is not None  # every other path raised
        return result

    def _submit(self, task: Any, shard: _Shard) -> Any:
        job, cluster = shard.job, self.cluster
        options = task.options(
            num_cpus=cluster.cpus_per_shard,
            num_gpus=self.gpus,
            max_retries=cluster.max_retries,
            retry_exceptions=False,
            name=f"rlmesh-gym shard {job.index} ({shard.lanes})",
        )
        try:
            return options.remote(job)
        except (TypeError, pickle.PicklingError) as error:
            raise TypeError(
                f"policy {self.policy_name!r} cannot be sent to the Ray workers ({error}); pass a policy "
                "they can load themselves: 'pretrained:NAME', 'package.module:attr' or a file"
            ) from error

    def _drive(self, ray: Any, shards: list[_Shard], bar: EpisodeProgress | None, client: bool) -> Any:
        """Take every shard's items until all have ended, stopping them when asked (Ctrl+C) or when
        one failed; returns the stop actor if one was made."""
        running = [shard for shard in shards if shard.handle is not None]
        stop_flag: Any = None
        stop_deadline: float | None = None
        cancel_deadline: float | None = None
        while running:
            try:
                now = time.monotonic()
                if stop_deadline is None and (self.interrupts.count or self.failed is not None):
                    stop_flag = self._request_stop(ray)
                    stop_deadline = now + self.cluster.stop_grace
                if (
                    cancel_deadline is None
                    and stop_deadline is not None
                    and (now >= stop_deadline or self.interrupts.count >= 2)
                ):
                    for shard in running:
                        with contextlib.suppress(Exception):
                            ray.cancel(shard.handle, force=True)
                    cancel_deadline = now + _CANCEL_WAIT
                if cancel_deadline is not None and (now >= cancel_deadline or self.interrupts.count >= 2):
                    return stop_flag  # what they sent so far is all there is
                ready, _ = ray.wait([shard.handle for shard in running], num_returns=1, timeout=POLL_SECONDS)
                for handle in ready:
                    shard = next(s for s in running if s.handle is handle or s.handle == handle)
                    if not self._take(ray, shard, bar, client):
                        running.remove(shard)
            except KeyboardInterrupt:  # off the main thread (no handler), or a second Ctrl+C
                self.interrupts.count += 1
        return stop_flag

    def _request_stop(self, ray: Any) -> Any:
        flag = ray.remote(num_cpus=0)(StopFlag)
        return flag.options(name=self.stop_name, namespace=ray.get_runtime_context().namespace).remote()

    def _take(self, ray: Any, shard: _Shard, bar: EpisodeProgress | None, client: bool) -> bool:
        """Take the shard's next item (with Ray Client: all of them); whether more may come."""
        try:
            if client:
                items = ray.get(shard.handle, timeout=_GET_TIMEOUT)
            else:
                try:
                    ref = next(shard.handle)
                except StopIteration:
                    return False
                items = [ray.get(ref, timeout=_GET_TIMEOUT)]
        except ray.exceptions.RayError as error:  # lost for good (retries used up), or cancelled
            shard.lost = error
            if self.failed is None and not self.interrupts.count:
                self.failed = shard
            return False
        for item in items:
            self._accept(shard, item, bar)
        return not client

    def _accept(self, shard: _Shard, item: Any, bar: EpisodeProgress | None) -> None:
        if isinstance(item, Batch):
            if shard.first_pid is None:
                shard.first_pid = item.pid
            shard.batches += 1
            shard.received.extend(item.records)
            if bar is not None:
                for record in item.records:
                    bar.update(record.episode_return)
            return
        assert isinstance(item, End)
        shard.end = item
        if bar is not None:
            for record in item.records[len(shard.received) :]:
                bar.update(record.episode_return)
        self._check_replay(shard)
        if item.failure is not None and item.failure.kind != "stopped" and self.failed is None:
            self.failed = shard

    def _check_replay(self, shard: _Shard) -> None:
        """Warn when a retried shard's replay differs from what its first attempt sent."""
        end = shard.end
        assert end is not None
        if shard.first_pid in (None, end.pid) or end.failure is not None:
            return
        sent = [_key(record) for record in shard.received]
        replayed = [_key(record) for record in end.records[: len(sent)]]
        if sent != replayed or shard.batches != end.batches:
            warnings.warn(
                f"shard {end.shard} ({shard.lanes}) was run again by Ray after its worker was lost, and the "
                "rerun played other episodes than the first run had sent: the env or the policy is not "
                "deterministic, so this result is not reproducible; it holds the rerun's episodes",
                RuntimeWarning,
                stacklevel=2,
            )

    # -- the outcome -----------------------------------------------------------------------------

    def _result(self, shards: list[_Shard], *, complete: bool) -> EvalResult:
        ends = [shard.end for shard in shards if shard.end is not None and shard.end.timings is not None]
        timings = EvalTimings()
        if ends:
            started = min(end.started_ns for end in ends)
            ended = max(end.ended_ns for end in ends)
            timings = combined_timings(
                [end.timings for end in ends if end.timings is not None], max(ended - started, 1) / 1e9
            )
        return EvalResult(
            env_id=self.env_id,
            policy=self.policy_name,
            num_envs=self.num_envs,
            episodes_requested=self.settings.episodes,
            seed=self.settings.seed,
            autoreset=self.autoreset.value,
            vectorization=self.vectorization,
            session_id=self.session_id,
            route_id=self.route_id,
            quotas=self.quotas,
            episodes=tuple(record for shard in shards for record in shard.records),
            timings=timings,
            complete=complete,
        )

    def _outcome(self, shards: list[_Shard]) -> EvalResult:
        """The result, or the error that ended the run (with every episode received)."""
        if self.interrupts.count:
            partial = self._result(shards, complete=False)
            raise EvaluationInterrupted(
                f"Ray evaluation of {self.env_id} interrupted after {len(partial.episodes)} of "
                f"{self.settings.episodes} episodes",
                partial,
            )
        failed = self.failed
        if failed is None:
            missing = [shard for shard in shards if shard.end is None]
            failed = missing[0] if missing else None
        if failed is None:
            return self._result(shards, complete=True)
        partial = self._result(shards, complete=False)
        counted = f"after {len(partial.episodes)} of {self.settings.episodes} episodes"
        where = f"shard {failed.job.index} ({failed.lanes})"
        failure = failed.failure
        if failure is None:
            lost = failed.lost
            raise EvaluationError(
                f"Ray evaluation of {self.env_id} stopped {counted}: {where} was lost "
                f"(RayCluster.max_retries={self.cluster.max_retries}): {type(lost).__name__}: {lost}",
                partial,
            ) from lost
        if failure.kind == "input":
            raise _input_error(failure, where)
        details = RuntimeError(f"{where}, in its Ray worker:\n{failure.details}")
        error_type = PolicyMismatchError if failure.kind == "mismatch" else EvaluationError
        raise error_type(
            f"Ray evaluation of {self.env_id} stopped {counted}: {where}: {failure.message}", partial
        ) from details

    def _merge(self, target: Any, shards: list[_Shard]) -> None:
        from rlmesh_gym.proto import env_pb2
        from rlmesh_gym.recording.fleet import FleetPart

        ended = [shard.end for shard in shards if shard.end is not None and shard.end.part is not None]
        if not ended:
            target.close()
            return
        parts = []
        for end in ended:
            assert end.part is not None
            path = self._part_path(end.shard)
            with open(path, "wb") as out:
                out.write(end.part)
            first_lane = next(s.job.first_lane for s in shards if s.job.index == end.shard)
            parts.append(FleetPart(path, None, first_lane, shard=end.shard))
        contract = env_pb2.EnvContract.FromString(next(e.contract for e in ended if e.contract))
        target.merge(contract, self.num_envs, parts, env_id=self.env_id, base_seed=self.settings.seed)


def _input_error(failure: Failure, where: str) -> BaseException:
    """A shard's bad-input error as the driver raises it: the error itself when it unpickles here,
    else the builtin class it is an instance of, with its message."""
    if failure.pickled is not None:
        with contextlib.suppress(Exception):
            error = pickle.loads(failure.pickled)
            if isinstance(error, BaseException):
                return error
    builtin = {
        "ValueError": ValueError,
        "TypeError": TypeError,
        "ImportError": ImportError,
        "OSError": OSError,
    }
    return builtin.get(failure.category, RuntimeError)(f"{failure.type_name}: {failure.message} ({where})")


def _payload(policy: Any) -> Any:
    """What travels for ``policy``: a file's bytes (read here, loaded in the worker under the same
    ``allow_pickle`` rule), a spec string as it is, any object as Ray serializes it."""
    named = policy_file(policy)
    if named is None:
        return policy
    path, sb3 = named
    expected = "a policy file (a torch.export program, TorchScript archive, pickled module or SB3 zip)"
    require_regular_file(path, "policy", expected)
    with open(path, "rb") as stream:
        data = stream.read()
    return PolicyFile(os.path.basename(path) or "policy", data, sb3)


def evaluate_on_ray(
    env: str,
    policy: Any,
    *,
    cluster: str | RayCluster = "local",
    episodes: int = 10,
    num_envs: int | None = None,
    seed: int | None = None,
    autoreset: str | None = None,
    deterministic: bool = True,
    device: str = "cpu",
    record: str | os.PathLike[str] | Any | None = None,
    progress: bool = True,
    options: EvaluationOptions | None = None,
) -> EvalResult:
    """Evaluate ``policy`` on the env id ``env`` over a Ray cluster and return one :class:`EvalResult`.

    ``cluster`` is a Ray address (``"local"``: a cluster started on this machine for the run,
    ``"auto"``, ``"ray://HOST:PORT"`` or ``"HOST:PORT"``; 2 shards, or 1 for one lane) or a
    :class:`RayCluster` saying also how many ``shards`` (Ray tasks) share the ``num_envs`` lanes
    (``num_envs=None``: one lane per shard) and what each asks of the cluster. Each shard builds
    its slice of the lanes from ``env`` (an env id: it travels as the id,
    ``EvaluationOptions.env_kwargs`` and ``RayCluster.imports``) and runs one session of
    :func:`evaluate` on it with the episodes' per-lane quotas.

    Every lane is seeded as in-process: under SAME_STEP (the default) and NEXT_STEP the result
    holds, episode for episode, what ``evaluate(env, policy, episodes=, num_envs=, seed=)``
    gives, whatever the number of shards. Under DISABLED every episode gets a lane-ordinal seed
    (lane i's k-th episode: generation k), independent of the shards and of failures but not
    in-process ``evaluate()``'s; a sampling policy (``deterministic=False``, ``"random"``) draws
    from one stream per shard, so its episodes depend on the number of shards.

    ``policy`` is a spec (``"pretrained:NAME"``, ``"package.module:attr"``, ``"random"``) each
    worker resolves, a path (or ``"sb3:PATH"``) read here and loaded in the workers under the
    same ``EvaluationOptions.allow_pickle`` rule, or an object Ray can serialize (an
    ``nn.Module``, a callable). A worker or node lost mid-run is retried by Ray
    (``RayCluster.max_retries``) and the retry replays the same episodes. A failure that is not
    the cluster's (a policy mismatch or error, ``max_steps``) is not retried: it stops the other
    shards and raises :class:`EvaluationError` (:class:`PolicyMismatchError`) with every episode
    received in ``.partial``; a bad env id or policy raises what it raises in-process. Ctrl+C
    stops every shard and raises :class:`EvaluationInterrupted` (a ``KeyboardInterrupt``) with
    the episodes counted so far in ``.partial``. ``record`` writes one recording of every lane
    (no frames). Of ``options``, ``hooks`` and ``max_episodes`` cannot be given.

    ``ray`` is needed (``pip install 'rlmesh-gym[ray]'``); it is imported when this is called.
    """
    arguments = {name: value for name, value in locals().items() if name not in ("env", "policy", "cluster")}
    return _RayRun.from_arguments(env, policy, cluster, arguments).run()

"""Evaluate over a fleet of rlmesh env servers: one session per server, one :class:`EvalResult`.

Usage, with two ``rlmesh-gym serve-env`` servers running (docs/evaluation.md runs it)::

    result = evaluate_fleet(["10.0.0.1:50051", "10.0.0.2:50051"], "pretrained:cartpole", episodes=100, seed=0)

How a fleet run is laid out (``docs/evaluation.md`` has the user's view):

* Lanes are numbered fleet-wide in the order the servers are given: server ``s`` holds lanes
  ``first_lane(s) .. first_lane(s) + num_envs(s) - 1``. The episodes are split over all of
  them with :func:`lane_quotas`, exactly as over the lanes of one env.
* Server ``s`` runs one runtime session, the single-env path of :func:`evaluate` with its
  slice of the quotas, as session ``session_id`` (default ``eval-<env_id>``), route
  ``server-<s>-lanes-<num_envs(s)>`` and the run's base seed. Its reset seeds are therefore
  those of ``evaluate(env_id, num_envs=num_envs(s), seed=seed,
  options=EvaluationOptions(session_id=session_id, route_id="server-<s>-lanes-<num_envs(s)>"))``
  in-process, lane for lane.
* Every server gets its own policy (resolved once per session) or, with ``policy_address``,
  its own route on that one model server.
* A server whose session fails (its env calls fail, time out or the connection drops) ends
  the run with :class:`EvaluationError` carrying every episode counted on every server (the
  other sessions are stopped after their current step) -- or, with
  ``on_server_failure="reassign"``, the others finish their own quotas and then the failed
  servers' unmet episodes run in a new round on the survivors (route
  ``server-<s>-lanes-<n>-reassign-<round>``), split over the surviving lanes the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import Sequence
from time import perf_counter_ns
from typing import Any

from rlmesh_gym.evaluation._blocking import run_blocking
from rlmesh_gym.evaluation._evaluate import (
    EvaluationError,
    PolicyMismatchError,
    SessionEvaluation,
    default_ids,
)
from rlmesh_gym.evaluation._options import EvaluationOptions, check_options, fields_set
from rlmesh_gym.evaluation._progress import EpisodeProgress, progress_wanted
from rlmesh_gym.evaluation._quotas import lane_quotas
from rlmesh_gym.evaluation._result import EvalResult, EvalTimings, FleetServer, combined_timings
from rlmesh_gym.evaluation._settings import EvaluationSettings
from rlmesh_gym.evaluation._signatures import coroutine_twin, moved_arguments
from rlmesh_gym.policies.resolve import describe_policy, resolve_policy
from rlmesh_gym.recording.episode_record import EpisodeRecord
from rlmesh_gym.runtime import EnvRpcError, OperationTimeoutError, RouteCancelledError
from rlmesh_gym.runtime.autoreset import AutoresetMode

__all__ = ["evaluate_fleet", "evaluate_fleet_async", "fleet_route_id"]

# evaluate_fleet's arguments that say how to reach the servers and what to do when one fails,
# not how to evaluate.
_TRANSPORT = ("on_server_failure", "token", "connect_timeout", "request_timeout", "policy_address")
_FAILURE_MODES = ("raise", "reassign")
# Options the servers set themselves (their lanes, autoreset mode and env), and target_ci's cap.
_NOT_FOR_A_FLEET = ("vectorization", "env_kwargs", "route_id", "max_episodes")

_STOPPED_REASON = "another server of the fleet failed"


def fleet_route_id(server: int, num_envs: int, round_: int = 0) -> str:
    """The route id of server ``server`` (0-based) with ``num_envs`` lanes in reassignment round
    ``round_`` (0: the first run). It feeds the reset seeds, so it names what makes them differ."""
    route = f"server-{server}-lanes-{num_envs}"
    return route if round_ == 0 else f"{route}-reassign-{round_}"


@dataclasses.dataclass(slots=True)
class _Server:
    """One server of the fleet and what it has done so far."""

    index: int
    address: str
    first_lane: int
    num_envs: int
    quotas: list[int]  # episodes asked of each of its lanes, over every round
    counts: list[int]  # episodes counted on each of its lanes
    route_ids: list[str] = dataclasses.field(default_factory=list)
    failure: str | None = None

    def report(self) -> FleetServer:
        routes, episodes = tuple(self.route_ids), sum(self.counts)
        return FleetServer(self.address, self.first_lane, self.num_envs, routes, episodes, self.failure)


@dataclasses.dataclass(slots=True)
class _Outcome:
    """How one session ended: its records (fleet-wide lanes), timings and error (if any)."""

    server: _Server
    records: list[EpisodeRecord]
    timings: EvalTimings
    error: BaseException | None


class _Fleet:
    """A prepared fleet evaluation: checked options, no connection yet."""

    def __init__(
        self,
        addresses: Sequence[str],
        policy: Any,
        settings: EvaluationSettings,
        *,
        on_server_failure: str,
        token: str | None,
        connect_timeout: float,
        request_timeout: float | None,
        policy_address: str | None,
    ) -> None:
        self.addresses = _check_addresses(addresses)
        if policy_address is not None and policy is not None:
            raise ValueError("pass either policy or policy_address, not both")
        if policy_address is None and policy is None:
            raise ValueError("a fleet evaluation needs a policy (or a policy_address)")
        self.policy = policy
        self.policy_name = policy_address if policy_address is not None else describe_policy(policy)
        if on_server_failure not in _FAILURE_MODES:
            raise ValueError(
                f"on_server_failure must be one of {', '.join(map(repr, _FAILURE_MODES))}, "
                f"got {on_server_failure!r}"
            )
        self.settings = settings
        self.reassign = on_server_failure == "reassign"
        self.token = token
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.policy_address = policy_address
        self.running: list[SessionEvaluation] = []
        self.interrupted = False

    @classmethod
    def from_arguments(cls, addresses: Sequence[str], policy: Any, **arguments: Any) -> _Fleet:
        """The fleet :func:`evaluate_fleet`'s arguments describe (the options checked once)."""
        transport = {name: arguments.pop(name) for name in _TRANSPORT}
        options = check_options(arguments.pop("options"))
        given = fields_set(options, _NOT_FOR_A_FLEET)
        if given:
            raise ValueError(
                f"EvaluationOptions {', '.join(given)} cannot be given for a fleet of env servers: each "
                "server sets its own lanes, autoreset mode and env (see serve-env), and a fleet evaluates "
                "a fixed number of episodes (max_episodes goes with evaluate()'s target_ci)"
            )
        return cls(addresses, policy, EvaluationSettings.of(options, **arguments), **transport)

    def cancel(self) -> None:
        """Ask every running session to end after its current step (thread-safe)."""
        self.interrupted = True
        for evaluation in list(self.running):
            evaluation.cancel()

    # -- connecting ------------------------------------------------------------------------------

    async def _connect(self, address: str) -> Any:
        from rlmesh_gym.serve import RemoteEnv  # the transport lives above evaluation

        return await RemoteEnv.connect(
            address,
            token=self.token,
            connect_timeout=self.connect_timeout,
            request_timeout=self.request_timeout,
        )

    async def _connect_all(self, addresses: Sequence[str]) -> list[Any]:
        """One open session per address, or none at all and the first failure raised."""
        opened = await asyncio.gather(*(self._connect(a) for a in addresses), return_exceptions=True)
        failures = [(a, o) for a, o in zip(addresses, opened, strict=True) if isinstance(o, BaseException)]
        if failures:
            await _close_all([o for o in opened if not isinstance(o, BaseException)])
            address, error = failures[0]
            raise _named(error, address)
        return list(opened)

    async def _model(self, env: Any) -> Any:
        if self.policy_address is None:
            return resolve_policy(
                self.policy,
                env.contract,
                seed=self.settings.seed,
                device=self.settings.device,
                deterministic=self.settings.deterministic,
                allow_pickle=self.settings.allow_pickle,
            )
        from rlmesh_gym.serve import RemoteModel

        return await RemoteModel.connect(
            self.policy_address,
            token=self.token,
            connect_timeout=self.connect_timeout,
            request_timeout=self.request_timeout,
            contract=env.contract,
        )

    # -- running ---------------------------------------------------------------------------------

    async def run(self) -> EvalResult:
        target = self._reserve_recording()  # before connecting: a bad path fails before any episode
        try:
            return await self._run(target)
        finally:
            if target is not None:
                target.close()  # a no-op once merged

    async def _run(self, target: Any) -> EvalResult:
        envs = await self._connect_all(self.addresses)
        try:
            contract = _common_contract(self.addresses, envs)
        except BaseException:
            await _close_all(envs)
            raise
        servers: list[_Server] = []
        first_lane = 0
        for index, (address, env) in enumerate(zip(self.addresses, envs, strict=True)):
            servers.append(_Server(index, address, first_lane, env.num_envs, [], [0] * env.num_envs))
            first_lane += env.num_envs
        quotas = lane_quotas(self.settings.episodes, first_lane)
        for server in servers:
            server.quotas = list(quotas[server.first_lane : server.first_lane + server.num_envs])
        self.env_id = contract.id or "env"
        self.autoreset = AutoresetMode.from_wire(contract.autoreset_mode)
        self.session = self.settings.session_id or default_ids(self.env_id, first_lane)[0]

        bar = None
        if progress_wanted(self.settings.progress):
            description = f"{self.env_id} x{first_lane} on {len(servers)} servers"
            bar = EpisodeProgress(self.settings.episodes, description)
        parts: list[tuple[str, _Server]] = []
        records: list[EpisodeRecord] = []
        timings: list[EvalTimings] = []
        reassigned = 0
        started = perf_counter_ns()
        result: EvalResult | None = None
        in_flight: BaseException | None = None
        try:
            # A server whose lanes all have a quota of 0 (fewer episodes than lanes) runs nothing.
            idle = [env for server, env in zip(servers, envs, strict=True) if not sum(server.quotas)]
            await _close_all(idle)
            plan = [(s, env, list(s.quotas)) for s, env in zip(servers, envs, strict=True) if sum(s.quotas)]
            round_ = 0
            while True:
                if round_ == 0:
                    outcomes = await self._run_round(plan, round_, bar, parts)
                else:
                    try:
                        outcomes = await self._run_round(plan, round_, bar, parts)
                    except Exception as error:  # e.g. a policy server gone: keep what was counted
                        message = f"reassignment round {round_} could not start: {error}"
                        raise _FleetFailure(message, error) from error
                records.extend(r for outcome in outcomes for r in outcome.records)
                timings.extend(outcome.timings for outcome in outcomes)
                failed = self._settle(outcomes)
                if failed is not None:  # not a server failure, or on_server_failure="raise"
                    raise failed
                unmet = [s for s in servers if s.failure is not None and sum(s.quotas) > sum(s.counts)]
                moved = sum(sum(s.quotas) - sum(s.counts) for s in unmet)
                if not moved:
                    break
                survivors = [s for s in servers if s.failure is None]
                if not survivors:
                    raise _FleetFailure("every server of the fleet failed")
                for server in unmet:  # their unmet quota moves; what they counted stays theirs
                    server.quotas = list(server.counts)
                reassigned += moved
                round_ += 1
                shares = _reassignment_plan(survivors, moved)
                try:
                    opened = await self._connect_all([server.address for server, _ in shares])
                except Exception as error:
                    message = f"reconnecting for reassignment round {round_} failed: {error}"
                    raise _FleetFailure(message, error) from error
                plan = [(server, env, extra) for (server, extra), env in zip(shares, opened, strict=True)]
            result = self._result(servers, records, timings, started, reassigned, complete=True)
        except _FleetFailure as failure:
            partial = self._result(servers, records, timings, started, reassigned, complete=False)
            mismatch = isinstance(failure.cause, PolicyMismatchError)
            error_type = PolicyMismatchError if mismatch else EvaluationError
            in_flight = error_type(
                f"fleet evaluation of {self.env_id} stopped after {len(records)} of {self.settings.episodes} "
                f"episodes: {failure}",
                partial,
            )
            raise in_flight from failure.cause
        except BaseException as error:
            in_flight = error
            raise
        finally:
            if bar is not None:
                bar.close()
            if target is not None and parts:
                try:
                    self._merge_recordings(target, contract, servers, parts)
                except OSError as merge_error:
                    # An interrupt or cancellation in flight goes on (the parts stay on disk);
                    # any other outcome becomes an EvaluationError that keeps the result.
                    if in_flight is None or isinstance(in_flight, Exception):
                        carried = result if in_flight is None else getattr(in_flight, "partial", None)
                        if carried is None:
                            carried = self._result(
                                servers, records, timings, started, reassigned, complete=False
                            )
                        prefix = f"fleet evaluation of {self.env_id}"
                        if in_flight is not None:
                            prefix += f" failed ({in_flight}), and"
                        raise EvaluationError(f"{prefix}: {merge_error}", carried) from merge_error
        assert result is not None  # every other path raised
        return result

    async def _run_round(
        self,
        plan: list[tuple[_Server, Any, list[int]]],
        round_: int,
        bar: EpisodeProgress | None,
        parts: list[tuple[str, _Server]],
    ) -> list[_Outcome]:
        """Run one session per planned server at once; stop the others when one fails (unless
        reassigning). Every session's env is closed by the time this returns."""
        from rlmesh_gym.envs.resolve import ResolvedEnv  # loads gymnasium, so only when a fleet runs

        evaluations: list[tuple[_Server, SessionEvaluation, Any]] = []
        models: list[Any] = []  # every model connected, even one whose session was never built
        try:
            for server, env, quotas in plan:
                model = await self._model(env)
                models.append(model)
                route = fleet_route_id(server.index, server.num_envs, round_)
                server.route_ids.append(route)
                record = self._part_record(server, round_, parts)
                resolved = ResolvedEnv(env, self.env_id, server.num_envs, self.autoreset, None, owned=True)
                settings = EvaluationSettings(
                    episodes=sum(quotas),
                    seed=self.settings.seed,
                    hooks=self.settings.hooks,
                    progress=False,
                    record=record,
                    limits=self.settings.limits,
                    session_id=self.session,
                    route_id=route,
                    max_steps=self.settings.max_steps,
                )
                evaluation = SessionEvaluation(
                    resolved,
                    model,
                    settings,
                    policy_name=self.policy_name,
                    quotas=tuple(quotas),
                    progress_bar=bar,
                )
                evaluations.append((server, evaluation, model))
        except BaseException:
            # Nothing ran yet: close every env of the round and every model connected so far.
            await _close_all([env for _, env, _ in plan])
            await _close_models(models, self.policy_address)
            raise
        self.running = [evaluation for _, evaluation, _ in evaluations]
        if self.interrupted:  # Ctrl+C while connecting: the sessions end at their first step
            self.cancel()
        tasks = {
            asyncio.ensure_future(evaluation.run(yield_to_loop=True)): (server, evaluation)
            for server, evaluation, _ in evaluations
        }
        outcomes: dict[asyncio.Future[Any], _Outcome] = {}
        try:
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    server, evaluation = tasks[task]
                    outcome = _outcome_of(task, server, evaluation)
                    outcomes[task] = outcome
                    if outcome.error is not None and not (
                        self.reassign and _is_server_failure(outcome.error)
                    ):
                        for other in pending:  # end the others after their current step
                            tasks[other][1].cancel()
        finally:
            # Reached with tasks still pending only when this task itself is cancelled.
            for task in tasks:
                if not task.done():
                    tasks[task][1].cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.running = []
            await _close_models([model for _, _, model in evaluations], self.policy_address)
        return [outcomes[task] for task in tasks]

    def _settle(self, outcomes: list[_Outcome]) -> _FleetFailure | None:
        """Mark failed servers; the failure that ends the run, or ``None`` to go on."""
        ending: _FleetFailure | None = None
        for outcome in outcomes:
            error = outcome.error
            if error is None:
                continue
            if _is_stopped(error) and not self.interrupted:
                continue  # stopped because another server failed; that failure is reported
            if _is_server_failure(error):
                outcome.server.failure = str(error.__cause__)
                if self.reassign:
                    continue
            if ending is None:
                ending = _FleetFailure(f"server {outcome.server.address}: {error}", error)
        return ending

    def _recording_options(self) -> Any:
        """``record`` as ``RecordingOptions`` (a path gets the default options)."""
        from rlmesh_gym.recording import RecordingOptions

        record = self.settings.record
        assert record is not None  # asked for only when recording
        return record if isinstance(record, RecordingOptions) else RecordingOptions(record)

    def _part_record(self, server: _Server, round_: int, parts: list[tuple[str, _Server]]) -> Any:
        """Where this session records to (``None`` when not recording)."""
        if self.settings.record is None:
            return None
        from rlmesh_gym.recording.fleet import part_options

        part = part_options(
            self._recording_options(), server.first_lane, server.num_envs, f"{server.index}-{round_}"
        )
        if part is not None:
            parts.append((os.fspath(part.path), server))
        return part

    def _reserve_recording(self) -> Any:
        """The locked ``MergeTarget`` of the recording path (``None`` when not recording).

        Raises ``OSError`` for a path that cannot be written or another run is writing, and
        ``ValueError`` for frames, as in-process ``evaluate()`` does before it runs."""
        if self.settings.record is None:
            return None
        from rlmesh_gym.recording.fleet import MergeTarget

        return MergeTarget(self._recording_options())

    def _merge_recordings(
        self, target: Any, contract: Any, servers: list[_Server], parts: list[tuple[str, _Server]]
    ) -> None:
        from rlmesh_gym.recording.fleet import FleetPart

        target.merge(
            contract,
            sum(server.num_envs for server in servers),
            [FleetPart(path, server.address, server.first_lane) for path, server in parts],
            env_id=self.env_id,
            base_seed=self.settings.seed,
        )

    def _result(
        self,
        servers: list[_Server],
        records: list[EpisodeRecord],
        timings: list[EvalTimings],
        started_ns: int,
        reassigned: int,
        *,
        complete: bool,
    ) -> EvalResult:
        num_envs = sum(server.num_envs for server in servers)
        return EvalResult(
            env_id=self.env_id,
            policy=self.policy_name,
            num_envs=num_envs,
            episodes_requested=self.settings.episodes,
            seed=self.settings.seed,
            autoreset=self.autoreset.value,
            vectorization=None,
            session_id=self.session,
            route_id=",".join(route for server in servers for route in server.route_ids),
            quotas=lane_quotas(self.settings.episodes, num_envs),
            episodes=tuple(records),
            timings=combined_timings(timings, (perf_counter_ns() - started_ns) / 1e9),
            complete=complete,
            servers=tuple(server.report() for server in servers),
            reassigned_episodes=reassigned,
        )


class _FleetFailure(Exception):
    """What ends a fleet run early; ``cause`` is the session error behind it (if any)."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


def _outcome_of(task: asyncio.Future[Any], server: _Server, evaluation: SessionEvaluation) -> _Outcome:
    """The session's records moved to fleet-wide lanes, its timings and its error."""
    error = task.exception() if not task.cancelled() else asyncio.CancelledError()
    if error is None:
        result: EvalResult = task.result()
    elif isinstance(error, EvaluationError):
        result = error.partial
    else:
        result = evaluation.partial_result()
    records = [
        dataclasses.replace(
            record, lane=server.first_lane + record.lane, server=server.address, server_lane=record.lane
        )
        for record in result.episodes
    ]
    for record in records:
        server.counts[record.server_lane] += 1  # type: ignore[index]
    return _Outcome(server, records, result.timings, error)


def _is_server_failure(error: BaseException) -> bool:
    """Whether a session failed because of its env server (its calls failed or timed out)."""
    cause = error.__cause__
    if not isinstance(error, EvaluationError) or isinstance(error, PolicyMismatchError):
        return False
    if isinstance(cause, EnvRpcError):
        return True
    return isinstance(cause, OperationTimeoutError) and not cause.operation.startswith("model.")


def _is_stopped(error: BaseException) -> bool:
    return isinstance(error, EvaluationError) and isinstance(error.__cause__, RouteCancelledError)


def _reassignment_plan(survivors: list[_Server], episodes: int) -> list[tuple[_Server, list[int]]]:
    """``episodes`` split over the survivors' lanes (in fleet order) with :func:`lane_quotas`."""
    extra = lane_quotas(episodes, sum(server.num_envs for server in survivors))
    plan = []
    offset = 0
    for server in survivors:
        share = list(extra[offset : offset + server.num_envs])
        offset += server.num_envs
        if sum(share):
            server.quotas = [q + e for q, e in zip(server.quotas, share, strict=True)]
            plan.append((server, share))
    return plan


def _check_addresses(addresses: Sequence[str]) -> tuple[str, ...]:
    if not addresses:
        raise ValueError("a fleet evaluation needs at least one env server address, got none")
    bad = [a for a in addresses if not isinstance(a, str) or not a.strip()]
    if bad:
        raise TypeError(f"env server addresses must be non-empty 'HOST:PORT' strings, got {bad[0]!r}")
    seen: set[str] = set()
    for address in addresses:
        if address in seen:
            raise ValueError(
                f"env server {address} is listed twice; a server runs one session at a time "
                "(serve more lanes with serve-env --num-envs instead)"
            )
        seen.add(address)
    return tuple(addresses)


def _contract_key(contract: Any) -> tuple[Any, ...]:
    return (
        contract.id,
        contract.observation_space.SerializeToString(deterministic=True),
        contract.action_space.SerializeToString(deterministic=True),
        AutoresetMode.from_wire(contract.autoreset_mode).value,
    )


def _common_contract(addresses: Sequence[str], envs: list[Any]) -> Any:
    """The fleet's contract (the first server's); ``ValueError`` naming a server that differs."""
    first = envs[0].contract
    reference = _contract_key(first)
    for address, env in zip(addresses[1:], envs[1:], strict=True):
        key = _contract_key(env.contract)
        if key == reference:
            continue
        names = ("env id", "observation space", "action space", "autoreset mode")
        what = [name for name, mine, theirs in zip(names, key, reference, strict=True) if mine != theirs]
        raise ValueError(
            f"env server {address} serves {env.contract.id!r} (autoreset {key[3]}), which differs from "
            f"{addresses[0]} ({first.id!r}, autoreset {reference[3]}) in its {', '.join(what)}: every server "
            "of a fleet must serve the same env; only the lane counts may differ"
        )
    return first


def _named(error: BaseException, address: str) -> BaseException:
    """``error`` as is when it names ``address``, else a ``ConnectionError`` that does."""
    if address in str(error) or not isinstance(error, Exception):
        return error
    named = ConnectionError(f"env server {address}: {type(error).__name__}: {error}")
    named.__cause__ = error
    return named


async def _close_all(envs: list[Any]) -> None:
    for env in envs:
        with contextlib.suppress(Exception):
            await env.close(5.0)


async def _close_models(models: list[Any], policy_address: str | None) -> None:
    if policy_address is None:  # local policies hold no connection
        return
    for model in models:
        with contextlib.suppress(Exception):
            await model.close()


# evaluate_fleet()'s keyword arguments of earlier releases that moved (docs/evaluation.md, Changelog).
_MOVED = {
    name: f"pass options=EvaluationOptions({name}=...)"
    for name in ("hooks", "limits", "session_id", "allow_pickle", "max_steps")
}


@moved_arguments(_MOVED)
def evaluate_fleet(
    addresses: Sequence[str],
    policy: Any = None,
    *,
    episodes: int = 10,
    seed: int | None = None,
    deterministic: bool = True,
    device: str = "cpu",
    record: str | os.PathLike[str] | Any | None = None,
    progress: bool = True,
    on_server_failure: str = "raise",
    options: EvaluationOptions | None = None,
    token: str | None = None,
    connect_timeout: float = 10.0,
    request_timeout: float | None = None,
    policy_address: str | None = None,
) -> EvalResult:
    """Evaluate ``policy`` on the env servers at ``addresses`` (``"HOST:PORT"``, in order) at once.

    Every server must serve the same env (id, spaces, autoreset mode; lane counts may differ):
    a server that differs is refused, by address, before any episode runs, and so is one that
    cannot be reached. The ``episodes`` are split over all lanes of all servers, numbered
    fleet-wide in server order, with :func:`lane_quotas`; each server runs one session with its
    share (see the module docstring for its session and route ids, which fix its reset seeds),
    so the same addresses (in the same order), lane counts, policy and ``seed`` give the same
    episodes.

    ``policy`` is anything :func:`evaluate` takes, resolved once per server session (a
    ``RuntimeModel`` instance is shared by every session); ``policy_address`` instead gives
    each session its own route on that rlmesh model server. ``token`` is sent to every server;
    ``connect_timeout`` and ``request_timeout`` bound connecting and each reply.

    ``on_server_failure="raise"`` (default): a server whose session fails ends the run with
    :class:`EvaluationError` whose ``.partial`` holds every episode counted on every server;
    ``"reassign"``: the failed servers' unmet episodes run afterwards on the surviving servers
    and the result says how many (``reassigned_episodes``, and ``servers[i].failure``).
    ``record`` writes one recording for the whole fleet (fleet-wide lanes; each episode names
    its server). The other arguments are :func:`evaluate`'s; of ``options``, ``hooks``,
    ``max_steps``, ``limits``, ``allow_pickle`` and ``session_id`` apply (the servers set their
    own lanes, autoreset mode and env, so ``vectorization``, ``env_kwargs`` and ``route_id``
    cannot be given, nor ``max_episodes``).
    """
    fleet = _Fleet.from_arguments(**locals())
    return run_blocking(fleet.run, fleet.cancel)


@moved_arguments(_MOVED)
@coroutine_twin(evaluate_fleet)
async def evaluate_fleet_async(addresses: Sequence[str], **arguments: Any) -> EvalResult:
    """:func:`evaluate_fleet` as a coroutine on the caller's event loop (same arguments)."""
    fleet = _Fleet.from_arguments(addresses, **arguments)
    return await fleet.run()

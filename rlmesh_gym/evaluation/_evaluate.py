"""``evaluate()``: run a policy on an env for K episodes through the runtime driver."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from rlmesh_gym.envs.env_ids import registered_env_id
from rlmesh_gym.evaluation._blocking import run_blocking
from rlmesh_gym.evaluation._options import EvaluationOptions
from rlmesh_gym.evaluation._precision import estimate_rounds
from rlmesh_gym.evaluation._progress import EpisodeProgress, progress_wanted
from rlmesh_gym.evaluation._quotas import EpisodeQuotas, lane_quotas
from rlmesh_gym.evaluation._result import EvalResult, EvalTimings, combined_timings
from rlmesh_gym.evaluation._settings import EvaluationSettings
from rlmesh_gym.evaluation._signatures import coroutine_twin, moved_arguments
from rlmesh_gym.policies.resolve import describe_policy, resolve_policy
from rlmesh_gym.recording.episode_record import EpisodeRecord
from rlmesh_gym.runtime import (
    CancellationToken,
    InvalidSpecError,
    ModelRpcError,
    RuntimeDriver,
    RuntimeDriverError,
    RuntimeHooks,
    RuntimeSessionSpec,
)
from rlmesh_gym.runtime.events import EpisodesCompletedEvent, SessionStartedEvent, StepCompletedEvent
from rlmesh_gym.runtime.seams import DrainsEpisodes, RendersFrames
from rlmesh_gym.runtime.telemetry import RuntimeTiming

if TYPE_CHECKING:
    from rlmesh_gym.envs.resolve import ResolvedEnv
    from rlmesh_gym.recording import RecordingOptions

__all__ = [
    "EvaluationError",
    "EvaluationInterrupted",
    "PolicyMismatchError",
    "default_ids",
    "evaluate",
    "evaluate_async",
]

_STOP_REASON = "evaluation quotas met"
_INTERRUPT_REASON = "evaluation interrupted"
_COUNT_FAILED_REASON = "evaluation failed to count a completed episode"
_MAX_STEPS_REASON = "evaluation reached max_steps"
_NEVER_STARTED = ("", 0)  # the record name of an episode the route never saw start


class EvaluationError(Exception):
    """An evaluation failed after it started; the runtime error that ended it is ``__cause__``.

    Also raised when counting a completed episode failed (that failure is ``__cause__``) and
    when ``max_steps`` was reached before every lane met its quota (``__cause__`` is ``None``).

    ``partial`` is the :class:`EvalResult` of the episodes counted before the failure (with
    ``complete=False``; its timings cover the steps that ran). An env the evaluation created is
    closed by then. Also raised when the evaluation finished but writing its recording failed
    (a full disk): ``partial`` is then the whole result, ``__cause__`` the ``OSError`` naming
    the file.
    """

    def __init__(self, message: str, partial: EvalResult) -> None:
        super().__init__(message)
        self.partial = partial


class EvaluationInterrupted(KeyboardInterrupt):
    """Ctrl+C ended an evaluation whose episodes are kept: ``partial`` is the :class:`EvalResult`
    of the episodes counted before every session stopped (``complete=False``).

    A ``KeyboardInterrupt``, so code that handles Ctrl+C handles this too. Raised by
    :func:`~rlmesh_gym.evaluation.evaluate_on_ray`; in-process :func:`evaluate` raises a plain
    ``KeyboardInterrupt``.
    """

    def __init__(self, message: str, partial: EvalResult) -> None:
        super().__init__(message)
        self.partial = partial


class PolicyMismatchError(EvaluationError):
    """The policy failed on the env's very first observation batch: almost always a policy
    built for other spaces (observation shape or dtype, action space) than the env's."""


def default_ids(env_id: str, num_envs: int) -> tuple[str, str]:
    """The session and route ids used when none are given: ``("eval-<env_id>", "lanes-<num_envs>")``.

    They feed the reset-seed function, so they depend only on what makes two runs comparable
    (env id and lane count), not on the autoreset mode, vectorization or episode count: the
    same seed then gives the same generation-0 reset seeds in every mode. The env id is the
    registered one, so ``"walk1d:Walk1D-v0"``, ``--import walk1d Walk1D-v0`` and a served
    ``Walk1D-v0`` play the same episodes.

    >>> default_ids("minigrid:MiniGrid-Empty-5x5-v0", 2)
    ('eval-MiniGrid-Empty-5x5-v0', 'lanes-2')
    """
    return f"eval-{registered_env_id(env_id)}", f"lanes-{num_envs}"


class _EvaluationHooks(RuntimeHooks):
    """Counts episodes against the lane quotas, stops the session when they are met, and keeps
    the session's start and end times.

    The driver only logs a failing best-effort hook, so a failure to count an episode is kept
    in ``error`` and stops the session; the run then raises it as an :class:`EvaluationError`.
    Given ``retire_lanes`` (an env the evaluation built), it retires each lane whose next
    episode is the last one counted there, so the env stops stepping the lane once it ends.

    It listens only to once-per-session events and to ``episodes_completed`` (a step's finished
    episodes at once), so the driver does no work for it on a step that finishes none (and keeps
    its per-step telemetry off unless another hook wants it). With ``yield_to_loop`` it also
    hands control to the event loop once per step that finishes episodes: an in-process session
    never suspends otherwise, so the caller's other tasks (and a cancellation of the awaiting
    task) would wait for the whole evaluation.
    """

    def __init__(
        self,
        quotas: EpisodeQuotas,
        progress: EpisodeProgress | None,
        yield_to_loop: bool,
        on_counted: Callable[[EpisodeRecord], None] | None = None,
        retire_lanes: Callable[[list[int]], None] | None = None,
    ) -> None:
        self.quotas = quotas
        self.progress = progress
        self.yield_to_loop = yield_to_loop
        self.on_counted = on_counted
        self.retire_lanes = retire_lanes
        self.driver: RuntimeDriver | None = None
        self.started_ns: int | None = None
        self.ended_ns: int | None = None
        self.error: Exception | None = None

    def _stop(self, reason: str) -> None:
        # The loop's time ends here; the driver ends the session after this step.
        if self.ended_ns is None:
            self.ended_ns = perf_counter_ns()
        if self.driver is not None:
            self.driver.request_stop(reason)

    async def session_started(self, event: SessionStartedEvent) -> None:
        self.started_ns = perf_counter_ns()
        # Before the cold reset: a lane with at most one episode to count stops after the first.
        self._retire(self.quotas.lanes_within_one())

    def _retire(self, lanes: list[int]) -> None:
        """Have the env stop each of ``lanes`` once its next episode, the last one counted there,
        has ended (``retire_lanes``, for an env the evaluation built)."""
        if self.retire_lanes is None or not lanes:
            return
        try:
            self.retire_lanes(lanes)
        except Exception as exc:  # it only saves env-steps: the evaluation goes on without it
            warnings.warn(
                f"evaluate(): the env could not retire lanes {lanes} ({exc}); every lane keeps being stepped",
                RuntimeWarning,
                stacklevel=2,
            )
            self.retire_lanes = None

    def _report(self, record: EpisodeRecord) -> None:
        """Tell the progress bar and ``on_counted`` about a record just counted."""
        if self.progress is not None:
            self.progress.update(record.episode_return)
        if self.on_counted is not None:
            self.on_counted(record)

    async def episodes_completed(self, event: EpisodesCompletedEvent) -> None:
        if self.yield_to_loop:
            await asyncio.sleep(0)
        quotas = self.quotas
        if quotas.met or self.error is not None:
            return
        episodes = event.episodes
        if _NEVER_STARTED in event.records:
            # Episodes this route never started (ones a reused env still had running, ended by
            # this session's cold reset): not part of this evaluation.
            episodes = [
                episode
                for episode, names in zip(episodes, event.records, strict=True)
                if names != _NEVER_STARTED
            ]
        try:
            reporting = self.progress is not None or self.on_counted is not None
            last_lanes = quotas.count_episodes(episodes, self._report if reporting else None)
        except Exception as exc:
            self.error = exc
            self._stop(_COUNT_FAILED_REASON)
            return
        if quotas.met:
            self._stop(_STOP_REASON)
        else:
            self._retire(last_lanes)  # their running episode is the last one counted there


class _CappedEvaluationHooks(_EvaluationHooks):
    """:class:`_EvaluationHooks` that also stops the session after ``max_steps`` vector steps.

    A separate class because listening to ``step_completed`` makes the driver build an event
    every step; evaluations without a cap do not pay for it.
    """

    def __init__(
        self,
        quotas: EpisodeQuotas,
        progress: EpisodeProgress | None,
        yield_to_loop: bool,
        max_steps: int,
        on_counted: Callable[[EpisodeRecord], None] | None = None,
        retire_lanes: Callable[[list[int]], None] | None = None,
    ) -> None:
        super().__init__(quotas, progress, yield_to_loop, on_counted, retire_lanes)
        self.max_steps = max_steps
        self.steps = 0
        self.capped = False

    async def step_completed(self, event: StepCompletedEvent) -> None:
        self.steps += 1
        if self.steps >= self.max_steps and not self.capped:
            self.capped = True
            # This step's completions are still counted; the run checks the quotas afterwards.
            self._stop(_MAX_STEPS_REASON)


class _Stage:
    """One runtime session of an evaluation: its counting hooks and its driver's timers.

    A plain evaluation has one stage; ``target_ci`` has two, the pilot (``pilot=True``, whose
    episodes size the estimate but are not part of it) and the estimate.
    """

    __slots__ = ("pilot", "route_id", "quotas", "hooks", "timing", "close_env")

    def __init__(
        self, pilot: bool, route_id: str, quotas: tuple[int, ...], hooks: _EvaluationHooks, close_env: bool
    ) -> None:
        self.pilot = pilot
        self.route_id = route_id
        self.quotas = quotas
        self.hooks = hooks
        self.close_env = close_env
        # The run's timers, not its driver: the driver holds the hooks (a recorder among them,
        # which asks this evaluation what it counted), so holding it would make a cycle.
        self.timing: RuntimeTiming | None = None

    def timings(self, num_envs: int) -> EvalTimings:
        """The driver's phase timers: exact totals of every completed reset, step and predict
        (each measured by the driver around the call), kept whether or not telemetry is on."""
        hooks, timing = self.hooks, self.timing
        if hooks.started_ns is None or timing is None:
            return EvalTimings()
        ended_ns = hooks.ended_ns if hooks.ended_ns is not None else perf_counter_ns()
        wall_ns = max(ended_ns - hooks.started_ns, 1)
        reset, env_step, model_wait = timing.reset, timing.env_step, timing.model_wait
        steps = env_step.count
        env_steps = steps * num_envs
        other_ns = wall_ns - reset.total_ns - env_step.total_ns - model_wait.total_ns
        return EvalTimings(
            wall_seconds=wall_ns / 1e9,
            vector_steps=steps,
            env_steps=env_steps,
            env_steps_per_second=env_steps / (wall_ns / 1e9),
            resets=reset.count,
            reset_ms=reset.total_ns / 1e6,
            env_step_ms=env_step.total_ns / steps / 1e6 if steps else None,
            model_wait_ms=model_wait.total_ns / model_wait.count / 1e6 if model_wait.count else None,
            overhead_ms=max(other_ns, 0) / steps / 1e6 if steps else None,
        )


class SessionEvaluation:
    """One prepared evaluation of one env: a resolved env and model, the settings, and the
    runtime session(s) that run them (two with ``target_ci``: see :mod:`._precision`).

    ``quotas`` replaces the even split of ``settings.episodes`` (a fleet gives each server its
    share); ``progress_bar`` is a bar shared with other sessions (a fleet's), left open at the end;
    ``on_counted`` is called with each counted episode's record as it is counted (a Ray shard
    sends them on), on the thread that runs the session.
    """

    def __init__(
        self,
        resolved: ResolvedEnv,
        model: Any,
        settings: EvaluationSettings,
        *,
        policy_name: str,
        quotas: tuple[int, ...] | None = None,
        progress_bar: EpisodeProgress | None = None,
        on_counted: Callable[[EpisodeRecord], None] | None = None,
    ) -> None:
        self.resolved = resolved
        self.model = model
        self.settings = settings
        self.policy_name = policy_name
        self.progress_bar = progress_bar
        self.on_counted = on_counted
        self.limits = settings.effective_limits
        default_session, default_route = default_ids(resolved.env_id, resolved.num_envs)
        self.session_id = settings.session_id or default_session
        self.route_id = settings.route_id or default_route
        self.quotas = lane_quotas(settings.episodes, resolved.num_envs) if quotas is None else quotas
        self.token = CancellationToken()
        self.stages: list[_Stage] = []
        self._env_closed = False

    @property
    def episodes(self) -> int:
        """The episodes asked for (with ``target_ci``: the pilot round)."""
        return sum(self.quotas)

    def cancel(self) -> None:
        """Ask the running session to end after its current step (thread-safe)."""
        self.token.cancel()

    def partial_result(self) -> EvalResult:
        """The episodes counted so far as an incomplete result (for a run that ended abnormally)."""
        return self._result(complete=False)

    def _result(self, *, complete: bool) -> EvalResult:
        stages = self.stages
        estimate = next((stage for stage in stages if not stage.pilot), None)
        pilot = next((stage for stage in stages if stage.pilot), None)
        return EvalResult(
            env_id=self.resolved.env_id,
            policy=self.policy_name,
            num_envs=self.resolved.num_envs,
            episodes_requested=self.settings.episodes,
            seed=self.settings.seed,
            autoreset=self.resolved.autoreset.value,
            vectorization=self.resolved.vectorization,
            session_id=self.session_id,
            route_id=self.route_id,
            quotas=estimate.quotas if estimate is not None else self.quotas,
            episodes=tuple(estimate.hooks.quotas.records) if estimate is not None else (),
            timings=combined_timings([stage.timings(self.resolved.num_envs) for stage in stages]),
            complete=complete,
            target_ci=self.settings.target_ci,
            pilot_episodes=tuple(pilot.hooks.quotas.records) if pilot is not None else (),
        )

    def _counted(self, episode_id: str) -> bool:
        # The recorder's question, asked as the episode completes: whether it is one of the
        # result's episodes (never a pilot's). The counting hook took the step's episodes through
        # episodes_completed, which fires before any episode_completed, so this is final.
        stage = self.stages[-1] if self.stages else None
        return stage is not None and not stage.pilot and stage.hooks.quotas.counted(episode_id)

    def _recorder(self, record: Any) -> Any:
        from rlmesh_gym.recording import EpisodeRecorder

        resolved = self.resolved
        frame_lanes = getattr(record, "frame_lanes", ())
        render_frames = resolved.env.render_frames if isinstance(resolved.env, RendersFrames) else None
        if frame_lanes and render_frames is not None:
            render_frames = functools.partial(render_frames, lanes=frame_lanes)
        return EpisodeRecorder(
            record,
            resolved.env.contract,
            env_id=resolved.env_id,
            base_seed=self.settings.seed,
            # Only the frame lanes are rendered (where the env can render lanes one by one).
            render_frames=render_frames,
            # A replay remakes the env with these; rendering is not part of the episode.
            env_kwargs={k: v for k, v in (self.settings.env_kwargs or {}).items() if k != "render_mode"},
            counted=self._counted,
        )

    async def run(self, yield_to_loop: bool = False) -> EvalResult:
        """Run the session(s); with ``yield_to_loop`` let other tasks run once per step that
        finishes episodes."""
        resolved, settings = self.resolved, self.settings
        progress: EpisodeProgress | None = None  # this evaluation's own bar, closed at the end
        recorder: Any = None
        ran = False
        try:
            if settings.record is not None:
                recorder = self._recorder(settings.record)
            if self.progress_bar is None and progress_wanted(settings.progress):
                progress = EpisodeProgress(self.episodes, f"{resolved.env_id} x{resolved.num_envs}")
            bar = progress if self.progress_bar is None else self.progress_bar
            extra_hooks = (recorder, *settings.hooks) if recorder is not None else settings.hooks
            if settings.target_ci is None:
                await self._run_stage(
                    _Stage(
                        pilot=False,
                        route_id=self.route_id,
                        quotas=self.quotas,
                        hooks=self._hooks(self.quotas, bar, yield_to_loop),
                        close_env=resolved.owned,
                    ),
                    extra_hooks,
                )
            else:
                await self._run_two_stages(bar, yield_to_loop, extra_hooks)
            ran = True
        except InvalidSpecError:
            # Rejected before anything ran: the driver closed nothing.
            await self._close_owned_env()
            raise
        except RuntimeDriverError as exc:
            # The driver's failure path has closed the model route, and the env when the stage
            # was to close it; a pilot leaves it open for the estimate, so it is closed here.
            await self._close_owned_env()
            partial = self._result(complete=False)
            timing = self.stages[-1].timing
            if (
                isinstance(exc, ModelRpcError)
                and len(self.stages) == 1
                and timing is not None
                and not timing.model_wait.count
            ):
                raise PolicyMismatchError(
                    f"policy {self.policy_name!r} failed on the first observations of {resolved.env_id} "
                    f"({_describe_spaces(resolved.env.contract)}); check that it was built for these "
                    f"spaces: {exc}",
                    partial,
                ) from exc
            raise EvaluationError(
                f"evaluation of {resolved.env_id} failed after {self._counted_so_far()}: {exc}",
                partial,
            ) from exc
        except BaseException:
            # Not a driver outcome (bad recording options, a stage that stopped early, a bug,
            # task cancellation): make sure an env we made is closed.
            await self._close_owned_env()
            raise
        finally:
            if progress is not None:
                progress.close()
            if recorder is not None:
                # A failed write is kept in recorder.write_error and raised below, with the result.
                with contextlib.suppress(OSError):
                    recorder.close()
            if not resolved.owned:
                # Leave the caller's env with no episode of this session running.
                try:
                    _drain_episodes(resolved.env)
                except Exception:
                    if ran:  # otherwise the run's own error matters more
                        raise
        result = self._result(complete=True)
        if recorder is not None and recorder.write_error is not None:
            raise EvaluationError(
                f"evaluation of {resolved.env_id} finished ({len(result.episodes)} episodes, in this "
                f"error's .partial) but {recorder.write_error}",
                result,
            ) from recorder.write_error
        return result

    def _hooks(
        self, quotas: tuple[int, ...], bar: EpisodeProgress | None, yield_to_loop: bool, steps_used: int = 0
    ) -> _EvaluationHooks:
        from rlmesh_gym.envs.gym_vector import GymVectorEnv  # loaded with the env already

        max_steps = self.settings.max_steps
        # An env built here stops stepping a lane once its last counted episode ends
        # (GymVectorEnv.retire_lanes): the same counted episodes, without playing ones nobody
        # counts. A caller's env is stepped as it is.
        env = self.resolved.env
        retire_lanes = (
            env.retire_lanes
            if self.resolved.owned and isinstance(env, GymVectorEnv) and env.can_retire_lanes
            else None
        )
        if max_steps is None:
            return _EvaluationHooks(EpisodeQuotas(quotas), bar, yield_to_loop, self.on_counted, retire_lanes)
        # The cap holds over both stages: the estimate gets what the pilot left (at least a step).
        return _CappedEvaluationHooks(
            EpisodeQuotas(quotas),
            bar,
            yield_to_loop,
            max(max_steps - steps_used, 1),
            self.on_counted,
            retire_lanes,
        )

    async def _run_two_stages(
        self, bar: EpisodeProgress | None, yield_to_loop: bool, extra_hooks: Sequence[RuntimeHooks]
    ) -> None:
        """``target_ci``: the pilot session, then a fresh session for the estimate (:mod:`._precision`)."""
        settings = self.settings
        target, cap = settings.target_ci, settings.max_episodes
        assert target is not None and cap is not None  # checked by EvaluationSettings
        pilot = _Stage(
            pilot=True,
            route_id=f"{self.route_id}-pilot",
            quotas=self.quotas,
            hooks=self._hooks(self.quotas, bar, yield_to_loop),
            close_env=False,  # the estimate runs on it next
        )
        await self._run_stage(pilot, extra_hooks)
        pilot_returns = [record.episode_return for record in pilot.hooks.quotas.records]
        rounds = estimate_rounds(pilot_returns, target, self.episodes, cap)
        quotas = tuple(quota * rounds for quota in self.quotas)
        if bar is not None:
            bar.add_total(sum(quotas))
        steps_used = pilot.timing.env_step.count if pilot.timing is not None else 0
        hooks = self._hooks(quotas, bar, yield_to_loop, steps_used)
        estimate = _Stage(
            pilot=False, route_id=self.route_id, quotas=quotas, hooks=hooks, close_env=self.resolved.owned
        )
        await self._run_stage(estimate, extra_hooks)

    async def _run_stage(self, stage: _Stage, extra_hooks: Sequence[RuntimeHooks]) -> None:
        """Run one runtime session; ``EvaluationError`` when it stopped before its quotas were met."""
        resolved, hooks = self.resolved, stage.hooks
        self.stages.append(stage)
        spec = RuntimeSessionSpec(
            session_id=self.session_id,
            route_id=stage.route_id,
            env_contract=resolved.env.contract,
            num_envs=resolved.num_envs,
            env_id=resolved.env_id,
            base_seed=self.settings.seed,
            max_episodes=None,
            close_env_on_end=stage.close_env,
            limits=self.limits,
        )
        # A reused env (or the pilot's, before the estimate) may still have episodes running
        # from an earlier session; the cold reset would report them as interrupted completions
        # of this one.
        _drain_episodes(resolved.env)
        driver = RuntimeDriver(spec, resolved.env, self.model, hooks=[hooks, *extra_hooks])
        hooks.driver = driver
        try:
            await driver.run_with_cancellation_reason(self.token, _INTERRUPT_REASON)
        except InvalidSpecError:  # rejected before anything ran: the driver closed nothing
            raise
        except RuntimeDriverError:
            # The driver's failure path closes the env when the session was told to.
            self._env_closed = stage.close_env
            raise
        finally:
            stage.timing = driver.timing
            # The hooks hold the driver, which holds the hooks: a cycle that would keep the
            # session's env, model and records alive until the garbage collector finds it.
            hooks.driver = None
        self._env_closed = stage.close_env
        name = resolved.env_id
        if hooks.error is not None:
            raise EvaluationError(
                f"evaluation of {name} stopped after {self._counted_so_far()}: counting a completed "
                f"episode failed: {hooks.error}",
                self._result(complete=False),
            ) from hooks.error
        if not hooks.quotas.met:
            raise EvaluationError(
                f"evaluation of {name} reached max_steps={self.settings.max_steps} vector steps with "
                f"{self._counted_so_far()} counted (per lane {list(hooks.quotas.counts)} of "
                f"{list(stage.quotas)}); raise max_steps, or make sure every lane's episodes end "
                f"(e.g. with a TimeLimit wrapper)",
                self._result(complete=False),
            )

    def _counted_so_far(self) -> str:
        stage = self.stages[-1]
        counted = f"{len(stage.hooks.quotas.records)} of {sum(stage.quotas)}"
        return f"{counted} pilot episodes" if stage.pilot else f"{counted} episodes"

    async def _close_owned_env(self) -> None:
        if self.resolved.owned and not self._env_closed:
            try:
                await self.resolved.env.close(self.limits.service_close_timeout)
            except Exception:  # the original error matters more than a failed close
                pass


def _drain_episodes(env: Any) -> None:
    # The episodes still running belong to no evaluation, so they are dropped.
    if isinstance(env, DrainsEpisodes):
        env.drain_episodes()


def _describe_spaces(contract: Any) -> str:
    try:
        from rlmesh_gym.spaces import gym_space

        observation = gym_space(contract.observation_space, name="observation_space")
        action = gym_space(contract.action_space, name="action_space")
    except Exception:  # a description is a courtesy; never mask the real error
        return "spaces not describable"
    return f"observation space {observation}, action space {action}"


def _frame_lanes(record: Any) -> tuple[int, ...]:
    if record is None:
        return ()
    from rlmesh_gym.recording import RecordingOptions

    return tuple(record.frame_lanes) if isinstance(record, RecordingOptions) else ()


def _frame_env_kwargs(
    env: Any, record: Any, env_kwargs: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """``env_kwargs`` with ``render_mode="rgb_array"`` when frames are recorded from an env id made here."""
    frame_lanes = _frame_lanes(record)
    if not frame_lanes or not isinstance(env, str):
        return env_kwargs
    kwargs = dict(env_kwargs or {})
    mode = kwargs.setdefault("render_mode", "rgb_array")
    if mode != "rgb_array":
        raise ValueError(
            f"RecordingOptions(frame_lanes={list(frame_lanes)}) records rgb_array frames, but "
            f"EvaluationOptions.env_kwargs has render_mode={mode!r}; leave render_mode out (evaluate "
            "then makes the env with render_mode='rgb_array') or record without frame_lanes"
        )
    return kwargs


def _check_frame_render_mode(resolved: ResolvedEnv, record: Any) -> None:
    """A clear error when frames are asked of an env built without ``render_mode="rgb_array"``."""
    frame_lanes = _frame_lanes(record)
    if not frame_lanes or resolved.owned:
        return
    mode = resolved.env.contract.render_mode
    if mode != "rgb_array":
        raise ValueError(
            f"RecordingOptions(frame_lanes={list(frame_lanes)}) records rgb_array frames, but the env "
            f"passed in has render_mode={mode or None!r}; build it with render_mode='rgb_array', or pass "
            "an env id (evaluate then sets render_mode itself)"
        )


# evaluate()'s keyword arguments of earlier releases that moved (docs/evaluation.md, Changelog).
_MOVED = {
    **{
        name: f"pass options=EvaluationOptions({name}=...)"
        for name in (
            "hooks",
            "max_steps",
            "max_episodes",
            "limits",
            "vectorization",
            "env_kwargs",
            "allow_pickle",
            "session_id",
            "route_id",
        )
    },
    "on_server_failure": (
        "a fleet of env servers is evaluated by evaluate_fleet(addresses, policy, on_server_failure=...)"
    ),
}


@moved_arguments(_MOVED)
def evaluate(
    env: Any,
    policy: Any,
    *,
    episodes: int = 10,
    num_envs: int | None = None,
    seed: int | None = None,
    autoreset: str | None = None,
    deterministic: bool = True,
    device: str = "cpu",
    record: str | os.PathLike[str] | RecordingOptions | None = None,
    progress: bool = True,
    target_ci: float | None = None,
    options: EvaluationOptions | None = None,
) -> EvalResult:
    """Evaluate ``policy`` on ``env`` for ``episodes`` episodes and return an :class:`EvalResult`.

    ``env`` is an env id (built with ``GymVectorEnv.make`` with ``num_envs`` lanes and
    ``autoreset`` ``"next_step"`` (default), ``"same_step"`` or ``"disabled"``; closed at the
    end), or an env you built: a gymnasium ``Env`` / ``VectorEnv``, a ``GymVectorEnv`` or any
    ``RuntimeEnv`` with a ``contract`` (not closed; ``num_envs``/``autoreset`` default to the
    env's own). A fleet of env servers goes through :func:`~rlmesh_gym.evaluation.evaluate_fleet`.

    ``policy`` is an ``nn.Module`` or TorchScript module, a ``RuntimeModel``, a callable
    (numpy arrays in; annotate the first parameter ``torch.Tensor`` to get tensors instead),
    ``"random"``, ``"pretrained:cartpole"``, ``"package.module:attr"``, or a path to a saved
    policy; ``deterministic=False`` samples from a policy's distribution (seeded from ``seed``)
    and ``device`` is the torch device it runs on.

    Episodes are split over the lanes by quota (lane ``i`` contributes its first
    ``(episodes + i) // num_envs`` episodes) and the session stops once every lane has its
    quota, so short episodes are not over-sampled. With the same env, policy, ``seed`` and lane
    count the episodes are identical run to run. ``record`` is a path (or ``RecordingOptions``)
    to record the episodes to; ``progress`` shows a bar when the output is a terminal or a
    notebook.

    ``target_ci`` (a return difference, e.g. ``5.0``) makes ``episodes`` a pilot round whose
    spread sets how many more rounds a 95 % CI of that half-width needs; those rounds run as a
    fresh session and give the result (``result.pilot_episodes`` holds the pilot's, which no
    statistic uses, so the mean stays unbiased); ``result.target_met`` says whether the
    interval met the target (docs/evaluation.md, "How many episodes?").

    ``options`` (an :class:`EvaluationOptions`) holds the rest: extra runtime ``hooks``, a
    ``max_steps`` cap, ``target_ci``'s ``max_episodes``, the driver's ``limits``, an env id's
    ``vectorization`` and ``env_kwargs``, ``allow_pickle`` and the session and route ids.

    An env you pass in can be evaluated again: episodes it still has running (from an earlier
    evaluation or your own use) are ended before the session starts and are not counted, and
    the episodes this session leaves running are ended when it returns (envs with
    ``drain_episodes()``, such as ``GymVectorEnv``). A second run with the same seed gives the
    same episodes as a fresh env.

    Works in scripts and in Jupyter (with a loop already running it runs on its own loop in a
    worker thread). Raises ``ValueError``/``TypeError`` on bad arguments,
    :class:`EvaluationError` (with ``.partial``) when the session fails or hits ``max_steps``, and
    ``KeyboardInterrupt`` after a clean shutdown on Ctrl+C.

    >>> from rlmesh_gym.evaluation import evaluate
    >>> result = evaluate("CartPole-v1", "pretrained:cartpole", episodes=8, num_envs=4, progress=False)
    >>> result.mean_return
    500.0
    """
    evaluation = _prepare(env, policy, _settings_of(locals()))
    return run_blocking(evaluation.run, evaluation.cancel)


@moved_arguments(_MOVED)
@coroutine_twin(evaluate)
async def evaluate_async(env: Any, policy: Any, **arguments: Any) -> EvalResult:
    """:func:`evaluate` as a coroutine, run on the caller's event loop (same arguments).

    The session hands control back to the loop once per step that completes episodes (an
    in-process env and policy never suspend between steps), so other tasks keep running and
    cancelling the awaiting task takes effect within an episode; the env and model route are then closed and
    ``CancelledError`` propagates.
    """
    return await _prepare(env, policy, _settings_of(arguments)).run(yield_to_loop=True)


def _settings_of(arguments: dict[str, Any]) -> EvaluationSettings:
    """The settings of one call of :func:`evaluate` (its arguments by name, env and policy excluded)."""
    given = {name: value for name, value in arguments.items() if name not in ("env", "policy", "options")}
    return EvaluationSettings.of(arguments["options"], **given)


def _check_one_env(env: Any) -> None:
    if isinstance(env, (list, tuple)):
        raise TypeError(
            "evaluate() takes one env; evaluate a fleet of env servers (a list of addresses) with "
            "rlmesh_gym.evaluation.evaluate_fleet(addresses, policy, ...) (docs/evaluation.md, Changelog)"
        )


def _prepare(env: Any, policy: Any, settings: EvaluationSettings) -> SessionEvaluation:
    """Resolve the env and the policy for one session (an env made here is closed on failure)."""
    _check_one_env(env)
    env_kwargs = _frame_env_kwargs(env, settings.record, settings.env_kwargs)
    if env_kwargs is not settings.env_kwargs:
        settings = dataclasses.replace(settings, env_kwargs=env_kwargs)
    # Loads gymnasium: only when an env is resolved.
    from rlmesh_gym.envs.resolve import EVALUATION_AUTORESET, resolve_env

    resolved = resolve_env(
        env,
        num_envs=settings.num_envs,
        # An env built here resets a finished lane within its last step: the same episodes in
        # fewer vector steps (docs/evaluation.md). An env the caller built keeps its own mode.
        autoreset=settings.autoreset or (EVALUATION_AUTORESET if isinstance(env, str) else None),
        vectorization=settings.vectorization,
        env_kwargs=env_kwargs,
    )
    try:
        return _session(resolved, policy, settings)
    except BaseException:
        if resolved.owned:
            timeout = settings.effective_limits.service_close_timeout
            run_blocking(lambda: resolved.env.close(timeout), lambda: None)
        raise


def _session(resolved: ResolvedEnv, policy: Any, settings: EvaluationSettings) -> SessionEvaluation:
    """The evaluation of ``policy`` (resolved here) on an env already resolved."""
    _check_frame_render_mode(resolved, settings.record)
    model = resolve_policy(
        policy,
        resolved.env.contract,
        seed=settings.seed,
        device=settings.device,
        deterministic=settings.deterministic,
        allow_pickle=settings.allow_pickle,
    )
    return SessionEvaluation(resolved, model, settings, policy_name=describe_policy(policy))


def evaluate_resolved(resolved: ResolvedEnv, policy: Any, settings: EvaluationSettings) -> EvalResult:
    """:func:`evaluate` on an env already resolved, with ``settings`` (``env_kwargs`` then only
    say what the env was made with, for the recording). An env marked owned is closed at the end."""
    evaluation = _session(resolved, policy, settings)
    return run_blocking(evaluation.run, evaluation.cancel)

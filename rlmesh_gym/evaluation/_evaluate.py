"""``evaluate()``: run a policy on an env for K episodes through the runtime driver."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Sequence
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from rlmesh_gym.evaluation._blocking import run_blocking
from rlmesh_gym.evaluation._precision import PrecisionTarget, check_precision_arguments
from rlmesh_gym.evaluation._progress import EpisodeProgress, progress_wanted
from rlmesh_gym.evaluation._quotas import EpisodeQuotas, lane_quotas
from rlmesh_gym.evaluation._result import EvalResult, EvalTimings
from rlmesh_gym.evaluation._statistics import DEFAULT_BOOTSTRAP_SEED, DEFAULT_RESAMPLES
from rlmesh_gym.policies.resolve import describe_policy, resolve_policy
from rlmesh_gym.records import EpisodeRecord
from rlmesh_gym.runtime import (
    CancellationToken,
    InvalidSpecError,
    ModelRpcError,
    RuntimeDriver,
    RuntimeDriverError,
    RuntimeHooks,
    RuntimeLimits,
    RuntimeSessionSpec,
)
from rlmesh_gym.runtime.events import EpisodeCompletedEvent, SessionStartedEvent, StepCompletedEvent
from rlmesh_gym.runtime.seams import DrainsEpisodes, RendersFrames

if TYPE_CHECKING:
    from rlmesh_gym.envs.resolve import ResolvedEnv

__all__ = ["EvaluationError", "PolicyMismatchError", "default_ids", "evaluate", "evaluate_async"]

_STOP_REASON = "evaluation quotas met"
_INTERRUPT_REASON = "evaluation interrupted"
_COUNT_FAILED_REASON = "evaluation failed to count a completed episode"
_MAX_STEPS_REASON = "evaluation reached max_steps"


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


class PolicyMismatchError(EvaluationError):
    """The policy failed on the env's very first observation batch: almost always a policy
    built for other spaces (observation shape or dtype, action space) than the env's."""


def default_ids(env_id: str, num_envs: int) -> tuple[str, str]:
    """The session and route ids used when none are given: ``("eval-<env_id>", "lanes-<num_envs>")``.

    They feed the reset-seed function, so they depend only on what makes two runs comparable
    (env id and lane count), not on the autoreset mode, vectorization or episode count: the
    same seed then gives the same generation-0 reset seeds in every mode.
    """
    return f"eval-{env_id}", f"lanes-{num_envs}"


class _EvaluationHooks(RuntimeHooks):
    """Counts episodes against the lane quotas, stops the session when they are met, and keeps
    the session's start and end times.

    The driver only logs a failing best-effort hook, so a failure to count an episode is kept
    in ``error`` and stops the session; the run then raises it as an :class:`EvaluationError`.

    It listens only to once-per-session and once-per-episode events, so the driver does no
    per-step work for it (and keeps its per-step telemetry off unless another hook wants it).
    With ``yield_to_loop`` it also hands control to the event loop once per completed episode:
    an in-process session never suspends otherwise, so the caller's other tasks (and a
    cancellation of the awaiting task) would wait for the whole evaluation.
    """

    def __init__(
        self,
        quotas: EpisodeQuotas,
        progress: EpisodeProgress | None,
        yield_to_loop: bool,
        precision: PrecisionTarget | None = None,
    ) -> None:
        self.quotas = quotas
        self.progress = progress
        self.yield_to_loop = yield_to_loop
        self.precision = precision
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

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        if self.yield_to_loop:
            await asyncio.sleep(0)
        quotas = self.quotas
        if quotas.met or self.error is not None:
            return
        if not event.episode_record_id:
            # An episode this route never started (one a reused env still had running, ended
            # by this session's cold reset): not part of this evaluation.
            return
        try:
            episode = event.episode
            record = (
                EpisodeRecord.from_episode(episode)
                if episode is not None
                else EpisodeRecord.from_metadata(event.metadata)
            )
            if not quotas.offer(record):
                return
            if self.progress is not None:
                self.progress.update(record.episode_return)
            if self.precision is not None:
                self._add_rounds(self.precision)
        except Exception as exc:
            self.error = exc
            self._stop(_COUNT_FAILED_REASON)
            return
        if quotas.met:
            self._stop(_STOP_REASON)

    def _add_rounds(self, precision: PrecisionTarget) -> None:
        # target_ci: at each round boundary, another whole round while the CI is too wide. The
        # lanes' kept overflow counts first, so it may complete a round at once.
        quotas = self.quotas
        while quotas.met and precision.wants_another_round(quotas):
            if self.progress is not None:
                self.progress.add_total(sum(precision.round_quotas))
            for record in quotas.add_round(precision.round_quotas):
                if self.progress is not None:
                    self.progress.update(record.episode_return)


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
        precision: PrecisionTarget | None,
        max_steps: int,
    ) -> None:
        super().__init__(quotas, progress, yield_to_loop, precision)
        self.max_steps = max_steps
        self.steps = 0
        self.capped = False

    async def step_completed(self, event: StepCompletedEvent) -> None:
        self.steps += 1
        if self.steps >= self.max_steps and not self.capped:
            self.capped = True
            # This step's completions are still counted; the run checks the quotas afterwards.
            self._stop(_MAX_STEPS_REASON)


class SessionEvaluation:
    """One prepared evaluation: a resolved env and model, the session spec and the hooks."""

    def __init__(
        self,
        resolved: ResolvedEnv,
        model: Any,
        *,
        policy_name: str,
        episodes: int,
        seed: int | None,
        hooks: Sequence[RuntimeHooks],
        progress: bool | EpisodeProgress,
        record: Any,
        limits: RuntimeLimits | None,
        session_id: str | None,
        route_id: str | None,
        max_steps: int | None = None,
        env_kwargs: dict[str, Any] | None = None,
        quotas: tuple[int, ...] | None = None,
        target_ci: float | None = None,
        max_episodes: int | None = None,
    ) -> None:
        # ``progress`` may be a bar shared with other sessions (a fleet's), left open at the end;
        # ``quotas`` replaces the even split of ``episodes`` (a fleet gives each server its share).
        self.resolved = resolved
        self.target_ci = target_ci
        self.max_episodes = max_episodes
        self.env_kwargs = env_kwargs
        self.model = model
        self.policy_name = policy_name
        self.episodes = episodes
        self.seed = seed
        self.user_hooks = tuple(hooks)
        self.show_progress = progress
        self.record = record
        self.limits = limits if limits is not None else RuntimeLimits()
        self.max_steps = max_steps
        default_session, default_route = default_ids(resolved.env_id, resolved.num_envs)
        self.session_id = session_id or default_session
        self.route_id = route_id or default_route
        self.quotas = lane_quotas(episodes, resolved.num_envs) if quotas is None else quotas
        self.token = CancellationToken()
        self.hooks: _EvaluationHooks | None = None
        self.driver: RuntimeDriver | None = None

    def cancel(self) -> None:
        """Ask the running session to end after its current step (thread-safe)."""
        self.token.cancel()

    def partial_result(self) -> EvalResult:
        """The episodes counted so far as an incomplete result (for a run that ended abnormally)."""
        return self._result(complete=False)

    def _result(self, *, complete: bool) -> EvalResult:
        hooks = self.hooks
        return EvalResult(
            env_id=self.resolved.env_id,
            policy=self.policy_name,
            num_envs=self.resolved.num_envs,
            episodes_requested=self.episodes,
            seed=self.seed,
            autoreset=self.resolved.autoreset.value,
            vectorization=self.resolved.vectorization,
            session_id=self.session_id,
            route_id=self.route_id,
            quotas=hooks.quotas.quotas if hooks is not None else self.quotas,
            episodes=tuple(hooks.quotas.records) if hooks is not None else (),
            timings=self._timings(),
            complete=complete,
            target_ci=self.target_ci,
        )

    def _timings(self) -> EvalTimings:
        # The driver's phase timers: exact totals of every completed reset, step and predict
        # (each measured by the driver around the call), kept whether or not telemetry is on.
        hooks = self.hooks
        timing = self.driver.timing if self.driver is not None else None
        if hooks is None or hooks.started_ns is None or timing is None:
            return EvalTimings()
        ended_ns = hooks.ended_ns if hooks.ended_ns is not None else perf_counter_ns()
        wall_ns = max(ended_ns - hooks.started_ns, 1)
        reset, env_step, model_wait = timing.reset, timing.env_step, timing.model_wait
        steps = env_step.count
        env_steps = steps * self.resolved.num_envs
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

    async def run(self, yield_to_loop: bool = False) -> EvalResult:
        """Run the session; with ``yield_to_loop`` let other tasks run once per completed episode."""
        resolved = self.resolved
        progress: EpisodeProgress | None = None  # this session's own bar, closed at the end
        shared_progress: EpisodeProgress | None = None
        recorder: Any = None
        ran = False
        try:
            precision = None
            if self.target_ci is not None:
                precision = PrecisionTarget(
                    self.target_ci, self.quotas, self.max_episodes, DEFAULT_RESAMPLES, DEFAULT_BOOTSTRAP_SEED
                )
            quotas = EpisodeQuotas(self.quotas, keep_overflow=precision is not None)
            if self.record is not None:
                from rlmesh_gym.recording import EpisodeRecorder

                frame_lanes = getattr(self.record, "frame_lanes", ())
                render_frames = (
                    resolved.env.render_frames if isinstance(resolved.env, RendersFrames) else None
                )
                if frame_lanes and render_frames is not None:
                    render_frames = functools.partial(render_frames, lanes=frame_lanes)
                recorder = EpisodeRecorder(
                    self.record,
                    resolved.env.contract,
                    env_id=resolved.env_id,
                    base_seed=self.seed,
                    # Only the frame lanes are rendered (where the env can render lanes one by one).
                    render_frames=render_frames,
                    # A replay remakes the env with these; rendering is not part of the episode.
                    env_kwargs={k: v for k, v in (self.env_kwargs or {}).items() if k != "render_mode"},
                    # _EvaluationHooks runs before the recorder, so the answer is final.
                    counted=quotas.counted,
                )
            if isinstance(self.show_progress, EpisodeProgress):
                shared_progress = self.show_progress
            elif progress_wanted(self.show_progress):
                progress = EpisodeProgress(self.episodes, f"{resolved.env_id} x{resolved.num_envs}")
            bar = progress if shared_progress is None else shared_progress
            if self.max_steps is None:
                hooks = _EvaluationHooks(quotas, bar, yield_to_loop, precision)
            else:
                hooks = _CappedEvaluationHooks(quotas, bar, yield_to_loop, precision, self.max_steps)
            self.hooks = hooks
            all_hooks: list[RuntimeHooks] = [hooks]
            if recorder is not None:
                all_hooks.append(recorder)
            all_hooks.extend(self.user_hooks)
            spec = RuntimeSessionSpec(
                session_id=self.session_id,
                route_id=self.route_id,
                env_contract=resolved.env.contract,
                num_envs=resolved.num_envs,
                env_id=resolved.env_id,
                base_seed=self.seed,
                max_episodes=None,
                close_env_on_end=resolved.owned,
                limits=self.limits,
            )
            # A reused env may still have episodes running from an earlier session; the cold
            # reset would report them as interrupted completions of this one.
            _drain_episodes(resolved.env)
            driver = self.driver = RuntimeDriver(spec, resolved.env, self.model, hooks=all_hooks)
            hooks.driver = driver
            await driver.run_with_cancellation_reason(self.token, _INTERRUPT_REASON)
            ran = True
        except InvalidSpecError:
            # Rejected before anything ran: the driver closed nothing.
            await self._close_owned_env()
            raise
        except RuntimeDriverError as exc:
            # The driver's failure path has closed the env (when owned) and the model route.
            partial = self._result(complete=False)
            if (
                isinstance(exc, ModelRpcError)
                and self.driver is not None
                and self.driver.timing is not None
                and not self.driver.timing.model_wait.count
            ):
                raise PolicyMismatchError(
                    f"policy {self.policy_name!r} failed on the first observations of {resolved.env_id} "
                    f"({_describe_spaces(resolved.env.contract)}); check that it was built for these "
                    f"spaces: {exc}",
                    partial,
                ) from exc
            raise EvaluationError(
                f"evaluation of {resolved.env_id} failed after {len(partial.episodes)} of "
                f"{self.episodes} episodes: {exc}",
                partial,
            ) from exc
        except BaseException:
            # Not a driver outcome (bad recording options, a bug, task cancellation): make sure
            # an env we made is closed.
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
        result = self._finish(hooks)
        if recorder is not None and recorder.write_error is not None:
            raise EvaluationError(
                f"evaluation of {resolved.env_id} finished ({len(result.episodes)} episodes, in this "
                f"error's .partial) but {recorder.write_error}",
                result,
            ) from recorder.write_error
        return result

    def _finish(self, hooks: _EvaluationHooks) -> EvalResult:
        """The result of a session that ended normally, or the error that stopped it early."""
        name = self.resolved.env_id
        if hooks.error is not None:
            partial = self._result(complete=False)
            raise EvaluationError(
                f"evaluation of {name} stopped after {len(partial.episodes)} of {self.episodes} episodes: "
                f"counting a completed episode failed: {hooks.error}",
                partial,
            ) from hooks.error
        if not hooks.quotas.met:
            partial = self._result(complete=False)
            raise EvaluationError(
                f"evaluation of {name} reached max_steps={self.max_steps} vector steps with "
                f"{len(partial.episodes)} of {self.episodes} episodes counted (per lane "
                f"{list(hooks.quotas.counts)} of {list(self.quotas)}); raise max_steps, or make sure "
                f"every lane's episodes end (e.g. with a TimeLimit wrapper)",
                partial,
            )
        return self._result(complete=True)

    async def _close_owned_env(self) -> None:
        if self.resolved.owned:
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


def check_run_arguments(
    episodes: Any, seed: Any, max_steps: Any, hooks: Any, limits: Any
) -> tuple[RuntimeHooks, ...]:
    """Check the arguments every evaluation takes; return ``hooks`` as a tuple."""
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be an int >= 1, got {episodes!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
        raise ValueError(f"seed must be None or an int in [0, 2**63), got {seed!r}")
    if max_steps is not None and (
        isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1
    ):
        raise ValueError(f"max_steps must be None or an int >= 1 (vector steps), got {max_steps!r}")
    if isinstance(hooks, RuntimeHooks):
        hooks = (hooks,)
    for hook in hooks:
        if not isinstance(hook, RuntimeHooks):
            raise TypeError(f"hooks must be RuntimeHooks instances, got {type(hook).__qualname__}")
    if limits is not None and not isinstance(limits, RuntimeLimits):
        raise TypeError(f"limits must be a RuntimeLimits, got {type(limits).__qualname__}")
    return tuple(hooks)


def _prepare(
    env: Any,
    policy: Any,
    *,
    episodes: int,
    num_envs: int | None,
    seed: int | None,
    autoreset: str | None,
    vectorization: str | None,
    hooks: Sequence[RuntimeHooks],
    progress: bool,
    record: str | os.PathLike[str] | Any | None,
    limits: RuntimeLimits | None,
    session_id: str | None,
    route_id: str | None,
    device: str,
    deterministic: bool,
    allow_pickle: bool,
    env_kwargs: dict[str, Any] | None,
    max_steps: int | None = None,
    target_ci: float | None = None,
    max_episodes: int | None = None,
) -> SessionEvaluation:
    hooks = check_run_arguments(episodes, seed, max_steps, hooks, limits)
    max_episodes = check_precision_arguments(target_ci, max_episodes, episodes)
    env_kwargs = _frame_env_kwargs(env, record, env_kwargs)
    from rlmesh_gym.envs.resolve import resolve_env  # loads gymnasium: only when an env is resolved

    resolved = resolve_env(
        env, num_envs=num_envs, autoreset=autoreset, vectorization=vectorization, env_kwargs=env_kwargs
    )
    try:
        _check_frame_render_mode(resolved, record)
        model = resolve_policy(
            policy,
            resolved.env.contract,
            seed=seed,
            device=device,
            deterministic=deterministic,
            allow_pickle=allow_pickle,
        )
        return SessionEvaluation(
            resolved,
            model,
            policy_name=describe_policy(policy),
            episodes=episodes,
            seed=seed,
            hooks=hooks,
            progress=progress,
            record=record,
            limits=limits,
            session_id=session_id,
            route_id=route_id,
            max_steps=max_steps,
            env_kwargs=env_kwargs,
            target_ci=target_ci,
            max_episodes=max_episodes,
        )
    except BaseException:
        if resolved.owned:
            timeout = (limits or RuntimeLimits()).service_close_timeout
            run_blocking(lambda: resolved.env.close(timeout), lambda: None)
        raise


_SERVER_SET = ("num_envs", "autoreset", "vectorization", "env_kwargs", "route_id")
_FLEET_PASSED = (
    "episodes",
    "seed",
    "on_server_failure",
    "hooks",
    "progress",
    "record",
    "limits",
    "session_id",
    "device",
    "deterministic",
    "allow_pickle",
    "max_steps",
)


def _fleet_options(arguments: dict[str, Any]) -> dict[str, Any]:
    """The fleet's share of :func:`evaluate`'s arguments; ``ValueError`` for one the servers set."""
    given = [name for name in _SERVER_SET if arguments[name] is not None]
    if given:
        raise ValueError(
            f"{', '.join(given)} cannot be given for a fleet of env servers: each server sets its own "
            "lanes, autoreset mode and env (see serve-env)"
        )
    if arguments["target_ci"] is not None or arguments["max_episodes"] is not None:
        raise ValueError(
            "target_ci and max_episodes apply to one session; a fleet evaluates a fixed number of "
            "episodes (choose it with target_ci on one server first)"
        )
    return {name: arguments[name] for name in _FLEET_PASSED}


def _check_not_fleet(on_server_failure: str) -> None:
    if on_server_failure != "raise":
        raise ValueError(
            f"on_server_failure={on_server_failure!r} applies only to a fleet (a list of env server "
            "addresses as env)"
        )


def _frame_lanes(record: Any) -> tuple[int, ...]:
    if record is None:
        return ()
    from rlmesh_gym.recording import RecordingOptions

    return tuple(record.frame_lanes) if isinstance(record, RecordingOptions) else ()


def _frame_env_kwargs(env: Any, record: Any, env_kwargs: dict[str, Any] | None) -> dict[str, Any] | None:
    """``env_kwargs`` with ``render_mode="rgb_array"`` when frames are recorded from an env id made here."""
    frame_lanes = _frame_lanes(record)
    if not frame_lanes or not isinstance(env, str):
        return env_kwargs
    kwargs = dict(env_kwargs or {})
    mode = kwargs.setdefault("render_mode", "rgb_array")
    if mode != "rgb_array":
        raise ValueError(
            f"RecordingOptions(frame_lanes={list(frame_lanes)}) records rgb_array frames, but env_kwargs "
            f"has render_mode={mode!r}; leave render_mode out (evaluate then makes the env with "
            "render_mode='rgb_array') or record without frame_lanes"
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


def evaluate(
    env: Any,
    policy: Any,
    *,
    episodes: int = 10,
    num_envs: int | None = None,
    seed: int | None = None,
    autoreset: str | None = None,
    vectorization: str | None = None,
    hooks: Sequence[RuntimeHooks] = (),
    progress: bool = True,
    record: str | os.PathLike[str] | Any | None = None,
    limits: RuntimeLimits | None = None,
    session_id: str | None = None,
    route_id: str | None = None,
    device: str = "cpu",
    deterministic: bool = True,
    allow_pickle: bool = False,
    env_kwargs: dict[str, Any] | None = None,
    max_steps: int | None = None,
    on_server_failure: str = "raise",
    target_ci: float | None = None,
    max_episodes: int | None = None,
) -> EvalResult:
    """Evaluate ``policy`` on ``env`` for ``episodes`` episodes and return an :class:`EvalResult`.

    ``env`` is an env id (built with ``GymVectorEnv.make`` with ``num_envs`` lanes,
    ``autoreset`` in ``"next_step"`` (default), ``"same_step"``, ``"disabled"``, and
    ``vectorization`` ``"sync"`` (default) or ``"async"``; closed at the end), or an env you
    built: a gymnasium ``Env`` / ``VectorEnv``, a ``GymVectorEnv`` or any ``RuntimeEnv`` with a
    ``contract`` (not closed; ``num_envs``/``autoreset`` default to the env's own).

    ``policy`` is an ``nn.Module`` or TorchScript module, a ``RuntimeModel``, a callable
    (numpy arrays in; annotate the first parameter ``torch.Tensor`` to get tensors instead),
    ``"random"``, ``"pretrained:cartpole"``, ``"package.module:attr"``, or a path to a saved
    policy.

    Episodes are split over the lanes by quota (lane ``i`` contributes its first
    ``(episodes + i) // num_envs`` episodes) and the session stops once every lane has its
    quota, so short episodes are not over-sampled. With the same env, policy, ``seed`` and lane
    count the episodes are identical run to run. ``hooks`` are extra ``RuntimeHooks``;
    ``record`` a path (or ``RecordingOptions``) to record the episodes to; ``limits`` the
    driver's ``RuntimeLimits``. ``progress`` shows a bar when the output is a terminal or a
    notebook. ``max_steps`` caps the session at that many vector steps: reaching it before
    every quota is met raises :class:`EvaluationError` (``.partial`` holds the episodes
    counted so far), so a lane whose episodes never end cannot run forever.

    ``target_ci`` (a return difference, e.g. ``5.0``) makes ``episodes`` a round: after each
    round, while the mean return's 95 % CI half-width is above ``target_ci``, every lane's
    quota grows by its first-round quota, up to ``max_episodes`` (default ``100 * episodes``;
    never exceeded, only whole rounds). ``len(result.episodes)`` is the number used and
    ``result.target_met`` says whether the target was reached (docs/evaluation.md, "How many
    episodes").

    An env you pass in can be evaluated again: episodes it still has running (from an earlier
    evaluation or your own use) are ended before the session starts and are not counted, and
    the episodes this session leaves running are ended when it returns (envs with
    ``drain_episodes()``, such as ``GymVectorEnv``). A second run with the same seed gives the
    same episodes as a fresh env.

    Works in scripts and in Jupyter (with a loop already running it runs on its own loop in a
    worker thread). Raises ``ValueError``/``TypeError`` on bad arguments,
    :class:`EvaluationError` (with ``.partial``) when the session fails or hits ``max_steps``, and
    ``KeyboardInterrupt`` after a clean shutdown on Ctrl+C.

    A list of env server addresses (``["host1:50051", "host2:50051"]``) evaluates over that
    fleet of rlmesh env servers at once, the episodes split over all their lanes: see
    :func:`~rlmesh_gym.evaluation.evaluate_fleet` (which also takes a token and timeouts).
    The servers set the lanes and autoreset mode, so ``num_envs``, ``autoreset``,
    ``vectorization``, ``env_kwargs`` and ``route_id`` must be left unset;
    ``on_server_failure`` (``"raise"`` or ``"reassign"``) applies to fleets only.

    >>> from rlmesh_gym.evaluation import evaluate
    >>> result = evaluate("CartPole-v1", "pretrained:cartpole", episodes=8, num_envs=4, progress=False)
    >>> result.mean_return
    500.0
    """
    if isinstance(env, (list, tuple)):  # a fleet of env servers
        from rlmesh_gym.evaluation.fleet import evaluate_fleet  # it builds on this module

        return evaluate_fleet(env, policy, **_fleet_options(locals()))
    _check_not_fleet(on_server_failure)
    evaluation = _prepare(
        env,
        policy,
        episodes=episodes,
        num_envs=num_envs,
        seed=seed,
        autoreset=autoreset,
        vectorization=vectorization,
        hooks=hooks,
        progress=progress,
        record=record,
        limits=limits,
        session_id=session_id,
        route_id=route_id,
        device=device,
        deterministic=deterministic,
        allow_pickle=allow_pickle,
        env_kwargs=env_kwargs,
        max_steps=max_steps,
        target_ci=target_ci,
        max_episodes=max_episodes,
    )
    return run_blocking(evaluation.run, evaluation.cancel)


async def evaluate_async(
    env: Any,
    policy: Any,
    *,
    episodes: int = 10,
    num_envs: int | None = None,
    seed: int | None = None,
    autoreset: str | None = None,
    vectorization: str | None = None,
    hooks: Sequence[RuntimeHooks] = (),
    progress: bool = True,
    record: str | os.PathLike[str] | Any | None = None,
    limits: RuntimeLimits | None = None,
    session_id: str | None = None,
    route_id: str | None = None,
    device: str = "cpu",
    deterministic: bool = True,
    allow_pickle: bool = False,
    env_kwargs: dict[str, Any] | None = None,
    max_steps: int | None = None,
    on_server_failure: str = "raise",
    target_ci: float | None = None,
    max_episodes: int | None = None,
) -> EvalResult:
    """:func:`evaluate` as a coroutine, run on the caller's event loop.

    The session hands control back to the loop once per completed episode (an in-process env
    and policy never suspend between steps), so other tasks keep running and cancelling the
    awaiting task takes effect within an episode; the env and model route are then closed and
    ``CancelledError`` propagates.
    """
    if isinstance(env, (list, tuple)):  # a fleet of env servers
        from rlmesh_gym.evaluation.fleet import evaluate_fleet_async  # it builds on this module

        return await evaluate_fleet_async(env, policy, **_fleet_options(locals()))
    _check_not_fleet(on_server_failure)
    evaluation = _prepare(
        env,
        policy,
        episodes=episodes,
        num_envs=num_envs,
        seed=seed,
        autoreset=autoreset,
        vectorization=vectorization,
        hooks=hooks,
        progress=progress,
        record=record,
        limits=limits,
        session_id=session_id,
        route_id=route_id,
        device=device,
        deterministic=deterministic,
        allow_pickle=allow_pickle,
        env_kwargs=env_kwargs,
        max_steps=max_steps,
        target_ci=target_ci,
        max_episodes=max_episodes,
    )
    return await evaluation.run(yield_to_loop=True)

"""Re-running a recorded episode from its seed: :func:`replay_episode`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.recording._reader import RecordedEpisode, Recording, RecordingHeader, load_recording

__all__ = ["ReplayDivergence", "ReplayResult", "replay_episode"]


@dataclass(frozen=True, slots=True)
class ReplayDivergence:
    """Where a replay first differed from the recording: the episode step and the field."""

    step: int
    field: str  # "observation", "action", "reward", "terminated", "truncated" or "length"
    recorded: Any
    replayed: Any

    def __str__(self) -> str:
        return f"step {self.step}: {self.field} recorded {self.recorded!r}, replayed {self.replayed!r}"


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The outcome of :func:`replay_episode`.

    ``match`` is true when every compared step agreed and the replay ended on the recorded
    last step; ``divergence`` is the first disagreement otherwise. ``steps_compared`` counts
    the recorded steps checked.
    """

    match: bool
    episode_id: str
    lane: int
    seed: int
    recorded_return: float
    replayed_return: float
    recorded_length: int
    replayed_length: int
    steps_compared: int
    divergence: ReplayDivergence | None

    def __str__(self) -> str:
        verdict = "matches the recording" if self.match else f"diverges at {self.divergence}"
        return (
            f"episode {self.episode_id} (lane {self.lane}, seed {self.seed}): replay {verdict}; "
            f"return {self.replayed_return:g} vs recorded {self.recorded_return:g}, "
            f"length {self.replayed_length} vs {self.recorded_length}"
        )


def replay_episode(
    recording: Recording | str | os.PathLike[str],
    episode: int | str | RecordedEpisode,
    *,
    env: Any = None,
    policy: Callable[[Any], Any] | None = None,
    atol: float = 0.0,
) -> ReplayResult:
    """Re-run a recorded episode in a plain single gymnasium env and compare it step by step.

    The env is reset with the episode's recorded seed and stepped with the recorded actions
    (or with ``policy(observation)``'s actions, which are then compared with the recorded
    ones). Observations (when recorded), rewards and the terminated/truncated flags of every
    recorded step are compared, and the replay must end on the recorded last step.

    Every episode recorded with ``autoreset="disabled"`` and a base seed has a seed; under
    NEXT_STEP and SAME_STEP only each lane's first episode does (later ones start from an
    unseeded autoreset).

    Args:
        recording: a loaded :class:`Recording` or the path of a recording file.
        episode: an index into ``recording.episodes``, an episode id, or the episode itself.
        env: a gymnasium ``Env`` (reset with the seed, not closed), an env id (made without
            kwargs), or ``None`` for the recording's env id made with its stored ``env_kwargs``.
        policy: a callable mapping one observation to one action, used instead of the
            recorded actions (required when the episode was recorded with a step stride > 1).
        atol: absolute tolerance for float observations and rewards (0: exact).

    Raises:
        ValueError: the episode is incomplete, has no recorded seed, or lacks the recorded
            actions a replay needs.

    Example:
        >>> from rlmesh_gym import evaluate
        >>> _ = evaluate("CartPole-v1", "random", episodes=1, num_envs=1, seed=3, autoreset="disabled",
        ...              progress=False, record="run.rec")
        >>> result = replay_episode("run.rec", 0)
        >>> result.match
        True
    """
    loaded = recording if isinstance(recording, Recording) else load_recording(recording)
    chosen = loaded.episode(episode)
    if chosen.record is None:
        raise ValueError(
            f"episode {chosen.episode_id} on lane {chosen.lane} is incomplete (its session ended before it "
            "finished), so there is nothing to compare a replay with"
        )
    if chosen.seed is None:
        raise ValueError(
            f"episode {chosen.episode_id} on lane {chosen.lane} has no recorded seed: it began with an "
            "unseeded reset or an autoreset. Record with autoreset='disabled' and a seed so every "
            "episode is replayable"
        )
    if not isinstance(atol, (int, float)) or isinstance(atol, bool) or atol < 0:
        raise ValueError(f"replay_episode: atol must be a float >= 0, got {atol!r}")
    length = chosen.record.length
    contiguous = len(chosen.steps) == length and np.array_equal(chosen.steps, np.arange(length))
    if policy is None and (not contiguous or chosen.actions is None):
        raise ValueError(
            f"episode {chosen.episode_id} was recorded with step_stride="
            f"{loaded.header.options.get('step_stride')} ({len(chosen.steps)} of {length} steps): the "
            "actions of the skipped steps are unknown; pass policy= to regenerate them"
        )
    gym_env, owned = _make_env(env, loaded.header)
    try:
        return _replay(gym_env, chosen, loaded.header.action_space, policy, atol)
    finally:
        if owned:
            gym_env.close()


def _make_env(env: Any, header: RecordingHeader) -> tuple[Any, bool]:
    import gymnasium

    kwargs: dict[str, Any] = {}
    if env is None:
        if not header.env_id:
            raise ValueError("the recording stores no env id (it was made from an env object); pass env=")
        if header.env_kwargs_note is not None:
            raise ValueError(f"the recording's env cannot be remade: {header.env_kwargs_note}")
        env = header.env_id
        kwargs = dict(header.env_kwargs or {})
    if isinstance(env, str):
        from rlmesh_gym.envs.resolve import make_gym_env

        return make_gym_env(env, **kwargs), True
    if not isinstance(env, gymnasium.Env):
        raise TypeError(
            f"replay_episode: env must be a gymnasium.Env, an env id or None, got {type(env).__name__}"
        )
    return env, False


def _replay(
    env: Any,
    episode: RecordedEpisode,
    action_spec: spaces_pb2.SpaceSpec,
    policy: Callable[[Any], Any] | None,
    atol: float,
) -> ReplayResult:
    record = episode.record
    assert record is not None and episode.seed is not None
    position = {int(step): row for row, step in enumerate(episode.steps)}
    observation, _ = env.reset(seed=episode.seed)
    total = 0.0
    compared = 0
    divergence: ReplayDivergence | None = None
    step = 0
    terminated = truncated = False
    while step < record.length:
        row = position.get(step)
        recorded_action = None if row is None or episode.actions is None else _row(episode.actions, row)
        if row is not None and episode.observations is not None:
            recorded_obs = _row(episode.observations, row)
            if not _same(recorded_obs, observation, atol):
                divergence = ReplayDivergence(step, "observation", recorded_obs, observation)
                break
        if policy is not None:
            action = policy(observation)
            if recorded_action is not None and not _same(recorded_action, action, 0.0):
                divergence = ReplayDivergence(step, "action", recorded_action, action)
                break
        else:
            action = _env_action(recorded_action, action_spec)
        observation, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        if row is not None:
            compared += 1
            for name, recorded, replayed in (
                ("reward", float(episode.rewards[row]), float(reward)),
                ("terminated", bool(episode.terminated[row]), bool(terminated)),
                ("truncated", bool(episode.truncated[row]), bool(truncated)),
            ):
                if (abs(recorded - replayed) > atol) if name == "reward" else (recorded != replayed):
                    divergence = ReplayDivergence(step, name, recorded, replayed)
                    break
        # Counted before a mismatch stops the loop: the replay did take this step.
        step += 1
        if divergence is not None:
            break
        if (terminated or truncated) and step < record.length:
            divergence = ReplayDivergence(step - 1, "length", record.length, step)
            break
    if divergence is None and step == record.length and not (terminated or truncated):
        divergence = ReplayDivergence(step - 1, "length", record.length, f"still running after {step} steps")
    return ReplayResult(
        match=divergence is None,
        episode_id=episode.episode_id,
        lane=episode.lane,
        seed=episode.seed,
        recorded_return=record.episode_return,
        replayed_return=total,
        recorded_length=record.length,
        replayed_length=step,
        steps_compared=compared,
        divergence=divergence,
    )


def _row(values: Any, row: int) -> Any:
    if isinstance(values, dict):
        return {key: _row(child, row) for key, child in values.items()}
    if isinstance(values, tuple):
        return tuple(_row(child, row) for child in values)
    return values[row]


def _env_action(value: Any, spec: spaces_pb2.SpaceSpec) -> Any:
    """A recorded action in the form a gymnasium env's ``step`` takes."""
    kind = spec.WhichOneof("spec")
    if kind == "dict":
        return {
            key: _env_action(value[key], child)
            for key, child in zip(spec.dict.keys, spec.dict.spaces, strict=True)
        }
    if kind == "tuple":
        return tuple(_env_action(value[i], child) for i, child in enumerate(spec.tuple.spaces))
    if kind == "discrete":
        return int(value)
    if kind == "text":
        return str(value)
    return np.array(value)


def _same(recorded: Any, replayed: Any, atol: float) -> bool:
    if isinstance(recorded, dict):
        return (
            isinstance(replayed, dict)
            and recorded.keys() == replayed.keys()
            and all(_same(recorded[k], replayed[k], atol) for k in recorded)
        )
    if isinstance(recorded, tuple):
        return (
            isinstance(replayed, tuple)
            and len(recorded) == len(replayed)
            and all(_same(a, b, atol) for a, b in zip(recorded, replayed, strict=True))
        )
    if isinstance(recorded, str) or isinstance(replayed, str):
        return str(recorded) == str(replayed)
    left = np.asarray(recorded)
    right = np.asarray(replayed)
    if left.shape != right.shape:
        return False
    floats = left.dtype.kind in "fc" and right.dtype.kind in "fc"
    if atol > 0 and floats:
        return bool(np.allclose(left, right, atol=atol, rtol=0.0, equal_nan=True))
    # NaN in the same place is a match: the env returned the same observation.
    return bool(np.array_equal(left, right, equal_nan=floats))

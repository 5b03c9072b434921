"""What an evaluation returns: its episodes, their statistics and the session's timings."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rlmesh_gym.evaluation._statistics import (
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_CONFIDENCE_LEVEL,
    DEFAULT_RESAMPLES,
    ConfidenceInterval,
    Statistic,
    bootstrap_interval,
    interquartile_mean,
)
from rlmesh_gym.recording.episode_record import EpisodeRecord

if TYPE_CHECKING:  # optional extras, imported only when used
    import pandas
    from matplotlib.figure import Figure

__all__ = ["EvalResult", "EvalTimings", "FleetServer", "combined_timings", "json_ready"]

# Episode rows shown by the HTML repr before it elides the rest.
_HTML_ROWS = 10

# The to_pandas() column of each EpisodeRecord field.
_FRAME_DTYPES = {
    "lane": "int64",
    "episode_id": "object",
    "seed": "Int64",
    "episode_return": "float64",
    "length": "int64",
    "terminated": "bool",
    "truncated": "bool",
    "duration_ms": "int64",
    "success": "boolean",
    "start_timestamp_ns": "int64",
    "end_timestamp_ns": "int64",
}
# The extra columns of a fleet result (episodes from several env servers).
_FLEET_DTYPES = {"server": "object", "server_lane": "int64"}
# The extra column of a result evaluated on a Ray cluster (episodes from several shards).
_SHARD_DTYPES = {"shard": "int64"}


@dataclass(frozen=True, slots=True)
class EvalTimings:
    """Where the time of an evaluation went.

    ``wall_seconds`` is the runtime session's time from its start (the cold reset) to the step
    that met the last quota; env construction, policy loading and closing are not included.
    ``env_steps`` counts lane steps (``vector_steps * num_envs``), the way a hand-written vector
    loop counts them, and ``env_steps_per_second`` divides it by ``wall_seconds``. With
    ``target_ci`` the pilot's and the estimate's sessions are added up.

    The rest splits that time: ``reset_ms`` is the total spent in ``env.reset`` (``resets``
    calls: the cold reset, plus the driver's partial resets under DISABLED autoreset);
    ``env_step_ms`` and ``model_wait_ms`` are the mean time of one vector ``env.step`` and one
    batched ``model.predict``; ``overhead_ms`` is the mean time per vector step spent in
    neither (the driver loop and the hooks). They are ``None`` when no step ran.
    """

    wall_seconds: float = 0.0
    vector_steps: int = 0
    env_steps: int = 0
    env_steps_per_second: float = 0.0
    resets: int = 0
    reset_ms: float = 0.0
    env_step_ms: float | None = None
    model_wait_ms: float | None = None
    overhead_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The timings as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class FleetServer:
    """One env server of a fleet evaluation and what it did.

    ``first_lane`` is the fleet-wide number of its lane 0 (its lanes are
    ``first_lane .. first_lane + num_envs - 1``); ``route_ids`` are the routes it ran, in
    order (the first round, then one per reassignment round it took part in); ``episodes`` the
    episodes it contributed; ``failure`` why its session failed (``None`` if it did not).
    """

    address: str
    first_lane: int
    num_envs: int
    route_ids: tuple[str, ...]
    episodes: int
    failure: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The server's entry as a JSON-ready dict."""
        values = asdict(self)
        values["route_ids"] = list(self.route_ids)
        return values


def combined_timings(timings: Sequence[EvalTimings], wall_seconds: float | None = None) -> EvalTimings:
    """Several sessions' timings added up (per-step means weighted by steps) over ``wall_seconds``
    (default: the sessions' wall times added, for sessions run one after the other)."""
    if wall_seconds is None:
        if len(timings) == 1:
            return timings[0]
        wall_seconds = sum(t.wall_seconds for t in timings)
    steps = sum(t.vector_steps for t in timings)
    env_steps = sum(t.env_steps for t in timings)

    def weighted(name: str) -> float | None:
        pairs = [(getattr(t, name), t.vector_steps) for t in timings if getattr(t, name) is not None]
        total = sum(count for _, count in pairs)
        return sum(value * count for value, count in pairs) / total if total else None

    return EvalTimings(
        wall_seconds=wall_seconds,
        vector_steps=steps,
        env_steps=env_steps,
        env_steps_per_second=env_steps / wall_seconds if wall_seconds > 0 else 0.0,
        resets=sum(t.resets for t in timings),
        reset_ms=sum(t.reset_ms for t in timings),
        env_step_ms=weighted("env_step_ms"),
        model_wait_ms=weighted("model_wait_ms"),
        overhead_ms=weighted("overhead_ms"),
    )


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def _std(values: Sequence[float]) -> float:
    # Population standard deviation (ddof=0), as numpy's default and Stable-Baselines3 report it.
    if not values:
        return math.nan
    mean = _mean(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))


def json_ready(value: Any) -> Any:
    """``value`` (dicts, lists and scalars) with the floats JSON cannot hold replaced: NaN (no
    value, e.g. the mean of no episode) by ``None``, infinities by the strings ``"inf"`` and
    ``"-inf"`` (``float()`` reads them back)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class EvalResult:
    """The outcome of :func:`~rlmesh_gym.evaluate`: one :class:`~rlmesh_gym.recording.EpisodeRecord`
    per counted episode, in completion order, plus the settings that produced them.

    Lane ``i`` contributes exactly ``quotas[i]`` episodes, its first ones (see
    :func:`~rlmesh_gym.evaluation.lane_quotas`); episodes a lane finished beyond its quota are
    not included. ``complete`` is ``False`` only for the partial result attached to an
    :class:`~rlmesh_gym.evaluation.EvaluationError`.

    >>> from rlmesh_gym import evaluate
    >>> result = evaluate("CartPole-v1", "random", episodes=4, num_envs=2, seed=0, progress=False)
    >>> result.mean_return, round(result.std_return, 2)
    (23.0, 4.42)
    >>> result.to_pandas().groupby("lane").episode_return.mean().tolist()
    [22.0, 24.0]

    A fleet evaluation (``evaluate_fleet([address, ...])``) numbers lanes fleet-wide, lists its
    servers in ``servers`` and, when a failed server's remaining episodes were moved to the
    others (``on_server_failure="reassign"``), how many in ``reassigned_episodes``; those
    episodes come from the survivors' lanes, so ``episodes_per_lane`` then differs from
    ``quotas``.

    Beside mean and std it reports the interquartile mean and 95 % percentile-bootstrap
    confidence intervals of both (``mean_return_ci``, ``iqm_return_ci``), drawn with
    ``bootstrap_resamples`` resamples from an rng seeded with ``bootstrap_seed``
    (:meth:`with_bootstrap` changes them). ``target_ci`` is the half-width
    ``evaluate(..., target_ci=)`` aimed for (``None`` when it was not used); its pilot round's
    episodes are in ``pilot_episodes``, not in ``episodes`` nor in any statistic.
    """

    env_id: str
    policy: str
    num_envs: int
    episodes_requested: int
    seed: int | None
    autoreset: str
    vectorization: str | None
    session_id: str
    route_id: str
    quotas: tuple[int, ...]
    episodes: tuple[EpisodeRecord, ...]
    timings: EvalTimings = field(default_factory=EvalTimings)
    complete: bool = True
    servers: tuple[FleetServer, ...] = ()
    reassigned_episodes: int = 0
    bootstrap_resamples: int = DEFAULT_RESAMPLES
    bootstrap_seed: int = DEFAULT_BOOTSTRAP_SEED
    target_ci: float | None = None
    pilot_episodes: tuple[EpisodeRecord, ...] = ()
    # Bootstrap intervals, computed on first use (the dict is mutable; the result is not).
    _intervals: dict[str, ConfidenceInterval] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    # -- statistics -------------------------------------------------------------------------

    @property
    def returns(self) -> list[float]:
        """The return of every counted episode, in completion order."""
        return [record.episode_return for record in self.episodes]

    @property
    def lengths(self) -> list[int]:
        """The length (steps) of every counted episode, in completion order."""
        return [record.length for record in self.episodes]

    @property
    def mean_return(self) -> float:
        """Mean episode return (NaN when no episode was counted)."""
        return _mean(self.returns)

    @property
    def std_return(self) -> float:
        """Population standard deviation (ddof=0) of the episode returns."""
        return _std(self.returns)

    @property
    def min_return(self) -> float:
        """Smallest episode return (NaN when no episode was counted)."""
        return min(self.returns, default=math.nan)

    @property
    def max_return(self) -> float:
        """Largest episode return (NaN when no episode was counted)."""
        return max(self.returns, default=math.nan)

    @property
    def mean_length(self) -> float:
        """Mean episode length in steps (NaN when no episode was counted)."""
        return _mean(self.lengths)

    @property
    def success_rate(self) -> float | None:
        """Share of episodes whose last ``info["is_success"]`` was true, over the episodes that
        reported it; ``None`` when none did."""
        flags = [record.success for record in self.episodes if record.success is not None]
        return sum(flags) / len(flags) if flags else None

    @property
    def iqm_return(self) -> float:
        """Interquartile mean of the episode returns: the mean of their middle 50 %
        (``scipy.stats.trim_mean(returns, 0.25)``; NaN when no episode was counted or a return is
        not finite)."""
        returns = self.returns
        return interquartile_mean(returns) if all(map(math.isfinite, returns)) else math.nan

    def _interval(self, statistic: Statistic) -> ConfidenceInterval:
        interval = self._intervals.get(statistic)
        if interval is None:
            interval = bootstrap_interval(
                self.returns, statistic, resamples=self.bootstrap_resamples, seed=self.bootstrap_seed
            )
            self._intervals[statistic] = interval
        return interval

    @property
    def mean_return_ci(self) -> ConfidenceInterval:
        """The mean return with its 95 % bootstrap confidence interval.

        Raises ``ValueError`` when fewer than 2 episodes were counted (no interval exists).
        """
        return self._interval("mean")

    @property
    def iqm_return_ci(self) -> ConfidenceInterval:
        """The interquartile mean with its 95 % bootstrap confidence interval (``ValueError``
        for fewer than 2 episodes)."""
        return self._interval("iqm")

    @property
    def target_met(self) -> bool | None:
        """With ``target_ci``: whether the mean's CI half-width came out at most ``target_ci``
        (``False`` when the episode cap limited the estimate, or the pilot underestimated the
        returns' spread); ``None`` without a target."""
        if self.target_ci is None:
            return None
        return self.has_intervals and self._interval("mean").half_width <= self.target_ci

    @property
    def has_intervals(self) -> bool:
        """Whether the confidence intervals exist (:attr:`no_interval_reason` is ``None``)."""
        return self.no_interval_reason is None

    @property
    def no_interval_reason(self) -> str | None:
        """Why there are no confidence intervals (fewer than 2 episodes, or a return that is
        NaN or infinite), or ``None`` when there are."""
        if len(self.episodes) < 2:
            return "needs at least 2 episodes"
        if not all(map(math.isfinite, self.returns)):
            return "needs finite returns (one is NaN or infinite)"
        return None

    def with_bootstrap(self, *, resamples: int | None = None, seed: int | None = None) -> EvalResult:
        """This result with other bootstrap settings (the intervals are computed anew)."""
        return replace(
            self,
            bootstrap_resamples=self.bootstrap_resamples if resamples is None else resamples,
            bootstrap_seed=self.bootstrap_seed if seed is None else seed,
        )

    @property
    def episodes_per_lane(self) -> tuple[int, ...]:
        """How many counted episodes each lane contributed."""
        counts = [0] * self.num_envs
        for record in self.episodes:
            counts[record.lane] += 1
        return tuple(counts)

    def summary(self) -> dict[str, Any]:
        """The summary statistics as a dict (NaN for an empty result; the interval bounds are
        NaN for fewer than 2 episodes). ``episodes`` counts the episodes the statistics are
        computed from, ``pilot_episodes`` those of ``target_ci``'s pilot round (0 without one)."""
        bounds = {}
        for statistic in ("mean", "iqm"):
            interval = self._interval(statistic) if self.has_intervals else None
            bounds[f"{statistic}_return_ci_low"] = interval.low if interval else math.nan
            bounds[f"{statistic}_return_ci_high"] = interval.high if interval else math.nan
        return {
            "episodes": len(self.episodes),
            "pilot_episodes": len(self.pilot_episodes),
            "mean_return": self.mean_return,
            "mean_return_ci_low": bounds["mean_return_ci_low"],
            "mean_return_ci_high": bounds["mean_return_ci_high"],
            "iqm_return": self.iqm_return,
            "iqm_return_ci_low": bounds["iqm_return_ci_low"],
            "iqm_return_ci_high": bounds["iqm_return_ci_high"],
            "std_return": self.std_return,
            "min_return": self.min_return,
            "max_return": self.max_return,
            "mean_length": self.mean_length,
            "success_rate": self.success_rate,
        }

    # -- export -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Settings, summary, timings and episodes as a JSON-ready dict (see :func:`json_ready`:
        NaN written as ``None``, infinities as ``"inf"``/``"-inf"``)."""
        return json_ready(
            {
                "env_id": self.env_id,
                "policy": self.policy,
                "num_envs": self.num_envs,
                "episodes_requested": self.episodes_requested,
                "seed": self.seed,
                "autoreset": self.autoreset,
                "vectorization": self.vectorization,
                "session_id": self.session_id,
                "route_id": self.route_id,
                "quotas": list(self.quotas),
                "complete": self.complete,
                "summary": self.summary(),
                "bootstrap": self._bootstrap_settings(),
                "target_ci": self.target_ci,
                "target_met": self.target_met,
                "timings": self.timings.to_dict(),
                "episodes": [record.to_dict() for record in self.episodes],
                **(
                    {"pilot_episodes": [record.to_dict() for record in self.pilot_episodes]}
                    if self.pilot_episodes
                    else {}
                ),
                **(
                    {
                        "servers": [server.to_dict() for server in self.servers],
                        "reassigned_episodes": self.reassigned_episodes,
                    }
                    if self.servers
                    else {}
                ),
            }
        )

    def _bootstrap_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "confidence_level": DEFAULT_CONFIDENCE_LEVEL,
            "method": "percentile",
            "resamples": self.bootstrap_resamples,
            "seed": self.bootstrap_seed,
        }
        if not self.has_intervals:
            settings["note"] = f"no confidence interval: it {self.no_interval_reason}"
        return settings

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` serialised as JSON."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def to_pandas(self) -> pandas.DataFrame:
        """One row per counted episode, columns named after the ``EpisodeRecord`` fields.

        ``seed`` is a nullable integer column and ``success`` a nullable boolean one
        (``<NA>`` for unseeded episodes and envs that do not report ``is_success``). A fleet
        result adds ``server`` (its ``HOST:PORT``) and ``server_lane`` (the lane on it); a result
        evaluated on a Ray cluster adds ``shard`` (the index of the Ray task that ran the episode).
        """
        try:
            import pandas
        except ImportError as exc:
            raise ImportError(
                "EvalResult.to_pandas() needs pandas; install it with `pip install 'rlmesh-gym[notebook]'`"
            ) from exc
        # Built column by column with fixed dtypes: unseeded episodes and envs without
        # is_success give missing values, which would otherwise turn the 63-bit seeds into
        # floats (losing digits) and the flags into objects.
        dtypes = {**_FRAME_DTYPES, **_FLEET_DTYPES} if self.servers else dict(_FRAME_DTYPES)
        if any(record.shard is not None for record in self.episodes):
            dtypes.update(_SHARD_DTYPES)
        return pandas.DataFrame(
            {
                name: pandas.Series([getattr(record, name) for record in self.episodes], dtype=dtype)
                for name, dtype in dtypes.items()
            }
        )

    def plot(self, ax: Any = None) -> Figure:
        """Plot the episode returns: per episode by lane (left, with the mean and its 95 % CI
        as a band) and as a histogram (right, with the mean and the IQM and their CIs as
        bands; no bands for fewer than 2 episodes).

        With ``ax`` (a pair of matplotlib axes) it draws into those; otherwise it makes a new
        figure. Returns the figure.
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:
            raise ImportError(
                "EvalResult.plot() needs matplotlib; install it with `pip install 'rlmesh-gym[notebook]'`"
            ) from exc
        if ax is None:
            figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
        else:
            left, right = ax
            figure = left.figure
        lanes = sorted({record.lane for record in self.episodes})
        for lane in lanes:
            points = [(i, r.episode_return) for i, r in enumerate(self.episodes) if r.lane == lane]
            left.scatter([p[0] for p in points], [p[1] for p in points], s=12, label=f"lane {lane}")
        intervals = {s: self._interval(s) for s in ("mean", "iqm")} if self.has_intervals else {}
        if not math.isnan(self.mean_return):
            left.axhline(self.mean_return, color="black", linewidth=1, linestyle="--", label="mean")
        if "mean" in intervals:
            mean_ci = intervals["mean"]
            left.axhspan(mean_ci.low, mean_ci.high, color="black", alpha=0.12, label="mean 95% CI")
        left.set_xlabel("episode (completion order)")
        left.set_ylabel("return")
        left.set_title(f"{self.env_id}: returns by lane")
        if 0 < len(lanes) <= 10:
            left.legend(fontsize="small")
        right.hist(self.returns, bins=min(30, max(1, len(self.episodes))), color="0.7")
        for statistic, label, color in (("mean", "mean", "tab:blue"), ("iqm", "IQM", "tab:orange")):
            interval = intervals.get(statistic)
            if interval is not None:
                right.axvline(interval.estimate, color=color, linewidth=1.5, label=label)
                right.axvspan(interval.low, interval.high, color=color, alpha=0.2, label=f"{label} 95% CI")
        if intervals:
            right.legend(fontsize="small")
        right.set_xlabel("return")
        right.set_ylabel("episodes")
        right.set_title(f"{len(self.episodes)} episodes, mean {self.mean_return:.2f}")
        figure.tight_layout()
        return figure

    # -- display ----------------------------------------------------------------------------

    def __repr__(self) -> str:
        return (
            f"EvalResult(env_id={self.env_id!r}, policy={self.policy!r}, episodes={len(self.episodes)}, "
            f"num_envs={self.num_envs}, seed={self.seed!r}, mean_return={self.mean_return:.4g}, "
            f"std_return={self.std_return:.4g}, complete={self.complete})"
        )

    def _headline(self) -> str:
        status = "" if self.complete else " (incomplete)"
        seed = "none" if self.seed is None else str(self.seed)
        servers = f" of {len(self.servers)} servers" if self.servers else ""
        return (
            f"{self.env_id} | policy {self.policy} | {len(self.episodes)} episodes on {self.num_envs} "
            f"lane(s){servers} | seed {seed} | autoreset {self.autoreset}{status}"
        )

    def _rows(self) -> list[tuple[str, str]]:
        def num(value: float | None, digits: int = 2) -> str:
            return "n/a" if value is None or math.isnan(value) else f"{value:,.{digits}f}"

        def with_ci(statistic: Statistic, value: float) -> str:
            if not self.has_intervals:
                return f"{num(value)}  (no CI: {self.no_interval_reason})"
            interval = self._interval(statistic)
            return f"{num(value)}  95% CI [{num(interval.low)}, {num(interval.high)}]"

        timing = self.timings
        rows = [
            ("episodes", self._episodes_row()),
            ("mean return", with_ci("mean", self.mean_return)),
            ("IQM return", with_ci("iqm", self.iqm_return)),
            ("bootstrap", f"{self.bootstrap_resamples:,} resamples (percentile), seed {self.bootstrap_seed}"),
            ("std return", num(self.std_return)),
            ("min / max return", f"{num(self.min_return)} / {num(self.max_return)}"),
            ("mean length", num(self.mean_length, 1)),
            ("success rate", "n/a" if self.success_rate is None else f"{self.success_rate:.1%}"),
            ("env-steps/s", num(timing.env_steps_per_second, 0)),
            ("env-steps", f"{timing.env_steps:,} in {timing.wall_seconds:.2f} s"),
            (
                "per vector step",
                f"env {num(timing.env_step_ms, 3)} ms, model {num(timing.model_wait_ms, 3)} ms, "
                f"driver {num(timing.overhead_ms, 3)} ms",
            ),
            ("resets", f"{timing.resets} in {num(timing.reset_ms, 1)} ms"),
        ]
        for server in self.servers:
            lanes = f"lanes {server.first_lane}-{server.first_lane + server.num_envs - 1}"
            status = "ok" if server.failure is None else f"FAILED: {server.failure}"
            rows.append((f"server {server.address}", f"{lanes}, {server.episodes} episodes, {status}"))
        if self.reassigned_episodes:
            rows.append(("reassigned", f"{self.reassigned_episodes} episodes moved to surviving servers"))
        return rows

    def _episodes_row(self) -> str:
        if self.target_ci is None:
            return f"{len(self.episodes)} of {self.episodes_requested}"
        rounds = sum(self.quotas) // self.episodes_requested
        outcome = "met" if self.target_met else "not met"
        return (
            f"{len(self.episodes)} ({rounds} round(s) of {self.episodes_requested}) after a pilot of "
            f"{len(self.pilot_episodes)}; target CI half-width {self.target_ci:g} {outcome}"
        )

    def __str__(self) -> str:
        rows = self._rows()
        width = max(len(name) for name, _ in rows)
        lines = [self._headline()] + [f"  {name:<{width}}  {value}" for name, value in rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        esc = html.escape
        left = "style='text-align:left'"
        summary = "".join(
            f"<tr><th {left}>{esc(name)}</th><td {left}>{esc(value)}</td></tr>"
            for name, value in self._rows()
        )
        columns = (
            "lane",
            "episode_id",
            "seed",
            "episode_return",
            "length",
            "terminated",
            "truncated",
            "duration_ms",
            "success",
        )
        head = "".join(f"<th>{esc(name)}</th>" for name in columns)
        body = []
        for record in self.episodes[:_HTML_ROWS]:
            values = record.to_dict()
            body.append("<tr>" + "".join(f"<td>{esc(str(values[name]))}</td>" for name in columns) + "</tr>")
        more = len(self.episodes) - _HTML_ROWS
        if more > 0:
            body.append(f"<tr><td colspan='{len(columns)}'>... {more} more (see to_pandas())</td></tr>")
        return (
            f"<div><p><b>EvalResult</b>: {esc(self._headline())}</p>"
            f"<table>{summary}</table>"
            f"<details><summary>episodes</summary><table><tr>{head}</tr>{''.join(body)}</table></details>"
            "</div>"
        )

"""What an evaluation returns: its episodes, their statistics and the session's timings."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from rlmesh_gym.records import EpisodeRecord

if TYPE_CHECKING:  # optional extras, imported only when used
    import pandas
    from matplotlib.figure import Figure

__all__ = ["EvalResult", "EvalTimings", "FleetServer"]

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


@dataclass(frozen=True, slots=True)
class EvalTimings:
    """Where the time of an evaluation went.

    ``wall_seconds`` is the runtime session's time from its start (the cold reset) to the step
    that met the last quota; env construction, policy loading and closing are not included.
    ``env_steps`` counts lane steps (``vector_steps * num_envs``), the way a hand-written vector
    loop counts them, and ``env_steps_per_second`` divides it by ``wall_seconds``.

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


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def _std(values: Sequence[float]) -> float:
    # Population standard deviation (ddof=0), as numpy's default and Stable-Baselines3 report it.
    if not values:
        return math.nan
    mean = _mean(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))


def _json_number(value: float | None) -> float | None:
    # JSON has no NaN: statistics of an empty result are written as null.
    return None if value is None or math.isnan(value) else value


@dataclass(frozen=True, slots=True)
class EvalResult:
    """The outcome of :func:`~rlmesh_gym.evaluate`: one :class:`~rlmesh_gym.records.EpisodeRecord`
    per counted episode, in completion order, plus the settings that produced them.

    Lane ``i`` contributes exactly ``quotas[i]`` episodes, its first ones (see
    :func:`~rlmesh_gym.evaluation.lane_quotas`); episodes a lane finished beyond its quota are
    not included. ``complete`` is ``False`` only for the partial result attached to an
    :class:`~rlmesh_gym.evaluation.EvaluationError`.

    >>> from rlmesh_gym import evaluate
    >>> result = evaluate("CartPole-v1", "random", episodes=4, num_envs=2, seed=0, progress=False)
    >>> result.mean_return, round(result.std_return, 2)
    (17.25, 4.6)
    >>> result.to_pandas().groupby("lane").episode_return.mean().tolist()
    [14.5, 20.0]

    A fleet evaluation (``evaluate([address, ...])``) numbers lanes fleet-wide, lists its
    servers in ``servers`` and, when a failed server's remaining episodes were moved to the
    others (``on_server_failure="reassign"``), how many in ``reassigned_episodes``; those
    episodes come from the survivors' lanes, so ``episodes_per_lane`` then differs from
    ``quotas``.
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
    def episodes_per_lane(self) -> tuple[int, ...]:
        """How many counted episodes each lane contributed."""
        counts = [0] * self.num_envs
        for record in self.episodes:
            counts[record.lane] += 1
        return tuple(counts)

    def summary(self) -> dict[str, Any]:
        """The summary statistics as a dict (NaN for an empty result)."""
        return {
            "episodes": len(self.episodes),
            "mean_return": self.mean_return,
            "std_return": self.std_return,
            "min_return": self.min_return,
            "max_return": self.max_return,
            "mean_length": self.mean_length,
            "success_rate": self.success_rate,
        }

    # -- export -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Settings, summary, timings and episodes as a JSON-ready dict (NaN written as ``None``)."""
        return {
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
            "summary": {key: _json_number(value) for key, value in self.summary().items()},
            "timings": self.timings.to_dict(),
            "episodes": [record.to_dict() for record in self.episodes],
            **(
                {
                    "servers": [server.to_dict() for server in self.servers],
                    "reassigned_episodes": self.reassigned_episodes,
                }
                if self.servers
                else {}
            ),
        }

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` serialised as JSON."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def to_pandas(self) -> pandas.DataFrame:
        """One row per counted episode, columns named after the ``EpisodeRecord`` fields.

        ``seed`` is a nullable integer column and ``success`` a nullable boolean one
        (``<NA>`` for unseeded episodes and envs that do not report ``is_success``). A fleet
        result adds ``server`` (its ``HOST:PORT``) and ``server_lane`` (the lane on it).
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
        dtypes = {**_FRAME_DTYPES, **_FLEET_DTYPES} if self.servers else _FRAME_DTYPES
        return pandas.DataFrame(
            {
                name: pandas.Series([getattr(record, name) for record in self.episodes], dtype=dtype)
                for name, dtype in dtypes.items()
            }
        )

    def plot(self, ax: Any = None) -> Figure:
        """Plot the episode returns: per episode by lane (left) and as a histogram (right).

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
        if not math.isnan(self.mean_return):
            left.axhline(self.mean_return, color="black", linewidth=1, linestyle="--", label="mean")
        left.set_xlabel("episode (completion order)")
        left.set_ylabel("return")
        left.set_title(f"{self.env_id}: returns by lane")
        if 0 < len(lanes) <= 10:
            left.legend(fontsize="small")
        right.hist(self.returns, bins=min(30, max(1, len(self.episodes))))
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

        timing = self.timings
        rows = [
            ("episodes", f"{len(self.episodes)} of {self.episodes_requested}"),
            ("mean return", num(self.mean_return)),
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

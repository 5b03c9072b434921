"""``compare()``: evaluate several policies on exactly the same seeded episodes and report their
paired differences.

Under DISABLED autoreset every episode is reset from its own seed. ``compare`` makes that seed
a function of the lane and the lane's episode count only (:mod:`._lane_seeds`), and lane ``i``
counts its first ``quotas[i]`` episodes whatever the policy does; so with the same env, lane
count, episodes and seed, episode ``k`` of lane ``i`` is the same seeded episode for every
policy. The comparison checks that seed by seed.
"""

from __future__ import annotations

import dataclasses
import html
import itertools
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlmesh_gym.evaluation._blocking import run_blocking
from rlmesh_gym.evaluation._evaluate import (
    EvaluationError,
    PolicyMismatchError,
    _frame_env_kwargs,
    default_ids,
    evaluate_resolved,
)
from rlmesh_gym.evaluation._lane_seeds import lane_ordinal_seeds
from rlmesh_gym.evaluation._options import EvaluationOptions, check_options, fields_set
from rlmesh_gym.evaluation._result import EvalResult, json_ready
from rlmesh_gym.evaluation._settings import EvaluationSettings
from rlmesh_gym.evaluation._signatures import moved_arguments
from rlmesh_gym.evaluation._statistics import (
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_RESAMPLES,
    ConfidenceInterval,
    bootstrap_interval,
    probability_of_improvement,
)
from rlmesh_gym.recording import RecordingOptions
from rlmesh_gym.runtime import RuntimeLimits
from rlmesh_gym.runtime.autoreset import AutoresetMode

if TYPE_CHECKING:  # optional extras, imported only when used
    import pandas
    from matplotlib.figure import Figure

    from rlmesh_gym.envs.resolve import ResolvedEnv

__all__ = ["ComparedEpisode", "Comparison", "PairedDifference", "compare"]

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """Policy ``a`` against policy ``b`` on the same episodes.

    ``difference`` is the mean over episodes of ``return_a - return_b`` with its 95 % bootstrap
    interval (episodes resampled, each keeping both returns); ``probability_of_improvement`` is
    ``P(X_a > X_b) + 0.5 P(X_a = X_b)`` (rliable's definition: Mann-Whitney U / (n m)). Both are
    ``None`` when a return of either policy is NaN or infinite; ``no_interval_reason`` then says so.
    """

    a: str
    b: str
    difference: ConfidenceInterval | None
    probability_of_improvement: float | None
    no_interval_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The pair as a JSON-ready dict."""
        return {
            "a": self.a,
            "b": self.b,
            "mean_difference": None if self.difference is None else self.difference.to_dict(),
            "probability_of_improvement": self.probability_of_improvement,
            "no_interval_reason": self.no_interval_reason,
        }


@dataclass(frozen=True, slots=True)
class ComparedEpisode:
    """One seeded episode every policy played: episode ``index`` (0-based) of ``lane``."""

    lane: int
    index: int
    seed: int
    returns: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON-ready dict."""
        return {"lane": self.lane, "index": self.index, "seed": self.seed, "returns": dict(self.returns)}


@dataclass(frozen=True, slots=True)
class Comparison:
    """What :func:`compare` returns: one :class:`EvalResult` per policy (in the order given),
    one :class:`PairedDifference` per pair of policies (``a`` before ``b`` in that order), and
    the per-episode table (``episodes``, ordered by lane and index)."""

    env_id: str
    seed: int
    num_envs: int
    episodes_per_policy: int
    results: dict[str, EvalResult]
    pairs: tuple[PairedDifference, ...]
    episodes: tuple[ComparedEpisode, ...]
    recordings: dict[str, str] | None = None

    @property
    def names(self) -> list[str]:
        """The policies' names, in the order given."""
        return list(self.results)

    def pair(self, a: str, b: str) -> PairedDifference:
        """The comparison of ``a`` against ``b`` (either order; swapped, the difference is negated
        and the probability is ``1 - p``)."""
        for pair in self.pairs:
            if (pair.a, pair.b) == (a, b):
                return pair
            if (pair.a, pair.b) == (b, a):
                d, p = pair.difference, pair.probability_of_improvement
                flipped = (
                    None
                    if d is None
                    else ConfidenceInterval(-d.estimate, -d.high, -d.low, d.level, d.resamples, d.seed)
                )
                return PairedDifference(
                    a, b, flipped, None if p is None else 1.0 - p, pair.no_interval_reason
                )
        raise KeyError(f"no pair ({a!r}, {b!r}); the policies are {self.names}")

    # -- export -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Settings, per-policy results (without their episode lists), pairs and the
        per-episode table as a JSON-ready dict (non-finite numbers as in :meth:`EvalResult.to_dict`)."""
        results = {}
        for name, result in self.results.items():
            entry = result.to_dict()
            del entry["episodes"]  # the per-episode table below holds them, side by side
            results[name] = entry
        return json_ready(
            {
                "env_id": self.env_id,
                "seed": self.seed,
                "num_envs": self.num_envs,
                "episodes_per_policy": self.episodes_per_policy,
                "results": results,
                "pairs": [pair.to_dict() for pair in self.pairs],
                "episodes": [episode.to_dict() for episode in self.episodes],
                "recordings": self.recordings,
            }
        )

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` serialised as JSON."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def to_pandas(self) -> pandas.DataFrame:
        """The per-episode table: ``lane``, ``index``, ``seed`` and one ``return_<name>`` column
        per policy."""
        try:
            import pandas
        except ImportError as exc:
            raise ImportError(
                "Comparison.to_pandas() needs pandas; install it with `pip install 'rlmesh-gym[notebook]'`"
            ) from exc
        columns: dict[str, Any] = {
            "lane": pandas.Series([e.lane for e in self.episodes], dtype="int64"),
            "index": pandas.Series([e.index for e in self.episodes], dtype="int64"),
            "seed": pandas.Series([e.seed for e in self.episodes], dtype="Int64"),
        }
        for name in self.results:
            columns[f"return_{name}"] = pandas.Series(
                [e.returns[name] for e in self.episodes], dtype="float64"
            )
        return pandas.DataFrame(columns)

    def plot(self) -> Figure:
        """Three panels: each policy's mean and IQM with 95 % CIs (interval plot), each pair's
        mean paired difference with its CI and P(a > b), and the performance profile (the
        share of episodes whose return exceeds each threshold). Returns the figure.

        Raises ``ValueError`` when a policy has no intervals (a NaN or infinite return)."""
        for name, result in self.results.items():
            if not result.has_intervals:
                raise ValueError(
                    f"Comparison.plot() draws confidence intervals, and policy {name!r} has none: it "
                    f"{result.no_interval_reason}"
                )
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:
            raise ImportError(
                "Comparison.plot() needs matplotlib; install it with `pip install 'rlmesh-gym[notebook]'`"
            ) from exc
        import numpy as np

        figure, (estimates, differences, profile) = plt.subplots(1, 3, figsize=(15, 3.8))
        names = self.names
        rows = np.arange(len(names))
        for offset, (statistic, label, color) in enumerate(
            (("mean", "mean", "tab:blue"), ("iqm", "IQM", "tab:orange"))
        ):
            intervals = [getattr(self.results[name], f"{statistic}_return_ci") for name in names]
            centres = np.array([i.estimate for i in intervals])
            errors = np.array(
                [[i.estimate - i.low for i in intervals], [i.high - i.estimate for i in intervals]]
            )
            estimates.errorbar(
                centres, rows + 0.15 - 0.3 * offset, xerr=errors, fmt="o", capsize=4, color=color, label=label
            )
        estimates.set_yticks(rows, names)
        estimates.invert_yaxis()
        estimates.set_xlabel("return")
        estimates.set_title("mean and IQM, 95% CIs")
        estimates.legend(fontsize="small")

        pair_rows = np.arange(len(self.pairs))
        for row, pair in zip(pair_rows, self.pairs, strict=True):
            d = pair.difference
            assert d is not None  # every return is finite: checked above
            differences.errorbar(
                [d.estimate], [row], xerr=[[d.estimate - d.low], [d.high - d.estimate]], fmt="o", capsize=4
            )
            differences.annotate(
                f"P(>)={pair.probability_of_improvement:.2f}",
                (d.estimate, row),
                textcoords="offset points",
                xytext=(0, 7),
                ha="center",
                fontsize="small",
            )
        differences.axvline(0.0, color="black", linewidth=1, linestyle="--")
        differences.set_yticks(pair_rows, [f"{p.a} - {p.b}" for p in self.pairs])
        differences.invert_yaxis()
        differences.set_xlabel("mean paired difference of returns")
        differences.set_title("paired differences, 95% CIs")

        every = np.array([e.returns[name] for e in self.episodes for name in names])
        thresholds = np.linspace(every.min(), every.max(), 200) if every.size else np.array([])
        for name in names:
            returns = np.array(self.results[name].returns)
            share = (returns[None, :] > thresholds[:, None]).mean(axis=1)
            profile.plot(thresholds, share, label=name)
        profile.set_xlabel("return threshold")
        profile.set_ylabel("share of episodes with return > threshold")
        profile.set_ylim(-0.02, 1.02)
        profile.set_title("performance profile")
        profile.legend(fontsize="small")
        figure.tight_layout()
        return figure

    # -- display ----------------------------------------------------------------------------

    def _headline(self) -> str:
        return (
            f"{self.env_id} | {len(self.results)} policies on the same {self.episodes_per_policy} seeded "
            f"episodes | {self.num_envs} lane(s) | seed {self.seed} | autoreset disabled"
        )

    def _policy_rows(self) -> list[tuple[str, str, str]]:
        rows = []
        for name, result in self.results.items():
            if result.has_intervals:
                rows.append((name, str(result.mean_return_ci), str(result.iqm_return_ci)))
            else:
                missing = f"no CI: {result.no_interval_reason}"
                rows.append(
                    (name, f"{result.mean_return:,.2f} ({missing})", f"{result.iqm_return:,.2f} ({missing})")
                )
        return rows

    def _pair_rows(self) -> list[tuple[str, str, str]]:
        return [
            (f"{p.a} - {p.b}", str(p.difference), f"{p.probability_of_improvement:.3f}")
            if p.difference is not None and p.probability_of_improvement is not None
            else (f"{p.a} - {p.b}", f"no interval: {p.no_interval_reason}", "n/a")
            for p in self.pairs
        ]

    def _bootstrap_line(self) -> str:
        return f"95% percentile-bootstrap CIs, {DEFAULT_RESAMPLES:,} resamples, seed {DEFAULT_BOOTSTRAP_SEED}"

    def __str__(self) -> str:
        def table(header: tuple[str, str, str], rows: list[tuple[str, str, str]]) -> list[str]:
            widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
            return [
                "  " + "  ".join(f"{cell:<{width}}" for cell, width in zip(row, widths, strict=True)).rstrip()
                for row in [header, *rows]
            ]

        lines = [self._headline()]
        lines += table(("policy", "mean return [95% CI]", "IQM return [95% CI]"), self._policy_rows())
        lines += table(("pair (a - b)", "mean paired difference [95% CI]", "P(a > b)"), self._pair_rows())
        lines.append(f"  {self._bootstrap_line()}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"Comparison(env_id={self.env_id!r}, policies={self.names!r}, "
            f"episodes_per_policy={self.episodes_per_policy}, seed={self.seed})"
        )

    def _repr_html_(self) -> str:
        esc = html.escape

        def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
            head = "".join(f"<th>{esc(cell)}</th>" for cell in header)
            body = "".join(
                "<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in rows
            )
            return f"<table><tr>{head}</tr>{body}</table>"

        names = self.names
        episode_rows = [
            (str(e.lane), str(e.index), str(e.seed), *(f"{e.returns[name]:g}" for name in names))
            for e in self.episodes
        ]
        return (
            f"<div><p><b>Comparison</b>: {esc(self._headline())}</p>"
            + table(("policy", "mean return [95% CI]", "IQM return [95% CI]"), self._policy_rows())
            + table(("pair (a - b)", "mean paired difference [95% CI]", "P(a > b)"), self._pair_rows())
            + f"<p>{esc(self._bootstrap_line())}</p>"
            + "<details><summary>episodes</summary>"
            + table(("lane", "index", "seed", *(f"return {name}" for name in names)), episode_rows)
            + "</details></div>"
        )


def _check_policies(policies: Any) -> dict[str, Any]:
    if not isinstance(policies, Mapping):
        raise TypeError(
            f"policies must be a mapping of names to policies, e.g. {{'a': policy_a, 'b': policy_b}}; "
            f"got {type(policies).__qualname__}"
        )
    if len(policies) < 2:
        raise ValueError(f"compare needs at least 2 policies, got {len(policies)}")
    for name in policies:
        if not isinstance(name, str) or not name:
            raise ValueError(f"policy names must be non-empty strings, got {name!r}")
    return dict(policies)


def _recording_paths(
    record: str | os.PathLike[str] | RecordingOptions | None, names: list[str]
) -> dict[str, str] | None:
    if record is None:
        return None
    directory = os.fspath(record.path if isinstance(record, RecordingOptions) else record)
    os.makedirs(directory, exist_ok=True)
    paths = {name: os.path.join(directory, f"{_SAFE_NAME.sub('_', name)}.rec") for name in names}
    if len(set(paths.values())) != len(paths):
        raise ValueError(f"policy names {names} give clashing recording file names in {directory!r}")
    return paths


def _fits(resolved: ResolvedEnv, name: str, policy: Any, settings: EvaluationSettings) -> None:
    """Run ``policy`` for one vector step, so a policy that does not fit the env (or does not
    load) is reported, by name, before any full evaluation ran."""
    # Errors name the policy as given; say which compared name that is when it differs.
    prefix = "" if isinstance(policy, str) and policy == name else f"policy {name!r}: "
    check = dataclasses.replace(settings, episodes=1, max_steps=1, progress=False, record=None)
    try:
        evaluate_resolved(resolved, policy, check)
    except PolicyMismatchError as exc:
        raise PolicyMismatchError(f"{prefix}{exc}", exc.partial) from exc
    except EvaluationError as exc:
        if exc.__cause__ is not None:  # a failure, not the max_steps stop this check asks for
            raise EvaluationError(f"{prefix}{exc}", exc.partial) from exc.__cause__
    except (ValueError, TypeError, ImportError) as exc:
        raise type(exc)(f"{prefix}{exc}") from exc


def _named(name: str, policy: Any) -> str:
    """``policy 'name'`` and, when it differs from the name, what was passed as the policy."""
    from rlmesh_gym.policies.resolve import describe_policy

    spec = describe_policy(policy)
    return f"policy {name!r}" if spec == name else f"policy {name!r} ({spec})"


def _renamed(exc: Exception, message: str) -> Exception:
    """``exc``'s type with ``message`` (an ``OSError`` keeps its errno)."""
    if isinstance(exc, OSError):
        return type(exc)(exc.errno, message)
    return type(exc)(message)


def _paired_episodes(results: dict[str, EvalResult]) -> tuple[ComparedEpisode, ...]:
    by_policy: dict[str, dict[tuple[int, int], tuple[int | None, float]]] = {}
    for name, result in results.items():
        seen = [0] * result.num_envs
        table = {}
        for record in result.episodes:
            table[(record.lane, seen[record.lane])] = (record.seed, record.episode_return)
            seen[record.lane] += 1
        by_policy[name] = table
    names = list(results)
    first = by_policy[names[0]]
    rows = []
    for key in sorted(first):
        seeds = {name: by_policy[name].get(key, (None, math.nan))[0] for name in names}
        seed = seeds[names[0]]
        if seed is None or any(other != seed for other in seeds.values()):
            raise EvaluationError(
                f"episode {key[1]} of lane {key[0]} was not the same seeded episode for every policy "
                f"(reset seeds {seeds}); the env must reset each episode from its seed",
                results[names[0]],
            )
        rows.append(ComparedEpisode(key[0], key[1], seed, {name: by_policy[name][key][1] for name in names}))
    return tuple(rows)


def _no_paired_interval(a: str, returns_a: list[float], b: str, returns_b: list[float]) -> str | None:
    """Why the pair ``a``, ``b`` has no paired statistics (a non-finite return), or ``None``."""
    for name, returns in ((a, returns_a), (b, returns_b)):
        bad = sum(not math.isfinite(value) for value in returns)
        if bad:
            return f"needs finite returns ({bad} of the returns of {name!r} are NaN or infinite)"
    return None


# compare()'s keyword arguments of earlier releases that moved (docs/evaluation.md, Changelog).
_MOVED = {
    name: f"pass options=EvaluationOptions({name}=...)"
    for name in ("vectorization", "limits", "allow_pickle", "env_kwargs", "max_steps")
}
# Options compare sets itself: the ids feed the seeds it pairs the episodes by; no target_ci.
_NOT_FOR_COMPARE = ("hooks", "max_episodes", "session_id", "route_id")


@moved_arguments(_MOVED)
def compare(
    env: Any,
    policies: Mapping[str, Any],
    *,
    episodes: int = 10,
    num_envs: int | None = None,
    seed: int = 0,
    deterministic: bool = True,
    device: str = "cpu",
    record: str | os.PathLike[str] | RecordingOptions | None = None,
    progress: bool = True,
    options: EvaluationOptions | None = None,
) -> Comparison:
    """Evaluate every policy of ``policies`` (name -> anything :func:`evaluate` takes) on the
    same ``episodes`` seeded episodes of ``env`` and compare them pair by pair.

    ``env`` is an env id (built once with DISABLED autoreset, ``num_envs`` lanes, and closed at
    the end) or an env you built, which must use DISABLED autoreset (it is reused for every
    policy, each run starting from the same seeds). ``seed`` must be an int: the episodes are
    paired by their reset seeds. ``record`` is a directory: each policy's episodes are recorded
    to ``<name>.rec`` there (a :class:`~rlmesh_gym.recording.RecordingOptions` whose ``path`` is
    the directory records each with those options, frames included). The other arguments are
    :func:`evaluate`'s; of ``options``, ``max_steps``, ``limits``, ``vectorization``,
    ``env_kwargs`` and ``allow_pickle`` apply (``compare`` chooses the session and route ids
    itself, takes no ``hooks`` and no ``target_ci``).

    Before the full runs each policy is run for one vector step, so a policy that does not fit
    the env's spaces raises :class:`PolicyMismatchError` (naming it) before any time is spent.
    Raises ``ValueError`` for fewer than 2 policies or 2 episodes (a paired interval needs
    two), ``seed=None`` or a non-DISABLED env.
    """
    named = _check_policies(policies)
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 2:
        raise ValueError(
            f"compare needs episodes >= 2 (a confidence interval needs 2 episodes), got {episodes!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(
            f"compare needs an int seed in [0, 2**63) (the policies are paired by reset seeds), got {seed!r}"
        )
    options = check_options(options)
    given = fields_set(options, _NOT_FOR_COMPARE)
    if given:
        raise ValueError(
            f"EvaluationOptions {', '.join(given)} cannot be given to compare(): it chooses the session "
            "and route ids (the policies are paired by the reset seeds they give), runs no extra hooks "
            "and evaluates a fixed number of episodes"
        )
    vectorization, env_kwargs = options.vectorization, options.env_kwargs
    from rlmesh_gym.envs.resolve import resolve_env  # loads gymnasium: only when an env is resolved

    if isinstance(env, str):
        frame_kwargs = _frame_env_kwargs(env, record, env_kwargs)  # frames: render_mode="rgb_array"
        resolved = resolve_env(
            env, num_envs=num_envs, autoreset="disabled", vectorization=vectorization, env_kwargs=frame_kwargs
        )
    else:
        resolved = resolve_env(
            env, num_envs=num_envs, autoreset=None, vectorization=vectorization, env_kwargs=env_kwargs
        )
        if resolved.autoreset is not AutoresetMode.DISABLED:
            raise ValueError(
                f"compare needs an env with DISABLED autoreset (every episode reset from its own seed); "
                f"this one uses {resolved.autoreset.value!r}. Pass an env id, or build it with "
                "autoreset='disabled'"
            )
    session_id, route_id = default_ids(resolved.env_id, resolved.num_envs)
    try:
        settings = EvaluationSettings.of(
            dataclasses.replace(options, session_id=session_id, route_id=route_id),
            episodes=episodes,
            seed=seed,
            deterministic=deterministic,
            device=device,
            progress=progress,
        )
        return _compare(resolved, named, settings, record)
    finally:
        if resolved.owned:
            timeout = (options.limits or RuntimeLimits()).service_close_timeout
            run_blocking(lambda: resolved.env.close(timeout), lambda: None)


def _compare(
    resolved: ResolvedEnv,
    policies: dict[str, Any],
    settings: EvaluationSettings,
    record: str | os.PathLike[str] | RecordingOptions | None,
) -> Comparison:
    seed, session_id, route_id = settings.seed, settings.session_id, settings.route_id
    assert seed is not None and session_id is not None and route_id is not None  # compare sets them

    def lane_ordinal(env: Any) -> ResolvedEnv:
        # A fresh wrapper per run: each lane's episode count starts at 0 with the cold reset.
        wrapped = lane_ordinal_seeds(env, resolved.num_envs, seed, session_id, route_id)
        return dataclasses.replace(resolved, env=wrapped, owned=False)

    for name, policy in policies.items():
        _fits(lane_ordinal(resolved.env), name, policy, settings)
    paths = _recording_paths(record, list(policies))
    results: dict[str, EvalResult] = {}
    for name, policy in policies.items():
        recording: Any = None
        if paths:
            # RecordingOptions name the directory; each policy's file takes its options (frames, lanes).
            recording = (
                dataclasses.replace(record, path=paths[name])
                if isinstance(record, RecordingOptions)
                else paths[name]
            )
        run = dataclasses.replace(settings, record=recording)
        try:
            results[name] = evaluate_resolved(lane_ordinal(resolved.env), policy, run)
        except EvaluationError as exc:
            done = f" (after the full runs of {', '.join(map(repr, results))})" if results else ""
            raise type(exc)(f"{_named(name, policy)}{done}: {exc}", exc.partial) from exc.__cause__
        except (ValueError, TypeError, ImportError, OSError) as exc:
            raise _renamed(exc, f"{_named(name, policy)}: {exc}") from exc
    rows = _paired_episodes(results)
    pairs = []
    for a, b in itertools.combinations(policies, 2):
        returns_a = [row.returns[a] for row in rows]
        returns_b = [row.returns[b] for row in rows]
        reason = _no_paired_interval(a, returns_a, b, returns_b)
        if reason is not None:
            pairs.append(PairedDifference(a, b, None, None, reason))
            continue
        difference = bootstrap_interval([x - y for x, y in zip(returns_a, returns_b, strict=True)], "mean")
        pairs.append(PairedDifference(a, b, difference, probability_of_improvement(returns_a, returns_b)))
    return Comparison(
        env_id=resolved.env_id,
        seed=seed,
        num_envs=resolved.num_envs,
        episodes_per_policy=settings.episodes,
        results=results,
        pairs=tuple(pairs),
        episodes=rows,
        recordings=paths,
    )

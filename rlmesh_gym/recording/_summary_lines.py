"""A recording's summary as the evaluation counted it, then the rest: :func:`summary_lines`.

An evaluation counts each lane's first episodes up to its quota; a recording also holds the
episodes that finished past a quota (recorded, not counted) and the ones still running when the
evaluation stopped (incomplete: cut short, never counted). The figures a user sees first are the
counted episodes', the evaluation's own, so they match what ``evaluate``/``eval`` reported.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlmesh_gym.recording._reader import RecordedEpisode, Recording

__all__ = ["INCOMPLETE_MEANING", "summary_lines"]

INCOMPLETE_MEANING = "still running when the evaluation stopped: cut short, never counted"


def _figures(episodes: Sequence[RecordedEpisode]) -> str:
    returns = np.array([episode.episode_return for episode in episodes], dtype=np.float64)
    lengths = np.array([episode.length for episode in episodes], dtype=np.float64)
    return (
        f"mean return {returns.mean():.2f}  std {returns.std():.2f}  min {returns.min():g}  "
        f"max {returns.max():g}  mean length {lengths.mean():.1f}"
    )


def summary_lines(recording: Recording) -> list[tuple[str, str]]:
    """(label, text) lines: the counted episodes' figures first, then every complete episode's,
    then the incomplete count with what it means.

    A recording written outside an evaluation (no episode says whether it was counted) shows
    the complete episodes' figures first.
    """
    complete = recording.episodes
    counted = [episode for episode in complete if episode.counted]
    known = any(episode.counted is not None for episode in complete)
    lines: list[tuple[str, str]] = []
    if known:
        text = f"{len(counted)} episode(s)" + (f", {_figures(counted)}" if counted else "")
        lines.append(("counted", f"{text} (the evaluation's figures)"))
        extra = len(complete) - len(counted)
        if extra:
            lines.append(
                (
                    "recorded",
                    f"{len(complete)} complete episode(s), {_figures(complete)}; {extra} of them finished "
                    "after their lane's quota was met (recorded, not counted)",
                )
            )
    elif complete:
        lines.append(("complete", f"{len(complete)} episode(s), {_figures(complete)}"))
    else:
        lines.append(("complete", "no complete episodes"))
    incomplete = len(recording.incomplete_episodes)
    if incomplete:
        lines.append(("incomplete", f"{incomplete} episode(s), {INCOMPLETE_MEANING}"))
    return lines

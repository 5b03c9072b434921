"""A recording as one self-contained HTML page: :func:`write_html`.

The page holds the run's summary, a return histogram (inline SVG), one table row per episode
and the episode player (``player.js``, inlined) for the episode picked in the table. The
episodes' data is one JSON block that the player reads in the browser; frames are PNG data
URLs. Nothing is fetched when the page opens, so it works offline and as an email attachment.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlmesh_gym import __version__
from rlmesh_gym.recording._player import player_css, player_script
from rlmesh_gym.recording._player_data import DEFAULT_FPS, episode_payload
from rlmesh_gym.recording._reader import EPISODE_TABLE_COLUMNS, Recording, episode_row

__all__ = ["write_html"]

_HISTOGRAM_BINS = 20

_PAGE_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 20px auto; max-width: 1200px;
       padding: 0 16px; color: #222; }
h1 { font-size: 20px; margin-bottom: 4px; }
.meta { color: #555; margin-bottom: 12px; }
.warning { background: #fff4ce; border: 1px solid #e0c060; padding: 6px 10px; margin: 8px 0; }
.top { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
table.stats td, table.stats th { padding: 1px 10px 1px 0; text-align: left; }
.episodes-box { max-height: 320px; overflow: auto; border: 1px solid #ddd; margin: 12px 0; }
table.episodes { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
table.episodes th { position: sticky; top: 0; background: #f4f4f4; text-align: right; padding: 3px 8px; }
table.episodes td { text-align: right; padding: 2px 8px; border-top: 1px solid #eee; }
table.episodes tbody tr { cursor: pointer; }
table.episodes tbody tr:hover { background: #eef5ff; }
table.episodes tbody tr.selected { background: #d6e8ff; }
.histogram rect { fill: #1f77b4; }
.histogram text { font-size: 10px; fill: #555; }
"""

_PAGE_SCRIPT = """
(function () {
  const data = JSON.parse(document.getElementById("rlmesh-data").textContent);
  const box = document.getElementById("player");
  const rows = Array.from(document.querySelectorAll("table.episodes tbody tr"));
  let handle = null;
  function select(index) {
    if (handle) handle.destroy();
    rows.forEach((row) => row.classList.toggle("selected", Number(row.dataset.episode) === index));
    document.getElementById("player-title").textContent = data.episodes[index].label;
    handle = rlmeshMountPlayer(box, [data.episodes[index]], { fps: data.fps });
    box.dataset.episode = String(index);
  }
  rows.forEach((row) => row.addEventListener("click", () => select(Number(row.dataset.episode))));
  if (data.episodes.length) select(0);
})();
"""


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element (no '</script>' or '<!--' can appear)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def _histogram_svg(returns: np.ndarray) -> str:
    if not len(returns):
        return "<p>No complete episodes.</p>"
    finite = returns[np.isfinite(returns)]
    if not len(finite):
        return "<p>No finite returns.</p>"
    low, high = float(finite.min()), float(finite.max())
    if low == high:
        low, high = low - 0.5, high + 0.5
    counts, edges = np.histogram(finite, bins=min(_HISTOGRAM_BINS, max(len(finite), 1)), range=(low, high))
    width, height, pad = 360, 140, 18
    bar = (width - 2 * pad) / len(counts)
    top = max(int(counts.max()), 1)
    bars = []
    for index, count in enumerate(counts):
        bar_height = (height - 2 * pad) * count / top
        bars.append(
            f'<rect x="{pad + index * bar:.1f}" y="{height - pad - bar_height:.1f}" '
            f'width="{max(bar - 1, 1):.1f}" height="{bar_height:.1f}" data-count="{int(count)}">'
            f"<title>{edges[index]:g} to {edges[index + 1]:g}: {int(count)}</title></rect>"
        )
    labels = (
        f'<text x="{pad}" y="{height - 4}">{edges[0]:g}</text>'
        f'<text x="{width - pad}" y="{height - 4}" text-anchor="end">{edges[-1]:g}</text>'
        f'<text x="{pad}" y="12">{top} episode(s)</text>'
    )
    return (
        f'<svg class="histogram" data-role="histogram" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="histogram of episode returns">'
        f"{''.join(bars)}{labels}</svg>"
    )


def _render_fps(recording: Recording) -> float:
    fps = recording.header.render_fps
    return fps if fps is not None else DEFAULT_FPS


def write_html(
    recording: Recording,
    path: str | os.PathLike[str],
    *,
    episodes: Sequence[int | str] | None = None,
    frames: bool = True,
    title: str | None = None,
) -> str:
    """Write ``recording`` as one self-contained HTML page; return the path written."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"to_html: path must be a str or os.PathLike, got {path!r}")
    if episodes is None:
        indices = list(range(len(recording.episodes)))
    else:
        indices = [_index(recording, key) for key in episodes]
    chosen = [recording.episodes[index] for index in indices]
    header = recording.header
    page_title = title or f"{header.env_id or 'recording'}: {len(chosen)} episode(s)"
    payloads = [
        episode_payload(episode, label=f"episode {index}", frames=frames)
        for index, episode in zip(indices, chosen, strict=True)
    ]
    data = {"fps": _render_fps(recording), "episodes": payloads}
    returns = np.array([episode.episode_return for episode in chosen], dtype=np.float64)
    stats = [(label, html.escape(text)) for label, text in recording.summary_lines()]
    if len(chosen) != len(recording.episodes):
        stats.append(
            (
                "on this page",
                f"{len(chosen)} episode(s), mean return {returns.mean():.2f}"
                if len(chosen)
                else "no episodes",
            )
        )
    stats += [
        ("env", html.escape(header.env_id or "(no id)")),
        ("lanes", f"{header.num_envs} (recorded: {html.escape(header.describe_lanes())})"),
        ("autoreset", html.escape(header.autoreset_mode)),
        ("base seed", html.escape(str(header.base_seed))),
    ]
    stats_html = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in stats)
    head = "".join(f"<th>{name}</th>" for name in EPISODE_TABLE_COLUMNS)
    body: list[str] = []
    for index, episode in zip(indices, chosen, strict=True):
        cells = episode_row(index, episode, frames=frames)
        row = "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells)
        body.append(f'<tr data-episode="{len(body)}">{row}</tr>')
    warning = ""
    if recording.partial:
        warning = (
            '<div class="warning" data-role="partial">This recording was read only in part (the file is '
            "cut off or damaged): the episodes below are the ones complete before that point.</div>"
        )
    source = (
        f"{os.path.basename(recording.path)} · recording format version {header.version} · "
        f"written by {header.writer or 'unknown'}"
    )
    document = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="rlmesh-gym {html.escape(__version__)}">
<title>{html.escape(page_title)}</title>
<style>{_PAGE_CSS}{player_css()}</style>
</head>
<body>
<h1>{html.escape(page_title)}</h1>
<div class="meta">{html.escape(source)}</div>
{warning}
<div class="top">
<table class="stats" data-role="stats">{stats_html}</table>
<div><div>Episode returns</div>{_histogram_svg(returns)}</div>
</div>
<div class="episodes-box"><table class="episodes" data-role="episodes"><thead><tr>{head}</tr></thead>
<tbody>{"".join(body)}</tbody></table></div>
<h2 id="player-title" style="font-size:16px">Episode</h2>
<div id="player"></div>
<script type="application/json" id="rlmesh-data">{_script_json(data)}</script>
<script>{player_script()}</script>
<script>{_PAGE_SCRIPT}</script>
</body>
</html>
"""
    filename = os.fspath(path)
    with open(filename, "w", encoding="utf-8") as stream:
        stream.write(document)
    return filename


def _index(recording: Recording, key: Any) -> int:
    episode = recording.episode(key)  # IndexError / KeyError / TypeError name the bad key
    for index, candidate in enumerate(recording.episodes):
        if candidate is episode:
            return index
    raise ValueError(f"episode {episode.episode_id!r} is incomplete: the page lists complete episodes only")

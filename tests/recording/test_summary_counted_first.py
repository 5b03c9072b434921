"""The summary a user sees first is the evaluation's (counted) figures; the others are shown as such."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from rlmesh_gym.cli import main
from rlmesh_gym.evaluation import evaluate
from rlmesh_gym.recording import load_recording


def test_eval_episodes_and_the_page_open_with_the_counted_figures(tmp_path: Path, capsys) -> None:
    path = tmp_path / "run.rec"
    # NEXT_STEP on 4 lanes: lanes go on past their quotas, and some episodes are still running at
    # the end (evaluate()'s own SAME_STEP env retires a lane after its last counted episode instead).
    result = evaluate(
        "CartPole-v1",
        "random",
        episodes=6,
        num_envs=4,
        seed=3,
        autoreset="next_step",
        record=path,
        progress=False,
    )
    recording = load_recording(path)
    assert len(recording.episodes) > 6 and recording.incomplete_episodes  # the case the summary explains
    lines = dict(recording.summary_lines())
    assert list(lines)[0] == "counted"
    assert lines["counted"].startswith(f"6 episode(s), mean return {result.mean_return:.2f} ")
    assert lines["counted"].endswith("(the evaluation's figures)")
    every = np.mean([episode.episode_return for episode in recording.episodes])
    assert f"{len(recording.episodes)} complete episode(s), mean return {every:.2f}" in lines["recorded"]
    assert "after their lane's quota was met (recorded, not counted)" in lines["recorded"]
    assert lines["incomplete"] == (
        f"{len(recording.incomplete_episodes)} episode(s), still running when the evaluation stopped: "
        "cut short, never counted"
    )
    assert main(["episodes", str(path), "--html", str(tmp_path / "run.html")]) == 0
    out = capsys.readouterr().out
    summary = [line for line in out.splitlines() if re.match(r"(counted|recorded|incomplete) ", line)]
    assert summary[0].startswith(f"counted     6 episode(s), mean return {result.mean_return:.2f}")
    page = (tmp_path / "run.html").read_text()
    assert (
        page.index("<th>counted</th>") < page.index("<th>recorded</th>") < page.index("<th>incomplete</th>")
    )
    assert "(the evaluation&#x27;s figures)" in page

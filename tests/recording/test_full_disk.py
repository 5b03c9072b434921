"""A disk that fills up during ``evaluate(record=...)``: the recorder stops once, the result survives."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import resource, sys, warnings
    from rlmesh_gym import evaluate
    from rlmesh_gym.evaluation import EvaluationError
    from rlmesh_gym.recording import RecordingWarning, load_recording

    path = sys.argv[1]
    # Files this process writes may not grow past 64 KiB: a full disk, for this file.
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
    try:
        evaluate("CartPole-v1", "random", episodes=300, num_envs=2, seed=0, record=path, progress=False)
        print("no error")
    except EvaluationError as error:
        print("error:", error)
        print("cause:", type(error.__cause__).__name__, error.__cause__.errno)
        print("episodes:", len(error.partial.episodes), error.partial.complete)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recording = load_recording(path)
    print("readable:", 0 < len(recording.episodes) < 300, [w.category.__name__ for w in caught])
    """
)


def test_a_full_disk_stops_the_recorder_once_and_evaluate_keeps_its_episodes(tmp_path):
    path = tmp_path / "run.rec"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path)], capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"error: evaluation of CartPole-v1 finished (300 episodes, in this error's .partial) but "
        f"[Errno 27] writing recording file {str(path)!r} failed (File too large); recording stopped, "
        "the file keeps the records written before the failure"
    ), result.stdout
    assert lines[1:] == ["cause: OSError 27", "episodes: 300 True", "readable: True ['RecordingWarning']"]
    # One line on stderr says why, with the path; no "runtime hook ... failed" flood.
    assert result.stderr.splitlines() == [lines[0].split(" but ", 1)[1]], result.stderr
    assert path.stat().st_size <= 64 * 1024

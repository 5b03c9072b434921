"""Frames rendered without a display print nothing on stderr (pygame's XDG_RUNTIME_DIR error)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("pygame")

SCRIPT = """
import os
from rlmesh_gym.evaluation import EvaluationOptions, evaluate
from rlmesh_gym.recording import RecordingOptions, load_recording
result = evaluate("CartPole-v1", "random", episodes=2, num_envs=2, seed=1, autoreset="disabled",
                  options=EvaluationOptions(vectorization={vectorization!r}),
                  record=RecordingOptions("run.rec", frame_lanes=[0, 1]), progress=False)
frames = load_recording("run.rec").episodes[0].frames
print(len(frames) > 0, frames[0].shape, os.environ.get("SDL_VIDEODRIVER"))
"""


def headless_environment(**extra: str) -> dict[str, str]:
    hidden = ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "SDL_VIDEODRIVER")
    return {**{k: v for k, v in os.environ.items() if k not in hidden}, **extra}


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_recording_frames_headless_prints_no_sdl_error_and_leaves_the_environment_alone(
    tmp_path, vectorization: str
) -> None:
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(vectorization=vectorization)],
        cwd=tmp_path,
        env=headless_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "(400,", "600,", "3)", "None"]
    assert "XDG_RUNTIME_DIR" not in run.stderr and "error" not in run.stderr.lower(), run.stderr


def test_a_video_driver_the_user_chose_is_kept() -> None:
    script = (
        "import os\nfrom rlmesh_gym.envs.headless import headless_video\n"
        "with headless_video():\n    print(os.environ['SDL_VIDEODRIVER'])\n"
    )
    environ = headless_environment(SDL_VIDEODRIVER="offscreen")
    run = subprocess.run(
        [sys.executable, "-c", script], env=environ, capture_output=True, text=True, timeout=120
    )
    assert run.stdout.strip() == "offscreen", run.stderr

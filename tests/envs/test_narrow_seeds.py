"""Envs that take only 32-bit seeds (MinAtar, dm_control through shimmy), in-process, served and replayed.

Their seeds are the driver's 64-bit seeds folded to 32 bits (rlmesh_gym/envs/seed_width.py);
every other env keeps the 64-bit seeds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest

pytest.importorskip("minatar")
pytest.importorskip("shimmy")
pytest.importorskip("dm_control")

from rlmesh_gym.envs import GymVectorEnv  # noqa: E402
from rlmesh_gym.envs.seed_width import SEED_LIMIT, fold_seed  # noqa: E402
from rlmesh_gym.evaluation import EvaluationOptions, evaluate  # noqa: E402
from rlmesh_gym.recording import load_recording, replay_episode  # noqa: E402

TESTS = Path(__file__).resolve().parents[1]
MINATAR = "_narrow_seed_envs:MinAtar/Breakout-v1"
DM_CONTROL = "_narrow_seed_envs:dm_control/cartpole-balance-v0"
SHORT = {"max_episode_steps": 15}  # dm_control's episodes are 1000 steps; the length proves nothing here


def rows(episodes) -> list[tuple[int, int, float, int]]:
    return sorted((e.lane, e.seed, round(e.episode_return, 9), e.length) for e in episodes)


def json_rows(result: dict) -> list[tuple[int, int, float, int]]:
    return sorted(
        (e["lane"], e["seed"], round(e["episode_return"], 9), e["length"]) for e in result["episodes"]
    )


def test_minatar_gets_the_driver_seeds_folded_to_32_bits_and_its_episodes_replay(tmp_path: Path) -> None:
    path = tmp_path / "minatar.rec"
    common = {"episodes": 4, "num_envs": 2, "seed": 0, "autoreset": "disabled", "progress": False}
    result = evaluate(MINATAR, "random", record=path, **common)
    # The same session on CartPole, which takes 64-bit seeds, shows the first seeds the driver asks for.
    wide = evaluate(
        "CartPole-v1",
        "random",
        options=EvaluationOptions(session_id="eval-MinAtar/Breakout-v1"),
        **{**common, "episodes": 2},
    )
    asked = {e.lane: e.seed for e in wide.episodes}
    assert all(seed >= SEED_LIMIT for seed in asked.values())  # CartPole keeps the 64-bit seeds
    first = {lane: next(e.seed for e in result.episodes if e.lane == lane) for lane in (0, 1)}
    assert first == {lane: fold_seed(seed) for lane, seed in asked.items()}
    assert all(e.seed < SEED_LIMIT for e in result.episodes)
    # Async workers get the same seeds (asked of a throwaway env, as a worker dies when its env raises).
    assert rows(
        evaluate(MINATAR, "random", options=EvaluationOptions(vectorization="async"), **common).episodes
    ) == rows(result.episodes)
    recording = load_recording(path)
    assert [replay_episode(recording, index).match for index in range(4)] == [True] * 4
    # The recorded seed is the one the env got: the raw env reproduces the episode's first observation.
    raw = gymnasium.make("MinAtar/Breakout-v1")
    observation, _ = raw.reset(seed=recording.episodes[0].seed)
    assert np.array_equal(observation, recording.episodes[0].observations[0])


def test_dm_control_through_shimmy_evaluates_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "dm_control.rec"
    result = evaluate(DM_CONTROL, "random", episodes=2, num_envs=2, seed=5, autoreset="disabled",
                      options=EvaluationOptions(env_kwargs=SHORT), record=path, progress=False)  # fmt: skip
    assert [e.length for e in result.episodes] == [15, 15]
    assert all(e.seed is not None and e.seed < SEED_LIMIT for e in result.episodes)
    recording = load_recording(path)
    assert [replay_episode(recording, index).match for index in range(2)] == [True, True]


def test_a_refused_seed_that_is_not_about_width_is_reported_as_the_env_raised_it() -> None:
    class Picky(gymnasium.Env):
        observation_space = action_space = gymnasium.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            raise ValueError("this env is broken")

    async def reset() -> None:
        env = GymVectorEnv(Picky())
        try:
            await env.reset_arrays([], [6668194136985866374])
        finally:
            await env.close(5.0)

    with pytest.raises(Exception, match="this env is broken"):
        asyncio.run(reset())


def serve_and_evaluate(env_id: str, *serve_args: str, episodes: int, seed: int) -> dict:
    path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    environ = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "rlmesh_gym", "serve-env", env_id, "--address", "127.0.0.1:0", *serve_args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        assert " on " in banner, server.stderr.read() if server.stderr else banner
        address = banner.rsplit(" on ", 1)[1].strip()
        run = subprocess.run(
            [sys.executable, "-m", "rlmesh_gym", "eval", "--env-address", address, "--policy", "random",
             "--episodes", str(episodes), "--seed", str(seed), "--json", "--no-progress"],
            capture_output=True, text=True, env=environ, timeout=300,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)


def test_served_minatar_plays_the_in_process_episodes() -> None:
    # The served env's id is the registered one (MinAtar/Breakout-v1); in-process it is spelled
    # with its module. Both give the session eval-MinAtar/Breakout-v1, so the same episodes.
    served = serve_and_evaluate(MINATAR, "--num-envs", "2", "--autoreset", "disabled", episodes=4, seed=2)
    local = evaluate(MINATAR, "random", episodes=4, num_envs=2, seed=2, autoreset="disabled", progress=False)
    assert json_rows(served) == rows(local.episodes)
    assert all(e.seed < SEED_LIMIT for e in local.episodes)


def test_served_async_dm_control_plays_the_in_process_episodes() -> None:
    serve_args = ["--num-envs", "2", "--autoreset", "disabled", "--vectorization", "async",
                  "--env-kwargs", "max_episode_steps=15"]  # fmt: skip
    served = serve_and_evaluate(DM_CONTROL, *serve_args, episodes=2, seed=4)
    local = evaluate(DM_CONTROL, "random", episodes=2, num_envs=2, seed=4, autoreset="disabled",
                     options=EvaluationOptions(env_kwargs=SHORT), progress=False)  # fmt: skip
    assert json_rows(served) == rows(local.episodes)

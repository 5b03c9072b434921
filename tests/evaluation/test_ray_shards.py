"""``evaluate_on_ray`` on a real Ray cluster: the shards play in-process evaluate()'s episodes, a
worker killed mid-run is retried by Ray with the identical result, a policy that raises is not
retried, Ctrl+C keeps the partial result, and every process of the cluster talks on loopback only.

One local cluster (2 CPUs) serves the whole module: started by the fixture through the same code
as ``RayCluster("local")``, stopped in every outcome. The tests then evaluate on that connection
(``"auto"``); the command-line tests connect to it from their own process (``RAY_ADDRESS``).
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from _ray_policies import REPORT_DIRECTORY, Raising, Reporting, push_towards_the_lean

from rlmesh_gym.evaluation import (
    EvalResult,
    EvaluationError,
    EvaluationOptions,
    PolicyMismatchError,
    RayCluster,
    evaluate,
    evaluate_on_ray,
)
from rlmesh_gym.recording import load_recording
from rlmesh_gym.runtime import reset_seed

pytestmark = [pytest.mark.ray, pytest.mark.torch, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
WAIT = 60.0  # seconds: the bound of every wait in this module


@dataclass(frozen=True)
class _Cluster:
    gcs_address: str
    session_dir: str
    reports: Path


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Cluster]:
    from rlmesh_gym.evaluation._ray_cluster import connected

    reports = tmp_path_factory.mktemp("ray-reports")
    # The cluster's processes inherit this environment: the workers of every job (the command
    # line's too) find the test policies and know where to report.
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", REPORT_DIRECTORY)}
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), *filter(None, [saved["PYTHONPATH"]])])
    os.environ[REPORT_DIRECTORY] = str(reports)
    try:
        with connected(RayCluster("local", num_cpus=2)) as ray:
            context = ray.get_runtime_context()
            session_dir = os.path.join(context.get_temp_dir(), context.get_session_name())
            yield _Cluster(context.gcs_address, session_dir, reports)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _on_ray(policy, shards: int, **arguments) -> EvalResult:
    arguments.setdefault("progress", False)
    return evaluate_on_ray("CartPole-v1", policy, cluster=RayCluster("auto", shards=shards), **arguments)


def _by_lane(episodes) -> dict[int, list[tuple]]:
    """Each lane's episodes in the order it played them: lane, seed, return, length and flags."""
    lanes: dict[int, list[tuple]] = {}
    for e in episodes:
        lanes.setdefault(e.lane, []).append((e.seed, e.episode_return, e.length, e.terminated, e.truncated))
    return lanes


def _lines(path: Path, count: int) -> list[str]:
    """The first ``count`` lines of ``path`` once it has them (bounded wait)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return lines
        time.sleep(0.05)
    raise AssertionError(f"{path} did not get {count} line(s) within {WAIT:g} s")


@pytest.mark.parametrize(
    "policy, episodes, shards",
    [
        # Long episodes once, on the most shards (the suite's time); short ones on every count.
        ("pretrained:cartpole", 6, 4),
        (push_towards_the_lean, 10, 1),
        (push_towards_the_lean, 10, 2),
        (push_towards_the_lean, 10, 4),
    ],
    ids=["pretrained-500-steps-4", "short-episodes-1", "short-episodes-2", "short-episodes-4"],
)
def test_every_number_of_shards_plays_the_in_process_episodes(ray_cluster, policy, episodes, shards):
    reference = evaluate("CartPole-v1", policy, episodes=episodes, num_envs=4, seed=3, progress=False)
    result = _on_ray(policy, shards, episodes=episodes, num_envs=4, seed=3)
    assert result.complete and len(result.episodes) == episodes
    assert _by_lane(result.episodes) == _by_lane(reference.episodes)
    assert (result.session_id, result.route_id, result.quotas, result.autoreset) == (
        reference.session_id,
        reference.route_id,
        reference.quotas,
        "same_step",
    )
    sizes = [4 // shards + (s < 4 % shards) for s in range(shards)]
    first = [sum(sizes[:s]) for s in range(shards)]
    for e in result.episodes:  # each episode names the shard whose lanes hold it
        assert first[e.shard] <= e.lane < first[e.shard] + sizes[e.shard]


def test_a_sampling_policy_on_one_shard_samples_as_in_process(ray_cluster):
    reference = evaluate("CartPole-v1", "random", episodes=6, num_envs=3, seed=8, progress=False)
    assert _by_lane(_on_ray("random", 1, episodes=6, num_envs=3, seed=8).episodes) == _by_lane(
        reference.episodes
    )


def test_disabled_autoreset_gives_lane_ordinal_seeds_whatever_the_shards(ray_cluster):
    one, two = (
        _on_ray(push_towards_the_lean, shards, episodes=7, num_envs=2, seed=4, autoreset="disabled")
        for shards in (1, 2)
    )
    assert _by_lane(one.episodes) == _by_lane(two.episodes)
    for lane, episodes in _by_lane(two.episodes).items():
        seeds = [seed for seed, *_ in episodes]
        assert seeds == [reset_seed(4, "eval-CartPole-v1", "lanes-2", k, lane) for k in range(len(seeds))]


def test_the_options_travel_to_the_shards(ray_cluster):
    options = EvaluationOptions(env_kwargs={"max_episode_steps": 20}, max_steps=1_000)
    result = _on_ray("pretrained:cartpole", 2, episodes=4, num_envs=2, seed=0, options=options)
    assert result.lengths == [20] * 4 and all(e.truncated for e in result.episodes)


def test_over_ray_client_the_shards_send_their_episodes_at_the_end(ray_cluster, monkeypatch):
    # Ray Client (ray://) cannot stream a generator: each shard's task returns its items at once.
    from rlmesh_gym.evaluation import ray_shards

    monkeypatch.setattr(ray_shards, "is_client", lambda ray: True)
    reference = evaluate(
        "CartPole-v1", push_towards_the_lean, episodes=10, num_envs=4, seed=9, progress=False
    )
    result = _on_ray(push_towards_the_lean, 2, episodes=10, num_envs=4, seed=9)
    assert result.complete and _by_lane(result.episodes) == _by_lane(reference.episodes)


def test_a_policy_that_does_not_fit_the_env_is_a_policy_mismatch(ray_cluster):
    with pytest.raises(PolicyMismatchError, match="MountainCar-v0"):
        evaluate_on_ray(
            "MountainCar-v0", "pretrained:cartpole", cluster="auto", episodes=2, num_envs=2, progress=False
        )


def test_a_bad_env_id_raises_what_it_raises_in_process(ray_cluster):
    with pytest.raises(ValueError, match="unknown env id 'NoSuchEnv-v0'"):
        evaluate_on_ray("NoSuchEnv-v0", "random", cluster="auto", episodes=2, num_envs=2, progress=False)


def test_a_gpu_device_asks_each_shard_for_a_gpu_which_a_cpu_cluster_refuses(ray_cluster):
    import ray

    from rlmesh_gym.evaluation.ray_shards import _RayRun

    run = _RayRun.from_arguments(
        "CartPole-v1",
        "random",
        RayCluster("local"),
        {"episodes": 2, "num_envs": 2, "device": "cuda", "options": None},
    )
    assert run.gpus == 1.0
    with pytest.raises(ValueError, match=r"1 GPU\(s\) .*from device='cuda'.*has 0"):
        run._check_resources(ray)


def test_every_socket_of_the_clusters_processes_is_on_loopback(ray_cluster):
    # After the runs above: the workers exist by now.
    processes = {p for p in psutil.Process().children(recursive=True)}
    for process in psutil.process_iter(["cmdline"]):
        if any(ray_cluster.session_dir in part for part in process.info["cmdline"] or ()):
            processes.add(process)
    names, sockets, outside = set(), 0, []
    for process in processes:
        try:
            names.add(process.name())
            connections = process.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        for connection in connections:
            sockets += 1
            for address in filter(None, (connection.laddr, connection.raddr)):
                ip = ipaddress.ip_address(address.ip.split("%")[0])
                ip = getattr(ip, "ipv4_mapped", None) or ip
                if not ip.is_loopback:
                    outside.append((process.name(), connection))
    assert {"gcs_server", "raylet"} <= names and sockets > 10
    assert outside == []


def _gcs_pid(worker_id: str) -> int:
    """The pid of a live Ray worker, from the worker table of Ray's own GCS."""
    from ray._private.state import state
    from ray.core.generated import gcs_pb2

    for raw in state._connect_and_get_accessor().get_worker_table():
        worker = gcs_pb2.WorkerTableData.FromString(raw)
        if worker.is_alive and worker.worker_address.worker_id.hex() == worker_id:
            return worker.pid
    raise AssertionError(f"Ray's GCS knows no live worker {worker_id}")


def test_a_worker_killed_mid_run_is_retried_and_the_result_is_the_clean_runs(ray_cluster, tmp_path):
    clean = evaluate("CartPole-v1", push_towards_the_lean, episodes=12, num_envs=4, seed=11, progress=False)
    report = tmp_path / "workers"
    policy = Reporting(str(report), after=30, delay=0.01)
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = _on_ray(policy, 2, episodes=12, num_envs=4, seed=11)
        except BaseException as error:  # handed to the test
            outcome["error"] = error

    evaluation = threading.Thread(target=run, daemon=True)
    evaluation.start()
    pid, worker_id, shard = _lines(report, 1)[0].split("|")
    assert _gcs_pid(worker_id) == int(pid)  # the shard's worker, as Ray's GCS records it
    os.kill(int(pid), signal.SIGKILL)
    evaluation.join(WAIT)
    assert not evaluation.is_alive() and "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert isinstance(result, EvalResult) and result.complete
    assert _by_lane(result.episodes) == _by_lane(clean.episodes)
    lines = [line.split("|") for line in report.read_text().splitlines()]
    runs = [pid for pid, _, first in lines if first == shard]  # from the same seeds: the same shard
    assert len(lines) == 3 and len(runs) == 2 and runs[0] != runs[1]  # run again, by another worker


def test_a_policy_that_raises_is_not_retried_and_its_episodes_are_kept(ray_cluster, tmp_path):
    runs = tmp_path / "runs"
    with pytest.raises(EvaluationError, match=r"shard [01] \(lanes .*the policy broke on step 90") as caught:
        _on_ray(Raising(str(runs), after=90), 2, episodes=40, num_envs=4, seed=6)
    assert not isinstance(caught.value, PolicyMismatchError)
    partial = caught.value.partial
    assert not partial.complete and 0 < len(partial.episodes) < 40
    reference = evaluate(
        "CartPole-v1", push_towards_the_lean, episodes=40, num_envs=4, seed=6, progress=False
    )
    expected = _by_lane(reference.episodes)
    for lane, episodes in _by_lane(partial.episodes).items():  # each lane's first ones
        assert episodes == expected[lane][: len(episodes)]
    assert len(runs.read_text().splitlines()) == 2  # one run per shard: none was retried


def _cli(*arguments: str, cwd: Path, cluster: _Cluster) -> subprocess.Popen[str]:
    environment = {**os.environ, "RAY_ADDRESS": cluster.gcs_address}
    command = [sys.executable, "-m", "rlmesh_gym", "eval", "CartPole-v1", *arguments, "--ray", "auto"]
    return subprocess.Popen(
        command, cwd=cwd, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_the_command_line_with_json_and_record_gives_the_in_process_episodes(ray_cluster, tmp_path):
    arguments = (
        "--policy",
        "_ray_policies:angle_policy",
        "--episodes",
        "10",
        "--num-envs",
        "4",
        "--seed",
        "5",
    )
    command = _cli(
        *arguments, "--shards", "2", "--json", "--record", "run.rec", cwd=tmp_path, cluster=ray_cluster
    )
    stdout, stderr = command.communicate(timeout=WAIT)
    assert command.returncode == 0, stderr
    data = json.loads(stdout)
    reference = evaluate(
        "CartPole-v1", push_towards_the_lean, episodes=10, num_envs=4, seed=5, progress=False
    )
    keys = ("seed", "episode_return", "length", "terminated", "truncated")
    lanes: dict[int, list[tuple]] = {}
    for episode in data["episodes"]:
        lanes.setdefault(episode["lane"], []).append(tuple(episode[k] for k in keys))
        assert episode["shard"] == episode["lane"] // 2
    assert data["complete"] and lanes == _by_lane(reference.episodes)

    recording = load_recording(tmp_path / "run.rec")  # one file: the shards' parts merged
    assert not list(tmp_path.glob("run.rec.part-*"))
    assert recording.header.num_envs == 4 and not recording.partial
    counted = [episode.record for episode in recording.episodes if episode.counted]
    assert _by_lane(counted) == _by_lane(reference.episodes)
    assert {(episode.record.lane // 2, episode.record.shard) for episode in recording.episodes} == {
        (0, 0),
        (1, 1),
    }
    assert all(episode.complete and len(episode.steps) == episode.length for episode in recording.episodes)


def test_ctrl_c_stops_every_shard_and_prints_the_partial_result(ray_cluster, tmp_path):
    arguments = ("--policy", "_ray_policies:slow_reporting_policy", "--episodes", "40", "--num-envs", "4")
    command = _cli(*arguments, "--seed", "2", "--shards", "2", "--json", cwd=tmp_path, cluster=ray_cluster)
    try:
        _lines(ray_cluster.reports / "steps", 2)  # both shards are 40 steps in: episodes have ended
        time.sleep(0.3)
        command.send_signal(signal.SIGINT)
        stdout, stderr = command.communicate(timeout=WAIT)
    finally:
        if command.poll() is None:
            command.kill()
            command.wait(WAIT)
    assert command.returncode == 130, stderr
    assert stderr.rstrip().endswith("rlmesh-gym: error: interrupted")
    data = json.loads(stdout)
    assert not data["complete"] and 0 < len(data["episodes"]) < 40
    reference = evaluate(
        "CartPole-v1", push_towards_the_lean, episodes=40, num_envs=4, seed=2, progress=False
    )
    expected = _by_lane(reference.episodes)
    keys = ("seed", "episode_return", "length", "terminated", "truncated")
    for lane in range(4):
        got = [tuple(e[k] for k in keys) for e in data["episodes"] if e["lane"] == lane]
        assert got == expected[lane][: len(got)]

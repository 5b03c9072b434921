"""What ``evaluate_on_ray`` and ``rlmesh-gym eval --ray`` refuse before any cluster is touched,
each with an error naming what was wrong; none of these needs ray installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlmesh_gym.cli import main
from rlmesh_gym.evaluation import EvaluationOptions, RayCluster, evaluate_on_ray
from rlmesh_gym.policies.resolve import policy_file
from rlmesh_gym.runtime import RuntimeHooks


def test_the_env_must_be_an_env_id():
    import gymnasium

    with pytest.raises(TypeError, match=r"takes an env id \(a str .*got gymnasium.*evaluate\(\)"):
        evaluate_on_ray(gymnasium.make("CartPole-v1"), "random")


@pytest.mark.parametrize(
    "cluster, error, match",
    [
        ({"shards": 0}, ValueError, r"RayCluster.shards must be an int >= 1, got 0"),
        ({"shards": 2.0}, ValueError, r"RayCluster.shards must be an int >= 1"),
        ({"address": "http://head:8265"}, ValueError, r"unknown Ray address scheme 'http://'"),
        ({"address": "head"}, ValueError, r"'head' is not a HOST:PORT address; expected 'local', 'auto'"),
        ({"address": ""}, TypeError, r"RayCluster.address must be a non-empty str"),
        ({"stop_grace": 0}, ValueError, r"RayCluster.stop_grace must be a number > 0"),
        ({"imports": "walk1d"}, TypeError, r"RayCluster.imports must be a sequence of module names"),
        ({"address": "auto", "num_cpus": 2}, ValueError, r"num_cpus sizes a cluster started here"),
    ],
)
def test_a_bad_cluster_is_refused_by_name(cluster, error, match):
    with pytest.raises(error, match=match):
        RayCluster(**cluster)


def test_the_addresses_a_cluster_takes():
    for address in ("local", "auto", "ray://head:10001", "ray://head", "10.0.0.1:6379", "[::1]:6379"):
        assert RayCluster(address).address == address


def test_more_shards_than_lanes_is_refused():
    with pytest.raises(
        ValueError, match=r"shards=4 is more than num_envs=3: every shard runs at least one lane"
    ):
        evaluate_on_ray("CartPole-v1", "random", cluster=RayCluster(shards=4), num_envs=3)


def test_an_address_alone_never_asks_for_more_shards_than_lanes():
    from rlmesh_gym.evaluation.ray_shards import _RayRun

    arguments = {"episodes": 2, "options": None}
    assert (
        _RayRun.from_arguments("CartPole-v1", "random", "auto", {**arguments, "num_envs": 1}).cluster.shards
        == 1
    )
    assert (
        _RayRun.from_arguments("CartPole-v1", "random", "auto", {**arguments, "num_envs": 8}).cluster.shards
        == 2
    )


def test_a_cluster_that_is_neither_an_address_nor_a_ray_cluster_is_refused():
    with pytest.raises(TypeError, match="cluster must be a Ray address"):
        evaluate_on_ray("CartPole-v1", "random", cluster=4)


def test_options_that_cannot_reach_the_workers_are_refused_by_name():
    with pytest.raises(ValueError, match="EvaluationOptions hooks cannot be given for a Ray evaluation"):
        evaluate_on_ray("CartPole-v1", "random", options=EvaluationOptions(hooks=[RuntimeHooks()]))


def test_frames_cannot_be_recorded(tmp_path):
    from rlmesh_gym.recording import RecordingOptions

    record = RecordingOptions(tmp_path / "run.rec", frame_lanes=[0])
    with pytest.raises(ValueError, match="a Ray evaluation cannot record frames"):
        evaluate_on_ray("CartPole-v1", "random", num_envs=2, record=record)


def test_the_gpus_of_a_shard_follow_the_device_unless_given():
    assert RayCluster().gpus_for("cpu") == 0 and RayCluster().gpus_for("cuda:1") == 1
    assert RayCluster(gpus_per_shard=0.5).gpus_for("cuda") == 0.5


def test_a_policy_file_travels_as_its_bytes_and_a_spec_as_it_is(tmp_path):
    from rlmesh_gym.evaluation._ray_worker import PolicyFile
    from rlmesh_gym.evaluation.ray_shards import _payload

    saved = tmp_path / "policy.pt2"
    saved.write_bytes(b"weights")
    assert _payload(str(saved)) == PolicyFile("policy.pt2", b"weights", False)
    assert _payload(f"sb3:{saved}") == PolicyFile("policy.pt2", b"weights", True)
    assert _payload("pretrained:cartpole") == "pretrained:cartpole"
    assert _payload("package.module:attr") == "package.module:attr"
    assert policy_file("random") is None and policy_file(saved) == (str(saved), False)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--shards", "2"], "--shards needs --ray ADDRESS"),
        (["--ray", "local", "--env-address", "127.0.0.1:1"], "cannot be combined with --env-address"),
        (["--ray", "local", "--policy-address", "127.0.0.1:1"], "cannot be combined with --policy-address"),
        (["--ray", "local", "--shards", "0"], "--shards must be at least 1, got 0"),
        (["--ray", "local", "--target-ci", "1"], "--target-ci and --max-episodes apply to an in-process"),
        (["--ray", "gopher://x:1"], "unknown Ray address scheme 'gopher://'"),
    ],
)
def test_the_command_line_refuses_bad_ray_flags_with_exit_2(arguments, message, capsys):
    assert main(["eval", "CartPole-v1", "--policy", "random", *arguments]) == 2
    assert message in capsys.readouterr().err


def test_without_ray_the_error_names_the_extra():
    code = (
        "import sys\n"
        "sys.modules['ray'] = None  # as if ray were not installed\n"
        "from rlmesh_gym.evaluation import evaluate_on_ray\n"
        "try:\n"
        "    evaluate_on_ray('CartPole-v1', 'random', num_envs=2, progress=False)\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == (
        "evaluate_on_ray needs ray, which is not installed: pip install 'rlmesh-gym[ray]'"
    )


class _SlowNodeRay:
    """A stand-in for the ``ray`` module whose first ``init`` fails as Ray's does when the new
    node's raylet does not register in time."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[str] = []

    def is_initialized(self) -> bool:
        return False

    def init(self, **arguments: object) -> None:
        self.calls.append(f"init {arguments['address']} {arguments['_node_ip_address']}")
        if self.failures:
            self.failures -= 1
            raise Exception(
                "The current node timed out during startup. This could happen because some of the "
                "raylet failed to startup or the GCS has become overloaded."
            )

    def shutdown(self) -> None:
        self.calls.append("shutdown")


@pytest.mark.parametrize("failures", [1, 2])
def test_a_local_cluster_whose_node_did_not_start_is_started_once_more(monkeypatch, failures):
    import contextlib

    from rlmesh_gym.evaluation import _ray_cluster

    ray = _SlowNodeRay(failures)
    monkeypatch.setattr(_ray_cluster, "import_ray", lambda: ray)
    monkeypatch.setattr(_ray_cluster, "loopback_only", lambda _: contextlib.nullcontext())
    started = ["init local 127.0.0.1", "shutdown", "init local 127.0.0.1"]
    if failures == 1:
        with pytest.warns(RuntimeWarning, match=r"node did not start in time .*; starting a new one"):
            with _ray_cluster.connected(RayCluster("local")) as connection:
                assert connection is ray
        assert ray.calls == [*started, "shutdown"]
    else:
        with pytest.warns(RuntimeWarning), pytest.raises(Exception, match="timed out during startup"):
            with _ray_cluster.connected(RayCluster("local")):
                pytest.fail("a cluster whose node never started is not used")
        assert ray.calls == started

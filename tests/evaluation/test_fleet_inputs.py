"""Fleet evaluation: bad arguments are named before anything is connected."""

from __future__ import annotations

import pytest

from rlmesh_gym.cli import main
from rlmesh_gym.cli._fleet_eval import env_addresses
from rlmesh_gym.evaluation import EvaluationOptions, evaluate, evaluate_fleet, fleet_route_id
from rlmesh_gym.recording import RecordingOptions


@pytest.mark.parametrize(
    ("addresses", "arguments", "error", "message"),
    [
        ([], {}, ValueError, "at least one env server address"),
        (["127.0.0.1:1", "127.0.0.1:1"], {}, ValueError, "env server 127.0.0.1:1 is listed twice"),
        (["127.0.0.1:1", ""], {}, TypeError, "non-empty 'HOST:PORT' strings"),
        (["127.0.0.1:1"], {"on_server_failure": "retry"}, ValueError, "on_server_failure must be one of"),
        (
            ["127.0.0.1:1"],
            {"options": EvaluationOptions(vectorization="async", route_id="r")},
            ValueError,
            "EvaluationOptions vectorization, route_id cannot be given for a fleet",
        ),
        (
            ["127.0.0.1:1"],
            {"options": EvaluationOptions(env_kwargs={})},
            ValueError,
            "EvaluationOptions env_kwargs cannot be given for a fleet",
        ),
        (["127.0.0.1:1"], {"options": EvaluationOptions(max_episodes=20)}, ValueError, "max_episodes"),
        (["127.0.0.1:1"], {"episodes": 0}, ValueError, "episodes must be an int >= 1"),
        (["127.0.0.1:1"], {"options": "fast"}, TypeError, "options must be an rlmesh_gym.EvaluationOptions"),
    ],
)
def test_bad_fleet_arguments_are_named(addresses, arguments, error, message):
    with pytest.raises(error, match=message):
        evaluate_fleet(addresses, "random", progress=False, **arguments)


def test_a_list_of_addresses_is_not_an_env_for_evaluate():
    with pytest.raises(TypeError, match=r"evaluate\(\) takes one env; .*evaluate_fleet"):
        evaluate(["127.0.0.1:1"], "random", progress=False)


def test_a_fleet_needs_exactly_one_of_policy_and_policy_address():
    with pytest.raises(ValueError, match="either policy or policy_address"):
        evaluate_fleet(["127.0.0.1:1"], "random", policy_address="127.0.0.1:2")
    with pytest.raises(ValueError, match="needs a policy"):
        evaluate_fleet(["127.0.0.1:1"])


def test_frames_cannot_be_recorded_from_env_servers():
    from rlmesh_gym.recording.fleet import part_options

    options = RecordingOptions("x.rec", lanes=[0, 3], frame_lanes=[3])
    with pytest.raises(ValueError, match="cannot record frames"):
        part_options(options, 2, 2, "1-0")
    plain = RecordingOptions("x.rec", lanes=[0, 3])
    assert part_options(plain, 2, 2, "1-0").lanes == (1,)  # fleet lane 3 is this server's lane 1
    assert part_options(plain, 4, 2, "2-0") is None  # none of its lanes is recorded


def test_route_ids_name_the_server_its_lanes_and_the_round():
    assert fleet_route_id(0, 4) == "server-0-lanes-4"
    assert fleet_route_id(2, 1, 1) == "server-2-lanes-1-reassign-1"


def test_address_files_skip_comments_and_blank_lines(tmp_path):
    listing = tmp_path / "fleet.txt"
    listing.write_text("# lab machines\nhost1:50051\n\n  host2:50051  # spare\n")
    assert env_addresses([f"@{listing}", "host3:1"]) == ["host1:50051", "host2:50051", "host3:1"]
    with pytest.raises(ValueError, match="given twice"):
        env_addresses([f"@{listing}", "host1:50051"])
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(ValueError, match="holds no env address"):
        env_addresses([f"@{tmp_path / 'empty.txt'}"])
    with pytest.raises(ValueError, match="cannot read env addresses"):
        env_addresses([f"@{tmp_path / 'missing.txt'}"])


def test_the_cli_names_a_bad_address_file(tmp_path, capsys):
    code = main(["eval", "--env-address", f"@{tmp_path / 'missing.txt'}", "--env-address", "h:1"])
    assert code == 2
    assert "rlmesh-gym: error: cannot read env addresses from" in capsys.readouterr().err

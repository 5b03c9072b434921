"""A recording's header is checked against sane bounds and the file's own content before it is used."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import msgpack
import pytest
from _recording_envs import SPACES, make_env

from rlmesh_gym.cli import main
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.recording import EpisodeRecorder, RecordingFormatError, load_recording
from rlmesh_gym.recording._format import MAX_LANES


def header_only(path) -> bytes:
    """A valid 2-lane recording with nothing but its header (and its end record)."""
    env, _ = make_env(SPACES["box"], num_envs=2, autoreset="disabled")
    EpisodeRecorder(path, env.contract, base_seed=1).close()
    return path.read_bytes()


def rewritten(path, change) -> str:
    """Rewrite the header of the recording at ``path`` with ``change(header)``; return the path."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(path.read_bytes())
    records = list(unpacker)
    change(records[0])
    path.write_bytes(b"".join(msgpack.packb(record, use_bin_type=True) for record in records))
    return str(path)


def set_fields(**fields):
    def change(header):
        header.update(fields)

    return change


def set_option(name, value):
    def change(header):
        header["options"][name] = value

    return change


def with_contract(**fields):
    def change(header):
        contract = env_pb2.EnvContract.FromString(header["contract"])
        for name, value in fields.items():
            if isinstance(value, env_pb2.EnvContract):
                getattr(contract, name).CopyFrom(getattr(value, name))
            else:
                setattr(contract, name, value)
        header["contract"] = contract.SerializeToString()

    return change


HUGE_ACTIONS = env_pb2.EnvContract()
HUGE_ACTIONS.action_space.shape.extend([16000, 16000])
HUGE_ACTIONS.action_space.dtype = 10  # D_TYPE_FLOAT64
HUGE_ACTIONS.action_space.box.unbounded = True


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (set_fields(num_envs=10**8), r"num_envs must be an int in \[1, 65536\], got 100000000"),
        (set_fields(num_envs=float("inf")), r"num_envs must be an int in \[1, 65536\], got inf"),
        (set_fields(num_envs=float("nan")), r"num_envs must be an int in \[1, 65536\], got nan"),
        (set_fields(num_envs=2.0), r"num_envs must be an int in \[1, 65536\], got 2\.0"),
        (set_fields(num_envs=0), r"num_envs must be an int in \[1, 65536\], got 0"),
        (set_fields(created_ns=float("inf")), r"created_ns must be an int in \[0, 2\*\*63 - 1\].*got inf"),
        (set_fields(created_ns=-1), r"created_ns must be an int in \[0, 2\*\*63 - 1\].*got -1"),
        (set_fields(created_ns=2**64 - 1), r"created_ns must be an int .* got 18446744073709551615"),
        (set_fields(base_seed=float("-inf")), r"base_seed must be a 64-bit int or nil, got -inf"),
        (set_fields(env_id=7), r"env_id must be a string, got 7"),
        (
            set_option("lanes", [0, 5]),
            r"options\['lanes'\] must be nil or a list of lane indices in \[0, 2\)",
        ),
        (set_option("lanes", [1, 1]), r"options\['lanes'\] lists a lane twice"),
        (set_option("frame_lanes", [-1]), r"options\['frame_lanes'\] must be nil or a list of lane indices"),
        (with_contract(num_envs=3), r"num_envs 2 disagrees with its contract's num_envs 3"),
        (
            with_contract(action_space=HUGE_ACTIONS),
            r"contract\.action_space: one value declares 256,000,000 elements, more than the limit",
        ),
    ],
)
def test_header_fields_out_of_bounds_are_recording_format_errors(change, message, tmp_path):
    header_only(tmp_path / "run.rec")
    path = rewritten(tmp_path / "run.rec", change)
    with pytest.raises(RecordingFormatError, match="has a malformed recording header: .*" + message):
        load_recording(path)


def test_episodes_refuses_a_10_kb_file_declaring_10_8_lanes_under_an_address_space_cap(tmp_path):
    header_only(tmp_path / "run.rec")
    path = rewritten(tmp_path / "run.rec", set_fields(num_envs=10**8))
    assert os.path.getsize(path) < 10_000

    def cap_address_space() -> None:
        # Far more than the CLI needs, far less than the 3+ GB a tuple of 10**8 lane ints takes.
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    result = subprocess.run(
        [sys.executable, "-m", "rlmesh_gym", "episodes", path],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=cap_address_space,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"rlmesh-gym: error: {path!r} has a malformed recording header: ValueError: num_envs must be an "
        "int in [1, 65536], got 100000000"
    ]


def test_episodes_on_an_infinite_created_ns_is_one_error_line_not_a_traceback(tmp_path, capsys):
    header_only(tmp_path / "run.rec")
    path = rewritten(tmp_path / "run.rec", set_fields(created_ns=float("inf")))
    assert main(["episodes", path]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "OverflowError" not in err
    assert "created_ns must be an int in [0, 2**63 - 1] (ns since 1970), got inf" in err


def test_a_recording_of_the_most_lanes_shows_them_in_a_few_words(tmp_path):
    header_only(tmp_path / "run.rec")
    path = rewritten(
        tmp_path / "run.rec",
        lambda header: (set_fields(num_envs=MAX_LANES)(header), with_contract(num_envs=MAX_LANES)(header)),
    )
    recording = load_recording(path)
    html = recording._repr_html_()
    assert f"{MAX_LANES} (recorded: all {MAX_LANES})" in html and len(html) < 2000
    assert recording.header.describe_lanes() == f"all {MAX_LANES}"
    some = rewritten(tmp_path / "run.rec", set_option("lanes", list(range(0, 40, 2))))
    assert load_recording(some).header.describe_lanes() == (
        "0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, ... (20 lanes)"
    )


def test_the_recorder_refuses_more_lanes_than_a_recording_holds(tmp_path):
    env, _ = make_env(SPACES["box"], num_envs=1, autoreset="disabled")
    contract = env_pb2.EnvContract()
    contract.CopyFrom(env.contract)
    contract.num_envs = MAX_LANES + 1
    with pytest.raises(ValueError, match=r"contract\.num_envs must be in \[1, 65536\]"):
        EpisodeRecorder(tmp_path / "run.rec", contract)
    assert not (tmp_path / "run.rec").exists()

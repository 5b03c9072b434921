"""Files cut off mid-record, sessions that fail, files that are not recordings."""

from __future__ import annotations

import asyncio
import warnings

import msgpack
import numpy as np
import pytest
from _recording_envs import SPACES, make_env, run_session

from rlmesh_gym.recording import (
    EpisodeRecorder,
    RecordingFormatError,
    RecordingWarning,
    load_recording,
)
from rlmesh_gym.runtime import EnvRpcError, RuntimeHooks
from rlmesh_gym.runtime.events import RuntimeRouteContext, SessionStartedEvent


def _record(path, max_episodes=6):
    space = SPACES["box"]
    env, _ = make_env(space, num_envs=2, autoreset="disabled")
    with EpisodeRecorder(path, env.contract, base_seed=1) as recorder:
        run_session(env, [recorder], max_episodes=max_episodes, action_space=space)
    return path.read_bytes()


def _boundaries(data: bytes) -> list[tuple[int, dict]]:
    """(end offset, record) of every record in ``data``."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data)
    out = []
    for record in unpacker:
        out.append((unpacker.tell(), record))
    return out


def test_a_file_cut_mid_record_reads_every_complete_record_with_a_warning(tmp_path):
    data = _record(tmp_path / "full.rec")
    full = load_recording(tmp_path / "full.rec")
    bounds = _boundaries(data)
    header_end = bounds[0][0]
    cut_file = tmp_path / "cut.rec"
    checked = 0
    for index in range(1, len(bounds)):
        start, end = bounds[index - 1][0], bounds[index][0]
        for cut in sorted({start + 1, (start + end) // 2, end - 1}):
            cut_file.write_bytes(data[:cut])
            with pytest.warns(RecordingWarning, match=f"read {start} of {cut} bytes"):
                partial = load_recording(cut_file)
            assert partial.partial
            complete = [record for _, record in bounds[1:index]]
            expected_ids = [r["episode_id"] for r in complete if r["kind"] == "episode"]
            assert [e.episode_id for e in partial.episodes] == expected_ids
            for episode in partial.episodes:
                same = full.episode(episode.episode_id)
                assert episode.record == same.record
                assert (episode.observations == same.observations).all()
            checked += 1
    assert checked > 10 and header_end > 0


def test_a_file_cut_at_a_record_boundary_reads_without_warning(tmp_path):
    data = _record(tmp_path / "full.rec")
    end_of_third = _boundaries(data)[2][0]
    (tmp_path / "cut.rec").write_bytes(data[:end_of_third])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recording = load_recording(tmp_path / "cut.rec")
    assert not recording.partial


def test_a_file_cut_inside_its_header_is_not_a_recording(tmp_path):
    data = _record(tmp_path / "full.rec")
    header_end = _boundaries(data)[0][0]
    for cut in (1, header_end // 2, header_end - 1):
        (tmp_path / "cut.rec").write_bytes(data[:cut])
        with pytest.raises(RecordingFormatError, match="is not an rlmesh-gym recording"):
            load_recording(tmp_path / "cut.rec")


def test_damaged_bytes_after_the_header_stop_reading_with_a_warning(tmp_path):
    data = _record(tmp_path / "full.rec")
    bounds = _boundaries(data)
    cut = bounds[3][0]
    (tmp_path / "bad.rec").write_bytes(data[:cut] + b"\xc1" + data[cut:])  # 0xc1 is never valid msgpack
    with pytest.warns(RecordingWarning, match=f"damaged record at byte {cut}"):
        recording = load_recording(tmp_path / "bad.rec")
    assert recording.partial


def test_a_failing_session_keeps_every_completed_episode_and_the_running_ones(rec_path):
    space = SPACES["box"]
    env, lanes = make_env(space, num_envs=2, autoreset="disabled", fail_after_steps=11)
    recorder = EpisodeRecorder(rec_path, env.contract, base_seed=2)
    with pytest.raises(EnvRpcError, match="failed on purpose"):
        run_session(env, [recorder], max_episodes=100, action_space=space)
    # No close(): session_failed alone must have written and flushed everything.
    recording = load_recording(rec_path)
    assert recording.ends[-1]["status"] == "failed"
    assert "failed on purpose" in recording.ends[-1]["reason"]
    done = [e for lane in lanes for e in lane.episodes if e.terminated and e.terminated[-1]]
    assert len(recording.episodes) == len(done) >= 2
    assert recording.incomplete_episodes
    for lane_env in lanes:  # every step taken before the failure is in the file
        episodes = [
            e for e in (*recording.episodes, *recording.incomplete_episodes) if e.lane == lane_env.lane
        ]
        assert sum(len(e.steps) for e in episodes) == lane_env.total_steps
    for episode in recording.incomplete_episodes:
        truth = lanes[episode.lane].episodes[-1]
        assert len(episode.steps) == len(truth.actions)
    recorder.close()
    assert load_recording(rec_path).ends == recording.ends  # close after a failure writes nothing more


class _ReadBackAtEpisodeEnd(RuntimeHooks):
    """Reads the recording from disk at each episode end, as a crash right then would leave it."""

    def __init__(self, path):
        self.path = path
        self.seen: list[int] = []

    async def episode_completed(self, event) -> None:
        try:
            self.seen.append(len(load_recording(self.path).episodes))
        except Exception as exc:  # hooks' errors are only logged: keep it for the assertion
            self.seen.append(exc)


def test_each_episode_is_on_disk_when_it_ends(rec_path):
    space = SPACES["discrete"]
    env, _ = make_env(space, num_envs=2, autoreset="next_step")
    recorder = EpisodeRecorder(rec_path, env.contract)
    reader = _ReadBackAtEpisodeEnd(rec_path)
    report = run_session(env, [recorder, reader], max_episodes=5, action_space=space)
    assert reader.seen == list(range(1, report.total_episodes + 1))
    recorder.close()


def test_close_is_idempotent_and_marks_an_unfinished_session(rec_path):
    space = SPACES["discrete"]
    env, _ = make_env(space, num_envs=1, autoreset="disabled")
    recorder = EpisodeRecorder(rec_path, env.contract)
    recorder.close()
    recorder.close()
    recording = load_recording(rec_path)
    assert [end["status"] for end in recording.ends] == ["closed"]
    assert recording.episodes == []
    started = SessionStartedEvent("again", RuntimeRouteContext("r"), "env")
    with pytest.raises(ValueError, match="is closed; a closed recorder cannot record another session"):
        asyncio.run(recorder.session_started(started))


def test_not_a_recording(tmp_path):
    for name, content in (
        ("empty.rec", b""),
        ("json.rec", b'{"kind": "header"}'),
        ("text.rec", b"hello world"),
        ("other-map.rec", msgpack.packb({"kind": "header", "format": "something-else", "version": 1})),
        ("list.rec", msgpack.packb([1, 2, 3])),
    ):
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(RecordingFormatError, match="is not an rlmesh-gym recording"):
            load_recording(path)


def test_a_newer_format_version_is_refused(tmp_path):
    path = tmp_path / "future.rec"
    header = {"kind": "header", "format": "rlmesh-gym-recording", "version": 3, "writer": "rlmesh-gym 9.0"}
    path.write_bytes(msgpack.packb(header))
    with pytest.raises(RecordingFormatError, match="version 3, newer than the version 2.*rlmesh-gym 9.0"):
        load_recording(path)


def test_missing_file_and_bad_path_type(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_recording(tmp_path / "missing.rec")
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        load_recording(42)


def test_fields_and_kinds_of_a_newer_writer_are_skipped(tmp_path):
    data = _record(tmp_path / "full.rec")
    full = load_recording(tmp_path / "full.rec")
    newer = []
    for _, record in _boundaries(data):
        if record["kind"] == "episode":
            record["record"]["replay_hint"] = {"from": "a newer writer"}
            record["comment"] = "extra"
        newer.append(msgpack.packb(record, use_bin_type=True))
        if record["kind"] == "header":
            newer.append(msgpack.packb({"kind": "annotation", "text": "unknown kind"}))
    (tmp_path / "newer.rec").write_bytes(b"".join(newer))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recording = load_recording(tmp_path / "newer.rec")
    assert not recording.partial
    assert [e.record for e in recording.episodes] == [e.record for e in full.episodes]
    assert len(recording.episodes) >= 6


def _load_outcome(path):
    """("format error",) or ("loaded", partial, warned); any other exception propagates."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            recording = load_recording(path)
        except RecordingFormatError:
            return ("format error",)
    warned = [w for w in caught if issubclass(w.category, RecordingWarning)]
    assert len(warned) == len(caught), [str(w.message) for w in caught]
    # A loaded recording is usable however it was damaged.
    recording.summary()
    recording.to_pandas(include_incomplete=True)
    for episode in (*recording.episodes, *recording.incomplete_episodes):
        recording.steps_frame(episode)
    return ("loaded", recording.partial, bool(warned))


@pytest.mark.slow
@pytest.mark.notebook  # its loaded recordings are read back through to_pandas (pandas)
@pytest.mark.parametrize("kind", ["box", "nested"])
def test_flipped_bytes_give_a_format_error_or_a_partial_load_with_a_warning(kind, tmp_path):
    space = SPACES[kind]
    env, _ = make_env(space, num_envs=2, autoreset="disabled")
    with EpisodeRecorder(tmp_path / "full.rec", env.contract, base_seed=1) as recorder:
        run_session(env, [recorder], max_episodes=6, action_space=space)
    data = (tmp_path / "full.rec").read_bytes()
    damaged = tmp_path / "damaged.rec"
    outcomes: dict[tuple, int] = {}
    for offset in range(0, len(data), 13)[:400]:
        for mask in (0xFF, 0x01):
            flipped = bytearray(data)
            flipped[offset] ^= mask
            damaged.write_bytes(bytes(flipped))
            outcome = _load_outcome(damaged)
            # A warning always means a partial load, and a partial load always warns.
            assert outcome[0] == "format error" or outcome[1] == outcome[2], (offset, mask, outcome)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    # The sweep reaches the header (format errors) and the records after it (partial loads).
    assert outcomes.get(("format error",), 0) > 0
    assert outcomes.get(("loaded", True, True), 0) > 0


def _rewrite(data: bytes, change) -> bytes:
    """``data`` with ``change(record)`` applied to every record (records re-packed)."""
    out = []
    for _, record in _boundaries(data):
        change(record)
        out.append(msgpack.packb(record, use_bin_type=True))
    return b"".join(out)


def test_a_header_whose_contract_is_not_protobuf_is_malformed(tmp_path):
    data = _record(tmp_path / "full.rec")

    def bad_contract(record):
        if record["kind"] == "header":
            record["contract"] = b"\xff\xff\xff"

    (tmp_path / "bad.rec").write_bytes(_rewrite(data, bad_contract))
    with pytest.raises(RecordingFormatError, match="malformed recording header: DecodeError"):
        load_recording(tmp_path / "bad.rec")


def _with_frames(record, shape):
    """Give a ``steps`` record one frame of ``shape`` per step, packed as the recorder packs arrays."""
    _, (rows,), _ = msgpack.unpackb(record["steps"].data)
    frames = ["|u1", [rows, *shape], bytes(rows * int(np.prod(shape)))]
    record.update(
        frames=msgpack.ExtType(1, msgpack.packb(frames, use_bin_type=True)), frame_steps=record["steps"]
    )


FRAMES_MESSAGE = (
    r"frames must be a uint8 \(F, H, W, C\) array with H, W >= 1 and C of 1, 3 or 4 channels "
    r"\(grey, RGB, RGBA\), got a uint8 array of shape \(\d+, "
)


@pytest.mark.parametrize(
    ("kind", "damage", "message"),
    [
        ("steps", lambda r: r.pop("actions"), "it has no actions field"),
        ("steps", lambda r: _with_frames(r, (8, 8, 2)), FRAMES_MESSAGE + r"8, 8, 2\)"),
        ("steps", lambda r: _with_frames(r, (0, 8, 3)), FRAMES_MESSAGE + r"0, 8, 3\)"),
        ("episode", lambda r: r.update(counted=1.0), "counted must be a bool or nil, got 1.0"),
        ("episode", lambda r: r.update(counted=0), "counted must be a bool or nil, got 0"),
        ("steps", lambda r: r.update(rewards=[1.0]), "rewards must be a 1-d numpy array"),
        ("episode", lambda r: r.update(record=[1, 2]), "record must be a map of EpisodeRecord fields"),
        ("episode", lambda r: r["record"].pop("length"), "its summary has no 'length'"),
        ("episode", lambda r: r["record"].update(length="7"), "summary field 'length' is '7', expected int"),
        ("end", lambda r: r.pop("total_episodes"), "total_steps and total_episodes must both be ints"),
    ],
)
def test_a_malformed_record_stops_reading_like_a_cut_off_file(kind, damage, message, tmp_path):
    data = _record(tmp_path / "full.rec")
    full = load_recording(tmp_path / "full.rec")
    records = [record for _, record in _boundaries(data)]
    target = next(i for i, record in enumerate(records) if record["kind"] == kind and i > 2)
    damage(records[target])
    (tmp_path / "bad.rec").write_bytes(b"".join(msgpack.packb(r, use_bin_type=True) for r in records))
    with pytest.warns(
        RecordingWarning, match=f"record {target} \\(kind '{kind}'\\) is malformed: ({message})"
    ):
        recording = load_recording(tmp_path / "bad.rec")
    assert recording.partial
    expected = [r["episode_id"] for r in records[1:target] if r["kind"] == "episode"]
    assert [e.episode_id for e in recording.episodes] == expected
    for episode in recording.episodes:
        assert episode.record == full.episode(episode.episode_id).record


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_frames_the_player_can_show_read_whole(channels, tmp_path):
    data = _record(tmp_path / "full.rec")

    def framed(record):
        if record["kind"] == "steps":
            _with_frames(record, (8, 8, channels))

    (tmp_path / "framed.rec").write_bytes(_rewrite(data, framed))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecordingWarning)
        recording = load_recording(tmp_path / "framed.rec")
    assert not recording.partial
    assert all(e.frames.shape[1:] == (8, 8, channels) for e in recording.episodes)

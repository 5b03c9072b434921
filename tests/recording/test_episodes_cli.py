"""``rlmesh-gym episodes FILE``: the printed summary and the error paths."""

from __future__ import annotations

from _recording_envs import SPACES, make_env, run_session

from rlmesh_gym.cli import main
from rlmesh_gym.recording import EpisodeRecorder, RecordingOptions, load_recording


def _record(path):
    space = SPACES["discrete"]
    env, _ = make_env(space, num_envs=2, autoreset="disabled")
    options = RecordingOptions(path, lanes=[0, 1], step_stride=2)
    with EpisodeRecorder(options, env.contract, env_id="Scripted-v0", base_seed=5) as recorder:
        run_session(env, [recorder], max_episodes=4, base_seed=5, action_space=space)
    return load_recording(path)


def test_episodes_prints_header_table_and_aggregate(rec_path, capsys):
    recording = _record(rec_path)
    assert main(["episodes", str(rec_path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert f"recording   {rec_path}" in lines
    assert "env         Scripted-v0" in lines
    assert "lanes       2 (recorded: 0, 1)" in lines
    assert "autoreset   disabled" in lines
    assert "base seed   5" in lines
    assert "env kwargs  none" in lines
    assert "options     step_stride=2 observations=True frame_lanes=[] frame_stride=1" in lines
    assert "session     rec-test route route-0" in lines
    assert any(line.startswith("ended       completed requested episodes") for line in lines)
    table = lines.index(next(line for line in lines if line.lstrip().startswith("#  lane")))
    rows = lines[table + 1 : table + 1 + len(recording.episodes)]
    for row, episode in zip(rows, recording.episodes, strict=True):
        cells = row.split()
        assert cells[1:6] == [
            str(episode.lane),
            episode.episode_id,
            str(episode.seed),
            f"{episode.episode_return:g}",
            str(episode.length),
        ]
        assert cells[6:] == [
            "yes",
            "no",
            "-",
            str(len(episode.steps)),
            "0",
        ]  # counted: unknown outside evaluate
    stats = recording.summary()
    # Written outside an evaluation: nothing says what was counted, so the complete episodes come first.
    complete = next(line for line in lines if line.startswith("complete    "))
    assert complete.startswith(f"complete    {len(recording.episodes)} episode(s), ")
    assert f"mean return {stats['return_mean']:.2f}  std {stats['return_std']:.2f}" in complete
    assert f"mean length {stats['length_mean']:.1f}" in complete
    incomplete = [line for line in lines if line.startswith("incomplete  ")]
    assert len(incomplete) == (1 if recording.incomplete_episodes else 0)


def test_limit_shortens_the_table_not_the_aggregate(rec_path, capsys):
    recording = _record(rec_path)
    assert main(["episodes", str(rec_path), "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert recording.episodes[0].episode_id in out
    assert recording.episodes[1].episode_id not in out
    assert f"... {len(recording.episodes) - 1} more episode(s)" in out
    assert f"complete    {len(recording.episodes)} episode(s)" in out


def test_a_cut_file_is_summarised_with_a_warning(rec_path, tmp_path, capsys):
    _record(rec_path)
    data = rec_path.read_bytes()
    cut = tmp_path / "cut.rec"
    cut.write_bytes(data[:-3])
    assert main(["episodes", str(cut)]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith(f"rlmesh-gym: warning: recording '{cut}' was read only in part")
    assert "(partial: cut off or damaged)" in captured.out


def test_errors_are_one_line_with_exit_code_2(tmp_path, capsys):
    assert main(["episodes", str(tmp_path / "missing.rec")]) == 2
    assert (
        capsys.readouterr().err == f"rlmesh-gym: error: no such recording file: {tmp_path / 'missing.rec'}\n"
    )
    bogus = tmp_path / "bogus.rec"
    bogus.write_text("not msgpack at all")
    assert main(["episodes", str(bogus)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlmesh-gym: error: ") and "is not an rlmesh-gym recording" in err
    assert "Traceback" not in err
    assert main(["episodes", str(bogus), "--limit", "-1"]) == 2
    assert "--limit must be at least 0, got -1" in capsys.readouterr().err


def test_the_command_line_and_the_notebook_show_the_same_episode_table(rec_path, capsys):
    recording = _record(rec_path)
    assert main(["episodes", str(rec_path), "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = recording.episode_table(2)
    assert len(table) == 3 and table[0][:2] == ("#", "lane")
    start = lines.index(next(line for line in lines if line.lstrip().startswith("#  lane")))
    assert [line.split() for line in lines[start : start + 3]] == [
        " ".join(row).split() for row in table
    ]  # "episode id" is one heading, two words
    html = recording._repr_html_()
    assert "".join(f"<th>{name}</th>" for name in table[0]) in html
    for row in recording.episode_table()[1:]:
        assert "".join(f"<td>{cell}</td>" for cell in row) in html


def test_episodes_prints_the_env_kwargs_replay_uses(rec_path, capsys):
    space = SPACES["discrete"]
    env, _ = make_env(space, num_envs=1, autoreset="disabled")
    kwargs = {"max_episode_steps": 8, "tag": "x"}
    with EpisodeRecorder(rec_path, env.contract, env_id="Scripted-v0", env_kwargs=kwargs) as recorder:
        run_session(env, [recorder], max_episodes=1, base_seed=1, action_space=space)
    assert main(["episodes", str(rec_path)]) == 0
    assert "env kwargs  max_episode_steps=8, tag='x'" in capsys.readouterr().out.splitlines()


def test_episodes_names_a_directory_as_a_directory(tmp_path, capsys):
    assert main(["episodes", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"rlmesh-gym: error: {tmp_path} is a directory, not a recording file"
    )
    assert main(["episodes", str(tmp_path / "missing.rec")]) == 2
    assert "no such recording file" in capsys.readouterr().err

"""``rlmesh-gym compare`` and the interval estimates in ``rlmesh-gym eval``: outputs and exit codes."""

from __future__ import annotations

import json

import pytest

from rlmesh_gym.cli import build_parser, main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_compare_is_registered():
    assert "compare" in build_parser().format_help()


@pytest.mark.torch
def test_compare_prints_the_policies_and_the_pair(capsys):
    code, out, err = run_cli(
        capsys,
        "compare",
        "CartPole-v1",
        "--policy",
        "shipped=pretrained:cartpole",
        "--policy",
        "random",
        "--episodes",
        "4",
        "--num-envs",
        "2",
        "--no-progress",
    )
    assert code == 0, err
    lines = out.splitlines()
    assert (
        lines[0]
        == "CartPole-v1 | 2 policies on the same 4 seeded episodes | 2 lane(s) | seed 0 | autoreset disabled"
    )
    assert lines[2].split()[:2] == ["shipped", "500.00"]
    assert lines[5].split()[:3] == ["shipped", "-", "random"] and lines[5].split()[-1] == "1.000"


def test_compare_json_pairs_identical_policies_exactly(capsys):
    code, out, err = run_cli(
        capsys,
        "compare",
        "CartPole-v1",
        "--policy",
        "random",
        "--policy",
        "again=random",
        "--episodes",
        "6",
        "--num-envs",
        "3",
        "--seed",
        "9",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert (
        data["seed"] == 9
        and data["episodes_per_policy"] == 6
        and list(data["results"]) == ["random", "again"]
    )
    (pair,) = data["pairs"]
    assert (pair["a"], pair["b"], pair["probability_of_improvement"]) == ("random", "again", 0.5)
    assert (pair["mean_difference"]["low"], pair["mean_difference"]["high"]) == (0.0, 0.0)
    assert [row["returns"]["random"] for row in data["episodes"]] == [
        row["returns"]["again"] for row in data["episodes"]
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--policy", "random", "--policy", "no-such-policy"], "policy 'no-such-policy' is not 'random'"),
        (["--policy", "random"], "at least two --policy options, got 1"),
        (["--policy", "random", "--policy", "random"], "'random' given twice"),
        (["--policy", "random", "--policy", "=random"], "expected POLICY or NAME=POLICY"),
        (["--policy", "random", "--policy", "x=random", "--episodes", "1"], "--episodes must be at least 2"),
        (["--policy", "random", "--policy", "pretrained:cartpole", "--render"], None),
    ],
)
def test_compare_bad_input_exits_2_with_one_line(capsys, argv, message):
    if message is None:  # an unknown flag: argparse's own usage error
        with pytest.raises(SystemExit) as exit_info:
            main(["compare", "CartPole-v1", *argv])
        assert exit_info.value.code == 2
        return
    code, out, err = run_cli(capsys, "compare", "CartPole-v1", *argv, "--no-progress")
    assert code == 2 and out == ""
    assert err.startswith("rlmesh-gym: error: ") and message in err and "Traceback" not in err


@pytest.mark.torch
def test_compare_policy_that_does_not_fit_exits_2(capsys):
    code, _, err = run_cli(
        capsys,
        "compare",
        "MountainCar-v0",
        "--policy",
        "random",
        "--policy",
        "pretrained:cartpole",
        "--episodes",
        "2",
    )
    assert code == 2
    assert "policy 'pretrained:cartpole' failed on the first observations of MountainCar-v0" in err


def test_eval_shows_intervals_and_target_ci(capsys):
    code, out, err = run_cli(
        capsys,
        "eval",
        "CartPole-v1",
        "--policy",
        "random",
        "--episodes",
        "4",
        "--num-envs",
        "2",
        "--autoreset",
        "disabled",
        "--target-ci",
        "100",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert (
        data["summary"]["mean_return_ci_low"]
        <= data["summary"]["mean_return"]
        <= data["summary"]["mean_return_ci_high"]
    )
    assert data["bootstrap"]["resamples"] == 9999 and data["bootstrap"]["seed"] == 0
    assert (data["target_ci"], data["target_met"], data["summary"]["episodes"]) == (100.0, True, 4)

    code, out, _ = run_cli(
        capsys, "eval", "CartPole-v1", "--policy", "random", "--episodes", "3", "--no-progress"
    )
    assert code == 0
    assert "95% CI [" in out and "IQM return" in out and "9,999 resamples (percentile), seed 0" in out

    code, _, err = run_cli(capsys, "eval", "CartPole-v1", "--policy", "random", "--target-ci", "-1")
    assert code == 2 and "target_ci must be a positive number" in err


def test_eval_cut_short_in_the_target_ci_pilot_still_prints_the_pilot_episodes(capsys):
    code, out, err = run_cli(
        capsys,
        *("eval", "CartPole-v1", "--policy", "random", "--episodes", "4", "--num-envs", "2"),
        *("--target-ci", "1", "--max-steps", "30", "--json", "--no-progress"),
    )
    assert code == 1
    assert err.startswith("rlmesh-gym: error: evaluation of CartPole-v1 reached max_steps=30")
    data = json.loads(out)
    assert data["complete"] is False and data["episodes"] == []
    assert data["summary"]["pilot_episodes"] == len(data["pilot_episodes"]) > 0


def test_compare_builds_the_env_with_env_kwargs_and_import(capsys, tmp_path, monkeypatch):
    (tmp_path / "compare_envs.py").write_text(
        "import gymnasium\n"
        "gymnasium.register('ShortCartCompare-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv', "
        "max_episode_steps=500)\n"
    )
    monkeypatch.chdir(tmp_path)  # `--import MODULE` finds modules in the working directory
    code, out, err = run_cli(
        capsys,
        *(
            "compare",
            "ShortCartCompare-v0",
            "--import",
            "compare_envs",
            "--env-kwargs",
            "max_episode_steps=5",
        ),
        *("--policy", "random", "--policy", "again=random", "--episodes", "4", "--num-envs", "2", "--json"),
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["env_id"] == "ShortCartCompare-v0"
    for result in data["results"].values():  # CartPole cannot fall within 5 steps: all are cut there
        assert (result["summary"]["min_return"], result["summary"]["max_return"]) == (5.0, 5.0)


def test_compare_records_each_policy_with_the_env_kwargs(capsys, tmp_path):
    from rlmesh_gym.recording import load_recording

    code, out, err = run_cli(
        capsys,
        *("compare", "CartPole-v1", "--policy", "random", "--policy", "again=random", "--episodes", "2"),
        *("--env-kwargs", "max_episode_steps=7", "--record", str(tmp_path / "runs"), "--no-progress"),
    )
    assert code == 0, err
    recordings = sorted((tmp_path / "runs").iterdir())
    assert len(recordings) == 2
    for path in recordings:
        recording = load_recording(path)
        assert recording.header.env_kwargs == {"max_episode_steps": 7}
        assert max(episode.length for episode in recording.episodes) <= 7


def test_compare_env_kwargs_errors_name_the_flag(capsys):
    code, _, err = run_cli(
        capsys, "compare", "CartPole-v1", "--policy", "random", "--policy", "b=random", "--env-kwargs", "[1]"
    )
    assert code == 2 and "--env-kwargs '[1]' is a JSON array, not a JSON object" in err


def _nan_reward_cartpole(**kwargs):
    import gymnasium

    return gymnasium.wrappers.TransformReward(gymnasium.make("CartPole-v1", **kwargs), lambda _: float("nan"))


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_compare_prints_every_result_when_the_returns_are_not_finite(capsys, json_output):
    import gymnasium

    env_id = "rlmesh-test/CliNaNRewardCartPole-v0"
    if env_id not in gymnasium.registry:
        gymnasium.register(env_id, entry_point=_nan_reward_cartpole)
    argv = [
        "compare",
        env_id,
        "--policy",
        "a=random",
        "--policy",
        "b=random",
        "--episodes",
        "4",
        "--no-progress",
    ]
    code, out, err = run_cli(capsys, *argv, *(["--json"] if json_output else []))
    assert code == 0, err
    if json_output:
        data = json.loads(out)
        assert set(data["results"]) == {"a", "b"}
        assert (
            data["pairs"][0]["no_interval_reason"]
            == "needs finite returns (4 of the returns of 'a' are NaN or infinite)"
        )
    else:
        assert "no interval: needs finite returns (4 of the returns of 'a' are NaN or infinite)" in out

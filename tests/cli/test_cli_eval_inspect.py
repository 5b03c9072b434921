"""``rlmesh-gym eval`` and ``rlmesh-gym inspect``: outputs and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from rlmesh_gym.cli import build_parser, main
from rlmesh_gym.policies.pretrained import load_pretrained

pytestmark = pytest.mark.torch  # (tests/conftest.py)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_both_commands_are_registered():
    help_text = build_parser().format_help()
    assert "eval" in help_text and "inspect" in help_text


def test_eval_defaults_are_cartpole_with_the_shipped_policy_100_episodes_on_8_lanes(capsys):
    defaults = build_parser().parse_args(["eval"])
    assert (defaults.env_id, defaults.policy, defaults.episodes) == ("CartPole-v1", None, 100)
    # Every other default, run: 16 episodes show the lanes, seed, mode and policy as well as 100 do
    # (the whole default run is `make demo`'s, and the README's and docs/evaluation.md's example).
    code, out, err = run_cli(capsys, "eval", "--episodes", "16", "--json", "--no-progress")
    assert code == 0, err
    data = json.loads(out)
    assert data["env_id"] == "CartPole-v1" and data["policy"] == "pretrained:cartpole"
    assert (data["num_envs"], data["seed"], data["autoreset"]) == (8, 0, "same_step")  # eval's default
    assert data["summary"]["episodes"] == 16 and len(data["episodes"]) == 16
    assert data["summary"]["mean_return"] >= 475


def test_eval_prints_a_summary_table(capsys):
    code, out, _ = run_cli(
        capsys, "eval", "CartPole-v1", "--episodes", "4", "--num-envs", "2", "--no-progress"
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("CartPole-v1 | policy pretrained:cartpole | 4 episodes on 2 lane(s) | seed 0")
    assert any(line.strip().startswith("mean return") for line in lines)
    assert any(line.strip().startswith("env-steps/s") for line in lines)


def test_eval_json_is_reproducible_and_follows_the_flags(capsys):
    argv = (
        "eval",
        "CartPole-v1",
        "--policy",
        "random",
        "--episodes",
        "6",
        "--num-envs",
        "3",
        "--seed",
        "9",
        "--autoreset",
        "disabled",
        "--json",
    )
    outputs = []
    for _ in range(2):
        code, out, _ = run_cli(capsys, *argv)
        assert code == 0
        outputs.append(json.loads(out))
    first, second = outputs
    assert (first["num_envs"], first["seed"], first["autoreset"], first["policy"]) == (
        3,
        9,
        "disabled",
        "random",
    )
    keys = ("lane", "seed", "episode_return", "length", "terminated", "truncated")
    assert [[e[k] for k in keys] for e in first["episodes"]] == [
        [e[k] for k in keys] for e in second["episodes"]
    ]


def test_eval_loads_saved_policy_files(capsys, tmp_path):
    scripted = tmp_path / "cartpole.ts"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script is deprecated in torch 2.13
        torch.jit.save(torch.jit.script(load_pretrained("cartpole").net), scripted)
    code, out, err = run_cli(
        capsys, "eval", "--policy", str(scripted), "--episodes", "2", "--num-envs", "2", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["summary"]["mean_return"] >= 475
    pickled = tmp_path / "cartpole.pt"
    torch.save(load_pretrained("cartpole"), pickled)
    code, out, err = run_cli(capsys, "eval", "--policy", str(pickled), "--episodes", "2", "--json")
    assert code == 2 and "Pass --allow-pickle only if" in err and "allow_pickle=True" not in err
    assert "Traceback" not in err
    code, out, err = run_cli(
        capsys, "eval", "--policy", str(pickled), "--allow-pickle", "--episodes", "2", "--json"
    )
    assert code == 0, err


def test_eval_loads_a_legacy_format_pickled_module_only_with_allow_pickle(capsys, tmp_path):
    legacy = tmp_path / "cartpole-legacy.pt"
    torch.save(load_pretrained("cartpole"), legacy, _use_new_zipfile_serialization=False)
    code, out, err = run_cli(capsys, "eval", "--policy", str(legacy), "--episodes", "1", "--num-envs", "1")
    assert code == 2 and "Pass --allow-pickle only if" in err and "Traceback" not in err
    code, out, err = run_cli(
        capsys,
        "eval",
        "--policy",
        str(legacy),
        "--allow-pickle",
        "--episodes",
        "1",
        "--num-envs",
        "1",
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["summary"]["mean_return"] >= 475


def test_eval_module_attr_policy(capsys, tmp_path, monkeypatch):
    (tmp_path / "my_cli_policy.py").write_text(
        "import numpy as np\ndef act(obs):\n    return (obs[:, 2] > 0).astype(np.int64)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run_cli(capsys, "eval", "--policy", "my_cli_policy:act", "--episodes", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["policy"] == "my_cli_policy:act"


@pytest.mark.parametrize(
    "argv, message",
    [
        (("eval", "NoSuchEnv-v9", "--policy", "random"), "unknown env id 'NoSuchEnv-v9'"),
        (("eval", "--policy", "does/not/exist.pt"), "is not 'random', 'pretrained:NAME', an existing file"),
        (("eval", "--policy", "no_such_module_xyz:act"), "cannot import module 'no_such_module_xyz'"),
        (("eval", "Acrobot-v1"), "no --policy given and no shipped policy for 'Acrobot-v1'"),
        (("eval", "CartPole-v9"), "unknown env id 'CartPole-v9'"),
        (("eval", "--episodes", "0"), "--episodes must be at least 1, got 0"),
        (("eval", "--num-envs", "0"), "--num-envs must be at least 1, got 0"),
        (("eval", "--max-steps", "0"), "--max-steps must be at least 1, got 0"),
        (
            ("eval", "--request-timeout", "0"),
            "--request-timeout must be a positive number of seconds, got 0.0",
        ),
        (("inspect", "NoSuchEnv-v9"), "unknown env id 'NoSuchEnv-v9'"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("rlmesh-gym: error: ") and message in err
    assert "Traceback" not in err


def test_eval_max_steps_caps_a_run_that_cannot_finish_its_episodes(capsys):
    # 100 CartPole episodes of 500 steps cannot fit in 10 vector steps: a runtime failure (exit 1).
    code, out, err = run_cli(capsys, "eval", "--max-steps", "10", "--no-progress")
    assert code == 1 and out == ""
    assert "reached max_steps=10 vector steps with 0 of 100 episodes counted" in err


def test_policy_space_mismatch_exits_nonzero_with_a_clear_message(capsys):
    code, out, err = run_cli(
        capsys,
        "eval",
        "MountainCar-v0",
        "--policy",
        "pretrained:cartpole",
        "--episodes",
        "2",
        "--num-envs",
        "2",
    )
    assert code == 2 and out == ""
    assert err.startswith("rlmesh-gym: error: policy 'pretrained:cartpole' failed on the first observations")
    assert "Traceback" not in err and "got shape (2, 2)" in err


def test_bad_autoreset_choice_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["eval", "--autoreset", "sometimes"])
    assert caught.value.code == 2
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err


def test_inspect_prints_the_contract(capsys):
    code, out, err = run_cli(capsys, "inspect", "CartPole-v1")
    assert code == 0, err
    top = [line.split(None, 1) for line in out.splitlines() if not line.startswith(" ")]
    rows = {row[0]: row[1] for row in top if len(row) == 2}
    assert top[-1] == ["metadata"]
    assert rows["id"].strip() == "CartPole-v1"
    assert rows["num_envs"].strip() == "1"
    assert rows["autoreset"].strip() == "next_step"
    assert rows["action_space"].strip() == "Discrete(2)"
    assert rows["observation_space"].startswith("Box(") and "(4,), float32)" in rows["observation_space"]
    assert "render_fps" in out


def test_inspect_json_with_lanes_and_mode(capsys):
    code, out, _ = run_cli(
        capsys, "inspect", "CartPole-v1", "--num-envs", "4", "--autoreset", "disabled", "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert (data["id"], data["num_envs"], data["autoreset"]) == ("CartPole-v1", 4, "disabled")
    assert data["action_space"] == "Discrete(2)" and data["metadata"]["render_fps"] == 50


@pytest.mark.slow
def test_module_entry_point_runs_in_a_subprocess(tmp_path):
    record = tmp_path / "run.rec"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlmesh_gym",
            "eval",
            "--episodes",
            "2",
            "--num-envs",
            "2",
            "--json",
            "--record",
            str(record),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["summary"]["episodes"] == 2
    assert Path(record).stat().st_size > 0


@pytest.mark.parametrize(
    "argv",
    [["eval", "--no-progress"], ["eval", "--policy", "pretrained:cartpole", "--no-progress"]],
)
def test_shipped_policy_without_torch_is_a_clear_error(argv):
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # as if torch were not installed\n"
        "from rlmesh_gym.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert "torch is not installed: pip install 'rlmesh-gym[torch]'" in result.stderr
    assert "Traceback" not in result.stderr

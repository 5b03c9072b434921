"""What a newcomer following the docs meets: modules in the working directory, state_dict files,
hints that name the fix the reader can apply, and summaries that name what was evaluated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from rlmesh_gym.cli import build_parser, main
from rlmesh_gym.evaluation import evaluate
from rlmesh_gym.policies import TorchPolicy
from rlmesh_gym.policies.pretrained import MLPPolicy, load_pretrained

pytestmark = pytest.mark.torch  # (tests/conftest.py)

CONSOLE_SCRIPT = Path(sys.executable).parent / "rlmesh-gym"
FACTORY = "rlmesh_gym.policies.pretrained:MLPPolicy"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def episode_rows(episodes) -> list[tuple[int, int, float, int]]:
    return [(e["lane"], e["seed"], e["episode_return"], e["length"]) for e in episodes]


@pytest.fixture
def state_dict_file(tmp_path: Path) -> Path:
    """The shipped actor's state_dict, saved the way scripts/train_cartpole.py saves a retrained one."""
    path = tmp_path / "cp.pt"
    torch.save(load_pretrained().state_dict(), path)
    return path


@pytest.mark.slow
def test_the_console_script_imports_a_policy_module_from_the_working_directory(tmp_path):
    (tmp_path / "my_policies.py").write_text(
        textwrap.dedent(
            """\
            import numpy as np

            def make_policy():
                return lambda obs: np.where(obs[:, 4] > 0, 2, 0)
            """
        )
    )
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if "PYTHONPATH" in os.environ:  # a development checkout run without installing: keep its package
        environment["PYTHONPATH"] = os.environ["PYTHONPATH"]
    completed = subprocess.run(
        [str(CONSOLE_SCRIPT), "eval", "Acrobot-v1", "--policy", "my_policies:make_policy", "--episodes", "2"]
        + ["--num-envs", "2", "--json"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["policy"] == "my_policies:make_policy" and result["summary"]["episodes"] == 2


def test_an_unimportable_policy_module_says_where_modules_are_looked_for(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "eval", "--policy", "no_such_module_here:make", "--no-progress")
    assert code == 2
    assert "cannot import module 'no_such_module_here'" in err
    assert "run from the directory that holds it, or add that directory to PYTHONPATH" in err


def test_policy_factory_loads_a_state_dict_checkpoint_into_the_named_module(capsys, state_dict_file):
    code, out, err = run_cli(
        capsys,
        *("eval", "CartPole-v1", "--policy", str(state_dict_file), "--policy-factory", FACTORY),
        *("--episodes", "4", "--num-envs", "2", "--json", "--no-progress"),
    )
    assert code == 0, err
    result = json.loads(out)
    shipped = evaluate("CartPole-v1", "pretrained:cartpole", episodes=4, num_envs=2, seed=0, progress=False)
    assert result["policy"] == str(state_dict_file)  # the summary names the file it loaded
    assert episode_rows(result["episodes"]) == episode_rows(shipped.to_dict()["episodes"])


def test_compare_loads_every_state_dict_file_into_the_policy_factory(capsys, state_dict_file):
    code, out, err = run_cli(
        capsys,
        *(
            "compare",
            "CartPole-v1",
            "--policy",
            f"first={state_dict_file}",
            "--policy",
            f"second={state_dict_file}",
        ),
        *("--policy-factory", FACTORY, "--episodes", "4", "--num-envs", "2", "--json"),
    )
    assert code == 0, err
    rows = json.loads(out)["episodes"]
    # Both are the shipped CartPole actor, which balances every episode to the 500-step limit.
    assert [(row["returns"]["first"], row["returns"]["second"]) for row in rows] == [(500.0, 500.0)] * 4
    code, _, err = run_cli(
        capsys,
        *("compare", "CartPole-v1", "--policy", f"file={state_dict_file}", "--policy", "random"),
        *("--policy-factory", FACTORY, "--no-progress"),
    )
    assert code == 2 and err.startswith("rlmesh-gym: error: --policy 'random' with --policy-factory: ")


def test_policy_factory_errors_name_what_was_wrong(capsys, state_dict_file):
    code, _, err = run_cli(capsys, "eval", "--policy-factory", FACTORY, "--no-progress")
    assert code == 2 and "--policy-factory needs --policy PATH" in err
    code, _, err = run_cli(
        capsys, "eval", "--policy", str(state_dict_file), "--policy-factory", "rlmesh_gym:__version__"
    )
    assert code == 2 and "--policy-factory 'rlmesh_gym:__version__' names a str" in err
    code, _, err = run_cli(
        capsys, "eval", "--policy", str(state_dict_file), "--policy-factory", "rlmesh_gym.nothing:here"
    )
    assert code == 2 and "cannot import module 'rlmesh_gym.nothing' for --policy-factory" in err


def test_a_state_dict_without_a_factory_names_the_flag_on_the_command_line_and_the_argument_in_python(
    capsys, state_dict_file
):
    code, _, err = run_cli(capsys, "eval", "--policy", str(state_dict_file), "--no-progress")
    assert code == 2
    assert "--policy-factory module:attr" in err and "factory=" not in err
    with pytest.raises(ValueError, match="holds a state_dict") as raised:
        TorchPolicy.load(state_dict_file)
    assert "factory=" in str(raised.value) and "--policy-factory" not in str(raised.value)


def test_a_pickled_module_hint_names_allow_pickle_as_the_reader_spells_it(capsys, tmp_path):
    path = tmp_path / "module.pt"
    torch.save(MLPPolicy(), path)
    code, _, err = run_cli(capsys, "eval", "--policy", str(path), "--no-progress")
    assert code == 2
    assert "--allow-pickle" in err and "allow_pickle=True" not in err
    with pytest.raises(ValueError) as raised:
        TorchPolicy.load(path)
    assert "allow_pickle=True" in str(raised.value) and "--allow-pickle" not in str(raised.value)


def test_eval_help_lists_every_policy_form():
    eval_parser = build_parser()._subparsers._group_actions[0].choices["eval"]  # noqa: SLF001
    assert "PATH|sb3:PATH|module:attr|random|pretrained:NAME" in eval_parser.format_help()


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_the_shipped_policy_class_compiles_with_torchscript():
    module = load_pretrained()
    scripted = torch.jit.script(module)
    observations = torch.randn(5, 4)
    torch.testing.assert_close(scripted(observations), module(observations))
    with pytest.raises(Exception, match=r"last dimension 4, got shape \(5, 2\)"):
        scripted(torch.zeros(5, 2))


def test_connect_timeout_must_be_positive(capsys):
    code, _, err = run_cli(capsys, "eval", "--env-address", "127.0.0.1:1", "--connect-timeout", "0")
    assert code == 2 and "--connect-timeout must be a positive number of seconds, got 0.0" in err


def test_an_unreachable_server_is_reported_after_the_connect_timeout(capsys):
    code, _, err = run_cli(capsys, "eval", "--env-address", "127.0.0.1:1", "--connect-timeout", "0.5")
    assert code == 1 and "no server answered within 0.5s" in err

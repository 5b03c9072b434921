"""The errors a newcomer meets first: a numpy-fed function written for tensors, a module not found."""

from __future__ import annotations

import pytest

from rlmesh_gym.cli import main
from rlmesh_gym.evaluation import EvaluationError, evaluate


def test_a_lambda_written_for_tensors_is_told_about_the_torch_tensor_annotation() -> None:
    with pytest.raises(EvaluationError) as caught:
        evaluate("CartPole-v1", lambda obs: obs.long(), episodes=1, seed=0, progress=False)
    message = str(caught.value)
    assert "raised AttributeError: 'numpy.ndarray' object has no attribute 'long'" in message
    assert "first parameter is annotated torch.Tensor (def policy(obs: torch.Tensor): ...)" in message
    assert "a lambda cannot be annotated" in message


def test_an_attribute_error_of_the_function_itself_gets_no_tensor_hint() -> None:
    with pytest.raises(EvaluationError) as caught:
        evaluate("CartPole-v1", lambda obs: {}.no_such_thing, episodes=1, seed=0, progress=False)
    assert "torch.Tensor" not in str(caught.value)


def test_an_import_module_not_found_says_where_modules_are_looked_for(
    tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["eval", "CartPole-v1", "--import", "walk1d_not_here", "--policy", "random", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "cannot import env package 'walk1d_not_here'" in err
    assert "run from the directory that holds it, or add that directory to PYTHONPATH" in err

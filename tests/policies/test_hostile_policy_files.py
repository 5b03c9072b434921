"""A policy file runs no code of its own unless allow_pickle: .pt2 archives and SB3 zips whose
records would execute code when loaded are refused with the one allow_pickle hint (or loaded as
data), checked by the marker file the payload would create; benign files still evaluate alike."""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from torch import nn

from rlmesh_gym.evaluation import EvaluationOptions, evaluate

pytestmark = pytest.mark.torch  # (tests/conftest.py)
CLI = [sys.executable, "-m", "rlmesh_gym"]


class Touch:
    """Unpickling this creates ``marker``: the stand-in for an attacker's code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (Path.touch, (self.marker,))


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).eval()


def _export(path: Path) -> Path:
    program = torch.export.export(
        _net(), (torch.zeros(8, 4),), dynamic_shapes=({0: torch.export.Dim("batch")},)
    )
    torch.export.save(program, path)
    return path


def _rewrite(source: Path, target: Path, replace: dict[str, bytes]) -> Path:
    """``source``'s zip with the records whose name ends in a key of ``replace`` replaced."""
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w") as out:
        for info in original.infolist():
            content = original.read(info)
            for suffix, new in replace.items():
                if info.filename.endswith(suffix):
                    content = new
            out.writestr(info.filename, content)
    return target


def _torch_saved(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _model_json(path: Path) -> dict:
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith("models/model.json"))
        return json.loads(archive.read(name))


def _returns(result) -> list[float]:
    return [episode.episode_return for episode in result.episodes]


def _evaluate(policy, allow_pickle: bool = False):
    options = EvaluationOptions(allow_pickle=allow_pickle)
    return evaluate("CartPole-v1", policy, episodes=6, num_envs=2, seed=3, progress=False, options=options)


def test_a_benign_program_loads_and_evaluates_as_the_module_does(tmp_path: Path) -> None:
    path = _export(tmp_path / "policy.pt2")
    assert _returns(_evaluate(path)) == _returns(_evaluate(_net()))


def test_pickled_sample_inputs_are_refused_and_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = _rewrite(
        _export(tmp_path / "good.pt2"),
        tmp_path / "evil.pt2",
        {"data/sample_inputs/model.pt": _torch_saved(Touch(marker))},
    )
    with pytest.raises(ValueError) as caught:
        _evaluate(evil)
    message = str(caught.value)
    assert f"{evil} holds a pickled Python object in " in message and "sample_inputs/model.pt" in message
    assert "refused by default. Pass allow_pickle=True only if you trust the file" in message
    assert not marker.exists()
    # The payload is real: with allow_pickle torch's own loader runs it.
    with pytest.raises(ValueError, match="broken torch.export program"):
        _evaluate(evil, allow_pickle=True)
    assert marker.exists()


def test_a_weight_saved_with_use_pickle_that_is_not_a_tensor_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    good = _export(tmp_path / "good.pt2")
    with zipfile.ZipFile(good) as archive:
        config_name = next(n for n in archive.namelist() if n.endswith("model_weights_config.json"))
        config = json.loads(archive.read(config_name))
    first = next(iter(config["config"].values()))
    first["use_pickle"] = True
    evil = _rewrite(
        good,
        tmp_path / "evil.pt2",
        {
            "model_weights_config.json": json.dumps(config).encode(),
            f"data/weights/{first['path_name']}": _torch_saved(Touch(marker)),
        },
    )
    with pytest.raises(
        ValueError, match=r"holds a pickled Python object in .*data/weights/weight_0; loading"
    ):
        _evaluate(evil)
    assert not marker.exists()


def test_an_expression_sympy_would_evaluate_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    good = _export(tmp_path / "good.pt2")
    text = json.dumps(_model_json(good)).replace(
        "Symbol('s31', positive=True, integer=True)", f"__import__('pathlib').Path({str(marker)!r}).touch()"
    )
    assert str(marker) in text  # the program has a symbolic batch dimension to hijack
    evil = _rewrite(good, tmp_path / "evil.pt2", {"models/model.json": text.encode()})
    with pytest.raises(
        ValueError, match="which calls .*which torch would evaluate; loading it executes code"
    ):
        _evaluate(evil)
    assert not marker.exists()
    with pytest.raises(ValueError, match="broken torch.export program"):
        _evaluate(evil, allow_pickle=True)  # torch's sympify runs it, then fails on its None
    assert marker.exists()


def test_guards_code_in_the_file_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    good = _export(tmp_path / "good.pt2")
    document = _model_json(good)
    document["guards_code"] = [f"__import__('pathlib').Path({str(marker)!r}).touch() is None"]
    evil = _rewrite(good, tmp_path / "evil.pt2", {"models/model.json": json.dumps(document).encode()})
    assert _returns(_evaluate(evil)) == _returns(_evaluate(_net()))
    assert not marker.exists()


def test_two_records_of_one_name_are_refused(tmp_path: Path) -> None:
    good = _export(tmp_path / "good.pt2")
    twice = tmp_path / "twice.pt2"
    with zipfile.ZipFile(good) as original, zipfile.ZipFile(twice, "w") as out:
        for info in original.infolist():
            out.writestr(info.filename, original.read(info))
        with pytest.warns(UserWarning, match="Duplicate name"):
            out.writestr(original.infolist()[-1].filename, b"")
    with pytest.raises(ValueError, match="broken torch.export program: it holds two records named"):
        _evaluate(twice)


def test_the_cli_and_serve_policy_refuse_the_program_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = _rewrite(
        _export(tmp_path / "good.pt2"),
        tmp_path / "evil.pt2",
        {"data/sample_inputs/model.pt": _torch_saved(Touch(marker))},
    )
    for argv in (
        ["eval", "CartPole-v1", "--policy", str(evil), "--episodes", "2", "--no-progress"],
        ["serve-policy", str(evil), "--address", "127.0.0.1:0"],
    ):
        done = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=300)
        assert done.returncode == 2, done.stderr
        assert "holds a pickled Python object" in done.stderr and "--allow-pickle" in done.stderr
        assert "Traceback" not in done.stderr
        assert not marker.exists()


@pytest.fixture(scope="module")
def ppo_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sb3 = pytest.importorskip("stable_baselines3")
    path = tmp_path_factory.mktemp("sb3") / "ppo.zip"
    model = sb3.PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, seed=0, device="cpu")
    model.learn(total_timesteps=128)  # a trained model also pickles its episode statistics
    model.save(path)
    return path


def _with_entry(zip_path: Path, target: Path, key: str, payload: object) -> Path:
    with zipfile.ZipFile(zip_path) as archive:
        data = json.loads(archive.read("data"))
    data[key] = {
        ":type:": "<class 'function'>",
        ":serialized:": base64.b64encode(pickle.dumps(payload)).decode(),
    }
    return _rewrite(zip_path, target, {"data": json.dumps(data).encode()})


@pytest.mark.sb3
def test_an_sb3_zip_with_a_pickled_payload_is_refused(ppo_zip: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = _with_entry(ppo_zip, tmp_path / "evil_sb3.zip", "observation_space", Touch(marker))
    for policy in (evil, f"sb3:{evil}"):
        with pytest.raises(ValueError) as caught:
            _evaluate(policy)
        assert (
            f"SB3Policy.load: {evil} pickles pathlib.Path.touch in its data entry 'observation_space'"
            in str(caught.value)
        )
        assert "Pass allow_pickle=True only if you trust the file" in str(caught.value)
        assert not marker.exists()
    with pytest.raises(ValueError):  # allow_pickle: SB3's own loader unpickles it
        _evaluate(evil, allow_pickle=True)
    assert marker.exists()


@pytest.mark.sb3
@pytest.mark.parametrize("key", ["evil", "lr_schedule"])
def test_an_sb3_payload_where_prediction_needs_nothing_is_replaced_not_run(
    ppo_zip: Path, tmp_path: Path, key: str
) -> None:
    marker = tmp_path / "ran"
    evil = _with_entry(ppo_zip, tmp_path / "evil_sb3.zip", key, Touch(marker))
    assert _returns(_evaluate(evil)) == _returns(_evaluate(ppo_zip, allow_pickle=True))
    assert not marker.exists()


@pytest.mark.sb3
def test_the_cli_replaces_an_sb3_payload_where_prediction_needs_nothing(
    ppo_zip: Path, tmp_path: Path
) -> None:
    # One key suffices here: the command line reaches the same loader as evaluate() above.
    marker = tmp_path / "ran"
    evil = _with_entry(ppo_zip, tmp_path / "evil_sb3.zip", "lr_schedule", Touch(marker))
    done = subprocess.run(
        [*CLI, "eval", "CartPole-v1", "--policy", str(evil), "--episodes", "2", "--no-progress", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["episodes"] == 2
    assert not marker.exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_as_the_policy_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    # A hang guard only: opening the FIFO for reading would block until the timeout.
    done = subprocess.run(
        [*CLI, "eval", "CartPole-v1", "--policy", str(fifo), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert f"policy: {fifo} is a FIFO, not a regular file" in done.stderr

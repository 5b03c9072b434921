"""What a TorchPolicy's module receives: every observation kind as tensors of the right dtype."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
import torch
from _policy_requests import observe, predict, predicted_actions, spec

from rlmesh_gym.policies import TorchPolicy
from rlmesh_gym.policies.torch_policy import _tensor_from_array
from rlmesh_gym.proto import spaces_pb2

pytestmark = pytest.mark.torch  # (tests/conftest.py)

ACTION = gym.spaces.Discrete(2)


class Recorder:
    """A policy that keeps what it was called with and answers action 1 for every row."""

    def __init__(self) -> None:
        self.calls: list[object] = []

    def __call__(self, observations: object) -> torch.Tensor:
        self.calls.append(observations)
        rows = _rows(observations)
        return torch.ones(rows, dtype=torch.int64)


def _rows(observations: object) -> int:
    if isinstance(observations, torch.Tensor):
        return observations.shape[0]
    if isinstance(observations, dict):
        return _rows(next(iter(observations.values())))
    if isinstance(observations, tuple) and observations and isinstance(observations[0], str):
        return len(observations)
    return _rows(observations[0])


BOX_CASES = [
    (gym.spaces.Box(-1.0, 1.0, (3,), np.float32), torch.float32),
    (gym.spaces.Box(-1.0, 1.0, (2, 2), np.float64), torch.float64),
    (gym.spaces.Box(-4.0, 4.0, (2,), np.float16), torch.float16),
    (gym.spaces.Box(0, 255, (2, 3), np.uint8), torch.uint8),
    (gym.spaces.Box(-5, 5, (3,), np.int32), torch.int32),
    (gym.spaces.Box(-100, 100, (2,), np.int8), torch.int8),
    (gym.spaces.Box(0, 1, (3,), np.bool_), torch.bool),
]


@pytest.mark.parametrize(("space", "dtype"), BOX_CASES, ids=lambda c: str(c))
def test_box_observations_arrive_as_tensors_of_the_box_dtype(
    space: gym.spaces.Box, dtype: torch.dtype
) -> None:
    space.seed(3)
    batch = np.stack([space.sample() for _ in range(4)])
    recorder = Recorder()
    policy = TorchPolicy(recorder, (spec(space), spec(ACTION)))
    predict(policy, observe(space, batch, 4), 4)
    (received,) = recorder.calls
    assert isinstance(received, torch.Tensor)
    assert received.dtype == dtype
    assert received.shape == (4, *space.shape)
    assert np.array_equal(received.numpy(), batch)


def test_bfloat16_box_observations_arrive_as_bfloat16_tensors() -> None:
    obs_spec = spec(gym.spaces.Box(-8.0, 8.0, (2,), np.float32))
    obs_spec.dtype = spaces_pb2.D_TYPE_BFLOAT16
    # bfloat16 1.5 = 0x3fc0 and -2.0 = 0xc000 on the wire (two bytes each, little-endian).
    data = bytes.fromhex("c03f00c0")
    recorder = Recorder()
    predict(TorchPolicy(recorder, (obs_spec, spec(ACTION))), data, 1)
    (received,) = recorder.calls
    assert received.dtype == torch.bfloat16
    assert received.float().tolist() == [[1.5, -2.0]]


def test_discrete_observations_keep_their_start_and_arrive_as_int64() -> None:
    space = gym.spaces.Discrete(5, start=-2)
    recorder = Recorder()
    predict(TorchPolicy(recorder, (spec(space), spec(ACTION))), observe(space, np.array([-2, 0, 2]), 3), 3)
    (received,) = recorder.calls
    assert received.dtype == torch.int64
    assert received.tolist() == [-2, 0, 2]


def test_multi_binary_and_multi_discrete_observations() -> None:
    for space, values, dtype in (
        (gym.spaces.MultiBinary([2, 2]), np.array([[[1, 0], [0, 1]]], dtype=np.int8), torch.uint8),
        (gym.spaces.MultiDiscrete([3, 4]), np.array([[2, 3]]), torch.int64),
    ):
        recorder = Recorder()
        predict(TorchPolicy(recorder, (spec(space), spec(ACTION))), observe(space, values, 1), 1)
        (received,) = recorder.calls
        assert received.dtype == dtype
        assert received.shape == values.shape
        assert received.tolist() == values.tolist()


def test_dict_observations_become_a_dict_of_tensors() -> None:
    space = gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "mode": gym.spaces.Discrete(3),
            "bits": gym.spaces.MultiBinary(3),
        }
    )
    batch = {
        "pos": np.array([[0.5, -0.5], [0.25, 1.0]], dtype=np.float32),
        "mode": np.array([2, 0]),
        "bits": np.array([[1, 0, 1], [0, 0, 1]], dtype=np.int8),
    }
    recorder = Recorder()
    predict(TorchPolicy(recorder, (spec(space), spec(ACTION))), observe(space, batch, 2), 2)
    (received,) = recorder.calls
    assert set(received) == {"pos", "mode", "bits"}
    assert received["pos"].dtype == torch.float32 and received["pos"].tolist() == [[0.5, -0.5], [0.25, 1.0]]
    assert received["mode"].dtype == torch.int64 and received["mode"].tolist() == [2, 0]
    assert received["bits"].dtype == torch.uint8 and received["bits"].tolist() == [[1, 0, 1], [0, 0, 1]]


def test_tuple_observations_become_a_tuple_and_text_stays_str() -> None:
    space = gym.spaces.Tuple(
        (gym.spaces.Discrete(2), gym.spaces.Box(0.0, 1.0, (1,), np.float32), gym.spaces.Text(4))
    )
    batch = (np.array([1, 0]), np.array([[0.25], [0.75]], dtype=np.float32), ("ab", "xyz"))
    recorder = Recorder()
    predict(TorchPolicy(recorder, (spec(space), spec(ACTION))), observe(space, batch, 2), 2)
    (received,) = recorder.calls
    assert isinstance(received, tuple) and len(received) == 3
    assert received[0].tolist() == [1, 0]
    assert received[1].tolist() == [[0.25], [0.75]]
    assert received[2] == ("ab", "xyz")


def test_small_observation_tensors_are_private_and_writable() -> None:
    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)

    def scale_in_place(obs: torch.Tensor) -> torch.Tensor:
        obs.mul_(2.0)  # a policy that normalises its input in place
        return (obs[:, 0] > 0).long()

    policy = TorchPolicy(scale_in_place, (spec(space), spec(ACTION)))
    data = observe(space, np.array([[0.5, 0.0, 0.0], [-0.5, 0.0, 0.0]], dtype=np.float32), 2)
    before = bytes(data)
    assert predicted_actions(policy, data, 2).tolist() == [1, 0]
    assert data == before


def test_read_only_arrays_are_copied_when_small_and_shared_when_large() -> None:
    small = np.frombuffer(bytes(16), dtype=np.float32)
    large = np.frombuffer(bytes(1 << 17), dtype=np.float32)
    writable = np.zeros(4, dtype=np.float32)
    assert _tensor_from_array(small).data_ptr() != small.ctypes.data
    assert _tensor_from_array(large).data_ptr() == large.ctypes.data
    assert _tensor_from_array(writable).data_ptr() == writable.ctypes.data


@pytest.mark.slow
def test_large_observations_are_zero_copy_without_warnings_or_leaked_filters() -> None:
    # A fresh interpreter: torch warns about non-writable arrays only once per process.
    script = textwrap.dedent(
        """
        import asyncio, warnings
        import numpy as np, torch
        from rlmesh_gym.policies import TorchPolicy
        from rlmesh_gym.proto import model_pb2, spaces_pb2
        from rlmesh_gym.runtime import MessageFormModel

        warnings.simplefilter("error")
        filters_before = list(warnings.filters)
        obs = spaces_pb2.SpaceSpec(shape=[84, 84, 4], dtype=spaces_pb2.D_TYPE_UINT8,
                                   box=spaces_pb2.BoxSpec(unbounded=True))
        act = spaces_pb2.SpaceSpec(dtype=spaces_pb2.D_TYPE_INT64, discrete=spaces_pb2.DiscreteSpec(n=2))
        seen = []
        def policy(x):
            seen.append(x)
            return torch.zeros(x.shape[0], dtype=torch.int64)
        frames = np.arange(4 * 84 * 84 * 4, dtype=np.uint64).astype(np.uint8)
        request = model_pb2.PredictRequest()
        request.context.session_id, request.context.route_id, request.context.request_id = "s", "r", "q"
        for lane in range(4):
            request.context.slots.add(env_index=lane, episode_id=f"e{lane}")
        request.observation.bytes.data = frames.tobytes()
        asyncio.run(MessageFormModel(TorchPolicy(policy, (obs, act))).predict(request))
        assert list(warnings.filters) == filters_before, "warning filters leaked"
        import rlmesh_gym.policies.torch_policy as tp
        view = np.frombuffer(frames.tobytes(), dtype=np.uint8)
        assert tp._tensor_from_array(view).data_ptr() == view.ctypes.data, "large: not zero-copy"
        assert seen[0].shape == (4, 84, 84, 4)
        assert np.array_equal(seen[0].reshape(-1).numpy(), frames)
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"

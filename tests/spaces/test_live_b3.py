"""Live interop with ``rlmesh==0.1.0b3``: a b3 ``EnvServer`` serves gymnasium envs, we talk to it
with our own stubs and codec.

For every case: the contract's spaces equal our ``space_spec``; the reset/step observation bytes
decode with our codec to what the same env produces in-process for the same seed and actions;
the actions we encode reach the env as the values we sampled; the info dicts equal our MetaMaps.
"""

from __future__ import annotations

import copy
import socket
import threading

import gymnasium as gym
import numpy as np
import pytest
from _b3_peer import B3_EDITION_SHA256, B3EnvPeer
from _space_strategies import spaces as random_spaces
from _space_values import assert_values_equal
from gymnasium.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Text, Tuple
from gymnasium.vector.utils import batch_space, iterate
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rlmesh_gym.proto import env_pb2
from rlmesh_gym.spaces import SpaceCodec, from_meta_map, space_spec, to_meta_map

pytestmark = pytest.mark.timeout(120)

F32 = np.float32


class ScriptedEnv(gym.Env):
    """Observations are a pure function of (reset seed, step count); actions are recorded."""

    metadata = {"render_modes": []}

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        self.observation_space = copy.deepcopy(observation_space)
        self.action_space = copy.deepcopy(action_space)
        self.actions: list = []
        self._seed = 0
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._seed, self._t = (0 if seed is None else seed), 0
        return self._observe(), self._info()

    def step(self, action):
        self.actions.append(action)
        self._t += 1
        return self._observe(), float(self._t), False, False, self._info()

    def _observe(self):
        self.observation_space.seed(self._seed * 1000 + self._t)
        return self.observation_space.sample()

    def _info(self) -> dict:
        return {
            "seed": self._seed,
            "t": self._t,
            "steps": np.arange(self._t + 1),
            "half": np.float32(0.5),
            "tag": None,
            "blob": b"\x00\xff",
            "nested": {"items": [1, 2.5, "x"], "ok": np.bool_(True)},
        }


NESTED = Dict({"pos": Box(-1, 1, (2,)), "inner": Tuple((Discrete(2), MultiBinary(3))), "txt": Text(5)})

# (label, per-lane observation space, per-lane action space)
SINGLE_CASES = [
    ("box_f32", Box(-1, 1, (3,), F32), Discrete(3)),
    ("box_uint8_image", Box(0, 255, (6, 5, 3), np.uint8), Box(-1, 1, (2,), F32)),
    ("box_elementwise", Box(np.array([-1, 0, 2], F32), np.array([1, 5, 3], F32)), MultiDiscrete([3, 4])),
    ("box_f64_unbounded", Box(-np.inf, np.inf, (2,), np.float64), MultiBinary(4)),
    ("box_f16", Box(-4, 4, (2, 2), np.float16), MultiBinary([2, 3])),
    (
        "box_i32_elementwise",
        Box(np.array([0, -5], np.int32), np.array([3, 5], np.int32), dtype=np.int32),
        Text(4),
    ),
    ("box_bool", Box(0, 1, (3,), bool), Tuple((Discrete(4), MultiBinary(2)))),
    ("box_int8", Box(-100, 100, (2,), np.int8), Dict({"x": Discrete(4), "y": Box(-1, 1, (1,), F32)})),
    (
        "box_wide_ints",
        Dict(
            {
                "i16": Box(-300, 300, (2,), np.int16),
                "u16": Box(0, 60000, (2,), np.uint16),
                "u32": Box(0, 4_000_000_000, (2,), np.uint32),
                "i64": Box(-(2**40), 2**40, (2,), np.int64),
                "u64": Box(0, 2**50, (2,), np.uint64),
            }
        ),
        Box(0, 10, (2,), np.int64),
    ),
    # b3 clients cannot decode a shape-() Box (docs/design/wire.md#upstream-gaps), but a b3 server
    # sends it and we can.
    ("box_scalar_obs", Box(0, 1, (), F32), Discrete(2)),
    ("discrete_start", Discrete(5, start=-2), Discrete(5, start=-2)),
    ("multi_binary", MultiBinary(4), MultiDiscrete([[2, 3], [4, 5]])),
    ("multi_binary_dims", MultiBinary([2, 3]), Discrete(2)),
    ("multi_discrete", MultiDiscrete([3, 4]), Discrete(2)),
    ("multi_discrete_shaped", MultiDiscrete([[2, 3], [4, 5]]), Discrete(2)),
    ("text", Text(8), Discrete(2)),
    ("text_charset", Text(min_length=2, max_length=5, charset="ab é"), Text(3, charset="xyz")),
    ("dict", Dict({"b": Discrete(3), "a": Box(-1, 1, (2,))}), Discrete(2)),
    ("tuple", Tuple((Discrete(2), Box(0, 1, (1,)))), Discrete(2)),
    ("nested_dict_tuple_text", NESTED, Tuple((Discrete(2), Dict({"v": Box(-1, 1, (2,))})))),
    (
        "deep_nesting",
        Tuple((Dict({"k": Tuple((Box(-5, 5, (2,), np.int64), Text(3)))}), MultiDiscrete([[2, 3], [4, 5]]))),
        Dict({"a": Dict({"b": Text(2)}), "c": MultiBinary(2)}),
    ),
]

# SyncVectorEnv with 3 lanes (b3 mishandles Tuple vector observations, docs/design/wire.md#upstream-gaps).
VECTOR_CASES = [
    ("vec_box", Box(-1, 1, (4,), F32), Discrete(2)),
    (
        "vec_dict",
        Dict(
            {
                "cam": Box(0, 255, (4, 4, 3), np.uint8),
                "state": Box(-1, 1, (3,), F32),
                "mode": Discrete(3),
                "flags": MultiBinary(2),
                "note": Text(6),
            }
        ),
        Dict({"x": Discrete(4), "y": Box(-1, 1, (1,), F32)}),
    ),
    ("vec_text", Text(6), MultiDiscrete([3, 4])),
    (
        "vec_nested_dict",
        Dict({"inner": Dict({"a": MultiDiscrete([2, 2]), "t": Text(3)}), "z": Discrete(4)}),
        Box(-1, 1, (2,)),
    ),
]


@pytest.fixture
def no_leaks():
    """The test leaves no extra threads behind."""
    before = {thread.ident for thread in threading.enumerate()}
    yield
    extra = [thread for thread in threading.enumerate() if thread.ident not in before and thread.is_alive()]
    for thread in extra:
        thread.join(5)
    assert not [thread for thread in extra if thread.is_alive()], extra


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _sample(space: gym.Space, seed: int):
    space = copy.deepcopy(space)
    space.seed(seed)
    return space.sample()


def _check_handshake(peer: B3EnvPeer, env, obs_space: gym.Space, act_space: gym.Space, n: int) -> None:
    response = peer.handshake()
    assert response.compatible, response.error_message
    assert response.selected_edition_spec_sha256 == B3_EDITION_SHA256
    assert (
        response.selected_workflow_edition == "2026.06" and response.selected_edition_status == "provisional"
    )
    contract = response.env_contract
    assert contract.num_envs == n
    assert contract.observation_space == space_spec(obs_space)
    assert contract.action_space == space_spec(act_space)
    assert contract.observation_space.SerializeToString(deterministic=True) == space_spec(
        obs_space
    ).SerializeToString(deterministic=True)
    assert contract.metadata == to_meta_map(env.metadata)


@pytest.mark.parametrize(
    ("label", "obs_space", "act_space"), SINGLE_CASES, ids=[case[0] for case in SINGLE_CASES]
)
def test_single_env_round_trip_with_a_live_b3_server(label, obs_space, act_space, no_leaks):
    served, reference = ScriptedEnv(obs_space, act_space), ScriptedEnv(obs_space, act_space)
    obs_codec = SpaceCodec(space_spec(obs_space), name="obs")
    act_codec = SpaceCodec(space_spec(act_space), name="action")
    seed = 7
    with B3EnvPeer(served) as peer:
        _check_handshake(peer, served, obs_space, act_space, 1)
        with peer.join() as session:
            reset = session.reset(seeds=[seed])
            expected_obs, expected_info = reference.reset(seed=seed)
            assert_values_equal(obs_codec.decode(reset.observation.bytes.data), expected_obs)
            assert_values_equal(
                obs_codec.decode_batch(reset.observation.bytes.data, 1), _batch_of_one(expected_obs)
            )
            assert reset.infos == to_meta_map(expected_info)
            assert from_meta_map(reset.infos)["steps"] == [0]
            assert len(reset.episode_ids) == 1
            for t in (1, 2):
                action = _sample(act_space, 100 + t)
                step = session.step(act_codec.encode(action))
                expected_obs, reward, _, _, expected_info = reference.step(action)
                assert_values_equal(served.actions[-1], action)  # b3 decoded our action bytes to our value
                assert_values_equal(obs_codec.decode(step.observation.bytes.data), expected_obs)
                assert step.infos == to_meta_map(expected_info)
                assert list(step.rewards) == [reward] and step.terminated_mask == b"\x00"
        port = peer.port
    assert _port_is_free(port)


def _batch_of_one(value):
    if isinstance(value, dict):
        return {key: _batch_of_one(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(_batch_of_one(item) for item in value)
    if isinstance(value, str):
        return (value,)
    return np.asarray(value)[None]


@pytest.mark.parametrize(
    ("label", "obs_space", "act_space"), VECTOR_CASES, ids=[case[0] for case in VECTOR_CASES]
)
def test_sync_vector_env_batches_with_a_live_b3_server(label, obs_space, act_space, no_leaks):
    n = 3

    def make_vector_env() -> gym.vector.SyncVectorEnv:
        return gym.vector.SyncVectorEnv([lambda: ScriptedEnv(obs_space, act_space) for _ in range(n)])

    served, reference = make_vector_env(), make_vector_env()
    obs_codec = SpaceCodec(space_spec(obs_space), name="obs")
    act_codec = SpaceCodec(space_spec(act_space), name="action")
    batched_actions = batch_space(act_space, n)
    seeds = [11, 12, 13]
    with B3EnvPeer(served) as peer:
        _check_handshake(peer, served, obs_space, act_space, n)
        assert peer.contract().autoreset_mode == env_pb2.AUTORESET_MODE_NEXT_STEP
        with peer.join() as session:
            reset = session.reset(seeds=seeds)
            expected_obs, expected_info = reference.reset(seed=seeds)
            # Our batch layout is gymnasium's: the decoded batch equals the vector env's own batch.
            assert_values_equal(
                obs_codec.decode_batch(reset.observation.bytes.data, n), expected_obs, strict_dtype=False
            )
            assert reset.infos == to_meta_map(expected_info)
            assert len(reset.episode_ids) == n
            for t in (1, 2):
                actions = _sample(batched_actions, 200 + t)
                step = session.step(act_codec.encode_batch(actions, n))
                expected_obs, rewards, _, _, expected_info = reference.step(actions)
                for lane, lane_action in enumerate(iterate(batched_actions, actions)):
                    assert_values_equal(served.envs[lane].actions[-1], lane_action)
                assert_values_equal(obs_codec.decode_batch(step.observation.bytes.data, n), expected_obs)
                assert step.infos == to_meta_map(expected_info)
                assert list(step.rewards) == rewards.tolist()
        port = peer.port
    served.close()
    reference.close()
    assert _port_is_free(port)


def _nests_an_empty_box(space: gym.Space, nested: bool = False) -> bool:
    """A Dict/Tuple holds a Box of shape () or with a zero dimension."""
    if isinstance(space, Box):
        return nested and (space.shape == () or 0 in space.shape)
    if isinstance(space, (Dict, Tuple)):
        children = space.spaces.values() if isinstance(space, Dict) else space.spaces
        return any(_nests_an_empty_box(child, True) for child in children)
    return False


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(space=random_spaces)
def test_random_space_specs_equal_the_b3_contract(space):
    if _nests_an_empty_box(space):
        # b3 refuses a Box of shape () or with a 0 dimension inside a Dict/Tuple (at the top level
        # it accepts both); we express them.
        with pytest.raises(ValueError, match=r"\[Box\] shape"):
            B3EnvPeer(ScriptedEnv(space, Discrete(2))).__enter__()
        assert space_spec(space).WhichOneof("spec") in ("dict", "tuple")
        return
    with B3EnvPeer(ScriptedEnv(space, Discrete(2))) as peer:
        contract = peer.contract()
    assert contract.observation_space == space_spec(space)


def test_multi_discrete_start_matches_b3_only_when_explicitly_dropped():
    space = MultiDiscrete([3, 4], start=[1, 1])
    with B3EnvPeer(ScriptedEnv(space, Discrete(2))) as peer:
        contract = peer.contract()
    assert contract.observation_space == space_spec(space, drop_multi_discrete_start=True)
    with pytest.raises(ValueError, match="MultiDiscrete start"):
        space_spec(space)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obs_space=random_spaces, act_space=random_spaces, seed=st.integers(0, 2**20))
def test_random_values_cross_the_wire_both_ways(obs_space, act_space, seed):
    # b3 cannot build some spaces (nested empty Boxes) and cannot decode top-level Box actions of
    # shape () or with a 0 dimension ("space has zero-sized raw encoding").
    assume(not _nests_an_empty_box(obs_space) and not _nests_an_empty_box(act_space))
    assume(not (isinstance(act_space, Box) and (act_space.shape == () or 0 in act_space.shape)))
    served, reference = ScriptedEnv(obs_space, act_space), ScriptedEnv(obs_space, act_space)
    obs_codec = SpaceCodec(space_spec(obs_space), name="obs")
    act_codec = SpaceCodec(space_spec(act_space), name="action")
    with B3EnvPeer(served) as peer, peer.join() as session:
        reset = session.reset(seeds=[seed])
        assert_values_equal(obs_codec.decode(reset.observation.bytes.data), reference.reset(seed=seed)[0])
        action = _sample(act_space, seed)
        step = session.step(act_codec.encode(action))
        assert_values_equal(served.actions[-1], action)
        assert_values_equal(obs_codec.decode(step.observation.bytes.data), reference.step(action)[0])

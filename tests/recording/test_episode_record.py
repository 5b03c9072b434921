"""EpisodeRecord.from_episode: the record a finished episode becomes, built without __init__."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from rlmesh_gym.recording import EpisodeRecord
from rlmesh_gym.runtime.seams import CompletedEpisode
from rlmesh_gym.spaces.meta import to_meta_map


def _episode(final_info=None) -> CompletedEpisode:
    return CompletedEpisode("id-1", 3, 9, 9.5, True, False, 100, 200, 7, 42, final_info)


@pytest.mark.parametrize(
    ("final_info", "success"),
    [
        (None, None),
        ({"final_obs": [0.0]}, None),
        ({"is_success": 1}, True),
        ({"is_success": False}, False),
        (to_meta_map({"is_success": True}, name="final_info"), True),
    ],
)
def test_from_episode_is_the_record_init_makes(final_info, success) -> None:
    record = EpisodeRecord.from_episode(_episode(final_info))
    expected = EpisodeRecord(
        lane=3,
        episode_id="id-1",
        seed=42,
        episode_return=9.5,
        length=9,
        terminated=True,
        truncated=False,
        duration_ms=7,
        success=success,
        start_timestamp_ns=100,
        end_timestamp_ns=200,
    )
    assert record == expected and hash(record) == hash(expected) and repr(record) == repr(expected)
    assert pickle.loads(pickle.dumps(record)) == expected
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.lane = 0  # type: ignore[misc]


def test_a_subclass_gets_its_own_fields_through_its_init() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Tagged(EpisodeRecord):
        tag: str = "untagged"

    record = Tagged.from_episode(_episode())
    assert type(record) is Tagged and record.tag == "untagged" and record.length == 9

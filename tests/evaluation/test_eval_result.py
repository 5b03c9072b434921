"""EvalResult statistics and exports, lane quotas and the progress-bar switch (no runtime needed)."""

from __future__ import annotations

import io
import json
import math

import pytest

from rlmesh_gym.evaluation import EpisodeQuotas, EvalResult, EvalTimings, lane_quotas
from rlmesh_gym.evaluation._progress import progress_wanted
from rlmesh_gym.recording import EpisodeRecord
from rlmesh_gym.runtime.seams import CompletedEpisode


def _record(
    lane: int, ret: float, length: int, success: bool | None = None, seed: int | None = 7
) -> EpisodeRecord:
    return EpisodeRecord(
        lane=lane,
        episode_id=f"ep-{lane}-{ret}",
        seed=seed,
        episode_return=ret,
        length=length,
        terminated=True,
        truncated=False,
        duration_ms=3,
        success=success,
    )


def _result(records: list[EpisodeRecord], num_envs: int = 2, complete: bool = True) -> EvalResult:
    return EvalResult(
        env_id="Test-v0",
        policy="random",
        num_envs=num_envs,
        episodes_requested=4,
        seed=0,
        autoreset="next_step",
        vectorization="sync",
        session_id="eval-Test-v0",
        route_id="lanes-2",
        quotas=lane_quotas(4, num_envs),
        episodes=tuple(records),
        timings=EvalTimings(
            wall_seconds=2.0,
            vector_steps=10,
            env_steps=20,
            env_steps_per_second=10.0,
            resets=1,
            reset_ms=1.5,
            env_step_ms=0.1,
            model_wait_ms=0.3,
            overhead_ms=0.2,
        ),
        complete=complete,
    )


RECORDS = [
    _record(0, 1.0, 10, True),
    _record(1, 3.0, 30, False),
    _record(0, 5.0, 50),
    _record(1, 7.0, 70, True),
]


def test_lane_quotas_follow_the_sb3_split_and_sum_to_k():
    assert lane_quotas(10, 4) == (2, 2, 3, 3)
    assert lane_quotas(3, 4) == (0, 1, 1, 1)
    assert lane_quotas(8, 8) == (1,) * 8
    for k in range(1, 30):
        for n in range(1, 9):
            quotas = lane_quotas(k, n)
            assert sum(quotas) == k and max(quotas) - min(quotas) <= 1


@pytest.mark.parametrize("k, n", [(0, 1), (1, 0), (True, 1), (2.0, 1)])
def test_lane_quotas_reject_bad_counts(k, n):
    with pytest.raises(ValueError, match="must be an int >= 1"):
        lane_quotas(k, n)


def test_episode_quotas_count_each_lane_first_episodes_and_ignore_extras():
    quotas = EpisodeQuotas((1, 2))
    assert quotas.offer(_record(0, 1.0, 1)) is True
    assert quotas.offer(_record(0, 2.0, 1)) is False  # lane 0 is full: ignored
    assert not quotas.met
    assert quotas.offer(_record(1, 3.0, 1)) is True
    assert quotas.offer(_record(1, 4.0, 1)) is True
    assert quotas.met and quotas.counts == (1, 2)
    assert [r.episode_return for r in quotas.records] == [1.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="lane 5, outside the 2 lane"):
        quotas.offer(_record(5, 0.0, 1))


def test_episode_quotas_want_only_lanes_below_quota_and_count_what_they_wanted():
    quotas = EpisodeQuotas((1, 0))
    assert quotas.wants(0, "a") is True and quotas.wants(1, "b") is False
    quotas.count(_record(0, 1.0, 1))
    assert quotas.wants(0, "c") is False and quotas.met and quotas.counted("ep-0-1.0")
    with pytest.raises(ValueError, match="episode 'z' reports lane 2, outside the 2 lane"):
        quotas.wants(2, "z")


def test_episode_quotas_count_a_steps_episodes_in_order():
    def finished(lane: int, name: str, reward: float) -> CompletedEpisode:
        return CompletedEpisode(name, lane, 3, reward, True, False, 10, 20, 0, None, {"is_success": 1})

    quotas = EpisodeQuotas((1, 2))
    counted: list = []
    quotas.count_episodes(
        [finished(0, "a", 1.0), finished(0, "b", 2.0), finished(1, "c", 3.0)], counted.append
    )
    assert [(r.episode_id, r.lane, r.episode_return, r.length, r.success) for r in counted] == [
        ("a", 0, 1.0, 3, True),
        ("c", 1, 3.0, 3, True),
    ]
    assert quotas.records == counted and quotas.counts == (1, 1) and not quotas.met
    assert quotas.counted("a") and not quotas.counted("b") and quotas.counted("c")
    # An episode outside the lanes raises; the ones before it stay counted.
    with pytest.raises(ValueError, match="episode 'z' reports lane 2, outside the 2 lane"):
        quotas.count_episodes([finished(1, "d", 4.0), finished(2, "z", 0.0), finished(1, "e", 5.0)])
    assert [r.episode_id for r in quotas.records] == ["a", "c", "d"] and quotas.met
    assert quotas.counted("d") and not quotas.counted("e")
    quotas.count_episodes([finished(1, "f", 6.0)], counted.append)
    assert len(counted) == 2 and len(quotas.records) == 3


def test_zero_quota_lanes_are_met_from_the_start():
    quotas = EpisodeQuotas((0, 1))
    assert not quotas.met
    assert quotas.offer(_record(0, 1.0, 1)) is False
    assert quotas.offer(_record(1, 1.0, 1)) is True
    assert quotas.met


def test_summary_statistics():
    result = _result(RECORDS)
    assert result.mean_return == 4.0
    assert result.std_return == pytest.approx(math.sqrt(5.0))  # population std of 1,3,5,7
    assert (result.min_return, result.max_return) == (1.0, 7.0)
    assert result.mean_length == 40.0
    assert result.success_rate == pytest.approx(2 / 3)  # the episode without is_success is left out
    assert result.episodes_per_lane == (2, 2)
    assert result.returns == [1.0, 3.0, 5.0, 7.0] and result.lengths == [10, 30, 50, 70]


def test_empty_result_statistics_are_nan_and_json_null():
    result = _result([], complete=False)
    assert math.isnan(result.mean_return) and math.isnan(result.std_return) and math.isnan(result.min_return)
    assert result.success_rate is None
    data = json.loads(result.to_json())
    assert data["summary"]["mean_return"] is None and data["complete"] is False
    assert "n/a" in str(result) and "(incomplete)" in str(result)


def test_to_dict_and_json_round_trip():
    result = _result(RECORDS)
    data = json.loads(result.to_json(indent=2))
    assert data == result.to_dict()
    assert data["summary"]["mean_return"] == 4.0 and data["summary"]["episodes"] == 4
    assert data["timings"]["env_steps_per_second"] == 10.0
    assert data["quotas"] == [2, 2]
    assert data["episodes"][1] == RECORDS[1].to_dict()


def test_frame_dtypes_cover_every_record_field():
    from rlmesh_gym.evaluation._result import _FLEET_DTYPES, _FRAME_DTYPES, _SHARD_DTYPES

    assert [*_FRAME_DTYPES, *_FLEET_DTYPES, *_SHARD_DTYPES] == list(EpisodeRecord.__dataclass_fields__)


@pytest.mark.notebook
def test_a_fleet_result_adds_server_columns_and_entries_and_a_single_env_result_does_not():
    import dataclasses

    from rlmesh_gym.evaluation import FleetServer

    plain = _result(RECORDS)
    assert "server" not in plain.to_pandas().columns and "servers" not in plain.to_dict()
    assert "server" not in RECORDS[0].to_dict()
    fleet_records = tuple(
        dataclasses.replace(record, server="10.0.0.1:50051", server_lane=record.lane) for record in RECORDS
    )
    server = FleetServer("10.0.0.1:50051", 0, 2, ("server-0-lanes-2",), len(fleet_records))
    fleet = dataclasses.replace(_result(fleet_records), servers=(server,), reassigned_episodes=1)
    frame = fleet.to_pandas()
    assert list(frame.server) == ["10.0.0.1:50051"] * len(RECORDS)
    assert list(frame.server_lane) == [record.lane for record in RECORDS]
    data = json.loads(fleet.to_json())
    assert data["servers"] == [server.to_dict()] and data["reassigned_episodes"] == 1
    assert data["episodes"][0]["server"] == "10.0.0.1:50051"
    assert "server 10.0.0.1:50051" in str(fleet) and "reassigned" in str(fleet)


@pytest.mark.notebook
def test_a_ray_result_adds_a_shard_column_and_entry_and_a_single_env_result_does_not():
    import dataclasses

    plain = _result(RECORDS)
    assert "shard" not in plain.to_pandas().columns and "shard" not in RECORDS[0].to_dict()
    sharded = _result(tuple(dataclasses.replace(r, shard=r.lane % 2) for r in RECORDS))
    assert list(sharded.to_pandas().shard) == [record.lane % 2 for record in RECORDS]
    assert "server" not in sharded.to_pandas().columns
    assert json.loads(sharded.to_json())["episodes"][0]["shard"] == RECORDS[0].lane % 2


@pytest.mark.notebook
def test_to_pandas_has_one_row_per_episode_with_record_columns():
    frame = _result(RECORDS).to_pandas()
    assert list(frame.columns) == list(EpisodeRecord.__dataclass_fields__)[:-3]  # no server or shard columns
    assert frame.episode_return.tolist() == [1.0, 3.0, 5.0, 7.0]
    assert frame.groupby("lane").length.mean().to_dict() == {0: 30.0, 1: 50.0}
    assert len(_result([]).to_pandas()) == 0
    mixed = _result([_record(0, 1.0, 1, seed=2**62 + 1), _record(1, 2.0, 2, seed=None)]).to_pandas()
    assert mixed.seed.iloc[0] == 2**62 + 1 and mixed.seed.isna().tolist() == [False, True]  # exact, not float
    assert str(mixed.success.dtype) == "boolean" and mixed.success.isna().all()
    assert {str(t) for t in mixed.dtypes} == {"int64", "object", "Int64", "float64", "bool", "boolean"}
    assert list(_result([]).to_pandas().dtypes) == list(mixed.dtypes)


def test_text_and_html_reprs_show_the_summary():
    result = _result(RECORDS)
    text = str(result)
    assert text.splitlines()[0].startswith("Test-v0 | policy random | 4 episodes on 2 lane(s) | seed 0")
    assert "mean return" in text and "4.00" in text and "66.7%" in text
    page = result._repr_html_()
    assert "<table>" in page and "mean return" in page and "ep-1-3.0" in page
    assert repr(result).startswith("EvalResult(env_id='Test-v0'") and "mean_return=4" in repr(result)


def test_html_repr_elides_long_episode_lists():
    result = _result([_record(i % 2, float(i), 1) for i in range(25)])
    assert "15 more" in result._repr_html_()


def test_plot_draws_returns_by_lane_and_histogram():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    figure = _result(RECORDS).plot()
    left, right = figure.axes
    assert left.get_ylabel() == "return" and right.get_xlabel() == "return"
    assert len(left.collections) == 2  # one scatter per lane
    assert "mean 4.00" in right.get_title()
    import matplotlib.pyplot as plt

    plt.close(figure)


def test_progress_only_for_terminals_and_notebooks():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert progress_wanted(False, Tty()) is False
    assert progress_wanted(True, io.StringIO()) is False
    assert progress_wanted(True, Tty()) is True

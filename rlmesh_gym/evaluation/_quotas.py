"""Per-lane episode quotas: how K episodes are split over N lanes without favouring short ones."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from rlmesh_gym.recording.episode_record import EpisodeRecord

if TYPE_CHECKING:
    from rlmesh_gym.runtime.seams import CompletedEpisode

__all__ = ["EpisodeQuotas", "lane_quotas"]


def lane_quotas(episodes: int, num_envs: int) -> tuple[int, ...]:
    """How many episodes each lane contributes when ``episodes`` are asked of ``num_envs`` lanes.

    Lane ``i`` gets ``(episodes + i) // num_envs`` (Stable-Baselines3's split): the quotas
    differ by at most one and sum to ``episodes``.

    >>> lane_quotas(10, 4)
    (2, 2, 3, 3)
    >>> lane_quotas(3, 4)
    (0, 1, 1, 1)
    """
    for name, value, low in (("episodes", episodes, 1), ("num_envs", num_envs, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return tuple((episodes + lane) // num_envs for lane in range(num_envs))


class EpisodeQuotas:
    """Counts each lane's first ``quotas[lane]`` completed episodes and ignores the rest.

    Why quotas: stopping at the first K completions over all lanes over-samples short
    episodes (a lane whose episodes are short finishes more of them before the stop). Counting
    a fixed number of episodes per lane, in the order each lane finishes them, keeps every
    lane's sample independent of episode length.
    """

    __slots__ = ("quotas", "records", "_counts", "_counted_ids", "_ids_known", "_lanes_open")

    def __init__(self, quotas: tuple[int, ...]) -> None:
        self.quotas = quotas
        self.records: list[EpisodeRecord] = []
        self._counts = [0] * len(quotas)
        # The ids of records[:_ids_known], brought up to date when asked (most runs never ask);
        # records only ever grow.
        self._counted_ids: set[str] = set()
        self._ids_known = 0
        self._lanes_open = sum(1 for quota in quotas if quota > 0)

    @property
    def met(self) -> bool:
        """Whether every lane has contributed its quota."""
        return self._lanes_open == 0

    @property
    def counts(self) -> tuple[int, ...]:
        """Episodes counted so far on each lane."""
        return tuple(self._counts)

    def counted(self, episode_id: str) -> bool:
        """Whether the episode with this id was counted."""
        records = self.records
        if self._ids_known < len(records):
            self._counted_ids.update(record.episode_id for record in records[self._ids_known :])
            self._ids_known = len(records)
        return episode_id in self._counted_ids

    def wants(self, lane: int, episode_id: str) -> bool:
        """Whether an episode ``episode_id`` finished on ``lane`` would be counted (its lane is
        below quota), so a caller can skip building its record.

        Raises ``ValueError`` for a lane outside the quotas.
        """
        if not 0 <= lane < len(self._counts):
            raise self._outside(lane, episode_id)
        return self._counts[lane] < self.quotas[lane]

    def offer(self, record: EpisodeRecord) -> bool:
        """Count ``record`` if its lane is below quota; return whether it was counted."""
        if not self.wants(record.lane, record.episode_id):
            return False
        self.count(record)
        return True

    def count(self, record: EpisodeRecord) -> None:
        """Count ``record``, whose lane :meth:`wants` it (:meth:`offer` without the check)."""
        lane = record.lane
        self.records.append(record)
        self._took(lane)

    def count_episodes(
        self,
        episodes: Iterable[CompletedEpisode],
        on_counted: Callable[[EpisodeRecord], None] | None = None,
    ) -> list[int]:
        """:meth:`offer` each finished episode in turn, calling ``on_counted`` with the record of
        each one counted, as it is counted; the lanes these episodes left one short of their
        quota (whose next episode is their last counted one).

        Raises ``ValueError`` for an episode of a lane outside the quotas, and what
        ``on_counted`` raises; the episodes before it stay counted (and were reported).
        """
        counts, quotas, records = self._counts, self.quotas, self.records
        lanes = len(counts)
        one_short: list[int] = []
        for episode in episodes:
            lane = episode.env_index
            if not 0 <= lane < lanes:
                raise self._outside(lane, episode.episode_id)
            if counts[lane] < quotas[lane]:
                record = EpisodeRecord.from_episode(episode)
                records.append(record)
                self._took(lane)
                if counts[lane] == quotas[lane] - 1:
                    one_short.append(lane)
                if on_counted is not None:
                    on_counted(record)
        return one_short

    def lanes_within_one(self) -> list[int]:
        """The lanes at most one episode short of their quota (met ones included)."""
        return [
            lane
            for lane, (count, quota) in enumerate(zip(self._counts, self.quotas, strict=True))
            if quota - count <= 1
        ]

    def _took(self, lane: int) -> None:
        count = self._counts[lane] = self._counts[lane] + 1
        if count == self.quotas[lane]:
            self._lanes_open -= 1

    def _outside(self, lane: int, episode_id: str) -> ValueError:
        return ValueError(
            f"completed episode {episode_id!r} reports lane {lane}, "
            f"outside the {len(self._counts)} lane(s) being evaluated"
        )

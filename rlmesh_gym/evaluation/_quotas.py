"""Per-lane episode quotas: how K episodes are split over N lanes without favouring short ones."""

from __future__ import annotations

from rlmesh_gym.recording.episode_record import EpisodeRecord

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

    __slots__ = ("quotas", "records", "_counts", "_counted_ids", "_lanes_open")

    def __init__(self, quotas: tuple[int, ...]) -> None:
        self.quotas = quotas
        self.records: list[EpisodeRecord] = []
        self._counts = [0] * len(quotas)
        self._counted_ids: set[str] = set()
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
        return episode_id in self._counted_ids

    def wants(self, lane: int, episode_id: str) -> bool:
        """Whether an episode ``episode_id`` finished on ``lane`` would be counted (its lane is
        below quota), so a caller can skip building its record.

        Raises ``ValueError`` for a lane outside the quotas.
        """
        if not 0 <= lane < len(self._counts):
            raise ValueError(
                f"completed episode {episode_id!r} reports lane {lane}, "
                f"outside the {len(self._counts)} lane(s) being evaluated"
            )
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
        self._counts[lane] += 1
        self.records.append(record)
        self._counted_ids.add(record.episode_id)
        if self._counts[lane] == self.quotas[lane]:
            self._lanes_open -= 1

"""One recording for a fleet evaluation: each server's session records to a part file of its
own lanes, and the parts are merged into the recording the user asked for. A Ray evaluation
(``evaluate_on_ray``) merges its shards' parts the same way.

The merged file is an ordinary recording of ``num_envs`` fleet-wide lanes: its header is the
first part's with the fleet's lane count and contract and a ``servers`` list; every
``session`` record names its ``server``; ``steps`` and ``episode`` records carry fleet-wide
lanes, and each episode's summary its ``server`` and ``server_lane``. A part of a Ray shard
names its ``shard`` instead (header ``shards``, ``session`` and episode summaries ``shard``).
Parts are copied whole, server by server (in fleet order, reassignment rounds after the first
run), one record at a time, so merging never holds a whole part in memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import tempfile
from collections.abc import Sequence
from typing import Any, BinaryIO

import msgpack

from rlmesh_gym.proto import env_pb2
from rlmesh_gym.recording._exclusive import LOCKS, open_exclusive
from rlmesh_gym.recording._format import new_packer, new_unpacker
from rlmesh_gym.recording._options import RecordingOptions

__all__ = ["FleetPart", "MergeTarget", "part_options"]


@dataclasses.dataclass(frozen=True, slots=True)
class FleetPart:
    """A part file and the server (or the Ray shard) whose lanes it recorded; its lane 0 is the
    merged recording's ``first_lane``."""

    path: str
    server: str | None
    first_lane: int
    shard: int | None = None


def _refuse_frames(options: RecordingOptions) -> None:
    if options.frame_lanes:
        raise ValueError(
            "a fleet evaluation cannot record frames (frame_lanes): env servers send no frames with "
            "their steps; record without frames, or evaluate one env in-process"
        )


def part_options(
    options: RecordingOptions, first_lane: int, num_envs: int, tag: str
) -> RecordingOptions | None:
    """The options of one server's part: its share of the recorded lanes, numbered on the
    server; ``None`` when none of its lanes is recorded.

    Raises ``ValueError`` when frames are asked for (env servers send no frames to record)."""
    _refuse_frames(options)
    lanes = None
    if options.lanes is not None:
        lanes = [lane - first_lane for lane in options.lanes if first_lane <= lane < first_lane + num_envs]
        if not lanes:
            return None
    return dataclasses.replace(options, path=f"{os.fspath(options.path)}.part-{tag}", lanes=lanes)


class MergeTarget:
    """The fleet's recording path, locked against other writers from before the run until the
    parts are merged into it (or the run ends without parts).

    The path is checked when this is built, before any episode runs: a directory, a missing
    folder, a FIFO or a path another run is writing raises ``OSError`` naming it (and frames
    ``ValueError``). What was at the path stays untouched until a merge succeeds; the merged
    file then replaces it in one rename.
    """

    def __init__(self, options: RecordingOptions) -> None:
        _refuse_frames(options)
        self.options = options
        self.path = os.fspath(options.path)
        self._held: BinaryIO | None
        self._held, self._created = open_exclusive(self.path, truncate=False)

    def merge(
        self,
        contract: env_pb2.EnvContract,
        num_envs: int,
        parts: Sequence[FleetPart],
        *,
        env_id: str,
        base_seed: int | None,
    ) -> None:
        """Write the path from ``parts`` (those that exist), then delete the parts and release it.

        Raises:
            OSError: writing the merged file failed (a full disk); the path is as it was, the
                parts are kept, and the message names them.
        """
        existing = [part for part in parts if os.path.exists(part.path)]
        if not existing:
            self.close()
            return
        directory, name = os.path.split(self.path)
        try:
            descriptor, temporary = tempfile.mkstemp(
                prefix=f"{name}.", suffix=".merging", dir=directory or "."
            )
        except OSError as error:
            self.close()
            raise self._kept(existing, error) from error
        try:
            with os.fdopen(descriptor, "wb") as out:
                _write_merged(out, self.options, contract, num_envs, parts, existing, env_id, base_seed)
            if self._held is not None:  # the recording keeps the path's permissions, not mkstemp's 0600
                os.chmod(temporary, stat.S_IMODE(os.fstat(self._held.fileno()).st_mode))
            if not LOCKS:
                self._release()  # a file held open cannot be replaced there
            os.replace(temporary, self.path)
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.remove(temporary)
            self.close()
            if isinstance(error, OSError):
                raise self._kept(existing, error) from error
            raise
        self._created = False  # the merged recording is there now: close() must keep it
        self._release()
        for part in parts:
            with contextlib.suppress(FileNotFoundError):
                os.remove(part.path)

    def close(self) -> None:
        """Release the path without merging (idempotent); a file this created empty is removed."""
        if self._held is None:
            return
        if self._created:
            with contextlib.suppress(OSError):
                if os.fstat(self._held.fileno()).st_size == 0:
                    os.remove(self.path)
        self._release()

    def _release(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    def _kept(self, parts: Sequence[FleetPart], error: OSError) -> OSError:
        return OSError(
            error.errno,
            f"merging the fleet's recording into {self.path!r} failed: {error}; the part files are kept: "
            + ", ".join(part.path for part in parts),
        )


def _write_merged(
    out: BinaryIO,
    options: RecordingOptions,
    contract: env_pb2.EnvContract,
    num_envs: int,
    parts: Sequence[FleetPart],
    existing: Sequence[FleetPart],
    env_id: str,
    base_seed: int | None,
) -> None:
    fleet_contract = env_pb2.EnvContract()
    fleet_contract.CopyFrom(contract)
    fleet_contract.num_envs = num_envs
    packer = new_packer()
    for index, part in enumerate(existing):
        for record in _records(part.path):
            kind = record.get("kind")
            if kind == "header":
                if index:
                    continue
                record.update(
                    env_id=env_id,
                    contract=fleet_contract.SerializeToString(deterministic=True),
                    num_envs=num_envs,
                    base_seed=base_seed,
                    options=options.to_dict(),
                )
                servers = list(dict.fromkeys(p.server for p in parts if p.server is not None))
                shards = list(dict.fromkeys(p.shard for p in parts if p.shard is not None))
                if servers:
                    record["servers"] = servers
                if shards:
                    record["shards"] = shards
            elif kind == "session":
                _name_origin(record, part)
            elif kind in ("steps", "episode"):
                _to_fleet_lane(record, part)
            out.write(packer.pack(record))
        out.flush()


def _to_fleet_lane(record: dict[str, Any], part: FleetPart) -> None:
    lane = record.get("lane")
    if isinstance(lane, int):
        record["lane"] = part.first_lane + lane
    summary = record.get("record")
    if isinstance(summary, dict) and isinstance(summary.get("lane"), int):
        if part.server is not None:
            summary["server_lane"] = summary["lane"]
        summary["lane"] = part.first_lane + summary["lane"]
        _name_origin(summary, part)


def _name_origin(record: dict[str, Any], part: FleetPart) -> None:
    """Name the part's server (or Ray shard) in a ``session`` record or an episode summary."""
    if part.server is not None:
        record["server"] = part.server
    if part.shard is not None:
        record["shard"] = part.shard


def _records(path: str) -> Any:
    """The records of a part, one at a time; a damaged tail (a session cut short) ends it."""
    with open(path, "rb") as stream:
        unpacker = new_unpacker(stream)
        while True:
            try:
                record = unpacker.unpack()
            except msgpack.OutOfData:
                return
            except (ValueError, TypeError, msgpack.UnpackException):
                return
            if isinstance(record, dict):
                yield record

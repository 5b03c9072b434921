"""One recording for a fleet evaluation: each server's session records to a part file of its
own lanes, and the parts are merged into the recording the user asked for.

The merged file is an ordinary recording of ``num_envs`` fleet-wide lanes: its header is the
first part's with the fleet's lane count and contract and a ``servers`` list; every
``session`` record names its ``server``; ``steps`` and ``episode`` records carry fleet-wide
lanes, and each episode's summary its ``server`` and ``server_lane``. Parts are copied whole,
server by server (in fleet order, reassignment rounds after the first run), one record at a
time, so merging never holds a whole part in memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import msgpack

from rlmesh_gym.proto import env_pb2
from rlmesh_gym.recording._format import new_packer, new_unpacker
from rlmesh_gym.recording._options import RecordingOptions

__all__ = ["FleetPart", "merge_parts", "part_options"]


@dataclasses.dataclass(frozen=True, slots=True)
class FleetPart:
    """A part file and the server whose lanes it recorded."""

    path: str
    server: str
    first_lane: int


def part_options(
    options: RecordingOptions, first_lane: int, num_envs: int, tag: str
) -> RecordingOptions | None:
    """The options of one server's part: its share of the recorded lanes, numbered on the
    server; ``None`` when none of its lanes is recorded.

    Raises ``ValueError`` when frames are asked for (env servers send no frames to record)."""
    if options.frame_lanes:
        raise ValueError(
            "a fleet evaluation cannot record frames (frame_lanes): env servers send no frames with "
            "their steps; record without frames, or evaluate one env in-process"
        )
    lanes = None
    if options.lanes is not None:
        lanes = [lane - first_lane for lane in options.lanes if first_lane <= lane < first_lane + num_envs]
        if not lanes:
            return None
    return dataclasses.replace(options, path=f"{os.fspath(options.path)}.part-{tag}", lanes=lanes)


def merge_parts(
    options: RecordingOptions,
    contract: env_pb2.EnvContract,
    num_envs: int,
    parts: Sequence[FleetPart],
    *,
    env_id: str,
    base_seed: int | None,
) -> None:
    """Write ``options.path`` from ``parts`` (those that exist) and delete the parts."""
    existing = [part for part in parts if os.path.exists(part.path)]
    if not existing:
        return
    fleet_contract = env_pb2.EnvContract()
    fleet_contract.CopyFrom(contract)
    fleet_contract.num_envs = num_envs
    packer = new_packer()
    path = os.fspath(options.path)
    try:
        with open(path, "wb") as out:
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
                            servers=list(dict.fromkeys(p.server for p in parts)),
                        )
                    elif kind == "session":
                        record["server"] = part.server
                    elif kind in ("steps", "episode"):
                        _to_fleet_lane(record, part)
                    out.write(packer.pack(record))
                out.flush()
    finally:
        for part in parts:
            with contextlib.suppress(FileNotFoundError):
                os.remove(part.path)


def _to_fleet_lane(record: dict[str, Any], part: FleetPart) -> None:
    lane = record.get("lane")
    if isinstance(lane, int):
        record["lane"] = part.first_lane + lane
    summary = record.get("record")
    if isinstance(summary, dict) and isinstance(summary.get("lane"), int):
        summary["server_lane"] = summary["lane"]
        summary["lane"] = part.first_lane + summary["lane"]
        summary["server"] = part.server


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

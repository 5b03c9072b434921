"""Fleet evaluation over real ``serve-env`` processes on loopback: same episodes as in-process,
a killed server (partial result or reassignment), a server of another env refused."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal

import pytest
from test_cli_serve import Served

from rlmesh_gym.cli import main
from rlmesh_gym.evaluation import EvaluationError, EvaluationOptions, evaluate, evaluate_fleet, fleet_route_id
from rlmesh_gym.recording import load_recording
from rlmesh_gym.runtime import RuntimeHooks

pytestmark = pytest.mark.slow  # env server processes

LANES = (2, 1, 3)  # lane counts of the three servers: fleet lanes 0-1, 2, 3-5
SEED = 11


def serve_cartpole(num_envs: int, *extra: str) -> Served:
    return Served(
        "serve-env",
        "CartPole-v1",
        "--num-envs",
        str(num_envs),
        "--autoreset",
        "disabled",
        *extra,
        "--address",
        "127.0.0.1:0",
    )


@pytest.fixture(scope="module")
def fleet():
    """Three CartPole servers (2, 1 and 3 lanes, DISABLED: every episode seeded); yields their addresses."""
    servers = [serve_cartpole(n) for n in LANES]
    try:
        yield [server.address() for server in servers]
    finally:
        for server in servers:
            server.finish(signal.SIGTERM)


def in_process_lanes(server: int, num_envs: int, episodes: int) -> dict[int, list[tuple]]:
    """Each lane's episodes (seed, return, length) as ``evaluate`` gives them in-process for server
    ``server`` of the fleet: same env, lanes, policy, seed, session and route."""
    result = evaluate(
        "CartPole-v1",
        "random",
        episodes=episodes,
        num_envs=num_envs,
        autoreset="disabled",
        seed=SEED,
        progress=False,
        options=EvaluationOptions(session_id="eval-CartPole-v1", route_id=fleet_route_id(server, num_envs)),
    )
    lanes: dict[int, list[tuple]] = {lane: [] for lane in range(num_envs)}
    for record in result.episodes:
        lanes[record.lane].append((record.seed, record.episode_return, record.length))
    return lanes


def assert_same_as_in_process(episodes, addresses, lanes_of=LANES) -> None:
    """Every server's counted episodes are, lane by lane, the first ones of the same lanes in-process."""
    first_lane = 0
    for index, (address, num_envs) in enumerate(zip(addresses, lanes_of, strict=True)):
        mine = [e for e in episodes if e.server == address]
        assert all(e.lane == first_lane + e.server_lane for e in mine)
        local = in_process_lanes(index, num_envs, 25 * num_envs)
        for lane in range(num_envs):
            got = [(e.seed, e.episode_return, e.length) for e in mine if e.server_lane == lane]
            assert got == local[lane][: len(got)], (address, lane)
        first_lane += num_envs


def test_a_fleet_gives_episode_for_episode_what_the_same_lanes_give_in_process(fleet):
    result = evaluate_fleet(fleet, "random", episodes=13, seed=SEED, progress=False)
    assert result.complete and len(result.episodes) == 13
    assert result.num_envs == 6 and result.quotas == (2, 2, 2, 2, 2, 3)
    assert result.episodes_per_lane == result.quotas
    assert [(s.address, s.first_lane, s.num_envs) for s in result.servers] == [
        (fleet[0], 0, 2),
        (fleet[1], 2, 1),
        (fleet[2], 3, 3),
    ]
    assert [s.route_ids for s in result.servers] == [
        ("server-0-lanes-2",),
        ("server-1-lanes-1",),
        ("server-2-lanes-3",),
    ]
    assert result.reassigned_episodes == 0 and all(s.failure is None for s in result.servers)
    assert_same_as_in_process(result.episodes, fleet)
    # The same servers in the same order and seed: the same episodes again.
    again = evaluate_fleet(fleet, "random", episodes=13, seed=SEED, progress=False)
    key = [(e.server, e.server_lane, e.seed, e.episode_return) for e in result.episodes]
    assert sorted(key) == sorted((e.server, e.server_lane, e.seed, e.episode_return) for e in again.episodes)


def test_the_cli_reads_a_file_of_addresses_and_records_one_file_for_the_fleet(fleet, tmp_path, capsys):
    listing = tmp_path / "servers.txt"
    listing.write_text(f"# the fleet\n{fleet[0]}\n\n{fleet[1]}  # one lane\n")
    recording = tmp_path / "fleet.rec"
    code = main(
        [
            "eval",
            "--env-address",
            f"@{listing}",
            "--env-address",
            fleet[2],
            "--policy",
            "random",
            "--episodes",
            "7",
            "--seed",
            str(SEED),
            "--record",
            str(recording),
            "--json",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(out)
    assert [server["address"] for server in data["servers"]] == fleet
    assert len(data["episodes"]) == 7 and {e["server"] for e in data["episodes"]} <= set(fleet)
    loaded = load_recording(recording)
    assert loaded.header.num_envs == 6 and [s["server"] for s in loaded.sessions] == fleet
    recorded = {e.episode_id: e.record for e in loaded.episodes}
    for episode in data["episodes"]:  # every counted episode is in the one file, fleet-numbered
        record = recorded[episode["episode_id"]]
        assert (record.lane, record.server, record.server_lane) == (
            episode["lane"],
            episode["server"],
            episode["server_lane"],
        )
    assert not [p for p in os.listdir(tmp_path) if ".part-" in p]  # the per-server parts are gone


def test_a_server_of_another_env_is_refused_by_address_before_any_episode(fleet):
    other = Served("serve-env", "Acrobot-v1", "--address", "127.0.0.1:0")
    try:
        odd = other.address()
        started = []

        class Sessions(RuntimeHooks):
            async def session_started(self, event):
                started.append(event.route.route_id)

        with pytest.raises(
            ValueError, match=rf"env server {odd} serves 'Acrobot-v1'.*differs from {fleet[0]}"
        ):
            evaluate_fleet(
                [fleet[0], fleet[1], odd],
                "random",
                episodes=4,
                progress=False,
                options=EvaluationOptions(hooks=[Sessions()]),
            )
        assert started == []
        # The refused run left every server free for the next client.
        result = evaluate_fleet([fleet[0], fleet[1]], "random", episodes=3, seed=SEED, progress=False)
        assert result.complete and len(result.episodes) == 3
    finally:
        other.finish(signal.SIGTERM)


class CountEpisodes(RuntimeHooks):
    """Counts the episodes that completed on any session it hooks."""

    def __init__(self) -> None:
        self.episodes = 0

    async def episode_completed(self, event):
        self.episodes += 1


class KillServer(RuntimeHooks):
    """Kills ``process`` with SIGKILL on the ``at``-th step of route ``route_id``."""

    def __init__(self, process, route_id: str, at: int) -> None:
        self.process, self.route_id, self.at, self.steps = process, route_id, at, 0

    async def step_completed(self, event):
        if event.route.route_id == self.route_id:
            self.steps += 1
            if self.steps == self.at:
                self.process.kill()


@pytest.fixture
def doomed_fleet():
    """Three one-lane CartPole servers; the middle one is killed during the run."""
    servers = [serve_cartpole(1) for _ in range(3)]
    try:
        yield servers, [server.address() for server in servers]
    finally:
        for server in servers:
            server.finish(signal.SIGTERM)


def test_a_killed_server_ends_the_run_with_every_episode_counted_so_far(doomed_fleet):
    servers, addresses = doomed_fleet
    killer = KillServer(servers[1].process, fleet_route_id(1, 1), at=120)
    with pytest.raises(EvaluationError, match=rf"server {addresses[1]}") as caught:
        evaluate_fleet(
            addresses,
            "random",
            episodes=60,
            seed=SEED,
            progress=False,
            options=EvaluationOptions(hooks=[killer]),
        )
    partial = caught.value.partial
    assert not partial.complete and partial.reassigned_episodes == 0
    assert partial.servers[1].failure is not None and "transport" in partial.servers[1].failure
    assert partial.servers[0].failure is None and partial.servers[2].failure is None
    counted = {address: [e for e in partial.episodes if e.server == address] for address in addresses}
    assert all(counted[address] for address in addresses)  # every server's work is kept
    assert [s.episodes for s in partial.servers] == [len(counted[a]) for a in addresses]
    assert_same_as_in_process(partial.episodes, addresses, (1, 1, 1))


def test_reassignment_completes_the_run_on_the_surviving_servers(doomed_fleet, tmp_path):
    servers, addresses = doomed_fleet
    killer = KillServer(servers[1].process, fleet_route_id(1, 1), at=120)
    result = evaluate_fleet(
        addresses,
        "random",
        episodes=60,
        seed=SEED,
        on_server_failure="reassign",
        record=tmp_path / "run.rec",
        progress=False,
        options=EvaluationOptions(hooks=[killer]),
    )
    assert result.complete and len(result.episodes) == 60
    lost = result.servers[1]
    assert lost.failure is not None and 0 < lost.episodes < 20
    assert result.reassigned_episodes == 20 - lost.episodes
    survivors = result.servers[0], result.servers[2]
    assert [s.route_ids for s in survivors] == [
        ("server-0-lanes-1", "server-0-lanes-1-reassign-1"),
        ("server-2-lanes-1", "server-2-lanes-1-reassign-1"),
    ]
    assert sum(s.episodes for s in survivors) == 60 - lost.episodes
    assert "reassigned" in str(result) and "FAILED" in str(result)
    # The first round's episodes are the in-process ones; the reassigned ones come from new
    # routes whose seeds differ, every one of them distinct.
    first_round = [e for e in result.episodes if e.server == addresses[1]]
    assert_same_as_in_process(first_round, addresses, (1, 1, 1))
    assert len({e.seed for e in result.episodes}) == 60
    loaded = load_recording(tmp_path / "run.rec")
    assert {e.episode_id for e in result.episodes} <= {e.episode_id for e in loaded.episodes}


def test_one_model_server_serves_every_session_of_the_fleet(fleet):
    import asyncio

    from rlmesh_gym.evaluation import evaluate_fleet_async

    model = Served("serve-policy", "random", "--seed", "5", "--address", "127.0.0.1:0")
    try:
        result = asyncio.run(
            evaluate_fleet_async(fleet, policy_address=model.address(), episodes=9, seed=SEED, progress=False)
        )
    finally:
        model.finish(signal.SIGTERM)
    assert result.complete and result.policy.startswith("127.0.0.1:")
    assert result.episodes_per_lane == result.quotas == (1, 1, 1, 2, 2, 2)
    # Each session had its own route on the one model server; the env seeds are the fleet's.
    assert [e.seed for e in result.episodes if e.server == fleet[1]] == [
        seed for seed, _, _ in in_process_lanes(1, 1, 2)[0][:1]
    ]


def test_a_session_that_cannot_be_built_closes_every_model_connected_for_the_round(fleet, monkeypatch):
    import asyncio

    from rlmesh_gym.evaluation import evaluate_fleet_async
    from rlmesh_gym.evaluation.fleet import _Fleet
    from rlmesh_gym.policies import RandomPolicy
    from rlmesh_gym.serve import ModelServer, RemoteModel

    built, connected, closed = [], [], []

    def failing_part_record(self, server, round_, parts):
        built.append(server.index)
        if len(built) == 2:  # the second server's session: its model is connected already
            raise RuntimeError("cannot open the part recording")

    connect, close = RemoteModel.connect, RemoteModel.close

    async def counted_connect(*args, **kwargs):
        model = await connect(*args, **kwargs)
        connected.append(model)
        return model

    async def counted_close(self, *args, **kwargs):
        closed.append(self)
        return await close(self, *args, **kwargs)

    monkeypatch.setattr(_Fleet, "_part_record", failing_part_record)
    monkeypatch.setattr(RemoteModel, "connect", counted_connect)
    monkeypatch.setattr(RemoteModel, "close", counted_close)

    async def scenario():
        async with ModelServer(RandomPolicy(seed=5)) as server:
            with pytest.raises(RuntimeError, match="cannot open the part recording"):
                await evaluate_fleet_async(
                    fleet, policy_address=server.address, episodes=9, seed=SEED, progress=False
                )

    asyncio.run(scenario())
    assert built == [0, 1] and len(connected) == 2
    assert all(any(model is other for other in closed) for model in connected)


def test_a_recording_path_that_cannot_be_written_fails_before_any_episode(fleet, tmp_path):
    counted = CountEpisodes()
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.raises(OSError, match=f"cannot write recording file '{folder}': it is a directory"):
        evaluate_fleet(
            fleet,
            "random",
            episodes=8,
            seed=SEED,
            record=folder,
            progress=False,
            options=EvaluationOptions(hooks=[counted]),
        )
    assert counted.episodes == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["a-folder"]


def test_a_path_another_run_is_recording_to_is_refused_before_the_fleet_runs(fleet, tmp_path):
    from rlmesh_gym.envs import GymVectorEnv
    from rlmesh_gym.recording import EpisodeRecorder

    path = tmp_path / "run.rec"
    env = GymVectorEnv.make("CartPole-v1", num_envs=1)
    first = EpisodeRecorder(path, env.contract, base_seed=0)  # holds the file's lock until closed
    try:
        before = path.read_bytes()
        counted = CountEpisodes()
        with pytest.raises(OSError, match="another run is writing it"):
            evaluate_fleet(
                fleet,
                "random",
                episodes=8,
                seed=SEED,
                record=path,
                progress=False,
                options=EvaluationOptions(hooks=[counted]),
            )
        assert counted.episodes == 0 and path.read_bytes() == before
    finally:
        first.close()
        asyncio.run(env.close(5.0))


def test_a_failed_merge_keeps_the_parts_and_raises_with_the_result(fleet, tmp_path, monkeypatch):
    from rlmesh_gym.recording import fleet as recording_fleet

    write_merged = recording_fleet._write_merged

    class FullDisk:
        """A stream that takes 1,000 bytes, then fails as a full disk does."""

        def __init__(self, out):
            self.out, self.written = out, 0

        def write(self, data):
            if self.written + len(data) > 1000:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.written += len(data)
            return self.out.write(data)

        def flush(self):
            self.out.flush()

    monkeypatch.setattr(
        recording_fleet, "_write_merged", lambda out, *args: write_merged(FullDisk(out), *args)
    )
    path = tmp_path / "run.rec"
    path.write_bytes(b"an older file")
    with pytest.raises(EvaluationError) as caught:
        evaluate_fleet(fleet, "random", episodes=8, seed=SEED, record=path, progress=False)
    error = caught.value
    assert error.partial.complete and len(error.partial.episodes) == 8
    assert isinstance(error.__cause__, OSError) and error.__cause__.errno == errno.ENOSPC
    parts = sorted(tmp_path.glob("run.rec.part-*"))
    assert len(parts) == len(LANES) and all(str(part) in str(error) for part in parts)
    assert f"merging the fleet's recording into '{path}' failed" in str(error)
    assert path.read_bytes() == b"an older file"  # untouched: the merge replaces it only on success
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.rec", *(p.name for p in parts)]
    kept = [e.episode_id for part in parts for e in load_recording(part).episodes]
    assert {e.episode_id for e in error.partial.episodes} <= set(kept)

"""Ray scaling: a local Ray cluster's start-up, and env-steps/s of ``evaluate_on_ray`` with 1, 2 and 4
shards against in-process ``evaluate()`` of the same episodes.

The env is CartPole whose every step also costs ``--step-ms`` milliseconds, sleeping (``sleep``:
like an env waiting on a simulator process or I/O, so shards scale past the cores) or spinning
the CPU (``cpu``: like a physics step, so shards scale only up to the cores). The policy pushes
the cart the way the pole leans (numpy, row by row: about 40-step episodes, the same episodes
in-process and on any number of shards). ``--lanes`` lanes (default 4) each contribute
``--episodes-per-lane`` episodes.

Printed per workload and shard count (medians of ``--repeats`` runs on one cluster, after one
warm-up run that starts the workers):

  env-steps/s    the shards' env-steps over their sessions' wall time (first session start to
                 last session end), as ``result.timings`` reports it;
  end-to-end     the same env-steps over the call's whole wall time (submitting, the workers'
                 env and policy set-up, sending the episodes back);
  speed-up       end-to-end env-steps/s over in-process ``evaluate()``'s;
  shard start    per shard, the time from the call to its first episode's start (the task's
                 scheduling, a wait for a free CPU when there are more shards than CPUs, the
                 worker's imports, env build and cold reset): median and max over the shards.

Each shard asks Ray for ``--cpus-per-shard`` CPUs (default 1), so on a cluster of C CPUs at most
C / that many shards run at once; sleeping steps scale past the cores only with less than 1.

And once, at the top: the cluster's start-up (``ray.init``) and the first result (one shard, cold
workers) after it. The machine's cores and load average are printed before and after; the
verdict (sleeping steps on 2 shards at least 1.5x one shard's) only when the 1-minute load
average stayed at or below 1 throughout. Run it with nothing else running.

    python benchmarks/ray_scaling.py                           # sleep and cpu, 1 ms a step
    python benchmarks/ray_scaling.py --quick                   # a smoke test: small runs, no verdict
    python benchmarks/ray_scaling.py --shards 1 2 4 8 --lanes 8 --workloads sleep
    python benchmarks/ray_scaling.py --workloads sleep --cpus-per-shard 0.5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import gymnasium
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _costly_cartpole import CostlyCartPole  # noqa: E402

ENV_IDS = {"sleep": "SleepyCartPole-v1", "cpu": "SpinningCartPole-v1"}


# Registered wherever this module is imported: the Ray workers import it by the env id's prefix.
for _cost, _env_id in ENV_IDS.items():
    if _env_id not in gymnasium.registry:
        gymnasium.register(_env_id, entry_point=CostlyCartPole, kwargs={"step_ms": 1.0, "cost": _cost})


def push_towards_the_lean(obs: np.ndarray) -> np.ndarray:
    """Push the cart the way the pole leans (about 40-step episodes)."""
    return (obs[:, 2] > 0).astype(np.int64)


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _machine import load_line, no_verdict_reason

    from rlmesh_gym.evaluation import EvaluationOptions, RayCluster, evaluate, evaluate_on_ray
    from rlmesh_gym.evaluation._ray_cluster import connected

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4], help="shard counts M")
    parser.add_argument("--lanes", type=int, default=4, help="lanes N (at least the largest M)")
    parser.add_argument("--episodes-per-lane", type=int, default=8)
    parser.add_argument("--step-ms", type=float, default=1.0, help="the extra cost of one env step")
    parser.add_argument("--workloads", nargs="+", default=["sleep", "cpu"], choices=list(ENV_IDS))
    parser.add_argument("--cpus-per-shard", type=float, default=1.0, help="the Ray CPUs each shard asks for")
    parser.add_argument("--repeats", type=int, default=3, help="runs per cell (median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke test: 2 episodes a lane, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.episodes_per_lane, args.repeats = 2, 1
    if max(args.shards) > args.lanes:
        parser.error(f"--lanes {args.lanes} is fewer than the largest --shards {max(args.shards)}")

    load, text = load_line("before")
    loads = [load]
    print(text, flush=True)
    episodes = args.episodes_per_lane * args.lanes
    options = EvaluationOptions(env_kwargs={"step_ms": args.step_ms})

    def env_id(workload: str) -> str:
        return f"ray_scaling:{ENV_IDS[workload]}"  # the workers import this module to know the id

    def on_ray(workload: str, shards: int):
        started_ns = time.time_ns()
        started = time.perf_counter()
        result = evaluate_on_ray(
            env_id(workload),
            push_towards_the_lean,
            cluster=RayCluster("auto", shards=shards, cpus_per_shard=args.cpus_per_shard),
            episodes=episodes,
            num_envs=args.lanes,
            seed=args.seed,
            progress=False,
            options=options,
        )
        wall = time.perf_counter() - started
        starts = {}
        for record in result.episodes:
            first = starts.get(record.shard, record.start_timestamp_ns)
            starts[record.shard] = min(first, record.start_timestamp_ns)
        latencies = [(ns - started_ns) / 1e9 for ns in starts.values()]
        return result, wall, latencies

    began = time.perf_counter()
    with connected(RayCluster("local", num_cpus=os.cpu_count())):
        started = time.perf_counter() - began
        first = time.perf_counter()
        on_ray(args.workloads[0], 1)
        print(
            f"local cluster: ray.init {started:.2f} s; first result (1 shard, cold workers) "
            f"{time.perf_counter() - first:.2f} s after it",
            flush=True,
        )
        on_ray(args.workloads[0], max(args.shards))  # warm-up: every worker started
        verdict: list[str] = []
        for workload in args.workloads:
            reference = [
                evaluate(
                    env_id(workload),
                    push_towards_the_lean,
                    episodes=episodes,
                    num_envs=args.lanes,
                    seed=args.seed,
                    progress=False,
                    options=options,
                )
                for _ in range(args.repeats)
            ]
            base = statistics.median(r.timings.env_steps_per_second for r in reference)
            print(
                f"\n{workload}: CartPole-v1, step +{args.step_ms:g} ms ({workload}); {args.lanes} lanes, "
                f"{episodes} episodes; {args.cpus_per_shard:g} CPU(s) a shard\n"
                f"{'setup':<22}{'env-steps/s':>12}{'end-to-end':>12}{'speed-up':>10}{'shard start':>20}\n"
                f"{'in-process evaluate':<22}{base:>12,.0f}{base:>12,.0f}{1.0:>9.2f}x",
                flush=True,
            )
            rates = {}
            keys = [(e.lane, e.seed, e.episode_return, e.length) for e in reference[0].episodes]
            for shards in args.shards:
                runs = [on_ray(workload, shards) for _ in range(args.repeats)]
                for result, _, _ in runs:
                    got = [(e.lane, e.seed, e.episode_return, e.length) for e in result.episodes]
                    if sorted(got, key=repr) != sorted(keys, key=repr):
                        raise SystemExit(f"{shards} shard(s) played other episodes than evaluate()")
                session = statistics.median(r.timings.env_steps_per_second for r, _, _ in runs)
                end_to_end = statistics.median(r.timings.env_steps / wall for r, wall, _ in runs)
                latency = [max(lat) for _, _, lat in runs], [statistics.median(lat) for _, _, lat in runs]
                rates[shards] = end_to_end
                start = f"{statistics.median(latency[1]):.2f} / {statistics.median(latency[0]):.2f} s"
                print(
                    f"{f'{shards} shard(s)':<22}{session:>12,.0f}{end_to_end:>12,.0f}"
                    f"{end_to_end / base:>9.2f}x{start:>20}",
                    flush=True,
                )
                loads.append(os.getloadavg()[0])
            if workload == "sleep" and 1 in rates and 2 in rates:
                ratio = rates[2] / rates[1]
                verdict.append(f"sleeping steps on 2 shards: {ratio:.2f}x one shard's (goal >= 1.5x)")
    print("\n(shard start: median / max over the shards of the time from the call to their first episode)")
    load, text = load_line("after")
    loads.append(load)
    print(text)
    reason = no_verdict_reason(loads, args.quick, "runs")
    if reason is not None:
        print(reason)
    elif verdict:
        print("verdict: " + "; ".join(verdict))


if __name__ == "__main__":
    main()

"""Fleet scaling: env-steps/s of one evaluation over 1, 2 and 4 ``serve-env`` processes of a
step-costly env, beside one in-process ``evaluate()`` of the same lanes per process.

The env is CartPole whose every step also costs 2 ms: spinning the CPU (``--cost cpu``,
default, env id ``CostlyCartPole-v0``: like a physics or driving simulator) or sleeping
(``--cost sleep``, ``SleepyCartPole-v0``: like an env waiting on I/O or another process); or
highway-env's ``highway-fast-v0`` itself (``--cost highway``, needs ``pip install highway-env``).
Every server has ``--lanes`` lanes; the in-process baseline is one ``evaluate()`` of
``--lanes`` lanes, i.e. the work of one server. Each lane contributes ``--episodes-per-lane``
episodes of the random policy. Speed-up is fleet env-steps/s over the baseline's. CPU-bound
steps scale until the machine's cores run out (the evaluating process needs some too);
sleeping steps scale with the server count.

    python benchmarks/fleet_scaling.py                     # cpu, 2 lanes per server
    python benchmarks/fleet_scaling.py --cost sleep --servers 1 2 4 8
    python benchmarks/fleet_scaling.py --cost highway --lanes 1 --episodes-per-lane 1
"""

from __future__ import annotations

import os
import sys

import gymnasium

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _costly_cartpole import CostlyCartPole  # noqa: E402

ENV_IDS = {"cpu": "CostlyCartPole-v0", "sleep": "SleepyCartPole-v0", "highway": "highway-fast-v0"}
# The module a serve-env process imports to find each env id (gymnasium's "module:id" form).
ENV_MODULES = {"cpu": "fleet_scaling", "sleep": "fleet_scaling", "highway": "highway_env"}
STEP_MS = 2.0


for _cost, _env_id in ENV_IDS.items():
    if _cost != "highway" and _env_id not in gymnasium.registry:
        gymnasium.register(_env_id, entry_point=CostlyCartPole, kwargs={"step_ms": STEP_MS, "cost": _cost})


def main() -> None:
    import argparse
    import re
    import signal
    import subprocess
    import sys

    from rlmesh_gym.evaluation import evaluate, evaluate_fleet

    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--servers", type=int, nargs="+", default=[1, 2, 4], help="server counts to run")
    parser.add_argument("--lanes", type=int, default=2, help="lanes per server (and of the baseline)")
    parser.add_argument("--episodes-per-lane", type=int, default=12, help="episodes each lane contributes")
    parser.add_argument(
        "--cost", choices=tuple(ENV_IDS), default="cpu", help="spin the CPU, sleep, or highway-fast-v0"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    env_id = ENV_IDS[args.cost]
    if args.cost == "highway":
        try:
            import highway_env  # noqa: F401 - registers highway-fast-v0
        except ImportError:
            raise SystemExit("--cost highway needs highway-env: pip install highway-env") from None
    here = os.path.dirname(os.path.abspath(__file__))
    # The servers import this module (as fleet_scaling) to find the env id.
    python_path = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    child_env = {**os.environ, "PYTHONPATH": python_path}

    baseline = evaluate(
        env_id,
        "random",
        episodes=args.episodes_per_lane * args.lanes,
        num_envs=args.lanes,
        seed=args.seed,
        progress=False,
    )
    base_rate = baseline.timings.env_steps_per_second
    cores = os.cpu_count()
    cost = env_id if args.cost == "highway" else f"CartPole, step +{STEP_MS:g} ms ({args.cost})"
    print(f"{cores} CPU core(s); {cost}; {args.lanes} lane(s) per server")
    print(f"{'setup':<22}{'env-steps':>10}{'env-steps/s':>13}{'speed-up':>10}")
    print(f"{'in-process evaluate':<22}{baseline.timings.env_steps:>10}{base_rate:>13,.0f}{1.0:>9.2f}x")

    for count in args.servers:
        servers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "rlmesh_gym",
                    "serve-env",
                    f"{ENV_MODULES[args.cost]}:{env_id}",
                    "--num-envs",
                    str(args.lanes),
                    "--autoreset",
                    "disabled",
                    "--address",
                    "127.0.0.1:0",
                ],
                stdout=subprocess.PIPE,
                text=True,
                env=child_env,
            )
            for _ in range(count)
        ]
        try:
            addresses = []
            for server in servers:
                line = server.stdout.readline()  # the readiness line
                match = re.search(r" on (\S+)$", line)
                if match is None:
                    raise SystemExit(f"serve-env did not start: {line!r}")
                addresses.append(match.group(1))
            result = evaluate_fleet(
                addresses,
                "random",
                episodes=args.episodes_per_lane * args.lanes * count,
                seed=args.seed,
                progress=False,
            )
        finally:
            for server in servers:
                server.send_signal(signal.SIGTERM)
            for server in servers:
                server.wait(30)
        rate = result.timings.env_steps_per_second
        label = f"{count} serve-env"
        print(f"{label:<22}{result.timings.env_steps:>10}{rate:>13,.0f}{rate / base_rate:>9.2f}x")


if __name__ == "__main__":
    main()

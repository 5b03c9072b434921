"""Instructions executed by ``evaluate()`` and by a hand-written loop, counted with valgrind.

Instruction counts (valgrind callgrind) do not depend on the machine's load, unlike wall time.
Each side runs in a process of its own under callgrind, once with ``--runs 1`` and once with
``--runs 3``; the difference (two runs) cancels imports and start-up. Both sides evaluate the
same torch module greedily on CartPole-v1, K episodes on N lanes, one torch thread:

  hand      ``SyncVectorEnv`` (NEXT_STEP), seeded reset, ``policy(torch.as_tensor(obs)).argmax(1)``,
            per-lane returns and quotas (the loop of ``benchmarks/throughput.py``);
  evaluate  ``rlmesh_gym.evaluate(env_id, module, episodes=K, num_envs=N, seed=0, progress=False)``.

Workloads: **long** (the shipped CartPole policy, 500-step episodes) and **short** (a seeded
random-init MLP, about 9-step episodes).

    python benchmarks/evaluate_instructions.py                       # N=8, short, K=16
    python benchmarks/evaluate_instructions.py --lanes 1 --workload long --episodes 2
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lanes", type=int, default=8)
parser.add_argument("--workload", choices=["long", "short"], default="short")
parser.add_argument("--episodes", type=int, default=16)
parser.add_argument("--sides", nargs="+", default=["hand", "evaluate"], choices=["hand", "evaluate"])
parser.add_argument(
    "--extra",
    default="",
    help="python literal of extra evaluate() kwargs, e.g. \"dict(autoreset='next_step')\"",
)
parser.add_argument("--side", help=argparse.SUPPRESS)  # the child: run one side
parser.add_argument("--runs", type=int, help=argparse.SUPPRESS)
args = parser.parse_args()


def child() -> None:
    import gymnasium as gym
    import numpy as np
    import torch

    from rlmesh_gym.evaluation import evaluate
    from rlmesh_gym.policies.pretrained import load_pretrained

    torch.set_num_threads(1)
    if args.workload == "long":
        module = load_pretrained("cartpole")
    else:
        torch.manual_seed(0)
        module = torch.nn.Sequential(
            torch.nn.Linear(4, 64),
            torch.nn.Tanh(),
            torch.nn.Linear(64, 64),
            torch.nn.Tanh(),
            torch.nn.Linear(64, 2),
        ).eval()
    lanes, episodes = args.lanes, args.episodes
    extra = eval(args.extra) if args.extra else {}  # noqa: S307 - a benchmark's own command line

    def hand() -> None:
        envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(lanes)])
        quotas = np.array([(episodes + lane) // lanes for lane in range(lanes)])
        counts = np.zeros(lanes, dtype=np.int64)
        returns = np.zeros(lanes)
        lengths = np.zeros(lanes, dtype=np.int64)
        pending = np.zeros(lanes, dtype=bool)
        obs, _ = envs.reset(seed=list(range(lanes)))
        while (counts < quotas).any():
            with torch.inference_mode():
                actions = module(torch.as_tensor(obs)).argmax(dim=1).numpy()
            obs, rewards, terminated, truncated, _ = envs.step(actions)
            live = ~pending
            returns[live] += rewards[live]
            lengths[live] += 1
            done = (terminated | truncated) & live
            if done.any():
                for lane in np.flatnonzero(done):
                    if counts[lane] < quotas[lane]:
                        counts[lane] += 1
                returns[done] = 0.0
                lengths[done] = 0
            pending = done
        envs.close()

    def ours() -> None:
        evaluate("CartPole-v1", module, episodes=episodes, num_envs=lanes, seed=0, progress=False, **extra)

    run = hand if args.side == "hand" else ours
    for _ in range(args.runs):
        run()


def instructions(side: str, runs: int) -> int:
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        command = [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
            "--side", side, "--runs", str(runs), "--lanes", str(args.lanes), "--workload", args.workload,
            "--episodes", str(args.episodes), "--extra", args.extra,
        ]  # fmt: skip
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as file:
            match = re.search(r"^summary:\s+(\d+)", file.read(), re.MULTILINE)
    assert match is not None, "callgrind wrote no summary"
    return int(match.group(1))


if args.side:
    child()
else:
    counts = {side: (instructions(side, 3) - instructions(side, 1)) // 2 for side in args.sides}
    print(f"CartPole-v1 {args.workload}, N={args.lanes}, K={args.episodes}: instructions per run")
    for side, count in counts.items():
        print(f"  {side:<9} {count:>14,}")
    if "hand" in counts and "evaluate" in counts:
        print(f"  evaluate / hand: {counts['evaluate'] / counts['hand']:.3f}")

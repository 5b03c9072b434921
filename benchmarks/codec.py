"""Codec overhead: SpaceCodec.encode_batch + decode_batch against bare numpy in the same process.

The baseline is the least any codec can do for a raw batch: ``ndarray.tobytes()`` to encode and
``np.frombuffer(data, dtype).reshape(...)`` to decode. The codec adds its checks (dtype, shape,
payload length) on top. Goal: encode+decode within 1.5x of the baseline.

    python benchmarks/codec.py                 # 8 lanes, a few seconds
    python benchmarks/codec.py --repeats 200   # steadier numbers on a busy machine
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces.codec import SpaceCodec

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--lanes", type=int, default=8, help="batch size N")
parser.add_argument("--iterations", type=int, default=20000, help="calls per timing run (small payload)")
parser.add_argument("--image-iterations", type=int, default=500, help="calls per timing run (image payload)")
parser.add_argument("--repeats", type=int, default=40, help="timing runs per statement; the fastest counts")
parser.add_argument("--goal", type=float, default=1.5, help="ratio to meet for encode+decode")
args = parser.parse_args()

n = args.lanes
rng = np.random.default_rng(0)

# The two payloads of the issue: CartPole observations and 84x84 RGB frames, N lanes each.
cases = {
    "CartPole Box f32 (4,)": (
        spaces_pb2.SpaceSpec(
            shape=[4], dtype=spaces_pb2.D_TYPE_FLOAT32, box=spaces_pb2.BoxSpec(unbounded=True)
        ),
        rng.standard_normal((n, 4)).astype(np.float32),
        args.iterations,
    ),
    "Image Box u8 (84,84,3)": (
        spaces_pb2.SpaceSpec(
            shape=[84, 84, 3],
            dtype=spaces_pb2.D_TYPE_UINT8,
            box=spaces_pb2.BoxSpec(
                typed_uniform=spaces_pb2.TypedUniformBounds(low=b"\x00", high=b"\xff"),
            ),
        ),
        rng.integers(0, 256, (n, 84, 84, 3), dtype=np.uint8),
        args.image_iterations,
    ),
}


STATEMENTS = {
    "base_encode": "batch.tobytes()",
    "ours_encode": "codec.encode_batch(batch, n)",
    "base_decode": "np.frombuffer(data, dtype).reshape(shape)",
    "ours_decode": "codec.decode_batch(data, n)",
    "base_both": "np.frombuffer(batch.tobytes(), dtype).reshape(shape)",
    "ours_both": "codec.decode_batch(codec.encode_batch(batch, n), n)",
}

rows = []
for label, (spec, batch, number) in cases.items():
    codec = SpaceCodec(spec, name="obs")  # compiled once, as an adapter does
    data = codec.encode_batch(batch, n)
    assert data == batch.tobytes()
    assert np.array_equal(codec.decode_batch(data, n), np.frombuffer(data, batch.dtype).reshape(batch.shape))
    scope = {
        "np": np,
        "codec": codec,
        "batch": batch,
        "data": data,
        "n": n,
        "dtype": batch.dtype,
        "shape": batch.shape,
    }
    timers = {key: timeit.Timer(statement, globals=scope) for key, statement in STATEMENTS.items()}

    # Many short runs, each statement in turn, keeping the fastest: on a shared machine this
    # filters out the runs that other processes interrupted, for codec and baseline alike.
    best = dict.fromkeys(STATEMENTS, float("inf"))
    for _ in range(args.repeats):
        for key, timer in timers.items():
            best[key] = min(best[key], timer.timeit(number) / number * 1e6)
    base_encode, ours_encode, base_decode, ours_decode, base_both, ours_both = best.values()
    rows.append(
        (label, batch.nbytes, base_encode, ours_encode, base_decode, ours_decode, base_both, ours_both)
    )

print(f"\nSpaceCodec vs bare numpy, N={n} lanes, fastest of {args.repeats} runs (microseconds per call)\n")
header = (
    f"{'payload':<24} {'bytes':>8} | {'tobytes':>8} {'encode':>8} {'ratio':>6} | "
    f"{'frombuf':>8} {'decode':>8} {'ratio':>6} | {'bare e+d':>8} {'ours e+d':>8} {'ratio':>6}"
)
print(header)
print("-" * len(header))
worst = 0.0
for label, nbytes, base_e, ours_e, base_d, ours_d, base_b, ours_b in rows:
    ratio = ours_b / base_b
    worst = max(worst, ratio)
    print(
        f"{label:<24} {nbytes:>8} | {base_e:>8.3f} {ours_e:>8.3f} {ours_e / base_e:>5.2f}x | "
        f"{base_d:>8.3f} {ours_d:>8.3f} {ours_d / base_d:>5.2f}x | "
        f"{base_b:>8.3f} {ours_b:>8.3f} {ratio:>5.2f}x"
    )
verdict = "meets" if worst <= args.goal else "MISSES"
print(f"\nencode+decode: worst ratio {worst:.2f}x, {verdict} the {args.goal}x goal")

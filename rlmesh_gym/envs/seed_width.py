"""Seeds for envs that take only 32-bit seeds: :class:`SeedWidth` and :func:`fold_seed`.

The driver's per-lane seeds are 64-bit, as upstream rlmesh-runtime 0.1.0-rc.1 derives them.
Most envs take them (gymnasium's ``np_random`` accepts any int); envs that seed numpy's
legacy ``RandomState`` (MinAtar, dm_control through shimmy) refuse seeds from ``2**32`` on.
:class:`SeedWidth` learns, once per adapter, whether its env refuses them: before the first
reset that passes a seed of ``2**32`` or more, the unwrapped env of a lane being reset is reset
with that seed; if it refuses it (``ValueError`` or ``OverflowError``) and takes the seed folded
to 32 bits, every seed the env gets from then on is folded (:func:`fold_seed`). Every other env
keeps the driver's 64-bit seeds.

The question goes to the unwrapped env so that a refused reset leaves gymnasium's wrappers
(the env checker, order enforcing) as they were, and the lane is reset right after it anyway.
An ``AsyncVectorEnv``'s worker dies when its env raises, so there a throwaway env built from
the vector env's first env function is asked instead.

Seeds below ``2**32`` never change, and episodes record the seed the env got: a recorded seed
replays its episode through any adapter, served or not, or directly with ``env.reset(seed=...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv, VectorEnv

__all__ = ["SEED_LIMIT", "SeedWidth", "fold_seed", "lane_reset_probe"]

SEED_LIMIT = 2**32  # numpy RandomState's seeds are 0 .. 2**32 - 1

_Result = TypeVar("_Result")

# (lane, seed) -> None: resets that lane's env, unwrapped, with the seed, or raises as it does.
ResetProbe = Callable[[int, int], object]


def fold_seed(seed: int) -> int:
    """``seed`` as a 32-bit seed: unchanged below ``2**32``, else its 32-bit halves xor-ed together.

    >>> fold_seed(12345), fold_seed(6668194136985866374), fold_seed(2**32)
    (12345, 2968043450, 1)
    """
    while seed >= SEED_LIMIT:
        seed = (seed & (SEED_LIMIT - 1)) ^ (seed >> 32)
    return seed


def lane_reset_probe(env: VectorEnv | gymnasium.Env) -> ResetProbe:
    """How to ask ``env`` (as the adapter wraps it) whether a lane takes a seed."""
    unwrapped = env.unwrapped
    if isinstance(unwrapped, AsyncVectorEnv):
        make_env = unwrapped.env_fns[0]

        def throwaway(lane: int, seed: int) -> None:
            probe = make_env()
            try:
                probe.unwrapped.reset(seed=seed)
            finally:
                probe.close()

        return throwaway
    if isinstance(unwrapped, SyncVectorEnv):
        return lambda lane, seed: unwrapped.envs[lane].unwrapped.reset(seed=seed)
    return lambda lane, seed: unwrapped.reset(seed=seed)  # one env, or a custom vector env's one RNG


class SeedWidth:
    """Whether one env takes 64-bit seeds, learned before its first reset that needs to know.

    >>> class Narrow(gymnasium.Env):
    ...     observation_space = action_space = gymnasium.spaces.Discrete(2)
    ...     def reset(self, *, seed=None, options=None):
    ...         if seed is not None and seed >= 2**32:
    ...             raise ValueError("Seed must be between 0 and 2**32 - 1")
    ...         return 0, {"seed": seed}
    >>> env = Narrow()
    >>> width = SeedWidth(lane_reset_probe(env))
    >>> width.reset(lambda seed: env.reset(seed=seed), 6668194136985866374)
    (0, {'seed': 2968043450})
    >>> width.narrow, width.given([6668194136985866374, 7, None])
    (True, [2968043450, 7, None])
    """

    def __init__(self, probe: ResetProbe) -> None:
        self._probe = probe
        self.narrow: bool | None = None  # None until a seed of 2**32 or more has been asked for

    def reset(self, reset: Callable[[Any], _Result], seed: Any) -> _Result:
        """``reset(seed)`` with the seeds as the env takes them (:meth:`given` says which they were).

        ``seed`` is a reset's ``seed`` argument: an int, ``None`` or one of them per lane.
        """
        if self.narrow is None:
            lanes = seed if isinstance(seed, list) else [seed]
            wide = [(lane, s) for lane, s in enumerate(lanes) if s is not None and s >= SEED_LIMIT]
            if wide:
                self.narrow = self._refuses(*wide[0])
        if not self.narrow:
            return reset(seed)
        if isinstance(seed, list):
            return reset([None if lane is None else fold_seed(lane) for lane in seed])
        return reset(None if seed is None else fold_seed(seed))

    def given(self, seeds: list[int | None]) -> list[int | None]:
        """The seeds the env got for these requested seeds, once :meth:`reset` has run with them."""
        if not self.narrow:
            return seeds
        return [None if seed is None else fold_seed(seed) for seed in seeds]

    def _refuses(self, lane: int, seed: int) -> bool:
        """Whether the lane's env refuses ``seed`` and takes it folded to 32 bits."""
        try:
            self._probe(lane, int(seed))
            return False
        except (ValueError, OverflowError):
            pass
        try:
            self._probe(lane, fold_seed(int(seed)))
        except Exception:
            return False  # refused for another reason too: the env's own reset will say which
        return True

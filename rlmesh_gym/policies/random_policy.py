"""``RandomPolicy``: uniformly random actions from the action ``SpaceSpec``, reproducible per route."""

from __future__ import annotations

import string
import time
from typing import Any

import numpy as np

from rlmesh_gym.policies._contract import ContractOrSpaces, PolicySpaces
from rlmesh_gym.policies._model import ActingPolicy
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.seams import ArrayPredictContext
from rlmesh_gym.spaces.codec import SpaceCodec
from rlmesh_gym.spaces.kinds import BOX, MULTI_DISCRETE

__all__ = ["RandomPolicy"]

# gymnasium.spaces.Text's default charset (an empty wire charset means "unrestricted").
_ALPHANUMERIC = tuple(string.digits + string.ascii_uppercase + string.ascii_lowercase)


class _Sampler:
    """Draws batches of one space's values, the way ``gymnasium.Space.sample`` draws one."""

    __slots__ = ("children", "chars", "codec", "high", "integral", "kind", "length", "low", "nvec", "parts")

    def __init__(self, codec: SpaceCodec) -> None:
        self.codec = codec
        self.kind = codec.kind
        self.children: tuple[_Sampler, ...] = tuple(_Sampler(child) for child in codec.children)
        spec = codec.spec
        if self.kind == "box":
            low, high = BOX.bounds(spec)
            self.integral = low.dtype.kind in "biu"
            self.low, self.high = low.reshape(-1), high.reshape(-1)
            if np.any(self.low > self.high):
                raise ValueError(f"{codec.name}: Box has low > high; there is nothing to sample")
            if not self.integral:
                # Gymnasium's rule per element: [a, b] uniform, [a, inf) a + exponential,
                # (-inf, b] b - exponential, (-inf, inf) standard normal.
                below, above = np.isfinite(self.low), np.isfinite(self.high)
                self.parts = (below & above, below & ~above, ~below & above, ~below & ~above)
        elif self.kind == "multi_discrete":
            # The codec has checked the declared sizes (nvec >= 1, Discrete n >= 1, Text lengths).
            self.nvec = MULTI_DISCRETE.nvec(spec).reshape(codec.shape)
        elif self.kind == "text":
            text = spec.text
            self.chars = tuple(text.charset) if text.charset else _ALPHANUMERIC
            self.length = (int(text.min_length), int(text.max_length))

    def sample(self, rng: np.random.Generator, rows: int) -> Any:
        """``rows`` values in gymnasium batch layout."""
        kind = self.kind
        shape = (rows, *self.codec.shape)
        if kind == "discrete":
            start, n = self.codec.spec.discrete.start, self.codec.spec.discrete.n
            return rng.integers(start, start + n, size=rows, dtype=np.int64)
        if kind == "multi_binary":
            return rng.integers(0, 2, size=shape, dtype=np.uint8)
        if kind == "multi_discrete":
            return rng.integers(0, self.nvec, size=shape, dtype=np.int64)
        if kind == "box":
            return self._sample_box(rng, rows, shape)
        if kind == "text":
            lengths = rng.integers(self.length[0], self.length[1] + 1, size=rows)
            return tuple("".join(rng.choice(self.chars, size=int(length))) for length in lengths)
        batches = [child.sample(rng, rows) for child in self.children]
        if kind == "dict":
            return dict(zip(self.codec.keys, batches, strict=True))
        return tuple(batches)

    def _sample_box(self, rng: np.random.Generator, rows: int, shape: tuple[int, ...]) -> np.ndarray:
        dtype = self.codec.numpy_dtype
        if self.integral:
            # Inclusive integer bounds, exact for every integer dtype (uint64 included).
            native = self.low.dtype if self.low.dtype.kind != "b" else np.dtype(np.int64)
            drawn = rng.integers(
                self.low.astype(native),
                self.high.astype(native),
                size=(rows, self.low.size),
                dtype=native,
                endpoint=True,
            )
            return drawn.astype(dtype).reshape(shape)
        sample = np.empty((rows, self.low.size))
        bounded, low_only, high_only, unbounded = self.parts
        sample[:, bounded] = rng.uniform(
            self.low[bounded], self.high[bounded], size=(rows, int(bounded.sum()))
        )
        sample[:, low_only] = self.low[low_only] + rng.exponential(size=(rows, int(low_only.sum())))
        sample[:, high_only] = self.high[high_only] - rng.exponential(size=(rows, int(high_only.sum())))
        sample[:, unbounded] = rng.normal(size=(rows, int(unbounded.sum())))
        return sample.astype(dtype).reshape(shape)


class RandomPolicy(ActingPolicy[np.random.Generator]):
    """A ``RuntimeModel`` that ignores observations and samples one random action per slot.

    Sampling follows ``gymnasium.Space.sample``: a Box draws each element uniformly from
    ``[low, high]`` (integer Boxes: inclusive integers), ``low + Exponential(1)`` when only the
    low bound is finite, ``high - Exponential(1)`` when only the high one is, and a standard
    normal when neither is; Discrete draws from ``[start, start + n)``; MultiBinary 0/1;
    MultiDiscrete ``[0, nvec)``; Text a length in ``[min_length, max_length]`` then characters
    from the charset (gymnasium's 62 alphanumerics when the charset is empty); Dict and Tuple
    recurse.

    Reproducibility: each route ``(session_id, route_id)`` has its own numpy ``Generator``
    seeded from ``seed`` and the route identity, so the same seed and route ids give the same
    actions whatever ran before; ``close_route`` drops the route's generator.

    Example:
        >>> import asyncio
        >>> from rlmesh_gym.proto import model_pb2, spaces_pb2
        >>> from rlmesh_gym.runtime.message_form import MessageFormModel
        >>> spec = spaces_pb2.SpaceSpec(dtype=spaces_pb2.D_TYPE_INT64,
        ...                             discrete=spaces_pb2.DiscreteSpec(n=100))
        >>> request = model_pb2.PredictRequest()
        >>> request.context.session_id, request.context.route_id = "session", "route"
        >>> _ = request.context.slots.add(env_index=0, episode_id="episode-0")
        >>> request.observation.bytes.data = bytes(8)
        >>> def actions(policy):
        ...     return asyncio.run(MessageFormModel(policy).predict(request)).response.action.bytes.data
        >>> actions(RandomPolicy(7, (spec, spec))) == actions(RandomPolicy(7, (spec, spec)))
        True
    """

    _sampler: _Sampler  # set by bind()

    def __init__(
        self,
        seed: int | None = None,
        contract_or_spaces: ContractOrSpaces | None = None,
        *,
        component_id: str = "model",
    ) -> None:
        if isinstance(seed, (env_pb2.EnvContract, tuple, list)):
            raise TypeError(
                "RandomPolicy: the first argument is the seed; pass the contract as "
                "RandomPolicy(seed, contract) or RandomPolicy(contract_or_spaces=contract)"
            )
        super().__init__(
            contract_or_spaces, seed=seed, component_id=component_id, rng_factory=np.random.default_rng
        )

    def _compile(self, spaces: PolicySpaces) -> None:
        self._sampler = _Sampler(self._action_codec)

    def _act(self, observations: Any, rows: int, context: ArrayPredictContext) -> tuple[Any, int]:
        rng = self._route_rng(context)
        start = time.perf_counter_ns()
        actions = self._sampler.sample(rng, rows)
        return actions, time.perf_counter_ns() - start

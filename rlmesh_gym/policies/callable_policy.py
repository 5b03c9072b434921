"""``CallablePolicy``: a plain numpy function from an observation batch to an action batch."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rlmesh_gym.policies._contract import ContractOrSpaces, PolicySpaces
from rlmesh_gym.policies._model import ActingPolicy
from rlmesh_gym.runtime.seams import ArrayPredictContext

__all__ = ["CallablePolicy"]


class CallablePolicy(ActingPolicy[None]):
    """A ``RuntimeModel`` around ``fn(observations) -> actions`` on numpy batches.

    ``fn`` receives the whole observation batch in gymnasium's vector layout, as the codec
    decodes it: an array with one row per slot for Box/Discrete/MultiBinary/MultiDiscrete
    (a read-only view of the request bytes: copy it before writing), a dict of batches for
    Dict, a tuple of batches for Tuple and a tuple of str for Text. It returns the action
    batch in the same layout: anything ``numpy.asarray`` accepts (an array, a list of ints,
    ...) with one row per slot, a dict/tuple of such batches, or a sequence of str for Text.

    Actions are checked before encoding (see ``docs/policies.md``): shape ``(N, *shape)``
    (``(N, 1)`` is also accepted for Discrete), whole numbers for integer kinds (floats such
    as ``1.0`` are cast), values inside the Discrete/MultiDiscrete/MultiBinary domain, no NaN
    in float Boxes. A mismatch raises ``ModelRpcError`` naming what ``fn`` returned and the
    expected layout.

    Example (CartPole: push towards the side the pole leans to):
        >>> import asyncio
        >>> import numpy as np
        >>> from rlmesh_gym.proto import model_pb2, spaces_pb2
        >>> from rlmesh_gym.runtime.message_form import MessageFormModel
        >>> obs = spaces_pb2.SpaceSpec(shape=[4], dtype=spaces_pb2.D_TYPE_FLOAT32,
        ...                            box=spaces_pb2.BoxSpec(unbounded=True))
        >>> act = spaces_pb2.SpaceSpec(dtype=spaces_pb2.D_TYPE_INT64, discrete=spaces_pb2.DiscreteSpec(n=2))
        >>> policy = CallablePolicy(lambda batch: (batch[:, 2] > 0).astype(np.int64), (obs, act))
        >>> request = model_pb2.PredictRequest()
        >>> _ = request.context.slots.add(env_index=0, episode_id="episode-0")
        >>> request.observation.bytes.data = np.array([[0.0, 0.0, 0.1, 0.0]], dtype=np.float32).tobytes()
        >>> asyncio.run(MessageFormModel(policy).predict(request)).response.action.bytes.data.hex()
        '0100000000000000'
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        contract_or_spaces: ContractOrSpaces | None = None,
        *,
        component_id: str = "model",
    ) -> None:
        if not callable(fn):
            raise TypeError(f"CallablePolicy: fn must be callable, got {type(fn).__name__} {fn!r:.60}")
        self.fn = fn
        super().__init__(contract_or_spaces, seed=None, component_id=component_id)

    def _compile(self, spaces: PolicySpaces) -> None:
        """Nothing beyond the shared codecs and action plan."""

    def _act(self, observations: Any, rows: int, context: ArrayPredictContext) -> tuple[Any, int]:
        start = time.perf_counter_ns()
        try:
            actions = self.fn(observations)
        except Exception as error:
            raise self._fail(
                f"policy function {self._name()} raised {type(error).__name__}: {error}{_numpy_hint(error)}",
                error,
            ) from error
        elapsed = time.perf_counter_ns() - start
        return self._check_actions(actions, rows, f"policy function {self._name()}"), elapsed

    def _name(self) -> str:
        return getattr(self.fn, "__name__", None) or type(self.fn).__name__


def _numpy_hint(error: Exception) -> str:
    """Why a function that expected tensors got numpy arrays, when its error says it did."""
    if not (isinstance(error, AttributeError) and "'numpy." in str(error)):
        return ""
    return (
        ". It was given numpy arrays: a function gets torch tensors only when its first parameter "
        "is annotated torch.Tensor (def policy(obs: torch.Tensor): ...); a lambda cannot be annotated, "
        "so use such a def or pass TorchPolicy(fn)"
    )

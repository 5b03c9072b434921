"""What every policy shares as a ``RuntimeModel``: spaces binding, request checks, response, telemetry.

A subclass compiles its spaces once in ``_compile`` and answers ``_act(observations, rows,
context)`` with the action batch (values, checked against the action space) and the
nanoseconds its policy call took. This base serves that in both forms of the model seam:
:meth:`PolicyModel.predict_arrays` (arrays in, arrays out: what the driver calls in-process)
and :meth:`PolicyModel.predict` (message bytes in and out, with a ``context`` equal to the
request's: what a model server calls), and keeps one seeded random stream per route for
stochastic policies.
"""

from __future__ import annotations

import hashlib
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from rlmesh_gym.policies._actions import ActionMismatch, ActionPlan
from rlmesh_gym.policies._contract import PolicySpaces, resolve_spaces
from rlmesh_gym.proto import model_pb2, spaces_pb2
from rlmesh_gym.runtime.errors import ModelRpcError
from rlmesh_gym.runtime.seams import ArrayPredictContext, ModelActionBatch
from rlmesh_gym.runtime.telemetry import EndpointTelemetry
from rlmesh_gym.spaces.batch import SpaceBatch
from rlmesh_gym.spaces.codec import CodecError, SpaceCodec
from rlmesh_gym.spaces.kinds import describe_space

__all__ = ["ActingPolicy", "PolicyModel", "check_seed", "route_seed"]

RngT = TypeVar("RngT")
_SelfT = TypeVar("_SelfT", bound="PolicyModel[Any]")


def route_seed(seed: int | None, session_id: str, route_id: str) -> int:
    """The 63-bit seed of one route's random stream: a hash of ``seed`` and the route identity.

    With ``seed=None`` every call draws fresh entropy, so unseeded routes are independent.
    """
    if seed is None:
        return secrets.randbits(63)
    digest = hashlib.blake2b(digest_size=8)
    for part in (str(seed), session_id, route_id):
        encoded = part.encode()
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return int.from_bytes(digest.digest(), "little") >> 1


def check_seed(seed: object, owner: str) -> int | None:
    """``seed`` if it is ``None`` or a non-negative int; a clear error otherwise."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"{owner}: seed must be None or a non-negative int, got {seed!r}")
    return seed


class PolicyModel(ABC, Generic[RngT]):
    """Base of the policy adapters (not public): spaces, ``bind``, request checks and ``close_route``.

    Routes: the policy object serves any number of routes. It owns one random stream per
    ``(session_id, route_id)``, created on the route's first predict from
    :func:`route_seed`; ``close_route`` drops that stream and nothing else, is idempotent,
    and a later predict on the same route starts it again (a reconfigured route replays the
    same draws).
    """

    component_id: str
    # Set by bind() (predict checks _spaces first, so these exist whenever they are used).
    _observation_codec: SpaceCodec
    _action_codec: SpaceCodec
    _action_plan: ActionPlan

    runs_inline = True
    """Every policy computes inside the ``await`` (:class:`~rlmesh_gym.runtime.seams.RunsInline`)."""

    def __init__(
        self,
        contract_or_spaces: object,
        *,
        seed: int | None,
        component_id: str,
        rng_factory: Callable[[int], RngT] | None = None,
    ) -> None:
        if not isinstance(component_id, str):
            raise TypeError(f"{type(self).__name__}: component_id must be a str, got {component_id!r}")
        self.component_id = component_id
        self.seed = check_seed(seed, type(self).__name__)
        self._spaces: PolicySpaces | None = None
        self._rng_factory = rng_factory
        self._route_rngs: dict[tuple[str, str], RngT] = {}
        self._telemetry = EndpointTelemetry("model.predict")
        if contract_or_spaces is not None:
            self.bind(contract_or_spaces)

    @property
    def observation_spec(self) -> spaces_pb2.SpaceSpec | None:
        """The per-lane observation space, or ``None`` before :meth:`bind`."""
        return None if self._spaces is None else self._spaces.observation

    @property
    def action_spec(self) -> spaces_pb2.SpaceSpec | None:
        """The per-lane action space, or ``None`` before :meth:`bind`."""
        return None if self._spaces is None else self._spaces.action

    def bind(self: _SelfT, contract_or_spaces: object) -> _SelfT:
        """Give the policy its spaces (an ``EnvContract`` or an ``(observation, action)`` pair).

        Binding again with identical spaces is a no-op; different spaces are refused with a
        ``ValueError``, since the policy was built for the first ones.
        """
        owner = type(self).__name__
        spaces = resolve_spaces(contract_or_spaces, owner)
        if self._spaces is None:
            try:
                observation_codec = SpaceCodec(spaces.observation, name="observation")
                action_codec = SpaceCodec(spaces.action, name="action")
                action_plan = ActionPlan(action_codec)
            except ValueError as error:
                raise ValueError(f"{owner}: cannot serve {spaces.describe()}: {error}") from error
            self._observation_codec, self._action_codec = observation_codec, action_codec
            self._action_plan = action_plan
            self._compile(spaces)
            self._spaces = spaces
        elif not spaces.same_as(self._spaces):
            raise ValueError(
                f"{type(self).__name__} is bound to {self._spaces.describe()}; refusing to rebind it to "
                f"{spaces.describe()}. Build a new policy for a different environment"
            )
        return self

    @abstractmethod
    def _compile(self, spaces: PolicySpaces) -> None:
        """Prepare everything ``_act`` needs for ``spaces``; raise ValueError/TypeError if unusable."""

    def _route_rng(self, context: ArrayPredictContext) -> RngT:
        """The random stream of the request's route, created from :func:`route_seed` on first use."""
        key = (context.session_id, context.route_id)
        rng = self._route_rngs.get(key)
        if rng is None:
            if self._rng_factory is None:
                raise TypeError(f"{type(self).__name__} was built without a random stream factory")
            rng = self._route_rngs[key] = self._rng_factory(route_seed(self.seed, *key))
        return rng

    def _fail(self, message: str, cause: BaseException | None = None) -> ModelRpcError:
        error = ModelRpcError(self.component_id, message)
        error.__cause__ = cause
        return error

    def _decode_observation(self, data: bytes, rows: int) -> Any:
        """The observation batch (codec layout) of ``rows`` lanes, or a ModelRpcError saying why not."""
        codec = self._observation_codec
        try:
            return codec.decode_batch(data, rows)
        except CodecError as error:
            got = self._observation_rows(data)
            if got is not None and got != rows:
                raise self._fail(
                    f"the observation batch has {got} row(s) but the request context has {rows} slot(s); "
                    "expected one observation row per slot",
                    error,
                ) from error
            raise self._fail(
                f"the observation batch does not decode as {describe_space(codec.spec)}: {error}",
                error,
            ) from error

    def _observation_rows(self, data: bytes) -> int | None:
        """How many rows ``data`` holds, if that can be told at all."""
        codec = self._observation_codec
        if codec.lane_nbytes:
            whole, rest = divmod(len(data), codec.lane_nbytes)
            return None if rest else whole
        if codec.kind in ("text", "dict", "tuple"):
            try:
                return len(spaces_pb2.ValueList.FromString(data).items)
            except Exception:  # any parse failure: the row count is unknown
                return None
        return None

    def _check_actions(self, values: Any, rows: int, who: str) -> Any:
        """``values`` (codec batch layout) checked against the action space."""
        try:
            return self._action_plan.check(values, rows)
        except ActionMismatch as error:
            raise self._fail(error.explain(who), error) from error

    def _observations(self, observation: SpaceBatch | None, rows: int) -> Any:
        """The decoded observation batch of ``rows`` lanes, or a ModelRpcError saying why not."""
        if observation is None:
            return self._decode_observation(b"", rows)
        if (
            observation.has_values
            and observation.rows == rows
            and self._observation_codec.same_space(observation.codec)
        ):
            return observation.values
        return self._decode_observation(observation.data, rows)

    def _rows(self, context: ArrayPredictContext) -> int:
        """The request's row count, once the policy is known to be usable for it."""
        if self._spaces is None:
            raise ModelRpcError(
                self.component_id,
                f"{type(self).__name__} has no spaces yet: pass an EnvContract (or an "
                "(observation_spec, action_spec) pair) when building it, or call .bind(contract) "
                "before predict",
            )
        rows = context.rows
        if rows == 0:
            raise ModelRpcError(
                self.component_id,
                f"predict request {context.message().request_id!r} has no slots; "
                "expected one slot per observation row",
            )
        return rows

    async def close_route(self, request: model_pb2.CloseRouteRequest, timeout: float) -> None:
        """Forget the route's random stream (if any). Idempotent; the policy itself stays usable."""
        context = request.context
        self._route_rngs.pop((context.session_id, context.route_id), None)


class ActingPolicy(PolicyModel[RngT]):
    """A :class:`PolicyModel` whose subclass answers ``_act``; this class serves it as ``predict_arrays``."""

    @abstractmethod
    def _act(self, observations: Any, rows: int, context: ArrayPredictContext) -> tuple[Any, int]:
        """The checked action batch for ``rows`` decoded observations, and the policy-call time in ns."""

    async def predict_arrays(
        self, observation: SpaceBatch | None, context: ArrayPredictContext
    ) -> ModelActionBatch:
        """One action row per observation row.

        Raises:
            ModelRpcError: no spaces yet, no slots, an observation batch whose row count
                differs from the slot count or that does not decode, a failing policy call,
                or a policy output that does not fit the action space.
        """
        rows = self._rows(context)
        actions, forward_ns = self._act(self._observations(observation, rows), rows, context)
        try:
            batch = SpaceBatch.from_values(self._action_codec, actions, rows)
        except CodecError as error:
            raise self._fail(f"the actions do not encode: {error}", error) from error
        return ModelActionBatch(batch, self._telemetry.stamp(forward_ns))

"""``TorchPolicy``: any PyTorch policy (module, ``torch.export`` program, TorchScript, callable on
tensors) as a ``RuntimeModel``."""

from __future__ import annotations

import itertools
import math
import sys
import warnings
from collections.abc import Callable, Mapping
from functools import partial
from os import PathLike, fspath
from time import perf_counter_ns
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributions import (
    Bernoulli,
    Categorical,
    Distribution,
    Independent,
    Normal,
    OneHotCategorical,
    TransformedDistribution,
)

from rlmesh_gym.policies._actions import (
    ActionMismatch,
    ActionPlan,
    LeafPlan,
    check_dict_keys,
    describe_value,
)
from rlmesh_gym.policies._contract import ContractOrSpaces, PolicySpaces
from rlmesh_gym.policies._model import PolicyModel
from rlmesh_gym.policies._module_call import FORWARD, LAYERS, calls_forward_only, forward_plan
from rlmesh_gym.policies._torch_export import ExportedPolicy
from rlmesh_gym.policies._torch_loading import load_policy_file
from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.runtime.seams import ArrayPredictContext, ModelActionBatch
from rlmesh_gym.spaces.batch import SpaceBatch
from rlmesh_gym.spaces.codec import CodecError, SpaceCodec

__all__ = ["TorchPolicy"]

# Read-only observation arrays up to this size are copied (cheaper than silencing torch's
# "not writable" warning, and the policy may then write to them); larger ones are shared.
_COPY_LIMIT = 64 * 1024
_NOT_WRITABLE = "The given NumPy array is not writable"
_Tensor = torch.Tensor
# torch.inference_mode() is a Python wrapper that makes this C++ guard at every entry; entered
# directly, the guard costs a third as much on the per-step path (torch 2.x). Same semantics.
_inference_mode = getattr(torch._C, "_InferenceMode", None) or torch.inference_mode


def _seeded_generator(device: torch.device, seed: int) -> torch.Generator:
    """A torch generator on ``device`` seeded with ``seed`` (a route's sampling stream)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def _tensor_from_array(array: np.ndarray) -> torch.Tensor:
    """A CPU tensor of ``array``: shared when writable or large, a private copy when small and read-only."""
    if array.flags.writeable:
        return torch.from_numpy(array)
    if array.nbytes <= _COPY_LIMIT:
        return torch.from_numpy(array.copy())
    # Zero-copy view of the (read-only) message bytes. The filter is scoped to this call.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_NOT_WRITABLE, category=UserWarning)
        return torch.from_numpy(array)


def _observation_converter(codec: SpaceCodec, device: torch.device) -> Callable[[Any], Any]:
    """A function from the codec's decoded batch to tensors on ``device`` (same nesting)."""
    if codec.raw:
        to_bfloat16 = codec.spec.dtype == spaces_pb2.D_TYPE_BFLOAT16
        if device.type == "cpu" and not to_bfloat16:
            return _tensor_from_array

        def convert(array: np.ndarray) -> torch.Tensor:
            tensor = _tensor_from_array(array)
            return tensor.to(device=device, dtype=torch.bfloat16 if to_bfloat16 else tensor.dtype)

        return convert
    if codec.kind == "text":
        return lambda texts: texts
    converters = [_observation_converter(child, device) for child in codec.children]
    if codec.kind == "dict":
        pairs = list(zip(codec.keys, converters, strict=True))
        return lambda batch: {key: convert(batch[key]) for key, convert in pairs}
    return lambda batch: tuple(convert(part) for convert, part in zip(converters, batch, strict=True))


def describe_output(value: object) -> str:
    """A short description of what a torch policy returned, for error messages."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    if isinstance(value, Distribution):
        return (
            f"a {type(value).__name__} distribution (batch shape {tuple(value.batch_shape)}, "
            f"event shape {tuple(value.event_shape)})"
        )
    if isinstance(value, (tuple, list)):
        return (
            f"a {type(value).__name__} of {len(value)} items ({', '.join(type(v).__name__ for v in value)})"
        )
    return describe_value(value)


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    try:
        return tensor.numpy()  # the common case: a CPU tensor without grad of a numpy dtype
    except (RuntimeError, TypeError):
        pass
    if tensor.requires_grad:
        tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.numpy()


_NUMPY_FLOATS = (torch.float32, torch.float64, torch.float16)


def _cpu_float_array(tensor: torch.Tensor) -> np.ndarray | None:
    """``tensor``'s memory as a numpy array if it is a CPU float tensor without grad, else ``None``."""
    if tensor.dtype not in _NUMPY_FLOATS or not tensor.is_cpu or tensor.requires_grad:
        return None
    return tensor.numpy()


# Up to this many logits are summed in Python: numpy's reduction, run right after a torch
# forward, measured about 11 us on 8x2 logits against 3 us for the Python sum of their list.
_PYTHON_SUM_LIMIT = 256


def _all_finite(scores: np.ndarray) -> bool:
    """Whether the sum of ``scores`` is finite: every entry is, unless the sum overflowed (the
    full checks of :func:`_logits_problem` then decide)."""
    if scores.size <= _PYTHON_SUM_LIMIT:
        return math.isfinite(sum(scores.ravel().tolist()))
    return math.isfinite(scores.sum())


def _logits_problem(raw: torch.Tensor, logits: torch.Tensor) -> str | None:
    """Why no action follows from logits (NaN, +inf, or only -inf for one choice), or ``None``.

    ``raw`` is the policy's tensor (positions are reported in it), ``logits`` the same values
    padded to ``(..., n)``. The same refusal for argmax and sampling: argmax would silently pick
    index 0 for NaN.
    """
    # One reduction on the hot path: the sum is finite iff every entry is (or, rarely, it
    # overflowed, which the full checks below then clear).
    if math.isfinite(raw.sum().item()):
        return None
    for found, what in ((torch.isnan(raw), "NaN"), (torch.isposinf(raw), "+inf")):
        if bool(found.any()):
            return f"its logits hold {what} at {torch.nonzero(found)[0].tolist()}"
    dead = torch.isneginf(logits).all(-1)
    if bool(dead.any()):
        return f"its logits are all -inf at {torch.nonzero(dead)[0].tolist()}: no action has any probability"
    return None  # -inf entries mask actions out; the rest is finite


def _sample_categorical(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Indices drawn from the last axis of ``probs`` (any leading shape)."""
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])


def _distribution_mode(dist: Distribution) -> torch.Tensor:
    """The distribution's most likely value, with fallbacks where torch has no ``mode``."""
    if isinstance(dist, Independent):
        return _distribution_mode(dist.base_dist)
    if isinstance(dist, TransformedDistribution):
        # The base mode pushed through the transforms (e.g. tanh(mean) for a squashed Gaussian).
        value = _distribution_mode(dist.base_dist)
        for transform in dist.transforms:
            value = transform(value)
        return value
    if isinstance(dist, Bernoulli):
        return (dist.probs > 0.5).to(dist.probs.dtype)  # torch's mode is NaN at exactly 0.5
    if isinstance(dist, Categorical):
        return dist.probs.argmax(-1)
    if isinstance(dist, OneHotCategorical):
        probs = dist.probs
        return nn.functional.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)
    try:
        mode = dist.mode
    except NotImplementedError:
        mode = None
    # torch marks "no unique mode" with NaN (e.g. Uniform, Beta with a concentration < 1).
    if mode is not None and not (mode.is_floating_point() and torch.isnan(mode).any()):
        return mode
    try:
        mean = dist.mean
    except NotImplementedError:
        raise TypeError(f"{type(dist).__name__} implements neither mode nor mean") from None
    return mean if mode is None else torch.where(torch.isnan(mode), mean, mode)


def _distribution_sample(dist: Distribution, generator: torch.Generator) -> torch.Tensor:
    """One draw from ``dist`` using only ``generator`` (the global torch RNG is left untouched)."""
    if isinstance(dist, Independent):
        return _distribution_sample(dist.base_dist, generator)
    if isinstance(dist, TransformedDistribution):
        value = _distribution_sample(dist.base_dist, generator)
        for transform in dist.transforms:
            value = transform(value)
        return value
    if isinstance(dist, Categorical):
        return _sample_categorical(dist.probs, generator)
    if isinstance(dist, OneHotCategorical):
        probs = dist.probs
        return nn.functional.one_hot(_sample_categorical(probs, generator), probs.shape[-1]).to(probs.dtype)
    if isinstance(dist, Bernoulli):
        return torch.bernoulli(dist.probs, generator=generator)
    if isinstance(dist, Normal):
        loc = dist.loc
        noise = torch.randn(loc.shape, generator=generator, dtype=loc.dtype, device=loc.device)
        return loc + dist.scale * noise
    # Any other distribution samples with the global RNG: fork it, seed it from the route's
    # generator, and restore it afterwards, so draws stay reproducible and nothing leaks.
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device).item())
    kind = generator.device.type
    devices = [] if kind == "cpu" else list(range(torch.get_device_module(kind).device_count()))
    with torch.random.fork_rng(devices=devices, device_type="cuda" if kind == "cpu" else kind):
        if kind == "cpu":
            torch.random.default_generator.manual_seed(seed)
        else:
            torch.manual_seed(seed)
        return dist.sample()


class _ActionResolver:
    """Turns one node of a policy output (tensor, logits, distribution, dict, tuple) into checked actions."""

    __slots__ = (
        "children",
        "clip",
        "deterministic",
        "flat_columns",
        "flat_rows",
        "greedy_logits",
        "kind",
        "leaf",
        "max_n",
        "n",
        "pad_mask",
        "plan",
        "shape",
        "start",
        "total",
    )

    def __init__(self, plan: ActionPlan, device: torch.device, deterministic: bool, clip: bool) -> None:
        self.plan = plan
        self.kind = plan.kind
        self.leaf: LeafPlan | None = plan.leaf
        self.deterministic = deterministic
        self.clip = clip
        self.children = [
            (key, _ActionResolver(child, device, deterministic, clip)) for key, child in plan.children
        ]
        self.n = self.start = self.max_n = self.total = 0
        self.greedy_logits = False  # whether greedy() applies: deterministic over Discrete logits
        self.pad_mask: torch.Tensor | None = None
        self.flat_rows = self.flat_columns = None
        leaf = self.leaf
        self.shape: tuple[int, ...] = () if leaf is None else leaf.shape
        if leaf is None:
            return
        if self.kind == "discrete":
            self.start = int(leaf.spec.discrete.start)
            self.n = int(leaf.spec.discrete.n)
            self.greedy_logits = deterministic
        elif self.kind == "multi_discrete" and leaf.nvec is not None:
            nvec = leaf.nvec.reshape(-1)
            self.max_n = int(nvec.max()) if nvec.size else 0
            self.total = int(nvec.sum())
            # Padded logits (N, *shape, max_n): entries past nvec[i] are masked out.
            mask = np.arange(self.max_n)[None, :] >= nvec[:, None]
            self.pad_mask = torch.from_numpy(mask.reshape(*leaf.shape, self.max_n)).to(device)
            # Flat logits (N, sum(nvec)), as Stable-Baselines3's MultiCategorical: column c of
            # component i goes to padded position (i, c).
            self.flat_rows = torch.from_numpy(np.repeat(np.arange(nvec.size), nvec)).to(device)
            columns = np.concatenate([np.arange(k) for k in nvec]) if nvec.size else np.zeros(0, np.int64)
            self.flat_columns = torch.from_numpy(columns).to(device=device, dtype=torch.int64)

    def expected(self, rows: int) -> str:
        if self.leaf is None:
            return self.plan.expected(rows)
        return self.leaf.expected(rows) + self._hint(rows)

    def _hint(self, rows: int) -> str:
        """The forms a torch policy may return beyond plain actions."""
        if self.kind == "discrete":
            mapping = f" where logit i is action {self.start}+i" if self.start else ""
            return f", or logits of shape {(rows, self.n)}{mapping}, or a Distribution over them"
        if self.kind == "multi_discrete":
            padded = (rows, *self.shape, self.max_n)
            return f", or logits of shape {padded} or {(rows, self.total)}, or a Distribution over them"
        return ", or a Distribution with values of that shape"

    def greedy(self, output: object, rows: int) -> np.ndarray | None:
        """The common case, greedy actions from a Discrete space's finite logits on the CPU: the
        int64 actions (the codec's layout), or ``None`` for any other output (:meth:`resolve`
        decides those). In numpy: the same first-maximum argmax as torch's at a third of the
        calls' cost on small batches."""
        if self.greedy_logits and type(output) is _Tensor and output.shape == (rows, self.n):
            scores = _cpu_float_array(output)
            if scores is not None and _all_finite(scores):
                greedy = scores.argmax(-1)
                return greedy + self.start if self.start else greedy
        return None

    def resolve(
        self, output: object, rows: int, path: str, generator: Callable[[], torch.Generator]
    ) -> object:
        """``output`` as actions in the codec's batch layout and wire dtypes, or ActionMismatch."""
        greedy = self.greedy(output, rows)
        if greedy is not None:
            return greedy
        return self.resolve_general(output, rows, path, generator)

    def resolve_general(
        self, output: object, rows: int, path: str, generator: Callable[[], torch.Generator]
    ) -> object:
        """:meth:`resolve` for a caller that has already tried :meth:`greedy`."""
        leaf = self.leaf
        if leaf is None:
            return self._resolve_composite(output, rows, path, generator)
        from_distribution = False
        if type(output) is not _Tensor and isinstance(output, Distribution):
            from_distribution = True
            try:
                tensor = (
                    _distribution_mode(output)
                    if self.deterministic
                    else _distribution_sample(output, generator())
                )
            except (TypeError, RuntimeError, ValueError) as error:
                raise ActionMismatch(path, output, self.expected(rows), str(error)) from error
        elif isinstance(output, torch.Tensor):
            tensor = output
        else:
            raise ActionMismatch(path, output, self.expected(rows))
        if tensor.is_floating_point():
            logits = self._as_logits(tensor, rows)
            if logits is not None:
                problem = _logits_problem(tensor, logits)
                if problem is not None:
                    raise ActionMismatch(path, output, self.expected(rows), problem)
                if self.deterministic or from_distribution:
                    indices = logits.argmax(-1)
                else:
                    indices = _sample_categorical(torch.softmax(logits.float(), -1), generator())
                if self.start:
                    indices = indices + self.start
                return _to_numpy(indices)
        if from_distribution and self.start:
            tensor = tensor + self.start  # distribution values over Discrete are indices too
        try:
            array = _to_numpy(tensor)
        except TypeError as error:  # a dtype numpy cannot hold
            raise ActionMismatch(path, output, self.expected(rows), str(error)) from error
        return leaf.check(array, rows, path, clip=self.clip, original=output, hint=self._hint)

    def _as_logits(self, tensor: torch.Tensor, rows: int) -> torch.Tensor | None:
        """``tensor`` as padded logits ``(..., n)`` if it has a logits shape for this leaf."""
        shape = tensor.shape
        if self.kind == "discrete":
            return tensor if shape == (rows, self.n) else None
        if self.kind != "multi_discrete":
            return None
        leaf_shape = self.shape
        if self.pad_mask is not None and shape == (rows, *leaf_shape, self.max_n):
            return tensor.masked_fill(self.pad_mask, float("-inf"))
        if shape == (rows, self.total) and shape != (rows, *leaf_shape):
            padded = tensor.new_full((rows, int(np.prod(leaf_shape)), self.max_n), float("-inf"))
            padded[:, self.flat_rows, self.flat_columns] = tensor
            return padded.reshape(rows, *leaf_shape, self.max_n)
        return None

    def _resolve_composite(
        self, output: object, rows: int, path: str, generator: Callable[[], torch.Generator]
    ) -> object:
        if self.kind == "text":
            if isinstance(output, (torch.Tensor, Distribution)):
                raise ActionMismatch(path, output, self.expected(rows))
            return self.plan.check(output, rows, path)
        if self.kind == "dict":
            if not isinstance(output, Mapping):
                raise ActionMismatch(path, output, self.expected(rows))
            check_dict_keys(path, output, [key for key, _ in self.children], self.expected(rows))
            return {
                key: child.resolve(output[key], rows, f"{path}[{key!r}]", generator)
                for key, child in self.children
            }
        if not isinstance(output, (tuple, list)) or len(output) != len(self.children):
            raise ActionMismatch(path, output, self.expected(rows))
        return tuple(
            child.resolve(item, rows, f"{path}[{i}]", generator)
            for (i, child), item in zip(self.children, output, strict=True)
        )


SMALL_BATCH_ROWS = 64
"""The largest batch ``TorchPolicy(num_threads="auto")`` runs on one intra-op thread."""


def _thread_plan(num_threads: object) -> tuple[int | None, int]:
    """``(threads, up to rows)``: the intra-op threads a predict of at most that many rows runs on."""
    if num_threads == "auto":
        return 1, SMALL_BATCH_ROWS
    if num_threads is None:
        return None, 0
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"TorchPolicy: num_threads must be 'auto', None or an int >= 1, got {num_threads!r}")
    return num_threads, sys.maxsize


class TorchPolicy(PolicyModel[torch.Generator]):
    """A PyTorch policy serving a route: one batched forward per predict.

    Args:
        policy: an ``nn.Module`` (moved to ``device`` and put in eval mode, in place), a
            ``torch.export.ExportedProgram`` (run where it was exported, on CPU tensors), a
            TorchScript module, or any callable on tensors.
        contract_or_spaces: the route's ``EnvContract`` or an ``(observation_spec,
            action_spec)`` pair; may be ``None`` and given later with :meth:`bind`.
        device: where observations are placed and the policy runs.
        deterministic: take the argmax of logits and the mode of distributions; when
            ``False``, sample them with a seeded ``torch.Generator`` per route.
        seed: the sampling seed (``None``: fresh entropy per route). Each route
            ``(session_id, route_id)`` has its own generator derived from it, so the same seed
            and route ids give the same actions; ``close_route`` drops that generator.
        clip_actions: clip Box actions to the space's bounds (otherwise they pass unchanged).
        component_id: the model component id named in errors.
        num_threads: torch intra-op threads for each predict. ``"auto"`` (default): one thread
            for a batch of up to 64 rows (a few lanes gain nothing from more, and threads
            fighting other processes for the cores slow it down by orders of magnitude),
            torch's own setting for larger batches; an int: that many for every batch;
            ``None``: torch's setting (``torch.set_num_threads``), never changed. A changed
            count holds only during the predict: the caller's setting is restored after it.

    The policy is called once per predict with the observation batch, as ``policy(batch)``
    would call it (when that call would only run ``forward``, with no hooks, no compiled call
    and no tracing, ``forward`` is called directly, and an ``nn.Sequential``'s layers are run in
    turn by the same rule: ``rlmesh_gym/policies/_module_call.py``): a tensor of shape
    ``(N, *shape)`` for Box (its dtype), Discrete (int64, shape ``(N,)``), MultiBinary (uint8)
    and MultiDiscrete (int64); a dict of such tensors for Dict; a tuple for Tuple; a tuple of
    str for Text. In-process (:meth:`predict_arrays`) the tensors share memory with the step's
    observation batch, as ``torch.as_tensor`` would; from message bytes, batches up to 64 KiB
    are private copies and larger ones zero-copy views of the request bytes. Treat observation
    tensors as read-only.

    Accepted outputs, per action leaf (dicts/tuples of them for Dict/Tuple action spaces):

    * an action tensor of shape ``(N, *shape)``; integer kinds accept float tensors only
      when every value is a whole number; Discrete also accepts ``(N, 1)``;
    * for Discrete, float logits ``(N, n)``: argmax, or a seeded sample when not
      deterministic; index ``i`` means action ``start + i``;
    * for MultiDiscrete, float logits ``(N, *shape, max(nvec))`` (entries past ``nvec`` are
      ignored) or ``(N, sum(nvec))`` (concatenated per component, as in Stable-Baselines3);
    * a ``torch.distributions.Distribution``: its mode (``argmax`` of probabilities for
      Categorical, ``p > 0.5`` for Bernoulli, the base mode pushed through the transforms for
      TransformedDistribution, else ``.mode``, with ``.mean`` where torch has no mode or
      reports NaN), or a seeded sample. Values drawn for a Discrete leaf are indices
      (``start + i``).

    Anything else raises :class:`~rlmesh_gym.runtime.errors.ModelRpcError` naming the output
    and the expected layout.

    Example (the observation rows serve as logits):
        >>> import asyncio
        >>> from rlmesh_gym.proto import model_pb2, spaces_pb2
        >>> from rlmesh_gym.runtime.message_form import MessageFormModel
        >>> obs = spaces_pb2.SpaceSpec(shape=[2], dtype=spaces_pb2.D_TYPE_FLOAT32,
        ...                            box=spaces_pb2.BoxSpec(unbounded=True))
        >>> act = spaces_pb2.SpaceSpec(dtype=spaces_pb2.D_TYPE_INT64, discrete=spaces_pb2.DiscreteSpec(n=2))
        >>> policy = TorchPolicy(lambda batch: batch, (obs, act))
        >>> request = model_pb2.PredictRequest()
        >>> for lane in range(2):
        ...     _ = request.context.slots.add(env_index=lane, episode_id=f"episode-{lane}")
        >>> request.observation.bytes.data = bytes.fromhex("0000803f00000000" "000000000000803f")
        >>> messages = MessageFormModel(policy)  # the message form of the wire
        >>> asyncio.run(messages.predict(request)).response.action.bytes.data.hex()  # actions 0 and 1
        '00000000000000000100000000000000'
    """

    _source: str | None = None  # the file it was loaded from (TorchPolicy.load), named by __str__

    _observe: Callable[[Any], Any]  # set by bind()
    _resolver: _ActionResolver

    def __init__(
        self,
        policy: Callable[..., Any],
        contract_or_spaces: ContractOrSpaces | None = None,
        *,
        device: str | torch.device = "cpu",
        deterministic: bool = True,
        seed: int | None = None,
        clip_actions: bool = False,
        component_id: str = "model",
        num_threads: int | None | str = "auto",
    ) -> None:
        if not callable(policy):
            raise TypeError(
                f"TorchPolicy: policy must be an nn.Module, a TorchScript module or a callable on tensors, "
                f"got {type(policy).__name__}"
            )
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError) as error:
            raise ValueError(f"TorchPolicy: device {device!r} is not a torch device: {error}") from error
        for name, flag in (("deterministic", deterministic), ("clip_actions", clip_actions)):
            if not isinstance(flag, bool):
                raise TypeError(f"TorchPolicy: {name} must be a bool, got {flag!r}")
        # A batch of at most _small_batch_rows rows runs on _num_threads intra-op threads.
        self._num_threads, self._small_batch_rows = _thread_plan(num_threads)
        self.num_threads = num_threads
        if isinstance(policy, torch.export.ExportedProgram):
            policy = ExportedPolicy(policy, "ExportedProgram")
        if isinstance(policy, nn.Module):
            # Both walk every submodule: skipped when no tensor is elsewhere and no submodule is
            # training (the usual case), so a module's own to()/train() override runs only then.
            tensors = itertools.chain(policy.parameters(), policy.buffers())
            if any(tensor.device != self.device for tensor in tensors):
                policy.to(self.device)
            if any(module.training for module in policy.modules()):
                policy.eval()
        self.policy = policy
        self.deterministic = deterministic
        self.clip_actions = clip_actions
        super().__init__(
            contract_or_spaces,
            seed=seed,
            component_id=component_id,
            # Not a bound method: the policy would hold itself, a cycle only the GC frees.
            rng_factory=partial(_seeded_generator, self.device),
        )

    @classmethod
    def load(
        cls,
        path: str | PathLike[str],
        contract_or_spaces: ContractOrSpaces | None = None,
        *,
        factory: Callable[[], nn.Module] | None = None,
        allow_pickle: bool = False,
        **kwargs: Any,
    ) -> TorchPolicy:
        """A ``TorchPolicy`` around the policy saved at ``path``.

        * a ``torch.export`` program (``torch.export.save(program, "policy.pt2")``): its first
          input dimension is the batch, best exported dynamic (``dynamic_shapes=({0:
          torch.export.Dim("batch")},)``); a fixed batch size serves only batches of that size;
        * a TorchScript archive (``torch.jit.save``): loaded with ``torch.jit.load``;
        * a ``state_dict`` (``torch.save(module.state_dict(), path)``, or a checkpoint dict
          holding it under ``"state_dict"`` / ``"model_state_dict"``), loaded with
          ``weights_only=True``, or a safetensors file (``safetensors.torch.save_file``): loaded
          into ``factory()``, which must return the ``nn.Module``;
        * a whole pickled module (``torch.save(module, path)``): only with
          ``allow_pickle=True``, because unpickling runs code from the file.

        ``kwargs`` go to the constructor (``device``, ``deterministic``, ``seed``, ...).

        Raises:
            FileNotFoundError: ``path`` is not a file.
            ValueError: the file is not one of the forms above, a state_dict comes without a
                factory or does not fit it, or a pickled module without ``allow_pickle``.
            ImportError: a safetensors file, and the safetensors package is not installed.
            TypeError: ``factory`` does not return an ``nn.Module``.
        """
        try:
            device = torch.device(kwargs.get("device", "cpu"))
        except (RuntimeError, TypeError) as error:
            raise ValueError(
                f"TorchPolicy.load: device {kwargs.get('device')!r} is not a torch device"
            ) from error
        policy = load_policy_file(path, device, factory=factory, allow_pickle=allow_pickle)
        loaded = cls(policy, contract_or_spaces, **kwargs)
        loaded._source = fspath(path)
        return loaded

    def __str__(self) -> str:
        return self._source if self._source is not None else type(self).__qualname__

    def _compile(self, spaces: PolicySpaces) -> None:
        codec = self._observation_codec
        if isinstance(self.policy, ExportedPolicy):
            self.policy.check_observation(codec)
        self._observe = _observation_converter(codec, self.device)
        self._resolver = _ActionResolver(
            self._action_plan, self.device, self.deterministic, self.clip_actions
        )

    async def predict_arrays(
        self, observation: SpaceBatch | None, context: ArrayPredictContext
    ) -> ModelActionBatch:
        """One action row per observation row: one forward of the policy on the batch.

        Raises:
            ModelRpcError: no spaces yet, no slots, an observation batch whose row count
                differs from the slot count or that does not decode, a failing policy call,
                or a policy output that does not fit the action space.
        """
        rows = context.rows
        if self._spaces is None or rows == 0:
            self._rows(context)  # raises the error that says which
        if (
            observation is not None
            and observation.rows == rows
            and observation.has_values
            and self._observation_codec.same_space(observation.codec)
        ):
            observations = self._observe(observation.values)  # the env's own batch
        else:
            observations = self._observe(self._observations(observation, rows))
        threads = self._num_threads if rows <= self._small_batch_rows else None
        previous = torch.get_num_threads() if threads is not None else 0
        if previous == threads:
            threads = None  # already so: nothing to set or restore
        with _inference_mode(True):
            if threads is not None:
                torch.set_num_threads(threads)
            try:
                policy: Any = self.policy  # an nn.Module when the plan is LAYERS or FORWARD
                plan = forward_plan(policy)
                start = perf_counter_ns()
                try:
                    if plan == LAYERS:  # nn.Sequential's forward, each layer called as torch would
                        output = observations
                        for layer in policy._modules.values():
                            output = layer.forward(output) if calls_forward_only(layer) else layer(output)
                    elif plan == FORWARD:  # what policy(observations) would run
                        output = policy.forward(observations)
                    else:
                        output = policy(observations)
                except Exception as error:
                    raise self._fail(
                        f"policy {self._name()} raised {type(error).__name__}: {error} "
                        f"(called with {_describe_observations(observations)})",
                        error,
                    ) from error
                elapsed = perf_counter_ns() - start
                resolver = self._resolver
                greedy = resolver.greedy(output, rows)
                if greedy is None:
                    try:
                        actions = resolver.resolve_general(
                            output, rows, "action", lambda: self._route_rng(context)
                        )
                    except ActionMismatch as error:
                        raise self._fail(
                            error.explain(f"policy {self._name()}", describe_output), error
                        ) from error
            finally:
                if threads is not None:
                    torch.set_num_threads(previous)
        if greedy is not None:  # already int64 actions, one per row: nothing to normalise
            return ModelActionBatch(
                SpaceBatch.from_normalized(self._action_codec, greedy, rows), self._telemetry.stamp(elapsed)
            )
        try:
            batch = SpaceBatch.from_values(self._action_codec, actions, rows)
        except CodecError as error:
            raise self._fail(f"the actions do not encode: {error}", error) from error
        return ModelActionBatch(batch, self._telemetry.stamp(elapsed))

    def _name(self) -> str:
        policy = self.policy
        if isinstance(policy, nn.Module):
            return type(policy).__name__
        return getattr(policy, "__name__", None) or type(policy).__name__


def _describe_observations(observations: object) -> str:
    if isinstance(observations, dict):
        return (
            "{"
            + ", ".join(f"{key!r}: {_describe_observations(value)}" for key, value in observations.items())
            + "}"
        )
    if isinstance(observations, tuple) and not all(isinstance(item, str) for item in observations):
        return "(" + ", ".join(_describe_observations(item) for item in observations) + ")"
    return describe_output(observations)

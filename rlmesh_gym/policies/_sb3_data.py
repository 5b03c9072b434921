"""Reading a Stable-Baselines3 ``model.save()`` zip as data: its pickled entries without running code.

SB3 stores the constructor arguments of a model in the zip's JSON ``data`` record; the entries
that are not JSON (spaces, the policy class, schedules, buffer classes) are cloudpickled into
it, and ``cloudpickle.loads`` would run whatever the file says. This module unpickles them with
an allow-list (gymnasium spaces, numpy arrays and random generators, SB3 policy, schedule,
buffer and feature-extractor classes, torch activations and optimizers); an entry prediction
does not need (schedules, buffers, statistics) is replaced by a stand-in when it holds anything
else. The resulting objects go to SB3 as ``custom_objects``, so SB3 never unpickles an entry
itself; its ``.pth`` records are read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import inspect
import io
import pickle
from collections.abc import Mapping
from typing import Any

__all__ = ["PREDICTION_NEEDS", "UnsafeEntry", "data_only_objects"]

# The entries prediction reads: the model is built from them, so they must unpickle as data.
PREDICTION_NEEDS = frozenset({"observation_space", "action_space", "policy_class", "policy_kwargs"})
# Stand-ins SB3's _setup_model accepts for entries prediction never reads, used when the file
# pickles something the allow-list refuses there (e.g. a lambda schedule from an older SB3);
# any other such entry becomes None.
_STAND_INS: Mapping[str, Any] = {
    "learning_rate": 0.0,
    "lr_schedule": 0.0,
    "clip_range": 0.0,
    "clip_range_vf": None,
    "exploration_schedule": None,
    "rollout_buffer_class": None,
    "rollout_buffer_kwargs": {},
    "replay_buffer_class": None,
    "replay_buffer_kwargs": {},
    "target_entropy": "auto",
    "action_noise": None,
}

_EXACT = frozenset(
    {
        ("collections", "OrderedDict"),
        ("collections", "deque"),
        ("builtins", "frozenset"),
        ("builtins", "set"),
        ("builtins", "complex"),
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy.random._pickle", "__generator_ctor"),
        ("numpy.random._pickle", "__bit_generator_ctor"),
        ("numpy.random._pickle", "__randomstate_ctor"),
        ("numpy.random._pcg64", "PCG64"),
        ("numpy.random._pcg64", "PCG64DXSM"),
        ("numpy.random._mt19937", "MT19937"),
        ("numpy.random._philox", "Philox"),
        ("numpy.random._sfc64", "SFC64"),
        ("numpy.random.bit_generator", "SeedSequence"),
        ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
        ("stable_baselines3.common.utils", "FloatSchedule"),
        ("stable_baselines3.common.utils", "ConstantSchedule"),
        ("stable_baselines3.common.utils", "LinearSchedule"),
    }
)


def _allowed_class(module: str, name: str) -> Any:
    """The class ``module.name`` when it is a space, an SB3 policy, buffer or feature extractor, a
    torch activation or optimizer; otherwise ``None``. Only modules of those packages are imported."""
    if not module.startswith(("gymnasium.spaces", "stable_baselines3.", "torch.nn.modules.", "torch.optim.")):
        return None
    try:
        target = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    if not inspect.isclass(target):
        return None
    import gymnasium
    import torch
    from stable_baselines3.common.buffers import BaseBuffer
    from stable_baselines3.common.policies import BasePolicy
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    bases: tuple[type, ...] = (
        gymnasium.spaces.Space,
        BasePolicy,
        BaseFeaturesExtractor,
        BaseBuffer,
        torch.optim.Optimizer,
    )
    if issubclass(target, bases) or (
        module.startswith("torch.nn.modules.activation") and issubclass(target, torch.nn.Module)
    ):
        return target
    return None


class UnsafeEntry(Exception):
    """An entry of the data record pickles something outside the allow-list."""

    def __init__(self, key: str, what: str) -> None:
        super().__init__(f"pickles {what} in its data entry {key!r}")
        self.key = key


class _DataUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, key: str) -> None:
        super().__init__(io.BytesIO(data))
        self._key = key

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _EXACT:
            return super().find_class(module, name)
        target = _allowed_class(module, name)
        if target is None:
            raise UnsafeEntry(self._key, f"{module}.{name}")
        return target

    def persistent_load(self, pid: object) -> Any:
        raise UnsafeEntry(self._key, "a persistent reference")


def data_only_objects(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``custom_objects`` that stand for every pickled entry of SB3's parsed ``data`` record.

    Raises:
        UnsafeEntry: an entry prediction needs (spaces, policy class, policy arguments) pickles
            something outside the allow-list.
        ValueError: such an entry is damaged.
    """
    objects: dict[str, Any] = {}
    for key, item in data.items():
        if not (isinstance(item, dict) and ":serialized:" in item):
            continue
        try:
            raw = base64.b64decode(str(item[":serialized:"]).encode(), validate=False)
            objects[key] = _DataUnpickler(raw, key).load()
        except UnsafeEntry:
            if key in PREDICTION_NEEDS:
                raise
            objects[key] = _STAND_INS.get(key)
        except (
            binascii.Error,
            pickle.UnpicklingError,
            EOFError,
            ValueError,
            TypeError,
            AttributeError,
        ) as error:
            if key in PREDICTION_NEEDS:
                raise ValueError(
                    f"its data entry {key!r} does not unpickle: {type(error).__name__}: {error}"
                ) from error
            objects[key] = _STAND_INS.get(key)
    return objects

"""Infos as a rlmesh env reports them, back in gymnasium's layouts.

An env's infos reach the gymnasium adapters in one of two forms: the Python objects the env
returned (an in-process env, kept as they are), or a ``MetaMap`` (an env across a process edge),
where numpy arrays arrived as nested lists and numpy scalars as Python ones. And in one of two
layouts: a vector env's batched ``{key: array, "_key": mask}`` dict, or a single env's own dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces.meta import from_meta_map

__all__ = ["info_dict", "is_batched", "python_scalars", "restore_batched"]


def info_dict(value: Mapping[str, Any] | spaces_pb2.MetaMap | None) -> tuple[dict[str, Any], bool]:
    """``(infos as a dict, whether they came as a MetaMap)``; ``{}`` for none."""
    if value is None:
        return {}, False
    if isinstance(value, spaces_pb2.MetaMap):
        return from_meta_map(value), True
    return dict(value), False


def is_batched(infos: Mapping[str, Any], num_envs: int) -> bool:
    """Whether ``infos`` is in gymnasium's batched layout: every key has its ``_key`` mask.

    An env of several lanes always batches; for one lane the layout tells a vector env of one
    lane (batched) from a single env (its own dict). An empty dict is both.

    >>> is_batched({"t": [1], "_t": [True]}, 1), is_batched({"t": 1}, 1), is_batched({"t": 1}, 2)
    (True, False, True)
    """
    if num_envs > 1:
        return True
    for key in infos:
        if key.startswith("_") and key[1:] in infos:
            continue  # the mask of another key
        if f"_{key}" not in infos:
            return False
    return True


def restore_batched(infos: Mapping[str, Any], num_envs: int) -> dict[str, Any]:
    """Batched infos read from a ``MetaMap``, with their per-lane lists as arrays again.

    Masks become bool arrays; a masked value becomes the array gymnasium would have built from
    Python values (int64, float64, bool, or a numpy object array otherwise); nested dicts are
    restored the same way; a key without a mask is not per-lane and stays as it came.

    >>> restore_batched({"t": [3, 0], "_t": [True, False], "run": "r1"}, 2)
    {'t': array([3, 0]), '_t': array([ True, False]), 'run': 'r1'}
    """
    restored: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_") and key[1:] in infos:
            restored[key] = np.asarray(value, dtype=np.bool_)
        elif isinstance(value, Mapping):
            restored[key] = restore_batched(value, num_envs)
        elif f"_{key}" in infos and isinstance(value, list) and len(value) == num_envs:
            restored[key] = _lane_array(value, num_envs)
        else:
            restored[key] = value
    return restored


def _lane_array(values: list[Any], num_envs: int) -> np.ndarray:
    """One value per lane as gymnasium batches them: a numeric array, else an object array."""
    try:
        array = np.array(values)
    except ValueError:  # ragged nested lists
        array = None
    if array is not None and array.dtype.kind in "biuf" and array.shape[:1] == (num_envs,):
        return array
    objects = np.full(num_envs, None, dtype=object)
    for lane, value in enumerate(values):
        objects[lane] = value
    return objects


def python_scalars(info: Mapping[str, Any], kinds: tuple[type, ...] = (np.generic,)) -> dict[str, Any]:
    """One lane's info (sliced out of a batch) with its numpy scalars of ``kinds`` as Python ones.

    A lane of gymnasium's batched infos holds numpy scalars where the env gave Python ones: a
    single env's info has the Python values again. For a vector env's ``final_info`` only bools
    need it (``kinds=(numpy.bool_,)``): gymnasium batches ``bool`` values into a bool array, but
    ``numpy.bool_`` ones into an object array, while numeric numpy scalars batch into their dtype.

    >>> python_scalars({"ok": np.bool_(True), "t": np.int64(2), "inner": {"x": np.float64(0.5)}})
    {'ok': True, 't': 2, 'inner': {'x': 0.5}}
    >>> python_scalars({"ok": np.bool_(True), "t": np.int64(2)}, (np.bool_,))
    {'ok': True, 't': np.int64(2)}
    """
    return {
        key: value.item()
        if isinstance(value, kinds) and isinstance(value, np.generic)
        else python_scalars(value, kinds)
        if isinstance(value, Mapping)
        else value
        for key, value in info.items()
    }

"""One lane's info out of a gymnasium vector env's batched info dict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["lane_info"]


def lane_info(infos: Mapping[str, Any], lane: int) -> dict[str, Any]:
    """The info dict lane ``lane`` reported, sliced out of gymnasium's dict-of-arrays.

    Gymnasium vector envs batch infos as ``{key: array, "_key": mask}``, where ``mask[i]`` says
    whether lane ``i`` reported ``key``; nested dicts are batched the same way. A key without a
    mask is not per-lane and is kept whole.

    >>> import numpy as np
    >>> infos = {"t": np.array([3, 0]), "_t": np.array([True, False]),
    ...          "inner": {"x": np.array([0.5, 1.5]), "_x": np.array([True, True])},
    ...          "_inner": np.array([True, True]), "run": "r1"}
    >>> lane_info(infos, 0)
    {'t': np.int64(3), 'inner': {'x': np.float64(0.5)}, 'run': 'r1'}
    >>> lane_info(infos, 1)
    {'inner': {'x': np.float64(1.5)}, 'run': 'r1'}
    """
    sliced: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_") and key[1:] in infos:
            continue  # the mask of another key
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[lane]:
            continue
        if isinstance(value, Mapping):
            sliced[key] = lane_info(value, lane)
        elif mask is None:
            sliced[key] = value
        else:
            sliced[key] = value[lane]
    return sliced

"""Gymnasium spaces, values and info dicts in rlmesh wire form.

* ``space_spec`` / ``gym_space``: gymnasium space <-> ``SpaceSpec`` (``spec``, imports gymnasium;
  loaded on first use so that the codec and meta modules stay gymnasium-free);
  ``UnrestrictedText`` is what an unrestricted wire Text comes back as.
* ``SpaceCodec`` and ``encode_batch`` / ``decode_batch`` / ``encode`` / ``decode``: values <->
  message bytes (``codec``).
* ``to_meta_map`` / ``from_meta_map``: info dicts <-> ``MetaMap`` (``meta``).
* ``register_space`` / ``unregister_space``: a user Space subclass mapped to a supported space
  (``registry``; minigrid's ``MissionSpace`` is known as Text out of the box).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlmesh_gym import _lazy
from rlmesh_gym.spaces.codec import CodecError, SpaceCodec, decode, decode_batch, encode, encode_batch
from rlmesh_gym.spaces.meta import MetaConversionError, from_meta_map, to_meta_map

if TYPE_CHECKING:
    from rlmesh_gym.spaces.registry import register_space, unregister_space
    from rlmesh_gym.spaces.spec import UnrestrictedText, gym_space, space_spec

__all__ = [
    "CodecError",
    "MetaConversionError",
    "SpaceCodec",
    "UnrestrictedText",
    "decode",
    "decode_batch",
    "encode",
    "encode_batch",
    "from_meta_map",
    "gym_space",
    "register_space",
    "space_spec",
    "to_meta_map",
    "unregister_space",
]

# Loaded on first use, since they import gymnasium.
__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "UnrestrictedText": "rlmesh_gym.spaces.spec",
        "gym_space": "rlmesh_gym.spaces.spec",
        "space_spec": "rlmesh_gym.spaces.spec",
        "register_space": "rlmesh_gym.spaces.registry",
        "unregister_space": "rlmesh_gym.spaces.registry",
    },
)

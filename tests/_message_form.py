"""``messages(peer)``: an array-form env or model in the message form, for tests that speak it.

The in-process adapters (``GymVectorEnv``, the policies) implement only the array form; the
message form is :class:`~rlmesh_gym.runtime.message_form.MessageFormEnv` /
``MessageFormModel`` around them. One adapter per object, so what it keeps (its step count,
a failed message conversion) lasts across a test's calls.
"""

from __future__ import annotations

from typing import Any

from rlmesh_gym.runtime.message_form import as_message_env, as_message_model
from rlmesh_gym.runtime.seams import is_array_env

_ATTRIBUTE = "_test_message_form"


def messages(peer: Any) -> Any:
    """The message form of ``peer`` (itself if it has one), the same adapter every time."""
    adapter = peer.__dict__.get(_ATTRIBUTE) if hasattr(peer, "__dict__") else None
    if adapter is None:
        adapter = as_message_env(peer) if is_array_env(peer) else as_message_model(peer)
        if adapter is not peer and hasattr(peer, "__dict__"):
            peer.__dict__[_ATTRIBUTE] = adapter  # a cycle the collector frees with the peer
    return adapter

"""Policies as rlmesh runtime models.

* ``TorchPolicy``: any PyTorch module, TorchScript module or callable on tensors (needs torch;
  imported on first use, so this package works without torch).
* ``RandomPolicy``: random actions from the action space, reproducible per seed and route.
* ``CallablePolicy``: a numpy function from an observation batch to an action batch.
* ``SB3Policy``: a Stable-Baselines3 model, predicting with SB3's own preprocessing (needs
  stable-baselines3, the ``sb3`` extra; imported on first use).
* ``MLPPolicy``, ``load_pretrained``, ``PRETRAINED``: the shipped trained policies (need torch).

Spaces come from the ``EnvContract`` (never from gymnasium objects); every policy can be
built without one and given it later with ``bind(contract)``. Each implements the array form
of the model seam (``predict_arrays``, what the driver calls); for the message form wrap it in
:class:`~rlmesh_gym.runtime.message_form.MessageFormModel`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlmesh_gym import _lazy
from rlmesh_gym.policies.callable_policy import CallablePolicy
from rlmesh_gym.policies.random_policy import RandomPolicy

if TYPE_CHECKING:
    from rlmesh_gym.policies.pretrained import PRETRAINED, MLPPolicy, PretrainedEntry, load_pretrained
    from rlmesh_gym.policies.sb3_policy import SB3Policy
    from rlmesh_gym.policies.torch_policy import TorchPolicy

__all__ = [
    "PRETRAINED",
    "CallablePolicy",
    "MLPPolicy",
    "PretrainedEntry",
    "RandomPolicy",
    "SB3Policy",
    "TorchPolicy",
    "load_pretrained",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    {
        "SB3Policy": "rlmesh_gym.policies.sb3_policy",
        "TorchPolicy": "rlmesh_gym.policies.torch_policy",
        "MLPPolicy": "rlmesh_gym.policies.pretrained",
        "PRETRAINED": "rlmesh_gym.policies.pretrained",
        "PretrainedEntry": "rlmesh_gym.policies.pretrained",
        "load_pretrained": "rlmesh_gym.policies.pretrained",
    },
)

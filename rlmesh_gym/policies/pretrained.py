"""Trained policies shipped as package data, and the MLP architecture they use."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files

import torch
from torch import nn

from rlmesh_gym.policies._torch_loading import load_safetensors

__all__ = ["MLPPolicy", "PRETRAINED", "PretrainedEntry", "load_pretrained"]


class MLPPolicy(nn.Module):
    """Tanh MLP mapping flat observations of shape (N, obs_dim) to action logits of shape (N, n_actions)."""

    def __init__(self, obs_dim: int = 4, n_actions: int = 2, hidden: Sequence[int] = (64, 64)) -> None:
        super().__init__()
        for name, value in (("obs_dim", obs_dim), ("n_actions", n_actions)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"MLPPolicy: {name} must be a positive int, got {value!r}")
        hidden = tuple(hidden)
        if any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in hidden):
            raise ValueError(f"MLPPolicy: hidden must be a sequence of positive ints, got {hidden!r}")
        self.obs_dim = obs_dim
        self.n_actions = n_actions
        self.hidden = hidden
        layers: list[nn.Module] = []
        width = obs_dim
        for size in hidden:
            layers += [nn.Linear(width, size), nn.Tanh()]
            width = size
        layers.append(nn.Linear(width, n_actions))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Return unnormalised action logits for a batch of observations."""
        # Written so that torch.jit.script compiles it (no tuple comparisons of shapes).
        if obs.dim() == 0 or obs.shape[-1] != self.obs_dim:
            raise ValueError(
                f"MLPPolicy: expected observations with last dimension {self.obs_dim}, "
                f"got shape ({', '.join([str(size) for size in obs.shape])})"
            )
        return self.net(obs)


@dataclass(frozen=True, slots=True)
class PretrainedEntry:
    """A shipped policy: the env it was trained on, how to build the module, and its weights file."""

    env_id: str
    factory: Callable[[], nn.Module]
    asset: str


PRETRAINED: dict[str, PretrainedEntry] = {
    "cartpole": PretrainedEntry(
        env_id="CartPole-v1",
        factory=lambda: MLPPolicy(obs_dim=4, n_actions=2, hidden=(64, 64)),
        asset="cartpole_mlp.safetensors",
    ),
}


def load_pretrained(name: str = "cartpole") -> nn.Module:
    """Build the named shipped policy, load its trained weights on CPU and return it in eval mode."""
    entry = PRETRAINED.get(name) if isinstance(name, str) else None
    if entry is None:
        raise ValueError(f"unknown pretrained policy {name!r}; available: {', '.join(sorted(PRETRAINED))}")
    resource = files("rlmesh_gym.assets").joinpath(entry.asset)
    if not resource.is_file():
        raise FileNotFoundError(
            f"pretrained policy {name!r}: weights file {entry.asset!r} is missing from rlmesh_gym.assets; "
            "reinstall the package or retrain it (see docs/pretrained.md)"
        )
    state_dict = load_safetensors(resource.read_bytes(), torch.device("cpu"), f"pretrained policy {name!r}")
    module = entry.factory()
    module.load_state_dict(state_dict)
    return module.eval()

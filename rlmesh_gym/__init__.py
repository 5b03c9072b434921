"""rlmesh_gym: Gymnasium environments and PyTorch policies as rlmesh runtime peers."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]

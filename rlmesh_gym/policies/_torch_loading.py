"""Reading a saved PyTorch policy: TorchScript archives, state_dicts (with a factory), pickled modules."""

from __future__ import annotations

import pickle
import zipfile
from collections.abc import Callable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["load_policy_file"]

_STATE_DICT_KEYS = ("state_dict", "model_state_dict")
_FORMS = (
    "a TorchScript archive (torch.jit.save), a state_dict (torch.save(module.state_dict(), path)) "
    "with factory=, or a pickled module with allow_pickle=True (rlmesh-gym CLI: --allow-pickle)"
)
# torch.save's legacy (non-zip) format starts by pickling this magic number (a 10-byte LONG1).
_LEGACY_MAGIC = b"\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19"


def _has_record(path: Path, record: str) -> bool:
    """Whether ``path`` is a zip archive (torch's file format) holding ``record`` at its top folder."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return any(name == record or name.endswith(f"/{record}") for name in archive.namelist())


def _is_legacy_torch_save(path: Path) -> bool:
    """Whether ``path`` was written by ``torch.save(..., _use_new_zipfile_serialization=False)``."""
    with open(path, "rb") as stream:
        return _LEGACY_MAGIC in stream.read(32)


def _is_torchscript(path: Path) -> bool:
    # The same test torch.load uses: TorchScript archives carry a constants.pkl record.
    return _has_record(path, "constants.pkl")


def _state_dict(loaded: object) -> Mapping[str, Any] | None:
    """The state_dict in ``loaded`` (itself, or a checkpoint's ``state_dict`` entry), if any."""
    if not isinstance(loaded, Mapping):
        return None
    for key in _STATE_DICT_KEYS:
        inner = loaded.get(key)
        if isinstance(inner, Mapping):
            return inner
    if loaded and all(
        isinstance(key, str) and isinstance(value, torch.Tensor) for key, value in loaded.items()
    ):
        return loaded
    return None


def load_policy_file(
    path: str | PathLike[str],
    device: torch.device,
    *,
    factory: Callable[[], nn.Module] | None,
    allow_pickle: bool,
) -> Callable[..., Any]:
    """The policy saved at ``path``, on ``device`` (see ``TorchPolicy.load``)."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"TorchPolicy.load: {file} is not a file; expected {_FORMS}")
    if factory is not None and not callable(factory):
        raise TypeError(
            f"TorchPolicy.load: factory must be a callable returning an nn.Module for {file}, got {factory!r}"
        )
    if _is_torchscript(file):
        if factory is not None:
            raise ValueError(
                f"TorchPolicy.load: {file} is a TorchScript archive, which holds its own module; "
                "drop factory= (it is for state_dict files)"
            )
        try:
            return torch.jit.load(str(file), map_location=device)
        except Exception as error:
            raise ValueError(f"TorchPolicy.load: {file} is a broken TorchScript archive: {error}") from error
    try:
        loaded = torch.load(file, map_location=device, weights_only=True)
    except pickle.UnpicklingError as error:
        if not (_has_record(file, "data.pkl") or _is_legacy_torch_save(file)):
            # Not a torch.save archive at all; torch's own text would suggest weights_only=False.
            raise ValueError(f"TorchPolicy.load: {file} could not be read as {_FORMS}") from error
        # A torch.save file (zip or legacy) that weights_only refused: it pickles objects (e.g. a
        # whole module).
        if factory is not None:
            raise ValueError(
                f"TorchPolicy.load: {file} holds a pickled Python object, not a state_dict for factory=; "
                f"expected {_FORMS}"
            ) from error
        if not allow_pickle:
            raise ValueError(
                f"TorchPolicy.load: {file} holds a pickled Python object (e.g. a whole module saved with "
                "torch.save(module, path)); loading it executes code from the file, so it is refused by "
                "default. Only if you trust the file, pass allow_pickle=True (Python) or --allow-pickle "
                "(rlmesh-gym CLI); or save the module with torch.jit.save, or save its state_dict and "
                "pass factory="
            ) from error
        return _load_pickled(file, device)
    except Exception as error:
        raise ValueError(f"TorchPolicy.load: {file} could not be read as {_FORMS}: {error}") from error
    state = _state_dict(loaded)
    if state is None:
        raise ValueError(
            f"TorchPolicy.load: {file} holds a {type(loaded).__name__} that is not a state_dict "
            f"(a mapping of parameter names to tensors); expected {_FORMS}"
        )
    if factory is None:
        raise ValueError(
            f"TorchPolicy.load: {file} holds a state_dict ({len(state)} tensors) but no module; pass "
            "factory=, a callable returning the nn.Module to load it into"
        )
    module = factory()
    if not isinstance(module, nn.Module):
        raise TypeError(
            f"TorchPolicy.load: factory returned {type(module).__name__}, expected an nn.Module for the "
            f"state_dict in {file}"
        )
    try:
        module.load_state_dict(state)
    except RuntimeError as error:
        raise ValueError(
            f"TorchPolicy.load: the state_dict in {file} does not fit the {type(module).__name__} built by "
            f"factory: {error}"
        ) from error
    return module.to(device)


def _load_pickled(file: Path, device: torch.device) -> Callable[..., Any]:
    try:
        loaded = torch.load(file, map_location=device, weights_only=False)
    except Exception as error:
        raise ValueError(f"TorchPolicy.load: unpickling {file} failed: {error}") from error
    if not callable(loaded):
        raise ValueError(
            f"TorchPolicy.load: {file} unpickled to a {type(loaded).__name__}, which is not callable; "
            f"expected an nn.Module or a callable on tensors"
        )
    return loaded

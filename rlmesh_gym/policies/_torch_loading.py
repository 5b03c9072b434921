"""Reading a saved PyTorch policy: ``torch.export`` programs, TorchScript archives, state_dicts
(``torch.save`` or safetensors, with a factory), pickled modules."""

from __future__ import annotations

import io
import pickle
import struct
import zipfile
from collections.abc import Callable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rlmesh_gym._audience import fix
from rlmesh_gym._regular_file import require_regular_file
from rlmesh_gym.policies._export_archive import archive_records, rebuilt_archive, untrusted_content
from rlmesh_gym.policies._torch_export import ExportedPolicy
from rlmesh_gym.policies._trust import pickle_refusal

__all__ = ["load_policy_file", "load_safetensors"]

_STATE_DICT_KEYS = ("state_dict", "model_state_dict")
_SAFETENSORS_INSTALL = "pip install 'rlmesh-gym[torch]' (or pip install safetensors)"
# A safetensors header is a JSON object; its declared length is checked against the file size.
_SAFETENSORS_HEADER_LIMIT = 100 * 1024 * 1024


def _forms() -> str:
    """The file forms a policy can be loaded from, with the option each needs."""
    return (
        "a torch.export program (torch.export.save, .pt2), a TorchScript archive (torch.jit.save), "
        "a state_dict (torch.save(module.state_dict(), path) or safetensors) with "
        f"{fix('factory=', '--policy-factory module:attr')}, or a pickled module with "
        f"{fix('allow_pickle=True', '--allow-pickle')}"
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


def _is_export_program(path: Path) -> bool:
    # torch.export.save archives name their format in an archive_format record ("pt2").
    return _has_record(path, "archive_format")


def _is_safetensors(path: Path) -> bool:
    """Whether ``path`` starts like a safetensors file: an 8-byte header length, then a JSON object."""
    with path.open("rb") as fh:
        prefix = fh.read(9)
    if len(prefix) < 9 or prefix[8:9] != b"{":
        return False
    (length,) = struct.unpack("<Q", prefix[:8])
    return length <= min(path.stat().st_size - 8, _SAFETENSORS_HEADER_LIMIT)


def load_safetensors(data: bytes | Path, device: torch.device, source: str) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file (its bytes, or its path) on ``device``."""
    try:
        from safetensors.torch import load, load_file
    except ModuleNotFoundError as error:
        raise ImportError(
            f"{source} is a safetensors file, and safetensors is not installed: {_SAFETENSORS_INSTALL}"
        ) from error
    try:
        if isinstance(data, Path):
            return load_file(data, device=str(device))
        return {name: tensor.to(device) for name, tensor in load(data).items()}
    except Exception as error:  # safetensors reports a corrupt header or data with its own types
        raise ValueError(f"{source} is a broken safetensors file: {error}") from error


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
    require_regular_file(file, "TorchPolicy.load", _forms())
    if factory is not None and not callable(factory):
        raise TypeError(
            f"TorchPolicy.load: factory must be a callable returning an nn.Module for {file}, got {factory!r}"
        )
    if _is_export_program(file):
        if factory is not None:
            raise ValueError(
                f"TorchPolicy.load: {file} is a torch.export program, which holds its own module; "
                f"drop {fix('factory=', '--policy-factory')} (it is for state_dict files)"
            )
        return ExportedPolicy(_load_export_program(file, allow_pickle=allow_pickle), file.name)
    if _is_safetensors(file):
        tensors = load_safetensors(file, device, f"TorchPolicy.load: {file}")
        return _into_factory(tensors, file, factory, device)
    if _is_torchscript(file):
        if factory is not None:
            raise ValueError(
                f"TorchPolicy.load: {file} is a TorchScript archive, which holds its own module; "
                f"drop {fix('factory=', '--policy-factory')} (it is for state_dict files)"
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
            raise ValueError(f"TorchPolicy.load: {file} could not be read as {_forms()}") from error
        # A torch.save file (zip or legacy) that weights_only refused: it pickles objects (e.g. a
        # whole module).
        if factory is not None:
            raise ValueError(
                f"TorchPolicy.load: {file} holds a pickled Python object, not a state_dict for "
                f"{fix('factory=', '--policy-factory')}; "
                f"expected {_forms()}"
            ) from error
        if not allow_pickle:
            raise ValueError(
                pickle_refusal(
                    f"TorchPolicy.load: {file}",
                    "holds a pickled Python object (e.g. a whole module saved with torch.save(module, path))",
                )
                + ", or save the module with torch.jit.save, or save its state_dict and pass "
                f"{fix('factory=', '--policy-factory module:attr')}"
            ) from error
        return _load_pickled(file, device)
    except Exception as error:
        raise ValueError(f"TorchPolicy.load: {file} could not be read as {_forms()}: {error}") from error
    state = _state_dict(loaded)
    if state is None:
        raise ValueError(
            f"TorchPolicy.load: {file} holds a {type(loaded).__name__} that is not a state_dict "
            f"(a mapping of parameter names to tensors); expected {_forms()}"
        )
    return _into_factory(state, file, factory, device)


def _load_export_program(file: Path, *, allow_pickle: bool) -> torch.export.ExportedProgram:
    """The program in the archive ``file``, refused if loading it would run code and not ``allow_pickle``.

    The archive is read once and torch loads a copy of exactly the records that were checked.
    """
    try:
        records = archive_records(file.read_bytes())
    except ValueError as error:
        raise ValueError(f"TorchPolicy.load: {file} is a broken torch.export program: {error}") from error
    if not allow_pickle:
        untrusted = untrusted_content(records)
        if untrusted is not None:
            raise ValueError(pickle_refusal(f"TorchPolicy.load: {file}", untrusted))
    try:
        return torch.export.load(io.BytesIO(rebuilt_archive(records)))
    except Exception as error:
        raise ValueError(f"TorchPolicy.load: {file} is a broken torch.export program: {error}") from error


def _into_factory(
    state: Mapping[str, Any], file: Path, factory: Callable[[], nn.Module] | None, device: torch.device
) -> nn.Module:
    """``factory()`` with ``state`` loaded into it, on ``device``."""
    if factory is None:
        raise ValueError(
            f"TorchPolicy.load: {file} holds a state_dict ({len(state)} tensors) but no module; pass "
            f"{fix('factory=', '--policy-factory module:attr')}, a callable returning the nn.Module to load "
            "it into"
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

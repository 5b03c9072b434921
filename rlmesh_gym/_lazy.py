"""Names a package exports but loads on first use (PEP 562 ``__getattr__`` / ``__dir__``).

A package that keeps an optional dependency (gymnasium, torch, grpcio) out of its import writes::

    __getattr__, __dir__ = lazy_exports(__name__, {"TorchPolicy": "rlmesh_gym.policies.torch_policy"})

and lists the names in ``__all__`` as usual (with ``TYPE_CHECKING`` imports for type checkers).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str], *, before_load: Callable[[], None] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names in ``homes`` load on first use.

    Args:
        package: the module's ``__name__``; it must already be in ``sys.modules`` (call this
            from its own body).
        homes: exported name -> the module that defines it. A name that is a submodule of its
            home (``"env_pb2_grpc": "rlmesh_gym.proto._generated"``) is that submodule.
        before_load: called before a name is first loaded, e.g. to raise a clear ``ImportError``
            naming the extra to install.

    A loaded name is stored in the package's globals, so later lookups skip ``__getattr__``.
    ``__dir__`` lists ``__all__`` and the package's globals.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if before_load is not None:
            before_load()
        module = importlib.import_module(home)
        try:
            value = getattr(module, name)
        except AttributeError:
            value = importlib.import_module(f"{home}.{name}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__

"""How :class:`~rlmesh_gym.policies.torch_policy.TorchPolicy` calls a policy: ``module(x)``, or
what that call would run, without ``nn.Module.__call__``'s dispatch when it would only call
``forward``.

``module(x)`` goes through two Python frames (``nn.Module._wrapped_call_impl`` then
``_call_impl``) that, with no hooks (the module's own or global), no ``module.compile()`` and no
JIT tracing, do nothing but call ``module.forward(x)``. For a small policy that dispatch is a
large part of the forward (docs/policies.md#overhead). So:

* :data:`LAYERS`: a plain ``nn.Sequential`` (that exact class, its own ``forward``) has its
  layers run in order, as its ``forward`` does, each layer called by the rule below;
* :data:`FORWARD`: a module whose call would only run ``forward`` gets ``module.forward(x)``;
* :data:`CALL`: anything else (hooks, a compiled module, tracing, an overridden ``__call__``, a
  callable that is not a module) gets ``module(x)``.

Each is decided at every call, from the module's state at that moment, as torch decides it. A
global hook registered while a forward runs applies from the next call (torch would apply it to
the layers after it).

Fail-closed: the rule mirrors the dispatch of the torch versions it was checked against, named by
the code of ``_call_impl`` and ``_wrapped_call_impl``. Under a torch whose dispatch reads
anything else (a new kind of hook, say) every call is :data:`CALL`.
tests/policies/test_module_call.py holds the two calls side by side.
"""

from __future__ import annotations

from typing import Final

import torch
import torch.nn.modules.module as _torch_module
from torch import nn

__all__ = ["CALL", "DISPATCH_IS_KNOWN", "FORWARD", "LAYERS", "calls_forward_only", "forward_plan"]

CALL: Final = 0
"""Call the policy: ``policy(x)``."""
FORWARD: Final = 1
"""Call its ``forward``: ``policy.forward(x)``."""
LAYERS: Final = 2
"""Run its layers in order, each as :func:`calls_forward_only` says."""

_MODULE_CALL = nn.Module.__call__
_SEQUENTIAL_FORWARD = nn.Sequential.forward
_tracing = torch._C._get_tracing_state

# The names torch 2.13's dispatch reads (the fast path at the top of _call_impl reads the hooks,
# the global hooks and the tracing state; _wrapped_call_impl the compiled call).
_KNOWN_DISPATCH = (
    (
        "torch",
        "_C",
        "_get_tracing_state",
        "_slow_forward",
        "forward",
        "_backward_hooks",
        "_backward_pre_hooks",
        "_forward_hooks",
        "_forward_pre_hooks",
        "_global_backward_pre_hooks",
        "_global_backward_hooks",
        "_global_forward_hooks",
        "_global_forward_pre_hooks",
        "set",
        "compiler",
        "is_compiling",
        "Exception",
        "items",
        "_global_forward_hooks_always_called",
        "warnings",
        "warn",
        "str",
        "_forward_hooks_always_called",
        "_forward_hooks_with_kwargs",
    ),
    ("_compiled_call_impl", "_call_impl"),
)


def _dispatch_is_known() -> bool:
    call_impl = getattr(nn.Module, "_call_impl", None)
    wrapped = getattr(nn.Module, "_wrapped_call_impl", None)
    if call_impl is None or wrapped is None or _MODULE_CALL is not wrapped:
        return False
    names = (call_impl.__code__.co_names, wrapped.__code__.co_names)
    return names == _KNOWN_DISPATCH


DISPATCH_IS_KNOWN: Final = _dispatch_is_known()
"""Whether this torch's module dispatch is the one the rule mirrors (else every call is CALL)."""


def calls_forward_only(module: object) -> bool:
    """Whether ``module(x)`` would only run ``module.forward(x)``, as far as ``module`` itself
    decides: torch's own ``__call__``, not compiled, no hooks of its own (the global state is
    :func:`forward_plan`'s to check)."""
    return (
        type(module).__call__ is _MODULE_CALL
        and module._compiled_call_impl is None  # type: ignore[attr-defined]
        and not (
            module._forward_pre_hooks  # type: ignore[attr-defined]
            or module._forward_hooks  # type: ignore[attr-defined]
            or module._backward_pre_hooks  # type: ignore[attr-defined]
            or module._backward_hooks  # type: ignore[attr-defined]
        )
    )


def forward_plan(policy: object) -> int:
    """How to call ``policy`` now: :data:`LAYERS`, :data:`FORWARD` or :data:`CALL`."""
    if (
        not DISPATCH_IS_KNOWN
        or _torch_module._global_forward_pre_hooks
        or _torch_module._global_forward_hooks
        or _torch_module._global_backward_pre_hooks
        or _torch_module._global_backward_hooks
        or _tracing()
        or not calls_forward_only(policy)
    ):
        return CALL
    if (
        type(policy) is nn.Sequential
        and nn.Sequential.forward is _SEQUENTIAL_FORWARD
        and "forward" not in policy.__dict__
    ):
        return LAYERS
    return FORWARD

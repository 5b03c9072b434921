"""``torch.export`` programs (``.pt2``) as policy callables, with their input signature checked."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces.codec import SpaceCodec
from rlmesh_gym.spaces.kinds import describe_space

__all__ = ["DYNAMIC_BATCH_HINT", "ExportedPolicy"]

DYNAMIC_BATCH_HINT = (
    "export it with a dynamic batch dimension: torch.export.export(module, (example,), "
    'dynamic_shapes=({0: torch.export.Dim("batch")},))'
)


class ExportedPolicy:
    """A ``torch.export.ExportedProgram`` called on observation batches.

    The program's first dimension is the batch: it must be dynamic, or equal to every batch's
    row count (a program exported with a fixed batch of N serves exactly N rows per predict).
    """

    def __init__(self, program: torch.export.ExportedProgram, name: str) -> None:
        self.program = program
        self.__name__ = name
        # check_guards=False: the guards of a loaded program are code from its file, and module()
        # would exec them; the forward pre-hook checks the same input constraints without it.
        self._module = program.module(check_guards=False)
        # The fake tensors of the user inputs: shapes (ints, or SymInts for dynamic dims) and dtypes.
        user_inputs = set(program.graph_signature.user_inputs)
        self._inputs: list[Any] = [
            node.meta.get("val")
            for node in program.graph.nodes
            if node.op == "placeholder" and node.name in user_inputs
        ]
        first = self._inputs[0] if len(self._inputs) == 1 else None
        batch = first.shape[0] if isinstance(first, torch.Tensor) and first.dim() else None
        self.fixed_batch: int | None = batch if isinstance(batch, int) else None

    def check_observation(self, codec: SpaceCodec) -> None:
        """Raise ``ValueError`` if the program's input cannot take batches of ``codec``'s space."""
        if not codec.raw:
            return  # nested observations: the program's own guards report a mismatch on the first call
        space = describe_space(codec.spec)
        if len(self._inputs) != 1 or not isinstance(self._inputs[0], torch.Tensor):
            raise ValueError(
                f"{self.__name__} takes {len(self._inputs)} inputs, but the observation space {space} "
                "gives one tensor per batch; export a module whose forward takes one observation tensor"
            )
        example = self._inputs[0]
        shape = tuple(example.shape)
        expected_dtype = torch.from_numpy(np.empty(0, dtype=codec.numpy_dtype)).dtype
        if codec.spec.dtype == spaces_pb2.D_TYPE_BFLOAT16:
            expected_dtype = torch.bfloat16
        if len(shape) != 1 + len(codec.shape) or any(
            isinstance(got, int) and got != want for got, want in zip(shape[1:], codec.shape, strict=True)
        ):
            raise ValueError(
                f"{self.__name__} was exported for inputs of shape {_shape_text(shape)}, but the observation "
                f"space {space} gives batches of shape (batch, {', '.join(map(str, codec.shape))}); "
                "export it with an example batch of the env's observations"
            )
        if example.dtype != expected_dtype:
            got, want = (str(dtype).removeprefix("torch.") for dtype in (example.dtype, expected_dtype))
            raise ValueError(
                f"{self.__name__} was exported for {got} inputs, but the observation space {space} gives "
                f"{want} batches; "
                "export it with an example batch of the env's dtype"
            )

    def __call__(self, observations: Any) -> Any:
        if self.fixed_batch is not None and isinstance(observations, torch.Tensor):
            rows = observations.shape[0]
            if rows != self.fixed_batch:
                raise ValueError(
                    f"{self.__name__} was exported with a fixed batch size of {self.fixed_batch}, but this "
                    f"predict has {rows} rows (one per lane that needs an action); {DYNAMIC_BATCH_HINT}"
                )
        return self._module(observations)


def _shape_text(shape: tuple[Any, ...]) -> str:
    dims = (str(d) if isinstance(d, int) else "batch" if i == 0 else "dynamic" for i, d in enumerate(shape))
    return "(" + ", ".join(dims) + ")"

"""Tensors that forward makes from numbers, rebuilt as calls in the kernel file's forward.

A traced ALLOC op (tools/analysis/ops.py) becomes `torch.full(shape, value)` or
`torch.arange(start, end, step)`; the caller adds the forward's device and the op's dtype. The
shape comes from the trace, so `ones_like(x)` and `x.new_zeros(...)` need nothing of `x`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernelgraph.tools.builtin.values import source_text

# op name -> position of the fill value in argv (None: the number itself)
FILLS: dict[str, tuple[int | None, float]] = {
    "ones": (None, 1.0), "ones_like": (None, 1.0), "new_ones": (None, 1.0),
    "zeros": (None, 0.0), "zeros_like": (None, 0.0), "new_zeros": (None, 0.0),
    "zero": (None, 0.0), "_efficientzerotensor": (None, 0.0),
    "full": (1, 0.0), "full_like": (1, 0.0), "new_full": (2, 0.0), "scalar_tensor": (0, 0.0),
    "fill": (1, 0.0),  # fill_ made out of place: its tensor's shape, one value
}  # fmt: skip


def factory_call(op: dict[str, Any], tensor: Callable[[dict], str]) -> tuple[str, str] | None:
    """(callable, arguments) as Python source, or None for a tensor the builtin does not make."""
    name = op["op"].split(".", 1)[1]
    argv = op.get("argv") or []
    shape = list(op["outs"][0]["shape"])
    if name in FILLS:
        slot, number = FILLS[name]
        value = source_text(argv[slot], tensor) if slot is not None else repr(number)
        return "torch.full", f"{shape}, {value}"
    if name == "arange":
        bounds = [source_text(a, tensor) for a in argv]
        return "torch.arange", ", ".join(bounds)
    return None

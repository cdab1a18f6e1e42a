"""One-element constants made from a Python number: the number itself, for the builtin.

`torch.tensor(0.5)` in a forward (or a constructor) makes a tensor that the analysis's meta run
cannot read back; ScalarValues remembers the number as the factory is called. Torch and the
standard library only.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary


def plain_number(value: Any) -> bool | int | float | None:
    if isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    return None


def _rounded(number: bool | int | float, dtype: torch.dtype) -> bool | int | float | None:
    """`number` as a tensor of `dtype` holds it (pure Python: no op runs, none is recorded)."""
    if dtype == torch.bool:
        return bool(number)
    if not dtype.is_floating_point:
        return None if dtype.is_complex else int(number)  # torch truncates toward zero
    if dtype == torch.float64:
        return float(number)
    fmt = {torch.float32: "f", torch.float16: "e"}.get(dtype)
    try:
        return plain_number(struct.unpack(fmt, struct.pack(fmt, number))[0]) if fmt else None
    except OverflowError:
        return None


class ScalarValues(TorchFunctionMode):
    """Remembers the number behind each tensor made by torch.tensor(c), torch.as_tensor(c) or
    torch.scalar_tensor(c) with c a Python number (a meta tensor does not keep it)."""

    FACTORIES = frozenset({"tensor", "as_tensor", "scalar_tensor"})

    def __init__(self, values: WeakIdKeyDictionary) -> None:
        super().__init__()
        self.values = values

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        number = plain_number(args[0]) if args and name in self.FACTORIES else None
        if number is not None and isinstance(out, torch.Tensor) and out.numel() == 1:
            rounded = _rounded(number, out.dtype)
            if rounded is not None:
                self.values[out] = rounded
        return out

"""The tensors of the generated forward: names, shapes, strides, and the view ops between them.

Strides come from replaying the traced view ops on meta tensors here (torch's own view rules,
no user code: only ATen ops with the recorded arguments run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

from kernelgraph.tools.builtin.errors import Unsupported

FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")


@dataclass
class Value:
    var: str  # the forward's variable (or "self.<param path>")
    shape: list[int]
    strides: list[int]
    dtype: str
    meta: Any = None  # a meta tensor with this shape and these strides


def decode(arg: Any, tensor: Any) -> Any:
    """A traced argument (tools/analysis/trace.py encoding) as a Python value; tensors through
    `tensor(ref)`."""
    if isinstance(arg, dict):
        if "t" in arg:
            return tensor(arg)
        if "dtype" in arg:
            return getattr(torch, arg["dtype"])
        if "f" in arg:
            return float(arg["f"])
        raise Unsupported("an argument of a view op", f"cannot rebuild {arg['other']}")
    if isinstance(arg, list):
        return [decode(a, tensor) for a in arg]
    return arg


def source_text(arg: Any, tensor: Any) -> str:
    """A traced argument as Python source for the generated forward."""
    if isinstance(arg, dict):
        if "t" in arg:
            return tensor(arg)
        if "dtype" in arg:
            return f"torch.{arg['dtype']}"
        if "f" in arg:
            return f"float({arg['f']!r})"
        raise Unsupported("an argument of a view op", f"cannot rebuild {arg['other']}")
    if isinstance(arg, list):
        return "[" + ", ".join(source_text(a, tensor) for a in arg) + "]"
    return repr(arg)


DROPPED_KWARGS = ("device", "layout", "pin_memory")  # traced on meta; the forward's own apply


def replay(op: dict[str, Any], tensor: Any) -> list[Any]:
    """Run one traced ATen op on meta tensors: its outputs (views keep real strides)."""
    packet = getattr(torch.ops.aten, op["op"].split(".", 1)[1])
    overload = getattr(packet, op["overload"])
    args = [decode(a, tensor) for a in op.get("argv") or []]
    kwargs = {
        k: decode(v, tensor) for k, v in (op.get("kwargv") or {}).items() if k not in DROPPED_KWARGS
    }
    out = overload(*args, **kwargs)
    return list(out) if isinstance(out, list | tuple) else [out]


def float_dtype(dtype: str, precision_dtype: str | None) -> str:
    """The dtype a tensor has in the run: floating tensors take the precision's dtype."""
    if precision_dtype and dtype in FLOAT_DTYPES:
        return precision_dtype
    return dtype


def meta_tensor(shape: list[int], dtype: str) -> torch.Tensor:
    return torch.empty(shape, dtype=getattr(torch, dtype), device="meta")


def python_name(label: str) -> str:
    return re.sub(r"\W", "_", label)

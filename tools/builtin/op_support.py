"""Which traced ops the builtin writes, and how the program reads an op: its tensor
arguments, a library call's public torch function, a parameter's Python path."""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.builtin.conv import CONVOLUTIONS
from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.gathers import CONCATS, GATHERS
from kernelgraph.tools.builtin.group_types import GEMMS, op_name
from kernelgraph.tools.builtin.lowering import INDEXED
from kernelgraph.tools.builtin.lowering import POINTWISE as POINTWISE_OPS
from kernelgraph.tools.builtin.pooling import pool_key
from kernelgraph.tools.builtin.reductions import row_key
from kernelgraph.tools.builtin.scans import SCAN_OPS


def writable(op: dict[str, Any], policy: str = "strict") -> bool:
    """Whether the builtin writes `op` as (part of) a kernel of its own. A convolution is ours
    under `strict` only: `hybrid` keeps the library's."""
    name = op_name(op)
    return (
        name in GEMMS
        or (name in CONVOLUTIONS and policy == "strict")
        or pool_key(name) is not None
        or row_key(name, op["overload"]) is not None
        or (f"{name}.{op['overload']}" in POINTWISE_OPS or name in POINTWISE_OPS)
        or name in INDEXED
        or name in GATHERS
        or name in CONCATS
        or name in SCAN_OPS
    )


def anchors(op: dict[str, Any]) -> bool:
    """Ops that start a kernel of their own (what follows them is their epilogue)."""
    name = op_name(op)
    return name in GEMMS or name in CONVOLUTIONS or pool_key(name) is not None


def attribute(path: str) -> str:
    """Python for reaching a parameter or buffer by its state_dict name."""
    if all(part.isidentifier() for part in path.split(".")):
        return f"self.{path}"
    return f"self.get_submodule({'.'.join(path.split('.')[:-1])!r}).{path.split('.')[-1]}"


def library_function(name: str) -> str:
    """The public torch function behind a heavy ATen op (torch.convolution, torch.addmm...)."""
    import torch

    if callable(getattr(torch, name, None)):
        return f"torch.{name}"
    if callable(getattr(torch.nn.functional, name, None)):
        return f"torch.nn.functional.{name}"
    raise Unsupported(f"aten.{name}", "no public torch function to call it through")


def tensor_refs(op: dict[str, Any]) -> list[dict]:
    found: list[dict] = []

    def visit(value: Any) -> None:
        if isinstance(value, dict) and "t" in value:
            found.append(value)
        elif isinstance(value, list):
            for v in value:
                visit(v)

    visit(op.get("argv") or [])
    visit(list((op.get("kwargv") or {}).values()))
    return found

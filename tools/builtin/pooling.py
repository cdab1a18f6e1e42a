"""Pooling ATen ops (max, average, adaptive; 1d/2d/3d) as a `PoolKernel`.

One registry: `POOL_OPS[name](op) -> PoolSpec` reads a traced pool op's arguments. 1d pools
trace as the 2d ops on unsqueezed tensors; their size-1 dim drops out here. A pool anchors its
kernel the way a GEMM does (tools/builtin/groups.py): the ops after it are an epilogue over
var("acc") (the pooled value), var("arg") (max pooling's index within the input plane, as torch
numbers it) and var("idx") (the flat output index). The backends print the window loops
(tools/builtin/triton_pool.py, cpp_pool.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelgraph.tools.builtin.expr import Expr, offset_of, var, walk
from kernelgraph.tools.builtin.kernels import Store, numel
from kernelgraph.tools.builtin.values import Value

INT32_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class Window:
    """One pooled dim. Output o reads input `o * stride - padding + k * dilation` for k < size;
    an adaptive window reads `floor(o * n_in / n_out) <= x < ceil((o + 1) * n_in / n_out)`
    (torch's formula), `size` then being the longest such window."""

    n_in: int
    n_out: int
    size: int
    stride: int = 1
    padding: int = 0
    dilation: int = 1
    adaptive: bool = False
    in_stride: int = 1  # the input's memory stride along this dim

    def trivial(self) -> bool:
        """The size-1 dim of a 1d pool traced as 2d: it reads x = 0 only."""
        return self.n_in == self.n_out == self.size == 1 and self.padding == 0

    def count(self, include_pad: bool) -> int | None:
        """The average's divisor along this dim when every window has the same one, else None."""
        if self.adaptive:
            return self.n_in // self.n_out if self.n_in % self.n_out == 0 else None
        last = (self.n_out - 1) * self.stride - self.padding + self.size
        if include_pad:
            return self.size if last <= self.n_in + self.padding else None
        return self.size if self.padding == 0 and last <= self.n_in else None


@dataclass(frozen=True)
class PoolSpec:
    mode: str  # "max" | "avg"
    kernel: list[int]
    stride: list[int]
    padding: list[int]
    dilation: list[int]
    adaptive: bool = False
    count_include_pad: bool = True
    divisor_override: int | None = None


@dataclass
class PoolKernel:
    """A pool over the trailing len(windows) dims of a tensor: one output element per lane
    (Triton) or loop iteration (C++), planes (the leading dims) outermost."""

    name: str
    mode: str
    planes: int
    windows: list[Window]
    source: str  # the pooled input's kernel argument
    plane_offset: Expr  # offset of plane var("plane") in the input
    span: int  # elements the input's offsets reach (for choosing int64 indexing)
    inputs: list[str]
    outputs: list[str]
    stores: list[Store] = field(default_factory=list)
    count_include_pad: bool = True
    divisor_override: int | None = None
    plane_align: int = 0  # what every plane's offset is a multiple of (0: one plane)
    kind: str = "pool"

    @property
    def numel(self) -> int:
        return self.planes * math.prod(w.n_out for w in self.windows)

    @property
    def wide(self) -> bool:
        """Offsets past int32: index arithmetic in int64."""
        return max(self.numel, self.span) > INT32_LIMIT

    @property
    def window_numel(self) -> int:
        return math.prod(w.size for w in self.windows)

    def divisor(self) -> int | None:
        """The average's divisor when it is one constant for every output, else None."""
        if self.divisor_override:
            return self.divisor_override
        counts = [w.count(self.count_include_pad) for w in self.windows]
        return None if None in counts else math.prod(counts)

    def uses_index(self) -> bool:
        return any(n.op == "var" and n.attr == "arg" for s in self.stores for n in walk(s.value))

    def describe(self) -> str:
        dims = "x".join(str(w.size) for w in self.windows)
        return (f"{self.name}: {self.mode} pool, {dims} windows over {self.planes} planes, "
                f"{self.numel} outputs; pointwise epilogue fused")  # fmt: skip

    def axes(self) -> str:
        return f"{self.name}: output elements (planes outermost)"

    def grid(self) -> str:
        return "cdiv(numel, BLOCK)"

    def pseudo(self) -> str:
        return f"{self.name}: out[o] = epilogue({self.mode} of the input over o's window)"


# ---------------------------------------------------------------- the ops' arguments


def _arg(op: dict[str, Any], i: int, name: str, default: Any) -> Any:
    argv = op.get("argv") or []
    value = argv[i] if len(argv) > i else (op.get("kwargv") or {}).get(name, default)
    return default if value is None and default is not None else value


def _each(value: Any, dims: int, default: list[int]) -> list[int]:
    """An int or a list (1 long: for every dim; empty: the default) as `dims` ints."""
    if isinstance(value, int):
        return [value] * dims
    values = list(value) if value else list(default)
    return values * dims if len(values) == 1 else values


def _max_pool(dims: int) -> Callable[[dict], PoolSpec]:
    def spec(op: dict) -> PoolSpec:
        kernel = _each(_arg(op, 1, "kernel_size", []), dims, [])
        return PoolSpec("max", kernel, _each(_arg(op, 2, "stride", []), dims, kernel),
                        _each(_arg(op, 3, "padding", 0), dims, [0]),
                        _each(_arg(op, 4, "dilation", 1), dims, [1]))  # fmt: skip

    return spec


def _avg_pool(dims: int) -> Callable[[dict], PoolSpec]:
    def spec(op: dict) -> PoolSpec:
        kernel = _each(_arg(op, 1, "kernel_size", []), dims, [])
        return PoolSpec("avg", kernel, _each(_arg(op, 2, "stride", []), dims, kernel),
                        _each(_arg(op, 3, "padding", 0), dims, [0]), [1] * dims,
                        count_include_pad=bool(_arg(op, 5, "count_include_pad", True)),
                        divisor_override=_arg(op, 6, "divisor_override", None))  # fmt: skip

    return spec


def _adaptive(mode: str, dims: int) -> Callable[[dict], PoolSpec]:
    def spec(op: dict) -> PoolSpec:
        ones = [1] * dims
        return PoolSpec(mode, ones, ones, [0] * dims, ones, adaptive=True)

    return spec


PoolFn = Callable[[dict[str, Any]], PoolSpec]
POOL_OPS: dict[str, PoolFn] = {}
for _dims in (1, 2, 3):
    POOL_OPS[f"max_pool{_dims}d"] = _max_pool(_dims)
    POOL_OPS[f"max_pool{_dims}d_with_indices"] = _max_pool(_dims)
    POOL_OPS[f"avg_pool{_dims}d"] = _avg_pool(_dims)
    POOL_OPS[f"adaptive_avg_pool{_dims}d"] = _adaptive("avg", _dims)
    POOL_OPS[f"_adaptive_avg_pool{_dims}d"] = _adaptive("avg", _dims)
    POOL_OPS[f"adaptive_max_pool{_dims}d"] = _adaptive("max", _dims)


def pool_key(name: str) -> str | None:
    return name if name in POOL_OPS else None


def pool_spec(op: dict[str, Any]) -> PoolSpec:
    return POOL_OPS[op["op"].split(".", 1)[1]](op)


# ---------------------------------------------------------------- the kernel


def _adaptive_size(n_in: int, n_out: int) -> int:
    return max(-(-(o + 1) * n_in // n_out) - o * n_in // n_out for o in range(n_out))


def windows(spec: PoolSpec, x: Value, out_shape: list[int]) -> list[Window]:
    dims = len(spec.kernel)
    found = []
    for d in range(dims):
        n_in, n_out = x.shape[-dims + d], out_shape[-dims + d]
        size = _adaptive_size(n_in, n_out) if spec.adaptive else spec.kernel[d]
        found.append(Window(n_in, n_out, size, spec.stride[d], spec.padding[d], spec.dilation[d],
                            spec.adaptive, x.strides[-dims + d]))  # fmt: skip
    return found


def pool_kernel(
    name: str,
    spec: PoolSpec,
    x: Value,
    source: str,
    out_shape: list[int],
    stores: list[Store],
    inputs: list[str],
    outputs: list[str],
) -> PoolKernel:
    """The kernel of a pool over `x` (argument `source`) with the group's stores as epilogue."""
    dims = len(spec.kernel)
    lead, lead_strides = list(x.shape[:-dims]), list(x.strides[:-dims])
    kept = [w for w in windows(spec, x, out_shape) if not w.trivial()]
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(x.shape, x.strides, strict=True))
    return PoolKernel(name, spec.mode, numel(lead), kept, source,
                      offset_of(var("plane"), lead, lead_strides), span, inputs, outputs, stores,
                      spec.count_include_pad, spec.divisor_override,
                      math.gcd(*(abs(st) for st, s in zip(lead_strides, lead, strict=True) if s > 1)))  # fmt: skip


__all__ = ["POOL_OPS", "PoolKernel", "PoolSpec", "Window", "pool_kernel", "pool_key", "pool_spec"]

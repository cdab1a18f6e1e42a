"""Index arithmetic a convolution kernel prints: coordinates of a flat index, and the input
position a kernel position reads from (with the tests that keep it inside the input)."""

from __future__ import annotations

from kernelgraph.tools.builtin.conv import ConvKernel


def coordinates(value: str, sizes: list[int], prefix: str, lines: list[str]) -> list[str]:
    """Names of `value`'s coordinates over `sizes` (row-major), innermost split first."""
    names, rest = [f"{prefix}{d}" for d in range(len(sizes))], value
    for d in reversed(range(len(sizes))):
        if d == 0:
            lines.append(f"{names[d]} = {rest}")
        else:
            lines.append(f"{names[d]} = {rest} % {sizes[d]}")
            lines.append(f"{prefix}rest{d} = {rest} // {sizes[d]}")
            rest = f"{prefix}rest{d}"
    return names


def input_position(kernel: ConvKernel, d: int, o: str, k: str, lines: list[str]) -> list[str]:
    """Lines computing i{d} (the input position along spatial dim d) and the tests it needs."""
    s, p, dil, size = kernel.stride[d], kernel.padding[d], kernel.dilation[d], kernel.in_sizes[d]
    if not kernel.transposed:
        lines.append(f"i{d} = {o} * {s} - {p} + {k} * {dil}")
        last = (kernel.out_sizes[d] - 1) * s - p + (kernel.kernel[d] - 1) * dil
        return [f"(i{d} >= 0)"] * (p > 0) + [f"(i{d} < {size})"] * (last >= size)
    lines.append(f"t{d} = {o} + {p} - {k} * {dil}")
    checks = [f"(t{d} >= 0)"]
    if s > 1:
        lines.append(f"i{d} = t{d} // {s}")
        checks.append(f"(t{d} % {s} == 0)")
    else:
        lines.append(f"i{d} = t{d}")
    return [*checks, f"(i{d} < {size})"]

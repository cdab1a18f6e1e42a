"""How a depthwise row sweep (tools/builtin/triton_conv_depthwise.py) reads an input row.

`TapColumns`: one load per kernel column, shifted by the tap's offset; a shift that is not a
multiple of four floats cannot be a vector load. `GroupedColumns`, where the stride along the
row is 1 and rows start 16-byte aligned: a lane owns four consecutive outputs and loads the
aligned groups of four inputs their windows touch, one vector load each, then picks each tap
out of those registers by a constant lane number (as tools/builtin/triton_pool_rows.py does for
pools): a 3 x 7 window's row costs 3 vector loads for four outputs, not 7 x 4 scalar ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgraph.tools.builtin.conv import ConvKernel
from kernelgraph.tools.builtin.triton_emit import join_lanes, split_lanes

LANES = 4  # outputs a lane owns in groups, and floats a 16-byte vector load brings
MAX_GROUPS = 16  # a longer window unrolls into too much code: one load a tap instead


@dataclass(frozen=True)
class TapColumns:
    kernel: ConvKernel
    lanes = 1
    shape = "[BLOCK_W]"

    def setup(self) -> list[str]:
        """ow, the output columns of the tile; col_ok; each tap's offset and mask."""
        kernel = self.kernel
        s, xs = kernel.stride[-1], kernel.x_strides[-1]
        lines = [
            "ow = pw * BLOCK_W + tl.arange(0, BLOCK_W)",
            f"col_ok = ow < {kernel.out_sizes[-1]}",
            f"iw = ow * {s * xs}",
        ]
        if self._edges():
            for k, shift in enumerate(_shifts(kernel)):
                inside = f"(ow * {s} >= {-shift}) & (ow * {s} < {kernel.in_sizes[-1] - shift})"
                lines.append(f"cok{k} = col_ok & {inside}")
        return lines

    def loads(self, x: str, offset: str, mask: str, name: str) -> list[str]:
        """One input row at every tap: {name}_{k}. `offset` and `mask` place the row."""
        lines = []
        for k, shift in enumerate(_shifts(self.kernel)):
            column = f"iw + {shift * self.kernel.x_strides[-1]}" if shift else "iw"
            masks = " & ".join(m for m in (f"cok{k}" if self._edges() else "col_ok", mask) if m)
            lines.append(
                f"{name}_{k} = tl.load({x} + {offset} + {column}, mask={masks}, other=0.0)"
                ".to(tl.float32)"
            )
        return lines

    def value(self, name: str, k: int, lane: int) -> str:
        return f"{name}_{k}"

    def join(self, name: str) -> list[str]:
        return []

    def _edges(self) -> bool:
        """Whether a tap can fall in the padding or past the input."""
        kernel = self.kernel
        last = (kernel.out_sizes[-1] - 1) * kernel.stride[-1] + max(_shifts(kernel))
        return kernel.padding[-1] > 0 or last >= kernel.in_sizes[-1]


@dataclass(frozen=True)
class GroupedColumns(TapColumns):
    lanes = LANES
    shape = "[BLOCK_W // 4]"

    def setup(self) -> list[str]:
        lines = [
            "lane_group = pw * (BLOCK_W // 4) + tl.arange(0, BLOCK_W // 4)",
            "ow = 4 * lane_group[:, None] + tl.arange(0, 4)[None, :]  # a lane's four outputs",
            f"col_ok = ow < {self.kernel.out_sizes[-1]}",
        ]
        for g in _groups(self.kernel):
            tests = [f"(ow >= {-4 * g})"] * (g < 0) + [f"(ow < {self.kernel.in_sizes[-1] - 4 * g})"]
            lines.append(f"gok{_group(g)} = {' & '.join(tests)}")
        return lines

    def loads(self, x: str, offset: str, mask: str, name: str) -> list[str]:
        """Each aligned group as one vector load, split into its lanes {name}g{g}_{lane}."""
        lines = []
        for g in _groups(self.kernel):
            n = f"{name}g{_group(g)}"
            masks = " & ".join(m for m in (f"gok{_group(g)}", mask) if m)
            at = f"ow + {4 * g}" if g else "ow"
            lines.append(
                f"{n} = tl.load({x} + {offset} + {at}, mask={masks}, other=0.0).to(tl.float32)"
            )
            lines += split_lanes(n, "BLOCK_W")
        return lines

    def value(self, name: str, k: int, lane: int) -> str:
        at = lane + _shifts(self.kernel)[k]
        return f"{name}g{_group(at // LANES)}_{at % LANES}"

    def join(self, name: str) -> list[str]:
        """`name` over the tile from its four lanes' values {name}_0 ... {name}_3."""
        return [join_lanes(name, [f"{name}_{lane}" for lane in range(LANES)], "BLOCK_W")]


def columns(kernel: ConvKernel) -> TapColumns:
    """Groups where the row is read at stride 1, its elements contiguous, every row and plane
    starts on a multiple of four floats (and the width is one: a group's mask is then the same
    for its four elements), and the window touches few groups."""
    xs = kernel.x_strides
    aligned = all(s % LANES == 0 for s in xs[:-1]) and kernel.in_sizes[-1] % LANES == 0
    grouped = kernel.stride[-1] == 1 and xs[-1] == 1 and aligned
    return (
        GroupedColumns(kernel)
        if grouped and len(_groups(kernel)) <= MAX_GROUPS
        else TapColumns(kernel)
    )


def _shifts(kernel: ConvKernel) -> list[int]:
    """Where each kernel column reads, relative to its output column's first input."""
    return [k * kernel.dilation[-1] - kernel.padding[-1] for k in range(kernel.kernel[-1])]


def _groups(kernel: ConvKernel) -> range:
    """The aligned groups a lane's four outputs touch, relative to its own."""
    shifts = _shifts(kernel)
    return range(min(shifts) // LANES, (LANES - 1 + max(shifts)) // LANES + 1)


def _group(g: int) -> str:
    return str(g) if g >= 0 else f"m{-g}"

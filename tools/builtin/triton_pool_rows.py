"""A 1d pool with stride 1 along contiguous rows, in groups of four outputs a lane.

The general pool kernel (tools/builtin/triton_pool.py) loads each of a window's taps at its own
shifted address. A shift that is not a multiple of four floats cannot be a vector load, so a
window of 8 costs 8 scalar loads an output, and the load instructions, not memory, bound it
(KernelBench level1/41 and 44 streamed at 70% of speed-of-light on an H100). Here a lane owns
four consecutive outputs and loads the aligned groups of four inputs their windows touch, each
one vector load (a window spanning S inputs: about S/4 + 2 loads for four outputs); the taps
are then picked out of those registers by constant lane numbers.
"""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.builtin.pooling import PoolKernel
from kernelgraph.tools.builtin.printer import Printer
from kernelgraph.tools.builtin.triton_emit import (
    TritonSyntax,
    _indent,
    _signature,
    join_lanes,
    split_lanes,
)

LANES = 4  # outputs a lane owns, and inputs a vector load brings (16 bytes of fp32)
MAX_GROUPS = 16  # a longer window unrolls into too much code: the general kernel takes it
INTERPRETER_BLOCK = 1 << 12


def applies(kernel: PoolKernel) -> bool:
    """A stride-1 window over contiguous rows whose starts are 16-byte aligned, without the
    max's index or a per-output divisor."""
    if len(kernel.windows) != 1 or kernel.uses_index():
        return False
    w = kernel.windows[0]
    if w.adaptive or w.stride != 1 or w.in_stride != 1 or kernel.plane_align % LANES:
        return False
    if kernel.mode == "avg" and kernel.divisor() is None:
        return False
    return len(_groups(kernel)) <= MAX_GROUPS


def _offsets(kernel: PoolKernel) -> list[int]:
    """Where each tap reads, relative to its output's position."""
    w = kernel.windows[0]
    return [k * w.dilation - w.padding for k in range(w.size)]


def _groups(kernel: PoolKernel) -> range:
    """The aligned groups of inputs a lane's four outputs touch, relative to its own group."""
    offsets = _offsets(kernel)
    return range(min(offsets) // LANES, (LANES - 1 + max(offsets)) // LANES + 1)


def _name(g: int) -> str:
    return f"g{g}" if g >= 0 else f"g_{-g}"


def _load_group(kernel: PoolKernel, g: int) -> list[str]:
    """Group g: a [BLOCK // 4, 4] vector load (masked at the row's ends), split into its four lanes."""
    n, w = _name(g), kernel.windows[0]
    at = f"(pos + {LANES * g})" if g else "pos"
    checks = [f"({at} >= 0)"] * (g < 0) + [f"({at} < {w.n_in})"]
    other = '-float("inf")' if kernel.mode == "max" else "0.0"
    load = f"tl.load({kernel.source} + base + {at}, mask={' & '.join(checks)}, other={other})"
    return [f"{n} = {load}.to(tl.float32)", *split_lanes(n, "BLOCK")]


def _output(kernel: PoolKernel, j: int) -> list[str]:
    """Output lane j: its window's taps, combined in tap order (max: NaN wins, as in torch)."""
    taps = [f"{_name((j + o) // LANES)}_{(j + o) % LANES}" for o in _offsets(kernel)]
    lines = [f"o{j} = {taps[0]}"]
    for tap in taps[1:]:
        if kernel.mode == "max":
            lines.append(f"o{j} = tl.where(({tap} > o{j}) | ({tap} != {tap}), {tap}, o{j})")
        else:
            lines.append(f"o{j} = o{j} + {tap}")
    return lines


def pool_source(kernel: PoolKernel, gpu: bool, epilogue: list[str]) -> str:
    """`epilogue`: the stores of var("acc") at `idx` under `mask` (triton_pool.epilogue)."""
    w = kernel.windows[0]
    start = "tl.program_id(0).to(tl.int64)" if kernel.wide else "tl.program_id(0)"
    base = Printer(TritonSyntax(gpu), {"plane": "plane"}).index(kernel.plane_offset)
    body = [
        f"blocks = {start}",
        f"plane = blocks // (({w.n_out} + BLOCK - 1) // BLOCK)",
        f"t = blocks % (({w.n_out} + BLOCK - 1) // BLOCK) * (BLOCK // 4) + tl.arange(0, BLOCK // 4)",
        "pos = 4 * t[:, None] + tl.arange(0, 4)[None, :]  # a lane's four outputs",
        f"mask = pos < {w.n_out}",
        f"idx = plane * {w.n_out} + pos",
        f"base = {base}",
    ]
    for g in _groups(kernel):
        body += _load_group(kernel, g)
    for j in range(LANES):
        body += _output(kernel, j)
    body.append(join_lanes("acc", [f"o{j}" for j in range(LANES)], "BLOCK"))
    body += epilogue
    return "\n".join([_signature(kernel, ["BLOCK"]), *_indent(body)])


def default(kernel: PoolKernel, gpu: bool) -> dict[str, Any]:
    if not gpu:  # the interpreter: fewest program instances
        n_out = kernel.windows[0].n_out
        return {"BLOCK": min(max(8, 1 << (n_out - 1).bit_length()), INTERPRETER_BLOCK),
                "num_warps": 1}  # fmt: skip
    # H100, level1/41 and 44: 1024 x 4 warps and 2048 x 8 ran alike (2.147 / 2.134 ms on 41)
    return {"BLOCK": 1024, "num_warps": 4}


def tunables(gpu: bool) -> dict[str, list[Any]]:
    return {"BLOCK": [512, 1024, 2048], "num_warps": [2, 4, 8]} if gpu else {}


def launch(kernel: PoolKernel, args: list[str], config: dict[str, Any]) -> list[str]:
    blocks = kernel.planes * -(-kernel.windows[0].n_out // config["BLOCK"])
    options = ", ".join(f"{k}={v!r}" for k, v in config.items())
    return [f"{kernel.name}[({blocks},)]({', '.join(args)}, {options})"]

"""Accuracy of a GPU log: libdevice's logf (tl.log), MUFU's fast_logf bare, with subnormals
scaled, and with the series near 1 (the builtin's `_log`, tools/builtin/triton_emit.py), each
against torch.log in float64, as max abs error and max ulp of the result, per input range.

    python benchmarks/log_accuracy.py      # on a GPU box; prints one line a range, then edges

MODE 0 = tl.log, 1 = fast_logf, 2 = + subnormals scaled by 2^24, 3 = + series (the builtin's).
"""

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice


@triton.jit
def _series(x):
    u = x - 1.0
    return u * (1.0 + u * (-0.5 + u * (0.3333333333333333 + u * (-0.25 + u * 0.2))))


@triton.jit
def k(x, y, n, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    if MODE == 0:
        r = tl.log(v)
    elif MODE == 1:
        r = libdevice.fast_logf(v)
    else:
        tiny = v < 1.1754943508222875e-38
        r = libdevice.fast_logf(tl.where(tiny, v * 16777216.0, v))
        r = tl.where(tiny, r - 16.635532333438686, r)
        if MODE == 3:
            r = tl.where(tl.abs(v - 1.0) < 0.015625, _series(v), r)
    tl.store(y + offs, r, mask=offs < n)


g = torch.Generator().manual_seed(0)
ranges = {
    "uniform(0,1)": torch.rand(1 << 22, generator=g),
    "exp(U(-87,88))": torch.exp(torch.empty(1 << 22).uniform_(-87, 88, generator=g)),
    "1 +- 5e-4": 1 + (torch.rand(1 << 22, generator=g) - 0.5) * 1e-3,
    "1 +- 0.05": 1 + (torch.rand(1 << 22, generator=g) - 0.5) * 0.1,
    "subnormal": torch.exp(torch.empty(1 << 16).uniform_(-103, -88, generator=g)),
}
for name, xs in ranges.items():
    x = xs.cuda()
    exact = torch.log(x.double())
    ulp = torch.finfo(torch.float32).eps * exact.abs().clamp(min=2.0**-126)
    row = [f"{name:16}"]
    for mode in range(4):
        y = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), MODE=mode, BLOCK=1024)
        err = (y.double() - exact).abs()
        row.append(f"m{mode}: abs {float(err.max()):.1e} ulp {float((err / ulp).max()):.1f}")
    t = (torch.log(x).double() - exact).abs()
    row.append(f"torch: abs {float(t.max()):.1e} ulp {float((t / ulp).max()):.1f}")
    print(" | ".join(row))
edges = torch.tensor(
    [0.0, -0.0, float("inf"), float("nan"), -1.0, 1.0, 1e-45, 3e-39], device="cuda"
)
for mode in range(4):
    y = torch.empty_like(edges)
    k[(1,)](edges, y, edges.numel(), MODE=mode, BLOCK=16)
    print("edges", mode, y.tolist())
print("torch", torch.log(edges).tolist())

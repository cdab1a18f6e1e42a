"""Probe: ways to read long rows twice, and to reduce over a middle axis, on the GPU.

Times hand-written Triton variants of two KernelBench level-1 patterns (median of
`triton.testing.do_bench`, which clears L2 between calls) next to eager, one JSON line each:

- L1 normalisation of [32768, 65535] rows (level1/38): one program per row against a
  persistent grid of a few programs per SM (rows in flight then fit L2, so the second read can
  hit it), with the second pass read forwards or backwards (most recently read first), and
  with the row's 16-byte-aligned interior read unmasked so loads can be vectorised.
- a sum over dim 1 of [128, 4096, 4095] (level1/47-53) for a grid of tile shapes.

    python benchmarks/row_loop_probe.py --out results.jsonl [--rows 32768]
    python benchmarks/row_loop_probe.py --out ab.jsonl --set ab --repeat 3 --rep-ms 400
"""

from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl


@triton.jit
def _aligned_span(row, n, BLOCK: tl.constexpr):
    """A row's first index, its first 4-aligned index, and how many whole blocks follow that."""
    base = row * n
    head = (4 - base % 4) % 4
    start = tl.multiple_of(base + head, 4)
    return base, head, start, (n - head) // BLOCK


@triton.jit
def _row_sum_abs(x, row, n, BLOCK: tl.constexpr, ALIGNED: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    if ALIGNED:  # masked head and tail, unmasked 16-byte-aligned blocks between
        base, head, start, full = _aligned_span(row, n, BLOCK)
        acc += tl.abs(tl.load(x + base + offs, mask=offs < head, other=0.0))
        for i in range(0, full):
            acc += tl.abs(tl.load(x + start + i * BLOCK + offs))
        idx = start + full * BLOCK + offs
        acc += tl.abs(tl.load(x + idx, mask=idx < base + n, other=0.0))
    else:
        base = row * n
        for s in range(0, n, BLOCK):
            r = s + offs
            acc += tl.abs(tl.load(x + base + r, mask=r < n, other=0.0))
    return tl.sum(acc, axis=0)


@triton.jit
def _row_scale(x, out, row, n, scale, BLOCK: tl.constexpr, REVERSE: tl.constexpr,
               ALIGNED: tl.constexpr):  # fmt: skip
    offs = tl.arange(0, BLOCK)
    if ALIGNED:
        base, head, start, full = _aligned_span(row, n, BLOCK)
        idx = start + full * BLOCK + offs
        tail = idx < base + n
        tl.store(out + idx, tl.load(x + idx, mask=tail, other=0.0) * scale, mask=tail)
        for i in range(0, full):
            idx = start + ((full - 1 - i) if REVERSE else i) * BLOCK + offs
            tl.store(out + idx, tl.load(x + idx) * scale)
        tl.store(out + base + offs, tl.load(x + base + offs, mask=offs < head) * scale,
                 mask=offs < head)  # fmt: skip
    else:
        base = row * n
        steps = tl.cdiv(n, BLOCK)
        for i in range(0, steps):
            r = ((steps - 1 - i) if REVERSE else i) * BLOCK + offs
            v = tl.load(x + base + r, mask=r < n, other=0.0)
            tl.store(out + base + r, v * scale, mask=r < n)


@triton.jit
def l1norm_kernel(x, out, rows, n, BLOCK: tl.constexpr, PERSISTENT: tl.constexpr,
                  REVERSE: tl.constexpr, ALIGNED: tl.constexpr):  # fmt: skip
    if PERSISTENT:
        for row in range(tl.program_id(0), rows, tl.num_programs(0)):
            total = _row_sum_abs(x, row, n, BLOCK, ALIGNED)
            _row_scale(x, out, row, n, n / total, BLOCK, REVERSE, ALIGNED)
    else:
        row = tl.program_id(0)
        total = _row_sum_abs(x, row, n, BLOCK, ALIGNED)
        _row_scale(x, out, row, n, n / total, BLOCK, REVERSE, ALIGNED)


@triton.jit
def middle_sum_kernel(x, out, r_len, c_len, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr):
    b = tl.program_id(1)
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    acc = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    for s in range(0, r_len, BLOCK_R):
        r = s + tl.arange(0, BLOCK_R)[:, None]
        mask = (r < r_len) & (c < c_len)
        acc += tl.load(x + (b * r_len + r) * c_len + c, mask=mask, other=0.0)
    total = tl.sum(acc, axis=0)
    cc = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    tl.store(out + b * c_len + cc, total, mask=cc < c_len)


REP_MS = 60


@triton.jit
def middle_sum_flat_kernel(x, out, rows, r_len, c_len, BLOCK_K: tl.constexpr,
                           BLOCK_R: tl.constexpr):  # fmt: skip
    """As the builtin indexed strided rows before: a block of consecutive (outer, inner) rows,
    whose `k % c_len` hides from Triton that the loads are contiguous."""
    k = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)[:, None]
    acc = tl.zeros([BLOCK_K, BLOCK_R], tl.float32)
    for s in range(0, r_len, BLOCK_R):
        r = s + tl.arange(0, BLOCK_R)[None, :]
        mask = (k < rows) & (r < r_len)
        idx = (k // c_len) * (r_len * c_len) + r * c_len + k % c_len
        acc += tl.load(x + idx, mask=mask, other=0.0)
    kk = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    tl.store(out + kk, tl.sum(acc, axis=1), mask=kk < rows)


def median_ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=5, rep=REP_MS, return_mode="median")


def probe_l1norm(rows: int, n: int, variants, emit) -> None:
    x = torch.rand(rows, n, device="cuda")
    expected = x / x.abs().mean(dim=1, keepdim=True)
    gb = 2 * x.numel() * 4 / 1e9
    emit(
        {
            "case": "l1norm",
            "variant": "eager",
            "ms": median_ms(lambda: x / x.abs().mean(dim=1, keepdim=True)),
            "gb_min": gb,
        }
    )
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.empty_like(x)
    for persistent, reverse, aligned, block, warps in variants:
        grid = (sms * persistent if persistent else rows,)
        args = dict(BLOCK=block, PERSISTENT=bool(persistent), REVERSE=reverse, ALIGNED=aligned,
                    num_warps=warps)  # fmt: skip

        def run(grid=grid, args=args):
            l1norm_kernel[grid](x, out, rows, n, **args)

        run()
        ok = torch.allclose(out, expected, rtol=1e-4, atol=1e-4)
        emit({"case": "l1norm", "variant": f"per_sm={persistent} rev={reverse} aligned={aligned} "
              f"block={block} warps={warps}", "ok": ok, "ms": median_ms(run), "gb_min": gb})  # fmt: skip


def probe_middle_sum(b: int, r: int, c: int, variants, emit) -> None:
    x = torch.rand(b, r, c, device="cuda")
    expected = x.sum(dim=1)
    gb = x.numel() * 4 / 1e9
    emit({"case": "middle_sum", "variant": "eager", "ms": median_ms(lambda: x.sum(dim=1)),
          "gb_min": gb})  # fmt: skip
    out = torch.empty_like(expected)
    for block_c, block_r, warps, *flat in variants:
        grid = (triton.cdiv(c, block_c), b)

        def run(grid=grid, bc=block_c, br=block_r, w=warps, flat=bool(flat)):
            if flat:
                flat_grid = (triton.cdiv(b * c, bc),)
                middle_sum_flat_kernel[flat_grid](x, out, b * c, r, c, BLOCK_K=bc, BLOCK_R=br,
                                                  num_warps=w)  # fmt: skip
            else:
                middle_sum_kernel[grid](x, out, r, c, BLOCK_C=bc, BLOCK_R=br, num_warps=w)

        run()
        ok = torch.allclose(out, expected, rtol=1e-4, atol=1e-2)
        emit({"case": "middle_sum", "variant": f"c={block_c} r={block_r} warps={warps}"
              + (" flat" if flat else ""),
              "ok": ok, "ms": median_ms(run), "gb_min": gb})  # fmt: skip


MIDDLE = {  # (BLOCK_C, BLOCK_R, num_warps[, "flat": indexed as the builtin did before])
    "sweep": [(64, 8, 8), (64, 16, 4), (128, 8, 4), (128, 8, 8), (128, 16, 8), (128, 32, 8),
              (256, 4, 4), (256, 8, 8), (256, 16, 8), (512, 4, 8), (512, 8, 8), (32, 32, 4)],
    "ab": [(64, 8, 8), (128, 32, 8), (128, 64, 8), (64, 32, 4)],
    "flat": [(64, 8, 8, "flat"), (128, 64, 8, "flat"), (64, 64, 4, "flat"), (64, 8, 8),
             (128, 64, 8), (64, 64, 4)],
}  # fmt: skip
L1NORM = {  # (programs per SM or 0: one per row, reverse, aligned, BLOCK, num_warps)
    "sweep": [(p, rev, al, block, warps) for p in (0, 1, 2, 4) for rev in (False, True)
              for al in (False, True) for block, warps in ((4096, 8), (8192, 16), (16384, 16))],
    "ab": [(0, False, False, 4096, 8), (0, False, False, 8192, 16), (0, True, False, 8192, 16),
           (0, False, False, 16384, 16), (0, True, False, 16384, 16)],
    "flat": [],
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rows", type=int, default=32768)
    parser.add_argument("--set", choices=["sweep", "ab", "flat"], default="sweep")
    parser.add_argument("--repeat", type=int, default=1, help="run the set this many times")
    parser.add_argument("--rep-ms", type=int, default=60, help="do_bench's timing window")
    args = parser.parse_args()
    global REP_MS
    REP_MS = args.rep_ms
    with open(args.out, "a") as sink:

        def emit(record: dict) -> None:
            record["gbps"] = round(record["gb_min"] / record["ms"] * 1e3, 1)
            record["device"] = torch.cuda.get_device_name()
            line = json.dumps(record)
            print(line, flush=True)
            sink.write(line + "\n")

        for _ in range(args.repeat):
            probe_middle_sum(128, 4096, 4095, MIDDLE[args.set], emit)
            if L1NORM[args.set]:
                probe_l1norm(args.rows, 65535, L1NORM[args.set], emit)


if __name__ == "__main__":
    main()

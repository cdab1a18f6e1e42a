"""How fast harness workers move a large tensor between the device and a tensor file.

A 6 GB KernelBench output crosses a tensor file several times per evaluation (the candidate
writes each seed's outputs, the judge reads them and the stored reference outputs), so this
throughput bounds what a candidate costs. Writes a tensor of `--gb` GB from `--device` into the
harness's work folder and reads it back (into memory filled with NaN when allocated, as in the
workers), for each part count (one thread per part), `--repeats` times; prints one JSON line
per part count with median seconds and GB/s:

    python benchmarks/tensorfile_io.py [--gb 6.4] [--parts 4,8,16] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _common import emit

from kernelgraph.tools.harness import tensorfile
from kernelgraph.tools.harness.exchange import work_root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=6.4)
    parser.add_argument("--parts", default="4,8,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args()
    numel = int(ns.gb * 1e9) // 4
    value = torch.rand(numel, device=ns.device)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    folder = Path(tempfile.mkdtemp(prefix="kg-tensorfile-bench-", dir=work_root()))
    try:
        for parts in (int(p) for p in ns.parts.split(",")):
            emit(_measure(value, folder / f"x{parts}.tf", parts, ns), ns.out)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _measure(value: torch.Tensor, path: Path, parts: int, ns) -> dict:
    tensorfile.PARTS = parts
    tensorfile._pool.cache_clear()  # its thread count is the part count
    saves, loads = [], []
    for _ in range(ns.repeats):
        start = time.perf_counter()
        tensorfile.save_values([value], path)
        _sync(ns.device)
        saves.append(time.perf_counter() - start)
        start = time.perf_counter()
        (back,) = tensorfile.load_values(path, ns.device)
        _sync(ns.device)
        loads.append(time.perf_counter() - start)
        assert torch.equal(back, value), "the tensor did not survive the round trip"
        del back
    gb = value.numel() * value.element_size() / 1e9
    save_s, load_s = statistics.median(saves), statistics.median(loads)
    return {
        "parts": parts, "gb": round(gb, 2), "device": ns.device, "folder": str(path.parent),
        "save_s": round(save_s, 3), "load_s": round(load_s, 3),
        "save_gb_s": round(gb / save_s, 2), "load_gb_s": round(gb / load_s, 2),
        "save_samples_s": [round(s, 3) for s in saves],
        "load_samples_s": [round(s, 3) for s in loads],
    }  # fmt: skip


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()

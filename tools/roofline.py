"""Speed of light: the fastest a kernel could run on this device, from a roofline model.

A kernel must at least read its inputs and parameters, write its outputs and do its
FLOPs; at peak bandwidth and peak FLOP/s that takes `max(memory_ms, compute_ms)`.
`sol_pct = 100 * sol_ms / kernel_ms` says how close a kernel came. Standard library and torch
only: this runs inside the harness on bare GPU boxes.

GPU peaks are dense (no structured sparsity) datasheet numbers; an unknown GPU gets no peaks
(and sol_pct stays null) rather than a guess. CPU peaks are measured once and cached.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

from kernelgraph.tools.dispatch_modes import skip_dynamo_wrapper
from kernelgraph.tools.harness.env_info import cpu_model

skip_dynamo_wrapper(flop_counter._FlopCounterMode)  # counting FLOPs need not import dynamo

T, G = 1e12, 1e9


@dataclass(frozen=True)
class Peaks:
    """Peak memory bandwidth (bytes/s) and compute (FLOP/s, by dtype class) of one device."""

    name: str
    bandwidth: float
    flops: dict[str, float] = field(default_factory=dict)
    source: str = ""


# name -> (bandwidth in GB/s, dense TFLOP/s by dtype class[, note]). Datasheet numbers;
# "tf32"/"bf16"/"fp16"/"fp8" are tensor-core rates with fp32 accumulation.
_H100_SXM = {"fp32": 67, "tf32": 494.5, "bf16": 989, "fp16": 989, "fp8": 1979}
_NVL = {"fp32": 60, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5}
_A100 = {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}
GPU_TABLE: dict[str, tuple[float, dict[str, float]] | tuple[float, dict[str, float], str]] = {
    "H100 SXM": (3350, _H100_SXM),
    "H100 PCIe": (2000, {"fp32": 51, "tf32": 378, "bf16": 756, "fp16": 756, "fp8": 1513}),
    "H100 NVL": (3900, _NVL),
    "H200 SXM": (4800, _H100_SXM),
    "H200 NVL": (4800, _NVL),
    "A100 SXM 80GB": (2039, _A100),
    "A100 PCIe 80GB": (1935, _A100),
    "A100 40GB": (1555, _A100),
    "L40S": (864, {"fp32": 91.6, "tf32": 183, "bf16": 362.05, "fp16": 362.05, "fp8": 733}),
    "L40": (864, {"fp32": 90.5, "tf32": 90.5, "bf16": 181.05, "fp16": 181.05, "fp8": 362}),
    "L4": (300, {"fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121, "fp8": 242.5}),
    "RTX 4090": (1008, {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3}),
    "A10": (600, {"fp32": 31.2, "tf32": 62.5, "bf16": 125, "fp16": 125}),
    "A10G": (
        600,
        {"fp32": 35, "tf32": 35, "bf16": 70, "fp16": 70},
        "no NVIDIA datasheet; AWS-published figures",
    ),
    "V100 SXM2": (900, {"fp32": 15.7, "fp16": 125}),
    "V100 PCIe": (900, {"fp32": 14, "fp16": 112}),
    "V100S PCIe": (1134, {"fp32": 16.4, "fp16": 130}),
}


class Rule(NamedTuple):
    """A GPU name matches when it has every token of `all_of` and none of `none_of`."""

    all_of: tuple[str, ...]
    key: str
    none_of: tuple[str, ...] = ()


# Matched against torch.cuda.get_device_name() split into tokens, so "A10" does not match
# "A100" nor "H200" "GH200". First match wins: specific rules come first.
GPU_RULES = (
    Rule(("H100", "HBM3"), "H100 SXM"),
    Rule(("H100", "PCIE"), "H100 PCIe"),
    Rule(("H100", "NVL"), "H100 NVL"),
    Rule(("H200", "NVL"), "H200 NVL"),
    Rule(("H200",), "H200 SXM"),
    Rule(("A100", "80GB", "PCIE"), "A100 PCIe 80GB"),
    Rule(("A100", "80GB"), "A100 SXM 80GB"),
    Rule(("A100", "40GB"), "A100 40GB"),
    Rule(("L40S",), "L40S"),
    Rule(("L40",), "L40"),
    Rule(("L4",), "L4"),
    Rule(("RTX", "4090"), "RTX 4090", none_of=("D", "LAPTOP")),
    Rule(("A10G",), "A10G"),
    Rule(("A10",), "A10"),
    Rule(("V100S",), "V100S PCIe"),
    Rule(("V100", "PCIE"), "V100 PCIe"),
    Rule(("V100", "SXM2"), "V100 SXM2"),
)

# torch dtype -> the peak that bounds it. fp32 matmuls use tf32 only when the caller allows it.
DTYPE_CLASS = {
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float64: "fp64",
    **{getattr(torch, n): "fp8" for n in dir(torch) if n.startswith("float8_")},
}


def _tokens(name: str) -> set[str]:
    return set(re.split(r"[\s\-_/]+", name.upper()))


def gpu_peaks(name: str) -> Peaks | None:
    """Datasheet peaks for a GPU by its torch device name; None when the table lacks it."""
    tokens = _tokens(name)
    for rule in GPU_RULES:
        if set(rule.all_of) <= tokens and not tokens & set(rule.none_of):
            bandwidth, tflops, *note = GPU_TABLE[rule.key]
            source = f"datasheet: {rule.key}" + (f" ({note[0]})" if note else "")
            flops = {k: v * T for k, v in tflops.items()}
            return Peaks(name=rule.key, bandwidth=bandwidth * G, flops=flops, source=source)
    return None


def cache_dir() -> Path:
    return Path(os.environ.get("KERNELGRAPH_CACHE_DIR") or Path.home() / ".cache" / "kernelgraph")


def _best_seconds(fn, budget_s: float, min_reps: int = 3) -> float:
    """The fastest of several calls after a warm-up: the best case is closest to the peak."""
    fn()
    best, start, reps = math.inf, time.perf_counter(), 0
    while reps < min_reps or (time.perf_counter() - start < budget_s and reps < 100):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        reps += 1
    return best


def measure_cpu(copy_mib: int = 128, matmul_n: int = 1536, budget_s: float = 0.4) -> dict:
    """Bandwidth from a copy larger than any cache (read + write) and FLOP/s from an fp32 matmul."""
    src = torch.ones(copy_mib * 2**20 // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    copy_s = _best_seconds(lambda: dst.copy_(src), budget_s)
    a, b = torch.randn(matmul_n, matmul_n), torch.randn(matmul_n, matmul_n)
    c = torch.empty(matmul_n, matmul_n)
    mm_s = _best_seconds(lambda: torch.mm(a, b, out=c), budget_s)
    return {"bandwidth": 2 * src.nbytes / copy_s, "flops": {"fp32": 2 * matmul_n**3 / mm_s}}


def cpu_peaks(refresh: bool = False, threads: int | None = None) -> Peaks:
    """Measured CPU peaks, cached per CPU model and torch thread count (a couple of seconds once).
    `refresh` measures again and keeps the higher figures: a measurement taken while other
    work loaded the machine is too low, never too high."""
    threads = threads or torch.get_num_threads()
    model = cpu_model()
    key = f"{model} | threads={threads}"
    path = cache_dir() / "cpu_peak.json"
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    entry = cache.get(key)
    if refresh or not isinstance(entry, dict) or "bandwidth" not in entry:
        entry = _higher(_measure_with_threads(threads), entry)
        entry.update(
            cpu_model=model,
            threads=threads,
            torch=torch.__version__,
            measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        cache[key] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
        os.replace(tmp, path)  # atomic: concurrent workers never read half a file
    source = f"measured {entry['measured_at']} ({threads} threads), cached in {path}"
    return Peaks(name=model, bandwidth=entry["bandwidth"], flops=entry["flops"], source=source)


def _measure_with_threads(threads: int) -> dict:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return measure_cpu()
    finally:
        torch.set_num_threads(before)


def _higher(measured: dict, cached: Any) -> dict:
    if not isinstance(cached, dict) or "bandwidth" not in cached:
        return measured
    flops = dict(cached.get("flops") or {})
    for dtype, value in measured["flops"].items():
        flops[dtype] = max(value, flops.get(dtype, 0.0))
    return {"bandwidth": max(measured["bandwidth"], cached["bandwidth"]), "flops": flops}


def resolve_peaks(device: str) -> tuple[Peaks | None, str]:
    """Peaks for "cuda[:i]" (the GPU's datasheet) or "cpu" (measured), or None and why not."""
    kind = torch.device(device).type
    if kind == "cpu":
        return cpu_peaks(), ""
    if kind != "cuda":
        return None, f"no peak numbers for device type {kind!r}"
    if not torch.cuda.is_available():
        return None, "CUDA is not available"
    name = torch.cuda.get_device_name(torch.device(device))
    peaks = gpu_peaks(name)
    if peaks is None:
        return None, f"GPU {name!r} is not in the peak table (tools/roofline.py GPU_RULES)"
    return peaks, ""


def device_peaks(device: str) -> Peaks | None:
    return resolve_peaks(device)[0]


def count_flops(model: Any, inputs: Iterable[Any]) -> int:
    """FLOPs of one forward call, counted by torch (matmuls, convolutions, attention only).

    Works on meta tensors (shapes only), so big tasks can be counted without memory.
    """
    return sum(flops_by_op(model, inputs).values())


def flops_by_op(model: Any, inputs: Iterable[Any]) -> dict[str, int]:
    """count_flops per ATen op ("aten.convolution": ...)."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(*inputs)
    return {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}


def conv_flops(by_op: dict[str, int]) -> int:
    """The convolutions' share: under PyTorch's default flags cuDNN may run them in TF32."""
    return sum(n for op, n in by_op.items() if "convolution" in op)


def _tensors(obj: Any) -> Iterable[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, torch.nn.Module):
        yield from obj.parameters()
        yield from obj.buffers()
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors(value)
    elif isinstance(obj, (list, tuple, set)):
        for value in obj:
            yield from _tensors(value)


def _identity(t: torch.Tensor) -> tuple:
    """Same tensor or same memory viewed the same way: counted once (tied weights, aliases)."""
    if t.device.type == "meta":
        return ("meta", id(t))
    return (t.device, t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()))


def min_bytes(inputs: Any, params: Any = None, outputs: Any = None) -> int:
    """Bytes a kernel must move at least: read every input and parameter, write every output.

    Each argument may be a tensor, an nn.Module (parameters and buffers), or nested
    lists/tuples/dicts of them; non-tensors count zero.
    """
    seen: dict[tuple, int] = {}
    for t in _tensors((inputs, params, outputs)):
        seen.setdefault(_identity(t), t.numel() * t.element_size())
    return sum(seen.values())


def dtype_class(dtype: torch.dtype | str, tf32: bool = False) -> str:
    """The peak-table column for a dtype: fp32 becomes tf32 when TF32 matmuls are allowed."""
    if isinstance(dtype, str):  # "bfloat16", "torch.half" or already a class like "bf16"
        as_torch = getattr(torch, dtype.removeprefix("torch."), None)
        dtype = as_torch if isinstance(as_torch, torch.dtype) else dtype
    name = DTYPE_CLASS.get(dtype, str(dtype)) if isinstance(dtype, torch.dtype) else dtype
    return "tf32" if name == "fp32" and tf32 else name


def dominant_dtype(tensors: Any) -> torch.dtype:
    """The floating dtype holding the most bytes (fp32 when there is none)."""
    totals: dict[torch.dtype, int] = {}
    for t in _tensors(tensors):
        if t.is_floating_point():
            totals[t.dtype] = totals.get(t.dtype, 0) + t.numel() * t.element_size()
    return max(totals, key=totals.__getitem__) if totals else torch.float32


def speed_of_light(
    flops: int,
    bytes_moved: int,
    peaks: Peaks | None,
    dtype: torch.dtype | str = torch.float32,
    tf32: bool = False,
) -> dict[str, Any]:
    """The roofline lower bound on time; all values None (with a reason) without peaks."""
    result: dict[str, Any] = {
        "sol_ms": None,
        "compute_ms": None,
        "memory_ms": None,
        "bound": None,
        "peak_flops": None,
        "peak_bandwidth": None,
        "dtype_class": dtype_class(dtype, tf32),
        "flops": int(flops),
        "bytes": int(bytes_moved),
        "source": None,
    }
    if peaks is None:
        return result | {"reason": "no peak numbers for this device"}
    cls = result["dtype_class"]
    peak = peaks.flops.get(cls)
    tensor_core_fp32 = peaks.flops.get("tf32", 0) / 3
    if cls == "fp32" and peak is not None and tensor_core_fp32 > peak:
        # fp32-accurate products also run as three TF32 tensor-core products (tf32x3)
        peak = tensor_core_fp32
        result["note"] = "fp32 at a third of the TF32 tensor-core rate (tf32x3), above the FMA rate"
    if peak is None:  # e.g. bf16 on V100: the fp32 rate, an optimistic bound, said so
        cls, peak = "fp32", peaks.flops.get("fp32")
        result["note"] = f"no {result['dtype_class']} peak for {peaks.name}; used the fp32 peak"
    if not peak or not peaks.bandwidth:
        return result | {"source": peaks.source, "reason": f"no {cls} peak for {peaks.name}"}
    compute_ms = 1e3 * flops / peak
    memory_ms = 1e3 * bytes_moved / peaks.bandwidth
    return result | {
        "sol_ms": max(compute_ms, memory_ms),
        "compute_ms": compute_ms,
        "memory_ms": memory_ms,
        "bound": "compute" if compute_ms > memory_ms else "memory",
        "peak_flops": peak,
        "peak_bandwidth": peaks.bandwidth,
        "dtype_class": cls,
        "source": peaks.source,
    }


def sol_pct(sol_ms: float | None, kernel_ms: float | None) -> float | None:
    """How close to the speed of light a kernel ran, in percent; None when either is unknown."""
    if sol_ms is None or not kernel_ms or kernel_ms <= 0:
        return None
    return 100.0 * sol_ms / kernel_ms

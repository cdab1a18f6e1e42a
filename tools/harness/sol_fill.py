"""A passed verdict's speed-of-light: the roofline bound for the task's FLOPs and bytes on this
device's peaks, and the kernel's share of it."""

from __future__ import annotations

import os

from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.verdict import Verdict


def fill_sol(verdict: Verdict, config: EvalConfig, meta: dict, peaks: dict | None) -> None:
    from kernelgraph.tools import roofline

    if not peaks or meta.get("min_bytes") is None:
        verdict.sol = {
            "reason": "no peak figures for this device" if not peaks else "FLOPs/bytes unknown"
        }
        return

    spec = config.precision_spec
    # a candidate may run what the reference may run in TF32 (matmuls where allowed, cuDNN's
    # convolutions at fp32): the bound takes the TF32 rate for all FLOPs then
    on_gpu = config.device.startswith("cuda")
    tf32 = spec.allow_tf32 or (spec.cudnn_tf32 and on_gpu and bool(meta.get("conv_flops")))

    def fill(figures: roofline.Peaks) -> None:
        verdict.sol = roofline.speed_of_light(
            meta.get("flops") or 0,
            meta["min_bytes"],
            figures,
            spec.dtype,  # floating inputs are cast to it
            tf32,
        )
        verdict.sol_pct = roofline.sol_pct(verdict.sol["sol_ms"], verdict.timing.kernel_ms)

    fill(roofline.Peaks(**peaks))
    if verdict.sol_pct is not None and verdict.sol_pct > 100 and _remeasure_cpu(config):
        fill(roofline.cpu_peaks(refresh=True, threads=config.threads or os.cpu_count() or 1))
    _less_arithmetic(verdict)
    sol = verdict.sol
    if verdict.sol_pct is not None and verdict.sol_pct > 100:
        verdict.warnings.append(
            f"{verdict.sol_pct:.0f}% of speed-of-light: faster than the peak allows, so the data "
            f"stayed in cache between calls or the peak figure ({sol.get('source')}) is too low"
        )


def _less_arithmetic(verdict: Verdict) -> None:
    """Faster than the reference's FLOPs allow but not faster than its unavoidable memory
    traffic: the kernel computed the result with less arithmetic (an algebraic rewrite, such as a
    sum over a GEMM's outputs taken as one GEMV). The reference's FLOPs bound nothing then, so
    the bound becomes the memory traffic alone."""
    sol, pct = verdict.sol, verdict.sol_pct
    if pct is None or pct <= 100 or sol.get("bound") != "compute":
        return
    if verdict.timing.kernel_ms < sol["memory_ms"]:
        return  # faster than the memory floor too: the warning below says why that can be
    from kernelgraph.tools import roofline

    verdict.sol = {**sol, "sol_ms": sol["memory_ms"], "bound": "memory",
                   "reference_compute_pct": pct}  # fmt: skip
    verdict.sol_pct = roofline.sol_pct(sol["memory_ms"], verdict.timing.kernel_ms)
    verdict.warnings.append(
        f"faster than the reference's {sol['flops']:.3g} FLOPs allow at peak ({pct:.0f}% of that "
        "bound): the kernel computes the result with less arithmetic, so % of speed-of-light "
        "counts only the inputs and outputs' memory traffic"
    )


_CPU_REMEASURED: set[int] = set()  # thread counts whose CPU peaks this process measured again


def _remeasure_cpu(config: EvalConfig) -> bool:
    """Above 100% on the CPU, the cached peaks may have been measured while other work loaded
    the machine: measure them again, once per process and thread count (a cache-resident task
    stays above 100% however often it is measured)."""
    if config.device != "cpu" or config.threads in _CPU_REMEASURED:
        return False
    _CPU_REMEASURED.add(config.threads)
    return True

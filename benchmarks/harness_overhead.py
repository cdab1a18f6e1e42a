"""Harness overhead: where the time of one `evaluate` goes, for a small, already-built kernel.

    python benchmarks/harness_overhead.py [--device cuda] [--repeats 3] [--out FILE]

Prints per-phase wall times (prepare, candidate, judge worker processes), the start-up cost of
one bare worker process (Python + torch import + CUDA init, measured in the same sandbox), and
the overhead beyond start-up: total - 2 x start-up (prepare and candidate start one after the
other; the judge starts beside them and waits). Target: under 3 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import emit, example

from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate
from kernelgraph.tools.harness.sandbox import Limits, run_sandboxed, scrubbed_env


def startup_seconds(device: str) -> float:
    """One sandboxed `python -c 'import torch, triton; CUDA init'`, like a worker's start."""
    init = "torch.cuda.init(); torch.empty(1, device='cuda')" if device == "cuda" else "pass"
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        t0 = time.monotonic()
        run_sandboxed(
            [sys.executable, "-c", f"import torch, triton; {init}"],
            cwd=home,
            env=scrubbed_env({}, home),
            limits=Limits(120),
            log_path=home / "log",
        )
        return time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--example", default="swish_bias_clamp")
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from kernelgraph.tools.task import parse_sets

    task, kernel = example(args.example, "kernel_triton.py")
    config = EvalConfig(dsl="triton", device=args.device, sets=parse_sets(args.set))
    cache = EvalCache(Path(tempfile.mkdtemp()))
    evaluate(task, kernel, config, cache=cache, use_cache=False)  # builds and caches the kernel
    startups = [startup_seconds(args.device) for _ in range(args.repeats)]
    totals, phases = [], []
    for _ in range(args.repeats):
        t0 = time.monotonic()
        verdict = evaluate(task, kernel, config, cache=cache, use_cache=False)
        totals.append(time.monotonic() - t0)
        phases.append(verdict.phases_s)
        assert verdict.passed, verdict.message
    startup = statistics.median(startups)
    total = statistics.median(totals)
    record = {
        "benchmark": "harness_overhead",
        "example": args.example,
        "device": args.device,
        "total_s": round(total, 3),
        "worker_startup_s": round(startup, 3),
        "overhead_beyond_startup_s": round(total - 2 * startup, 3),
        "phases_s": {k: statistics.median(p[k] for p in phases) for k in phases[0]},
        "kernel_ms": verdict.timing.kernel_ms,
        "timing_iterations": verdict.timing.iterations,
    }
    emit(record, args.out)


if __name__ == "__main__":
    main()

"""Timing stability: profile the same kernels 5 times (fresh evaluations) and compare medians.

    python benchmarks/timing_stability.py [--device cuda] [--repeats 5] [--out FILE]

Target: the 5 medians of each kernel agree within 3% ((max - min) / min).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import TRITON_EXAMPLES, emit, example

from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--examples", nargs="*", help="example names (default: all Triton ones)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    config = EvalConfig(dsl="triton", device=args.device, seeds=1)
    for name, kernel_file in TRITON_EXAMPLES:
        if args.examples and name not in args.examples:
            continue
        task, kernel = example(name, kernel_file)
        kernel_ms, eager_ms = [], []
        for _ in range(args.repeats):
            cache = EvalCache(Path(tempfile.mkdtemp()))
            verdict = evaluate(task, kernel, config, cache=cache, use_cache=False)
            if not verdict.passed:
                emit(
                    {"benchmark": "timing_stability", "example": name, "error": verdict.message},
                    args.out,
                )
                break
            kernel_ms.append(verdict.timing.kernel_ms)
            eager_ms.append(verdict.timing.eager_ms)
        else:
            emit(
                {
                    "benchmark": "timing_stability",
                    "example": name,
                    "kernel_ms": kernel_ms,
                    "kernel_range_pct": round(
                        100 * (max(kernel_ms) - min(kernel_ms)) / min(kernel_ms), 2
                    ),
                    "eager_ms": eager_ms,
                    "eager_range_pct": round(
                        100 * (max(eager_ms) - min(eager_ms)) / min(eager_ms), 2
                    ),
                },
                args.out,
            )


if __name__ == "__main__":
    main()

"""What a candidate costs once its task's reference is stored (issue 11's target: verifying and
profiling a candidate for a 6 GB KernelBench problem in <= 20 s beyond its build).

Evaluates one kernel for one task three times through the real harness, each time as new code
(a comment appended, so no verdict is reused), in a fresh cache folder: the first evaluation
builds the reference store entry, the next ones reuse it. Prints one JSON line per evaluation
with its wall time, the kernel's build (the candidate's compile phase), the time beyond that,
the phases and peak memory. Candidate workers start ahead of their evaluation (as in a tuning
run) unless `--cold`; `--both` runs the repeats cold, then warm, side by side in one process:

    python benchmarks/reference_store.py TASK KERNEL --dsl triton [--repeats 3] [--both] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from pathlib import Path

from _common import emit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", type=Path)
    parser.add_argument("kernel", type=Path)
    parser.add_argument("--dsl", default="triton")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-compile", action="store_true")
    parser.add_argument("--cold", action="store_true", help="no candidate worker started ahead")
    parser.add_argument("--both", action="store_true", help="the repeats cold, then warm")
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args()
    os.environ.setdefault("KERNELGRAPH_CACHE_DIR", tempfile.mkdtemp(prefix="kg-refstore-bench-"))

    from tools.harness.cache import EvalCache
    from tools.harness.config import EvalConfig
    from tools.harness.evaluate import evaluate
    from tools.harness.warm import WARM_POOL

    config = EvalConfig(dsl=ns.dsl, device=ns.device, baseline_compile=ns.baseline_compile)
    code = ns.kernel.read_text()
    work = Path(tempfile.mkdtemp(prefix="kg-refstore-kernels-"))
    modes = ["cold", "warm"] if ns.both else ["cold" if ns.cold else "warm"]
    n = 0
    for mode in modes:
        pool = contextlib.nullcontext() if mode == "cold" else WARM_POOL.active()
        with pool:
            for _ in range(ns.repeats):
                kernel = work / f"kernel_{n}.py"
                kernel.write_text(f"{code}\n# variant {n}\n")  # new code: no cached verdict
                start = time.monotonic()
                verdict = evaluate(ns.task, kernel, config, cache=EvalCache(work / "evals"))
                wall = time.monotonic() - start
                build = verdict.phases_s.get("candidate.compile", 0.0)
                emit(
                    {
                        "evaluation": n,
                        "workers": mode,
                        "started_ahead_s": verdict.phases_s.get("candidate.started_ahead_s"),
                        "status": verdict.status,
                        "reference": verdict.reference,
                        "wall_s": round(wall, 2),
                        "build_s": round(build, 2),
                        "beyond_build_s": round(wall - build, 2),
                        "kernel_ms": verdict.timing.kernel_ms,
                        "eager_ms": verdict.timing.eager_ms,
                        "baseline_cached": verdict.timing.baseline_cached,
                        "phases_s": verdict.phases_s,
                        "memory": verdict.memory,
                        "message": verdict.message[:300],
                    },
                    ns.out,
                )
                n += 1


if __name__ == "__main__":
    main()

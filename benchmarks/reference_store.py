"""What a candidate costs once its task's reference is stored (issue 11's target: verifying and
profiling a candidate for a 6 GB KernelBench problem in <= 20 s beyond its build).

Evaluates one kernel for one task three times through the real harness, each time as new code
(a comment appended, so no verdict is reused), in a fresh cache folder: the first evaluation
builds the reference store entry, the next ones reuse it. Prints one JSON line per evaluation
with its wall time, the kernel's build (the candidate's compile phase), the time beyond that,
the phases and peak memory. Candidate workers start ahead of their evaluation (as in a tuning
run) unless `--cold`; `--both` runs the repeats cold, then warm, side by side in one process.
With `--build`, each variant first goes through the compiler node's gate (static checks and a
compile for the device's target, in its own workers), as in `kernelgraph run`; its wall time is
the build, and the evaluation's wall time is what lies beyond it:

    python benchmarks/reference_store.py TASK KERNEL --dsl triton [--repeats 3] [--both]
        [--build] [--out FILE]
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
    parser.add_argument("--build", action="store_true", help="compile each variant first")
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args()
    os.environ.setdefault("KERNELGRAPH_CACHE_DIR", tempfile.mkdtemp(prefix="kg-refstore-bench-"))

    from kernelgraph.tools.dsl import get_adapter
    from kernelgraph.tools.harness.cache import EvalCache
    from kernelgraph.tools.harness.compile_only import compile_only
    from kernelgraph.tools.harness.config import EvalConfig
    from kernelgraph.tools.harness.evaluate import evaluate
    from kernelgraph.tools.harness.warm import WARM_POOL

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
                compiled = _build(compile_only, get_adapter(ns.dsl), ns, kernel, config)
                built = time.monotonic()
                verdict = evaluate(ns.task, kernel, config, cache=EvalCache(work / "evals"))
                wall = time.monotonic() - built
                build = (
                    built - start if ns.build else verdict.phases_s.get("candidate.compile", 0.0)
                )
                emit(
                    {
                        "evaluation": n,
                        "workers": mode,
                        "started_ahead_s": verdict.phases_s.get("candidate.started_ahead_s"),
                        "status": verdict.status,
                        "reference": verdict.reference,
                        "build": "compile gate" if ns.build else "candidate's import",
                        "build_ok": compiled,
                        "wall_s": round(wall + (build if ns.build else 0.0), 2),
                        "build_s": round(build, 2),
                        "beyond_build_s": round(wall - (0.0 if ns.build else build), 2),
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


def _build(compile_only, adapter, ns, kernel: Path, config) -> bool | None:
    """The compiler node's gate for this variant, as a run does before evaluating it."""
    target = adapter.compile_target(ns.device) if ns.build else None
    if target is None:
        return None
    report = compile_only(ns.task, kernel, ns.dsl, target, config.sets, config.timeout_s,
                          config.policy, inputs_device=ns.device)  # fmt: skip
    return bool(report.get("ok"))


if __name__ == "__main__":
    main()

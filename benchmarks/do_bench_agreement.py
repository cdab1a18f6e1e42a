"""Agreement with triton.testing.do_bench: the harness's kernel_ms vs do_bench's median.

    python benchmarks/do_bench_agreement.py [--out FILE]      (needs a CUDA GPU)

Our own example kernels are trusted code, so do_bench runs them in this process.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import triton
from _common import TRITON_EXAMPLES, emit, example

from kernelgraph.tools.dsl.base import import_file
from kernelgraph.tools.harness import reference as ref
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import PRECISIONS, EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate
from kernelgraph.tools.task import TaskSource


def do_bench_ms(task_path: Path, kernel_path: Path) -> float:
    precision = PRECISIONS["fp32"]
    ref.set_precision_flags(precision)
    module = TaskSource.read(task_path).load_module()
    init_inputs = ref.make_init_inputs(module)
    candidate = import_file(kernel_path, f"bench_{kernel_path.parent.name}")
    model = ref.build_model(candidate.ModelNew, init_inputs, "cuda", precision)
    inputs = ref.device_inputs(ref.make_inputs(module, ref.TIMING_SEED, "cuda"), "cuda", precision)
    with torch.no_grad():
        return triton.testing.do_bench(
            lambda: model(*inputs), warmup=100, rep=1000, return_mode="median"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    config = EvalConfig(dsl="triton", device="cuda", seeds=1)
    for name, kernel_file in TRITON_EXAMPLES:
        task, kernel = example(name, kernel_file)
        verdict = evaluate(
            task, kernel, config, cache=EvalCache(Path(tempfile.mkdtemp())), use_cache=False
        )
        theirs = do_bench_ms(task, kernel)
        ours = verdict.timing.kernel_ms
        emit(
            {
                "benchmark": "do_bench_agreement",
                "example": name,
                "harness_ms": ours,
                "do_bench_ms": theirs,
                "ratio": round(ours / theirs, 4) if ours and theirs else None,
                "status": verdict.status,
            },
            args.out,
        )


if __name__ == "__main__":
    main()

"""Probe: time variants of a kernel file against the task's eager model, side by side.

For A/B questions about generated code (a loop structure, where operands are rounded): each
KERNEL is a file defining `ModelNew`, such as the builtin writes. The task's `Model` and each
`ModelNew` are built under the same seed, as KernelBench builds them; every variant's output is
compared with eager's (max abs error, printed, not judged: the harness judges; a NaN there
means elements left unwritten), then all are
timed in turns with `triton.testing.do_bench` (median, L2 cleared between calls), `--repeat`
rounds. One JSON line per (round, variant); with `--per-kernel`, also one per GPU kernel each
variant launches (torch.profiler, mean microseconds per call, L2 not cleared). The kernel files are imported into this process:
use it only on code you wrote or generated yourself; kernelgraph's harness sandboxes the rest.

    python benchmarks/kernel_file_probe.py TASK.py A.py B.py --repeat 2 --out probe.jsonl
    python benchmarks/kernel_file_probe.py TASK.py A.py --per-kernel
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch
from _common import emit


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _build(cls, init: list, seed: int):
    """In training mode, as KernelBench and the harness run it (batch norm uses batch stats)."""
    torch.manual_seed(seed)
    return cls(*init).cuda()


def _error(model, inputs: list, expected: torch.Tensor) -> float:
    """Max abs error; the output is then poisoned, so a later variant that leaves elements
    unwritten cannot inherit correct values from this one's freed memory."""
    out = model(*inputs)
    error = float((out - expected).abs().max())
    out.fill_(float("nan"))
    return error


def _per_kernel(model, inputs: list, calls: int = 5) -> dict[str, float]:
    """Mean microseconds per forward call of each GPU kernel the model launches."""
    from torch.profiler import ProfilerActivity, profile

    model(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            model(*inputs)
        torch.cuda.synchronize()
    return {e.key: e.device_time_total / calls for e in prof.key_averages() if e.device_time_total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", type=Path)
    parser.add_argument("kernels", type=Path, nargs="+")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--rep-ms", type=int, default=300)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--per-kernel", action="store_true", help="time each GPU kernel too")
    args = parser.parse_args()
    from triton.testing import do_bench

    task = _module(args.task, "probe_task")
    torch.manual_seed(args.seed)
    init = task.get_init_inputs()
    torch.manual_seed(args.seed)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    models = {"eager": _build(task.Model, init, args.seed)}
    for i, path in enumerate(args.kernels):
        models[path.stem] = _build(_module(path, f"probe_kernel{i}").ModelNew, init, args.seed)
    with torch.no_grad():
        expected = models["eager"](*inputs)
        errors = {name: _error(model, inputs, expected) for name, model in models.items()}
        del expected
        for name, model in models.items() if args.per_kernel else ():
            for kernel, us in _per_kernel(model, inputs).items():
                emit({"task": args.task.stem, "variant": name, "kernel": kernel[:80],
                      "us_per_call": round(us, 1)}, args.out)  # fmt: skip
        for round_ in range(args.repeat):
            for name, model in models.items():
                ms = do_bench(lambda model=model: model(*inputs), rep=args.rep_ms)
                emit({"task": args.task.stem, "variant": name, "round": round_, "ms": ms,
                      "max_abs_err": errors[name], "device": torch.cuda.get_device_name()},
                     args.out)  # fmt: skip


if __name__ == "__main__":
    main()

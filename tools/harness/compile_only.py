"""Compile-checking a candidate for an explicit target, e.g. sm_90a on a machine without a GPU."""

from __future__ import annotations

from pathlib import Path

from kernelgraph.tools.dsl import get_adapter
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluation import Evaluation, prepare_meta, read_kernel
from kernelgraph.tools.harness.infra import retried
from kernelgraph.tools.harness.reference import verification_seeds
from kernelgraph.tools.harness.static_gate import run_static_checks
from kernelgraph.tools.harness.verdict import UsageError
from kernelgraph.tools.task import TaskSource


def compile_only(
    task_path,
    kernel_path,
    dsl: str,
    target: str,
    sets: dict,
    timeout_s: float,
    policy: str = "strict",
    inputs_device: str = "cpu",
) -> dict:
    """Static checks, then the adapter's compile check in a sandboxed worker. Returns a report.
    `inputs_device` is where the inputs are made and the forward is traced (its library calls
    run there); the kernels are compiled for `target`, never launched."""
    try:
        adapter = get_adapter(dsl)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from exc
    task = TaskSource.read(task_path, sets)
    kernel = Path(kernel_path)
    config = EvalConfig(
        dsl=dsl, device="cpu", seeds=1, sets=sets, timeout_s=timeout_s, policy=policy
    )
    static = run_static_checks(read_kernel(kernel), adapter, config)
    if static is not None:
        return {"ok": False, "target": target, "stage": static.check, "message": static.message()}
    seed = verification_seeds(1)[0]

    def attempt():
        ev = Evaluation(task, kernel, config)
        try:
            prep_dir = ev.dir / "prepare"
            prep = ev.worker(
                "prepare",
                {
                    "seeds": [seed],
                    "inputs_dir": str(prep_dir),
                    "validate": False,
                    "inputs_device": inputs_device,
                },  # fmt: skip
                private=ev.base_spec(),
            )
            prepare_meta(prep, task)
            spec = {"dsl": dsl, "kernel": str(kernel.resolve()), "target": target,
                    "inputs_dir": str(prep_dir), "seed": seed, "device": inputs_device}  # fmt: skip
            return ev.worker("compile", spec), ev.phases.get("compile")
        finally:
            ev.close()

    run, seconds = retried(attempt)
    result = run.result or {}
    if "compile" in result:
        return {**result["compile"], "stage": "compile", "seconds": seconds}
    detail = result.get("error") or run.process.log_tail[-1500:]
    if run.process.timed_out:
        detail = f"timed out after {run.process.wall_s:.0f} s"
    return {"ok": False, "target": target, "stage": "compile", "message": detail}

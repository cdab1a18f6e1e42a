"""Worker role `candidate`: load, run, guard and time the untrusted kernel.

This process never imports the task module and never sees reference outputs: it gets the
inputs and init arguments as data, writes its outputs, and reports what its guards saw. All of
that is untrusted; the judge decides correctness and the parent checks the claimed timings.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any

import torch

from kernelgraph.tools.dsl import LaunchCounter, get_adapter
from kernelgraph.tools.harness import guards
from kernelgraph.tools.harness import reference as ref
from kernelgraph.tools.harness.buffers import BufferState
from kernelgraph.tools.harness.config import PRECISIONS
from kernelgraph.tools.harness.exchange import as_output_list, read_message
from kernelgraph.tools.harness.memory import device_peak_bytes, release
from kernelgraph.tools.harness.stopwatch import watch
from kernelgraph.tools.harness.tensorfile import load_values, save_values
from kernelgraph.tools.harness.timing import time_loop
from kernelgraph.tools.harness.verdict import (
    COMPILE_ERROR,
    CRASHED,
    Check,
    CheckName,
)


class CandidateFailure(Exception):
    def __init__(self, status: str, stage: str, message: str) -> None:
        super().__init__(message)
        self.status, self.stage, self.message = status, stage, message


def run(spec: dict) -> dict:
    checks: list[Check] = []
    report: dict[str, Any] = {"checks": checks, "outputs": {}, "ops": {}, "launches": {}}
    try:
        _run(spec, checks, report)
        report["status"] = "ok"
    except CandidateFailure as failure:
        report.update(status=failure.status, stage=failure.stage, message=failure.message)
    report["checks"] = [c.__dict__ for c in checks]
    return report


def _run(spec: dict, checks: list[Check], report: dict) -> None:
    precision, device = PRECISIONS[spec["precision"]], spec["device"]
    with watch.stage("setup"):  # importing the DSL, patching its launcher
        ref.set_precision_flags(precision)
        ref.set_threads(spec.get("threads", 0))
        guards.poison_uninitialized_memory()
        adapter = get_adapter(spec["dsl"])
        adapter.prepare_child(device)
        counter = LaunchCounter()
        adapter.install_launch_counter(counter, device)
    evaluation = read_message()  # kernel, seeds, folders: a worker started ahead waits here
    if not evaluation:
        raise CandidateFailure(CRASHED, "setup", "the harness stopped before giving a kernel")
    spec.update(evaluation)
    in_dir, out_dir = Path(spec["inputs_dir"]), Path(spec["out_dir"])
    with watch.stage("waiting_for_inputs"):
        go = read_message()  # the parent's go: prepare has written the inputs
    if not go:
        raise CandidateFailure(CRASHED, "setup", "the harness stopped before the inputs were ready")
    spec.update(go)
    init_inputs = load_values(in_dir / "init.tf")
    with watch.stage("compile"):
        model = _stage(adapter, "compile", lambda: _load(adapter, spec, init_inputs, precision))
    checks.append(Check(CheckName.COMPILE, True, "imported and constructed ModelNew"))

    recorder = guards.OpRecorder(counter)
    buffers = BufferState(model, spec.get("updated_buffers") or [])
    with watch.stage("verify"):
        verified = _verify(spec, model, buffers, adapter, counter, recorder, checks, report)
    if verified and spec.get("profile"):
        with watch.stage("profile"):
            _profile(spec, model, adapter, counter, device, out_dir, report)
    report["peak_device_bytes"] = device_peak_bytes(device)


def _verify(spec, model, buffers, adapter, counter, recorder, checks, report) -> bool:
    """Run every seed under the guards and write the outputs (and the buffers the reference's
    forward updates), one seed alive at a time. False when the outputs are unusable."""
    device, out_dir = spec["device"], Path(spec["out_dir"])
    for seed in spec["seeds"]:
        with watch.stage("verify.load"):
            inputs = _inputs(spec, seed)
        before = guards.input_prints(inputs)
        launches_before = counter.count
        buffers.restore(model)  # each seed's update starts from the state at construction

        def forward(inputs=inputs):
            with torch.no_grad(), recorder:
                return as_output_list(model(*inputs))

        outputs = _stage(adapter, "run", forward)
        snapshot = guards.snapshot_before_sync(outputs) if device == "cuda" else None
        _stage(adapter, "run", lambda: ref.synchronize(device))
        report["launches"][str(seed)] = counter.count - launches_before
        problem = guards.plain_tensor_problem(outputs)
        if problem:
            checks.append(Check(CheckName.OUTPUT_TYPE, False, problem))
            return False
        if snapshot is not None:
            _side_stream_check(checks, snapshot, outputs, seed)
        del snapshot
        report["aliasing"] = report.get("aliasing", []) + [
            [seed, o, i] for o, i in guards.aliasing(outputs, inputs)
        ]
        report["changed_inputs"] = report.get("changed_inputs", []) + [
            [seed, j] for j in guards.changed_inputs(before, inputs)
        ]
        with watch.stage("verify.save"):
            save_values(outputs, out_dir / f"outputs_{seed}.tf")
            if buffers.initial:
                save_values(buffers.current(model), out_dir / f"buffers_{seed}.tf")
        report["outputs"][str(seed)] = f"outputs_{seed}.tf"
        if buffers.initial:
            report.setdefault("buffers", {})[str(seed)] = f"buffers_{seed}.tf"
        del inputs, outputs
        release(device)
    report["ops"] = dict(recorder.ops)
    return True


def _inputs(spec: dict, seed: int) -> list[Any]:
    """One seed's inputs, streamed from the file to the device (no host copy is kept)."""
    values = load_values(Path(spec["inputs_dir"]) / f"inputs_{seed}.tf", spec["device"])
    return ref.device_inputs(values, spec["device"], PRECISIONS[spec["precision"]])


def _load(adapter, spec: dict, init_inputs: list, precision) -> torch.nn.Module:
    module = adapter.load_module(Path(spec["kernel"]))
    model_class = getattr(module, "ModelNew", None)
    if model_class is None:
        raise CandidateFailure(COMPILE_ERROR, "compile", "the kernel file defines no ModelNew")
    model = ref.build_model(model_class, init_inputs, spec["device"], precision, spec["training"])
    if spec.get("share_weights"):  # opt-in; KernelBench's protocol shares nothing
        share_reference_state(model, dict(load_values(Path(spec["inputs_dir"]) / "state.tf")))
    return model


def share_reference_state(model: torch.nn.Module, reference: dict[str, torch.Tensor]) -> None:
    """Give ModelNew the reference's parameters and buffers where names and shapes match, so a
    kernel is judged on the same weights whatever order its constructor made them in."""
    own = model.state_dict()
    matching = {
        name: tensor
        for name, tensor in reference.items()
        if name in own and tuple(own[name].shape) == tuple(tensor.shape)
    }
    if matching:
        with torch.no_grad():
            model.load_state_dict(matching, strict=False)


def _stage(adapter, stage: str, fn):
    """Run one stage; turn exceptions into a verdict the parent can trust the category of."""
    try:
        return fn()
    except CandidateFailure:
        raise
    except torch.OutOfMemoryError as exc:
        raise CandidateFailure(CRASHED, stage, f"out of memory: {_first_line(exc)}") from exc
    except BaseException as exc:  # noqa: BLE001 - hostile code may raise anything
        status = COMPILE_ERROR if (stage == "compile" or adapter.is_compile_error(exc)) else CRASHED
        raise CandidateFailure(status, stage, _describe(exc)) from exc


def _side_stream_check(checks: list[Check], snapshot, outputs, seed: int) -> None:
    for i, (early, late) in enumerate(zip(snapshot, outputs, strict=True)):
        if not torch.equal(early.nan_to_num(), late.nan_to_num()):
            checks.append(
                Check(
                    CheckName.NO_SIDE_STREAM,
                    False,
                    f"seed {seed}: output {i} changed after forward returned (work left on a "
                    f"side stream, not ordered with the caller's stream)",
                )
            )
            return


def _profile(spec, model, adapter, counter, device, out_dir, report) -> None:
    pool_seeds = spec["pool_seeds"]
    with watch.stage("profile.load"):
        pool = [_inputs(spec, s) for s in pool_seeds]
    live = [x.clone() if isinstance(x, torch.Tensor) else x for x in pool[0]]

    def call():
        with torch.no_grad():
            return model(*live)

    # Poisoning torch.empty costs a memset per allocation; eager is timed without it.
    guards.poison_uninitialized_memory(False)
    launches_before = counter.count
    clock = _Clock(spec.get("clock"))
    clock.mark("start")
    timing, last = _stage(adapter, "profile", lambda: time_loop(call, live, pool, device))
    clock.mark("end")
    report["timing"] = {k: v for k, v in timing.to_dict().items() if k != "samples_ms"}
    report["timing_launches"] = counter.count - launches_before
    last_outputs = as_output_list(last)
    if guards.plain_tensor_problem(last_outputs) is None:
        with watch.stage("profile.save"):
            save_values(last_outputs, out_dir / "outputs_timing.tf")
        report["timing_output"] = "outputs_timing.tf"
        report["timing_output_seed"] = pool_seeds[(timing.iterations - 1) % len(pool)]


class _Clock:
    """Marks phases on a FIFO the parent reads and timestamps with its own clock."""

    def __init__(self, path: str | None) -> None:
        self.fd = os.open(path, os.O_WRONLY) if path else None

    def mark(self, what: str) -> None:
        if self.fd is not None:
            os.write(self.fd, f"{what}\n".encode())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _describe(exc: BaseException) -> str:
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
    tail = "".join(frames[-3:]).strip()
    return f"{type(exc).__name__}: {str(exc).strip()[:3000]}\n{tail[-2000:]}"

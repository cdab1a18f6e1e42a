"""Worker role `analyze`: what the task computes, from a run of its forward on meta tensors.

Runs the user's reference, so it lives in its own sandboxed process (like `prepare`); the task
comes through stdin. Model and inputs are built on the meta device (shapes only, no memory, so
a task of 2**34 elements costs nothing); only when a step fails on meta tensors (a `.item()`,
data-dependent shapes) are they built again with real tensors on the CPU, and traced there when
the task is small, else moved to meta and traced there.
Torch and the standard library only.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

from kernelgraph.tools import roofline
from kernelgraph.tools.analysis import ANALYSIS_VERSION
from kernelgraph.tools.analysis.scalars import ScalarValues
from kernelgraph.tools.analysis.stages import build_stages, stage_of
from kernelgraph.tools.analysis.trace import (
    StayOnMeta,
    describe_value,
    dtype_name,
    fx_graph_text,
    module_tensors,
    record_ops,
    short_repr,
)
from kernelgraph.tools.harness import reference as ref
from kernelgraph.tools.harness.exchange import read_message
from kernelgraph.tools.harness.stopwatch import watch
from kernelgraph.tools.harness.verdict import TaskError
from kernelgraph.tools.task import TaskSource

CPU_FALLBACK_BYTES = 256 << 20  # inputs + parameters; above this, no real-tensor run here


def run(spec: dict) -> dict:
    spec = {**spec, **read_message()}  # the task: through stdin, never a file
    ref.set_threads(spec.get("threads") or 0)
    task = TaskSource(Path(spec["task"]), spec["source"], spec["sets"])
    module = task.load_module()
    return {"ok": True, "analysis": analyze_module(module, spec["device"], task)}


class StepFailed(Exception):
    """One step of building or running the reference raised."""

    def __init__(self, what: str, exc: BaseException) -> None:
        super().__init__(f"{what}: {type(exc).__name__}: {exc}")
        self.what, self.exc = what, exc


class Built:
    """Whatever of (init inputs, model, inputs) was built before a step failed."""

    def __init__(self) -> None:
        self.init_inputs: list[Any] | None = None
        self.model: torch.nn.Module | None = None
        self.inputs: list[Any] | None = None
        self.values = WeakIdKeyDictionary()  # one-element constants the constructor made

    def held_bytes(self) -> int | None:
        """Bytes of inputs and parameters, None when not both are known."""
        if self.model is None or self.inputs is None:
            return None
        return roofline.min_bytes(self.inputs, self.model)


def analyze_module(module, device: str, task: TaskSource) -> dict[str, Any]:
    """The analysis dict (see tools/analysis/__init__.py for its schema)."""
    result = _empty(device, task)
    meta = Built()
    try:
        with watch.stage("meta"):
            _build(module, "meta", meta)
            traced = _trace(meta, "meta")
        return _fill(result, meta, traced, "meta", device)
    except StepFailed as failure:
        meta_error = f"on meta tensors, {failure}"

    known = meta.held_bytes()
    if known is not None and known > CPU_FALLBACK_BYTES:
        return _untraced(result, meta, meta_error, known)
    real = Built()
    with watch.stage("cpu"):
        try:
            _build(module, "cpu", real)
        except StepFailed as failure:
            raise TaskError(_task_message(failure, task)) from failure.exc
        held = real.held_bytes() or 0
        if held > CPU_FALLBACK_BYTES:
            return _traced_as_meta(result, real, meta_error, held, device)
        try:
            traced = _trace(real, "cpu")
        except StepFailed as failure:
            raise TaskError(_task_message(failure, task)) from failure.exc
    result["notes"].append(f"traced with real tensors on the CPU: {meta_error}")
    return _fill(result, real, traced, "cpu", device)


def _traced_as_meta(
    result: dict[str, Any], real: Built, meta_error: str, held: int, device: str
) -> dict[str, Any]:
    """A task too large to trace on the CPU whose build only works for real (its get_inputs
    reads a value): its model and inputs, once made, are moved to meta and traced there."""
    as_meta = Built()
    as_meta.init_inputs, as_meta.values = real.init_inputs, real.values
    try:
        as_meta.model = _step("moving the model to meta", lambda: real.model.to("meta"))
        as_meta.inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in real.inputs]
        traced = _trace(as_meta, "meta")
    except StepFailed:
        return _untraced(result, real, meta_error, held)
    result["notes"].append(
        f"built with real tensors on the CPU, then traced on meta tensors: {meta_error}"
    )
    return _fill(result, as_meta, traced, "meta", device)


def _step(what: str, fn):
    try:
        return fn()
    except TaskError:
        raise
    except Exception as exc:  # noqa: BLE001 - the task's own failure, reported as data
        raise StepFailed(what, exc) from exc


def _on(device: str):
    """The device context a build or trace runs in: on meta, nothing leaves meta."""
    stack = contextlib.ExitStack()
    stack.enter_context(torch.device(device))
    if device == "meta":
        stack.enter_context(StayOnMeta())
        stack.enter_context(ref.distributions_unchecked())
    return stack


def _build(module, device: str, built: Built) -> None:
    with _on(device):
        torch.manual_seed(ref.CONSTRUCT_SEED)
        built.init_inputs = _step("get_init_inputs()", lambda: list(module.get_init_inputs()))
        torch.manual_seed(ref.CONSTRUCT_SEED)
        with torch.no_grad(), ScalarValues(built.values):
            model = _step("Model(*get_init_inputs())", lambda: module.Model(*built.init_inputs))
        if not isinstance(model, torch.nn.Module):
            raise TaskError(f"Model(*get_init_inputs()) returned a {type(model).__name__}")
        torch.manual_seed(ref.CONSTRUCT_SEED)
        inputs = _step("get_inputs()", lambda: list(module.get_inputs()))
    if device == "meta":  # tensors made outside torch's factories (from_numpy) are still real
        model = _step("moving the model to meta", lambda: model.to("meta"))
        inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]
    built.model, built.inputs = model, inputs


def _trace(built: Built, device: str) -> dict[str, Any]:
    model, inputs = built.model, built.inputs
    with _on(device):
        ops, outputs, info = _step("Model.forward", lambda: record_ops(model, inputs, built.values))
        notes = []
        try:
            flops = roofline.count_flops(model, inputs)
        except Exception as exc:  # noqa: BLE001 - the op list stands without a FLOP count
            flops = None
            notes.append(f"FLOPs not counted: {type(exc).__name__}: {exc}")
        with watch.stage("fx"):
            fx_text, fx_error = fx_graph_text(model, inputs)
    return {
        "ops": ops,
        "outputs": outputs,
        "flops": flops,
        "fx_graph": fx_text,
        "fx_error": fx_error,
        "notes": notes,
        **info,
    }


def _empty(device: str, task: TaskSource) -> dict[str, Any]:
    return {
        "version": ANALYSIS_VERSION,
        "device": device,
        "constants": task.constants,
        "inputs": [],
        "init_inputs": [],
        "outputs": [],
        "parameters": [],
        "training": None,
        "ops": [],
        "ops_total": 0,
        "stages": [],
        "fx_graph": None,
        "fx_error": None,
        "trace": None,
        "traced_on": None,
        "trace_error": None,
        "flops": None,
        "min_bytes": None,
        "intensity": None,
        "sol": None,
        "bound": None,
        "dtypes": [],
        "notes": [],
    }


def _describe_built(result: dict[str, Any], built: Built) -> None:
    result["init_inputs"] = [short_repr(v) for v in built.init_inputs or []]
    result["inputs"] = [describe_value(x) for x in built.inputs or []]
    if built.model is not None:
        result["training"] = bool(built.model.training)
        result["parameters"] = [
            {
                "name": label.split(":", 1)[1],
                "shape": [int(s) for s in tensor.shape],
                "dtype": dtype_name(tensor.dtype),
                **({"buffer": True} if label.startswith("buffer:") else {}),
            }
            for label, tensor in module_tensors(built.model).items()
        ]


def _fill(
    result: dict[str, Any], built: Built, traced: dict[str, Any], traced_on: str, device: str
) -> dict[str, Any]:
    _describe_built(result, built)
    ops = traced["ops"]
    stages = build_stages(ops)
    outputs = []
    sources = zip(traced["outputs"], traced["output_sources"], traced["output_refs"], strict=True)
    for value, source, out_ref in sources:
        entry = describe_value(value)
        if isinstance(value, torch.Tensor):
            entry.update(source=source, stage=stage_of(source, ops, stages), ref=out_ref)
        outputs.append(entry)
    tensors = [built.inputs, built.model, traced["outputs"]]
    min_bytes = int(roofline.min_bytes(*tensors))
    flops = traced["flops"]
    result.update(
        outputs=outputs,
        ops=ops,
        ops_total=traced["ops_total"],
        stages=stages,
        fx_graph=traced["fx_graph"],
        fx_error=traced["fx_error"],
        trace="aten",
        traced_on=traced_on,
        flops=flops,
        min_bytes=min_bytes,
        intensity=round(flops / min_bytes, 6) if flops is not None and min_bytes else None,
        dtypes=sorted({dtype_name(t.dtype) for t in _tensors(tensors)}),
    )
    result["notes"] += traced["notes"]
    if traced["ops_total"] > len(ops):
        result["notes"].append(
            f"the forward ran {traced['ops_total']} ATen ops; the first {len(ops)} are listed"
        )
    result["sol"] = _sol(flops, min_bytes, roofline.dominant_dtype(tensors), device)
    result["bound"] = result["sol"].get("bound")
    return result


def _untraced(result: dict[str, Any], built: Built, meta_error: str, held: int) -> dict[str, Any]:
    _describe_built(result, built)
    result["trace_error"] = (
        f"the forward could not be traced {meta_error}; with {held / 2**20:.0f} MiB of inputs "
        f"and parameters the task is too large to trace with real tensors here (limit "
        f"{CPU_FALLBACK_BYTES >> 20} MiB), so there is no op list, FLOP count or speed-of-light"
    )
    result["sol"] = _sol(None, None, torch.float32, result["device"])
    return result


def _sol(flops: int | None, min_bytes: int | None, dtype, device: str) -> dict[str, Any]:
    """roofline.speed_of_light for the run's device (CPU peaks: measured once, cached)."""
    if flops is None or min_bytes is None:
        sol = roofline.speed_of_light(0, 0, None, dtype)
        return sol | {"flops": None, "bytes": None, "reason": "FLOPs and bytes unknown"}
    try:
        peaks, reason = roofline.resolve_peaks(device)
    except Exception as exc:  # noqa: BLE001 - e.g. a device string torch does not know
        peaks, reason = None, f"no peaks for {device!r}: {type(exc).__name__}: {exc}"
    sol = roofline.speed_of_light(flops, min_bytes, peaks, dtype)
    if peaks is None and reason:
        sol["reason"] = reason
    return sol


def _tensors(values: Any):
    if isinstance(values, torch.Tensor):
        yield values
    elif isinstance(values, torch.nn.Module):
        yield from module_tensors(values).values()
    elif isinstance(values, list | tuple):
        for value in values:
            yield from _tensors(value)


def _task_message(failure: StepFailed, task: TaskSource) -> str:
    """The same words as prepare's, for the same failures."""
    exc = failure.exc
    if isinstance(exc, torch.OutOfMemoryError):
        return (
            f"the reference runs out of memory in {failure.what}: {str(exc).splitlines()[0]}. "
            f"Shrink the task with --set (its size constants: {task.constants})."
        )
    return (
        f"the reference raises in {failure.what}: {type(exc).__name__}: {exc}. Fix {task.path} "
        f"so that it runs on its own."
    )

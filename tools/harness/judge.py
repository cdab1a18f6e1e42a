"""Worker role `judge`: recompute reference outputs and compare; time the baselines.

Runs after the candidate process group is dead, one seed at a time. The reference's outputs come
from the reference store (a folder the candidate's sandbox hid) or, where there is none, are
recomputed from inputs regenerated from their seeds (never from files the candidate could have
touched). The candidate's outputs are loaded with `weights_only=True`. It times eager (and
torch.compile) with the same loop as the candidate, when the store has no such baseline yet.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from kernelgraph.tools import roofline
from kernelgraph.tools.dispatch_modes import PlainDispatchMode
from kernelgraph.tools.harness import reference as ref
from kernelgraph.tools.harness.buffers import BufferState
from kernelgraph.tools.harness.compare import (
    ArgReduction,
    Mismatch,
    compare,
    is_constant,
    tracks_reference,
    within_tolerance_only,
)
from kernelgraph.tools.harness.config import PRECISIONS
from kernelgraph.tools.harness.env_info import collect_env
from kernelgraph.tools.harness.exchange import as_output_list, read_message
from kernelgraph.tools.harness.memory import device_peak_bytes, release
from kernelgraph.tools.harness.stopwatch import watch
from kernelgraph.tools.harness.tensorfile import load_values
from kernelgraph.tools.harness.timing import time_loop
from kernelgraph.tools.task import TaskSource

ARG_REDUCTIONS = ("aten.argmax.default", "aten.argmin.default")


class _ArgCapture(PlainDispatchMode):
    """Remembers which argmax/argmin produced which tensor, so that ties can be accepted."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: dict[int, ArgReduction] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if str(func) in ARG_REDUCTIONS:
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
            self.sources[out.data_ptr()] = ArgReduction(args[0].clone(), dim, bool(keepdim))
        return out


def run(spec: dict) -> dict:
    spec = {
        **spec,
        **read_message(),
    }  # the task: through stdin, never a file the candidate can read
    precision = PRECISIONS[spec["precision"]]
    device = spec["device"]
    with watch.stage("setup"):
        ref.set_precision_flags(precision)
        ref.set_threads(spec.get("threads", 0))
        task = TaskSource(Path(spec["task"]), spec["source"], spec["sets"])
        module = task.load_module()
        init_inputs = ref.make_init_inputs(module)
        model = ref.build_model(module.Model, init_inputs, device, precision)
    with watch.stage("waiting_for_candidate"):
        go = read_message()  # sent once the candidate's process group is dead
    if not go:
        return {"aborted": True}
    spec.update(go)
    cand_dir = Path(spec["candidate_dir"])
    initial = BufferState(model, spec.get("updated_buffers") or [])  # the model has not run yet

    results: list[dict[str, Any]] = []
    timing = cand_dir / spec["timing_output"] if spec.get("timing_output") else None
    timing_seed, timing_entry = spec.get("timing_output_seed"), None
    with watch.stage("compare"):
        for seed, filename in spec["outputs"].items():
            initial.restore(model)  # outputs recomputed from the state every seed starts from
            with watch.stage("compare.load"):
                expected = _expected(module, model, int(seed), spec)
            entry = _judge_one(module, model, int(seed), cand_dir / filename, spec, "seed",
                               expected)  # fmt: skip
            if entry["passed"] and spec.get("updated_buffers"):
                entry.update(_judge_buffers(module, model, initial, int(seed), cand_dir, spec))
            results.append(entry)
            if timing is not None and int(seed) == timing_seed:  # its reference is loaded now
                timing_entry = _judge_one(module, model, timing_seed, timing, spec, "timing",
                                          expected)  # fmt: skip
            del expected
            release(device)
        if timing is not None and timing_entry is None:
            timing_entry = _judge_one(module, model, timing_seed, timing, spec, "timing")
            release(device)
        if timing_entry is not None:
            results.append(timing_entry)
    report: dict[str, Any] = {"comparisons": results}
    if spec.get("updated_buffers"):
        report["buffers_checked"] = spec["updated_buffers"]
    with watch.stage("baselines"):
        _baselines(report, spec, model, module, device, precision)
    report["env"] = collect_env(device, spec.get("dsl_version", ""))
    report["peak_device_bytes"] = device_peak_bytes(device)
    return report


def _baselines(report, spec, model, module, device, precision) -> None:
    wanted = spec.get("baselines") or []
    if not wanted:
        return
    pool = [_trusted_inputs(module, seed, spec) for seed in spec["pool_seeds"]]
    if "eager" in wanted:
        report["eager"] = _time(model, pool, device)
    if "compile" in wanted:
        report["compile"] = _time_compiled(model, pool, device)
    report["peaks"] = _peaks(device)


def _trusted_inputs(module, seed: int, spec: dict) -> list[Any]:
    """Inputs from the store (read-only to candidates) or regenerated from the seed."""
    precision = PRECISIONS[spec["precision"]]
    if spec.get("expected_dir"):  # the store is in use, so its inputs are protected too
        values = load_values(Path(spec["inputs_dir"]) / f"inputs_{seed}.tf", spec["device"])
    else:
        values = ref.make_inputs(module, seed, spec["device"])
    return ref.device_inputs(values, spec["device"], precision)


def _expected(module, model, seed: int, spec: dict) -> list[torch.Tensor]:
    if spec.get("expected_dir"):
        return list(load_values(Path(spec["expected_dir"]) / f"expected_{seed}.tf", spec["device"]))
    with torch.no_grad():
        return as_output_list(model(*_trusted_inputs(module, seed, spec)))


def _judge_buffers(module, model, initial: BufferState, seed: int, cand_dir: Path,
                   spec: dict) -> dict[str, Any]:  # fmt: skip
    """The buffers the reference's forward updated for this seed, against the candidate's."""
    precision = PRECISIONS[spec["precision"]]
    with watch.stage("compare.load"):
        expected = _expected_buffers(module, model, initial, seed, spec)
    filename = (spec.get("buffers") or {}).get(str(seed))
    try:
        got = _named(load_values(cand_dir / filename, spec["device"])) if filename else {}
    except Exception as exc:  # noqa: BLE001 - the file is the candidate's; anything may be wrong
        return {"passed": False, "check": "output_type",
                "message": f"the candidate's buffers cannot be read as tensors: {exc}"}  # fmt: skip
    for name, want in expected:
        if name not in got:
            return {
                "passed": False,
                "check": "buffer_updates",
                "message": f"the reference's forward updates its buffer `{name}` (as batch norm "
                f"updates its running statistics in training mode); ModelNew has no buffer of "
                f"that name. Keep the module that owns it, and update it as the reference does.",
            }
        mismatch = compare(got[name].to(want.device), want, precision.atol, precision.rtol)
        if mismatch is not None:
            return {
                "passed": False,
                **_mismatch_entry(mismatch, 0, False),
                "check": "buffer_updates",
                "message": f"buffer `{name}` after forward differs from the reference's "
                f"(the update forward makes to it, e.g. running statistics): {mismatch.message}",
            }
    return {}


def _expected_buffers(module, model, initial: BufferState, seed: int, spec: dict) -> list:
    if spec.get("expected_dir"):
        path = Path(spec["expected_dir"]) / f"expected_buffers_{seed}.tf"
        return list(load_values(path, spec["device"])) if path.exists() else []  # none updated
    initial.restore(model)
    with torch.no_grad():
        model(*_trusted_inputs(module, seed, spec))
    return initial.changed(model)


def _named(values: Any) -> dict[str, torch.Tensor]:
    """A candidate's [[name, tensor], ...] list, checked item by item."""
    named = {}
    for item in values if isinstance(values, list) else []:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
            if type(item[1]) is torch.Tensor:
                named[item[0]] = item[1]
    return named


def _judge_one(module, model, seed, path: Path, spec: dict, kind: str,
               expected: list[torch.Tensor] | None = None) -> dict[str, Any]:  # fmt: skip
    precision = PRECISIONS[spec["precision"]]
    if expected is None:
        with watch.stage("compare.load"):
            expected = _expected(module, model, seed, spec)
    entry: dict[str, Any] = {"seed": seed, "kind": kind, "passed": False}
    try:
        with watch.stage("compare.load"):
            got = load_values(path, spec["device"])
    except Exception as exc:  # noqa: BLE001 - the file is the candidate's; anything may be wrong
        entry["message"] = f"the candidate's outputs cannot be read as tensors: {exc}"
        entry["check"] = "output_type"
        return entry
    got = as_output_list(got)
    if len(got) != len(expected):
        entry.update(
            check="output_shape",
            message=f"returned {len(got)} outputs, the reference returns {len(expected)}",
        )
        return entry
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        if type(g) is not torch.Tensor:
            entry.update(check="output_type", message=f"output {i} is not a tensor")
            return entry
        g = g.to(e.device)  # compare where the reference lives: on a GPU that is milliseconds
        mismatch = compare(g, e.detach(), precision.atol, precision.rtol)
        if mismatch is not None and not e.is_floating_point():
            arg = _arg_source(model, _trusted_inputs(module, seed, spec), i)  # ties
            if arg is not None:
                mismatch = compare(g, e.detach(), precision.atol, precision.rtol, arg)
        if mismatch is not None:
            entry.update(_mismatch_entry(mismatch, i, g.shape != e.shape))
            return entry
        tiny = within_tolerance_only(e, precision.atol)
        if tiny and _is_rounding_noise(module, model, seed, spec, i, e):
            continue  # the reference's values are its own rounding error: atol decides
        if tiny and not tracks_reference(g, e):
            entry.update(
                check="non_constant_output",
                shape=list(e.shape),
                message=f"output {i} does not follow the reference's values, which are all "
                f"within atol of zero, so the tolerance alone would have let it pass",
            )
            return entry
        if is_constant(g) and not is_constant(e):
            entry.update(
                check="non_constant_output",
                shape=list(e.shape),
                message=f"output {i} is constant while the reference's is not (it passes the "
                f"tolerance only because the values are tiny)",
            )
            return entry
    entry["passed"] = True
    return entry


def _is_rounding_noise(module, model, seed: int, spec: dict, index: int, expected) -> bool:
    """Whether tiny reference values are rounding noise (the mean of a normalised tensor):
    recomputed in float64 they are constant or do not follow the float32 ones. A float64 run
    that fails keeps the stricter rule."""
    try:
        wide = copy.deepcopy(model).double()
        inputs = [
            x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
            for x in _trusted_inputs(module, seed, spec)
        ]
        with torch.no_grad():
            exact = as_output_list(wide(*inputs))[index]
    except Exception:  # noqa: BLE001 - the task's model need not run in float64
        return False
    if type(exact) is not torch.Tensor or exact.shape != expected.shape:
        return False
    return is_constant(exact) or not tracks_reference(expected, exact)


def _arg_source(model, inputs, index: int) -> ArgReduction | None:
    """Run the reference again, recording which argmax/argmin made output `index`."""
    capture = _ArgCapture()
    with torch.no_grad(), capture:
        outputs = as_output_list(model(*inputs))
    return capture.sources.get(outputs[index].data_ptr())


def _mismatch_entry(m: Mismatch, index: int, shape_problem: bool) -> dict[str, Any]:
    return {
        "check": "output_shape" if shape_problem or "dtype" in m.message else "correctness",
        "message": f"output {index}: {m.message}",
        "max_abs_err": m.max_abs_err,
        "max_rel_err": m.max_rel_err,
        "mismatches": m.mismatches,
        "shape": m.shape,
    }


def _time(model, pool, device) -> dict[str, Any]:
    live = [x.clone() if isinstance(x, torch.Tensor) else x for x in pool[0]]

    def call():
        with torch.no_grad():
            return model(*live)

    timing, _ = time_loop(call, live, pool, device)
    return {k: v for k, v in timing.to_dict().items() if k != "samples_ms"}


def _time_compiled(model, pool, device) -> dict[str, Any]:
    try:
        compiled = torch.compile(model)
        return _time(compiled, pool, device)
    except Exception as exc:  # noqa: BLE001 - a baseline that fails is reported, not fatal
        return {"error": f"torch.compile failed: {type(exc).__name__}: {str(exc)[:500]}"}


def _peaks(device: str) -> dict[str, Any] | None:
    peaks = roofline.device_peaks(device)
    return peaks.__dict__ if peaks is not None else None

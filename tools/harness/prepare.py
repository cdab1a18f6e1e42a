"""Worker role `prepare`: validate the task and build its reference, one seed at a time.

Runs the user's reference in its own sandboxed process, so a crash or OOM there is a task error,
never the candidate's. For each seed: make the inputs (KernelBench's way, on the CPU), write them
for the candidate, move them to the device and drop the host copy, run the reference, and write
its outputs to the folder that candidates cannot see (when the parent gives one). Only one
seed's inputs and outputs are alive at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kernelgraph.tools import roofline
from kernelgraph.tools.harness import reference as ref
from kernelgraph.tools.harness.buffers import BufferState
from kernelgraph.tools.harness.compare import compare, fingerprint, is_constant
from kernelgraph.tools.harness.config import PRECISIONS
from kernelgraph.tools.harness.exchange import as_output_list, read_message
from kernelgraph.tools.harness.memory import check_disk, check_fits, device_peak_bytes, release
from kernelgraph.tools.harness.stopwatch import watch
from kernelgraph.tools.harness.tensorfile import load_values, save_values
from kernelgraph.tools.harness.verdict import TaskError
from kernelgraph.tools.task import TaskSource


def run(spec: dict) -> dict:
    spec = {**spec, **read_message()}  # the task: through stdin, never a file
    precision = PRECISIONS[spec["precision"]]
    device = spec["device"]
    inputs_dir = Path(spec["inputs_dir"])
    expected_dir = Path(spec["expected_dir"]) if spec.get("expected_dir") else None
    ref.set_precision_flags(precision)
    ref.set_threads(spec.get("threads", 0))
    task = TaskSource(Path(spec["task"]), spec["source"], spec["sets"])
    module = task.load_module()

    meta: dict[str, Any] = {"warnings": []}
    if spec.get("validate", True):
        with watch.stage("estimate"):
            meta.update(estimate_on_meta(module))
            check_fits(meta, device, task)
            check_disk(meta, len(spec["seeds"]), [inputs_dir])

    with watch.stage("inputs"):
        init_inputs = _call(lambda: ref.make_init_inputs(module), "get_init_inputs()", task)
        save_values(init_inputs, inputs_dir / "init.tf")
    if not spec.get("validate", True):  # inputs only (a compile check needs no reference)
        for seed in spec["seeds"]:
            inputs = _call(
                lambda s=seed: ref.make_inputs(module, s, spec.get("inputs_device", device)),
                "get_inputs()",
                task,
            )
            save_values(inputs, inputs_dir / f"inputs_{seed}.tf")
        return {"ok": True, "meta": meta}

    with watch.stage("reference"):
        model = _call(
            lambda: ref.build_model(module.Model, init_inputs, device, precision),
            "Model(*get_init_inputs())",
            task,
        )
        save_values([[k, v] for k, v in model.state_dict().items()], inputs_dir / "state.tf")
        build = _ReferenceBuild(module, model, task, spec, inputs_dir, expected_dir)
        for seed in spec["seeds"]:
            build.seed(seed)
    meta.update(build.findings())
    meta["peak_device_bytes"] = device_peak_bytes(device)
    return {"ok": True, "meta": meta}


class _ReferenceBuild:
    """Inputs and reference outputs per seed, with what validation needs kept as fingerprints."""

    def __init__(self, module, model, task, spec, inputs_dir: Path, expected_dir: Path | None):
        self.module, self.model, self.task = module, model, task
        self.device = spec["device"]
        self.precision = PRECISIONS[spec["precision"]]
        self.inputs_dir, self.expected_dir = inputs_dir, expected_dir
        self.mutates = self.aliases = False
        self.prints: list[list[tuple[int, int]]] = []  # per seed, per output
        self.warnings: list[str] = []
        self.dtypes: set[str] = set()
        self.output_shapes: list[list[int]] = []
        self.buffers = BufferState(model)  # forward's side effects start from here every seed
        self.updated: set[str] = set()

    def seed(self, seed: int) -> None:
        first = not self.prints
        made = _call(
            lambda: ref.make_inputs(self.module, seed, self.device), "get_inputs()", self.task
        )
        save_values(made, self.inputs_dir / f"inputs_{seed}.tf")
        inputs = ref.device_inputs(made, self.device, self.precision)
        del made  # the device copy is the only one kept
        before = [fingerprint(x) if isinstance(x, torch.Tensor) else x for x in inputs]
        self.buffers.restore(self.model)
        outputs = _forward(self.model, inputs, self.task, self.device)
        updated = self.buffers.changed(self.model)
        after = [fingerprint(x) if isinstance(x, torch.Tensor) else x for x in inputs]
        self.mutates |= before != after
        self.aliases |= _aliases(outputs, inputs)
        del inputs
        if first:
            self._first_seed_checks(seed, outputs)
        self.prints.append([fingerprint(o) for o in outputs])
        self.updated |= {name for name, _ in updated}
        if self.expected_dir is not None:
            save_values(outputs, self.expected_dir / f"expected_{seed}.tf")
            if updated:
                save_values(updated, self.expected_dir / f"expected_buffers_{seed}.tf")
        del outputs
        release(self.device)

    def _first_seed_checks(self, seed: int, outputs: list[torch.Tensor]) -> None:
        """Determinism (the same call twice), degenerate outputs, dtypes and shapes."""
        again_inputs = ref.device_inputs(
            load_values(self.inputs_dir / f"inputs_{seed}.tf", self.device),
            self.device,
            self.precision,
        )
        self.buffers.restore(self.model)
        again = _forward(self.model, again_inputs, self.task, self.device)
        del again_inputs
        for first, second in zip(outputs, again, strict=True):
            if compare(second, first, self.precision.atol, self.precision.rtol):
                raise TaskError(
                    f"the reference in {self.task.path} gives different outputs for identical "
                    f"calls (same inputs, same model), so no kernel can be checked against it. "
                    f"Make forward deterministic (no dropout in training mode, no random ops)."
                )
        del again
        for i, out in enumerate(outputs):
            if out.numel() > 1 and is_constant(out) and not out.reshape(-1)[0].item():
                self.warnings.append(
                    f"degenerate task: reference output {i} is all zeros, so a kernel that "
                    f"writes zeros passes; its verdict says little"
                )
            elif is_constant(out):
                self.warnings.append(
                    f"degenerate task: reference output {i} is constant, so a constant kernel "
                    f"passes"
                )
        self.dtypes |= {str(t.dtype).removeprefix("torch.") for t in outputs}
        self.output_shapes = [list(t.shape) for t in outputs]
        self.output_bytes = sum(t.numel() * t.element_size() for t in outputs)

    def findings(self) -> dict[str, Any]:
        warnings = list(self.warnings)
        if len(self.prints) > 1:
            for i, (a, b) in enumerate(zip(self.prints[0], self.prints[1], strict=True)):
                if a == b and not any("output {i} is" in w for w in warnings):
                    warnings.append(
                        f"degenerate task: reference output {i} is the same for every input seed"
                    )
        input_dtypes = _input_dtypes(self.inputs_dir)
        return {
            "training": self.model.training,
            "ref_mutates_inputs": self.mutates,
            "ref_output_aliases_input": self.aliases,
            "warnings": warnings,
            "dtypes": sorted(self.dtypes | input_dtypes),
            "output_shapes": self.output_shapes,
            "updated_buffers": sorted(self.updated),
        }


def _input_dtypes(inputs_dir: Path) -> set[str]:
    first = sorted(inputs_dir.glob("inputs_*.tf"))[:1]
    values = load_values(first[0]) if first else []
    return {str(v.dtype).removeprefix("torch.") for v in values if isinstance(v, torch.Tensor)}


def estimate_on_meta(module) -> dict[str, Any]:
    """FLOPs, bytes and tensor sizes, from a run on meta tensors (no memory used)."""
    try:
        with torch.device("meta"), ref.distributions_unchecked():
            torch.manual_seed(ref.CONSTRUCT_SEED)
            model = module.Model(*module.get_init_inputs())
            inputs = list(module.get_inputs())
            by_op = roofline.flops_by_op(model, inputs)
            with torch.no_grad():
                outputs = as_output_list(model(*inputs))
        params = list(model.parameters()) + list(model.buffers())
        return {
            "flops": sum(by_op.values()),
            "conv_flops": roofline.conv_flops(by_op),
            "min_bytes": int(roofline.min_bytes(inputs, params, outputs)),
            "input_bytes": _nbytes(inputs),
            "output_bytes": _nbytes(outputs),
            "param_bytes": _nbytes(params),
            "meta_estimate": True,
        }
    except Exception as exc:  # a task that cannot run on meta tensors is still a valid task
        return {"flops": None, "min_bytes": None, "meta_estimate": False, "meta_error": str(exc)}


def _nbytes(values) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _forward(model, inputs, task, device) -> list[Any]:
    def call():
        with torch.no_grad():
            out = as_output_list(model(*inputs))
        ref.synchronize(device)
        return out

    outputs = _call(call, "Model.forward", task)
    if not all(isinstance(o, torch.Tensor) for o in outputs):
        raise TaskError(f"the reference in {task.path} returns something other than tensors.")
    return outputs


def _call(fn, what: str, task: TaskSource):
    try:
        return fn()
    except TaskError:
        raise
    except torch.OutOfMemoryError as exc:
        raise TaskError(
            f"the reference runs out of memory in {what} ({str(exc).splitlines()[0].rstrip('.')}). "
            f"Shrink the task with --set (its size constants: {task.constants})."
        ) from exc
    except Exception as exc:
        if not torch.cuda.is_available() and "CUDA" in str(exc):
            raise TaskError(
                f"the reference needs a GPU in {what} ({type(exc).__name__}: {exc}): the task makes "
                f"CUDA tensors itself. Run it with --device cuda on a machine with a GPU."
            ) from exc
        raise TaskError(
            f"the reference raises in {what}: {type(exc).__name__}: {exc}. Fix {task.path} so "
            f"that it runs on its own."
        ) from exc


def _aliases(outputs, inputs) -> bool:
    from kernelgraph.tools.harness.guards import aliasing

    return bool(aliasing(outputs, inputs))

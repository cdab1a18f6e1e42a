"""Worker role `prepare`: validate the task and write the inputs the candidate will get.

Runs the user's reference (in its own sandboxed process, so a crash or OOM there is a task
error, never the candidate's). Reference *outputs* are not written anywhere: the judge
recomputes them after the candidate process is gone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tools import roofline
from tools.harness import reference as ref
from tools.harness.compare import compare, is_constant
from tools.harness.config import PRECISIONS
from tools.harness.exchange import as_output_list, read_message, save_values
from tools.harness.stopwatch import watch
from tools.harness.verdict import TaskError
from tools.task import TaskSource


def run(spec: dict) -> dict:
    spec = {**spec, **read_message()}  # the task: through stdin, never a file
    precision = PRECISIONS[spec["precision"]]
    device = spec["device"]
    out_dir = Path(spec["out_dir"])
    ref.set_precision_flags(precision)
    ref.set_threads(spec.get("threads", 0))
    task = TaskSource(Path(spec["task"]), spec["source"], spec["sets"])
    module = task.load_module()

    estimate: dict[str, Any] = {}
    if spec.get("validate", True):  # skipped when the parent has this task's findings cached
        with watch.stage("estimate"):
            estimate = estimate_on_meta(module)
            check_fits(estimate, device, task)

    with watch.stage("inputs"):
        init_inputs = _call(lambda: ref.make_init_inputs(module), "get_init_inputs()", task)
        save_values(init_inputs, out_dir / "init.pt")
        model = _call(
            lambda: ref.build_model(module.Model, init_inputs, "cpu", precision),
            "Model(*get_init_inputs())",
            task,
        )
        save_values([[k, v] for k, v in model.state_dict().items()], out_dir / "state.pt")
        del model
        inputs_by_seed = {}
        for seed in [*spec["seeds"], *ref.TIMING_SEEDS]:
            inputs = _call(lambda s=seed: ref.make_inputs(module, s), "get_inputs()", task)
            save_values(inputs, out_dir / f"inputs_{seed}.pt")
            inputs_by_seed[seed] = inputs

    meta: dict[str, Any] = {"warnings": [], **estimate}
    if spec.get("validate", True):
        with watch.stage("validate"):
            meta.update(validate(module, init_inputs, inputs_by_seed, spec, task))
    return {"ok": True, "meta": meta}


def estimate_on_meta(module) -> dict[str, Any]:
    """FLOPs, minimum bytes and output shapes, from a run on meta tensors (no memory used)."""
    try:
        with torch.device("meta"):
            torch.manual_seed(ref.CONSTRUCT_SEED)
            model = module.Model(*module.get_init_inputs())
            inputs = list(module.get_inputs())
            flops = roofline.count_flops(model, inputs)
            with torch.no_grad():
                outputs = as_output_list(model(*inputs))
        params = list(model.parameters()) + list(model.buffers())
        return {
            "flops": int(flops),
            "min_bytes": int(roofline.min_bytes(inputs, params, outputs)),
            "meta_estimate": True,
        }
    except Exception as exc:  # a task that cannot run on meta tensors is still a valid task
        return {"flops": None, "min_bytes": None, "meta_estimate": False, "meta_error": str(exc)}


def check_fits(estimate: dict[str, Any], device: str, task: TaskSource) -> None:
    needed = estimate.get("min_bytes")
    if not needed:
        return
    # Reference and candidate each hold inputs, outputs, parameters and a timing pool.
    needed = 4 * needed
    free = _free_bytes(device)
    if free and needed > 0.9 * free:
        constants = ", ".join(f"{k}={v!r}" for k, v in task.constants.items()) or "none"
        raise TaskError(
            f"the task needs about {needed / 2**30:.1f} GiB on {device} (inputs, outputs and "
            f"parameters for the reference, the candidate and the timing pool) but only "
            f"{free / 2**30:.1f} GiB is free. Shrink it with --set, e.g. halve the largest of "
            f"its size constants ({constants})."
        )


def _free_bytes(device: str) -> int | None:
    if device == "cuda":
        return torch.cuda.mem_get_info()[0]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def validate(module, init_inputs, inputs_by_seed, spec, task: TaskSource) -> dict[str, Any]:
    """Reject tasks that raise or are non-deterministic; warn about degenerate outputs."""
    precision = PRECISIONS[spec["precision"]]
    device = spec["device"]
    model = _call(
        lambda: ref.build_model(module.Model, init_inputs, device, precision),
        "Model(*get_init_inputs())",
        task,
    )
    training = model.training
    seeds = spec["seeds"]
    outputs_by_seed = {}
    mutates = aliases = False
    for seed in seeds[:2]:
        inputs = ref.device_inputs(inputs_by_seed[seed], device, precision)
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        outputs = _forward(model, inputs, task, device)
        mutates |= _mutated(before, inputs)
        aliases |= _aliases(outputs, inputs)
        outputs_by_seed[seed] = outputs
    again = _forward(
        model, ref.device_inputs(inputs_by_seed[seeds[0]], device, precision), task, device
    )
    for first, second in zip(outputs_by_seed[seeds[0]], again, strict=True):
        if isinstance(first, torch.Tensor) and compare(
            second, first, precision.atol, precision.rtol
        ):
            raise TaskError(
                f"the reference in {task.path} gives different outputs for identical calls "
                f"(same inputs, same model), so no kernel can be checked against it. Make "
                f"forward deterministic (no dropout in training mode, no random ops)."
            )
    warnings = _degenerate_warnings(outputs_by_seed)
    dtypes = sorted(
        {str(t.dtype).removeprefix("torch.") for t in _tensors(inputs_by_seed[seeds[0]])}
        | {str(t.dtype).removeprefix("torch.") for t in outputs_by_seed[seeds[0]]}
    )
    return {
        "training": training,
        "ref_mutates_inputs": mutates,
        "ref_output_aliases_input": aliases,
        "warnings": warnings,
        "dtypes": dtypes,
        "output_shapes": [list(t.shape) for t in _tensors(outputs_by_seed[seeds[0]])],
    }


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
            f"the reference runs out of memory in {what}: {str(exc).splitlines()[0]}. Shrink "
            f"the task with --set (its size constants: {task.constants})."
        ) from exc
    except Exception as exc:
        raise TaskError(
            f"the reference raises in {what}: {type(exc).__name__}: {exc}. Fix {task.path} so "
            f"that it runs on its own."
        ) from exc


def _tensors(values) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor)]


def _mutated(before, after) -> bool:
    return any(
        isinstance(b, torch.Tensor) and not torch.equal(b.nan_to_num(), a.nan_to_num())
        for b, a in zip(before, after, strict=True)
    )


def _aliases(outputs, inputs) -> bool:
    from tools.harness.guards import aliasing

    return bool(aliasing(outputs, inputs))


def _degenerate_warnings(outputs_by_seed) -> list[str]:
    warnings = []
    seeds = list(outputs_by_seed)
    for i, out in enumerate(outputs_by_seed[seeds[0]]):
        if out.numel() > 1 and bool((out == 0).all()):
            warnings.append(
                f"degenerate task: reference output {i} is all zeros, so a kernel that writes "
                f"zeros passes; its verdict says little."
            )
        elif is_constant(out):
            warnings.append(
                f"degenerate task: reference output {i} is constant, so a constant kernel passes."
            )
        elif len(seeds) > 1 and torch.equal(out, outputs_by_seed[seeds[1]][i]):
            warnings.append(
                f"degenerate task: reference output {i} is the same for every input seed."
            )
    return warnings

"""Task analysis: what a KernelBench reference computes, for the planner and the builtin coder.

`analyze_task(task, device)` (tools/analysis/api.py) runs the reference's forward on meta
tensors in a sandboxed harness worker (role "analyze", tools/analysis/worker.py) and returns a
JSON-able dict, cached by (task hash, device, ANALYSIS_VERSION, torch version):

    version      ANALYSIS_VERSION
    device       the run's device ("cpu", "cuda", "cuda:1")
    constants    the task's module-level size constants {NAME: value}
    inputs       [{"shape": [..], "dtype": "float32"} | {"value": "repr"}]  forward inputs
    init_inputs  ["repr", ...]  constructor arguments
    outputs      [{"shape", "dtype", "source": data-flow label, "stage": index | None,
                   "ref": {"t": label, "o": output position}}
                  | {"value": "repr"}]
    parameters   [{"name": "linear.weight", "shape", "dtype"[, "buffer": true]}]
    training     the model's train/eval mode as constructed
    ops          [{"op": "aten.addmm", "overload": "default", "kind": (tools/analysis/ops.py),
                   "shape": first output's, "dtype", "args": short text,
                   "reads": [label per tensor argument], "arg_shapes": [[..] per tensor argument],
                   "flops": int, "argv"/"kwargv": the arguments as JSON (tensors as
                   {"t": label, "o": output position[, "v": the finite number a one-element
                   constant holds: torch.tensor(c) made in forward or in the constructor, or
                   an unlabelled real tensor's item()]}, dtypes as {"dtype": name}, non-finite
                   floats as {"f": repr}), "outs": [{"shape", "dtype"} per tensor output],
                   optional "composite"/"composite_kind"/"group" (ran inside
                   e.g. F.scaled_dot_product_attention), optional "state": true and
                   "target": its label (in-place update of a parameter or buffer)}]
                 Labels: "in:N", "param:NAME", "buffer:NAME", "op:K", "const".
    ops_total    how many ATen ops the forward ran (the list stops at trace.MAX_OPS)
    stages       [{"kind", "ops": [indices], "anchor", "prologue", "epilogue", "composite",
                   "shape", "dtype", "flops", "reads"}]  (stages.build_stages documents the rules)
    fx_graph     torch.fx.symbolic_trace text with shapes, or None; fx_error says why not
    trace        "aten" when the op list was recorded, else None; trace_error says why not
    traced_on    "meta", or "cpu" when meta tensors failed and the task was small
    flops        roofline.count_flops (matmul, convolution, attention), min_bytes, intensity
    sol          roofline.speed_of_light dict for the device (with "reason" when unknown)
    bound        "memory" | "compute" | None (no peaks for this device, or no FLOPs/bytes)
    dtypes       dtypes of inputs, parameters and outputs
    notes        short remarks (fallbacks, truncation)

This package's __init__ imports only the standard library: the harness worker imports
tools.analysis.worker on bare GPU boxes, and the parent API loads on first use.
"""

from __future__ import annotations

from typing import Any

ANALYSIS_VERSION = "4"

__all__ = ["ANALYSIS_VERSION", "analysis_cache_key", "analyze_task"]


def __getattr__(name: str) -> Any:
    if name in ("analyze_task", "analysis_cache_key"):
        from kernelgraph.tools.analysis import api

        return getattr(api, name)
    raise AttributeError(f"module 'kernelgraph.tools.analysis' has no attribute {name!r}")

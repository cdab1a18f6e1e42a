"""The kernel file the builtin writes: kernels from a backend, then `class ModelNew` whose forward
runs the program's steps. The first line records the tuning config, so the refine edge (and a
person reading the file) can tell which configuration a candidate is.

ModelNew's `__init__` is the reference's own (tools/builtin/reference_init.py), with the
module-level names it needs copied from the task file, so that under KernelBench's protocol
(the same seed before building Model and ModelNew, no weights copied) both get the same
parameters. The forward reaches them by their state_dict names. Without the reference's
`__init__` (`reference` is None) the parameters are made empty under those names, and the file
says so: they match only if the harness shares the reference's weights (`--share-weights`).
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from typing import Any

import torch

from kernelgraph.tools.builtin.op_support import attribute
from kernelgraph.tools.builtin.program import Program, Step
from kernelgraph.tools.builtin.reference_init import ReferenceInit

CONFIG_MARK = "# kernelgraph-builtin config: "


def render(
    program: Program,
    backend,
    config: dict[str, dict[str, Any]],
    summary: str,
    reference: ReferenceInit | None = None,
    why_not: str = "",
) -> str:
    """The kernel file; `reference` gives ModelNew the reference's __init__ (`why_not` says why
    there is none, for the comment of the fallback)."""
    lines = [
        CONFIG_MARK + json.dumps(config, sort_keys=True),
        f'"""{summary} (written by the kernelgraph builtin model)."""',
        *(line for note in program.notes for line in _comment(f"Note: {note}.")),
        "",
        backend.prelude.rstrip(),
    ]
    sources = [backend.kernel_source(kernel, config[kernel.name]) for kernel in program.kernels]
    model = _model_class(program, backend, config, reference, why_not)
    helpers = getattr(backend, "helpers", {})  # only those a kernel calls or forward launches
    called = "\n".join([*sources, *model])
    for name in sorted(n for n in helpers if re.search(rf"(?<![\w.]){n}[(\[]", called)):
        lines += ["", "", helpers[name].rstrip()]
    for source in sources:
        lines += ["", "", source]
    if program.kernels and hasattr(backend, "library"):
        lines += ["", "", backend.library(program.kernels)]
    own = set(backend.prelude.splitlines())  # imports the file has already
    copied = [text for text in reference.module if text not in own] if reference else []
    if copied:
        lines += ["", "", "# From the task file: what the reference's __init__ needs.", ""]
        lines += [_spaced(copied)]
    lines += ["", "", *model]
    return "\n".join(lines) + "\n"


def _comment(text: str) -> list[str]:
    return ["# " + line for line in textwrap.wrap(text, 96)]


def _spaced(statements: list[str]) -> str:
    """Top-level statements, definitions set apart by two blank lines (as a formatter would)."""
    out: list[str] = []
    for i, text in enumerate(statements):
        block = text.startswith(("def ", "class ", "@", "async def "))
        previous = i > 0 and statements[i - 1].startswith(("def ", "class ", "@", "async def "))
        if i and (block or previous):
            out += ["", ""]
        out.append(text)
    return "\n".join(out)


def read_config(code: str | None) -> dict[str, dict[str, Any]] | None:
    """The tuning config a builtin kernel file records, or None for any other file."""
    if not code or not code.startswith(CONFIG_MARK):
        return None
    try:
        return json.loads(code.splitlines()[0][len(CONFIG_MARK) :])
    except ValueError:
        return None


def _model_class(
    program: Program, backend, config: dict, reference: ReferenceInit | None, why_not: str
) -> list[str]:
    if reference is not None:
        members = [
            *reference.class_body,
            "# The reference's __init__: the same submodules and parameters, made in the same",
            "# order, so the same seed gives them the same values.",
            *reference.init.splitlines(),
        ]
        for method in reference.methods:
            members += ["", *method.splitlines()]
    else:
        members = [
            f"# The reference's __init__ could not be reused ({why_not}): its parameters and",
            "# buffers are made empty under their state_dict names, and match the reference only",
            "# when the harness copies its weights in (--share-weights).",
            "def __init__(self, *args, **kwargs):",
            "    super().__init__()",
            *("    " + line for line in _state_lines(program.params)),
        ]
    names = [f"x{i}" for i in range(program.n_inputs)]
    body = [f"def forward(self, {', '.join(names)}):"] if names else ["def forward(self):"]
    device = None
    for name in names:
        body.append(f"    if isinstance({name}, torch.Tensor):")
        body.append(f"        {name} = {name}.contiguous()")
        device = device or f"{name}.device"
    device = device or _first_param_device(program)
    for step in program.steps:
        body += ["    " + line for line in _step_lines(step, backend, config, device)]
    outs = program.outputs
    body.append(f"    return {outs[0]}" if len(outs) == 1 else f"    return ({', '.join(outs)},)")
    return [
        "class ModelNew(nn.Module):",
        *("    " + line if line else "" for line in [*members, "", *body]),
    ]


def _state_lines(params: list[dict[str, Any]]) -> list[str]:
    """Parameters and buffers under their state_dict names, empty (the fallback: the harness
    gives them the reference's values by name under --share-weights), with containers for
    dotted names."""
    lines, made = [], {""}
    for p in params:
        *parents, leaf = p["name"].split(".")
        for depth in range(len(parents)):
            path = ".".join(parents[: depth + 1])
            if path not in made:
                made.add(path)
                owner = _module(".".join(parents[:depth]))
                lines.append(f"{owner}.add_module({parents[depth]!r}, nn.Module())")
        tensor = f"torch.empty({tuple(p['shape'])}, dtype=torch.{p['dtype']})"
        owner = _module(".".join(parents))
        if p.get("buffer"):
            lines.append(f"{owner}.register_buffer({leaf!r}, {tensor})")
        else:
            lines.append(f"{owner}.register_parameter({leaf!r}, nn.Parameter({tensor}))")
    return lines


def _module(path: str) -> str:
    return "self" if not path else f"self.get_submodule({path!r})"


def _first_param_device(program: Program) -> str:
    for p in program.params:
        return f"{attribute(p['name'])}.device"
    return "torch.device('cuda' if torch.cuda.is_available() else 'cpu')"


def _step_lines(step: Step, backend, config: dict, device: str) -> list[str]:
    if step.kind == "view":
        return [f"{step.outs[0]} = {step.op}({step.args})"]
    if step.kind == "scratch":
        shape, dtype = tuple(step.out_shapes[0][0]), step.out_shapes[0][1]
        return [
            f"{step.outs[0]} = torch.full({shape}, {step.args}, device={device}, dtype=torch.{dtype})"
        ]
    if step.kind == "library":
        return [f"{', '.join(step.outs)} = {step.op}({step.args})"]
    if step.kind == "factory":  # a tensor made in forward (tools/builtin/factories.py)
        dtype = step.out_shapes[0][1]
        return [f"{step.outs[0]} = {step.op}({step.args}, device={device}, dtype=torch.{dtype})"]
    if step.kind == "layout":  # a copy in another memory layout (tools/builtin/layouts.py)
        return [f"{step.outs[0]} = {step.args}"]
    if step.kind == "copy":  # module state that forward updates
        return [f"{step.op}.copy_({step.args})"]
    lines, sizes = [], []
    for var, (shape, dtype) in zip(step.outs, step.out_shapes, strict=True):
        lines.append(f"{var} = torch.empty({tuple(shape)}, device={device}, dtype=torch.{dtype})")
        sizes.append((var, math.prod(shape) * getattr(torch, dtype).itemsize))
    lines += backend.fresh_outputs(sizes)
    kernel = step.kernel
    lines += backend.launch(kernel, [*step.inputs, *step.outs], config[kernel.name])
    return lines

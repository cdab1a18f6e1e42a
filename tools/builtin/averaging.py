"""Convolutions whose rounding error is averaged away before anything reaches the output.

One TF32 product misses an exact fp32 convolution by about 5e-4 at KernelBench's sizes, five
times the 1e-4 tolerance, so a convolution that cuDNN runs in exact fp32 starts at tf32x3 (three
products). When every path from the convolution to the model's outputs passes through a sum
over many of its elements (a global average pool, a mean, a sum), the independent rounding
errors of those elements shrink by the square root of their count, and one product is within
tolerance (level2/8, 65 and 67: 1.5-2.1x faster, passed 3 seeds on an H200; RESULTS.md). Such a
convolution is marked `averaged` and starts at one TF32 product; the verifier still decides, and
a wrong result moves the search on to tf32x3.
"""

from __future__ import annotations

import re
from dataclasses import replace

from kernelgraph.tools.builtin.conv import ConvKernel
from kernelgraph.tools.builtin.expr import loads
from kernelgraph.tools.builtin.kernels import FusedKernel, PartialReduction
from kernelgraph.tools.builtin.pooling import PoolKernel
from kernelgraph.tools.builtin.program import Program, Step

# elements a sum must add for each output. A mean of N elements errs by about e / sqrt(N), e
# the elements' error (5e-4 at most, one TF32 product); the worst of many outputs is several
# times that, under 1e-4 from N of about 1000 (level2/8 averages 6727, 65 and 67 more)
MIN_AVERAGED = 1024
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def mark_averaged_convs(program: Program) -> Program:
    steps = [
        replace(step, kernel=replace(step.kernel, averaged=True))
        if isinstance(step.kernel, ConvKernel) and _averaged(program, i)
        else step
        for i, step in enumerate(program.steps)
    ]
    return replace(program, steps=steps)


def _averaged(program: Program, start: int) -> bool:
    """Whether every reader of step `start`'s outputs, followed through views, pointwise
    kernels and pools, ends in a sum over at least MIN_AVERAGED elements per output."""
    pending = [(start, out) for out in program.steps[start].outs]
    seen: set[str] = set()
    while pending:
        index, var = pending.pop()
        if var in seen:
            continue
        seen.add(var)
        if var in program.outputs:
            return False
        for later in range(index + 1, len(program.steps)):
            step = program.steps[later]
            if not _reads(step, var):
                continue
            passed_on = _passed_on(step)
            if passed_on is None:
                return False
            pending += [(later, out) for out in passed_on]
    return True


def _reads(step: Step, var: str) -> bool:
    """Whether `step` reads `var`: a kernel through a load of its argument, any other step by
    naming it (or an attribute of it) in its source."""
    kernel = step.kernel
    if isinstance(kernel, FusedKernel | PartialReduction) and var in step.inputs:
        args = {kernel.inputs[i] for i, name in enumerate(step.inputs) if name == var}
        return bool(args & {load.tensor for load in _loads(kernel)})
    if var in step.inputs:
        return True
    return any(n == var or n.startswith(f"{var}.") for n in _NAME.findall(f"{step.op} {step.args}"))


def _loads(kernel: FusedKernel | PartialReduction):
    values = [r.value for r in kernel.reductions] + [s.value for s in getattr(kernel, "stores", [])]
    return [load for value in values for load in loads(value)]


def _passed_on(step: Step) -> list[str] | None:
    """The step's outputs that carry the value on unaveraged (all of a view's, a pointwise
    kernel's or a pool's; a sum's full-space stores), or None for a reader of any other kind."""
    kernel = step.kernel
    if step.kind == "view" or isinstance(kernel, PoolKernel):
        return step.outs
    if isinstance(kernel, PartialReduction):  # its partial sums go to scratch, summed later
        return [] if _sums(kernel.reductions, kernel.rlen) else None
    if not isinstance(kernel, FusedKernel):
        return None
    if kernel.is_pointwise():
        return step.outs
    if kernel.kind != "reduction" or not _sums(kernel.reductions, kernel.rlen):
        return None
    full = {s.arg for s in kernel.stores if s.space == "full"}
    return [out for arg, out in zip(kernel.outputs, step.outs, strict=False) if arg in full]


def _sums(reductions, rlen: int) -> bool:
    return rlen >= MIN_AVERAGED and all(r.kind == "sum" for r in reductions)

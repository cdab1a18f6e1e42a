"""Run-time guards inside the candidate process. Standard library and torch only.

They catch honest mistakes and lazy cheats (calling the PyTorch op, mutating inputs, returning
an alias or a lazy tensor, leaving work on a side stream). A candidate that patches this module
itself can fool them: correctness never rests on them but on the separate judge process.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from kernelgraph.tools.dispatch_modes import PlainDispatchMode
from kernelgraph.tools.dsl.base import LaunchCounter
from kernelgraph.tools.harness.compare import fingerprint


class OpRecorder(PlainDispatchMode):
    """Records the ATen ops the forward executes, including those called from C++ extensions.

    Ops inside a DSL launch that the adapter marks as harness-internal (the Triton interpreter's
    own tensor handling) are not the candidate's and are skipped.
    """

    def __init__(self, counter: LaunchCounter) -> None:
        super().__init__()
        self.counter = counter
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.counter.inside:
            self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def poison_uninitialized_memory(enabled: bool = True) -> None:
    """Make torch.empty return NaN (floats) / max ints, so unwritten output cannot pass."""
    # torch.use_deterministic_algorithms would also set inductor's flag, importing
    # torch._inductor and torch._dynamo (seconds of CPU); candidates never run inductor.
    torch._C._set_deterministic_algorithms(enabled, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = enabled


def plain_tensor_problem(outputs: list[Any]) -> str | None:
    for i, out in enumerate(outputs):
        if type(out) is not torch.Tensor:
            return f"output {i} is a {type(out).__module__}.{type(out).__qualname__}, not a plain torch.Tensor"
        if out.is_meta or out.layout != torch.strided:
            return f"output {i} is not a materialised dense tensor (layout {out.layout})"
    return None


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    start = t.untyped_storage().data_ptr()
    return start, start + t.untyped_storage().nbytes()


def aliasing(outputs: list[Any], inputs: list[Any]) -> list[tuple[int, int]]:
    """(output index, input index) pairs whose storages overlap."""
    pairs = []
    for i, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor) or out.numel() == 0:
            continue
        o0, o1 = _storage_span(out)
        for j, inp in enumerate(inputs):
            if isinstance(inp, torch.Tensor) and inp.numel():
                i0, i1 = _storage_span(inp)
                if o0 < i1 and i0 < o1:
                    pairs.append((i, j))
    return pairs


def input_prints(inputs: list[Any]) -> list[Any]:
    """Fingerprints of the tensor inputs, taken where they live (no copy of them is kept)."""
    return [fingerprint(x) if isinstance(x, torch.Tensor) else None for x in inputs]


def changed_inputs(before: list[Any], inputs: list[Any]) -> list[int]:
    """Indices of inputs whose contents differ from their fingerprints `before`."""
    return [j for j, (b, a) in enumerate(zip(before, input_prints(inputs), strict=True)) if b != a]


def snapshot_before_sync(outputs: list[Any]) -> list[Any]:
    """Copy outputs on the current stream without a device-wide sync.

    If the candidate left work on a side stream, this copy races it and differs from the
    outputs read after `torch.cuda.synchronize()`.
    """
    return [o.clone() if isinstance(o, torch.Tensor) else o for o in outputs]

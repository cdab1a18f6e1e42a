"""How a forward's op list groups into kernel-sized stages (`build_stages`), and where data
comes from (`resolve`). Standard library only, like ops.py.
"""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.analysis.ops import NO_COMPUTE, OTHER, POINTWISE, PROLOGUE_KINDS, VIEW


def resolve(label: str, ops: list[dict[str, Any]]) -> str:
    """Follow a data-flow label ("op:5") back through views to the op that computed the data.

    An `alloc` op (nothing read) and model inputs ("in:0"), parameters ("param:..."),
    buffers ("buffer:...") and other tensors ("const") are where the chain ends.
    """
    seen = 0
    while label.startswith("op:") and seen < len(ops) + 1:
        op = ops[int(label[3:])]
        if op.get("kind") != VIEW or not op.get("reads"):
            return label
        label = op["reads"][0]
        seen += 1
    return label


def _numel(shape: Any) -> int | None:
    if not isinstance(shape, list):
        return None
    total = 1
    for size in shape:
        total *= int(size)
    return total


class _Stage:
    def __init__(self, kind: str, first: int, anchor: int | None, composite: Any = None) -> None:
        self.kind, self.anchor = kind, anchor
        self.composite = composite  # the composite call's group id
        self.composite_name: str | None = None
        self.members = [first]
        self.prologue: list[int] = []
        self.epilogue: list[int] = []

    @property
    def last(self) -> int:
        return self.members[-1]


def _reads_any(op: dict, members: list[int], ops: list[dict]) -> bool:
    wanted = {f"op:{i}" for i in members}
    return any(resolve(label, ops) in wanted for label in op.get("reads") or [])


def stage_members(ops: list[dict[str, Any]]) -> list[int]:
    """Indices of the ops that stages hold: compute ops that are not state bookkeeping."""
    return [
        i for i, op in enumerate(ops) if op.get("kind") not in NO_COMPUTE and not op.get("state")
    ]


def build_stages(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Group the op list into stages, each a candidate for one kernel. In op order:

    - `view`/`alloc` ops and in-place updates of module state (BatchNorm's step counter) are
      skipped: they belong to no stage.
    - ops run inside one call of a COMPOSITES function (scaled_dot_product_attention, rms_norm,
      ...) form one stage of that function's kind.
    - a pointwise op joins an open pointwise stage whatever it reads. It joins any other open
      stage (gemm, conv, reduction, softmax, norm, pool, a composite...) as its **epilogue**
      when it reads that stage's result and its output has as many elements as that result
      (a bias add or an activation, not a broadcast back to a bigger tensor). Otherwise it
      opens a new pointwise stage.
    - a reduction, softmax or norm that reads an open pointwise stage's result, of as many
      elements as that result, takes that stage over: its ops become the **prologue**.
    - any other op opens a stage of its own kind (kind "other" included).

    Each stage: kind, ops (member indices in order), anchor (the op that gives the stage its
    kind, None for pointwise), prologue, epilogue, composite (function name or None), shape and
    dtype (of its last op), flops (sum of its ops'), reads (data from outside the stage:
    "in:N", "param:NAME", "buffer:NAME", "const", "stage:J", or "op:K" for a tensor made by an
    op outside every stage, e.g. an alloc).
    """
    stages: list[_Stage] = []
    open_stage: _Stage | None = None
    for i in stage_members(ops):
        op = ops[i]
        kind = op.get("kind", OTHER)
        group = op.get("group")
        if group is not None:
            if open_stage is not None and open_stage.composite == group:
                open_stage.members.append(i)
                if open_stage.anchor is None and kind == open_stage.kind:
                    open_stage.anchor = i
                continue
            composite_kind = op.get("composite_kind") or kind
            if _takes_prologue(op, composite_kind, open_stage, ops):
                open_stage.prologue = list(open_stage.members)
                open_stage.kind, open_stage.composite = composite_kind, group
                open_stage.composite_name = op.get("composite")
                open_stage.members.append(i)
                open_stage.anchor = i if kind == composite_kind else None
                continue
            open_stage = _Stage(composite_kind, i, None, group)
            open_stage.composite_name = op.get("composite")
            if kind == open_stage.kind:
                open_stage.anchor = i
            stages.append(open_stage)
            continue
        if kind == POINTWISE:
            if open_stage is not None and open_stage.kind == POINTWISE:
                open_stage.members.append(i)
                continue
            if (
                open_stage is not None
                and _reads_any(op, open_stage.members, ops)
                and _numel(op.get("shape")) == _numel(ops[open_stage.last].get("shape"))
            ):
                open_stage.members.append(i)
                open_stage.epilogue.append(i)
                continue
            open_stage = _Stage(POINTWISE, i, None)
            stages.append(open_stage)
            continue
        if _takes_prologue(op, kind, open_stage, ops):
            open_stage.kind, open_stage.anchor = kind, i
            open_stage.prologue = list(open_stage.members)
            open_stage.members.append(i)
            continue
        open_stage = _Stage(kind, i, i)
        stages.append(open_stage)
    return _describe(stages, ops)


def _takes_prologue(op: dict, kind: str, open_stage: _Stage | None, ops: list[dict]) -> bool:
    """A row-wise op reading all of the open pointwise stage's result: it takes that stage over."""
    if kind not in PROLOGUE_KINDS or open_stage is None or open_stage.kind != POINTWISE:
        return False
    if open_stage.composite is not None or not _reads_any(op, [open_stage.last], ops):
        return False
    shapes = op.get("arg_shapes") or []  # the first tensor argument: what is reduced
    return bool(shapes) and _numel(shapes[0]) == _numel(ops[open_stage.last].get("shape"))


def _describe(stages: list[_Stage], ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    owner = {i: s for s, stage in enumerate(stages) for i in stage.members}
    result = []
    for s, stage in enumerate(stages):
        reads: list[str] = []
        for i in stage.members:
            for label in ops[i].get("reads") or []:
                source = resolve(label, ops)
                if source.startswith("op:") and int(source[3:]) in owner:
                    if owner[int(source[3:])] == s:
                        continue
                    source = f"stage:{owner[int(source[3:])]}"
                if source not in reads:
                    reads.append(source)
        last = ops[stage.last]
        anchor = stage.anchor
        if anchor is None and stage.composite is not None:
            anchor = next((i for i in stage.members if ops[i].get("kind") != POINTWISE), None)
        result.append(
            {
                "kind": stage.kind,
                "ops": list(stage.members),
                "anchor": anchor,
                "prologue": stage.prologue,
                "epilogue": stage.epilogue,
                "composite": stage.composite_name,
                "shape": last.get("shape"),
                "dtype": last.get("dtype"),
                "flops": sum(int(ops[i].get("flops") or 0) for i in stage.members),
                "reads": reads,
            }
        )
    return result


def stage_of(label: str, ops: list[dict[str, Any]], stages: list[dict[str, Any]]) -> int | None:
    """The stage whose op computed the data behind `label`, or None (an input, a view of one)."""
    source = resolve(label, ops)
    if not source.startswith("op:"):
        return None
    index = int(source[3:])
    for s, stage in enumerate(stages):
        if index in stage["ops"]:
            return s
    return None

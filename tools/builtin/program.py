"""The generated forward as a program: view steps, library calls (hybrid) and kernel launches.

`build_program(analysis, policy, precision_dtype)` groups the traced ops (the analysis stages,
split into runs of ops where a stage does not fit one kernel), builds each group's kernel
(tools/builtin/groups.py) and records the steps the forward runs. It raises Unsupported, naming
the op, for what the builtin cannot write under the policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelgraph.tools.analysis.ops import ALLOC, NO_COMPUTE, POINTWISE
from kernelgraph.tools.builtin import indexed, losses  # noqa: F401  (they register their lowerings)
from kernelgraph.tools.builtin.attention import (
    AttentionKernel,
    fuse_attention,
    fuse_manual_attention,
)
from kernelgraph.tools.builtin.attention_match import manual_chains
from kernelgraph.tools.builtin.dataflow import DataFlow
from kernelgraph.tools.builtin.errors import FusionError, Unsupported
from kernelgraph.tools.builtin.factories import factory_call
from kernelgraph.tools.builtin.group_types import GroupContext, GroupResult, op_name
from kernelgraph.tools.builtin.groups import build_group
from kernelgraph.tools.builtin.kernels import FusedKernel, GemmKernel
from kernelgraph.tools.builtin.op_support import (
    anchors,
    attribute,
    library_function,
    tensor_refs,
    writable,
)
from kernelgraph.tools.builtin.pooling import PoolKernel
from kernelgraph.tools.builtin.scans import fuse_scan
from kernelgraph.tools.builtin.updates import prepare_ops
from kernelgraph.tools.builtin.values import (
    DROPPED_KWARGS,
    Value,
    float_dtype,
    meta_tensor,
    python_name,
    replay,
    source_text,
)  # fmt: skip
from kernelgraph.tools.harness import op_policy

CONSTANTS = (
    "only a one-element constant made from a number, read by a pointwise op, and tensors made by "
    "ones, zeros, full (and their _like and new_ forms) or arange are written"
)


@dataclass
class Step:
    # "view" | "library" | "launch" | "scratch" (filled with args) | "copy" | "layout" |
    # "factory" (a tensor made in forward: `op(args)` on the forward's device)
    kind: str
    outs: list[str]
    op: str = ""  # "aten.view.default" for views and library calls; copy: the destination
    args: str = ""  # Python source of the arguments
    kernel: FusedKernel | GemmKernel | PoolKernel | None = None
    inputs: list[str] = field(default_factory=list)
    out_shapes: list[tuple[list[int], str]] = field(default_factory=list)


@dataclass
class Program:
    steps: list[Step]
    outputs: list[str]  # the forward's return values (variables)
    params: list[dict[str, Any]]
    n_inputs: int
    hybrid_ops: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the kernel file's reader should know

    @property
    def kernels(self) -> list[FusedKernel | GemmKernel]:
        return [s.kernel for s in self.steps if s.kernel is not None]


class ProgramBuilder:
    def __init__(
        self, analysis: dict[str, Any], policy: str, precision_dtype: str | None, kinds: tuple = ()
    ):
        self.analysis, self.policy, self.precision = analysis, policy, precision_dtype
        self.kinds = kinds  # the backend's kernel kinds: composite kernels are made only for it
        self.fused: set[int] = set()  # ops already inside a kernel built out of stage order
        self.updates = prepare_ops(analysis.get("ops") or [], analysis.get("outputs") or [])
        self.ops: list[dict[str, Any]] = self.updates.ops
        self.values: dict[tuple[str, int], Value] = {}
        self.steps: list[Step] = []
        self.hybrid_ops: list[str] = []
        self.bases: dict[str, str] = {}  # view variable -> the tensor it views
        self.last_rows: tuple[list[int], str, Step] | None = None  # the latest row kernel
        self.last_group: tuple[list[int], str, Step] | None = None  # the latest kernel
        flow = DataFlow(self.ops, analysis.get("outputs") or [], self.updates.write_backs)
        self.chain, self.needed_outside = flow.chain, flow.needed_outside
        self.readers = flow.readers
        self._leaves()
        self.attention_chains = manual_chains(self) if AttentionKernel in kinds else []

    def _dead(self, index: int) -> bool:
        """Traced, but no op on the way to an output reads its results (the math attention's
        cast of its weights to fp16, dropped): no kernel is written for it. An
        in-place op left in place is never dead: its effect is on the data it was given."""
        if self.ops[index]["op"].endswith("_"):
            return False
        outs = self.ops[index].get("outs") or []
        keys = [(f"op:{index}", slot) for slot in range(len(outs))]
        return bool(keys) and not any(self.needed_outside(key, set()) for key in keys)

    def out_dtype(self, index: int, slot: int) -> str:
        return float_dtype(self.ops[index]["outs"][slot]["dtype"], self.precision)

    def _leaves(self) -> None:
        for i, spec in enumerate(self.analysis.get("inputs") or []):
            if "shape" in spec:
                self._set(("in:" + str(i), 0), f"x{i}", spec["shape"], spec["dtype"])
        for p in self.analysis.get("parameters") or []:
            kind = "buffer" if p.get("buffer") else "param"
            self._set((f"{kind}:{p['name']}", 0), attribute(p["name"]), p["shape"], p["dtype"])

    def _set(self, key, var: str, shape: list[int], dtype: str, meta=None) -> Value:
        dtype = float_dtype(dtype, self.precision)
        meta = meta if meta is not None else meta_tensor(shape, dtype)
        value = Value(var, list(meta.shape), list(meta.stride()), dtype, meta)
        self.values[key] = value
        return value

    def external(self, ref: dict) -> Value:
        """The forward tensor behind ref, with its views applied as view steps."""
        key, views = self.chain(ref)
        label = key[0]
        if key not in self.values and label.startswith("op:"):
            op = self.ops[int(label[3:])]
            if op.get("kind") == ALLOC:
                self._made(int(label[3:]), op)
        if key not in self.values:
            raise Unsupported("a constant tensor made in forward or kept as a plain attribute",
                              CONSTANTS)  # fmt: skip
        value = self.values[key]
        for index, slot in views:
            value = self._view(index, slot, value)
        return value

    def _made(self, index: int, op: dict) -> None:
        """A tensor that forward makes from numbers (a mask from torch.ones(...).tril(), position
        ids from torch.arange): made the same way in the kernel file's forward. Allocation is
        free under every policy; uninitialised memory (empty) is refused."""
        made = factory_call(op, lambda ref: self.external(ref).var)
        if made is None:
            raise Unsupported(f"{op['op']} (a tensor made in forward)", CONSTANTS)
        call, args = made
        var = f"made{index}"
        shape, dtype = op["outs"][0]["shape"], op["outs"][0]["dtype"]
        self.steps.append(Step("factory", [var], call, args, out_shapes=[(shape, dtype)]))
        self._set((f"op:{index}", 0), var, shape, dtype)

    def _view(self, index: int, slot: int, source: Value) -> Value:
        """A view step, written as as_strided of the producer's tensor (the meta replay gives
        the exact sizes, strides and offset; torch.ops is not allowed in a kernel file)."""
        key = (f"op:{index}", slot)
        if key in self.values:
            return self.values[key]
        op = self.ops[index]
        try:
            meta = replay(op, lambda ref: self.external(ref).meta)[slot]
        except RuntimeError:  # a reshape our layout cannot view (see `_contiguous`)
            source = self._contiguous(source, f"c{index}")
            meta = replay(op, lambda ref: source.meta)[slot]
        base = self._base(source)
        var = f"v{index}" if slot == 0 else f"v{index}_{slot}"
        args = f"{list(meta.shape)}, {list(meta.stride())}, {meta.storage_offset()}"
        self.steps.append(Step("view", [var], f"{base}.as_strided", args))
        self.bases[var] = base
        return self._set(key, var, list(meta.shape), op["outs"][slot]["dtype"], meta)

    def _contiguous(self, value: Value, var: str) -> Value:
        """`value` copied contiguous. Eager keeps a permuted operand's layout through pointwise
        ops, and the trace's `view` after a permute may rely on it (level3/48's einsums); our
        kernels store contiguous, where only a copy can be viewed so."""
        self.steps.append(Step("layout", [var], args=f"{value.var}.contiguous()"))
        meta = meta_tensor(value.shape, value.dtype)
        return Value(var, list(value.shape), list(meta.stride()), value.dtype, meta)

    def _base(self, value: Value) -> str:
        return self.bases.get(value.var, value.var)

    def reviewed(self, value: Value, views: list[tuple[int, int]], var: str) -> Value:
        """`value` seen through the traced views (op index, slot), as one view step named
        `var`: for a kernel that reads a tensor through views of an op it fuses away."""
        if not views:
            return value
        meta = value.meta
        for index, slot in views:
            meta = replay(self.ops[index], lambda ref, m=meta: m)[slot]
        base = self._base(value)
        args = f"{list(meta.shape)}, {list(meta.stride())}, {meta.storage_offset()}"
        self.steps.append(Step("view", [var], f"{base}.as_strided", args))
        self.bases[var] = base
        return Value(var, list(meta.shape), list(meta.stride()), value.dtype, meta)

    # ------------------------------------------------------------ groups

    def context(self) -> GroupContext:
        return GroupContext(self.ops, self.external, self.chain, self.needed_outside,
                            self.out_dtype)  # fmt: skip

    def add_stage(self, stage: dict[str, Any]) -> None:
        members = [i for i in stage["ops"] if self.ops[i].get("kind") not in NO_COMPUTE]
        members = [i for i in members if not self.ops[i].get("state") and not self._dead(i)]
        members = [i for i in members if i not in self.fused]
        live_kind = self._live_kind(stage, members)
        revived = live_kind != stage["kind"]  # its own op is dead: it may join the last kernel
        stage = {**stage, "kind": live_kind}
        if stage.get("composite") == "scaled_dot_product_attention":
            self.fused |= fuse_attention(self, members)
            members = [i for i in members if i not in self.fused]
        members = fuse_manual_attention(self, stage, members)
        pending: list[int] = []
        for i in members:
            for first in self.ops[i].get("before") or []:  # batch norm's statistics
                if pending:
                    self._group(pending, stage["kind"])
                    pending = []
                self._group([first], self.ops[first]["kind"])
            pending += self.ops[i].get("fused_before") or []  # an NLL loss's rows
            if writable(self.ops[i], self.policy):
                if pending and anchors(self.ops[i]):
                    self._group(pending, stage["kind"])
                    pending = []
                pending.append(i)
                continue
            if pending:
                self._group(pending, stage["kind"])
                pending = []
            self._library(i)
        if pending and fuse_scan(self, pending):
            return
        if pending and stage["kind"] == POINTWISE and self._fuse_into(self.last_rows, pending):
            return
        if pending and revived and self._fuse_into(self.last_group, pending):
            return
        if pending:
            self._group(pending, stage["kind"])

    def _live_kind(self, stage: dict[str, Any], members: list[int]) -> str:
        """A stage whose own kind of op is dead (a dropout rewritten to `x * 1.0`) and whose
        live ops are all pointwise is pointwise, so it fuses with the row kernel before it."""
        kinds = {self.ops[i].get("kind") for i in members}
        return POINTWISE if kinds == {POINTWISE} else stage["kind"]

    def _fuse_into(self, last: tuple[list[int], str, Step] | None, members: list[int]) -> bool:
        """A pointwise stage right after a row kernel (x / x.norm(dim=1, keepdim=True), an RMS
        norm written out), or after any kernel when the stage's own op is dead (a dropout):
        one kernel for both when it fits, so the data is read once."""
        if last is None or last[2] is not self.steps[-1] or not self._reads(members, last[0]):
            return False
        combined = [*last[0], *members]
        try:
            result = build_group(self.context(), combined, last[2].kernel.name, last[1])
        except (FusionError, Unsupported):
            return False
        self.steps.remove(last[2])
        self._launch(result, combined, last[1])
        return True

    def _reads(self, members: list[int], producers: list[int]) -> bool:
        made = {f"op:{i}" for i in producers}
        return any(
            self.chain(ref)[0][0] in made for i in members for ref in tensor_refs(self.ops[i])
        )

    def _group(self, members: list[int], kind: str) -> None:
        try:
            result = build_group(self.context(), members, self._name(members), kind)
        except FusionError:
            if len(members) == 1:
                raise
            self._group_in_runs(members)
            return
        self._launch(result, members, kind)

    def _group_in_runs(self, members: list[int]) -> None:
        """A stage that does not fit one kernel: one kernel per run of consecutive ops, each
        run as long as still fits (a triplet loss's two norms and what follows them share a
        kernel, its final mean takes another), so fewer intermediates go through memory."""
        start = 0
        while start < len(members):
            built = None
            for stop in range(start + 1, len(members) + 1):
                run = members[start:stop]
                try:
                    built = build_group(self.context(), run, self._name(run), self._kind(run))
                except FusionError:
                    if built is None:
                        raise  # one op alone does not fit a kernel
                    break
                end = stop
            self._launch(built, members[start:end], self._kind(members[start:end]))
            start = end

    def _kind(self, members: list[int]) -> str:
        kinds = (self.ops[i].get("kind") or POINTWISE for i in members)
        return next((k for k in kinds if k != POINTWISE), POINTWISE)

    def _name(self, members: list[int]) -> str:
        first = op_name(self.ops[members[0]])
        return f"k{len(self.kernel_steps())}_{python_name(first.strip('_'))}"

    def kernel_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "launch"]

    def _launch(self, result: GroupResult, members: list[int], kind: str) -> None:
        outs = []
        for (label, slot), shape, dtype in result.outputs:
            var = f"t{label[3:]}_{slot}"
            self._set((label, slot), var, shape, dtype)
            outs.append(var)
        inputs = [v.var for v in result.inputs]
        shapes = [(shape, dtype) for _, shape, dtype in result.outputs]
        self.steps.append(Step("launch", outs, kernel=result.kernel, inputs=inputs,
                               out_shapes=shapes))  # fmt: skip
        rows = isinstance(result.kernel, FusedKernel) and bool(result.kernel.reductions)
        self.last_rows = (members, kind, self.steps[-1]) if rows else None
        self.last_group = (members, kind, self.steps[-1])  # for fuse_scan

    def _library(self, index: int) -> None:
        op = self.ops[index]
        full_name = f"{op['op']}.{op['overload']}"
        if op_policy.classify(full_name) != op_policy.HEAVY:
            raise Unsupported(op["op"], f"a {op.get('kind')} op")
        if self.policy != "hybrid":
            raise Unsupported(op["op"], f"a {op.get('kind')} op", hybrid_ok=True)
        function = library_function(op_name(op))
        metas = replay(op, lambda ref: self.external(ref).meta)
        text = lambda ref: self.external(ref).var  # noqa: E731
        parts = [source_text(a, text) for a in op["argv"]]
        parts += [f"{k}={source_text(v, text)}" for k, v in (op.get("kwargv") or {}).items()
                  if k not in DROPPED_KWARGS]  # fmt: skip
        outs = []
        for slot, meta in enumerate(metas):
            var = f"t{index}_{slot}"
            self._set((f"op:{index}", slot), var, list(meta.shape), str(meta.dtype)[6:], meta)
            outs.append(var)
        self.steps.append(Step("library", outs, function, ", ".join(parts)))
        self.hybrid_ops.append(op["op"])

    def _write_back(self) -> None:
        """Updates of module state: each target's chain of updates as one group, then a copy of
        each final value into its parameter or buffer."""
        chains: dict[str, list[int]] = {}
        for i in self.updates.state_ops:
            if not writable(self.ops[i]):
                raise Unsupported(self.ops[i]["op"] + "_", "an update of module state")
            chains.setdefault(self.ops[i]["target"], []).append(i)
        for members in chains.values():
            self._group(members, POINTWISE)
        for key, target in self.updates.write_backs.items():
            destination = attribute(target.split(":", 1)[1])
            self.steps.append(Step("copy", [], destination, self.values[key].var))

    def build(self) -> Program:
        for stage in self.analysis.get("stages") or []:
            self.add_stage(stage)
        self._write_back()
        outputs = []
        for out in self.analysis.get("outputs") or []:
            if "ref" not in out:
                raise Unsupported("a forward that returns a non-tensor value")
            outputs.append(self.external(out["ref"]).var)
        if self.hybrid_ops and not self.kernel_steps():
            # A forward of library calls only: there is no kernel of ours to write or verify.
            raise Unsupported(
                ", ".join(dict.fromkeys(self.hybrid_ops)),
                "as a library call it leaves nothing to write; the builtin has no strict kernel "
                "for it yet",
            )
        params = list(self.analysis.get("parameters") or [])
        return Program(self.steps, outputs, params, len(self.analysis.get("inputs") or []),
                       self.hybrid_ops, self.updates.notes)  # fmt: skip


def build_program(
    analysis: dict[str, Any],
    policy: str = "strict",
    precision_dtype: str | None = None,
    kinds: tuple = (),
) -> Program:
    if analysis.get("trace") != "aten" or not analysis.get("ops"):
        why = analysis.get("trace_error") or "the forward ran no ATen ops"
        raise Unsupported("this task", why)
    if analysis.get("ops_total", 0) > len(analysis["ops"]):
        raise Unsupported("this task", "its forward runs more ATen ops than the trace keeps")
    return ProgramBuilder(analysis, policy, precision_dtype, kinds).build()

"""Module state that forward updates: batch norm's running statistics and in-place updates of
buffers (`num_batches_tracked += 1`, `buf.mul_(0.9).add_(x.mean(0))`).

The harness checks such updates (tools/harness/buffers.py), so the builtin writes them: each
update is computed out of place like any other value, and the program copies the last value of
each updated parameter or buffer back into it (a `copy_`, which moves memory and computes
nothing). `prepare_ops` rewrites the traced op list before the program groups it:

- batch norm in training mode becomes `batch_norm_stats` (an op appended to the list, a
  reduction per channel whose outputs include the new running mean and variance) and, in the
  op's own place, `batch_norm_apply` (pointwise, so it fuses with what follows); over a batch
  of one without running statistics (instance norm) it becomes one row op, `batch_norm_rows`;
- a mean or summed NLL loss (cross-entropy's second half) becomes each row's loss, fused with
  the log-softmax before it, and their total (`losses.split_nll_loss`);
- dropout in training mode becomes the identity (tools/builtin/random_ops.py);
- a clone of a forward input that nothing writes and no output returns becomes a view of it
  (level2/51's `x.clone().detach()` for a residual: a copy of the input, then a read of the
  copy, where one read of the input does);
- an in-place update of module state becomes its out-of-place op;
- so does an in-place op on a tensor forward made (`nn.ReLU(inplace=True)`, `y.add_(1)`), when
  nothing reads that tensor's old value afterwards (through a view taken before, or as an
  output); otherwise, and on forward's own inputs, it stays unsupported;
- `dst.copy_(src)` on a whole plain tensor attribute becomes its out-of-place op too (level3/33
  keeps its hidden state so): it overwrites every element, so the program reads src alone;
- bitwise not, and and or on booleans become the logical ops.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kernelgraph.tools.analysis.stages import resolve
from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.losses import split_nll_loss
from kernelgraph.tools.builtin.random_ops import dropout_as_identity
from kernelgraph.tools.builtin.scans import exclusive_scan

# Batch norm's ops: (index of `training`, of `momentum`, of `eps`, running stats kept).
BATCH_NORMS = {
    "aten.native_batch_norm.default": (5, 6, 7, True),
    "aten._native_batch_norm_legit.default": (5, 6, 7, True),
    "aten._native_batch_norm_legit.no_stats": (3, 4, 5, False),
}


@dataclass
class Prepared:
    ops: list[dict[str, Any]]
    write_backs: dict[tuple[str, int], str] = field(default_factory=dict)  # value -> state label
    state_ops: list[int] = field(default_factory=list)  # updates, in trace order
    updated_at: dict[str, int] = field(default_factory=dict)  # state label -> first update
    notes: list[str] = field(default_factory=list)  # for the kernel file's reader


def prepare_ops(ops: list[dict[str, Any]], outputs: list[dict[str, Any]] = ()) -> Prepared:
    """`outputs`: the analysis's outputs (an in-place op must not change what one returns)."""
    prepared = Prepared([copy.deepcopy(op) for op in ops])
    for i, op in enumerate(prepared.ops):
        if (
            op["op"].endswith("_")
            and not op.get("state")
            and _out_of_place_is_safe(ops, i, outputs)
        ):
            op["op"] = op["op"][:-1]
            if op["op"] == "aten.copy":
                _drop_destination(op)
    for i, op in enumerate(ops):
        layout = BATCH_NORMS.get(f"{op['op']}.{op['overload']}")
        if layout is not None and op["argv"][layout[0]]:
            if _one_sample_untracked(op, layout):
                _batch_norm_rows(prepared, i, layout)
            else:
                _split_batch_norm(prepared, i, layout)
        if op["op"] == "aten.nll_loss_forward":
            split_nll_loss(prepared.ops, i)
        if op["op"] == "aten.cat":
            exclusive_scan(prepared.ops, i, outputs)
    prepared.notes += dropout_as_identity(prepared.ops)
    _boolean_bitwise_as_logical(prepared.ops)
    for i, op in enumerate(prepared.ops):
        if _clone_is_alias(prepared.ops, i, outputs):
            prepared.ops[i] = {**op, "op": "aten.alias", "overload": "default", "kind": "view",
                               "argv": op["argv"][:1], "kwargv": {}}  # fmt: skip
    last: dict[str, int] = {}
    for i, op in enumerate(prepared.ops):
        if op.get("state"):
            if not op["op"].endswith("_"):
                raise Unsupported(op["op"], "an update of module state that is not an in-place op")
            op["op"] = op["op"][:-1]
            prepared.state_ops.append(i)
            last[op["target"]] = i
            prepared.updated_at.setdefault(op["target"], i)
    for target, i in last.items():
        if target in prepared.write_backs.values():
            raise Unsupported(f"{target.split(':', 1)[1]} updated twice in one forward")
        prepared.write_backs[(f"op:{i}", 0)] = target
    _check_no_stale_reads(prepared, len(ops))
    return prepared


def _out_of_place_is_safe(ops: list[dict[str, Any]], i: int, outputs) -> bool:
    """Whether in-place op `i` may compute a new tensor instead: it mutates a tensor forward
    made, and after it nothing reads that tensor's old data (a view taken earlier, an output)."""
    reads = ops[i].get("reads") or []
    # a copy overwrites every element: a constant's old values never matter
    overwrites_a_constant = ops[i]["op"] == "aten.copy_" and reads[:1] == ["const"]
    if not reads or not (reads[0].startswith("op:") or overwrites_a_constant):
        return False  # forward's inputs, parameters, constants: the caller would see it
    data = resolve(reads[0], ops)
    later = [label for op in ops[i + 1 :] for label in op.get("reads") or []]
    later += [o["ref"]["t"] for o in outputs if "ref" in o]
    return all(resolve(label, ops) != data for label in later)


BITWISE_AS_LOGICAL = {
    f"aten.bitwise_{name}": f"aten.logical_{name}" for name in ("not", "and", "or")
}


def _boolean_bitwise_as_logical(ops: list[dict[str, Any]]) -> None:
    """`~mask`, `a & b` and `a | b` on booleans (Mamba's `~torch.tril(...)`) are the logical ops,
    which the lowering writes; the expressions carry no dtype, so integer bitwise ops stay
    unsupported."""
    for op in ops:
        logical = BITWISE_AS_LOGICAL.get(op["op"])
        if logical and op["dtype"] == "bool" and op["overload"] in ("default", "Tensor"):
            op["op"], op["overload"] = logical, "default"


def _drop_destination(op: dict[str, Any]) -> None:
    """An out-of-place `dst.copy_(src)` reads src alone: every element of dst is overwritten,
    so dst (a plain tensor attribute, say, which the program could not read) is never read."""
    for key in ("argv", "reads", "arg_shapes"):
        op[key] = op[key][1:2]


def _clone_is_alias(ops: list[dict[str, Any]], i: int, outputs) -> bool:
    """Whether op `i` clones a forward input, keeping its layout, that no op writes in place
    (neither the input nor the copy) and that no output returns: then a view reads the same."""
    op = ops[i]
    layout = (op.get("kwargv") or {}).get("memory_format")
    if op["op"] != "aten.clone" or layout not in (None, "torch.preserve_format"):
        return False
    source = resolve((op.get("reads") or [""])[0], ops)
    if not source.startswith("in:") or len(op["argv"]) != 1:
        return False
    written = {resolve(o["reads"][0], ops) for o in ops if o["op"].endswith("_") and o.get("reads")}
    returned = {resolve(o["ref"]["t"], ops) for o in outputs if "ref" in o}
    return not ({source, f"op:{i}"} & (written | returned))


def _tracked(op: dict[str, Any], has_stats: bool) -> bool:
    running = op["argv"][3:5] if has_stats else [None, None]
    return has_stats and all(isinstance(r, dict) and "t" in r for r in running)


def _one_sample_untracked(op: dict[str, Any], layout: tuple[int, int, int, bool]) -> bool:
    """Batch norm over a batch of one (instance norm's form) that keeps no running statistics:
    each channel's statistics come from one contiguous run of the input, as a layer norm's do."""
    return op["arg_shapes"][0][0] == 1 and not _tracked(op, layout[3])


def _batch_norm_rows(prepared: Prepared, i: int, layout: tuple[int, int, int, bool]) -> None:
    """One row op (tools/builtin/norm_ops.py): statistics and normalisation in one kernel, so a
    channel is read once where its row stays on chip, not once for the statistics and again
    for the normalisation."""
    op = prepared.ops[i]
    argv = op["argv"]
    prepared.ops[i] = {**op, "op": "aten.batch_norm_rows", "overload": "default",
                       "argv": [*argv[:3], argv[layout[2]]], "kwargv": {}}  # fmt: skip


def _split_batch_norm(prepared: Prepared, i: int, layout: tuple[int, int, int, bool]) -> None:
    op = prepared.ops[i]
    _, momentum, eps, has_stats = layout
    argv = op["argv"]
    running = argv[3:5] if has_stats else [None, None]
    channels = op["arg_shapes"][0][1]
    stats_index = len(prepared.ops)
    row = {"shape": [channels], "dtype": op["outs"][0]["dtype"]}
    tracked = _tracked(op, has_stats)
    stats = {
        **op,
        "op": "aten.batch_norm_stats",
        "overload": "default",
        "argv": [*argv[:3], *running, argv[momentum], argv[eps]],
        "kwargv": {},
        "outs": [row] * (4 if tracked else 2),
    }
    prepared.ops.append(stats)
    mean, rstd = ({"t": f"op:{stats_index}", "o": slot} for slot in (0, 1))
    prepared.ops[i] = {
        **op,
        "op": "aten.batch_norm_apply",
        "overload": "default",
        "argv": [*argv[:3], mean, rstd],
        "kwargv": {},
        "outs": op["outs"][:1],
        "before": [stats_index],
    }
    if tracked:
        for slot, ref in ((2, running[0]), (3, running[1])):
            if ref["t"] in prepared.updated_at or not ref["t"].startswith("buffer:"):
                raise Unsupported("batch norm whose running statistics are not its own buffers")
            prepared.write_backs[(f"op:{stats_index}", slot)] = ref["t"]
            prepared.updated_at[ref["t"]] = i


def _check_no_stale_reads(prepared: Prepared, traced: int) -> None:
    """Nothing may read a parameter or buffer after forward updated it, nor the result of an
    in-place update: the program reads module state as it was when forward began and writes it
    back when forward ends."""
    updates = {f"op:{i}": prepared.ops[i]["target"] for i in prepared.state_ops}
    for i, op in enumerate(prepared.ops[:traced]):
        if op.get("state"):
            continue
        for label in op.get("reads") or []:
            if i > prepared.updated_at.get(label, i) or label in updates:
                name = updates.get(label, label).split(":", 1)[1]
                raise Unsupported(
                    f"{op['op']} reading `{name}` after forward updated it",
                    "the builtin reads module state as it was when forward began (batch norm "
                    "with momentum=None reads its step counter this way)",
                )

"""Triton source for the builtin's row kernels: a reduction over each row (held whole, or read
in a loop of blocks) with the row's pointwise stores, and one chunk of a split row.

Rows are contiguous (`inner == 1`) or strided (`inner > 1`, the reduced axis in the middle);
`_full_index` maps (row k, position r) to the flat index either way.
"""

from __future__ import annotations

from kernelgraph.tools.builtin.kernels import FusedKernel, PartialReduction
from kernelgraph.tools.builtin.printer import Printer
from kernelgraph.tools.builtin.triton_emit import (
    COMBINE,
    INIT,
    INT32_LIMIT,
    REDUCE,
    TritonSyntax,
    _indent,
    _signature,
)


def _full_index(kernel: FusedKernel) -> str:
    if kernel.inner == 1:
        return f"k * {kernel.rlen} + r"
    return (
        f"(k // {kernel.inner}) * {kernel.rlen * kernel.inner} + r * {kernel.inner}"
        f" + k % {kernel.inner}"
    )


def row_source(kernel: FusedKernel, gpu: bool, persistent: bool) -> str:
    syntax = TritonSyntax(gpu)
    names = {f"r{j}": f"r{j}" for j in range(len(kernel.reductions))}
    k_start = "tl.program_id(0).to(tl.int64)" if kernel.numel > INT32_LIMIT else "tl.program_id(0)"
    body = [
        f"k = {k_start} * BLOCK_K + tl.arange(0, BLOCK_K)[:, None]",
        f"kmask = k < {kernel.rows}",
    ]
    window = [
        "r = {start}tl.arange(0, BLOCK_R)[None, :]",
        f"mask = kmask & (r < {kernel.rlen})",
        f"idx = {_full_index(kernel)}",
    ]
    if persistent:
        body += [line.format(start="") for line in window]
        shared = Printer(syntax, dict(names), prefix="a")  # one scope: loads are shared
        for j, reduction in enumerate(kernel.reductions):
            value = shared.value(reduction.value)
            body += shared.take()
            body += _reduce_block(j, reduction.kind, value, kernel.rlen)
    else:
        online = kernel.online_pairs()
        folded = {j: i for i, (j, _) in online.items()}
        loop_window = [line.format(start="start + ") for line in window]
        for p, members in enumerate(kernel.passes(folded)):
            printer = Printer(syntax, dict(names), prefix=f"a{p}_")
            body += _looped_pass(kernel, members, online, printer, loop_window)
    rows = Printer(syntax, dict(names), prefix="w")
    fulls = shared if persistent else Printer(syntax, dict(names), prefix="f")
    full_lines: list[str] = []
    for store in kernel.stores:
        if store.space == "row":
            value = rows.value(store.value)
            body += rows.take() + [f"tl.store({store.arg} + k, {value}, mask=kmask)"]
        else:
            value = fulls.value(store.value)
            full_lines += fulls.take() + [f"tl.store({store.arg} + idx, {value}, mask=mask)"]
    if full_lines and persistent:
        body += full_lines
    elif full_lines:  # backwards: the row's last blocks, read last before, may still be in L2
        steps = f"tl.cdiv({kernel.rlen}, BLOCK_R)"
        loop = [f"start = ({steps} - 1 - back) * BLOCK_R"]
        loop += [line.format(start="start + ") for line in window] + full_lines
        body += [f"for back in range(0, {steps}):", *_indent(loop)]
    signature = _signature(kernel, ["BLOCK_K", "BLOCK_R"])
    return "\n".join([signature, *_indent(body)])


def _reduce_block(j: int, kind: str, value: str, rlen: int) -> list[str]:
    if kind in ("argmax", "argmin"):
        base = kind[3:]
        return [
            f"v{j} = tl.where(mask, {value}, {INIT[base]})",
            f"m{j} = {REDUCE[base].format(a=f'v{j}')}[:, None]",
            f"r{j} = tl.min(tl.where(mask & (v{j} == m{j}), r, {rlen}), axis=1)[:, None]",
        ]
    return [f"r{j} = {REDUCE[kind].format(a=f'tl.where(mask, {value}, {INIT[kind]})')}[:, None]"]


def _looped_pass(kernel: FusedKernel, members: list[int], online: dict, printer: Printer,
                 window: list[str]) -> list[str]:  # fmt: skip
    """One loop over the row for the reductions of one pass: their values share the loads."""
    init: list[str] = []
    loop = list(window)
    finish: list[str] = []
    for j in members:
        reduction = kernel.reductions[j]
        value = printer.value(reduction.value)
        loop += printer.take()
        if j in online:
            sum_j, shift = online[j]
            parts = _online_parts(j, sum_j, value, shift, printer.syntax)
        else:
            parts = (
                _loop_init(j, reduction.kind),
                _loop_combine(j, reduction.kind, value),
                _loop_finish(j, reduction.kind, kernel.rlen),
            )
        init += parts[0]
        loop += parts[1]
        finish += parts[2]
    return [*init, f"for start in range(0, {kernel.rlen}, BLOCK_R):", *_indent(loop), *finish]


def _online_parts(i: int, j: int, value: str, shift, syntax) -> tuple[list[str], ...]:
    """r_i = max(E) and r_j = sum(exp(E - S(r_i))) in one pass (init, loop, finish lines):
    per-lane running max and sum, the sum rescaled by exp(S(old) - S(new)) as the max grows (a
    zero sum stays zero, so an empty lane never multiplies 0 by an overflowed factor)."""

    def shift_of(name: str, prefix: str) -> tuple[str, list[str]]:
        printer = Printer(syntax, {f"r{i}": name}, prefix=prefix)
        text = printer.value(shift)
        return text, printer.take()

    def rescaled(old: str, new: str, prefix: str) -> tuple[str, list[str]]:
        s_old, lines_old = shift_of(old, f"{prefix}o")
        s_new, lines_new = shift_of(new, f"{prefix}n")
        text = f"tl.where(acc{j} == 0.0, 0.0, acc{j} * tl.exp({s_old} - {s_new}))"
        return text, lines_old + lines_new

    kept, kept_lines = rescaled(f"acc{i}", f"new{i}", f"s{i}_")
    s_new = shift_of(f"new{i}", f"s{i}_n")[0]
    init = [
        f"acc{i} = tl.full([BLOCK_K, BLOCK_R], {INIT['max']}, tl.float32)",
        f"acc{j} = tl.zeros([BLOCK_K, BLOCK_R], tl.float32)",
    ]
    loop = [
        f"new{i} = tl.maximum(acc{i}, tl.where(mask, {value}, {INIT['max']}))",
        *kept_lines,
        f"acc{j} = {kept} + tl.where(mask, tl.exp({value} - {s_new}), 0.0)",
        f"acc{i} = new{i}",
    ]
    total, total_lines = rescaled(f"acc{i}", f"r{i}", f"t{i}_")
    finish = [
        f"r{i} = tl.max(acc{i}, axis=1)[:, None]",
        *total_lines,
        f"r{j} = tl.sum({total}, axis=1)[:, None]",
    ]
    return init, loop, finish


def _loop_init(j: int, kind: str) -> list[str]:
    base = kind[3:] if kind.startswith("arg") else kind
    lines = [f"acc{j} = tl.full([BLOCK_K, BLOCK_R], {INIT[base]}, tl.float32)"]
    if kind.startswith("arg"):
        lines.append(f"pos{j} = tl.zeros([BLOCK_K, BLOCK_R], tl.int32)")
    return lines


def _loop_combine(j: int, kind: str, value: str) -> list[str]:
    if kind.startswith("arg"):
        base = kind[3:]
        better = ">" if base == "max" else "<"
        return [
            f"v{j} = tl.where(mask, {value}, {INIT[base]})",
            f"better{j} = v{j} {better} acc{j}",
            f"acc{j} = tl.where(better{j}, v{j}, acc{j})",
            f"pos{j} = tl.where(better{j}, r, pos{j})",
        ]
    masked = f"tl.where(mask, {value}, {INIT[kind]})"
    return [f"acc{j} = {COMBINE[kind].format(a=f'acc{j}', b=masked)}"]


def _loop_finish(j: int, kind: str, rlen: int) -> list[str]:
    if kind.startswith("arg"):
        base = kind[3:]
        return [
            f"m{j} = {REDUCE[base].format(a=f'acc{j}')}[:, None]",
            f"r{j} = tl.min(tl.where(acc{j} == m{j}, pos{j}, {rlen}), axis=1)[:, None]",
        ]
    return [f"r{j} = {REDUCE[kind].format(a=f'acc{j}')}[:, None]"]


ATOMIC = {"sum": "tl.atomic_add", "max": "tl.atomic_max", "min": "tl.atomic_min"}


def partial_source(kernel: PartialReduction, gpu: bool) -> str:
    """BLOCKS consecutive chunks of one row per program, reduced in registers and combined into
    the scratch with one atomic a program: thousands of atomics on one address, not a million."""
    printer = Printer(TritonSyntax(gpu))
    wide = ".to(tl.int64)" if kernel.numel > INT32_LIMIT else ""
    body = [
        f"k = tl.program_id(1){wide}",
        f"kmask = k < {kernel.rows}",
        f"first = tl.program_id(0){wide} * (BLOCKS * BLOCK_R)",
    ]
    loop = [
        "r = first + b * BLOCK_R + tl.arange(0, BLOCK_R)",
        f"mask = r < {kernel.rlen}",
        f"idx = {_full_index(kernel)}",
    ]
    finish = []
    for j, reduction in enumerate(kernel.reductions):
        kind, init = reduction.kind, INIT[reduction.kind]
        value = printer.value(reduction.value)
        loop += printer.take()
        masked = f"tl.where(mask, {value}, {init})"
        body.append(f"acc{j} = tl.full([BLOCK_R], {init}, tl.float32)")
        loop.append(f"acc{j} = {COMBINE[kind].format(a=f'acc{j}', b=masked)}")
        part = REDUCE[kind].format(a=f"acc{j}").replace(", axis=1", ", axis=0")
        if kind == "sum":  # into fp64 scratch: see split.SCRATCH_DTYPE
            part = f"({part}).to(tl.float64)"
        finish += [f"part{j} = {part}", f"{ATOMIC[kind]}({kernel.targets[j]} + k, part{j})"]
    body += ["for b in range(0, BLOCKS):", *_indent(loop), *finish, *_last_program(kernel, gpu)]
    return "\n".join([_signature(kernel, ["BLOCKS", "BLOCK_R"]), *_indent(body)])


def _last_program(kernel: PartialReduction, gpu: bool) -> list[str]:
    """The row's stores, by the last of its programs to arrive: each adds its partials, then
    one to the row's counter (atomics order both, acquire and release); the last reads the
    totals past L1 (volatile) and stores, so no kernel launch follows for a loss's mean."""
    if not kernel.finish:
        return []
    printer = Printer(TritonSyntax(gpu), {f"r{j}": f"total{j}" for j in range(len(kernel.totals))})
    lines = [f"total{j} = tl.load({name} + k, volatile=True).to(tl.float32)"
             for j, name in enumerate(kernel.totals)]  # fmt: skip
    for store in kernel.finish:
        value = printer.value(store.value)
        lines += printer.take() + [f"tl.store({store.arg} + k, {value}, mask=kmask)"]
    return [
        f"arrived = tl.atomic_add({kernel.counter} + k, 1.0)",
        "if arrived.to(tl.int32) == tl.num_programs(0) - 1:",
        *_indent(lines),
    ]

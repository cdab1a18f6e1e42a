"""Resident rows: a row too long for one program, held on chip by several at once.

A softmax or norm over rows longer than a program holds reads each row twice from memory (a
pass for the statistics, a pass that writes), which caps it at two thirds of the bandwidth's
speed-of-light. Here a row is cut into CHUNKS chunks of BLOCK_R, one per program, each kept in
registers: a program reduces its chunk, publishes the partial result, waits until every chunk
of its row has published, combines the partials and writes its chunk. The row is read once.

The programs of one row wait for each other, so they must all run at the same time:
`_launch_resident` (a host helper in the kernel file) launches only as many programs as the GPU
holds at once, a multiple of CHUNKS, and each loops over work items (row, chunk). Under the Triton interpreter,
which runs programs one after another, only CHUNKS == 1 can run.
"""

from __future__ import annotations

from kernelgraph.tools.builtin import aligned_rows
from kernelgraph.tools.builtin.expr import walk
from kernelgraph.tools.builtin.kernels import FusedKernel
from kernelgraph.tools.builtin.printer import Printer
from kernelgraph.tools.builtin.triton_emit import (
    INIT,
    INT32_LIMIT,
    TritonSyntax,
    _indent,
)
from kernelgraph.tools.builtin.triton_rows import _reduce_block

# the reductions whose partials combine by the same reduction, over a row's partials (1D)
COMBINE_ALL = {"sum": "tl.sum({a}, axis=0)", "max": "tl.max({a}, axis=0)",
               "min": "tl.min({a}, axis=0)", "prod": "tl.reduce({a}, 0, _multiply)"}  # fmt: skip
# 32 fp32 a thread at 4 warps; H100, one exchange a row: softmax [4096, 393216] 5.03 ms against
# 5.73 at 8192 x 8 warps, L1 norm [32768, 65535] 7.14 against 7.40 (benchmarks/RESULTS.md)
DEFAULT_BLOCK_R, DEFAULT_WARPS = 4096, 4


def fits(kernel: FusedKernel, sms: int) -> bool:
    """Contiguous rows whose full-space stores would otherwise read them a second time, with
    reductions whose partials combine, in no more default chunks than one program per SM (any
    kernel that launches at all holds that many at once)."""
    return (
        kernel.inner == 1
        and chunks(kernel, DEFAULT_BLOCK_R) <= sms
        and bool(kernel.reductions)
        and all(r.kind in COMBINE_ALL for r in kernel.reductions)
        and any(s.space == "full" for s in kernel.stores)
    )


def chunks(kernel: FusedKernel, block_r: int) -> int:
    return -(-(kernel.rlen + aligned_rows.lead(kernel)) // block_r)


def _width(count: int) -> int:
    """The slots of one row's partials: its chunk count padded to a power of 2 (tl.arange)."""
    return 1 << max(count - 1, 0).bit_length()


def _wide(kernel: FusedKernel) -> str:
    return ".to(tl.int64)" if kernel.numel + aligned_rows.ALIGN > INT32_LIMIT else ""


def _position(kernel: FusedKernel, item: str) -> list[str]:
    """Row, chunk, indices and masks of work item `item`."""
    wide = _wide(kernel)
    lines = [
        f"row = {item} // CHUNKS",
        f"chunk = {item} % CHUNKS",
        f"k = row{wide} + tl.zeros([1, 1], tl.int32)",
        f"kmask = k < {kernel.rows}",
    ]
    if aligned_rows.applies(kernel):
        return lines + aligned_rows.position(kernel.rlen)
    return lines + [
        "r = chunk * BLOCK_R + tl.arange(0, BLOCK_R)[None, :]",
        f"mask = kmask & (r < {kernel.rlen})",
        f"idx = k * {kernel.rlen} + r",
    ]


def _passes(kernel: FusedKernel) -> tuple[list[list[int]], dict]:
    """The exchanges' groups of reductions, with online softmax's sum folded into its max's
    (one exchange, not two), and those pairs (max index -> (sum index, shift))."""
    online = kernel.online_pairs()
    return kernel.passes({j: i for i, (j, _) in online.items()}), online


def resident_source(kernel: FusedKernel, gpu: bool, block_r: int) -> str:
    """Each program loops over work items (row, chunk), G programs apart."""
    count = chunks(kernel, block_r)
    width = _width(count)
    names = {f"r{j}": f"r{j}" for j in range(len(kernel.reductions))}
    syntax = TritonSyntax(gpu)
    aligned = aligned_rows.applies(kernel)
    printer = Printer(syntax, dict(names), prefix="a",  # one scope: loads are shared
                      offsets=aligned_rows.own_elements if aligned else None)  # fmt: skip
    body = _position(kernel, "w")
    passes, online = _passes(kernel)
    for members in passes:
        published = []
        for i in members:
            value = printer.value(kernel.reductions[i].value)
            body += printer.take()
            body += _reduce_block(i, kernel.reductions[i].kind, value, kernel.rlen)
            published.append(i)
            if i in online:  # the sum over exp(E - S(this chunk's max))
                j = online[i][0]
                body += _local_sum(kernel, i, j, printer, syntax)
                published.append(j)
        body += _exchange(kernel, published, width)
        for i in (i for i in members if i in online):
            body += _rescaled_sum(i, *online[i], syntax)
    rows = Printer(TritonSyntax(gpu), dict(names), prefix="w")
    for store in kernel.stores:
        if store.space == "row":  # the row's value: one program of the row stores it
            value = rows.value(store.value)
            body += rows.take()
            body.append(f"tl.store({store.arg} + k, {value}, mask=kmask & (chunk == 0))")
        else:
            value = printer.value(store.value)
            mask = "smask" if aligned else "mask"
            body += printer.take() + [f"tl.store({store.arg} + idx, {value}, mask={mask})"]
    if aligned:
        edge = Printer(TritonSyntax(gpu), dict(names), prefix="e")
        full = [s for s in kernel.stores if s.space == "full"]
        body += aligned_rows.edge_stores(kernel, edge, full, _wide(kernel))
    args = [*kernel.inputs, *kernel.outputs, "partials"]
    constexprs = ["BLOCK_R: tl.constexpr", "CHUNKS: tl.constexpr"]
    return "\n".join([
        "@triton.jit",
        f"def {kernel.name}({', '.join([*args, *constexprs])}):",
        f"    for w in range(tl.program_id(0), {kernel.rows} * CHUNKS, tl.num_programs(0)):",
        *_indent(body, 2),
    ])  # fmt: skip


def _local_sum(kernel: FusedKernel, i: int, j: int, printer: Printer, syntax) -> list[str]:
    """r_j over this chunk against its own max r_i. A printer of its own (sharing the loads)
    keeps exp(E - S(local max)) out of the shared printer, whose later uses mean the row's."""
    local = Printer(syntax, {**printer.names, f"r{i}": f"m{i}"}, prefix=f"o{i}_")
    local._done = {e: name for e, name in printer._done.items()
                   if all(n.op != "var" or n.attr != f"r{i}" for n in walk(e))}  # fmt: skip
    value = local.value(kernel.reductions[j].value)
    return [f"m{i} = r{i}", *local.take(), *_reduce_block(j, "sum", value, kernel.rlen)]


def _rescaled_sum(i: int, j: int, shift, syntax) -> list[str]:
    """The row's r_j from the chunks' (max, sum) pairs: each sum times exp(S(its max) - S(the
    row's max)); a zero sum (no elements, or all -inf) stays zero."""
    part = Printer(syntax, {f"r{i}": f"p{i}"}, prefix=f"q{i}_")
    whole = Printer(syntax, {f"r{i}": f"r{i}"}, prefix=f"g{i}_")
    s_part, s_whole = part.value(shift), whole.value(shift)
    scaled = f"tl.where(p{j} == 0.0, 0.0, p{j} * tl.exp({s_part} - {s_whole}))"
    return [*part.take(), *whole.take(), f"r{j} = tl.sum({scaled}, axis=0)"]


def _exchange(kernel: FusedKernel, members: list[int], width: int):
    """Publish this chunk's partials of one pass, wait for the row's other chunks, combine.

    A slot is one 64-bit word, the partial's bits above a flag bit, written by one relaxed atomic
    exchange (so it never tears) into a buffer zeroed for the call. The wait polls the row's
    slots by volatile loads (past the SM's incoherent L1) until every flag is set: the partials
    arrive with their flags, so no fence orders them, and no store of the last item is waited
    for."""
    n = len(kernel.reductions)
    lines = [
        f"tl.atomic_xchg(partials + row * {n * width} + {j * width} + chunk, "
        f"(tl.sum(r{j}).to(tl.int32, bitcast=True).to(tl.int64) << 32) + 1, sem='relaxed')"
        for j in members
    ]
    lines += [f"cols = tl.arange(0, {width})", f"slots = partials + row * {n * width} + cols"]
    loads = {j: f"w{j} = tl.load(slots + {j * width}, mask=cols < CHUNKS, other=1, volatile=True)"
             for j in members}  # fmt: skip
    flags = " & ".join(f"w{j}" for j in members)
    # one loop polls every member: a loop a member kept 14 more registers live (sm_90, softmax)
    lines += [*loads.values(), f"while tl.min({flags} & 1, axis=0) == 0:"]
    lines += [f"    {load}" for load in loads.values()]
    for j in members:
        kind = kernel.reductions[j].kind
        lines += [
            f"p{j} = (w{j} >> 32).to(tl.int32).to(tl.float32, bitcast=True)",
            f"p{j} = tl.where(cols < CHUNKS, p{j}, {INIT[kind]})",
            f"r{j} = {COMBINE_ALL[kind].format(a=f'p{j}')}",
        ]
    return lines


def launch(kernel: FusedKernel, args: list[str], config: dict) -> list[str]:
    """Lines of forward: the rows' partial slots (zero, no flag set, every call), then the
    launch on as many programs as stay resident."""
    block_r = config["BLOCK_R"]
    count = chunks(kernel, block_r)
    width = _width(count)
    device = f"{args[0]}.device"
    partials = f"{kernel.name}_partials"
    options = f"dict(BLOCK_R={block_r}, CHUNKS={count}, num_warps={config['num_warps']})"
    return [
        f"{partials} = torch.zeros(({kernel.rows * len(kernel.reductions) * width},), "
        f"device={device}, dtype=torch.int64)",
        f"_launch_resident({kernel.name}, {kernel.rows * count}, {count}, "
        f"({', '.join(args)}, {partials}), {options})",
    ]


HELPERS = {
    "_launch_resident": '''_RESIDENT_PROGRAMS = {}


def _launch_resident(kernel, items, chunks, args, options):
    """Launch on as many programs as the GPU holds at once (a multiple of chunks, at most
    items): a row's chunks wait for each other, so all of them must be running."""
    device = args[0].device
    if (kernel, device) not in _RESIDENT_PROGRAMS:
        held = 1  # the Triton interpreter runs one program at a time
        if device.type == "cuda":
            compiled = kernel.warmup(*args, grid=(1,), **options)
            compiled._init_handles()
            props = torch.cuda.get_device_properties(device)
            warps = compiled.metadata.num_warps
            regs_per_warp = -(-compiled.n_regs * 32 // 256) * 256
            per_sm = min(
                props.max_threads_per_multi_processor // (32 * warps),
                props.regs_per_multiprocessor // (regs_per_warp * warps),
                props.shared_memory_per_multiprocessor // (compiled.metadata.shared + 1024),
                32,
            )
            held = props.multi_processor_count * per_sm
        if held < chunks:
            raise RuntimeError(
                f"a row needs {chunks} programs running at once; this device holds {held}: "
                "use a larger BLOCK_R"
            )
        _RESIDENT_PROGRAMS[(kernel, device)] = min(items, held // chunks * chunks)
    kernel[(_RESIDENT_PROGRAMS[(kernel, device)],)](*args, **options)
''',
}

"""Triton source, configs and launch of an attention kernel (tools/builtin/attention.py).

Flash (head dims up to FLASH_MAX_D): a program holds BLOCK_M query rows and their output, and
walks the keys BLOCK_N at a time: s = scale * q k^T, the running row max m and sum l, and
acc = acc * exp(m_old - m) + exp(s - m) @ v. Scores never reach memory.

Two passes (larger head dims, whose output rows do not fit one program): the first writes the
scaled scores and each row's log-sum-exp, the second multiplies exp(s - lse) by v, one
BLOCK_DV slice of the head dim per program. Rows with every key masked give 0, as PyTorch's
_safe_softmax does.
"""

from __future__ import annotations

import math
from typing import Any

from kernelgraph.tools.builtin.attention import AttentionKernel, Operand3
from kernelgraph.tools.builtin.triton_emit import INT32_LIMIT, _indent

NEG_INF = '-float("inf")'
LOG2E = 1.4426950408889634


def _pow2(n: int, least: int = 16) -> int:
    return max(least, 1 << max(int(n) - 1, 0).bit_length())


def _wide(kernel: AttentionKernel) -> bool:
    spans = [kernel.batch * kernel.queries * max(kernel.d, kernel.dv, kernel.keys),
             kernel.batch * kernel.keys * max(kernel.d, kernel.dv)]  # fmt: skip
    return max(spans) > INT32_LIMIT


# ------------------------------------------------------------ configs


def default(kernel: AttentionKernel, gpu: bool, dots: tuple[str, ...]) -> dict[str, Any]:
    dot = {"DOT": dots[0]} if dots else {}
    if not gpu:  # the interpreter: few, large programs
        return {"BLOCK_M": _pow2(min(kernel.queries, 128)), "BLOCK_N": _pow2(min(kernel.keys, 128)),
                **({"BLOCK_K": _pow2(min(kernel.d, 128)), "BLOCK_DV": _pow2(min(kernel.dv, 128))}
                   if kernel.two_pass else {}),
                **dot, "num_warps": 1, "num_stages": 1}  # fmt: skip
    if kernel.two_pass:  # H200 sweep, 32x32x512x1024 (KernelBench's): BLOCK_N 128 overflows
        return {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32 if dots else 64, "BLOCK_DV": 128,
                **dot, "num_warps": 8, "num_stages": 3}  # fmt: skip
    # H200 sweep over head dims 64 and 128 (fp32 and fp16, causal or not)
    if dots:  # fp32 products (tf32x3): registers run short before tiles do
        if _pow2(max(kernel.d, kernel.dv)) <= 64:
            return {"BLOCK_M": 64, "BLOCK_N": 64, **dot, "num_warps": 4, "num_stages": 2}
        return {"BLOCK_M": 128, "BLOCK_N": 32, **dot, "num_warps": 8, "num_stages": 2}
    warps = 4 if _pow2(max(kernel.d, kernel.dv)) <= 64 else 8
    return {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": warps, "num_stages": 3}


def tunables(kernel: AttentionKernel, gpu: bool, dots: tuple[str, ...]) -> dict[str, list[Any]]:
    if not gpu:
        return {}
    dot = {"DOT": list(dots)} if dots else {}
    found = {**dot, "BLOCK_M": [64, 128], "BLOCK_N": [32, 64, 128], "num_warps": [4, 8],
             "num_stages": [2, 3, 4]}  # fmt: skip
    if kernel.two_pass:
        found |= {"BLOCK_K": [32, 64], "BLOCK_DV": [64, 128, 256]}
    return found


# ------------------------------------------------------------ source


def attention_source(kernel: AttentionKernel, gpu: bool, input_precision: str | None) -> str:
    precision = f", input_precision={input_precision}" if input_precision else ""
    extra = ["DOT"] if input_precision == "DOT" else []
    if kernel.two_pass:
        return "\n\n\n".join([_scores(kernel, precision, extra), _values(kernel, precision, extra)])
    return _flash(kernel, precision, extra)


def _header(name: str, args: list[str], constexprs: list[str]) -> str:
    return f"@triton.jit\ndef {name}({', '.join([*args, *(c + ': tl.constexpr' for c in constexprs)])}):"


def _start(kernel: AttentionKernel, split_dv: bool = False) -> list[str]:
    """Program ids on grid axis 0 only (axis 1 stops at 65535: batch x heads can pass it),
    batch-major, so that neighbouring programs share k and v (and their scores) in L2."""
    blocks = f"tl.cdiv({kernel.queries}, BLOCK_M)"
    if split_dv:
        blocks += f" * tl.cdiv({kernel.dv}, BLOCK_DV)"
    lines = ["pid = tl.program_id(0)", f"blocks = {blocks}"]
    lines.append("bh = (pid // blocks).to(tl.int64)" if _wide(kernel) else "bh = pid // blocks")
    if split_dv:
        lines += [f"num_dv = tl.cdiv({kernel.dv}, BLOCK_DV)", "pid_m = (pid % blocks) // num_dv",
                  "pid_v = pid % num_dv"]  # fmt: skip
    else:
        lines.append("pid_m = pid % blocks")
    return [
        *lines,
        "rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        f"row_ok = rm < {kernel.queries}",
    ]


def _key_loops(kernel: AttentionKernel, body) -> list[str]:
    """The loop over key blocks around body(causal): with a causal mask, blocks wholly left of
    the block's first query row need no mask, those crossing the diagonal do, and those
    right of its last row are skipped."""
    if not kernel.causal:
        return [f"for start in range(0, {kernel.keys}, BLOCK_N):", *_indent(body(False))]
    return [
        f"unmasked_end = tl.minimum(pid_m * BLOCK_M, {kernel.keys}) // BLOCK_N * BLOCK_N",
        f"key_end = tl.minimum((pid_m + 1) * BLOCK_M, {kernel.keys})",
        "for start in range(0, unmasked_end, BLOCK_N):",
        *_indent(body(False)),
        "for start in range(unmasked_end, key_end, BLOCK_N):",
        *_indent(body(True)),
    ]


def _valid(kernel: AttentionKernel, causal: bool) -> str:
    diagonal = " & (rn[None, :] <= rm[:, None])" if causal else ""
    return f"valid = (rn[None, :] < {kernel.keys}){diagonal}"


def _logits(kernel: AttentionKernel, causal: bool) -> list[str]:
    """s (the dot product) scaled to base-2 logits (exp2 is the hardware's exponential),
    masked; `valid` says which entries are keys of the row."""
    lines = [f"s = s * {kernel.scale * LOG2E!r}", _valid(kernel, causal)]
    if kernel.mask:
        tile = (f"tl.load({_pointer(kernel.mask, 'rm[:, None]', 'rn[None, :]')}, "
                "mask=row_ok[:, None] & valid, other=0)")  # fmt: skip
        if kernel.mask_fill is None:  # added to the logits
            lines.append(f"s += {tile}.to(tl.float32) * {LOG2E!r}")
        else:  # masked_fill: where the mask is set, the logit is the fill value
            fill = NEG_INF if kernel.mask_fill == -math.inf else repr(kernel.mask_fill * LOG2E)
            lines.append(f"s = tl.where({tile} != 0, {fill}, s)")
    return [*lines, f"s = tl.where(valid, s, {NEG_INF})"]


def _pointer(operand: Operand3, rows: str, cols: str) -> str:
    """The addresses of program bh's [rows, cols] elements of `operand`."""
    return (f"{operand.arg} + {_batch_offset(operand.batch)} + {rows} * {operand.row} + "
            f"{cols} * {operand.col}")  # fmt: skip


def _batch_offset(dims: list[tuple[int, int]]) -> str:
    """The offset of program bh's [.., l, s] slice in a tensor broadcast over batch dims."""
    parts, inner = [], 1
    for size, stride in reversed(dims):
        if stride and size > 1:
            parts.append(f"((bh // {inner}) % {size}) * {stride}")
        inner *= size
    return " + ".join(parts) or "0"


def _online(with_acc: bool) -> list[str]:
    """One key block's update of the running max m_i and sum l_i (and rescale acc)."""
    lines = [
        "m_new = tl.maximum(m_i, tl.max(s, 1))",
        f"m_use = tl.where(m_new == {NEG_INF}, 0.0, m_new)  # a row with no key yet",
        "p = tl.exp2(s - m_use[:, None])",
        "alpha = tl.exp2(m_i - m_use)",
        "l_i = l_i * alpha + tl.sum(p, 1)",
        "m_i = m_new",
    ]
    return [*lines, "acc = acc * alpha[:, None]"] if with_acc else lines


def _row_state() -> list[str]:
    return [
        f"m_i = tl.full((BLOCK_M,), {NEG_INF}, tl.float32)",
        "l_i = tl.zeros((BLOCK_M,), tl.float32)",
    ]


def _flash(kernel: AttentionKernel, precision: str, extra: list[str]) -> str:
    head, head_v = _pow2(kernel.d), _pow2(kernel.dv)
    body = [
        *_start(kernel),
        f"rd = tl.arange(0, {head})",
        f"rv = tl.arange(0, {head_v})",
        f"q_tile = tl.load({_pointer(kernel.q, 'rm[:, None]', 'rd[None, :]')}, "
        f"mask=row_ok[:, None] & (rd[None, :] < {kernel.d}), other=0.0)",
        *_row_state(),
        f"acc = tl.zeros((BLOCK_M, {head_v}), tl.float32)",
        *_key_loops(
            kernel,
            lambda causal: [
                "rn = start + tl.arange(0, BLOCK_N)",
                f"key_ok = rn < {kernel.keys}",
                f"kt_tile = tl.load({_pointer(kernel.kt, 'rd[:, None]', 'rn[None, :]')}, "
                f"mask=(rd[:, None] < {kernel.d}) & key_ok[None, :], other=0.0)",
                f"s = tl.dot(q_tile, kt_tile{precision})",
                *_logits(kernel, causal),
                *_online(with_acc=True),
                f"v_tile = tl.load({_pointer(kernel.v, 'rn[:, None]', 'rv[None, :]')}, "
                f"mask=key_ok[:, None] & (rv[None, :] < {kernel.dv}), other=0.0)",
                f"acc = tl.dot(p.to(v_tile.dtype), v_tile, acc{precision})",
            ],
        ),  # fmt: skip
        # no key in the row: 0 as _safe_softmax gives, or softmax's NaN (0 / 0)
        "acc = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]"
        if kernel.safe
        else "acc = acc / l_i[:, None]",
        f"tl.store(out + bh * {kernel.queries * kernel.dv} + rm[:, None] * {kernel.dv} + rv[None, :], "
        f"acc, mask=row_ok[:, None] & (rv[None, :] < {kernel.dv}))",
    ]
    args = [*kernel.inputs, *kernel.outputs]
    return "\n".join([_header(kernel.name, args, ["BLOCK_M", "BLOCK_N", *extra]), *_indent(body)])


def _scores(kernel: AttentionKernel, precision: str, extra: list[str]) -> str:
    body = [
        *_start(kernel),
        *_row_state(),
        *_key_loops(
            kernel,
            lambda causal: [
                "rn = start + tl.arange(0, BLOCK_N)",
                "s = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)",
                f"for d0 in range(0, {kernel.d}, BLOCK_K):",
                *_indent(
                    [
                        "rk = d0 + tl.arange(0, BLOCK_K)",
                        f"k_ok = rk < {kernel.d}",
                        f"q_tile = tl.load({_pointer(kernel.q, 'rm[:, None]', 'rk[None, :]')}, "
                        "mask=row_ok[:, None] & k_ok[None, :], other=0.0)",
                        f"kt_tile = tl.load({_pointer(kernel.kt, 'rk[:, None]', 'rn[None, :]')}, "
                        f"mask=k_ok[:, None] & (rn[None, :] < {kernel.keys}), other=0.0)",
                        f"s = tl.dot(q_tile, kt_tile, s{precision})",
                    ]
                ),
                *_logits(kernel, causal),
                f"tl.store(scores + bh * {kernel.queries * kernel.keys} + rm[:, None] * {kernel.keys} + "
                f"rn[None, :], s, mask=row_ok[:, None] & (rn[None, :] < {kernel.keys}))",
                *_online(with_acc=False),
            ],
        ),  # fmt: skip
        f"lse = tl.where(l_i > 0, m_i + tl.log2(l_i), {NEG_INF})  # base 2, as the logits",
        f"tl.store(lse_rows + bh * {kernel.queries} + rm, lse, mask=row_ok)",
    ]
    args = ["q", "kt", *(["mask"] if kernel.mask else []), "scores", "lse_rows"]
    constexprs = ["BLOCK_M", "BLOCK_N", "BLOCK_K", *extra]
    return "\n".join([_header(f"{kernel.name}_scores", args, constexprs), *_indent(body)])


def _values(kernel: AttentionKernel, precision: str, extra: list[str]) -> str:
    body = [
        *_start(kernel, split_dv=True),
        "rv = pid_v * BLOCK_DV + tl.arange(0, BLOCK_DV)",
        f"lse = tl.load(lse_rows + bh * {kernel.queries} + rm, mask=row_ok, other=0.0)",
        *(
            [f"lse = tl.where(lse == {NEG_INF}, 0.0, lse)  # every key masked: weights 0"]
            if kernel.safe
            else []
        ),  # else exp2(-inf + inf): softmax's NaN
        "acc = tl.zeros((BLOCK_M, BLOCK_DV), tl.float32)",
        *_key_loops(
            kernel,
            lambda causal: [
                "rn = start + tl.arange(0, BLOCK_N)",
                _valid(kernel, causal),
                f"s = tl.load(scores + bh * {kernel.queries * kernel.keys} + rm[:, None] * {kernel.keys} + "
                f"rn[None, :], mask=row_ok[:, None] & valid, other={NEG_INF})",
                "p = tl.exp2(s - lse[:, None])",
                f"v_tile = tl.load({_pointer(kernel.v, 'rn[:, None]', 'rv[None, :]')}, "
                f"mask=(rn[:, None] < {kernel.keys}) & (rv[None, :] < {kernel.dv}), other=0.0)",
                f"acc = tl.dot(p.to(v_tile.dtype), v_tile, acc{precision})",
            ],
        ),  # fmt: skip
        f"tl.store(out + bh * {kernel.queries * kernel.dv} + rm[:, None] * {kernel.dv} + rv[None, :], "
        f"acc, mask=row_ok[:, None] & (rv[None, :] < {kernel.dv}))",
    ]
    constexprs = ["BLOCK_M", "BLOCK_N", "BLOCK_DV", *extra]
    return "\n".join(
        [
            _header(f"{kernel.name}_values", ["scores", "lse_rows", "v", "out"], constexprs),
            *_indent(body),
        ]  # fmt: skip
    )


# ------------------------------------------------------------ launch


def _options(values: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in values.items())


def launch(kernel: AttentionKernel, args: list[str], config: dict[str, Any]) -> list[str]:
    rows = f"triton.cdiv({kernel.queries}, {config['BLOCK_M']})"
    common = {k: config[k] for k in ("BLOCK_M", "BLOCK_N", "DOT", "num_warps", "num_stages")
              if k in config}  # fmt: skip
    if not kernel.two_pass:
        grid = f"({rows} * {kernel.batch},)"
        return [f"{kernel.name}[{grid}]({', '.join(args)}, {_options(common)})"]
    q, kt, v, out = args[0], args[1], args[2], args[-1]
    mask = [args[3]] if kernel.mask else []
    scores, lse = f"{kernel.name}_scores_buf", f"{kernel.name}_lse"
    first = _options({**common, "BLOCK_K": config["BLOCK_K"]})
    second = _options({**common, "BLOCK_DV": config["BLOCK_DV"]})
    dv_blocks = f"triton.cdiv({kernel.dv}, {config['BLOCK_DV']})"
    return [
        f"{scores} = torch.empty(({kernel.batch}, {kernel.queries}, {kernel.keys}), device={out}.device, "
        "dtype=torch.float32)",
        f"{lse} = torch.empty(({kernel.batch}, {kernel.queries}), device={out}.device, "
        "dtype=torch.float32)",
        f"{kernel.name}_scores[({rows} * {kernel.batch},)]({', '.join([q, kt, *mask, scores, lse])}, "
        f"{first})",
        f"{kernel.name}_values[({rows} * {dv_blocks} * {kernel.batch},)]({scores}, {lse}, {v}, "
        f"{out}, {second})",
    ]

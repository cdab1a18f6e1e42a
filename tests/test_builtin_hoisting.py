"""Row-constant factors taken out of row sums (tools/builtin/hoisting.py), and the one-pass
rows that loop on the GPU because of it."""

from __future__ import annotations

import pytest
from builtin_helpers import builtin_generator, task_file, verify_forward

from kernelgraph.tools.builtin.expr import Expr, Load, call, const, var
from kernelgraph.tools.builtin.hoisting import hoist_factors, row_constant
from kernelgraph.tools.builtin.kernels import FusedKernel

COSINE = "torch.mean(1 - F.cosine_similarity(x, y, dim=1))"
PAIR = "torch.rand(6, 40), torch.rand(6, 40)"


def _full(name: str) -> Expr:
    return Expr("load", attr=Load(name, var("idx"), "full"))


def _row(name: str) -> Expr:
    return Expr("load", attr=Load(name, var("k"), "row"))


def test_row_constants_are_row_loads_row_indices_and_earlier_reductions():
    assert row_constant(call("sqrt", var("r0")) * _row("w"))
    assert not row_constant(var("r0") * _full("x"))
    assert not row_constant(var("idx"))


def test_a_sum_of_normalised_products_becomes_a_product_sum_over_the_norms():
    x, y = _full("x"), _full("y")
    summed, times, over = hoist_factors("sum", (x / var("r0")) * (y / var("r1")) * _row("w"))
    assert summed == x * y
    assert times == [_row("w")] and over == [var("r0"), var("r1")]


@pytest.mark.parametrize(
    "kind, value",
    [("max", _full("x") / var("r0")),  # max(x / c) is not max(x) / c when c < 0
     ("sum", _full("x") / (var("r0") + _full("x"))),  # the divisor varies along the row
     ("sum", var("r0") * const(2.0))],  # nothing varies: nothing to take out
)  # fmt: skip
def test_nothing_is_taken_out_where_it_would_change_the_result(kind, value):
    assert hoist_factors(kind, value) == (value, [], [])


def _row_kernels(task, device="cpu"):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        generator = builtin_generator(task, "triton", Path(folder), device=device)
    kernels = [k for k in generator.program.kernels if isinstance(k, FusedKernel) and k.reductions]
    return generator, kernels


def test_cosine_similarity_reads_each_row_once(tmp_path):
    """The norms and the dot product are independent sums: one pass over the row."""
    _, kernels = _row_kernels(task_file(tmp_path, COSINE, PAIR))
    (cosine,) = [k for k in kernels if k.rlen == 40]
    assert [r.kind for r in cosine.reductions] == ["sum", "sum", "sum"]
    assert len(cosine.passes()) == 1


def test_one_pass_rows_too_large_to_hold_loop_on_the_gpu(tmp_path):
    """Two rows of 32768 would be held whole (64 fp32 of each a thread at 16 warps); read in
    one pass, a loop over blocks is as few bytes and leaves room for more programs."""
    wide = "torch.rand(300, 32768), torch.rand(300, 32768)"  # 300 rows: not split
    generator, kernels = _row_kernels(task_file(tmp_path, COSINE, wide), device="cuda")
    (cosine,) = [k for k in kernels if k.rlen == 32768]
    assert generator.backend.default(cosine)["BLOCK_R"] < cosine.rlen
    one_input = task_file(tmp_path, "x.sum(dim=1)", "torch.rand(300, 32768)")
    generator, (total,) = _row_kernels(one_input, device="cuda")
    assert generator.backend.default(total)["BLOCK_R"] == 32768  # one load a step: held


@pytest.mark.parametrize("dsl", ["triton", "cpp"])
def test_cosine_similarity_loss_verifies(tmp_path, dsl):
    verify_forward(tmp_path, dsl, COSINE, PAIR)


def test_a_norm_after_a_normalised_sum_verifies(tmp_path):
    """A sum of x / ||x|| (a factor taken out) whose result a second pass uses per element."""
    forward = "x / x.norm(dim=1, keepdim=True) - (x / x.norm(dim=1, keepdim=True)).sum(1, True)"
    verify_forward(tmp_path, "triton", forward, "torch.randn(5, 33)")

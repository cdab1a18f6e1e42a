"""A mean and a variance in one read of each long row (tools/builtin/shifted.py): the GPU's
row kernels and split reductions, forced on small tasks and verified under the Triton
interpreter by the real harness, including rows whose mean dwarfs their spread."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from builtin_helpers import builtin_generator, task_file

from kernelgraph.tools.builtin.expr import Expr, Load, call, const, var, walk
from kernelgraph.tools.builtin.kernels import FusedKernel, Reduction, Store
from kernelgraph.tools.builtin.shifted import shift_variances, variance_pairs
from kernelgraph.tools.builtin.triton_backend import TritonBackend
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate

NORMS = {
    "instance_norm": ("F.instance_norm(x)", "torch.randn(2, 3, 9, 11)", ""),
    "layer_norm_affine": (
        "self.ln(x)",
        "torch.randn(3, 4, 5, 6)",
        "self.ln = nn.LayerNorm((4, 5, 6))",
    ),
    "group_norm": ("self.gn(x) * 2", "torch.randn(2, 6, 7, 5)", "self.gn = nn.GroupNorm(3, 6)"),
    "batch_norm_training": (
        "self.bn(x)",
        "torch.randn(4, 3, 6, 5) * 2 + 1",
        "self.bn = nn.BatchNorm2d(3, momentum=0.2)",
    ),
    "unbiased_var": ("torch.var(x, dim=-1, keepdim=True) + x", "torch.randn(5, 130)", ""),
    # a mean 400 times the spread: a sum of squares not shifted by a value of the row loses
    # the variance to cancellation (larger means make torch's own fp32 answer inexact)
    "layer_norm_of_large_mean": (
        "F.layer_norm(x, (300,))",
        "torch.randn(6, 300) + 400.0",
        "",
    ),
}


def _looped(monkeypatch, split: bool) -> None:
    """The GPU's choices on this CPU: rows read in a loop of 8-wide blocks, split or not."""
    monkeypatch.setattr(TritonBackend, "loops_rows", lambda self, kernel: bool(kernel.reductions))
    monkeypatch.setattr(TritonBackend, "split_rows", lambda self, kernel: split)


def _small_blocks(generator) -> dict:
    config = generator.default_config()
    for params in config.values():
        if "BLOCK_R" in params:
            params["BLOCK_R"] = 8
        if "BLOCK_K" in params and "BLOCK_M" not in params:
            params["BLOCK_K"] = 1
    return config


def _verify(task: Path, code: str, tmp_path: Path):
    kernel = tmp_path / "kernel.py"
    kernel.write_text(code)
    config = EvalConfig(dsl="triton", device="cpu", seeds=2, profile=False, policy="strict")
    return evaluate(task, kernel, config, cache=EvalCache(tmp_path / "cache"))


@pytest.mark.parametrize("split", [False, True], ids=["row_loop", "split_rows"])
@pytest.mark.parametrize("name", list(NORMS))
def test_statistics_in_one_read_of_the_row_verify(tmp_path, monkeypatch, name, split):
    _looped(monkeypatch, split)
    forward, inputs, params = NORMS[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    generator = builtin_generator(task, "triton", tmp_path)
    code = generator.code(_small_blocks(generator))
    stats = [k for k in generator.program.kernels if getattr(k, "reductions", None)]
    assert stats, "no reduction kernel"
    if split:  # one partial kernel reads the row for both sums
        assert sum("_part" in k.name for k in stats) == 1
    else:  # one loop over each row for the statistics (and one to write, if it writes rows)
        assert all(len(k.passes()) == 1 for k in stats)
        writes = any(s.space == "full" for s in stats[0].stores)
        source = code.split(f"def {stats[0].name}(")[1].split("@triton.jit")[0]
        assert len(re.findall(r"for (start|back) in range", source)) == 1 + writes
    verdict = _verify(task, code, tmp_path)
    assert verdict.passed, verdict.message


CPP_NORMS = {  # rows longer than the C++ sweeps' row cache (cpp_rows.MAX_CACHED_ROW)
    "instance_norm": ("F.instance_norm(x)", "torch.randn(2, 3, 96, 100)"),
    "layer_norm_of_large_mean": ("F.layer_norm(x, (12000,))", "torch.randn(3, 12000) + 400.0"),
    "var_and_mean": ("torch.var_mean(x, dim=1)", "torch.randn(3, 9000) * 5 - 2"),
}


@pytest.mark.parametrize("name", list(CPP_NORMS))
def test_cpp_statistics_of_long_rows_in_one_sweep_verify(tmp_path, name):
    forward, inputs = CPP_NORMS[name]
    task = task_file(tmp_path, forward, inputs)
    generator = builtin_generator(task, "cpp", tmp_path)
    stats = [k for k in generator.program.kernels if getattr(k, "reductions", None)]
    assert stats and all(len(k.passes()) == 1 for k in stats)
    kernel = tmp_path / "kernel.py"
    kernel.write_text(generator.code())
    config = EvalConfig(dsl="cpp", device="cpu", seeds=2, profile=False, policy="strict")
    verdict = evaluate(task, kernel, config, cache=EvalCache(tmp_path / "cache"))
    assert verdict.passed, verdict.message


def _row_kernel(*reductions: Reduction, stores=()) -> FusedKernel:
    return FusedKernel("k0", 4, 100, 1, ["in0"], ["out0"], list(reductions), list(stores), "norm")


def _x() -> Expr:
    return Expr("load", attr=Load("in0", var("idx"), "full"))


def test_a_variance_over_its_mean_becomes_two_independent_sums():
    x = _x()
    mean = call("div", var("r0"), const(100.0))
    deviation = call("sub", x, mean)
    kernel = _row_kernel(
        Reduction("sum", x),
        Reduction("sum", call("mul", deviation, deviation)),
        stores=[
            Store("out0", mean, "row"),
            Store("out1", call("div", var("r1"), const(100.0)), "row"),
        ],
    )
    assert variance_pairs(kernel) == {0: (1, mean)}
    assert len(kernel.passes()) == 2
    shifted = shift_variances(kernel)
    assert len(shifted.passes()) == 1
    used = [{n.attr for n in walk(s.value) if n.op == "var"} for s in shifted.stores]
    assert used == [{"r0", "k"}, {"r0", "r1"}]  # mean = D/N + K; variance from D and Q alone
    first = [ld for n in walk(shifted.stores[0].value) if n.op == "load" for ld in [n.attr]]
    assert [(ld.tensor, ld.space) for ld in first] == [("in0", "row")]


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(lambda x, s: call("mul", call("sub", x, s), call("sub", x, s)), id="same"),
        pytest.param(lambda x, s: call("pow", call("sub", x, s), const(2.0)), id="pow"),
    ],
)
def test_squares_written_as_a_product_or_a_power_pair_up(second):
    x, mean = _x(), call("div", var("r0"), const(100.0))
    kernel = _row_kernel(Reduction("sum", x), Reduction("sum", second(x, mean)))
    assert set(variance_pairs(kernel)) == {0}


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(lambda x: call("mul", call("sub", x, var("r0")), x), id="not_a_square"),
        pytest.param(
            lambda x: call("mul", call("sub", x, var("k")), call("sub", x, var("k"))),
            id="shift_not_from_the_sum",
        ),  # fmt: skip
        pytest.param(
            lambda x: call(
                "mul",
                call("sub", call("exp", x), var("r0")),
                call("sub", call("exp", x), var("r0")),
            ),
            id="another_value",
        ),  # fmt: skip
    ],
)
def test_other_second_sums_are_left_alone(second):
    x = _x()
    kernel = _row_kernel(Reduction("sum", x), Reduction("sum", second(x)))
    assert variance_pairs(kernel) == {}
    assert shift_variances(kernel) is kernel

"""ATen op policy: names as the runtime recorder sees them, and ops recorded from real programs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from kernelgraph.tools.harness.op_policy import classify, method_kind, normalize, violations


@pytest.mark.parametrize(
    "op, kind",
    [
        ("aten.mm.default", "heavy"),
        ("aten.bmm.out", "heavy"),
        ("aten.addmm.default", "heavy"),
        ("aten.baddbmm.default", "heavy"),
        ("aten.linear.default", "heavy"),
        ("aten.convolution.default", "heavy"),
        ("aten._convolution.default", "heavy"),
        ("aten.cudnn_convolution.default", "heavy"),
        ("aten.conv_transpose2d.input", "heavy"),
        ("aten.mkldnn_convolution.default", "heavy"),
        ("aten._conv_depthwise2d.default", "heavy"),
        ("aten.slow_conv3d_forward.default", "heavy"),
        ("aten._scaled_dot_product_flash_attention.default", "heavy"),
        ("aten._scaled_dot_product_efficient_attention.default", "heavy"),
        ("aten.add.Tensor", "compute"),
        ("aten.relu.default", "compute"),
        ("aten._softmax.default", "compute"),
        ("aten.sum.dim_IntList", "compute"),
        ("aten.cat.default", "compute"),
        ("aten.einsum.default", "compute"),
        ("aten.where.self", "compute"),
        ("aten._cudnn_rnn.default", "compute"),
        ("aten._convert_indices_from_coo_to_csr.default", "compute"),  # "_conv" is not conv
        ("aten.empty.memory_format", "free"),
        ("aten.empty_strided.default", "free"),
        ("aten.new_empty.default", "free"),
        ("aten.zeros.default", "free"),
        ("aten._to_copy.default", "free"),
        ("aten.copy_.default", "free"),
        ("aten.clone.default", "free"),
        ("aten.view.default", "free"),
        ("aten._unsafe_view.default", "free"),
        ("aten.t.default", "free"),
        ("aten.as_strided.default", "free"),
        ("aten.permute.default", "free"),
        ("aten.fill_.Scalar", "free"),
        ("aten.zero_.default", "free"),
        ("aten.lift_fresh.default", "free"),
        ("aten.detach.default", "free"),
        ("aten.alias.default", "free"),
        ("aten._local_scalar_dense.default", "free"),
        ("aten.set_.source_Storage_storage_offset", "free"),
        ("aten.normal_.default", "free"),
        ("aten.uniform_.default", "free"),
        ("aten::mm.out", "heavy"),
        ("mm", "heavy"),
        ("relu", "compute"),
        ("prims.add.default", "compute"),
        ("mylib.custom_gemm.default", "compute"),
        ("profiler._record_function_enter_new.default", "free"),
    ],
)
def test_classify(op: str, kind: str) -> None:
    assert classify(op) == kind


def test_normalize() -> None:
    assert normalize("aten.mm.default") == "mm"
    assert normalize("aten::add.Tensor") == "add"
    assert normalize(torch.ops.aten.mm.default) == "mm"
    assert normalize("prims.add.default") == "prims.add"
    assert classify(torch.ops.aten.relu.default) == "compute"


def test_method_kind() -> None:
    assert method_kind("matmul") == "heavy" and method_kind("__matmul__") == "heavy"
    assert method_kind("sum") == "compute" and method_kind("view") is None
    assert method_kind("append") is None  # not a tensor compute method


def test_violations_by_policy() -> None:
    ops = ["aten.empty.memory_format", "aten.mm.default", "aten.add.Tensor", "aten.mm.default"]
    assert violations(ops, "strict") == ["aten.mm.default", "aten.add.Tensor"]
    assert violations(ops, "hybrid") == ["aten.add.Tensor"]
    assert violations(["aten.view.default", "aten.copy_.default"], "strict") == []
    assert violations({}.keys(), "strict") == []
    with pytest.raises(ValueError):
        violations(ops, "lenient")


class _Recorder(TorchDispatchMode):
    """What tools.harness.guards.OpRecorder records: str(func) of every ATen op."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _record(fn) -> list[str]:
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    with torch.no_grad(), _Recorder() as rec:
        fn(x, w)
    assert rec.ops, "nothing was recorded"
    return rec.ops


def _alloc_and_copy(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.float64)
    out.copy_(x)
    acc = torch.zeros(3).fill_(1.0)
    acc.zero_()
    y = x.t().contiguous().view(-1).to(torch.float16).clone()
    return out[:2], y.reshape(8, 4).permute(1, 0), acc, x.sum().item() * 0


PROGRAMS = [
    # (program, strict violations expected, hybrid violations expected)
    (lambda x, w: torch.relu(x), True, True),
    (lambda x, w: x.softmax(-1), True, True),
    (lambda x, w: x + 1, True, True),
    (lambda x, w: torch.matmul(x, w), True, False),
    (lambda x, w: x @ w, True, False),
    (lambda x, w: F.linear(x, w.t()), True, False),
    (lambda x, w: torch.bmm(x[None], w[None]), True, False),
    (lambda x, w: F.conv2d(x[None, None], w[None, None, :3, :3]), True, False),
    # 4-D: one fused attention op. (3-D inputs take the math path: mul, softmax, ... = compute.)
    (lambda x, w: F.scaled_dot_product_attention(*[x[None, None]] * 3), True, False),
    (lambda x, w: F.gelu(x @ w), True, True),
    (_alloc_and_copy, True, True),  # .sum() is compute; the rest is checked below
]


@pytest.mark.parametrize("program, strict, hybrid", PROGRAMS)
def test_recorded_programs(program, strict: bool, hybrid: bool) -> None:
    ops = _record(program)
    assert bool(violations(ops, "strict")) == strict, ops
    assert bool(violations(ops, "hybrid")) == hybrid, ops


def test_allocation_copy_and_views_are_free() -> None:
    ops = _record(lambda x, w: _alloc_and_copy(x, w)[:3])
    bad = violations(ops, "strict")
    assert bad == ["aten.sum.default"], (bad, ops)
    assert "aten.copy_.default" in ops and "aten._local_scalar_dense.default" in ops

"""A sum, mean or average pool over a GEMM's output columns folds into the GEMM's weights
(tools/builtin/linear_folds.py): KernelBench's level2/14, 18, 51 and 98 in small. Each folded
form is verified by the real harness (C++, and Triton under the interpreter); forms that are
not linear in the GEMM's output, or whose GEMM output is read elsewhere, stay as traced."""

from __future__ import annotations

import pytest
from builtin_helpers import builtin_generator, module_task

from kernelgraph.tools.builtin.linear_folds import fold_linear_reductions
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate

LINEAR = "self.fc = nn.Linear(32, 24)"
WEIGHT = "self.weight = nn.Parameter(torch.randn(24, 32))"
SHIFT = "self.shift = nn.Parameter(torch.randn(24))"
INPUT = "torch.rand(16, 32)"

# name -> (init, forward body, the note's reduce and window)
FOLDED = {
    "mean_then_residual": (  # level2/51
        f"{LINEAR}\n{SHIFT}",
        "res = x.clone().detach()\ny = self.fc(x) - self.shift\ny = torch.mean(y, dim=1, "
        "keepdim=True)\ny = torch.logsumexp(y, dim=1, keepdim=True)\n"
        "return F.gelu(y) + res",
        ("mean", 24),
    ),
    "average_pool_then_max": (  # level2/98
        LINEAR,
        "y = nn.functional.avg_pool1d(self.fc(x).unsqueeze(1), 4).squeeze(1)\n"
        "return torch.max(F.gelu(y) * 2.0, dim=1).values",
        ("mean", 4),
    ),
    "scaled_sum_without_bias": (  # level2/14
        WEIGHT,
        "y = torch.matmul(x, self.weight.T) / 2\nreturn torch.sum(y, dim=1, keepdim=True) * 1.5",
        ("sum", 24),
    ),
    "per_column_scale_and_shift": (
        f"{LINEAR}\n{SHIFT}",
        "y = 3.0 + (-self.fc(x) * self.shift.view(1, 24)) / 4\nreturn y.sum(dim=-1)",
        ("sum", 24),
    ),
    "one_number_a_column_without_bias": (
        f"{WEIGHT}\nself.offset = nn.Parameter(torch.randn(1))",
        "return ((x @ self.weight.t() + 0.5) * 2 - self.offset).sum(dim=1)",
        ("sum", 24),
    ),
    "number_shift_without_bias": (
        WEIGHT,
        "return (x @ self.weight.t() - 2.0).mean(-1, keepdim=True)",
        ("mean", 24),
    ),
    "row_major_weights_scaled_per_column": (
        f"self.w = nn.Parameter(torch.randn(32, 24))\n{SHIFT}",
        "return (x @ self.w * self.shift).mean(-1)",
        ("mean", 24),
    ),
    "mean_over_rows_of_a_view": (
        LINEAR,
        "return self.fc(x).view(4, 4, 24).mean(dim=2)",
        ("mean", 24),
    ),
}

NOT_FOLDED = {
    "nonlinear_between": (LINEAR, "return torch.relu(self.fc(x)).sum(dim=1)"),
    "gemm_output_read_twice": (LINEAR, "y = self.fc(x)\nreturn y.sum(dim=1, keepdim=True) + y"),
    "sum_over_the_rows": (LINEAR, "return self.fc(x).sum(dim=0)"),
    "overlapping_pool_windows": (
        LINEAR,
        "return nn.functional.avg_pool1d(self.fc(x).unsqueeze(1), 4, stride=2)",
    ),
    "reshape_that_splits_the_columns": (LINEAR, "return self.fc(x).view(48, 8).sum(-1)"),
    "product_of_two_columns": (LINEAR, "y = self.fc(x)\nreturn (y * y).sum(dim=1)"),
    "shift_that_varies_by_row": (LINEAR, "return (self.fc(x) + x[:, :24]).sum(dim=1)"),
}


def _task(tmp_path, init: str, body: str):
    return module_task(tmp_path, body, init, INPUT)


@pytest.mark.parametrize("dsl", ["cpp", "triton"])
@pytest.mark.parametrize("name", list(FOLDED))
def test_folded_reductions_verify(tmp_path, name, dsl):
    init, body, (reduce, window) = FOLDED[name]
    task = _task(tmp_path, init, body)
    generator = builtin_generator(task, dsl, tmp_path)
    code = generator.code()
    assert f"the {reduce} over the GEMM's 24 output columns (windows of {window})" in code
    gemms = [k for k in generator.program.kernels if k.kind == "gemm"]
    assert len(gemms) == 1, generator.summary()
    kernel = tmp_path / "kernel.py"
    kernel.write_text(code)
    settings = EvalConfig(dsl=dsl, device="cpu", seeds=2, profile=False, policy="strict")
    verdict = evaluate(task, kernel, settings, cache=EvalCache(tmp_path / "cache"))
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("name", list(NOT_FOLDED))
def test_reductions_that_are_not_linear_in_one_gemm_stay_as_traced(tmp_path, name):
    init, body = NOT_FOLDED[name]
    generator = builtin_generator(_task(tmp_path, init, body), "cpp", tmp_path)
    assert "folded into its weights" not in generator.code()
    analysis = generator.analysis
    assert fold_linear_reductions(analysis) == (analysis, [])


def test_a_fold_moves_later_labels_and_the_outputs(tmp_path):
    init, body, _ = FOLDED["mean_then_residual"]
    analysis = builtin_generator(_task(tmp_path, init, body), "cpp", tmp_path).analysis
    folded, notes = fold_linear_reductions(analysis)
    assert len(notes) == 1
    added = len(folded["ops"]) - len(analysis["ops"])
    assert added > 0
    old_out = int(analysis["outputs"][0]["ref"]["t"][3:])
    assert folded["outputs"][0]["ref"]["t"] == f"op:{old_out + added}"
    assert folded["ops"][old_out + added]["op"] == analysis["ops"][old_out]["op"]
    for i, op in enumerate(folded["ops"]):  # every op reads only ops before it
        assert all(int(r[3:]) < i for r in op["reads"] if r.startswith("op:")), op

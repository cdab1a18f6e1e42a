"""Dropout in training mode: the builtin writes it as the identity (no kernel can draw the
reference's mask), which verifies where the mask cannot reach the output (level2/83's clamp to
zero) and is rejected by the harness where it can. Verified by the real harness on the Triton
interpreter."""

from __future__ import annotations

import pytest
from builtin_helpers import module_task
from test_builtin import generate, verify

from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.harness.verdict import TaskError

INIT = "self.fc = nn.Linear(8, 16)\nself.drop = nn.Dropout(0.2)"

# The mask multiplies values that are zero, whatever it is.
MASK_UNSEEN = {
    "dropout_after_clamp_to_zero": (
        "y = torch.min(self.fc(x), torch.tensor(0.0))\n"
        "return self.drop(torch.clamp(y, min=0.0, max=1.0))"
    ),
    "feature_dropout": "y = -F.relu(self.fc(x).view(6, 4, 2, 2))\nreturn F.dropout2d(y * 0, 0.5)",
}


def task(tmp_path, body: str):
    return module_task(tmp_path, body, INIT, "torch.randn(6, 8)")


@pytest.mark.parametrize("name", list(MASK_UNSEEN))
def test_dropout_whose_mask_cannot_reach_the_output_verifies(tmp_path, name):
    path = task(tmp_path, MASK_UNSEEN[name])
    kernel = generate(path, tmp_path)
    code = kernel.read_text()
    forward = code.split("def forward")[-1]
    assert "drop" not in forward and "bernoulli" not in forward
    assert "# Note: dropout in training mode is written as its expectation" in code
    verdict = verify(path, kernel, tmp_path)
    assert verdict.passed, verdict.message


def test_dropout_fuses_into_the_kernel_before_it(tmp_path):
    """The mask, its scale and the allocation behind them are dead once the product is
    `x * 1.0`: one GEMM kernel with the clamp in its epilogue, nothing for the mask."""
    path = task(tmp_path, MASK_UNSEEN["dropout_after_clamp_to_zero"])
    code = generate(path, tmp_path).read_text()
    assert code.count("@triton.jit\ndef k") == 1


def test_dropout_whose_mask_reaches_the_output_is_a_task_error(tmp_path):
    """The builtin writes it, and the harness refuses the reference: two identical calls
    differ, so nothing can be checked against it."""
    path = task(tmp_path, "return torch.softmax(self.drop(self.fc(x)), dim=1)")
    kernel = generate(path, tmp_path)
    with pytest.raises(TaskError, match="different outputs for identical calls"):
        verify(path, kernel, tmp_path)


@pytest.mark.parametrize(
    "body, op",
    [
        ("return self.fc(x) + torch.rand_like(self.fc(x))", "aten.rand"),
        ("return F.alpha_dropout(self.fc(x), 0.2, training=True)", "aten.bernoulli"),
    ],
)
def test_other_random_ops_are_refused_by_name(tmp_path, body, op):
    with pytest.raises(Unsupported, match=op):
        generate(task(tmp_path, body), tmp_path)


def test_ops_that_feed_only_dead_ops_are_not_written(tmp_path):
    path = task(tmp_path, "unused = torch.exp(self.fc(x)) * 2\nreturn self.fc(x) + 1")
    kernel = generate(path, tmp_path)
    assert "exp(" not in kernel.read_text()
    verdict = verify(path, kernel, tmp_path)
    assert verdict.passed, verdict.message

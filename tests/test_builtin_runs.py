"""A stage that does not fit one kernel is split into runs of consecutive ops, each as long as
still fits (ProgramBuilder._group_in_runs), not op by op. torch's triplet margin loss traces as
one stage: two row norms, their epilogue, then a mean over the rows (another axis). A mean or
summed cross-entropy is the log-softmax and each row's loss in one kernel, then their total
(losses.split_nll_loss). Checked by the kernels the builtin writes and by the real harness on
the CPU (C++, and Triton under the interpreter)."""

from __future__ import annotations

import textwrap

import pytest
from builtin_helpers import builtin_generator, task_file, verify_forward

from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate

TRIPLET = """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self, margin=1.0):
            super().__init__()
            self.loss_fn = torch.nn.TripletMarginLoss(margin=margin)

        def forward(self, anchor, positive, negative):
            return self.loss_fn(anchor, positive, negative)


    def get_inputs():
        return [torch.rand(16, 64) * 0.3, torch.rand(16, 64), torch.rand(16, 64)]


    def get_init_inputs():
        return [{margin}]
"""


@pytest.fixture(params=[1.0, 5.0], ids=["margin1", "margin5"])
def triplet_task(tmp_path, request):
    path = tmp_path / "task.py"
    path.write_text(textwrap.dedent(TRIPLET.format(margin=request.param)))
    return path


def test_the_norms_share_a_kernel_and_the_mean_takes_another(tmp_path, triplet_task):
    generator = builtin_generator(triplet_task, "triton", tmp_path, device="cuda")
    # op by op it was 10 kernels: each subtraction, epsilon, norm and clamp on its own
    assert generator.summary().startswith("2 kernel(s): reduction, reduction")


@pytest.mark.parametrize("dsl", ["cpp", "triton"])
def test_the_split_stage_verifies(tmp_path, triplet_task, dsl):
    generator = builtin_generator(triplet_task, dsl, tmp_path)
    kernel = tmp_path / "kernel.py"
    kernel.write_text(generator.code(generator.default_config()))
    config = EvalConfig(dsl=dsl, device="cpu", seeds=2, profile=False, policy="strict")
    verdict = evaluate(triplet_task, kernel, config, EvalCache(tmp_path / "cache"))
    assert verdict.passed, verdict.message


# y: class targets; -100 and ignore_index rows are left out, so the mean divides by the rest
TARGETS = "torch.randn(6, 5), torch.tensor([0, 4, -100, 2, 3, 1])"
CROSS_ENTROPY = [
    ("F.cross_entropy(x, y)", TARGETS),
    ("F.cross_entropy(x, y, reduction='sum')", TARGETS),
    (
        "F.cross_entropy(x * 3, y, ignore_index=2)",
        "torch.randn(6, 5), torch.tensor([0, 4, 2, 2, 3, 1])",
    ),
]


@pytest.mark.parametrize(("forward", "inputs"), CROSS_ENTROPY)
def test_cross_entropy_is_one_kernel_over_the_rows_and_one_for_the_total(tmp_path, forward, inputs):
    generator = builtin_generator(task_file(tmp_path, forward, inputs), "triton", tmp_path,
                                  device="cuda")  # fmt: skip
    assert generator.summary().startswith("2 kernel(s): softmax, reduction")
    # the log-probabilities never go through memory (before, they were stored, then read again
    # by a reduction over [N, C]): the first kernel writes one loss per row
    code = generator.code(generator.default_config())
    assert "torch.empty((6, 5)" not in code and "torch.empty((6,)" in code
    assert "(idx // 5)" not in code  # the target: one load a row, not one per element


@pytest.mark.parametrize("dsl", ["cpp", "triton"])
@pytest.mark.parametrize(("forward", "inputs"), CROSS_ENTROPY)
def test_cross_entropy_split_verifies(tmp_path, dsl, forward, inputs):
    verify_forward(tmp_path, dsl, forward, inputs)

"""One-element constant tensors (torch.tensor(0.5) in a forward, or kept as an attribute): the
analysis reads their number, the builtin writes it as a scalar literal; tensors that forward
makes from numbers (ones, full, arange: causal masks, position ids) are made the same way in the
kernel file. The real harness verifies the kernels (C++ and the Triton interpreter on the CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_helpers import builtin_generator, task_file

from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate

DSLS = ["cpp", "triton"]


def generate(task: Path, dsl: str, tmp_path: Path) -> Path:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(builtin_generator(task, dsl, tmp_path).code())
    return kernel


def verify(task: Path, kernel: Path, dsl: str, tmp_path: Path):
    config = EvalConfig(dsl=dsl, device="cpu", seeds=1, profile=False)
    return evaluate(task, kernel, config, cache=EvalCache(tmp_path / "cache"))


WEIGHT = "self.w = nn.Parameter(torch.randn(16, 12) * 0.3)"
# name -> (forward, inputs, constructor body, the literal the kernel must hold)
CASES = {
    "min_after_matmul": ("torch.min(x @ self.w, torch.tensor(0.5))", "torch.randn(8, 16)",
                         WEIGHT, "0.5"),
    "max_on_the_input_device": (
        "torch.max(torch.tanh(x), torch.tensor(self.c, device=x.device)) * 3",
        "torch.randn(4, 6, 5)", "self.c = 0.25", "0.25"),
    "add_after_pointwise": ("torch.sigmoid(x) + torch.tensor(2.0)", "torch.randn(4, 6, 5)", "",
                            "2.0"),
    "attribute_tensor": ("torch.relu(x) * self.scale - torch.tensor(1.5, dtype=torch.float64)",
                         "torch.randn(4, 6, 5)", "self.scale = torch.tensor(0.75)", "0.75"),
}  # fmt: skip


@pytest.mark.parametrize("dsl", DSLS)
@pytest.mark.parametrize("name", list(CASES))
def test_one_element_constants_become_scalar_literals(tmp_path, name, dsl):
    forward, inputs, params, literal = CASES[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = generate(task, dsl, tmp_path)
    assert literal in kernel.read_text().split("class ModelNew")[0]  # in a kernel's source
    verdict = verify(task, kernel, dsl, tmp_path)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize(
    "forward",
    ["x + torch.tensor([1.0, 2.0])", "x * self.pair"],
    ids=["made_in_forward", "kept_as_attribute"],
)
def test_a_constant_of_several_elements_is_unsupported_and_says_why(tmp_path, forward):
    params = "self.pair = torch.tensor([0.5, 2.0])"
    task = task_file(tmp_path, forward, "torch.randn(3, 2)", params=params)
    with pytest.raises(Unsupported) as info:
        generate(task, "cpp", tmp_path)
    message = str(info.value)
    assert "a constant tensor made in forward or kept as a plain attribute" in message
    assert "only a one-element constant" in message


MADE = {
    "causal_attention": ("F.scaled_dot_product_attention(x, y, y * 0.5, is_causal=True)",
                         "torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 4)", "torch.full("),
    "tril_mask_softmax": (
        "torch.softmax((x @ y.transpose(-1, -2)).masked_fill("
        "torch.tril(torch.ones(7, 7)) == 0, float('-inf')), dim=-1)",
        "torch.randn(2, 7, 4), torch.randn(2, 7, 4)", "torch.full("),
    "arange_positions": ("x * torch.arange(x.shape[-1], device=x.device) + "
                         "torch.ones_like(x) * (torch.arange(5) % 2 == 0)",
                         "torch.randn(3, 5)", "torch.arange("),
    "python_modulo": ("torch.remainder(x * 4, -0.75) + (-torch.arange(5)) % 4", "torch.randn(3, 5)",
                      "torch.arange("),  # the sign of the divisor, as Python's %
    "new_full_and_zeros": ("torch.relu(x) + x.new_full((3, 5), 0.25) - torch.zeros(5)",
                           "torch.randn(3, 5)", "torch.full("),
    # empty, then filled whole (as hinge_embedding_loss does): the fill is the tensor
    "filled_empty": ("x + torch.empty(3, 2).fill_(1.5) * torch.empty_like(x).fill_(2.0)",
                     "torch.randn(3, 2)", "torch.full("),
}  # fmt: skip


@pytest.mark.parametrize("dsl", DSLS)
@pytest.mark.parametrize("name", list(MADE))
def test_tensors_made_in_forward_are_made_in_the_kernel_file_and_verify(tmp_path, name, dsl):
    forward, inputs, call = MADE[name]
    task = task_file(tmp_path, forward, inputs)
    kernel = generate(task, dsl, tmp_path)
    forward_source = kernel.read_text().split("class ModelNew")[1]
    if name == "causal_attention" and dsl == "triton":
        assert call not in forward_source  # one flash kernel: the causal mask is index arithmetic
    else:
        assert call in forward_source
    verdict = verify(task, kernel, dsl, tmp_path)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize(
    "forward",
    ["x + torch.empty(3, 2)", "x + (lambda e: (e[0].fill_(1.0), e)[1])(torch.empty(3, 2))"],
    ids=["read_as_made", "filled_in_part"],
)
def test_uninitialised_memory_made_in_forward_is_unsupported(tmp_path, forward):
    task = task_file(tmp_path, forward, "torch.randn(3, 2)")
    with pytest.raises(Unsupported) as info:
        generate(task, "triton", tmp_path)
    assert "made in forward" in str(info.value)

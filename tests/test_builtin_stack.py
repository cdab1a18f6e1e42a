"""torch.stack along any dim, alone and fused with the pointwise ops around it, verified by the
real harness on the CPU (C++, and Triton under the interpreter)."""

from __future__ import annotations

import pytest
from builtin_helpers import verify_forward

STACKS = {
    "new_first_dim": ("torch.stack((x, y, x * 2))", "torch.randn(3, 5), torch.randn(3, 5)"),
    "new_middle_dim": ("torch.stack([x, y], dim=1) + 1", "torch.randn(3, 5), torch.randn(3, 5)"),
    "new_last_dim": (
        "torch.relu(torch.stack([x, y], -1))",
        "torch.randn(2, 3, 4), torch.randn(2, 3, 4)",
    ),
    "transposed_piece": ("torch.stack([x.t(), y], 0)", "torch.randn(5, 3), torch.randn(3, 5)"),
}


@pytest.mark.parametrize("dsl", ["cpp", "triton"])
@pytest.mark.parametrize("name", list(STACKS))
def test_stack_verifies(tmp_path, dsl, name):
    forward, inputs = STACKS[name]
    verify_forward(tmp_path, dsl, forward, inputs)

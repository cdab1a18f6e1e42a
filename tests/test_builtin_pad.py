"""F.pad's constant mode (aten.constant_pad_nd): padded, cropped and mixed, alone and fused
with the pointwise ops around it, verified by the real harness on the CPU (C++, and Triton under
the interpreter)."""

from __future__ import annotations

import pytest
from builtin_helpers import verify_forward

PADS = {
    "last_dim": ("F.pad(x, (2, 3))", "torch.randn(3, 5, 7)"),
    "two_dims_with_value": ("F.pad(x, (1, 1, 2, 0), value=-1.5) * 2", "torch.randn(3, 5, 7)"),
    "crop_and_pad": ("F.pad(torch.relu(x), (-2, 3, 1, -1))", "torch.randn(3, 5, 7)"),
    "all_dims": ("F.pad(x, (1, 2, 0, 3, 2, 1)) + 1", "torch.randn(2, 3, 4)"),
    "pad_longer_than_input": ("F.pad(x, (9, 11))", "torch.randn(4, 3)"),
    "transposed_input": ("F.pad(x.transpose(0, 1), (1, 1, 1, 1))", "torch.randn(6, 4)"),
}


@pytest.mark.parametrize("dsl", ["cpp", "triton"])
@pytest.mark.parametrize("name", list(PADS))
def test_constant_pad_verifies(tmp_path, dsl, name):
    forward, inputs = PADS[name]
    code = verify_forward(tmp_path, dsl, forward, inputs)
    assert "F.pad" not in code.split("def forward", 1)[-1]  # our kernel pads, not torch

"""In-place ops in forward (`nn.ReLU(inplace=True)`, `y.add_(1)`): the builtin computes them out
of place when nothing reads the old data afterwards, and refuses, naming the op, when something
would (a view taken before, forward's own inputs). Verified by the real harness on the Triton
interpreter."""

from __future__ import annotations

import pytest
from builtin_helpers import module_task
from test_builtin import generate, verify

from kernelgraph.tools.builtin.errors import Unsupported

INIT = "self.fc = nn.Linear(8, 8)\nself.act = nn.ReLU(inplace=True)"

WRITTEN = {
    "chained_updates": "y = x * 2\ny.add_(1)\ntorch.relu_(y)\nreturn y.mul_(3)",
    "relu_module_inplace": "return self.act(self.fc(x)) + 1",
    "read_before_the_update": "y = x * 2\nz = y + 1\ny.sub_(5)\nreturn z * y",
}
REFUSED = {
    "view_read_after": ("y = x * 2\nv = y[:, :3]\ny.add_(1)\nreturn v * 1", "aten.add_"),
    "view_returned": ("y = x * 2\nv = y.view(-1)\ny.mul_(3)\nreturn v", "aten.mul_"),
    "input_mutated": ("x.mul_(2)\nreturn x + 1", "aten.mul_"),
}


def task(tmp_path, body: str):
    return module_task(tmp_path, body, INIT, "torch.randn(6, 8)")


@pytest.mark.parametrize("name", list(WRITTEN))
def test_in_place_ops_on_tensors_forward_made_verify(tmp_path, name):
    path = task(tmp_path, WRITTEN[name])
    verdict = verify(path, generate(path, tmp_path), tmp_path)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("name", list(REFUSED))
def test_in_place_ops_whose_old_data_is_read_are_refused_by_name(tmp_path, name):
    body, op = REFUSED[name]
    with pytest.raises(Unsupported, match=op):
        generate(task(tmp_path, body), tmp_path)

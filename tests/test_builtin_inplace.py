"""In-place ops in forward (`nn.ReLU(inplace=True)`, `y.add_(1)`): the builtin computes them out
of place when nothing reads the old data afterwards, and refuses, naming the op, when something
would (a view taken before, forward's own inputs). Verified by the real harness on the Triton
interpreter."""

from __future__ import annotations

import pytest
from builtin_helpers import module_task
from test_builtin import generate, verify

from kernelgraph.tools.builtin.errors import Unsupported

INIT = (
    "self.fc = nn.Linear(8, 8)\nself.act = nn.ReLU(inplace=True)\n"
    "self.hidden = torch.randn(2, 8)"  # a plain tensor attribute, as level3/33 keeps its state
)

WRITTEN = {
    "chained_updates": "y = x * 2\ny.add_(1)\ntorch.relu_(y)\nreturn y.mul_(3)",
    "relu_module_inplace": "return self.act(self.fc(x)) + 1",
    "read_before_the_update": "y = x * 2\nz = y + 1\ny.sub_(5)\nreturn z * y",
    "copy_broadcast": "y = x * 2\ny.copy_(x[:1] + 1)\nreturn y * 3",
    # level3/33's form: a plain attribute overwritten, then read
    "copy_into_an_attribute": "self.hidden.copy_(x[2:4] * 2)\nreturn torch.cat((x, self.hidden))",
}
REFUSED = {
    "view_read_after": ("y = x * 2\nv = y[:, :3]\ny.add_(1)\nreturn v * 1", "aten.add_"),
    "view_returned": ("y = x * 2\nv = y.view(-1)\ny.mul_(3)\nreturn v", "aten.mul_"),
    "input_mutated": ("x.mul_(2)\nreturn x + 1", "aten.mul_"),
    "attribute_updated": ("self.hidden.add_(x[:2])\nreturn self.hidden * 2", "aten.add_"),
    "attribute_partly_copied": (
        "self.hidden[:1].copy_(x[:1])\nreturn self.hidden * 2",
        "aten.copy_",
    ),
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


# A clone of an input is a view of it unless something writes either or returns the clone.
CLONES = {
    "residual_of_a_clone": (
        "res = x.clone().detach()\nreturn self.fc(x).sum(1, keepdim=True) + res",
        True,
    ),
    "clone_updated_out_of_place": ("y = x.clone()\ny.add_(1)\nreturn y * 2", True),
    "clone_returned": ("return x.clone(), x * 2", False),
    "clone_viewed_and_returned": ("return x.clone().view(-1)", False),
    "clone_to_channels_last": (
        "y = x.view(6, 2, 2, 2).clone(memory_format=torch.channels_last)\nreturn y + 1",
        False,
    ),
}


@pytest.mark.parametrize("name", list(CLONES))
def test_a_clone_of_an_input_is_a_view_unless_written_or_returned(tmp_path, name):
    body, alias = CLONES[name]
    path = task(tmp_path, body)
    kernel = generate(path, tmp_path)
    forward = kernel.read_text().split("def forward")[-1]
    assert ("_clone[" not in forward) == alias, forward
    verdict = verify(path, kernel, tmp_path)
    assert verdict.passed, verdict.message

"""A GPU kernel logs through `_log` (MUFU's lg2, tools/builtin/triton_emit.py); the Triton
interpreter, which has no fast_logf, keeps tl.log. Its accuracy is checked on a GPU
(tests/test_gpu.py)."""

from __future__ import annotations

import pytest
from builtin_helpers import builtin_generator, task_file

FORWARD = "torch.nn.functional.kl_div(torch.log(x), y, reduction='batchmean')"
INPUTS = "torch.rand(8, 64).softmax(-1), torch.rand(8, 64).softmax(-1)"


@pytest.mark.parametrize(("device", "fast"), [("cuda", True), ("cpu", False)])
def test_logs_take_the_fast_form_on_a_gpu_only(tmp_path, device, fast):
    task = task_file(tmp_path, FORWARD, INPUTS)
    source = builtin_generator(task, "triton", tmp_path, device=device).code()
    assert ("def _log(x):" in source) is fast
    assert (" _log(" in source) is fast
    assert ("tl.log(" in source) is not fast

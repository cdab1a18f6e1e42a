"""Loads at positions read from an index tensor (tools/builtin/indexing.py): index_select,
embedding and indexing by one tensor, negative positions included, written in both DSLs and
verified by the real harness against torch."""

from __future__ import annotations

import pytest
from builtin_helpers import builtin_generator, task_file, verify_forward

from kernelgraph.tools.builtin.errors import Unsupported

CASES = {
    "index_select_middle_dim": ("torch.index_select(x, 1, y) * 2",
                                "torch.randn(4, 6, 10), torch.randint(0, 6, (5,))"),
    "first_dim_negative": ("x[y] + 1", "torch.randn(7, 3, 4), torch.randint(-7, 7, (6,))"),
    "middle_dim_2d_index": ("torch.relu(x[:, y])", "torch.randn(3, 9, 5), torch.randint(-9, 9, (2, 4))"),
    "embedding": ("F.embedding(y, x) * 0.5", "torch.randn(11, 8), torch.randint(0, 11, (3, 5))"),
    "gather_last_dim": ("torch.gather(x, 2, y) - 1", "torch.randn(3, 4, 6), torch.randint(0, 6, (3, 4, 5))"),
    "gather_smaller_index": ("torch.gather(x, 0, y)", "torch.randn(5, 7), torch.randint(0, 5, (3, 4))"),
    "transposed_source": ("torch.index_select(x.t(), 0, y)", "torch.randn(6, 9), torch.randint(0, 9, (4,))"),
}  # fmt: skip


@pytest.mark.parametrize("dsl", ["cpp", "triton"])
@pytest.mark.parametrize("name", list(CASES))
def test_indexed_loads_verify(tmp_path, name, dsl):
    forward, inputs = CASES[name]
    code = verify_forward(tmp_path, dsl, forward, inputs)
    assert (
        "static_cast<int64_t>(" if dsl == "cpp" else ".to(tl.int32)"
    ) in code  # a loaded position


def test_indexing_by_a_mask_is_refused_with_the_reason(tmp_path):
    task = task_file(tmp_path, "x[y > 0] * 2", "torch.randn(4, 5), torch.randn(4, 5)")
    with pytest.raises(Unsupported, match="bool"):
        builtin_generator(task, "cpp", tmp_path)

"""The normalised code hash: the same kernel whatever its comments, docstrings and layout."""

from __future__ import annotations

import pytest

from kernelgraph.tools.code_hash import normalized_code_hash

KERNEL = '''"""Scale and add."""
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x * 2 + 1
'''


@pytest.mark.parametrize(
    "variant",
    [
        KERNEL.replace('"""Scale and add."""', '"""Another docstring."""\n# and a comment'),
        KERNEL.replace("x * 2 + 1", "(x * 2) + 1  # the same expression"),
        KERNEL.replace("\n\n\n", "\n") + "\n\n",
        KERNEL.replace(
            "class ModelNew(torch.nn.Module):", 'class ModelNew(torch.nn.Module):\n    """Doc."""'
        ),
    ],
)
def test_comments_docstrings_and_layout_do_not_change_the_hash(variant: str) -> None:
    assert normalized_code_hash(variant) == normalized_code_hash(KERNEL)


@pytest.mark.parametrize(
    "variant",
    [
        KERNEL.replace("x * 2 + 1", "x * 2 + 2"),
        KERNEL.replace("x * 2 + 1", "x + x + 1"),
    ],
)
def test_a_change_in_what_the_code_does_changes_the_hash(variant: str) -> None:
    assert normalized_code_hash(variant) != normalized_code_hash(KERNEL)


def test_code_that_does_not_parse_is_compared_by_its_lines_without_comments() -> None:
    broken = "def f(:\n    return 1\n"
    assert normalized_code_hash(broken) == normalized_code_hash("# note\n" + broken + "\n\n")
    assert normalized_code_hash(broken) != normalized_code_hash(broken.replace("1", "2"))


def test_a_comment_inside_a_cpp_source_string_is_part_of_the_code() -> None:
    """Only Python's own comments are dropped: a string's content is never rewritten."""
    plain = KERNEL + 'SOURCE = r"""int y = 1;"""\n'
    commented = KERNEL + 'SOURCE = r"""int y = 1; // one"""\n'
    assert normalized_code_hash(plain) != normalized_code_hash(commented)

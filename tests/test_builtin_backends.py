"""Each builtin backend dispatches on the kernel's type through one table (FAMILIES): the kinds
it builds are the table's, and a kernel of any other type is a clear error, not a wrong file."""

from __future__ import annotations

import re

import pytest

from kernelgraph.tools.builtin import cpp_backend, triton_backend


@pytest.mark.parametrize(
    ("module", "backend", "name"),
    [
        (triton_backend, triton_backend.TritonBackend("cuda", "fp32"), "Triton"),
        (cpp_backend, cpp_backend.CppBackend("cpu", "fp32"), "C++"),
    ],
)
def test_a_kernel_type_without_a_family_is_named_in_the_error(module, backend, name):
    assert set(backend.kernel_kinds) <= set(module.FAMILIES)

    class StrayKernel:
        name = "k0_stray"

    message = f"the {name} backend has no kernel family for StrayKernel"
    with pytest.raises(KeyError, match=re.escape(message)):
        backend.default(StrayKernel())

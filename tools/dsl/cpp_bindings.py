"""Standalone C++ kernels: pybind11 bindings for `extern "C"` functions. Standard library only.

A kernel file that kernelgraph exports must run without kernelgraph, so generated C++ kernels
are built with `torch.utils.cpp_extension.load_inline(..., no_implicit_headers=True)` instead of
`kernelgraph.tools.dsl.cpp.build_library`. Without torch's headers a cold build takes a few seconds (the
pybind11 header), not the ~20 s of `<torch/extension.h>`; torch caches the build by name and
source in TORCH_EXTENSIONS_DIR, so a cached build loads in milliseconds without recompiling.

Why not inline build_library's ctypes loader into the file instead: the harness's static checks
refuse a candidate that imports ctypes, os, subprocess or hashlib, and its launch counter sees
calls through load_inline's modules (or build_library's libraries) only.

`pybind_module(sources)` writes the binding code that `build_library` supplied at run time
through ctypes: every `extern "C" void f(...)` found in the sources becomes `m.def("f", ...)`,
whose arguments follow build_library's calling convention with one change, that tensors are
passed as their `data_ptr()`:

    pointer parameter (const float*, void*, ...)   <- t.data_ptr()   (a Python int)
    int64_t, int, bool, ... parameter              <- Python int or bool
    double or float parameter                      <- Python float (or int)

`extension_name(...)` names the extension after a hash of what it is built from, so a file
whose source changes gets a new module (torch keeps one module per name in a process), and a
tuning change that only moves run-time arguments keeps its build.

Used at generation time by the builtin's C++ backend (tools/builtin/cpp_backend.py). The
hand-written C++ kernels (examples/*/kernel_cpp.py, prompts/dsl/cpp/examples/*.py) carry its
output as their `BINDINGS` string, next to their `SOURCE`; `python -m kernelgraph.tools.dsl.cpp_bindings
FILE...` refreshes it, and tests/test_standalone_kernels.py checks that it is up to date.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

# Optimisation flags of every C++ kernel build (load_inline adds -shared -fPIC -std=c++17 and
# tools.dsl.cpp.build_library passes them itself).
OPT_FLAGS = ("-O3", "-march=native", "-fopenmp")

_EXTERN = re.compile(r'extern\s+"C"\s+void\s+([A-Za-z_]\w*)\s*\(([^)]*)\)\s*\{')
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_QUALIFIERS = ("__restrict__", "__restrict", "restrict")
_FLOATS = ("double", "float")


@dataclass(frozen=True)
class Parameter:
    name: str
    ctype: str  # the declared type without the name and restrict qualifiers: "const float*"

    @property
    def pointer(self) -> bool:
        return "*" in self.ctype

    @property
    def python_type(self) -> str:
        """The C++ type the binding takes from Python."""
        if self.pointer:
            return "uintptr_t"
        return "double" if self.ctype.split()[-1] in _FLOATS else "int64_t"

    def argument(self) -> str:
        """The binding's argument converted to the declared type."""
        if self.pointer:
            return f"reinterpret_cast<{self.ctype}>({self.name})"
        return self.name


@dataclass(frozen=True)
class ExternFunction:
    name: str
    params: tuple[Parameter, ...]


def extern_functions(source: str) -> list[ExternFunction]:
    """The `extern "C" void name(...) {` definitions of a C++ source, in order."""
    found = []
    for match in _EXTERN.finditer(_COMMENT.sub("", source)):
        text = " ".join(match.group(2).split())
        params = [_parameter(p, match.group(1)) for p in text.split(",")] if text else []
        if params == [Parameter("", "void")]:
            params = []
        found.append(ExternFunction(match.group(1), tuple(params)))
    return found


def _parameter(text: str, function: str) -> Parameter:
    text = text.strip().replace("*", "* ")
    words = [w for w in text.split() if w not in _QUALIFIERS]
    if text == "void":
        return Parameter("", "void")
    if len(words) < 2 or not re.fullmatch(r"[A-Za-z_]\w*", words[-1]) or "[" in text:
        raise ValueError(f"{function}: cannot bind the parameter {text.strip()!r}; "
                         "declare pointers and int64_t/double scalars, each with a name")  # fmt: skip
    ctype = " ".join(words[:-1]).replace(" *", "*")
    return Parameter(words[-1], ctype)


def pybind_module(sources: list[str], declare: bool = True) -> str:
    """C++ that binds every `extern "C"` function of `sources` with pybind11: one more source
    for load_inline, after the ones that define the functions. `declare` repeats their
    declarations first (needed when the definitions sit in namespaces; a hand-written file
    whose SOURCE comes first in the same build leaves them out)."""
    functions = [f for source in sources for f in extern_functions(source)]
    names = [f.name for f in functions]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f'extern "C" functions defined twice: {", ".join(duplicated)}')
    lines = ["#include <cstdint>", "#include <pybind11/pybind11.h>"]
    if declare:
        lines.append("")
        for f in functions:
            declared = ", ".join(f"{p.ctype} {p.name}" for p in f.params)
            lines.append(f'extern "C" void {f.name}({declared});')
        lines.append("")
    lines.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
    for f in functions:
        taken = ", ".join(f"{p.python_type} {p.name}" for p in f.params)
        passed = ", ".join(p.argument() for p in f.params)
        lines += [
            f'    m.def("{f.name}", []({taken}) {{',
            f"        {f.name}({passed});",
            "    });",
        ]
    lines.append("}")
    return "\n".join(lines) + "\n"


def extension_name(prefix: str, *parts: object) -> str:
    """`prefix_<hash of parts>`: a module name for load_inline that changes with its inputs."""
    digest = hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
    return f"{prefix}_{digest}"


def refresh(path: str) -> bool:
    """Rewrite the `BINDINGS = r\"\"\"...\"\"\"` string of a hand-written kernel file from its
    `SOURCE` string (both module-level literals); True when the file changed."""
    import ast
    from pathlib import Path

    file = Path(path)
    text = file.read_text()
    tree = ast.parse(text)
    literals = {
        stmt.targets[0].id: stmt.value
        for stmt in tree.body
        if isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    }
    if "SOURCE" not in literals or "BINDINGS" not in literals:
        raise ValueError(f"{path}: no module-level SOURCE and BINDINGS string literals")
    node = literals["BINDINGS"]
    lines = text.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: node.lineno - 1]) + node.col_offset
    end = sum(len(line) for line in lines[: node.end_lineno - 1]) + node.end_col_offset
    bindings = pybind_module([literals["SOURCE"].value], declare=False)
    new = text[:start] + 'r"""\n' + bindings + '"""' + text[end:]
    if new != text:
        file.write_text(new)
    return new != text


if __name__ == "__main__":  # python -m kernelgraph.tools.dsl.cpp_bindings examples/*/kernel_cpp.py
    import sys

    for arg in sys.argv[1:]:
        print(f"{arg}: {'refreshed' if refresh(arg) else 'up to date'}")

"""Standalone C++ kernels: Python bindings for `extern "C"` functions. Standard library only.

A kernel file that kernelgraph exports must run without kernelgraph, so generated C++ kernels
are built with `torch.utils.cpp_extension.load_inline(..., no_implicit_headers=True)` instead of
`kernelgraph.tools.dsl.cpp.build_library`. The bindings use the Python C API (<Python.h> only),
so a cold build costs the kernel's own compile: not the ~4 s of pybind11's header or the ~20 s
of `<torch/extension.h>`. torch caches the build by name and source in TORCH_EXTENSIONS_DIR, so
a cached build loads in milliseconds without recompiling.

Why not inline build_library's ctypes loader into the file instead: the harness's static checks
refuse a candidate that imports ctypes, os, subprocess or hashlib, and its launch counter sees
calls through load_inline's modules (or build_library's libraries) only.

`binding_module(sources)` writes the binding code that `build_library` supplied at run time
through ctypes: every `extern "C" void f(...)` found in the sources becomes a module function `f`,
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


# The Python C API names a binding module uses (and its PyInit_<module>); native_checks
# allows these and no others.
BINDING_API_NAMES = frozenset(
    "PyObject PyArg_ParseTuple PyMethodDef PyModuleDef PyModuleDef_HEAD_INIT PyModule_Create "
    "PyMODINIT_FUNC Py_RETURN_NONE".split()
)
# PyArg_ParseTuple's format letter and C variable type for each Python-side type.
_ARG_FORMATS = {"uintptr_t": ("K", "unsigned long long"), "int64_t": ("L", "long long"),
                "double": ("d", "double")}  # fmt: skip


def binding_module(sources: list[str], module: str, declare: bool = True) -> str:
    """C++ that binds every `extern "C"` function of `sources` through the Python C API (only
    <Python.h>: a build takes a fraction of a second, pybind11's header alone about 4 s) as the
    extension `module` (load_inline's name): one more source for load_inline, after the ones
    that define the functions. `declare` repeats
    their declarations first (needed when the definitions sit in namespaces; a hand-written
    file whose SOURCE comes first in the same build leaves them out)."""
    functions = [f for source in sources for f in extern_functions(source)]
    names = [f.name for f in functions]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f'extern "C" functions defined twice: {", ".join(duplicated)}')
    lines = ["#include <Python.h>", "#include <cstdint>", ""]
    if declare:
        for f in functions:
            declared = ", ".join(f"{p.ctype} {p.name}" for p in f.params)
            lines.append(f'extern "C" void {f.name}({declared});')
        lines.append("")
    for f in functions:
        formats = [_ARG_FORMATS[p.python_type] for p in f.params]
        lines.append(f"static PyObject* kg_bind_{f.name}(PyObject*, PyObject* kg_args) {{")
        by_type: dict[str, list[str]] = {}
        for p, (_, ctype) in zip(f.params, formats, strict=True):
            by_type.setdefault(ctype, []).append(p.name)
        lines += [f"    {ctype} {', '.join(names)};" for ctype, names in by_type.items()]
        if f.params:
            pointers = ", ".join(f"&{p.name}" for p in f.params)
            letters = "".join(letter for letter, _ in formats)
            lines.append(
                f'    if (!PyArg_ParseTuple(kg_args, "{letters}", {pointers})) return nullptr;'
            )
        else:
            lines.append('    if (!PyArg_ParseTuple(kg_args, "")) return nullptr;')
        lines += [f"    {f.name}({', '.join(p.argument() for p in f.params)});",
                  "    Py_RETURN_NONE;", "}"]  # fmt: skip
    lines.append("static PyMethodDef kg_methods[] = {")
    for f in functions:
        lines.append(f'    {{"{f.name}", kg_bind_{f.name}, METH_VARARGS, nullptr}},')
    lines += [
        "    {nullptr, nullptr, 0, nullptr}};",
        f'static PyModuleDef kg_module = {{PyModuleDef_HEAD_INIT, "{module}", nullptr, -1,',
        "    kg_methods};",
        f"PyMODINIT_FUNC PyInit_{module}() {{ return PyModule_Create(&kg_module); }}",
    ]
    return "\n".join(lines) + "\n"


def extension_name(prefix: str, *parts: object) -> str:
    """`prefix_<hash of parts>`: a module name for load_inline that changes with its inputs."""
    digest = hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
    return f"{prefix}_{digest}"


def load_inline_name(tree) -> str:
    """The module name (first argument, a string literal) of a file's `load_inline(...)` call."""
    import ast

    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", ""))
                == "load_inline" and node.args and isinstance(node.args[0], ast.Constant)):  # fmt: skip
            return node.args[0].value
    raise ValueError("no load_inline('<name>', ...) call with a literal name")


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
    bindings = binding_module([literals["SOURCE"].value], load_inline_name(tree), declare=False)
    new = text[:start] + 'r"""\n' + bindings + '"""' + text[end:]
    if new != text:
        file.write_text(new)
    return new != text


if __name__ == "__main__":  # python -m kernelgraph.tools.dsl.cpp_bindings examples/*/kernel_cpp.py
    import sys

    for arg in sys.argv[1:]:
        print(f"{arg}: {'refreshed' if refresh(arg) else 'up to date'}")

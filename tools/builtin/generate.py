"""From a task analysis to a kernel file: the builtin coder's one entry point.

`Generator(analysis, dsl, device, policy, precision, source)` builds the program once;
`code(config)` prints it with a tuning config, `default_config()` and `tunables()` describe the
search space. `source` is the task file (with its --set values applied): ModelNew runs the
reference's `__init__` from it (tools/builtin/reference_init.py), unless it cannot be reused or
the result would fail the harness's static checks; then ModelNew falls back to empty parameters
under the reference's state_dict names, and the file's comment says why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernelgraph.tools.builtin.averaging import mark_averaged_convs
from kernelgraph.tools.builtin.cpp_backend import CppBackend
from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.builtin.layouts import k_major_operands
from kernelgraph.tools.builtin.linear_folds import fold_linear_reductions
from kernelgraph.tools.builtin.module import render
from kernelgraph.tools.builtin.program import Program, build_program
from kernelgraph.tools.builtin.reference_init import InitUnavailable, ReferenceInit, extract
from kernelgraph.tools.builtin.shifted import shift_program
from kernelgraph.tools.builtin.split import split_program
from kernelgraph.tools.builtin.triton_backend import TritonBackend
from kernelgraph.tools.harness.config import PRECISIONS

# DSL name -> backend factory(device, precision). Adding a DSL to the builtin is one entry.
BACKENDS: dict[str, Callable[[str, str], Any]] = {"triton": TritonBackend, "cpp": CppBackend}


def register_backend(dsl: str, factory: Callable[[str, str], Any]) -> None:
    BACKENDS[dsl] = factory


class Generator:
    def __init__(
        self,
        analysis: dict[str, Any],
        dsl: str,
        device: str,
        policy: str,
        precision: str,
        source: str | None = None,
    ) -> None:
        if dsl not in BACKENDS:
            known = ", ".join(sorted(BACKENDS))
            raise Unsupported(f"the {dsl} DSL", f"the builtin writes {known}")
        self.backend = BACKENDS[dsl](device, precision)
        folded, fold_notes = fold_linear_reductions(analysis)
        self.program: Program = build_program(
            folded, policy, PRECISIONS[precision].dtype, self.backend.kernel_kinds
        )
        self.program.notes += fold_notes
        for kernel in self.program.kernels:
            if not isinstance(kernel, self.backend.kernel_kinds):
                raise Unsupported(f"a {kernel.kind} kernel in {dsl}",
                                  f"the builtin's {dsl} backend has none", hybrid_ok=True)  # fmt: skip
        if hasattr(self.backend, "loops_rows"):  # before the split: it merges their passes
            self.program = shift_program(self.program, self.backend.loops_rows)
        if hasattr(self.backend, "split_rows"):
            self.program = split_program(
                self.program, self.backend.split_k, self.backend.split_rows
            )
        self.program = mark_averaged_convs(self.program)
        if getattr(self.backend, "k_major_operands", False):
            self.program = k_major_operands(self.program)
        self.analysis, self.dsl, self.policy = analysis, dsl, policy
        self.reference: ReferenceInit | None = None
        self.why_not = ""
        try:
            self.reference = extract(source)
        except InitUnavailable as exc:
            self.why_not = str(exc)
        self._checked = False

    def default_config(self) -> dict[str, dict[str, Any]]:
        return {k.name: self.backend.default(k) for k in self.program.kernels}

    def tunables(self) -> dict[str, dict[str, list[Any]]]:
        return {k.name: self.backend.tunables(k) for k in self.program.kernels}

    def fits(self, config: dict[str, dict[str, Any]]) -> bool:
        """Whether every kernel's config can compile (a backend without the check: all can)."""
        fits = getattr(self.backend, "fits", None)
        return fits is None or all(fits(k, config.get(k.name, {})) for k in self.program.kernels)

    def code(self, config: dict[str, dict[str, Any]] | None = None) -> str:
        """The kernel file for `config`. One config is one text, whatever its keys' order (a
        config read back from a file has them sorted): the text keys caches and candidates."""
        config = {k: dict(sorted(v.items())) for k, v in (config or self.default_config()).items()}
        code = self._render(config)
        if not self._checked and self.reference is not None:
            self._checked = True  # the __init__ part does not change with the config
            why_not = self._unusable(code, config)
            if why_not:
                self.reference, self.why_not = None, why_not
                code = self._render(config)
        return code

    def _render(self, config: dict[str, dict[str, Any]]) -> str:
        return render(self.program, self.backend, config, self.summary(), self.reference,
                      self.why_not)  # fmt: skip

    def _unusable(self, code: str, config: dict[str, dict[str, Any]]) -> str:
        """Why the file with the reference's __init__ cannot be used ("" when it can): a name
        of the task clashing with the file's own, or static-check findings that the fallback
        does not have (so they come from the copied code)."""
        from kernelgraph.tools.harness.static_checks import check_python

        reference, self.reference = self.reference, None
        fallback = self._render(config)
        self.reference = reference
        clash = _clashes(reference.module, fallback)
        if clash:
            return f"the task's {', '.join(clash)} would clash with the kernel file's names"
        own = {(f.rule, f.message) for f in check_python(fallback, self.dsl, self.policy)}
        found = [f for f in check_python(code, self.dsl, self.policy)
                 if (f.rule, f.message) not in own]  # fmt: skip
        if found:
            return f"the copied code fails the static checks: {found[0].message}"
        return ""

    def summary(self) -> str:
        kinds = [k.kind for k in self.program.kernels]
        text = f"{len(kinds)} kernel(s): {', '.join(kinds) or 'none'}"
        if self.program.hybrid_ops:
            text += f"; hybrid: library calls to {', '.join(sorted(set(self.program.hybrid_ops)))}"
        return text


def _clashes(task_statements: list[str], code: str) -> list[str]:
    """Names that the copied task statements and the kernel file both bind, unless both import
    the same module under them (`import torch.nn as nn` twice is no clash)."""
    task, own = _bindings("\n".join(task_statements)), _bindings(code)
    return sorted(n for n in task.keys() & own.keys() if task[n] != own[n] or task[n] == "")


def _bindings(code: str) -> dict[str, str]:
    """Module-level name -> the module a plain import binds to it ("" for any other binding)."""
    import ast

    names: dict[str, str] = {}
    for stmt in ast.parse(code).body:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                names[a.asname or a.name.split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0]
                )
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            names.update({a.asname or a.name: f"{stmt.module}.{a.name}" for a in stmt.names})
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[stmt.name] = ""
        else:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names[node.id] = ""
    names.pop("ModelNew", None)
    return names

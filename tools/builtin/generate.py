"""From a task analysis to a kernel file: the builtin coder's one entry point.

`Generator(analysis, dsl, device, policy, precision)` builds the program once; `code(config)`
prints it with a tuning config, `default_config()` and `tunables()` describe the search space.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tools.builtin.cpp_backend import CppBackend
from tools.builtin.errors import Unsupported
from tools.builtin.module import render
from tools.builtin.program import Program, build_program
from tools.builtin.split import split_program
from tools.builtin.triton_backend import TritonBackend

PRECISION_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}

# DSL name -> backend factory(device, precision). Adding a DSL to the builtin is one entry.
BACKENDS: dict[str, Callable[[str, str], Any]] = {"triton": TritonBackend, "cpp": CppBackend}


def register_backend(dsl: str, factory: Callable[[str, str], Any]) -> None:
    BACKENDS[dsl] = factory


class Generator:
    def __init__(
        self, analysis: dict[str, Any], dsl: str, device: str, policy: str, precision: str
    ) -> None:
        if dsl not in BACKENDS:
            known = ", ".join(sorted(BACKENDS))
            raise Unsupported(f"the {dsl} DSL", f"the builtin writes {known}")
        self.backend = BACKENDS[dsl](device, precision)
        self.program: Program = build_program(analysis, policy, PRECISION_DTYPES.get(precision))
        if hasattr(self.backend, "split_rows"):
            self.program = split_program(
                self.program, self.backend.split_k, self.backend.split_rows
            )
        self.analysis = analysis

    def default_config(self) -> dict[str, dict[str, Any]]:
        return {k.name: self.backend.default(k) for k in self.program.kernels}

    def tunables(self) -> dict[str, dict[str, list[Any]]]:
        return {k.name: self.backend.tunables(k) for k in self.program.kernels}

    def code(self, config: dict[str, dict[str, Any]] | None = None) -> str:
        config = config or self.default_config()
        return render(self.program, self.backend, config, self.summary())

    def summary(self) -> str:
        kinds = [k.kind for k in self.program.kernels]
        text = f"{len(kinds)} kernel(s): {', '.join(kinds) or 'none'}"
        if self.program.hybrid_ops:
            text += f"; hybrid: library calls to {', '.join(sorted(set(self.program.hybrid_ops)))}"
        return text

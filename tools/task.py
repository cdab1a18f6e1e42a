"""Loading KernelBench-format task files. Standard library and torch only (used by the harness).

A task is a Python file with `class Model`, `get_inputs()`, `get_init_inputs()` and module-level
size constants. `--set NAME=VALUE` rewrites a constant's assignment in the source before it
runs, so shapes derived from it follow.
"""

from __future__ import annotations

import ast
import hashlib
import operator
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelgraph.tools.harness.verdict import TaskError, UsageError

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """Parse NAME=VALUE items; values are Python literals (so tuples work)."""
    sets: dict[str, Any] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise UsageError(f"--set expects NAME=VALUE, got {item!r}")
        try:
            sets[name] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError) as exc:
            raise UsageError(
                f"--set {name}: {text!r} is not a Python literal (numbers, tuples, strings "
                f"in quotes, True/False)"
            ) from exc
    return sets


_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def size_constants(source: str) -> dict[str, Any]:
    """Module-level constants: literals, and arithmetic on literals and earlier constants
    (`N = 2**20`, `M = N * 2`). Nothing is executed."""
    constants: dict[str, Any] = {}
    for node in _parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    constants[target.id] = _constant_value(node.value, constants)
                except (ValueError, TypeError, ArithmeticError):
                    continue
    return constants


def _constant_value(node: ast.AST, known: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _constant_value(node.left, known), _constant_value(node.right, known)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ValueError("exponent too large to evaluate statically")
        return _ARITHMETIC[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_constant_value(node.operand, known))
    return ast.literal_eval(node)


def assigned_names(source: str) -> list[str]:
    names = []
    for node in _parse(source).body:
        if isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def apply_sets(source: str, sets: dict[str, Any]) -> str:
    """Rewrite the top-level assignment of each NAME in `sets` to its new literal value."""
    if not sets:
        return source
    tree = _parse(source)
    found: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id in sets:
                node.value = ast.parse(repr(sets[target.id]), mode="eval").body
                found.add(target.id)
    missing = sorted(set(sets) - found)
    if missing:
        known = ", ".join(f"{k}={v!r}" for k, v in size_constants(source).items()) or "none"
        raise UsageError(
            f"--set names {', '.join(missing)} but the task assigns no such module-level "
            f"constant. Its size constants are: {known}."
        )
    return ast.unparse(tree)


def task_hash(source: str, sets: dict[str, Any]) -> str:
    digest = hashlib.sha256(source.encode())
    digest.update(repr(sorted(sets.items())).encode())
    return digest.hexdigest()


@dataclass
class TaskSource:
    """A task file and its overrides, checked statically (nothing of it has run yet)."""

    path: Path
    source: str
    sets: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: str | Path, sets: dict[str, Any] | None = None) -> TaskSource:
        path = Path(path)
        try:
            source = path.read_text()
        except OSError as exc:
            raise TaskError(f"cannot read task file {path}: {exc.strerror or exc}.") from exc
        task = cls(path=path, source=source, sets=dict(sets or {}))
        task.check_names()
        apply_sets(source, task.sets)  # reports unknown --set names early
        return task

    @property
    def effective_source(self) -> str:
        return apply_sets(self.source, self.sets)

    @property
    def hash(self) -> str:
        return task_hash(self.source, self.sets)

    @property
    def constants(self) -> dict[str, Any]:
        return size_constants(self.effective_source)

    def check_names(self) -> None:
        defined = set(assigned_names(self.source))
        for node in _parse(self.source, self.path).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                defined.add(node.name)
            elif isinstance(node, ast.ImportFrom | ast.Import):
                defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        missing = [name for name in REQUIRED_NAMES if name not in defined]
        if missing:
            raise TaskError(
                f"{self.path} is not a KernelBench-format task: it does not define "
                f"{', '.join(missing)}. A task defines `class Model(nn.Module)`, "
                f"`get_inputs()` returning the forward inputs and `get_init_inputs()` "
                f"returning the constructor arguments."
            )

    def load_module(self) -> ModuleType:
        """Execute the task (with overrides) as a fresh module. Runs task code: workers only."""
        module = ModuleType("kernelgraph_task")
        module.__file__ = str(self.path.resolve())
        sys.modules["kernelgraph_task"] = module
        try:
            code = compile(self.effective_source, str(self.path), "exec")
            exec(code, module.__dict__)  # noqa: S102 - the task is the user's own reference
        except Exception as exc:
            raise TaskError(
                f"the task {self.path} fails to import: {type(exc).__name__}: {exc}. "
                f"Fix the file so that `python {self.path}` runs without error."
            ) from exc
        for name in REQUIRED_NAMES:
            if not callable(getattr(module, name, None)):
                raise TaskError(f"{self.path}: `{name}` is missing or not callable.")
        return module


def _parse(source: str, path: Path | str = "<task>") -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise TaskError(
            f"the task {path} is not valid Python: {exc.msg} at line {exc.lineno}."
        ) from exc

"""Native-code plumbing shared by the cpp and cuda adapters. Standard library and torch only.

- Launch counting: torch's `load_inline`/`load` are patched so the extension module they return
  is wrapped in a proxy whose functions record a launch; `record_launch` serves the cpp fast
  path (`kernelgraph.tools.dsl.cpp.build_library`). Ops that extension code runs through ATen stay the
  candidate's: they are not marked internal.
- Cached compiler runs: `compile_cached` runs g++/nvcc once per sha256 of (source, command,
  compiler version, key), building in a temporary directory and renaming into the cache, so
  concurrent workers never see a half-written file.
- Native source extraction: `find_native_sources` reads C++/CUDA strings out of the candidate's
  AST for the static token check and the nvcc compile check.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from types import ModuleType

from kernelgraph.tools.dsl.base import LaunchCounter, NativeSource

_counter: LaunchCounter | None = None  # the counter installed in this process


class NativeBuildError(RuntimeError):
    """A C++/CUDA compiler rejected the source; the message is the compiler's output."""


def is_build_error(exc: BaseException) -> bool:
    """Our compiler failures and torch's extension build failures."""
    if isinstance(exc, NativeBuildError):
        return True
    return isinstance(exc, RuntimeError) and str(exc).startswith("Error building extension")


# ---------------------------------------------------------------- launch counting


def install(counter: LaunchCounter) -> None:
    """Make `counter` the active one and wrap torch's extension loaders (idempotent)."""
    import torch.utils.cpp_extension as cpp_extension

    global _counter
    _counter = counter
    for attr in ("load_inline", "load"):
        original = getattr(cpp_extension, attr)
        original = getattr(original, "__kg_original__", original)
        setattr(cpp_extension, attr, _counting_loader(original))


def record_launch(name: str) -> None:
    if _counter is not None and not _counter.inside:
        _counter.record(name)


def _counting_loader(load):
    @functools.wraps(load)
    def loader(*args, **kwargs):
        module = load(*args, **kwargs)
        return ExtensionProxy(module) if isinstance(module, ModuleType) else module

    loader.__kg_original__ = load
    return loader


class ExtensionProxy:
    """Stands in for a built extension module; calling one of its functions records a launch."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module
        self._wrapped: dict[str, object] = {}

    def __getattr__(self, name: str):
        value = getattr(self._module, name)
        if not callable(value) or isinstance(value, type):
            return value
        if name not in self._wrapped:
            label = f"{self._module.__name__}.{name}"

            @functools.wraps(value)
            def launch(*args, **kwargs):
                record_launch(label)
                return value(*args, **kwargs)

            self._wrapped[name] = launch
        return self._wrapped[name]

    def __dir__(self):
        return dir(self._module)

    def __repr__(self) -> str:
        return f"<counted extension {self._module.__name__}>"


# ---------------------------------------------------------------- cached compiler runs


def build_cache_dir() -> Path:
    root = os.environ.get("KERNELGRAPH_BUILD_CACHE") or Path.home() / ".cache/kernelgraph/build"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache
def tool_version(executable: str) -> str:
    """`executable --version`, part of every cache key."""
    try:
        proc = subprocess.run([executable, "--version"], capture_output=True, text=True)
    except OSError:
        return ""
    return proc.stdout + proc.stderr


def compile_cached(
    command: list[str], source: str, suffix: str, output: str, key: str = ""
) -> Path:
    """Run `command + [source file, "-o", out]` unless a cached output exists; return its path.

    `suffix` is the source file's extension (".cpp", ".cu"), `output` the output's (".so",
    ".cubin"). Raises NativeBuildError with the compiler's output, paths made readable.
    """
    digest = hashlib.sha256(
        json.dumps([source, command, tool_version(command[0]), key]).encode()
    ).hexdigest()[:32]
    cache = build_cache_dir()
    target = cache / f"{digest}{output}"
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(dir=cache, prefix=".build-") as tmp:
        src = Path(tmp) / f"kernel{suffix}"
        src.write_text(source)
        out = Path(tmp) / f"kernel{output}"
        proc = subprocess.run(
            [*command, str(src), "-o", str(out)],
            capture_output=True,
            text=True,
            env={**os.environ, "LC_ALL": "C"},  # plain ASCII quotes in the messages
        )
        if proc.returncode != 0 or not out.exists():
            message = (proc.stderr + proc.stdout).replace(str(src), src.name).strip()
            raise NativeBuildError(f"{Path(command[0]).name} failed:\n{message}")
        os.replace(out, target)
    return target


# ---------------------------------------------------------------- native source extraction

# call name -> (keyword, position, language) of each argument that holds native source
_SOURCE_ARGUMENTS = {
    "build_library": (("source", 0, "cpp"),),
    "load_inline": (("cpp_sources", 1, "cpp"), ("cuda_sources", 2, "cuda")),
}


def find_native_sources(source: str) -> list[NativeSource]:
    """C++/CUDA strings passed to `build_library(...)` and `load_inline(...)`, one per argument
    (a list of strings is joined with newlines, as load_inline does).

    Arguments may be literals, `+` concatenations, lists, or names bound once at module level
    to those. Anything else (f-strings, calls, names bound twice) is reported with code "" and
    an origin ending in "unresolved", so the static check can refuse what it cannot read.
    """
    tree = ast.parse(source)
    names = _module_bindings(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _callee(node.func) not in _SOURCE_ARGUMENTS:
            continue
        for keyword, position, lang in _SOURCE_ARGUMENTS[_callee(node.func)]:
            expr = _argument(node, keyword, position)
            if expr is None or (isinstance(expr, ast.Constant) and expr.value is None):
                continue
            value = _value(expr, names)
            origin = f"{keyword} (line {node.lineno})"
            if value is None:
                found.append(NativeSource(lang, "", f"{origin}, unresolved"))
            else:
                code = value if isinstance(value, str) else "\n".join(value)
                found.append(NativeSource(lang, code, origin))
    return found


def _callee(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _argument(call: ast.Call, keyword: str, position: int) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    args = call.args
    return (
        args[position]
        if position < len(args) and not isinstance(args[position], ast.Starred)
        else None
    )


def _module_bindings(tree: ast.Module) -> dict[str, ast.expr | None]:
    """Module-level names bound by one plain assignment; None marks names bound more than once."""
    names: dict[str, ast.expr | None] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets, value = [stmt.target], getattr(stmt, "value", None)
            value = None if isinstance(stmt, ast.AugAssign) else value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                names[target.id] = None if target.id in names else value
    return names


def _value(expr: ast.expr, names: dict, seen: frozenset = frozenset()) -> str | list | None:
    """The string or list of strings `expr` evaluates to, or None when it cannot be read."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, (ast.List, ast.Tuple)):
        items = [_value(e, names, seen) for e in expr.elts]
        return items if all(isinstance(i, str) for i in items) else None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        left, right = _value(expr.left, names, seen), _value(expr.right, names, seen)
        return left + right if type(left) is type(right) and left is not None else None
    if isinstance(expr, ast.Name) and names.get(expr.id) is not None and expr.id not in seen:
        return _value(names[expr.id], names, seen | {expr.id})
    return None

"""DSL adapters behind one registry. Standard library and torch only (imported by the harness)."""

from __future__ import annotations

import importlib

from kernelgraph.tools.dsl.base import CompileReport, DslAdapter, LaunchCounter, NativeSource

# name -> "module:Class". Adding a DSL is one line here plus its module and prompts/dsl/<name>/.
_REGISTRY: dict[str, str] = {
    "triton": "kernelgraph.tools.dsl.triton:TritonAdapter",
    "cpp": "kernelgraph.tools.dsl.cpp:CppAdapter",
    "cuda": "kernelgraph.tools.dsl.cuda:CudaAdapter",
    "tilelang": "kernelgraph.tools.dsl.tilelang:TileLangAdapter",
}
_LOADED: dict[str, DslAdapter] = {}


def names() -> list[str]:
    return list(_REGISTRY)


def register(name: str, target: str) -> None:
    """Register an adapter class given as "module:Class"."""
    _REGISTRY[name] = target
    _LOADED.pop(name, None)


def get_adapter(name: str) -> DslAdapter:
    if name not in _REGISTRY:
        raise KeyError(f"unknown DSL {name!r}; known: {', '.join(_REGISTRY)}")
    if name not in _LOADED:
        module_name, class_name = _REGISTRY[name].split(":")
        _LOADED[name] = getattr(importlib.import_module(module_name), class_name)()
    return _LOADED[name]


__all__ = [
    "CompileReport",
    "DslAdapter",
    "LaunchCounter",
    "NativeSource",
    "get_adapter",
    "names",
    "register",
]

"""Static anti-cheating checks on a candidate's Python source. Standard library only.

Candidates are hostile: they call PyTorch instead of writing a kernel, fall back to torch when the
kernel fails, reach for the reference, or try to leave the sandbox. These `ast` checks are the
cheap first line; the runtime ATen recorder (`op_policy`) and the judge catch what static analysis
cannot (tensor arithmetic with `+ - * /`, modules iterated out of containers, names built at run
time).

Torch compute is judged by where it runs: anywhere in the module except directly in a class's
`__init__` (weights may be prepared there) and except tensor methods and `@` inside DSL kernel
bodies (`@triton.jit`, `@tilelang.jit`, `@T.prim_func`), where they are the DSL's own.

Rule ids are stable (`RULES`). A `syntax` finding means the file does not parse: the harness maps
it to `compile_error`, every other finding to `rejected`. Messages carry no line number: the
caller prints `Finding.line` beside them.
"""

from __future__ import annotations

import ast

from kernelgraph.tools.harness.static_rules import (  # noqa: F401 - Finding and RULES are re-exported
    _ATTR_FUNCS,
    _BUILTIN_RULES,
    _COMMON_MODULES,
    _EXT_BUILDERS,
    _FILE_METHODS,
    _FORBIDDEN_ATTRS,
    _HOST_METHODS,
    _HOST_TENSOR_BUILDERS,
    _KERNEL_DECORATORS,
    _MAIN_EXEMPT,
    _MODULE_CALLS,
    _MODULE_RULES,
    _PATH_GROUPS,
    _REFERENCE_HINTS,
    _REFERENCE_NAMES,
    _SHARED_METHODS,
    _TORCH_MODULES,
    COMPUTE,
    DSL_MODULES,
    HEAVY,
    IMPORT,
    INIT_REENTRY,
    INTROSPECTION,
    MONKEYPATCH,
    NO_MODELNEW,
    NOT_DSL,
    POLICIES,
    REFERENCE,
    RULES,
    SYNTAX,
    TORCH_COMPUTE,
    TORCH_FALLBACK,
    Finding,
    _called,
    _chain,
    _handler_acts,
    _is_value,
    _lit_getattr,
    _nn_kind,
    _only_lookup_errors,
    _torch_kind,
    method_kind,
)
from kernelgraph.tools.harness.static_symbols import Symbols


def check_python(source: str, dsl: str, policy: str) -> list[Finding]:
    """All findings for a candidate's source, sorted by line; empty means it may run."""
    if dsl not in DSL_MODULES or policy not in POLICIES:
        raise ValueError(f"unknown dsl {dsl!r} or policy {policy!r}")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes
        line = getattr(exc, "lineno", None)
        return [Finding(SYNTAX, f"the file does not parse: {getattr(exc, 'msg', exc)}", line)]
    checker = _Checker(tree, dsl, policy == "hybrid")
    checker.run()
    return sorted(checker.findings, key=lambda f: (f.line or 0, f.rule))


class _Checker(Symbols, ast.NodeVisitor):
    def __init__(self, tree: ast.Module, dsl: str, hybrid: bool) -> None:
        super().__init__(tree)
        self.dsl, self.hybrid = dsl, hybrid
        self.findings: list[Finding] = []
        self.in_init = self.in_kernel = self.in_main = False
        calls = lambda f: [c for c in ast.walk(f) if isinstance(c, ast.Call)]  # noqa: E731
        self.computing_classes = {  # local classes whose __init__ computes with torch
            name
            for name, cls in self.classes.items()
            for f in cls.body
            if getattr(f, "name", "") == "__init__"
            and any(self._call_kind(c.func)[0] for c in calls(f))
        }

    def add(self, rule: str, node: ast.AST | None, message: str) -> None:
        finding = Finding(rule, message, getattr(node, "lineno", None))
        if not (self.in_main and rule in _MAIN_EXEMPT) and finding not in self.findings:
            self.findings.append(finding)

    def run(self) -> None:
        model = self.classes.get("ModelNew")
        names = {getattr(n, "name", None) for n in model.body} if model else set()
        names |= {getattr(t, "id", None) for n in getattr(model, "body", []) for t in getattr(n, "targets", [])}  # fmt: skip
        if model is None:
            self.add(NO_MODELNEW, None, "the file defines no top-level class ModelNew")
        elif "forward" not in names:
            self.add(NO_MODELNEW, model, "class ModelNew has no forward method")
        self.forward_path = self._forward_functions(model)
        self.init_helpers = self._init_helpers()
        self.visit(self.tree)

    # --- imports
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._check_import(node, a.name, None)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            self.add(REFERENCE, node, "relative imports can reach the task's files")
            return
        for a in node.names:
            if a.name == "*":
                self.add(IMPORT, node, f"`from {node.module} import *` hides what is used")
            else:
                self._check_import(node, node.module, a.name)

    def _allowed(self, module: str) -> bool:
        prefixes = DSL_MODULES[self.dsl]
        return module in _COMMON_MODULES or any(
            module == p or module.startswith(p + ".") for p in prefixes
        )

    def _check_import(self, node: ast.AST, module: str, name: str | None) -> None:
        full = f"{module}.{name}" if name else module
        parts = module.split(".")
        if name in _REFERENCE_NAMES or _REFERENCE_HINTS.intersection(parts):
            self.add(REFERENCE, node, f"imports {full}: candidates must not reach the reference")
        elif parts[0] in _MODULE_RULES:
            self.add(_MODULE_RULES[parts[0]], node, f"imports {module}, which is not allowed")
        elif self._path_rule(full):
            rule, why = self._path_rule(full)
            self.add(rule, node, f"imports {full}: {why}")
        elif not (self._allowed(module) or (name and self._allowed(full))):
            self.add(IMPORT, node, f"{module} is not on the import allow-list for dsl {self.dsl}")

    def _path_rule(self, path: str) -> tuple[str, str] | None:
        for rule, why, prefixes in _PATH_GROUPS:
            if any(path == p or path.startswith(p + ".") for p in prefixes):
                return rule, why
        parts = path.split(".")
        for part in parts[1:]:
            if part in _MODULE_RULES:
                return _MODULE_RULES[part], f"reaches the {part} module"
        if parts[0] == "torch" and any(p[:1] == "_" and p[:2] != "__" for p in parts[1:]):
            return INTROSPECTION, "private torch API"
        if path.startswith("torch.utils.cpp_extension"):
            if self.dsl not in ("cuda", "cpp"):
                return NOT_DSL, f"C++ extensions are not the {self.dsl} DSL"
            if len(parts) > 3 and parts[3] not in ("load_inline", "load"):
                return NOT_DSL, "only load_inline and load are allowed"
        return None

    # --- scopes
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for child in [*node.decorator_list, node.args, node.returns]:
            if child is not None:
                self.visit(child)
        decorators = {self.resolve(getattr(d, "func", d)) for d in node.decorator_list}
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.add(INTROSPECTION, node, f"defines {node.name}, which intercepts torch calls")
        saved = (self.in_init, self.in_kernel)
        method = isinstance(self.parent.get(node), ast.ClassDef)
        self.in_init = (method and node.name == "__init__") or node in self.init_helpers
        self.in_kernel = self.in_kernel or bool(decorators & _KERNEL_DECORATORS)
        for stmt in node.body:
            self.visit(stmt)
        self.in_init, self.in_kernel = saved

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.AST) -> None:
        """Lambdas and class bodies inside __init__ run later: they are checked in full."""
        saved, self.in_init = self.in_init, False
        self.generic_visit(node)
        self.in_init = saved

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            path = self.resolve(base)
            if path and _torch_kind(path) == "module":
                kind = _nn_kind(path.split(".")[-1])
                self._compute(base, kind, f"subclassing {path} (its forward)")
        self.visit_Lambda(node)

    def visit_If(self, node: ast.If) -> None:
        """A `__main__` block never runs when the harness imports the file."""
        main = ast.unparse(node.test) == "__name__ == '__main__'" and "__name__" not in self.defined
        self.visit(node.test)
        saved, self.in_main = self.in_main, self.in_main or main
        for stmt in node.body:
            self.visit(stmt)
        self.in_main = saved
        for stmt in node.orelse:
            self.visit(stmt)

    # --- names and attributes
    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if not isinstance(node.ctx, ast.Load):
            if name == "__name__":
                self.add(INTROSPECTION, node, "assigns __name__")
            return
        if name in _BUILTIN_RULES and name not in self.aliases:  # even if rebound: open = open
            self.add(_BUILTIN_RULES[name], node, f"uses the builtin {name}")
        elif name in _REFERENCE_NAMES and name not in self.defined | self.aliases.keys():
            self.add(REFERENCE, node, f"refers to {name}, which belongs to the reference")
        if name == "ModelNew" and not _called(self.parent.get(node), "super"):
            self.add(INIT_REENTRY, node, "uses ModelNew itself; __init__ must not run in forward")
        if self._maximal(node):
            self._check_chain(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _FORBIDDEN_ATTRS:
            self.add(INTROSPECTION, node, f"accesses .{node.attr}")
        if node.attr == "__init__" and not _called(node.value, "super"):
            self.add(INIT_REENTRY, node, "calls __init__ outside super().__init__()")
        if node.attr in _FILE_METHODS:
            self.add(REFERENCE, node, f".{node.attr}() accesses files")
        if not isinstance(node.ctx, ast.Load):
            self._monkeypatch(node, node, "assigns an attribute of")
        if self._maximal(node):
            self._check_chain(node)
        self.generic_visit(node)

    def _monkeypatch(self, node: ast.AST, target: ast.AST, what: str) -> None:
        root = (_chain(target) or [""])[0]
        if root in self.aliases or root in self.top_funcs:
            self.add(MONKEYPATCH, node, f"{what} {root}")

    def _check_chain(self, node: ast.AST) -> None:
        """A whole dotted name: forbidden paths, and torch functions passed around as values."""
        path = self.resolve(node)
        found = self._path_rule(path) if path else None
        parent = self.parent.get(node)
        if found:
            self.add(found[0], node, f"{path}: {found[1]}")
        elif not path or (isinstance(parent, ast.Call) and parent.func is node):
            return
        elif path in _TORCH_MODULES:
            self.add(INTROSPECTION, node, f"passes the module {path} around as a value")
        elif _torch_kind(path) in (HEAVY, COMPUTE) and not _is_value(path.split(".")[-1]):
            kind = _torch_kind(path)
            if not (self.hybrid and kind == HEAVY):
                self.add(
                    TORCH_COMPUTE, node, f"passes {path} around as a value; call a kernel instead"
                )

    # --- calls and operators
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id not in self.defined:
            self._check_builtin_call(node, func.id)
        kind, label = self._call_kind(func)
        if kind == "module":
            if not self.in_init:
                self.add(TORCH_COMPUTE, node, f"constructs {label} outside __init__")
        elif kind and not self.in_init:
            self._compute(node, kind, label)
        if not (self.in_init or self.in_kernel):
            self._check_host_roundtrip(node, func)
        if getattr(func, "id", None) in self.computing_classes and not self.in_init:
            self.add(INIT_REENTRY, node, f"constructs {func.id}, whose __init__ runs torch ops")
        if _lit_getattr(node) and self._maximal(node):
            self._check_chain(node)
        self.generic_visit(node)

    def _check_host_roundtrip(self, node: ast.Call, func: ast.AST) -> None:
        """Tensor data pulled into Python (or Python data made a tensor) is host compute."""
        path = self.resolve(func) or ""
        attr = func.attr if isinstance(func, ast.Attribute) else ""
        if attr in _HOST_METHODS and not self._extension(func.value):
            self.add(NOT_DSL, node, f".{attr}() moves tensor data into Python to compute there")
        elif path in _HOST_TENSOR_BUILDERS:
            self.add(NOT_DSL, node, f"{path} builds a tensor from host data outside __init__")

    def _check_builtin_call(self, node: ast.Call, name: str) -> None:
        if name in ("setattr", "delattr") and node.args:
            self._monkeypatch(node, node.args[0], f"{name} on")
        if name in _ATTR_FUNCS and len(node.args) > 1:
            key = node.args[1]
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                if getattr(node.args[0], "id", None) != "self":
                    self.add(INTROSPECTION, node, f"{name} with a computed attribute name")
            elif key.value in _FORBIDDEN_ATTRS:
                self.add(INTROSPECTION, node, f"{name} of {key.value}")
        if name == "type" and len(node.args) == 1 and getattr(node.args[0], "id", "") == "self":
            self.add(INIT_REENTRY, node, "type(self) can re-run __init__ from forward")

    def _compute(self, node: ast.AST, kind: str, label: str) -> None:
        if kind == HEAVY and self.hybrid:
            return
        what = "a PyTorch library op (allowed only by the hybrid policy)" if kind == HEAVY else (
            "PyTorch compute")  # fmt: skip
        self.add(TORCH_COMPUTE, node, f"{label} is {what}; write it as a {self.dsl} kernel")

    def _call_kind(self, func: ast.AST) -> tuple[str | None, str]:
        """(None, HEAVY, COMPUTE or "module", label) for what a call's callee computes."""
        path = self.resolve(func)
        if path:
            if path in ("operator.matmul", "operator.imatmul"):
                return HEAVY, path
            return (None if self._path_rule(path) else _torch_kind(path)), path
        chain = _chain(func) or []
        if len(chain) >= 2 and chain[0] == "self" and chain[1] in self.module_attrs:
            cls = self.module_attrs[chain[1]]
            if len(chain) == 2 or chain[2] in _MODULE_CALLS:
                return _nn_kind(cls), f"self.{chain[1]} (nn.{cls})"
        if isinstance(func, ast.Call):  # nn.Linear(4, 4)(x)
            inner = self.resolve(func.func)
            if inner and _torch_kind(inner) == "module":
                return _nn_kind(inner.split(".")[-1]), f"calling {inner}(...)"
        if isinstance(func, ast.Attribute) or _lit_getattr(func):  # x.sum(), getattr(x, "sum")
            recv, attr = (func.value, func.attr) if isinstance(func, ast.Attribute) else (
                func.args[0], func.args[1].value)  # fmt: skip
            if not (self.in_kernel or self._extension(recv) or attr in _SHARED_METHODS):
                return method_kind(attr), f".{attr}()"
        return None, ""

    def _extension(self, recv: ast.AST) -> bool:
        """Whether `recv` is a built extension (`_lib`, `self.mod`, `_get_lib()`), not a tensor."""
        if isinstance(recv, ast.Call):
            return (_chain(recv.func) or [""])[-1] in self.ext_funcs
        if isinstance(recv, ast.Subscript):
            return (*(_chain(recv.value) or ["?"]), "[]") in self.ext_handles
        return tuple(_chain(recv) or ()) in self.ext_handles

    def visit_BinOp(self, node: ast.BinOp | ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult) and not (self.in_kernel or self.in_init):
            self._compute(node, HEAVY, "the @ operator (a matmul)")
        self.generic_visit(node)

    visit_AugAssign = visit_BinOp

    # --- try/except
    def visit_Try(self, node: ast.Try) -> None:
        scope, in_forward = node, False
        while scope is not None and not in_forward:
            in_forward = scope in self.forward_path
            scope = self.parent.get(scope)
        for handler in node.handlers:
            calls = [n for s in handler.body for n in ast.walk(s) if isinstance(n, ast.Call)]
            kinds = {self._call_kind(c.func)[0] for c in calls}
            torchy = COMPUTE in kinds or (HEAVY in kinds and not self.hybrid)
            broad = not _only_lookup_errors(handler.type)
            if torchy or (in_forward and broad and _handler_acts(handler.body)):
                self.add(TORCH_FALLBACK, handler, "this except handler falls back instead of "
                         "failing; let kernel errors propagate")  # fmt: skip
        self.generic_visit(node)

    visit_TryStar = visit_Try

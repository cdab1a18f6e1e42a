"""What a candidate's module binds: import aliases, names it defines, submodules and extension
handles kept on `self`, the functions reachable from `ModelNew.forward`, and the helpers that
only __init__ calls. The static
checker (static_checks.py) reads a module through these. Standard library only."""

from __future__ import annotations

import ast

from kernelgraph.tools.harness.static_rules import (
    _ATTR_FUNCS,
    _EXT_BUILDERS,
    _called,
    _chain,
    _torch_kind,
)

# nn.Module methods torch itself calls on every forward: overriding one runs code at run time
_RUN_TIME_NAMES = frozenset(("forward", "_call_impl", "_wrapped_call_impl", "_slow_forward"))


class Symbols:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parent = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        self.top_funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.aliases: dict[str, str] = {}  # local name -> dotted import path
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    root = a.name.split(".")[0]
                    self.aliases[a.asname or root] = a.name if a.asname else root
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        self.defined = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
        self.module_attrs: dict[str, str] = {}  # self.X = nn.Linear(...) -> {"X": "Linear"}
        self.class_attrs: dict[str, str] = {}  # self.X = LocalClass(...) -> {"X": "LocalClass"}
        self.ext_handles: set[tuple[str, ...]] = set()  # (mod,) or (self, mod) = load_inline(...)
        for _ in range(2):  # `mm = torch.mm`, then `f = mm`
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.defined.add(node.name)
                elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    self.defined.add(node.id)
                elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                    self._bind(node.targets[0], node.value)
        calls = lambda f: [c for c in ast.walk(f) if isinstance(c, ast.Call)]  # noqa: E731
        self.ext_funcs = {  # functions that build (and so may return) an extension
            f.name
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef)
            and any(self.resolve(c.func) in _EXT_BUILDERS for c in calls(f))
        }

    def _bind(self, target: ast.AST, value: ast.AST) -> None:
        tchain, path = _chain(target), self.resolve(value)
        if isinstance(target, ast.Subscript):  # self._kernels[key] = build_library(...)
            tchain = [*(_chain(target.value) or ["?"]), "[]"]
        if isinstance(target, ast.Name) and path:
            self.aliases.setdefault(target.id, path)
        if tchain and tuple(_chain(value) or ()) in self.ext_handles:  # self.ext = _ext
            self.ext_handles.add(tuple(tchain))
        if not (tchain and isinstance(value, ast.Call)):
            return
        func = self.resolve(value.func)
        if func in _EXT_BUILDERS:
            self.ext_handles.add(tuple(tchain))
        if len(tchain) == 2 and tchain[0] == "self":
            if func and _torch_kind(func) == "module":
                self.module_attrs[tchain[1]] = func.split(".")[-1]
            elif getattr(value.func, "id", None) in self.classes:
                self.class_attrs[tchain[1]] = value.func.id

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted import path an expression names (`F.relu` -> torch.nn.functional.relu)."""
        parts = _chain(node)
        if parts and parts[0] in self.aliases:
            return ".".join([self.aliases[parts[0]], *parts[1:]])
        return None

    def _forward_functions(self, model: ast.ClassDef | None) -> set[ast.AST]:
        """Functions reachable from ModelNew.forward, for the try/except rule."""
        methods = lambda c: [n for n in c.body if isinstance(n, ast.FunctionDef)]  # noqa: E731
        own = {n.name: n for n in methods(model)} if model else {}
        todo, seen = [own["forward"]] if "forward" in own else [], set()
        while todo:
            fn = todo.pop()
            if fn in seen:
                continue
            seen.add(fn)
            for n in ast.walk(fn):
                if isinstance(n, ast.Name) and n.id in self.top_funcs:
                    todo.append(self.top_funcs[n.id])
                elif isinstance(n, ast.Name) and n.id in self.classes:
                    todo.extend(methods(self.classes[n.id]))
                elif isinstance(n, ast.Attribute) and getattr(n.value, "id", None) == "self":
                    if n.attr in own:
                        todo.append(own[n.attr])
                    elif n.attr in self.class_attrs:
                        todo.extend(methods(self.classes[self.class_attrs[n.attr]]))
        return seen

    def _init_helpers(self) -> set[ast.AST]:
        """Functions that run only while a module is built, checked as __init__ is: ResNet's
        `_make_layer`, Swin's `to_2tuple`. Each is undecorated, never passed around (every use
        of its name is a direct call), and called only from __init__ methods or other such
        helpers, at least once. Names torch calls by itself at forward time never qualify, nor do
        generators, whose body runs when they are iterated, not when they are called."""
        funcs: dict[str, list[ast.FunctionDef]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef) and node.name not in _RUN_TIME_NAMES:
                generator = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(node))
                if not (node.name.startswith("__") or node.decorator_list or generator):
                    funcs.setdefault(node.name, []).append(node)
        uses: dict[str, list[ast.AST]] = {name: [] for name in funcs}
        for node in ast.walk(self.tree):
            name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
            if name in uses and isinstance(node, (ast.Attribute, ast.Name)):
                uses[name].append(node)
        helpers = {name for name, found in funcs.items() if uses[name]}
        while True:
            ok = {n for n in helpers if all(self._called_from_init(u, helpers) for u in uses[n])}
            if ok == helpers:
                return {f for name in helpers for f in funcs[name]}
            helpers = ok

    def _called_from_init(self, use: ast.AST, helpers: set[str]) -> bool:
        call = self.parent.get(use)
        if not (isinstance(call, ast.Call) and call.func is use):
            return False  # passed around: it may run anywhere
        scope = self.parent.get(call)
        while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.Lambda)):
            scope = self.parent.get(scope)
        if not isinstance(scope, ast.FunctionDef):
            return False  # module level, a class body or a lambda: not while building
        in_class = isinstance(self.parent.get(scope), ast.ClassDef)
        return (in_class and scope.name == "__init__") or scope.name in helpers

    def _maximal(self, node: ast.AST) -> bool:
        """Whether `node` is the whole dotted chain, not a prefix of a longer one."""
        p = self.parent.get(node)
        return not (isinstance(p, ast.Attribute) and p.value is node) and not (
            _called(p, *_ATTR_FUNCS) and p.args[:1] == [node]
        )

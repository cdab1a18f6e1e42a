"""The reference's `__init__`, taken from the task source for the builtin's ModelNew.

KernelBench builds `Model(*get_init_inputs())` and `ModelNew(*get_init_inputs())` each right
after `torch.manual_seed(seed)` and copies no weights: ModelNew's parameters match only if its
`__init__` creates the same submodules and parameters in the same order, drawing the same
random numbers. The robust way is to run the reference's own `__init__` body. `extract(source)`
reads it with `ast` (nothing of the task runs here) and returns:

- the signature and body of `Model.__init__`, with `super(Model, self)` and
  `nn.Module.__init__(self)` written as `super()`;
- the other methods of Model that `__init__` calls through `self` (never `forward`) and Model's
  class-level statements;
- the module-level statements those need, in source order: imports, constants, helper
  functions and classes (helper classes keep `__init__` and what it calls, not `forward`).
  `Model`, `get_inputs` and `get_init_inputs` are never copied.

It raises InitUnavailable, with the reason, when that cannot be done faithfully (no source, no
`class Model`, a base class other than nn.Module, an `__init__` that needs Model itself, runs
forward, or reads the inputs).
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

EXCLUDED = ("Model", "get_inputs", "get_init_inputs")
_MODULE_BASES = ("nn.Module", "torch.nn.Module", "Module")


class InitUnavailable(Exception):
    """The reference's __init__ cannot be reused; the message says why."""


@dataclass
class ReferenceInit:
    init: str  # `def __init__(...)`: the reference's, rewritten for ModelNew
    class_body: list[str] = field(default_factory=list)  # Model's class-level statements
    methods: list[str] = field(default_factory=list)  # Model's methods that __init__ calls
    module: list[str] = field(default_factory=list)  # module-level statements, source order
    names: set[str] = field(default_factory=set)  # names the module-level statements bind


def extract(source: str | None) -> ReferenceInit:
    if not source:
        raise InitUnavailable("the task source was not given to the builtin")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InitUnavailable(f"the task source does not parse ({exc.msg})") from None
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        raise InitUnavailable("the task source defines no top-level class Model")
    bases = [ast.unparse(b) for b in model.bases]
    if len(bases) != 1 or bases[0] not in _MODULE_BASES or model.keywords:
        raise InitUnavailable(f"Model subclasses {', '.join(bases) or 'nothing'}, not nn.Module")
    if model.decorator_list:
        raise InitUnavailable("class Model is decorated")

    methods = {n.name: n for n in model.body if isinstance(n, ast.FunctionDef)}
    init = methods.get("__init__")
    if init is None:
        init = ast.parse("def __init__(self):\n    super().__init__()").body[0]
    if init.decorator_list:
        raise InitUnavailable("Model.__init__ is decorated")
    called = _reachable(init, methods)
    if methods.get("forward") in called:
        raise InitUnavailable("Model.__init__ runs forward")
    statements = [n for n in model.body if not isinstance(n, ast.FunctionDef)]
    statements = [n for n in statements if not _is_docstring(n)]
    if any(isinstance(n, (ast.ClassDef, ast.AsyncFunctionDef)) for n in statements):
        raise InitUnavailable("class Model has nested classes or async methods")
    new_init = _Rewriter().visit(_copy(init))
    new_called = [_Rewriter().visit(_copy(n)) for n in called]
    statements = [_Rewriter().visit(_copy(n)) for n in statements]
    roots = [*statements, new_init, *new_called]
    for name in sorted(set().union(*(_free(r) for r in roots)) & set(EXCLUDED)):
        raise InitUnavailable(f"Model.__init__ refers to {name}")

    needed = _module_statements(tree, roots)
    return ReferenceInit(
        init=ast.unparse(new_init),
        class_body=[ast.unparse(n) for n in statements],
        methods=[ast.unparse(n) for n in new_called],
        module=[ast.unparse(s) for s in needed],
        names={name for s in needed for name in _bound(s)},
    )


# ---------------------------------------------------------------- rewriting


class _Rewriter(ast.NodeTransformer):
    """`super(Model, self)` -> `super()`; `nn.Module.__init__(self, ...)` -> `super().__init__()`."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id == "super"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "Model"
            and isinstance(node.args[1], ast.Name)
            and node.args[1].id == "self"
        ):
            return ast.copy_location(ast.Call(func=func, args=[], keywords=[]), node)
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "__init__"
            and ast.unparse(func.value) in _MODULE_BASES
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "self"
        ):
            init = ast.Attribute(
                value=ast.Call(func=ast.Name("super", ast.Load()), args=[], keywords=[]),
                attr="__init__",
                ctx=ast.Load(),
            )
            return ast.copy_location(ast.Call(func=init, args=[], keywords=[]), node)
        return node


def _copy(node: ast.AST) -> ast.AST:
    return ast.parse(ast.unparse(node)).body[0]


def _is_docstring(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


# ---------------------------------------------------------------- names


def _reachable(start: ast.FunctionDef, methods: dict[str, ast.FunctionDef]) -> list[ast.AST]:
    """Methods reached from `start` through `self.name` (in the order they are found)."""
    found: list[ast.AST] = []
    todo = [start]
    while todo:
        fn = todo.pop(0)
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr in methods
                and methods[node.attr] is not start
                and methods[node.attr] not in found
            ):
                found.append(methods[node.attr])
                todo.append(methods[node.attr])
    return found


def _loaded(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _free(node: ast.AST) -> set[str]:
    """The names a statement reads from the module: a function's parameters and the names it
    assigns are its own (nested scopes are not told apart: a name read in one and assigned in
    another counts as local, which only the task's own unusual code could get wrong)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = node.args
        params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
        outside = [*a.defaults, *(d for d in a.kw_defaults if d is not None)]
        outside += getattr(node, "decorator_list", [])
        body = node.body if isinstance(node.body, list) else [node.body]
        local = params | set().union(*(_stored(b) for b in body))
        inside = set().union(*(_loaded(b) for b in body)) - local
        return inside | set().union(*(_loaded(o) for o in outside))
    if isinstance(node, ast.ClassDef):
        outside = [*node.bases, *(k.value for k in node.keywords), *node.decorator_list]
        return set().union(*(_loaded(o) for o in outside), *(_free(b) for b in node.body))
    return _loaded(node)


def _stored(node: ast.AST) -> set[str]:
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {(x.asname or x.name).split(".")[0] for x in n.names}
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
    return names


def _bound(stmt: ast.stmt) -> set[str]:
    """Module-level names a top-level statement binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"}
    return _stored(stmt)


def _is_main_block(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and ast.unparse(stmt.test) in (
        "__name__ == '__main__'",
        "'__main__' == __name__",
    )


def _module_statements(tree: ast.Module, roots: list[ast.AST]) -> list[ast.stmt]:
    """The top-level statements that bind the names `roots` need, and what those need."""
    binders: dict[str, list[int]] = {}
    for i, stmt in enumerate(tree.body):
        if _is_main_block(stmt):
            continue
        for name in _bound(stmt):
            binders.setdefault(name, []).append(i)
    chosen: dict[int, ast.stmt] = {}
    todo = sorted(set().union(*(_free(r) for r in roots)))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in binders:
            continue  # a local, a builtin, or a name the task never binds (its own NameError)
        if name in EXCLUDED:
            raise InitUnavailable(f"Model.__init__ needs {name}, which belongs to the reference")
        for i in binders[name]:
            if i in chosen:
                continue
            stmt = tree.body[i]
            excluded = _bound(stmt) & set(EXCLUDED)
            if excluded:
                raise InitUnavailable(
                    f"Model.__init__ needs {name}, bound together with {', '.join(excluded)}"
                )
            chosen[i] = _strip_class(stmt) if isinstance(stmt, ast.ClassDef) else stmt
            todo += sorted(_free(chosen[i]) - seen)
    return [chosen[i] for i in sorted(chosen)]


def _strip_class(cls: ast.ClassDef) -> ast.ClassDef:
    """A helper class without what only its forward needs: `__init__`, the methods it reaches
    through `self`, and the class-level statements; never `forward`."""
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    init = methods.get("__init__")
    if init is None:
        return cls  # a plain container or a class whose base does the work: keep all of it
    kept = [init, *(m for m in _reachable(init, methods) if m.name != "forward")]
    stripped = copy.copy(cls)
    stripped.body = [
        n
        for n in cls.body
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) or any(n is k for k in kept)
    ]
    return stripped

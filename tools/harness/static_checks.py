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
from dataclasses import dataclass

from tools.harness.op_policy import COMPUTE, FREE, HEAVY, classify, method_kind


@dataclass
class Finding:
    rule: str
    message: str
    line: int | None = None


SYNTAX, NO_MODELNEW, IMPORT = "syntax", "no_modelnew", "import"
TORCH_COMPUTE, TORCH_FALLBACK, REFERENCE = "torch_compute", "torch_fallback", "reference_access"
INTROSPECTION, MONKEYPATCH, UNSAFE = "introspection", "monkeypatch", "unsafe"
SIDE_STREAM, NOT_DSL, INIT_REENTRY = "side_stream", "not_dsl", "init_reentry"
RULES = (SYNTAX, NO_MODELNEW, IMPORT, TORCH_COMPUTE, TORCH_FALLBACK, REFERENCE, INTROSPECTION,
         MONKEYPATCH, UNSAFE, SIDE_STREAM, NOT_DSL, INIT_REENTRY)  # fmt: skip
POLICIES = ("strict", "hybrid")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# fmt: off
# Imports are an allow-list; the modules of _MODULE_RULES only get a more specific rule. Those are
# also matched against every component of a resolved name, so `torch.os.system` is caught too.
_COMMON_MODULES = _words("__future__ torch torch.nn torch.nn.functional math typing dataclasses "
                         "functools itertools operator")
DSL_MODULES = {  # module prefixes each DSL may import on top of the common ones
    "triton": ("triton",), "tilelang": ("tilelang",), "cuda": ("torch.utils.cpp_extension",),
    "cpp": ("torch.utils.cpp_extension", "tools.dsl.cpp"),
}
_MODULE_RULES = {
    **dict.fromkeys(_words("ctypes subprocess multiprocessing os posix nt importlib socket ssl "
                           "urllib http requests threading _thread concurrent asyncio signal "
                           "pickle marshal shelve shutil pty runpy mmap"), UNSAFE),
    **dict.fromkeys(_words("gc inspect sys builtins traceback types weakref"), INTROSPECTION),
    **dict.fromkeys(_words("io pathlib glob tempfile fileinput linecache"), REFERENCE),
}
_REFERENCE_HINTS = _words("reference ref task tasks problem problems kernelbench harness")
_REFERENCE_NAMES = _words("Model get_inputs get_init_inputs reference ref_model reference_model")
# Resolved dotted names that are never allowed, whatever they are used for.
_PATH_GROUPS = tuple((rule, why, tuple(paths.split())) for rule, why, paths in (
    (SIDE_STREAM, "side streams and CUDA graphs hide work from the timer",
     "torch.Stream torch.cuda.Stream torch.cuda.stream torch.cuda.streams torch.cuda.set_stream "
     "torch.cuda.ExternalStream torch.cuda.StreamContext torch.cuda.graph torch.cuda.graphs "
     "torch.cuda.CUDAGraph torch.cuda.make_graphed_callables torch.cuda.graph_pool_handle"),
    (NOT_DSL, "compiles or dispatches torch ops instead of launching a kernel of the DSL",
     "torch.compile torch.jit torch._dynamo torch._inductor torch.fx torch.export torch.func "
     "torch.vmap torch.ops torch.library torch._ops torch._refs torch._prims torch._decomp "
     "torch._higher_order_ops torch.cuda.jiterator torch.utils._python_dispatch torch.overrides "
     "torch._C"),
    (REFERENCE, "reads or writes files", "torch.load torch.save torch.from_file "
     "torch.UntypedStorage.from_file torch.TypedStorage.from_file"),
    (UNSAFE, "reaches the network or other processes",
     "torch.hub torch.distributed torch.multiprocessing"),
    (INTROSPECTION, "looks attributes up by string", "operator.attrgetter operator.methodcaller"),
))
_FORBIDDEN_ATTRS = _words(
    "f_back f_locals f_globals f_code f_builtins tb_frame tb_next gi_frame gi_code cr_frame "
    "ag_frame __code__ __globals__ __builtins__ __subclasses__ __dict__ __bases__ __base__ __mro__ "
    "__closure__ __class__ __self__ __func__ __wrapped__ __loader__ __spec__ __getattribute__ "
    "__setattr__ __delattr__ __reduce__ __reduce_ex__ __torch_function__ __torch_dispatch__")
_BUILTIN_RULES = {
    **dict.fromkeys(_words("exec eval compile __import__ exit quit breakpoint"), UNSAFE),
    **dict.fromkeys(_words("globals locals vars __builtins__"), INTROSPECTION),
    **dict.fromkeys(_words("open __file__"), REFERENCE),
}
_ATTR_FUNCS = _words("getattr hasattr setattr delattr")
_FILE_METHODS = _words("read_text read_bytes write_text write_bytes")
# torch.* calls are classified like the ATen op of the same name (op_policy), except these helpers
# that run no op; tensor methods use op_policy's deny-list, since the receiver's type is unknown.
_TORCH_HELPERS = _words(
    "tensor as_tensor manual_seed seed is_tensor is_floating_point is_complex get_default_dtype "
    "no_grad inference_mode enable_grad set_grad_enabled is_grad_enabled promote_types "
    "result_type can_cast broadcast_shapes device finfo iinfo get_default_device")
_SHARED_METHODS = _words("add sort")  # set.add, list.sort: left to the runtime recorder
_TORCH_FREE_NAMESPACES = _words("cuda backends version utils")  # forbidden parts: _PATH_GROUPS
_NN_HOLDERS = _words("Module Parameter Buffer ParameterList ParameterDict ModuleList ModuleDict "
                     "Identity Flatten Unflatten")
_MODULE_CALLS = _words("forward __call__ _call_impl _conv_forward")
_TORCH_MODULES = _words("torch torch.nn torch.nn.functional torch.linalg torch.special torch.fft")
_DTYPE_PREFIXES = ("float", "bfloat", "int", "uint", "complex", "bool", "half", "double", "long",
                   "short", "cfloat", "cdouble", "qint", "quint")
_TORCH_VALUES = _words("inf nan pi e newaxis strided sparse_coo contiguous_format channels_last "
                       "channels_last_3d preserve_format memory_format layout dtype device")
_KERNEL_DECORATORS = _words("triton.jit triton.autotune triton.heuristics tilelang.jit "
                            "tilelang.lazy_jit tilelang.prim_func tilelang.language.prim_func "
                            "tilelang.language.macro")
_EXT_BUILDERS = _words("torch.utils.cpp_extension.load_inline torch.utils.cpp_extension.load "
                       "tools.dsl.cpp.build_library tilelang.compile")
_LOOKUP_ERRORS = _words("KeyError IndexError AttributeError LookupError ImportError "
                        "ModuleNotFoundError StopIteration")
_MAIN_EXEMPT = {TORCH_COMPUTE, TORCH_FALLBACK, INIT_REENTRY, REFERENCE}  # never runs on import
# fmt: on


def _nn_kind(cls: str) -> str:
    return (
        HEAVY
        if cls in ("Linear", "LazyLinear") or cls.startswith(("Conv", "LazyConv"))
        else COMPUTE
    )


def _torch_kind(path: str) -> str | None:
    """None (free), HEAVY, COMPUTE, or "module" (constructing a computing nn module)."""
    parts = path.split(".")
    rest = parts[1:]
    if parts[0] != "torch" or not rest or rest[0] in _TORCH_FREE_NAMESPACES:
        return None
    if len(rest) == 1 and rest[0] in _TORCH_HELPERS:
        return None
    if rest[0] == "nn":
        if len(rest) < 2 or rest[1:] == ["functional"]:
            return None
        if rest[1] == "functional":
            return HEAVY if classify(rest[2]) == HEAVY else COMPUTE
        if rest[1][:1].isupper():
            if len(rest) > 2:  # nn.Linear.forward(module, x)
                return COMPUTE if rest[2] in _MODULE_CALLS else None
            return None if rest[1] in _NN_HOLDERS else "module"
        return COMPUTE  # nn.init, nn.utils
    if rest[0] == "Tensor":
        return method_kind(rest[1]) if len(rest) > 1 else None
    if rest[0][:1].isupper():  # torch.Size, torch.Generator, dtypes
        return None
    if len(rest) > 1:  # torch.linalg.*, torch.special.*, torch.autograd.*
        return HEAVY if classify(rest[-1]) == HEAVY else COMPUTE
    kind = classify(rest[0])
    return None if kind == FREE else kind


def _is_value(last: str) -> bool:
    """Whether a torch attribute is a value (dtype, constant, class), not a compute function."""
    return not last[:1].islower() or last.startswith(_DTYPE_PREFIXES) or last in _TORCH_VALUES


def _called(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) in names


def _lit_getattr(node: ast.AST) -> bool:
    """`getattr(obj, "name")`, which is just `obj.name`."""
    return (
        _called(node, "getattr")
        and len(node.args) in (2, 3)
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    )


def _chain(node: ast.AST) -> list[str] | None:
    """`a.b.c` (or `getattr(a, "b").c`) as ["a", "b", "c"]; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute) or _lit_getattr(node):
        parts.append(node.attr if isinstance(node, ast.Attribute) else node.args[1].value)
        node = node.value if isinstance(node, ast.Attribute) else node.args[0]
    return [node.id, *parts[::-1]] if isinstance(node, ast.Name) else None


def _only_lookup_errors(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Tuple):
        return all(_only_lookup_errors(e) for e in node.elts)
    return isinstance(node, ast.Name) and node.id in _LOOKUP_ERRORS


def _handler_acts(body: list[ast.stmt]) -> bool:
    """Whether an except body calls or returns anything (re-raising is fine)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Call, ast.Return)):
            return True
        if not isinstance(node, ast.Raise):
            stack.extend(ast.iter_child_nodes(node))
    return False


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


class _Checker(ast.NodeVisitor):
    def __init__(self, tree: ast.Module, dsl: str, hybrid: bool) -> None:
        self.tree, self.dsl, self.hybrid = tree, dsl, hybrid
        self.findings: list[Finding] = []
        self.parent = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        self.in_init = self.in_kernel = self.in_main = False
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
        self.computing_classes = {  # local classes whose __init__ computes with torch
            name
            for name, cls in self.classes.items()
            for f in cls.body
            if getattr(f, "name", "") == "__init__"
            and any(self._call_kind(c.func)[0] for c in calls(f))
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
        self.visit(self.tree)

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

    def _maximal(self, node: ast.AST) -> bool:
        """Whether `node` is the whole dotted chain, not a prefix of a longer one."""
        p = self.parent.get(node)
        return not (isinstance(p, ast.Attribute) and p.value is node) and not (
            _called(p, *_ATTR_FUNCS) and p.args[:1] == [node]
        )

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
        self.in_init = isinstance(self.parent.get(node), ast.ClassDef) and node.name == "__init__"
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
        if getattr(func, "id", None) in self.computing_classes and not self.in_init:
            self.add(INIT_REENTRY, node, f"constructs {func.id}, whose __init__ runs torch ops")
        if _lit_getattr(node) and self._maximal(node):
            self._check_chain(node)
        self.generic_visit(node)

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

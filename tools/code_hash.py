"""A hash of a kernel file that ignores what cannot change what it does: comments, docstrings
and layout. Two candidates with the same hash are the same kernel, and one is never evaluated
twice. Standard library only."""

from __future__ import annotations

import ast
import hashlib


def normalized_code_hash(code: str) -> str:
    """sha256 of the code as the AST sees it (docstrings dropped), or of its non-blank,
    non-comment lines when it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        lines = (line.strip() for line in code.splitlines())
        text = "\n".join(line for line in lines if line and not line.startswith("#"))
    else:
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and _is_docstring(body[0]):
                node.body = body[1:] or [ast.Pass()]
        text = ast.unparse(tree)
    return hashlib.sha256(text.encode()).hexdigest()


def _is_docstring(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )

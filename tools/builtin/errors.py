"""What the builtin model says when it cannot write a kernel: which op, and what to configure."""

from __future__ import annotations

CONFIGURE = (
    "configure an LLM (--model NAME --base-url URL, key in KERNELGRAPH_API_KEY or OPENAI_API_KEY)"
)


class Unsupported(Exception):
    """An op (or a use of one) the builtin templates do not cover."""

    def __init__(self, op: str, why: str = "", hybrid_ok: bool = False) -> None:
        self.op, self.why, self.hybrid_ok = op, why, hybrid_ok
        super().__init__(self.message())

    def message(self) -> str:
        detail = f" ({self.why})" if self.why else ""
        hint = (
            " or run with --policy hybrid to keep it as a library call," if self.hybrid_ok else ""
        )
        return (
            f"the builtin model cannot write {self.op}{detail}: {CONFIGURE},{hint} "
            f"or write the kernel yourself and check it with `kernelgraph evaluate`."
        )


class FusionError(Exception):
    """A group of ops that cannot become one kernel; the caller splits it."""

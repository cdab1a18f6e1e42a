"""Torch dispatch modes that do not import torch._dynamo. Standard library and torch only.

torch wraps every TorchDispatchMode's `__torch_dispatch__` in `torch._disable_dynamo`, which
imports torch._dynamo on the mode's first op: 2-3 s of CPU in each harness worker that records
ops (candidate guards, judge, prepare's FLOP count, analysis). Our modes never run under
torch.compile (candidates may not call it), so the wrapper guards nothing for us.
"""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode


class PlainDispatchMode(TorchDispatchMode):
    """A TorchDispatchMode whose subclasses' `__torch_dispatch__` torch leaves unwrapped."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # torch's documented opt-out of the wrapper
        return False


def skip_dynamo_wrapper(mode_class: type) -> None:
    """Make torch's own `mode_class` (e.g. the flop counter's) call its `__torch_dispatch__`
    directly: torch's lazy wrapper calls the function cached on the original as
    `__dynamo_disable` and imports dynamo only to make one. Where a torch version wraps
    differently, nothing changes (the wrapper still works, only slower)."""
    original = getattr(mode_class.__dict__.get("__torch_dispatch__"), "__wrapped__", None)
    if callable(original) and getattr(original, "__dynamo_disable", None) is None:
        setattr(original, "__dynamo_disable", original)

"""A module's buffers as a side effect of forward (batch norm's running statistics in training
mode, counters): restored to their values at construction before each seed, so every seed's
update starts from the same state on every side, then compared with the reference's. Torch only.
"""

from __future__ import annotations

import torch


class BufferState:
    """The buffers named `names` (all, when None) as they were when this was made; a host copy,
    since buffers are small and the device's memory belongs to the seed being run."""

    def __init__(self, model: torch.nn.Module, names: list[str] | None = None) -> None:
        wanted = None if names is None else set(names)
        self.initial = {
            name: buffer.detach().to("cpu", copy=True)
            for name, buffer in model.named_buffers()
            if wanted is None or name in wanted
        }

    def restore(self, model: torch.nn.Module) -> None:
        with torch.no_grad():
            for name, buffer in model.named_buffers():
                if name in self.initial:
                    buffer.copy_(self.initial[name])

    def changed(self, model: torch.nn.Module) -> list[list]:
        """[[name, value]] of every tracked buffer whose bytes differ from the initial ones."""
        return [
            [name, buffer.detach().clone()]
            for name, buffer in model.named_buffers()
            if name in self.initial and not _same_bytes(buffer, self.initial[name])
        ]

    def current(self, model: torch.nn.Module) -> list[list]:
        """[[name, value]] of every tracked buffer the model has."""
        return [
            [name, buffer.detach().clone()]
            for name, buffer in model.named_buffers()
            if name in self.initial
        ]


def _same_bytes(buffer: torch.Tensor, initial: torch.Tensor) -> bool:
    now = buffer.detach().to("cpu")
    if now.shape != initial.shape or now.dtype != initial.dtype:
        return False
    return torch.equal(_raw(now), _raw(initial))  # bytes, so NaN equals NaN


def _raw(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1)

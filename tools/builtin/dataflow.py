"""Who reads each traced value: view chains back to their producer, and the live ops.

An op is live when its results reach a model output, a module-state write-back, or an in-place
or state-updating op. Only live ops count as readers, so a dropout mask the builtin no longer
multiplies in (and what made it) keeps nothing else alive.
"""

from __future__ import annotations

from typing import Any

from kernelgraph.tools.analysis.ops import NO_COMPUTE, VIEW
from kernelgraph.tools.builtin.op_support import tensor_refs

Key = tuple[str, int]  # (producer label, output slot)


class DataFlow:
    def __init__(self, ops: list[dict[str, Any]], outputs: list[dict], written_back) -> None:
        self.ops = ops
        self.model_outputs: set[Key] = {
            self.chain(o["ref"])[0] for o in outputs if "ref" in o
        } | set(written_back)  # written back into module state: needed like outputs
        self.readers = self._live_readers()

    def chain(self, ref: dict) -> tuple[Key, list[tuple[int, int]]]:
        """(producer key, the views from the producer to ref as (op index, output slot): split
        and unbind make several) for a tensor ref."""
        label, slot, views = ref["t"], ref.get("o", 0), []
        while label.startswith("op:") and self.ops[int(label[3:])].get("kind") == VIEW:
            index = int(label[3:])
            views.append((index, slot))
            source = self.ops[index]["argv"][0]
            label, slot = source["t"], source.get("o", 0)
        return (label, slot), views[::-1]

    def needed_outside(self, key: Key, members: set[int]) -> bool:
        return key in self.model_outputs or bool(self.readers.get(key, set()) - members)

    def _live_readers(self) -> dict[Key, set[int]]:
        reads = {
            i: {self.chain(ref)[0] for ref in tensor_refs(op)}
            for i, op in enumerate(self.ops)
            if op.get("kind") not in NO_COMPUTE
        }
        # a worklist, not one reverse pass: an op prepare_ops appended (a split loss's rows,
        # batch norm's statistics) is read by an op before it in the list
        side_effects = [
            i for i in reads if self.ops[i]["op"].endswith("_") or self.ops[i].get("state")
        ]
        pending = [label for label, _ in self.model_outputs] + [f"op:{i}" for i in side_effects]
        live: set[int] = set()
        while pending:
            label = pending.pop()
            index = int(label[3:]) if label.startswith("op:") else -1
            if index in reads and index not in live:
                live.add(index)
                pending += [source for source, _ in reads[index]]
        readers: dict[Key, set[int]] = {}
        for i in live:
            for key in reads[i]:
                readers.setdefault(key, set()).add(i)
        return readers

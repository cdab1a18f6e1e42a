"""Validated verdicts for the graph's nodes.

The schema is defined once, as the harness's standard-library dataclasses
(tools/harness/verdict.py, which must run on bare GPU boxes); pydantic validates data coming back
from a worker or from the store against those same classes.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from kernelgraph.tools.harness.verdict import Verdict

_VERDICT = TypeAdapter(Verdict)


def validate_verdict(data: dict[str, Any]) -> Verdict:
    """A Verdict from Verdict.to_dict() or a stored evaluation's JSON; raises on bad data."""
    return _VERDICT.validate_python(data)

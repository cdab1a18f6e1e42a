"""Static checks before anything runs, cheapest first. Standard library only."""

from __future__ import annotations

from dataclasses import dataclass

from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.native_checks import check_native
from kernelgraph.tools.harness.static_checks import Finding, check_python
from kernelgraph.tools.harness.verdict import CheckName

SYNTAX_RULE = "syntax"


@dataclass
class StaticFailure:
    check: str  # CheckName.STATIC_PYTHON or CheckName.STATIC_NATIVE
    findings: list[Finding]

    @property
    def is_syntax_error(self) -> bool:
        return any(f.rule == SYNTAX_RULE for f in self.findings)

    def message(self) -> str:
        return "; ".join(
            f"line {f.line}: {f.message}" if f.line else f.message for f in self.findings[:5]
        )


def run_static_checks(code: str, adapter, config: EvalConfig) -> StaticFailure | None:
    findings = check_python(code, config.dsl, config.policy)
    if findings:
        return StaticFailure(CheckName.STATIC_PYTHON, findings)
    native: list[Finding] = []
    for source in adapter.native_sources(code):
        for finding in check_native(source.code, source.lang, config.policy):
            origin = f" (in {source.origin})" if source.origin else ""
            native.append(Finding(finding.rule, finding.message + origin, finding.line))
    return StaticFailure(CheckName.STATIC_NATIVE, native) if native else None

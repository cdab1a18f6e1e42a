"""What lies in the evaluation's work directory and the reference store's readable folder while
the untrusted candidate runs."""

from __future__ import annotations

import stat
from pathlib import Path

from kernelgraph.tools.harness import evaluate as evaluate_module
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.refstore import ReferenceStore


def readable_text(root: Path) -> dict[str, str]:
    texts = {}
    for path in root.rglob("*"):
        if stat.S_ISREG(path.lstat().st_mode):  # skip FIFOs and sockets
            texts[str(path.relative_to(root))] = path.read_bytes().decode(errors="replace")
    return texts


def test_no_file_holds_the_task_source_while_the_candidate_runs(cases, tmp_path, monkeypatch):
    task = cases / "tasks" / "scale_add.py"
    marker = "def get_init_inputs"
    assert marker in task.read_text()
    seen: dict[str, str] = {}
    go = evaluate_module.Evaluation.go

    def spying_go(self, pending, message):
        if pending.role == "candidate":  # alive since the start; about to read its inputs
            for folder in self.folders:  # its own, and a warm worker's
                seen.update(readable_text(folder))
            seen.update(readable_text(ReferenceStore().inputs_root))
        return go(self, pending, message)

    monkeypatch.setattr(evaluate_module.Evaluation, "go", spying_go)
    config = EvalConfig(dsl="cpp", device="cpu", seeds=1, profile=False)
    verdict = evaluate_module.evaluate(
        task, cases / "kernels" / "cpp_scale_add.py", config, EvalCache(tmp_path)
    )
    assert verdict.passed, verdict.message
    assert any(Path(name).name.startswith("inputs_") for name in seen)  # the inputs are there
    assert [name for name, text in seen.items() if marker in text] == []

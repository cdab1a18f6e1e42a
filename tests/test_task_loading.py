"""Task files and --set overrides: parsed, applied before the task runs, and refused clearly.

A broken task is the user's problem, never the candidate's: evaluate raises TaskError (exit code
2) instead of returning a verdict.
"""

from __future__ import annotations

import sys

import pytest

from kernelgraph.tools.harness.verdict import INCORRECT, PASSED, TaskError, UsageError
from kernelgraph.tools.task import TaskSource, parse_sets


@pytest.fixture
def load(monkeypatch):
    """Run a task's effective source in this process (our own task files only)."""
    monkeypatch.delitem(sys.modules, "kernelgraph_task", raising=False)

    def _load(task: TaskSource):
        module = task.load_module()
        monkeypatch.delitem(sys.modules, "kernelgraph_task", raising=False)
        return module

    return _load


# ---------------------------------------------------------------- --set parsing


@pytest.mark.parametrize(
    "items, expected",
    [
        (None, {}),
        (["N=8"], {"N": 8}),
        (["SHAPE=(2, 3)"], {"SHAPE": (2, 3)}),
        ([" N = 8 ", "SCALE=-0.5"], {"N": 8, "SCALE": -0.5}),
        (["MODE='fast'", "BIAS=True"], {"MODE": "fast", "BIAS": True}),
        (["N=8", "N=16"], {"N": 16}),  # the last one wins, as on a command line
    ],
)
def test_set_values_are_python_literals(items, expected):
    assert parse_sets(items) == expected


@pytest.mark.parametrize(
    "item, fragment",
    [
        ("N=abc", "not a Python literal"),
        ("N=(1, 2", "not a Python literal"),
        ("N=2**10", "not a Python literal"),
        ("N", "NAME=VALUE"),
        ("=8", "NAME=VALUE"),
        ("2N=8", "NAME=VALUE"),
    ],
)
def test_bad_set_is_a_usage_error(item, fragment):
    with pytest.raises(UsageError, match="--set") as info:
        parse_sets([item])
    assert fragment in str(info.value)


# ---------------------------------------------------------------- overrides applied


def test_derived_constants_follow_an_override(cases, load):
    task = TaskSource.read(cases / "tasks/derived.py", {"N": 8})
    assert task.constants == {"N": 8, "M": 16, "SHAPE": (4, 8)}  # M = N * 2 follows N
    module = load(task)
    assert (module.N, module.M) == (8, 16)
    assert module.get_inputs()[0].shape == (16,)


def test_tuple_override_reshapes_inputs(cases, load):
    task = TaskSource.read(cases / "tasks/derived.py", {"SHAPE": (2, 3)})
    assert "SHAPE = (2, 3)" in task.effective_source
    module = load(task)
    assert module.get_inputs()[1].shape == (2, 3)
    assert module.M == 128  # untouched constants keep their values


def test_override_changes_the_task_hash(cases):
    path = cases / "tasks/derived.py"
    plain, small = TaskSource.read(path), TaskSource.read(path, {"N": 8})
    assert plain.hash != small.hash
    assert small.hash == TaskSource.read(path, {"N": 8}).hash
    assert plain.source == small.source  # the file itself is never rewritten


def test_override_reaches_the_workers(run_case):
    verdict = run_case("scale_add", "cpp_scale_sub", sets={"ROWS": 4})
    assert verdict.status == INCORRECT, verdict.message
    assert verdict.failure.shape == [4, 256]
    assert verdict.failure.mismatches == 4 * 256


def test_unknown_set_name_is_a_usage_error_listing_the_constants(cases):
    with pytest.raises(UsageError) as info:
        TaskSource.read(cases / "tasks/derived.py", {"ROWS": 8})
    message = str(info.value)
    assert "ROWS" in message
    assert "N=64" in message and "SHAPE=(4, 8)" in message


def test_constants_written_as_expressions_are_listed(cases):
    task = TaskSource.read(cases / "tasks/expression_constant.py")
    assert task.constants.get("N") == 2**20
    with pytest.raises(UsageError, match="N=1048576"):
        TaskSource.read(cases / "tasks/expression_constant.py", {"ROWS": 8})


# ---------------------------------------------------------------- invalid tasks


SYNTAX_ERROR_TASK = """\
import torch
import torch.nn as nn

N = 64


class Model(nn.Module)
    def forward(self, x):
        return x * 2
"""


def test_task_with_a_syntax_error_is_a_task_error(run_case, tmp_path):
    task = tmp_path / "task.py"
    task.write_text(SYNTAX_ERROR_TASK)
    with pytest.raises(TaskError, match="not valid Python.*line 7"):
        run_case(task, "cpp_scale_add")


@pytest.mark.parametrize(
    "task, fragment",
    [
        ("bad_no_get_inputs", "does not define get_inputs"),
        ("bad_import_error", "fails to import: NameError"),
        ("bad_reference_raises", "the reference raises in Model.forward: RuntimeError"),
        ("bad_nondeterministic", "different outputs for identical calls"),
    ],
)
def test_invalid_task_is_a_task_error(run_case, task, fragment):
    with pytest.raises(TaskError) as info:
        run_case(task, "cpp_scale_add")
    assert fragment in str(info.value)


def test_task_too_big_for_memory_is_refused_with_a_hint(run_case):
    with pytest.raises(TaskError) as info:
        run_case("bad_huge", "cpp_scale_add")
    message = str(info.value)
    assert "GiB" in message and "--set" in message
    assert "N=100000000000" in message  # names the constant to shrink


def test_degenerate_task_is_evaluated_with_a_warning(run_case):
    verdict = run_case("degenerate_zeros", "cpp_zeros")
    assert verdict.status == PASSED, verdict.message
    assert any("degenerate task" in w and "all zeros" in w for w in verdict.warnings)

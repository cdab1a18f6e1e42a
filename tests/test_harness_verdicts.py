"""Every verdict status, reached by a kernel built to reach it, with the failure described.

Each failing kernel in tests/cases/kernels/ has a correct sibling that must pass, so a harness
that rejects everything fails here as surely as one that accepts everything.
"""

from __future__ import annotations

import pytest
import torch

from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate
from kernelgraph.tools.harness.reference import verification_seeds
from kernelgraph.tools.harness.verdict import (
    COMPILE_ERROR,
    CRASHED,
    INCORRECT,
    PASSED,
    TIMEOUT,
    CheckName,
    Verdict,
)

FIRST_SEED = verification_seeds(2)[0]
# Checks a passing run must have gone through (not merely "no check failed").
RUNTIME_CHECKS = {
    CheckName.STATIC_PYTHON,
    CheckName.STATIC_NATIVE,
    CheckName.COMPILE,
    CheckName.RUNS,
    CheckName.KERNEL_LAUNCHED,
    CheckName.ATEN_OPS,
    CheckName.INPUTS_UNMODIFIED,
    CheckName.OUTPUT_NOT_ALIASED,
    CheckName.CORRECTNESS,
    CheckName.NON_CONSTANT_OUTPUT,
}


def failed(verdict: Verdict) -> list[str]:
    return [c.name for c in verdict.checks if not c.passed]


def assert_failure(verdict: Verdict, status: str, check: str) -> None:
    """The verdict has this status, names this check, and says so in its message."""
    assert verdict.status == status, verdict.message
    assert verdict.failure is not None
    assert verdict.failure.check == check, verdict.failure
    assert check in failed(verdict)
    assert verdict.failure.message.splitlines()[0] in verdict.message
    assert not verdict.passed


# ---------------------------------------------------------------- passed


@pytest.mark.parametrize(
    "task, kernel, dsl",
    [
        ("scale_add", "cpp_scale_add", "cpp"),
        ("scale_add", "triton_scale_add", "triton"),
        ("row_sum", "cpp_row_sum", "cpp"),
    ],
)
def test_correct_kernel_passes(run_case, kernelgraph_cache, task, kernel, dsl):
    verdict = run_case(task, kernel, dsl=dsl)
    assert verdict.status == PASSED, verdict.message
    assert verdict.passed and verdict.failure is None
    assert failed(verdict) == []
    assert RUNTIME_CHECKS <= {c.name for c in verdict.checks}
    assert {"candidate", "judge"} <= verdict.phases_s.keys()
    assert ("prepare" in verdict.phases_s) == (not verdict.reference["cached"])
    assert (verdict.dsl, verdict.device, verdict.policy, verdict.precision) == (
        dsl,
        "cpu",
        "strict",
        "fp32",
    )
    assert verdict.timing.kernel_ms is None  # profile=False: nothing was timed
    assert verdict.cache_key and not verdict.cached
    if dsl == "cpp":  # the workers built into this session's shared build cache
        assert list((kernelgraph_cache / "build").glob("*.so"))


# ---------------------------------------------------------------- compile_error


def test_python_syntax_error_is_compile_error_before_anything_runs(run_case, tmp_path):
    kernel = tmp_path / "kernel.py"
    kernel.write_text(
        "import torch.nn as nn\n\n\nclass ModelNew(nn.Module)\n"
        "    def forward(self, x):\n        return x\n"
    )
    verdict = run_case("scale_add", kernel)
    assert_failure(verdict, COMPILE_ERROR, CheckName.COMPILE)
    assert "does not parse" in verdict.failure.message
    assert verdict.phases_s == {}  # refused statically: no worker started


def test_cpp_syntax_error_is_compile_error_with_compiler_message(run_case):
    verdict = run_case("scale_add", "cpp_syntax_error")
    assert_failure(verdict, COMPILE_ERROR, CheckName.COMPILE)
    assert "g++ failed" in verdict.failure.message
    assert "expected ';'" in verdict.failure.message  # g++'s own diagnostic reaches the user
    assert "judge" not in verdict.phases_s


def test_triton_type_error_is_compile_error(run_case):
    verdict = run_case("scale_add", "triton_type_error", dsl="triton")
    assert_failure(verdict, COMPILE_ERROR, CheckName.COMPILE)
    assert "pointer" in verdict.failure.message


# ---------------------------------------------------------------- incorrect


def test_wrong_op_is_incorrect_with_failure_details(run_case):
    verdict = run_case("scale_add", "cpp_scale_sub")  # x * 2 - 1 instead of x * 2 + 1
    assert_failure(verdict, INCORRECT, CheckName.CORRECTNESS)
    failure = verdict.failure
    assert failure.seed == FIRST_SEED
    assert failure.shape == [64, 256]
    assert failure.max_abs_err == pytest.approx(2.0, rel=1e-5)
    assert failure.mismatches == 64 * 256
    assert "differ beyond" in failure.message


def test_off_by_one_is_incorrect_with_failure_details(run_case, cases):
    verdict = run_case("row_sum", "cpp_row_sum_off_by_one")  # skips each row's last column
    assert_failure(verdict, INCORRECT, CheckName.CORRECTNESS)
    failure = verdict.failure
    assert failure.seed == FIRST_SEED
    assert failure.shape == [16]
    # The error of each row is exactly its missing last element.
    torch.manual_seed(FIRST_SEED)
    x = torch.randn(16, 64).double()
    expected, got = x.sum(dim=1), x[:, :-1].sum(dim=1)
    assert failure.max_abs_err == pytest.approx(float(x[:, -1].abs().max()), rel=1e-4)
    assert failure.mismatches == int(((got - expected).abs() > 1e-4 + 1e-4 * expected.abs()).sum())


def test_wrong_shape_is_incorrect(run_case):
    verdict = run_case("scale_add", "cpp_flat_output")  # right values, flat
    assert_failure(verdict, INCORRECT, CheckName.OUTPUT_SHAPE)
    assert "shape [16384] differs from the reference's [64, 256]" in verdict.failure.message
    assert verdict.failure.seed == FIRST_SEED


# ---------------------------------------------------------------- timeout


@pytest.mark.parametrize(
    "kernel",
    [
        "cpp_infinite_loop",
        pytest.param("py_while_true", marks=pytest.mark.slow),
    ],
)
def test_hanging_kernel_times_out(run_case, kernel):
    verdict = run_case("scale_add", kernel, timeout_s=15)
    assert_failure(verdict, TIMEOUT, CheckName.RUNS)
    assert "timed out" in verdict.failure.message
    assert 15 <= verdict.phases_s["candidate"] < 15 + 10  # killed at the limit, not later
    assert "judge" not in verdict.phases_s


# ---------------------------------------------------------------- crashed


def test_segfault_is_crashed(run_case):
    verdict = run_case("scale_add", "cpp_null_write")
    assert_failure(verdict, CRASHED, CheckName.RUNS)
    assert "SIGSEGV" in verdict.failure.message


def test_host_memory_hog_is_crashed_by_the_rss_watchdog(cases, tmp_path):
    """... and that verdict is not replayed from the cache under a larger limit."""
    cache = EvalCache(tmp_path)
    task, kernel = cases / "tasks/scale_add.py", cases / "kernels/host_memory_hog.py"

    def run(max_host_gb: float) -> Verdict:
        config = EvalConfig(
            dsl="cpp", seeds=2, profile=False, max_host_gb=max_host_gb, timeout_s=60
        )
        return evaluate(task, kernel, config, cache=cache)

    verdict = run(1.5)
    assert_failure(verdict, CRASHED, CheckName.RUNS)
    assert "over its limit of 1.5 GiB" in verdict.failure.message  # the limit it ran under
    assert verdict.phases_s["candidate"] < 30  # the watchdog, not the wall clock, ended it
    roomier = run(8.0)  # the kernel is correct; it only needs its 3 GiB
    assert not roomier.cached
    assert roomier.status == PASSED, roomier.message


def test_exception_in_forward_is_crashed_with_the_error(run_case):
    verdict = run_case("scale_add", "raises_in_forward")
    assert_failure(verdict, CRASHED, CheckName.RUNS)
    assert "ValueError: scale_add kernel expects a 3-d input, got 2-d" in verdict.failure.message


# ---------------------------------------------------------------- the verdict record


def test_verdict_round_trips_through_its_dict_and_the_cache(cases, tmp_path):
    """A verdict read back (as the cache and --json consumers do) equals the one written."""
    cache = EvalCache(tmp_path)
    config = EvalConfig(dsl="cpp", seeds=2, profile=False)
    task, kernel = cases / "tasks/scale_add.py", cases / "kernels/torch_softmax.py"
    first = evaluate(task, kernel, config, cache=cache)  # rejected statically: instant
    assert not first.cached
    assert Verdict.from_dict(first.to_dict()) == first
    again = evaluate(task, kernel, config, cache=cache)
    assert again.cached
    again.cached = False
    assert again == first


def test_a_cached_verdict_is_not_reused_by_a_changed_harness(cases, tmp_path, monkeypatch):
    """Verdicts are keyed by the harness's own source: after a rule changes, the same kernel is
    judged again instead of getting the old harness's verdict back."""
    import kernelgraph.tools.harness.config as harness_config

    cache = EvalCache(tmp_path)
    config = EvalConfig(dsl="cpp", seeds=2, profile=False)
    task, kernel = cases / "tasks/scale_add.py", cases / "kernels/torch_softmax.py"
    first = evaluate(task, kernel, config, cache=cache)  # rejected statically: instant
    assert evaluate(task, kernel, config, cache=cache).cached
    monkeypatch.setattr(harness_config, "harness_digest", lambda: "another-harness")
    again = evaluate(task, kernel, config, cache=cache)
    assert not again.cached and again.cache_key != first.cache_key

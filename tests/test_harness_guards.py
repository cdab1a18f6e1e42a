"""Cheating kernels: each is caught by the check made for it, and honest kernels are not.

Static cheats are refused before any worker starts (no candidate code runs); runtime cheats pass
the static checks by construction and must be caught by the candidate-process guards or by the
judge.
"""

from __future__ import annotations

import pytest
import torch

from kernelgraph.tools.harness.reference import pool_seeds, verification_seeds
from kernelgraph.tools.harness.static_checks import check_python
from kernelgraph.tools.harness.verdict import INCORRECT, PASSED, REJECTED, CheckName, Verdict

SEEDS = verification_seeds(2)


def failed(verdict: Verdict) -> list[str]:
    return [c.name for c in verdict.checks if not c.passed]


def passed_checks(verdict: Verdict) -> list[str]:
    return [c.name for c in verdict.checks if c.passed]


def assert_rejected_by(verdict: Verdict, check: str) -> None:
    assert verdict.status == REJECTED, verdict.message
    assert verdict.failure is not None and verdict.failure.check == check, verdict.failure
    assert check in failed(verdict)


def reference_inputs(cases, task: str, seed: int) -> list:
    """The inputs the harness gives every side for `seed` (manual_seed(seed); get_inputs())."""
    namespace: dict = {}
    exec(compile((cases / "tasks" / f"{task}.py").read_text(), task, "exec"), namespace)
    torch.manual_seed(seed)
    return list(namespace["get_inputs"]())


# ---------------------------------------------------------------- static: nothing runs


@pytest.mark.parametrize(
    "task, kernel, fragment",
    [
        ("scale_add", "torch_softmax", "torch.softmax"),
        ("scale_add", "functional_relu", "torch.nn.functional.relu"),
        ("row_sum", "tensor_sum", ".sum()"),
        ("scale_add", "try_fallback", "falls back"),
        ("scale_add", "imports_task", "must not reach the reference"),
        ("scale_add", "opens_task", "open"),
    ],
)
def test_static_cheat_is_rejected_before_anything_runs(run_case, task, kernel, fragment):
    verdict = run_case(task, kernel)
    assert_rejected_by(verdict, CheckName.STATIC_PYTHON)
    assert fragment in verdict.failure.message
    assert verdict.phases_s == {}  # no worker started: the candidate's code never ran


# ---------------------------------------------------------------- runtime guards

# Cheats the static checks cannot see: these must reach the workers to be caught.
RUNTIME_CHEATS = [
    "cpp_plus_one_in_torch",
    "cpp_in_place",
    "cpp_returns_input",
    "cpp_first_call_cache",
    "cpp_buffer_cache",
    "cpp_half_written",
    "cpp_zeros",
    "subclass_output",
    "copy_without_kernel",
    "expand_without_kernel",
    "triton_torch_in_kernel",
    "cpp_content_memo",
    "cpp_zeros_but_one",
]


@pytest.mark.parametrize("kernel", RUNTIME_CHEATS)
def test_runtime_cheats_pass_the_static_checks(cases, kernel):
    """Otherwise the runtime tests below would only re-test the static checks."""
    dsl = "triton" if kernel.startswith("triton") else "cpp"
    assert check_python((cases / "kernels" / f"{kernel}.py").read_text(), dsl, "strict") == []


def test_torch_arithmetic_operator_is_caught_by_the_aten_recorder(run_case):
    verdict = run_case("scale_add", "cpp_plus_one_in_torch")  # kernel: x * 2; torch: + 1
    assert_rejected_by(verdict, CheckName.ATEN_OPS)
    assert "aten.add.Tensor" in verdict.failure.message
    assert CheckName.CORRECTNESS in passed_checks(verdict)  # the values were right


def test_result_written_into_the_input_is_rejected(run_case):
    verdict = run_case("scale_add", "cpp_in_place")
    assert verdict.status == REJECTED, verdict.message
    assert {CheckName.INPUTS_UNMODIFIED, CheckName.OUTPUT_NOT_ALIASED} <= set(failed(verdict))
    assert verdict.failure.check in (CheckName.INPUTS_UNMODIFIED, CheckName.OUTPUT_NOT_ALIASED)
    assert verdict.failure.seed == SEEDS[0]


def test_output_aliasing_an_input_is_rejected(run_case):
    verdict = run_case("identity", "cpp_returns_input")
    assert_rejected_by(verdict, CheckName.OUTPUT_NOT_ALIASED)
    assert failed(verdict) == [CheckName.OUTPUT_NOT_ALIASED]
    assert "shares memory with input 0" in verdict.failure.message


def test_identity_task_passes_with_a_real_copy_kernel(run_case):
    verdict = run_case("identity", "cpp_copy")
    assert verdict.status == PASSED, verdict.message


def test_result_computed_once_and_replayed_fails_on_the_second_seed(run_case):
    verdict = run_case("scale_add", "cpp_first_call_cache")
    assert verdict.status == REJECTED, verdict.message  # no launch on the second call
    assert CheckName.KERNEL_LAUNCHED in failed(verdict)
    wrong = [c for c in verdict.checks if c.name == CheckName.CORRECTNESS and not c.passed]
    assert wrong and wrong[0].detail.startswith(f"seed {SEEDS[1]}:"), verdict.checks


def test_result_cached_per_buffer_is_caught_after_timing(run_case):
    """Every verification seed is a new buffer, so only the timing loop exposes the cache."""
    verdict = run_case("scale_add", "cpp_buffer_cache", profile=True)
    assert_rejected_by(verdict, CheckName.POST_TIMING_OUTPUT)
    assert CheckName.CORRECTNESS in passed_checks(verdict)
    assert verdict.failure.seed in pool_seeds(SEEDS)
    assert verdict.failure.mismatches > 0 and verdict.failure.shape == [64, 256]
    assert verdict.timing.kernel_ms is None  # a rejected kernel reports no speed


def test_results_memoised_by_input_contents_are_not_timed_as_a_kernel(run_case):
    verdict = run_case("scale_add", "cpp_content_memo", profile=True)
    assert verdict.status != PASSED, verdict.message


def test_partially_written_output_shows_up_as_nan(run_case):
    verdict = run_case("scale_add", "cpp_half_written")
    assert verdict.status == INCORRECT, verdict.message
    assert verdict.failure.check == CheckName.CORRECTNESS
    assert "NaN" in verdict.failure.message and "never wrote" in verdict.failure.message
    assert verdict.failure.mismatches == 64 * 256 // 2


def test_constant_output_within_tolerance_of_tiny_values_is_rejected(run_case):
    verdict = run_case("tiny", "cpp_zeros")
    assert_rejected_by(verdict, CheckName.NON_CONSTANT_OUTPUT)
    assert verdict.failure.seed == SEEDS[0]


def test_near_constant_output_within_tolerance_of_tiny_values_is_not_accepted(run_case):
    verdict = run_case("tiny", "cpp_zeros_but_one")
    assert verdict.status != PASSED, verdict.message


@pytest.mark.parametrize("kernel", ["cpp_centred_mean_double", "cpp_row_zeros"])
def test_a_reference_that_is_rounding_noise_does_not_need_to_be_followed(run_case, kernel):
    # Recomputed in float64 the reference's values do not follow it: they are its rounding
    # noise, so only the tolerance decides (as in KernelBench), zeros included.
    verdict = run_case("centred_mean", kernel)
    assert verdict.status == PASSED, verdict.message


def test_tiny_task_passes_with_a_real_kernel(run_case):
    verdict = run_case("tiny", "cpp_tiny")
    assert verdict.status == PASSED, verdict.message
    assert verdict.warnings == []  # small values are not a degenerate task


def test_tensor_subclass_output_is_rejected(run_case):
    verdict = run_case("scale_add", "subclass_output")
    assert_rejected_by(verdict, CheckName.OUTPUT_TYPE)
    assert "FriendlyTensor" in verdict.failure.message
    assert "judge" not in verdict.phases_s  # never handed to the judge


@pytest.mark.parametrize("kernel", ["copy_without_kernel", "expand_without_kernel"])
def test_output_without_any_kernel_launch_is_rejected(run_case, kernel):
    verdict = run_case("identity", kernel)
    assert_rejected_by(verdict, CheckName.KERNEL_LAUNCHED)
    assert "no cpp kernel ran" in verdict.failure.message


def test_python_computation_behind_a_dummy_launch_is_not_accepted(run_case):
    verdict = run_case("scale_add", "python_loop_dummy_launch")
    assert verdict.status != PASSED, verdict.message


def test_torch_compute_inside_an_interpreted_triton_kernel_is_not_accepted(run_case):
    verdict = run_case("scale_add", "triton_torch_in_kernel", dsl="triton")
    assert verdict.status != PASSED, verdict.message


# ---------------------------------------------------------------- exact and special values


def test_argmax_picking_another_tied_index_passes(run_case, cases):
    # The kernel keeps the last maximum, torch the first: the indices really differ.
    x = reference_inputs(cases, "argmax_ties", SEEDS[0])[0]
    last = x.shape[1] - 1 - torch.argmax(x.flip(1), dim=1)
    assert not torch.equal(last, torch.argmax(x, dim=1))
    verdict = run_case("argmax_ties", "cpp_argmax_last")
    assert verdict.status == PASSED, verdict.message


def test_argmax_picking_a_non_maximum_is_incorrect(run_case):
    verdict = run_case("argmax_ties", "cpp_argmin")
    assert verdict.status == INCORRECT, verdict.message
    assert verdict.failure.check == CheckName.CORRECTNESS
    assert "exact match required" in verdict.failure.message
    assert verdict.failure.mismatches > 0 and verdict.failure.shape == [32]


def test_nan_and_inf_in_the_same_places_pass(run_case, cases):
    y = torch.log(reference_inputs(cases, "log_nan_inf", SEEDS[0])[0])
    assert y.isnan().any() and y.isneginf().any()  # the task really has both
    verdict = run_case("log_nan_inf", "cpp_log")
    assert verdict.status == PASSED, verdict.message


def test_nan_replaced_by_a_number_is_incorrect(run_case, cases):
    y = torch.log(reference_inputs(cases, "log_nan_inf", SEEDS[0])[0])
    verdict = run_case("log_nan_inf", "cpp_log_nan_as_zero")
    assert verdict.status == INCORRECT, verdict.message
    assert "NaN positions differ" in verdict.failure.message
    assert verdict.failure.mismatches == int(y.isnan().sum())


def test_an_honest_kernel_with_two_modes_of_call_time_is_timed_not_rejected(run_case):
    """Under contention most calls can be slow and a few fast; the parent's clock is checked
    against the timed calls' sum, which a median in the slow mode would overstate."""
    verdict = run_case("scale_add", "cpp_scale_add_bimodal", profile=True)
    assert verdict.status == PASSED, verdict.message
    timing = verdict.timing
    assert timing.kernel_ms is not None and timing.kernel_ms >= 5.0  # the slow mode's median
    consistent = next(c for c in verdict.checks if c.name == CheckName.TIMING_CONSISTENT)
    assert consistent.passed


@pytest.fixture
def cpu_contention(monkeypatch):
    """The CPUs as busy (True) or idle (False) during every timing loop; counts the loops."""
    loops = []

    def set_busy(busy: bool) -> list:
        def contended(*_args) -> bool:
            loops.append(busy)
            return busy

        monkeypatch.setattr("kernelgraph.tools.harness.assemble.contended", contended)
        monkeypatch.setattr("kernelgraph.tools.harness.infra.BUSY_WAITS_S", (0.0,))
        return loops

    return set_busy


def test_a_median_that_hides_the_loops_cost_is_rejected(run_case, cpu_contention):
    loops = cpu_contention(False)
    verdict = run_case("scale_add", "cpp_scale_add_rare_stall", profile=True)
    assert_rejected_by(verdict, CheckName.TIMING_CONSISTENT)
    assert "far below" in verdict.failure.message and loops == [False]  # judged at once


def test_a_loop_stretched_while_the_cpus_were_busy_is_timed_again(run_case, cpu_contention):
    """Contention can stretch an honest loop between its timed calls: the evaluation is tried
    again after a wait, and the rejection stands only when every attempt was contended."""
    loops = cpu_contention(True)
    verdict = run_case("scale_add", "cpp_scale_add_rare_stall", profile=True)
    assert_rejected_by(verdict, CheckName.TIMING_CONSISTENT)
    assert verdict.failure.message.endswith("while other work kept the CPUs busy")
    assert loops == [True, True]  # two attempts, the second after a wait

"""Buffers that the reference's forward updates (batch norm's running statistics in training
mode) are part of what a kernel must get right: each seed starts from the state at construction
on both sides, and the judge compares the updated buffers, with the reference store and
without it."""

from __future__ import annotations

import pytest
import torch

from kernelgraph.tools.harness.buffers import BufferState
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate

CONFIG = EvalConfig(dsl="cpp", device="cpu", seeds=3, profile=False)


@pytest.fixture(params=[True, False], ids=["reference store", "recomputed by the judge"])
def use_store(request):
    return request.param


def run(cases, tmp_path, task: str, kernel: str, use_store: bool):
    return evaluate(
        cases / "tasks" / task, cases / "kernels" / kernel, CONFIG,
        EvalCache(tmp_path / "evals"), use_cache=use_store,
    )  # fmt: skip


def test_a_kernel_that_updates_the_buffer_as_the_reference_passes(cases, tmp_path, use_store):
    verdict = run(cases, tmp_path, "running_mean.py", "cpp_running_mean.py", use_store)
    assert verdict.passed, verdict.message
    (check,) = [c for c in verdict.checks if c.name == "buffer_updates"]
    assert check.passed and "running_mean" in check.detail


@pytest.mark.parametrize(
    ("kernel", "says"),
    [
        ("cpp_running_mean_never_updated.py", "buffer `running_mean` after forward differs"),
        ("cpp_scale_add.py", "ModelNew has no buffer of that name"),
    ],
)
def test_right_outputs_with_a_missing_or_stale_buffer_are_incorrect(
    cases, tmp_path, use_store, kernel, says
):
    verdict = run(cases, tmp_path, "running_mean.py", kernel, use_store)
    assert verdict.status == "incorrect"
    assert verdict.failure.check == "buffer_updates"
    assert says in verdict.failure.message and "running_mean" in verdict.failure.message


def test_a_task_whose_forward_updates_nothing_has_no_buffer_check(cases, tmp_path):
    verdict = run(cases, tmp_path, "scale_add.py", "cpp_scale_add.py", True)
    assert verdict.passed, verdict.message
    assert not [c for c in verdict.checks if c.name == "buffer_updates"]


def test_batch_norm_in_training_mode_updates_all_three_buffers_and_restore_undoes_it():
    bn = torch.nn.BatchNorm2d(4).train()
    state = BufferState(bn)
    with torch.no_grad():
        bn(torch.randn(2, 4, 3, 3))
    changed = dict(state.changed(bn))
    assert sorted(changed) == ["num_batches_tracked", "running_mean", "running_var"]
    assert int(changed["num_batches_tracked"]) == 1
    state.restore(bn)
    assert state.changed(bn) == []  # every seed starts from the buffers as constructed
    with torch.no_grad():
        bn.eval()(torch.randn(2, 4, 3, 3))
    assert state.changed(bn) == []  # eval mode updates nothing: no buffer check


def test_a_buffer_holding_nan_is_unchanged_when_its_bytes_are():
    module = torch.nn.Module()
    module.register_buffer("mask", torch.tensor([float("nan"), 1.0]))
    assert BufferState(module).changed(module) == []

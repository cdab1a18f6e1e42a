"""Batch norm in training mode and other updates of module state, written by the builtin and
verified by the real harness, which also compares the buffers forward updates (running mean
and variance, the step counter) with the reference's."""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_helpers import builtin_generator, task_file

from kernelgraph.tools.builtin.errors import Unsupported
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate

CASES = {
    "linear_bn1d_relu": (
        "torch.relu(self.bn(self.fc(x)) * 2.0)",
        "torch.randn(16, 12)",
        "self.fc = nn.Linear(12, 10); self.bn = nn.BatchNorm1d(10)",
    ),
    "bn2d_tanh_momentum": (
        "torch.tanh(self.bn(x)) * 1.5",
        "torch.randn(4, 6, 5, 7) * 3 + 1",
        "self.bn = nn.BatchNorm2d(6, momentum=0.3)",
    ),
    # a batch of one: one row op (statistics and normalisation in one kernel)
    "instance_norm_without_running_stats": (
        "F.gelu(self.norm(x)) - 0.5",
        "torch.randn(2, 3, 6, 8) * 2 + 1",
        "self.norm = nn.InstanceNorm2d(3, affine=True)",
    ),
    "bn1d_batch_of_one_without_running_stats": (
        "self.bn(x) * 3",
        "torch.randn(1, 4, 33)",
        "self.bn = nn.BatchNorm1d(4, track_running_stats=False)",
    ),
    "bn3d_without_running_stats": (
        "self.bn(x) + 1",
        "torch.randn(3, 2, 4, 5, 3)",
        "self.bn = nn.BatchNorm3d(2, track_running_stats=False)",
    ),
}
BUFFERS = ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked")


def generate(task: Path, dsl: str, tmp_path: Path, policy: str = "strict", config=None) -> Path:
    generator = builtin_generator(task, dsl, tmp_path, policy)
    kernel = tmp_path / f"kernel_{dsl}.py"
    kernel.write_text(generator.code(config(generator) if config else None))
    return kernel


def verify(task: Path, kernel: Path, dsl: str, tmp_path: Path, policy: str = "strict"):
    config = EvalConfig(dsl=dsl, device="cpu", seeds=2, profile=False, policy=policy)
    return evaluate(task, kernel, config, cache=EvalCache(tmp_path / "cache"))


@pytest.mark.parametrize("dsl", ["triton", "cpp"])
@pytest.mark.parametrize("name", list(CASES))
def test_batch_norm_in_training_mode_verifies_with_its_buffer_updates(tmp_path, dsl, name):
    forward, inputs, params = CASES[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = generate(task, dsl, tmp_path)
    verdict = verify(task, kernel, dsl, tmp_path)
    assert verdict.passed, verdict.message
    updates = [c for c in verdict.checks if c.name == "buffer_updates"]
    if "without_running_stats" in name:
        assert not updates
    else:
        assert updates[0].passed and all(b in updates[0].detail for b in BUFFERS)
        source = kernel.read_text()
        assert all(f"self.{b}.copy_(" in source for b in BUFFERS)


@pytest.mark.parametrize(
    ("name", "kernels"),
    [("instance_norm_without_running_stats", 1), ("bn1d_batch_of_one_without_running_stats", 1),
     ("bn3d_without_running_stats", 2), ("bn2d_tanh_momentum", 3)],
)  # fmt: skip
def test_a_batch_of_one_without_running_stats_is_one_kernel(tmp_path, name, kernels):
    """Its channels are contiguous rows: no separate pass for the statistics."""
    forward, inputs, params = CASES[name]
    generator = builtin_generator(task_file(tmp_path, forward, inputs, params=params), "triton",
                                  tmp_path)  # fmt: skip
    assert generator.summary().startswith(f"{kernels} kernel(s)"), generator.summary()


def test_statistics_of_long_channels_split_across_programs_verify(tmp_path, monkeypatch):
    """Channels of many elements: each channel's sums spread over programs with atomics."""
    from kernelgraph.tools.builtin.triton_backend import TritonBackend

    monkeypatch.setattr(TritonBackend, "split_rows", lambda self, kernel: True)

    def small_rows(generator):
        config = generator.default_config()
        for params in config.values():
            if "BLOCK_R" in params:
                params["BLOCK_R"] = 8
        return config

    forward, inputs, params = CASES["bn2d_tanh_momentum"]
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = generate(task, "triton", tmp_path, config=small_rows)
    assert "tl.atomic_add" in kernel.read_text()
    verdict = verify(task, kernel, "triton", tmp_path)
    assert verdict.passed, verdict.message


def test_a_convolution_then_batch_norm_verifies_under_hybrid(tmp_path):
    params = "self.conv = nn.Conv2d(3, 8, 3); self.bn = nn.BatchNorm2d(8)"
    task = task_file(tmp_path, "F.relu(self.bn(self.conv(x)))", "torch.randn(2, 3, 8, 8)",
                     params=params)  # fmt: skip
    verdict = verify(task, generate(task, "triton", tmp_path, "hybrid"), "triton", tmp_path,
                     "hybrid")  # fmt: skip
    assert verdict.passed, verdict.message


@pytest.mark.parametrize(
    "update",
    [None, "self.running_mean.copy_(x.mean(0) * 0.5)"],
    ids=["mul_add", "copy"],
)
def test_chained_in_place_updates_of_a_buffer_are_written_back(cases, tmp_path, update):
    """`running_mean.mul_(0.9).add_(x.mean(0), alpha=0.1)`: one value, copied back once; so is
    a `copy_` into it, whose new value is what it copies."""
    task = cases / "tasks" / "running_mean.py"
    if update is not None:
        source = task.read_text()
        task = tmp_path / "task.py"
        task.write_text(
            source.replace("self.running_mean.mul_(0.9).add_(x.mean(0), alpha=0.1)", update)
        )
    kernel = generate(task, "cpp", tmp_path)
    assert kernel.read_text().count("self.running_mean.copy_(") == 1
    verdict = verify(task, kernel, "cpp", tmp_path)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize(
    ("forward", "params"),
    [
        ("self.bn(x) + self.bn.running_mean", "self.bn = nn.BatchNorm1d(6)"),
        ("self.bn(x)", "self.bn = nn.BatchNorm1d(6, momentum=None)"),
    ],
    ids=["read_after_update", "cumulative_average"],
)
def test_module_state_read_after_its_update_is_refused_by_name(tmp_path, forward, params):
    task = task_file(tmp_path, forward, "torch.randn(8, 6)", params=params)
    with pytest.raises(Unsupported, match="after forward updated it"):
        generate(task, "triton", tmp_path)

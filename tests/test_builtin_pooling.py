"""The builtin model's pooling kernels (max, average, adaptive; 1d/2d/3d), verified by the real
harness on the CPU: C++ kernels, and Triton kernels under the Triton interpreter.

Each case is one small task with several pools (one evaluation covers many options); the
builtin generates the kernel file and the sandboxed harness must pass it, indices included.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_helpers import builtin_generator, task_file

from kernelgraph.tools.analysis import analyze_task
from kernelgraph.tools.builtin.generate import Generator
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.evaluate import evaluate
from kernelgraph.tools.task import TaskSource

KERNELBENCH = Path("/work/shared/kernelbench")
X1, X2, X3 = "torch.randn(2, 3, 17)", "torch.randn(2, 3, 9, 11)", "torch.randn(2, 2, 7, 8, 9)"

# name -> (forward, inputs, kernels the file must have)
CASES = {
    "max_1d_2d": (
        "(F.max_pool1d(x, 3, 2, 1, dilation=2), *F.max_pool1d(x, 4, ceil_mode=True, "
        "return_indices=True), F.max_pool2d(y, 3, 2, 1, dilation=(1, 2), ceil_mode=True), "
        "*F.max_pool2d(y, (3, 2), (2, 1), (1, 0), return_indices=True))",
        f"{X1}, {X2}",
        ["pool"] * 4,
    ),
    "avg_1d_2d": (
        "(F.avg_pool1d(x, 3, 2, 1), F.avg_pool1d(x, 4, 3, 2, ceil_mode=True, "
        "count_include_pad=False), F.avg_pool2d(y, 3, 2, 1, ceil_mode=True), "
        "F.avg_pool2d(y, (3, 2), 1, (1, 1), count_include_pad=False), "
        "F.avg_pool2d(y, 2, divisor_override=3))",
        f"{X1}, {X2}",
        ["pool"] * 5,
    ),
    "pools_3d": (
        "(*F.max_pool3d(x, 3, 2, 1, dilation=(1, 2, 1), ceil_mode=True, return_indices=True), "
        "F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), F.avg_pool3d(x, 2))",
        X3,
        ["pool"] * 3,
    ),
    "adaptive": (
        "(F.adaptive_avg_pool1d(y.flatten(2), 5), *F.adaptive_max_pool1d(y.flatten(2), 4, "
        "return_indices=True), F.adaptive_avg_pool2d(y, (4, 3)), *F.adaptive_max_pool2d(y, 4, "
        "return_indices=True), F.adaptive_avg_pool3d(x, (3, 4, 5)), F.adaptive_max_pool3d(x, 2))",
        f"{X3}, {X2}",
        ["pool"] * 6,
    ),
    # stride 1 over rows of 36 (aligned): four outputs a lane (tools/builtin/triton_pool_rows.py),
    # padded, dilated, with an epilogue that loads; the last two take the general kernel
    "rows_1d": (
        "(F.max_pool1d(x, 8, 1, 4, dilation=3), F.avg_pool1d(x, 8, 1, 4), "
        "torch.relu(F.max_pool1d(x, 3, 1, 1) * self.scale[:, 0] + 0.5), F.avg_pool1d(x, 5, 1), "
        "F.avg_pool1d(x, 4, 1, 2, count_include_pad=False), "
        "*F.max_pool1d(x, 3, 1, 1, return_indices=True))",
        "torch.randn(2, 3, 36)",
        ["pool"] * 6,
    ),
    # a prologue (its own kernel), the pool, and an epilogue fused into the pool's kernel
    "chain": (
        "torch.tanh(F.max_pool2d(F.hardswish(x - 0.5), 2) * self.scale) + 1",
        X2,
        ["pointwise", "pool"],
    ),
}
PARAMS = "self.scale = nn.Parameter(torch.randn(3, 1, 1))"


@pytest.fixture(params=["cpp", "triton"])
def dsl(request) -> str:
    return request.param


def verify(task: Path, kernel: Path, dsl: str, tmp_path: Path):
    config = EvalConfig(dsl=dsl, device="cpu", seeds=1, profile=False)
    return evaluate(task, kernel, config, cache=EvalCache(tmp_path / "cache"))


def write(task: Path, dsl: str, tmp_path: Path) -> tuple[Generator, Path]:
    generator = builtin_generator(task, dsl, tmp_path)
    kernel = tmp_path / "kernel.py"
    kernel.write_text(generator.code())
    return generator, kernel


@pytest.mark.parametrize("name", list(CASES))
def test_pooling_kernels_verify(tmp_path, dsl, name):
    forward, inputs, kinds = CASES[name]
    task = task_file(tmp_path, forward, inputs, params=PARAMS)
    generator, kernel = write(task, dsl, tmp_path)
    assert [k.kind for k in generator.program.kernels] == kinds
    assert "torch.nn.functional" not in kernel.read_text().split("class ModelNew")[1]
    verdict = verify(task, kernel, dsl, tmp_path)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize(
    ("forward", "inputs", "in_groups"),
    [
        ("F.max_pool1d(x, 8, 1, 4, dilation=3)", "torch.randn(4, 64)", True),
        ("F.avg_pool1d(x, 8, 1, 4)", "torch.randn(2, 3, 64)", True),
        ("F.avg_pool1d(x, 8, 1, 4)", "torch.randn(2, 3, 66)", False),  # rows not 16-byte aligned
        ("F.avg_pool1d(x, 8, 2, 4)", "torch.randn(2, 3, 64)", False),  # stride 2
        ("F.avg_pool1d(x, 8, 1, 4, count_include_pad=False)", "torch.randn(2, 64)", False),
        ("F.max_pool1d(x, 33, 1, 16, dilation=2)", "torch.randn(2, 64)", False),  # 18 groups
    ],
)
def test_stride_one_rows_load_aligned_groups_of_four(tmp_path, forward, inputs, in_groups):
    """Which 1d pools take the kernel of vector loads: stride 1, rows whose starts are 16-byte
    aligned, one divisor for every output, a window of at most 16 groups."""
    task = task_file(tmp_path, forward, inputs)
    code = builtin_generator(task, "triton", tmp_path, device="cuda").code()
    assert ("tl.split(" in code) is in_groups


def test_a_wrong_index_fails_verification(tmp_path):
    """The harness compares the indices: a kernel that numbers the window wrongly fails."""
    task = task_file(tmp_path, "F.max_pool2d(y, 2, return_indices=True)[1]", f"{X1}, {X2}")
    _, kernel = write(task, "triton", tmp_path)
    text = kernel.read_text()
    assert "xh * 11 + xw" in text
    kernel.write_text(text.replace("xh * 11 + xw", "xh * 11 + xw + 1"))
    assert not verify(task, kernel, "triton", tmp_path).passed


def test_large_tensors_index_in_int64(tmp_path):
    """Past 2**31 elements the offsets are int64 (KernelBench's 2D average pool reads 4.3e9)."""
    source = TaskSource.read(KERNELBENCH / "level1" / "45_Average_Pooling_2D.py")
    analysis = analyze_task(source, "cuda", cache=EvalCache(tmp_path))
    code = Generator(analysis, "triton", "cuda", "strict", "fp32", source.effective_source).code()
    assert "tl.program_id(0).to(tl.int64)" in code


LEVEL1 = ["41_Max_Pooling_1D", "42_Max_Pooling_2D", "43_Max_Pooling_3D", "44_Average_Pooling_1D",
          "45_Average_Pooling_2D", "46_Average_Pooling_3D"]  # fmt: skip


@pytest.mark.parametrize("problem", LEVEL1)
def test_kernelbench_pooling_problems_are_writable(tmp_path, problem):
    """At their real sizes (analysed on meta tensors), under the strict policy: one pool kernel."""
    path = KERNELBENCH / "level1" / f"{problem}.py"
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout of KernelBench")
    source = TaskSource.read(path)
    analysis = analyze_task(source, "cuda", cache=EvalCache(tmp_path))
    generator = Generator(analysis, "triton", "cuda", "strict", "fp32", source.effective_source)
    assert [k.kind for k in generator.program.kernels] == ["pool"]
    assert "def k0_" in generator.code()

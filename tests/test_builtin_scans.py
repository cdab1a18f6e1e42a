"""The builtin's scans (cumsum, cumprod, logcumsumexp, reverse, exclusive, masked), triu/tril and losses,
verified by the real harness on the CPU: C++ kernels, and Triton kernels under the interpreter.
Also: the KernelBench problems that need them classify as writable."""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_helpers import builtin_generator, task_file
from builtin_helpers import verify_forward as check

from kernelgraph.tools.harness.cache import EvalCache

DSLS = ["cpp", "triton"]
X3 = "torch.randn(3, 5, 7), torch.randn(3, 5, 7)"
KERNELBENCH = Path("/work/shared/kernelbench/level1")


SCANS = (
    "(torch.cumsum(x, dim=2), torch.cumsum(x, dim=1), torch.cumprod(x, dim=0), "
    "torch.cumprod(x, dim=-1), "  # several dims
    "torch.cumsum(x.flip(2), 2).flip(2), torch.cumsum(x.flip(0), 0).flip(0) * 2, "  # reverse
    "torch.cumprod(x.flip(1), 1), "
    "torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), "  # exclusive, as KernelBench
    "torch.cumsum(x.narrow(1, 0, x.size(1) - 1), dim=1)), dim=1), "
    "torch.cumsum(x * (y > 0), dim=2), torch.cumsum(torch.relu(x) + y, dim=1))"  # masked
)


@pytest.mark.parametrize("dsl", DSLS)
def test_scans_verify(tmp_path, dsl):
    check(tmp_path, dsl, SCANS, X3)


# -inf entries (a log of zero) and large values: the log-sum-exp step must stay exact there
LOG_SCANS = (
    "(torch.logcumsumexp(x, dim=2), torch.logcumsumexp(x * 40, dim=0), "
    "torch.logcumsumexp(torch.log(torch.relu(x)), dim=1), "  # rows that start at -inf
    "torch.logcumsumexp(x.flip(2), 2).flip(2))"  # reverse
)


@pytest.mark.parametrize("dsl", DSLS)
def test_logcumsumexp_verifies(tmp_path, dsl):
    check(tmp_path, dsl, LOG_SCANS, X3)


def _short_blocks(config):
    """Rows longer than a block: the carried prefix across blocks, a partial last block."""
    for params in config.values():
        if "BLOCK_R" in params:
            params["BLOCK_R"], params["BLOCK_K"] = 2, 2


def test_triton_scan_carries_across_blocks(tmp_path):
    forward = ("(torch.cumsum(x, 2), torch.cumsum(x.flip(2), 2).flip(2), torch.cumprod(x, 1), "
               "torch.logcumsumexp(x, 2))")  # fmt: skip
    check(tmp_path, "triton", forward, X3, _short_blocks)


def code_of(tmp_path: Path, dsl: str, forward: str, inputs: str) -> str:
    return builtin_generator(task_file(tmp_path, forward, inputs), dsl, tmp_path).code()


def test_reverse_cumsum_is_one_scan_read_forwards(tmp_path):
    code = code_of(tmp_path, "triton", "torch.cumsum(x.flip(1), 1).flip(1)", "torch.randn(4, 9)")
    assert "1 kernel(s): scan" in code
    assert "reverse=True" in code and "fidx" not in code  # plain loads and stores


def test_masked_cumsum_fuses_the_mask(tmp_path):
    inputs = "torch.randn(4, 9), torch.randn(4, 9)"
    code = code_of(tmp_path, "cpp", "torch.cumsum(x * (y > 0), dim=1)", inputs)
    assert "1 kernel(s): scan" in code


EXCLUSIVE = [
    "torch.cat((torch.zeros_like(x[:, :1]), torch.cumsum(x[:, :-1], 1)), 1)",
    "torch.cat((torch.ones_like(x[:, :2]), torch.cumprod(x[:, :-2], 1)), 1)",
]


@pytest.mark.parametrize("dsl", DSLS)
@pytest.mark.parametrize("forward", EXCLUSIVE)
def test_exclusive_scan_reads_the_cat_as_its_prologue(tmp_path, dsl, forward):
    """cat((identity, scan(y))) along the scanned dim: one kernel, the cat its prologue."""
    assert "1 kernel(s): scan" in check(tmp_path, dsl, forward, "torch.randn(4, 9)")


@pytest.mark.parametrize(
    "forward",
    [
        "torch.cat((torch.ones_like(x[:, :1]), torch.cumsum(x[:, :-1], 1)), 1)",  # not 0
        "torch.cat((torch.zeros_like(x[:1]), torch.cumsum(x[:-1], 1)), 0)",  # another dim
        "(torch.cat((torch.zeros_like(x[:, :1]), y), 1), y) if (y := x.cumsum(1)) is not None "
        "else None",  # the scan's result also returned
    ],
)
def test_other_cats_of_a_scan_stay_two_kernels(tmp_path, forward):
    assert "2 kernel(s)" in check(tmp_path, "triton", forward, "torch.randn(4, 9)")


def test_triangle_of_a_matmul_is_its_epilogue(tmp_path):
    inputs = "torch.randn(6, 8), torch.randn(8, 6)"
    code = code_of(tmp_path, "triton", "torch.tril(torch.matmul(x, y), 1)", inputs)
    assert "1 kernel(s): gemm" in code


TRIANGLES = (
    "(torch.triu(x), torch.tril(x, -1), torch.triu(y, 2), torch.tril(y, 1) * 3, "
    "torch.triu(x @ x.t(), 1))"
)


@pytest.mark.parametrize("dsl", DSLS)
def test_triu_tril_with_offsets_verify(tmp_path, dsl):
    check(tmp_path, dsl, TRIANGLES, "torch.randn(6, 5), torch.randn(2, 4, 7)")


# y: class targets (one ignored: -100); the regression losses compare x with its flips
LOSSES = (
    "(F.cross_entropy(x, y), F.cross_entropy(x, y, reduction='sum'), "
    "F.cross_entropy(x, y, reduction='none'), "
    "F.smooth_l1_loss(x, x.flip(0)), F.smooth_l1_loss(x, x.flip(1), beta=0.5, reduction='sum'), "
    "F.huber_loss(x, x.flip(0), delta=0.7), "
    "F.kl_div(torch.log(x.softmax(-1)), x.flip(0).softmax(-1), reduction='batchmean'), "
    "F.mse_loss(x, x.flip(0)), F.l1_loss(x, x.flip(1)), "
    "torch.mean(torch.clamp(1 - x * x.flip(0), min=0)), "
    "F.triplet_margin_loss(x, x.flip(0), x.flip(1)))"
)


@pytest.mark.parametrize("dsl", DSLS)
def test_losses_verify(tmp_path, dsl):
    check(tmp_path, dsl, LOSSES, "torch.randn(6, 5) * 3, torch.tensor([0, 4, -100, 2, 3, 1])")


PROBLEMS = ["14_", "15_", "89_", "90_", "91_", "92_", "93_", "95_", "96_", "98_"]


@pytest.fixture(scope="module")
def analyses(tmp_path_factory):
    """KernelBench problems' analyses on meta tensors (real sizes, nothing runs)."""
    from kernelgraph.tools.analysis import analyze_task
    from kernelgraph.tools.task import TaskSource

    cache = EvalCache(tmp_path_factory.mktemp("cache"))
    found = {}
    for prefix in PROBLEMS:
        for path in KERNELBENCH.glob(f"{prefix}*.py"):
            source = TaskSource.read(path)
            found[prefix] = (analyze_task(source, "cuda", cache=cache), source)
    return found


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="no KernelBench copy on this machine")
@pytest.mark.parametrize("dsl", DSLS)
@pytest.mark.parametrize("prefix", PROBLEMS)
def test_kernelbench_problems_are_writable(analyses, prefix, dsl):
    from kernelgraph.tools.builtin.generate import Generator

    if prefix not in analyses:
        pytest.skip(f"level1/{prefix}* is not in this KernelBench copy")
    analysis, source = analyses[prefix]
    device = "cuda" if dsl == "triton" else "cpu"
    code = Generator(analysis, dsl, device, "strict", "fp32", source.effective_source).code()
    assert "class ModelNew" in code

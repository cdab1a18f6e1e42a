"""Matrix-vector products (N = 1 or M = 1): streaming reductions, not tensor-core tiles.

Verified by the real harness under the Triton interpreter; the GPU defaults are checked on the
shapes of KernelBench's level1/4 (A of 2**31 elements) and compiled for sm_90 without a GPU.
"""

from __future__ import annotations

import importlib.util

import pytest
from builtin_helpers import builtin_generator, task_file, verify_forward
from test_builtin import generate, verify

from kernelgraph.tools.builtin.triton_backend import TritonBackend

GEMVS = {
    "matrix_vector": ("torch.relu(x @ y) + 1", "torch.randn(37, 300), torch.randn(300, 1)", ""),
    "vector_matrix_linear": ("F.gelu(self.fc(x))", "torch.randn(1, 300)",
                             "self.fc = nn.Linear(300, 45)"),
    "vector_matrix": ("x @ y", "torch.randn(1, 300), torch.randn(300, 45)", ""),
    "batched": ("torch.bmm(x, y) * 0.5", "torch.randn(3, 20, 64), torch.randn(3, 64, 1)", ""),
    "transposed_matrix": ("x.t() @ y", "torch.randn(300, 37), torch.randn(300, 1)", ""),
    "dot_product": ("x @ y", "torch.randn(1, 300), torch.randn(300, 1)", ""),
}  # fmt: skip


@pytest.mark.parametrize("name", list(GEMVS))
def test_matrix_vector_products_verify_without_tensor_cores(tmp_path, name):
    forward, inputs, params = GEMVS[name]
    task = task_file(tmp_path, forward, inputs, params=params)
    kernel = generate(task, tmp_path)
    source = kernel.read_text()
    assert "tl.dot" not in source and "part = tl.zeros" in source
    # summed along K where K is contiguous in the matrix, else down K along the strip
    assert ("axis=0" in source) == (name in ("vector_matrix", "transposed_matrix"))
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


ONE_D = {
    "mv": ("torch.relu(torch.matmul(x, y))", "torch.randn(37, 300), torch.randn(300)"),
    "batched_mv": ("torch.matmul(x, y) * 2", "torch.randn(3, 37, 300), torch.randn(300)"),
    "addmv": ("torch.addmv(x[:, 0], x, y, beta=0.5, alpha=2.0)", "torch.randn(37, 300), torch.randn(300)"),
    "dot": ("torch.dot(x, y) + 1", "torch.randn(300), torch.randn(300)"),
}  # fmt: skip


@pytest.mark.parametrize("dsl", ["triton", "cpp"])
@pytest.mark.parametrize("name", list(ONE_D))
def test_products_with_a_vector_verify(tmp_path, name, dsl):
    """aten.mv, addmv and dot (a 1-D operand) are GEMMs with N = 1, in both DSLs."""
    code = verify_forward(tmp_path, dsl, *ONE_D[name])
    assert dsl == "cpp" or "part = tl.zeros" in code


@pytest.mark.parametrize("name", ["matrix_vector", "vector_matrix_linear", "vector_matrix"])
def test_split_k_matrix_vector_products_verify(tmp_path, monkeypatch, name):
    """Few rows (or columns): K shared by programs that add into a scratch, then the epilogue."""
    monkeypatch.setattr(TritonBackend, "split_k", lambda self, kernel: 3)
    forward, inputs, params = GEMVS[name]
    task = task_file(tmp_path, forward, inputs, params=params)

    def small_k(generator):
        return {kernel: {**config, "BLOCK_K": 16} if "BLOCK_K" in config else config
                for kernel, config in generator.default_config().items()}  # fmt: skip

    kernel = generate(task, tmp_path, config=small_k)
    assert "tl.atomic_add" in kernel.read_text()
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


def test_level1_4_on_the_gpu_is_one_wide_offset_pass_that_compiles_for_hopper(tmp_path):
    """KernelBench's level1/4: A is [2048, 2**20], offsets past int32; 512 programs need no
    split of K. Compiled for sm_90 to catch what the interpreter does not check."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    task = task_file(tmp_path, "x @ y", "torch.rand(2048, 2**20), torch.rand(2**20, 1)")
    generator = builtin_generator(task, "triton", tmp_path, device="cuda")
    [(name, config)] = generator.default_config().items()
    assert "DOT" not in config and config["BLOCK_N"] == 1
    assert set(generator.tunables()[name]) == {"BLOCK_M", "BLOCK_K", "num_warps"}
    path = tmp_path / "kernel.py"
    path.write_text(generator.code())
    source = path.read_text()
    assert ".to(tl.int64)[:, None] * 1048576" in source and "splitk" not in source
    spec = importlib.util.spec_from_file_location("gemv_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, name)
    signature = {p.name: "constexpr" if p.is_constexpr else "*fp32" for p in fn.params}
    constexprs = {k: v for k, v in config.items() if k != "num_warps"}
    compiled = triton.compile(
        ASTSource(fn, signature=signature, constexprs=constexprs),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": config["num_warps"]},
    )
    assert "ld.global" in compiled.asm["ptx"]

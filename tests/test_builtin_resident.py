"""Resident rows (tools/builtin/triton_resident.py): a long row held by several programs at once,
which exchange their partial reductions, so the row is read from memory once.

The Triton interpreter runs programs one after another, so on the CPU a row can only be one
chunk (the exchange then completes with the program's own partial); rows of several chunks are
refused there, not left to hang, and run in the GPU test."""

from __future__ import annotations

import pytest
import torch
from builtin_helpers import builtin_generator, task_file
from test_builtin import generate, verify

ROWS = {
    "softmax": "torch.softmax(x, dim=1)",
    "l1_norm": "x / torch.sum(torch.abs(x), dim=1, keepdim=True)",
    "layer_norm": "F.layer_norm(x, (x.shape[-1],))",
    "log_softmax_and_row_max": "(torch.log_softmax(x, dim=-1), x.amax(dim=1))",
}


def resident(block_r: int):
    def config(generator):
        rows = {"BLOCK_K": 1, "BLOCK_R": block_r, "num_warps": 1, "RESIDENT": True}
        return {name: rows if "BLOCK_R" in config else config
                for name, config in generator.default_config().items()}  # fmt: skip

    return config


@pytest.mark.parametrize("name", list(ROWS))
def test_resident_rows_verify(tmp_path, name):
    task = task_file(tmp_path, ROWS[name], "torch.randn(3, 50)")
    kernel = generate(task, tmp_path, config=resident(64))
    source = kernel.read_text()
    assert "_launch_resident(" in source and "volatile=True" in source
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("name", [*ROWS, "affine_layer_norm"])
def test_misaligned_rows_verify_with_vector_loads(tmp_path, name):
    """Rows of 50 start 8 bytes off 16 every other row: chunks start at the aligned element
    before the row, and chunk 0 stores the row's partial first and last groups itself."""
    forward = ROWS.get(
        name, "F.layer_norm(x, (50,), torch.arange(50) * 0.03 + 0.5, torch.ones(50))"
    )
    task = task_file(tmp_path, forward, "torch.randn(6, 50)")
    kernel = generate(task, tmp_path, config=resident(64))
    source = kernel.read_text()
    assert "lmask" in source and "mask=smask" in source and "if chunk == 0:" in source
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message


def test_a_pass_polls_all_its_partials_in_one_loop(tmp_path):
    """Softmax's max and sum travel in one exchange, and one loop waits for both: a loop each
    kept more registers live through the wait (78 against 72 on sm_90), so fewer programs fit
    an SM."""
    task = task_file(tmp_path, ROWS["softmax"], "torch.randn(3, 50)")
    source = generate(task, tmp_path, config=resident(64)).read_text()
    [loop] = [line.strip() for line in source.splitlines() if line.strip().startswith("while ")]
    assert loop == "while tl.min(w0 & w1 & 1, axis=0) == 0:"


def test_a_row_in_chunks_is_refused_where_programs_run_one_at_a_time(tmp_path):
    """Two chunks of a row would wait for each other forever under the interpreter."""
    task = task_file(tmp_path, ROWS["softmax"], "torch.randn(3, 50)")
    verdict = verify(task, generate(task, tmp_path, config=resident(32)), tmp_path)
    assert verdict.status == "crashed"
    assert "a row needs 2 programs running at once; this device holds 1" in verdict.message


@pytest.mark.parametrize(
    ("forward", "resident_default"),
    [
        (ROWS["softmax"], True),
        (ROWS["layer_norm"], True),
        ("F.instance_norm(x.view(16, 64, 256, 256))", True),  # a channel is a row
        ("x.sum(dim=1)", False),  # read once anyway: nothing to hold
        ("torch.softmax(x.reshape(64, 65536, 16), dim=1)", False),  # strided rows
        ("x - x[:, :1].expand_as(x) + x.argmax(dim=1, keepdim=True)", False),  # positions
    ],
)
def test_long_rows_on_a_gpu_default_to_resident(tmp_path, forward, resident_default):
    task = task_file(tmp_path, forward, "torch.randn(1024, 65536)")
    generator = builtin_generator(task, "triton", tmp_path, device="cuda")
    configs = [c for c in generator.default_config().values() if "BLOCK_R" in c]
    assert any(c.get("RESIDENT", False) for c in configs) is resident_default


def test_rows_in_more_chunks_than_sms_loop_by_default(tmp_path):
    """A row of more chunks than SMs may not fit on the device at once: loop over it instead."""
    task = task_file(tmp_path, ROWS["softmax"], "torch.randn(512, 8192 * 140)")
    generator = builtin_generator(task, "triton", tmp_path, device="cuda")
    [config] = generator.default_config().values()
    assert (
        not config.get("RESIDENT")
        and "RESIDENT" not in generator.tunables()[next(iter(generator.tunables()))]
    )


def test_rows_of_megabytes_in_many_rows_split_across_programs(tmp_path):
    """Group norm's groups (2^20 elements here: 256 chunks) hold no resident programs: a program per group
    would loop over it twice, so its statistics split across programs (partial sums), as a
    softmax's rows (above) do not: their online max and sum would take two reads, not one."""
    from kernelgraph.tools.builtin.kernels import PartialReduction

    task = task_file(tmp_path, "F.group_norm(x, 1)", "torch.randn(300, 4, 512, 512)")
    generator = builtin_generator(task, "triton", tmp_path, device="cuda")
    partials = [k for k in generator.program.kernels if isinstance(k, PartialReduction)]
    assert len(partials) == 1, generator.program.kernels
    assert generator.backend.default(partials[0])["BLOCKS"] > 1  # 76800 chunks: 64 a program


def test_the_exchange_compiles_for_hopper(tmp_path):
    """The interpreter does not check what the GPU compiler does: compile for sm_90 without a
    GPU, and find the exchange's 64-bit slots: one atomic write (a partial and its flag, which
    cannot tear) and volatile polls past L1, with no fence that would wait for earlier stores."""
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    task = task_file(tmp_path, ROWS["softmax"], "torch.randn(1024, 65536)")
    generator = builtin_generator(task, "triton", tmp_path, device="cuda")
    path = tmp_path / "kernel.py"
    path.write_text(generator.code())
    spec = importlib.util.spec_from_file_location("resident_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    [(name, config)] = [kv for kv in generator.default_config().items() if kv[1].get("RESIDENT")]
    fn = getattr(module, name)
    kinds = {"partials": "*i64"}  # the rest: fp32 tensors
    signature = {p.name: "constexpr" if p.is_constexpr else kinds.get(p.name, "*fp32")
                 for p in fn.params}  # fmt: skip
    constexprs = {"BLOCK_R": config["BLOCK_R"], "CHUNKS": 65536 // config["BLOCK_R"]}
    compiled = triton.compile(
        ASTSource(fn, signature=signature, constexprs=constexprs),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": config["num_warps"]},
    )
    ptx = compiled.asm["ptx"]
    assert "atom.global.gpu.relaxed.exch.b64" in ptx
    assert "ld.volatile.global" in ptx  # the wait
    assert "fence" not in ptx and "membar" not in ptx


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(
    ("name", "length"), [("softmax", 200000), ("layer_norm", 200000), ("l1_norm", 199999)]
)
def test_resident_rows_in_many_chunks_verify_on_a_gpu(tmp_path, name, length):
    """199999: misaligned rows, vector loads and each row's partial groups stored apart."""
    from kernelgraph.tools.harness.cache import EvalCache
    from kernelgraph.tools.harness.config import EvalConfig
    from kernelgraph.tools.harness.evaluate import evaluate

    task = task_file(tmp_path, ROWS[name], f"torch.randn(512, {length})")
    generator = builtin_generator(task, "triton", tmp_path, device="cuda")
    kernel = tmp_path / "kernel.py"
    kernel.write_text(generator.code())
    assert "_launch_resident(" in kernel.read_text()
    config = EvalConfig(dsl="triton", device="cuda", seeds=2)
    verdict = evaluate(task, kernel, config, EvalCache(tmp_path / "cache"))
    assert verdict.passed, verdict.message

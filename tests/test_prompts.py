"""The prompt layer: templates render deterministically with the context the nodes pass, every
DSL has its docs, and every worked example is a real kernel (the C++ and Triton ones pass the
harness on this CPU; the CUDA and TileLang ones pass its static checks and compile for sm_90a,
and run on a GPU where there is one)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jinja2
import pytest
import torch

from kernelgraph import prompts
from kernelgraph.tools.dsl import get_adapter, names
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.config import EvalConfig
from kernelgraph.tools.harness.static_gate import run_static_checks

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tests" / "cases" / "tasks"
EXAMPLES = [(dsl, path) for dsl in prompts.dsl_names() for path in prompts.example_files(dsl)]
EXAMPLE_IDS = [f"{dsl}-{path.stem}" for dsl, path in EXAMPLES]
# Examples whose task is evaluated at a lower precision than fp32.
EXAMPLE_PRECISION = {"matmul_fp16": "fp16"}

TASK_SOURCE = (TASKS / "prompt_example_rmsnorm.py").read_text()
FX_GRAPH = """%x: f32[3,7,1000] = input x
%pow_1: f32[3,7,1000] = %x.pow(2)
%mean: f32[3,7,1] = %pow_1.mean(dim=-1, keepdim=True)
%add: f32[3,7,1] = operator.add(%mean, 1e-06)
%rsqrt: f32[3,7,1] = torch.rsqrt(%add)
%mul: f32[3,7,1000] = operator.mul(%x, %rsqrt)
%weight: f32[1000] = self.weight
%mul_1: f32[3,7,1000] = operator.mul(%mul, %weight)
return %mul_1"""


def _op(op: str, kind: str, shape: list[int], args: str) -> dict:
    return {"op": op, "kind": kind, "shape": shape, "dtype": "float32", "args": args, "flops": 0}


# What tools.analysis produces for tests/cases/tasks/prompt_example_rmsnorm.py (trimmed).
ANALYSIS = {
    "version": "1",
    "device": "cuda",
    "constants": {"BATCH": 3, "SEQ": 7, "HIDDEN": 1000, "EPS": 1e-06},
    "inputs": [{"shape": [3, 7, 1000], "dtype": "float32"}],
    "init_inputs": ["1000", "1e-06"],
    "outputs": [{"shape": [3, 7, 1000], "dtype": "float32", "source": "op:5", "stage": 1}],
    "parameters": [{"name": "weight", "shape": [1000], "dtype": "float32"}],
    "ops": [
        _op("aten.pow", "pointwise", [3, 7, 1000], "f32[3,7,1000], 2"),
        _op("aten.mean", "reduction", [3, 7, 1], "f32[3,7,1000], [-1], True"),
        _op("aten.add", "pointwise", [3, 7, 1], "f32[3,7,1], 1e-06"),
        _op("aten.rsqrt", "pointwise", [3, 7, 1], "f32[3,7,1]"),
        _op("aten.mul", "pointwise", [3, 7, 1000], "f32[3,7,1000], f32[3,7,1]"),
        _op("aten.mul", "pointwise", [3, 7, 1000], "f32[3,7,1000], f32[1000]"),
    ],
    "ops_total": 6,
    "stages": [
        {"kind": "reduction", "ops": [0, 1, 2, 3], "anchor": 1, "shape": [3, 7, 1]},
        {"kind": "pointwise", "ops": [4, 5], "anchor": None, "shape": [3, 7, 1000]},
    ],
    "fx_graph": FX_GRAPH,
    "flops": 0,
    "min_bytes": 172_000,
    "intensity": 0.0,
    "sol": {
        "sol_ms": 0.0573,
        "compute_ms": 0.0,
        "memory_ms": 0.0573,
        "bound": "memory",
        "peak_flops": 6.7e13,
        "peak_bandwidth": 3.0e12,
        "source": "measured 2026-01-02T03:04:05+00:00, cached in /root/.cache/peak.json",
    },
    "bound": "memory",
    "dtypes": ["float32"],
    "notes": ["traced on meta tensors"],
}
PLAN = {
    "summary": "RMSNorm of a (3, 7, 1000) tensor over its last dimension.",
    "bound": "memory",
    "fuse": ["pow + mean + rsqrt + mul + mul"],
    "kernels": ["rmsnorm_kernel: one program per row"],
    "library_calls": [],
    "risks": ["accumulate the sum of squares in fp32"],
}
SKETCH = {
    "stages": [{"name": "rmsnorm", "description": "sum of squares, then scale the row"}],
    "parallel_axes": ["rows"],
    "grid": "(rows,)",
    "tiling": [{"name": "BLOCK", "values": [1024, 2048], "default": 1024}],
    "memory": "the row in registers",
    "reduction": "in-register tree",
    "precision": "fp32 accumulation",
    "pseudocode": "ss = sum(x * x); y = x * rsqrt(ss / n + eps) * w",
}
FAILURE = {
    "status": "incorrect",
    "check": "correctness",
    "message": "120 of 21000 elements differ beyond atol=0.0001, rtol=0.0001",
    "detail": None,
    "seed": 2,
    "shape": [3, 7, 1000],
    "max_abs_err": 0.0123,
    "max_rel_err": 0.5,
    "mismatches": 120,
}
PROFILE = {
    "kernel_ms": 0.4567,
    "eager_ms": 1.2,
    "speedup_vs_eager": 2.63,
    "sol_pct": 12.5,
    "bound": "memory",
    "timer": "cuda_events",
}
BEST = {
    "candidate_id": "c-0a1b2c3d",
    "kernel_ms": 0.4567,
    "speedup_vs_eager": 2.63,
    "speedup_vs_compile": None,
    "sol_pct": 12.5,
    "evaluation_id": "e-0a1b2c3d",
}
PREVIOUS_CODE = (ROOT / "prompts/dsl/triton/examples/rmsnorm.py").read_text()
DATE_OR_TIME = re.compile(r"\b(19|20)\d\d-[01]\d-[0-3]\d\b|\b[0-2]\d:[0-5]\d:[0-5]\d\b")
STORE_ID = re.compile(r"\b[a-z]-[0-9a-f]{8}\b")


def base_context(**overrides) -> dict:
    context = {
        "task_source": TASK_SOURCE,
        "analysis": ANALYSIS,
        "dsl": "triton",
        "device": "cuda",
        "policy": "strict",
        "precision": "fp32",
        "hardware": "NOTES ON THE HARDWARE",
    }
    return context | overrides


def full_context(step: str, **overrides) -> dict:
    """Everything the node for `step` passes (nodes/planner, sketch_writer, coder)."""
    context = base_context()
    if step in ("sketch_writer", "coder"):
        context |= {"plan": PLAN, "dsl_docs": prompts.dsl_docs("triton")}
    if step == "sketch_writer":
        context |= {"previous_sketch": SKETCH, "failures": ["c-0a1b2c3d: incorrect: off by one"]}
    if step == "coder":
        context |= {
            "sketch": SKETCH,
            "mode": "retry",
            "previous_code": PREVIOUS_CODE,
            "failure": FAILURE,
            "profile": None,
            "best": BEST,
            "feedback": None,
            "allow_edit": True,
        }
    return context | overrides


def coder(**overrides) -> str:
    """The coder's user message."""
    return prompts.render("coder", **full_context("coder", **overrides))[1]["content"]


# ---------------------------------------------------------------- rendering


def test_the_steps_are_the_llm_nodes():
    assert prompts.steps() == ["coder", "planner", "sketch_writer"]


@pytest.mark.parametrize("step", prompts.steps())
def test_each_step_renders_a_system_and_a_user_message(step):
    messages = prompts.render(step, **full_context(step))
    assert [m["role"] for m in messages] == ["system", "user"]
    system, user = (m["content"] for m in messages)
    assert all(isinstance(m["content"], str) and m["content"].strip() for m in messages)
    assert "NOTES ON THE HARDWARE" in system and "atol = rtol = 1e-4" in system
    assert TASK_SOURCE.strip() in user  # the reference, verbatim
    for text in (
        "Forward inputs: float32[3, 7, 1000]",
        "Parameters and buffers: weight: float32[1000]",
        FX_GRAPH,
        "[1] aten.mean(f32[3,7,1000], [-1], True) [reduction] -> float32[3, 7, 1]",
        "1. reduction: [0] aten.pow, [1] aten.mean, [2] aten.add, [3] aten.rsqrt; main op [1]",
        "minimum memory traffic (inputs, parameters and outputs once): 172 kB",
        "Speed of light on this device: 57.3 us",
        "Note: traced on meta tensors",
    ):
        assert text in user
    assert "{{" not in system + user and "{%" not in system + user


@pytest.mark.parametrize("step", prompts.steps())
@pytest.mark.parametrize("missing", ["task_source", "policy", "hardware"])
def test_a_missing_variable_raises(step, missing):
    context = full_context(step)
    del context[missing]
    with pytest.raises(jinja2.UndefinedError):
        prompts.render(step, **context)


@pytest.mark.parametrize(
    ("step", "missing"),
    [("sketch_writer", "plan"), ("sketch_writer", "failures"), ("coder", "mode")],
)
def test_a_missing_step_variable_raises(step, missing):
    context = full_context(step)
    del context[missing]
    with pytest.raises(jinja2.UndefinedError):
        prompts.render(step, **context)


def test_an_unknown_step_is_a_key_error_naming_the_known_ones():
    with pytest.raises(KeyError, match="planner"):
        prompts.render("reviewer", **base_context())


@pytest.mark.parametrize("step", prompts.steps())
def test_rendering_is_deterministic_and_carries_no_clock_or_ids(step):
    first = prompts.render(step, **full_context(step))
    second = prompts.render(step, **full_context(step))
    assert first == second
    text = "\n".join(m["content"] for m in first)
    assert not DATE_OR_TIME.search(text)
    assert not STORE_ID.search(text)  # candidate ids are random: never in a prompt


def test_json_in_prompts_is_sorted_and_not_html_escaped():
    plan = PLAN | {"risks": ["x < y && z > 0"]}
    user = coder(plan=plan, mode="write", previous_code=None, allow_edit=False)
    assert '"bound": "memory",\n  "fuse"' in user  # sorted keys, indented
    assert "x < y && z > 0" in user


def test_code_is_quoted_byte_for_byte():
    code = 'import torch\n\n\n\nclass ModelNew:  \n    s = """\n```\n"""\n'
    user = coder(mode="refine", previous_code=code, profile=PROFILE)
    assert code.rstrip("\n") in user  # blank lines and trailing spaces kept, fence made longer
    assert "````python\n" + code.rstrip("\n") + "\n````" in user


def test_an_empty_analysis_still_renders():
    user = prompts.render("planner", **base_context(analysis={}))[1]["content"]
    assert "no analysis available" in user
    sparse = {
        "inputs": [{"shape": [4], "dtype": "float32"}, {"value": "3"}],
        "ops": [{"op": "add", "kind": "pointwise", "shape": [4], "dtype": "float32"}],
        "stages": [{"kind": "pointwise", "ops": ["add", "mul"]}],
        "sol": {"sol_ms": None, "reason": "no peak numbers for this device"},
    }
    user = prompts.render("planner", **base_context(analysis=sparse))[1]["content"]
    assert "Forward inputs: float32[4], 3" in user
    assert "1. pointwise: add, mul" in user
    assert "Speed of light: unknown (no peak numbers for this device)" in user


# ---------------------------------------------------------------- policies and precisions


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("strict", "no PyTorch compute at all"), ("hybrid", "heavy library ops are allowed")],
)
def test_the_policy_is_explained(policy, expected):
    system = prompts.render("planner", **base_context(policy=policy))[0]["content"]
    assert expected in system


@pytest.mark.parametrize(
    ("precision", "expected"),
    [
        ("fp32", 'input_precision="ieee"'),
        ("tf32", "atol = rtol = 1e-3"),
        ("fp16", "torch.float16"),
        ("bf16", "torch.bfloat16"),
    ],
)
def test_the_precision_is_explained(precision, expected):
    system = prompts.render("planner", **base_context(precision=precision))[0]["content"]
    assert expected in system


@pytest.mark.parametrize(
    ("precision", "device", "conv_tf32"),
    [("fp32", "cuda", True), ("fp32", "cpu", False), ("ieee", "cuda", False)],
)
def test_the_convolution_reference_flags_are_explained(precision, device, conv_tf32):
    """fp32 judges with PyTorch's default flags, so a GPU model is told that cuDNN may run a
    convolution in TF32 and how to reproduce it; `ieee` is fp32 with TF32 off everywhere."""
    context = base_context(precision=precision, device=device)
    system = prompts.render("planner", **context)[0]["content"]
    assert f"Precision {precision}: the harness casts floating inputs" in system
    assert ("0xFFFFE000" in system) == conv_tf32
    assert ("TF32 is disabled on both sides" in system) == (precision == "ieee")


def test_the_cpu_interpreter_is_explained_for_triton_on_cpu():
    system = prompts.render("planner", **base_context(device="cpu"))[0]["content"]
    assert "Triton interpreter" in system
    system = prompts.render("planner", **base_context(device="cpu", dsl="cpp"))[0]["content"]
    assert "Triton interpreter" not in system and "OpenMP" in system


def test_empty_hardware_notes_leave_no_heading():
    system = prompts.render("planner", **base_context(hardware=""))[0]["content"]
    assert "Hardware notes" not in system


# ---------------------------------------------------------------- steps and modes


def test_the_sketch_writer_is_told_when_the_previous_sketch_failed():
    context = full_context("sketch_writer")
    user = prompts.render("sketch_writer", **context)[1]["content"]
    assert "The previous design failed" in user and "different design" in user
    assert '"reduction": "in-register tree"' in user
    assert "- candidate: incorrect: off by one" in user  # its id scrubbed
    first = prompts.render("sketch_writer", **(context | {"previous_sketch": None, "failures": []}))
    assert "previous design" not in first[1]["content"]
    assert "# triton documentation" in first[0]["content"]


def test_write_mode_asks_for_the_whole_file():
    user = coder(mode="write", previous_code=None, failure=None, best=None, allow_edit=False)
    assert "Write the triton kernel file" in user
    assert "one ```python block" in user
    assert "SEARCH" not in user and "Current file" not in user


def test_retry_shows_the_failure_record_and_the_current_file():
    user = coder(mode="retry")
    for text in (
        "status: incorrect",
        "failed check: correctness",
        FAILURE["message"],
        "seed: 2",
        "output shape: [3, 7, 1000]",
        "max abs error: 0.0123",
        "mismatched elements: 120",
        "The results are wrong",
        "## Current file",
        "def rmsnorm_kernel(",
    ):
        assert text in user


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        ("compile_error", "did not compile"),
        ("rejected", "rejected it by rule"),
        ("timeout", "time limit"),
        ("crashed", "out-of-bounds"),
    ],
)
def test_retry_hints_follow_the_status(status, hint):
    failure = FAILURE | {"status": status, "message": "line 12: boom", "check": "compile"}
    user = coder(mode="retry", failure=failure)
    assert hint in user and "line 12: boom" in user


def test_retry_without_a_failure_record_still_renders():
    assert "No failure record" in coder(mode="retry", failure=None)


def test_refine_shows_the_profile_and_the_speed_of_light_gap():
    user = coder(mode="refine", failure=None, profile=PROFILE)
    assert "make it faster" in user
    assert "kernel time: 0.4567 ms" in user
    assert "speedup 2.63x" in user
    assert "12.5% of it" in user and "57.3 us" in user
    assert "memory-bound" in user
    compute = coder(mode="refine", failure=None, profile=PROFILE | {"bound": "compute"})
    assert "compute-bound" in compute


def test_feedback_shows_the_reviewers_words():
    feedback = "Too many kernels.\nFuse the epilogue."
    user = coder(mode="feedback", failure=None, feedback=feedback)
    assert "A human reviewer rejected" in user
    assert "> Too many kernels.\n> Fuse the epilogue." in user


def test_allow_edit_explains_search_replace_exactly():
    user = coder(mode="retry", allow_edit=True)
    block = (
        "<<<<<<< SEARCH\nexact lines from the current file\n=======\n"
        "replacement lines\n>>>>>>> REPLACE"
    )
    assert block in user
    assert "applied in order" in user and "match the current file exactly" in user
    assert "SEARCH" not in coder(mode="retry", allow_edit=False)


# ---------------------------------------------------------------- DSL docs


@pytest.mark.parametrize("dsl", names())
def test_every_registered_dsl_has_docs_and_worked_examples(dsl):
    folder = ROOT / "prompts" / "dsl" / dsl
    for name in prompts.DOC_ORDER:
        assert (folder / name).read_text().strip(), f"{dsl}/{name} is empty"
    examples = prompts.example_files(dsl)
    assert len(examples) >= 2
    docs = prompts.dsl_docs(dsl)
    positions = [docs.index((folder / name).read_text().strip()) for name in prompts.DOC_ORDER]
    assert positions == sorted(positions)  # basics, api, pitfalls, in that order
    for path in examples:
        assert f"## Worked example: {path.name} - " in docs
        assert path.read_text().strip() in docs
    assert 4_000 < len(docs) < 18_500  # sent with every coder call: keep it compact


def test_dsl_docs_of_an_unknown_dsl_is_a_key_error():
    with pytest.raises(KeyError, match="triton"):
        prompts.dsl_docs("fortran")


def test_a_new_dsl_is_a_folder(tmp_path, monkeypatch):
    folder = tmp_path / "dsl" / "toy"
    (folder / "examples").mkdir(parents=True)
    for name in ("basics.md", "api.md", "pitfalls.md", "extra.md"):
        (folder / name).write_text(f"# {name}\n")
    (folder / "examples" / "add.py").write_text(
        '"""Toy: add two tensors."""\nclass ModelNew: ...\n'
    )
    monkeypatch.setattr(prompts, "DSL_DIR", tmp_path / "dsl")
    assert prompts.dsl_names() == ["toy"]
    docs = prompts.dsl_docs("toy")
    assert docs.index("# basics.md") < docs.index("# api.md") < docs.index("# pitfalls.md")
    assert docs.index("# pitfalls.md") < docs.index("# extra.md")
    assert "## Worked example: add.py - Toy: add two tensors." in docs


# ---------------------------------------------------------------- worked examples


def task_for(path: Path) -> Path:
    return TASKS / f"prompt_example_{path.stem}.py"


@pytest.mark.parametrize(("dsl", "path"), EXAMPLES, ids=EXAMPLE_IDS)
def test_worked_examples_parse_define_model_new_and_pass_the_static_checks(dsl, path):
    code = path.read_text()
    tree = ast.parse(code)
    assert "ModelNew" in [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    assert ast.get_docstring(tree), "the first docstring line is the example's heading"
    assert task_for(path).is_file(), "each example has a task under tests/cases/tasks"
    device = get_adapter(dsl).devices[0]
    failure = run_static_checks(code, get_adapter(dsl), EvalConfig(dsl=dsl, device=device))
    assert failure is None, failure.message()


CPU_EXAMPLES = [(d, p) for d, p in EXAMPLES if "cpu" in get_adapter(d).devices]


@pytest.mark.parametrize(
    ("dsl", "path"), CPU_EXAMPLES, ids=[f"{d}-{p.stem}" for d, p in CPU_EXAMPLES]
)
def test_cpu_worked_examples_pass_the_harness(dsl, path, tmp_path):
    from kernelgraph.tools.harness.evaluate import evaluate

    precision = EXAMPLE_PRECISION.get(path.stem, "fp32")
    config = EvalConfig(dsl=dsl, device="cpu", seeds=1, profile=False, precision=precision)
    verdict = evaluate(task_for(path), path, config, cache=EvalCache(tmp_path), use_cache=False)
    assert verdict.passed, verdict.message


GPU_ONLY = [(d, p) for d, p in EXAMPLES if "cpu" not in get_adapter(d).devices]


@pytest.mark.slow
@pytest.mark.parametrize(("dsl", "path"), GPU_ONLY, ids=[f"{d}-{p.stem}" for d, p in GPU_ONLY])
def test_gpu_worked_examples_compile_for_hopper(dsl, path):
    from kernelgraph.tools.dsl.cuda import nvcc
    from kernelgraph.tools.harness.compile_only import compile_only

    if not Path(nvcc()).exists():
        pytest.skip("needs nvcc")
    if dsl == "tilelang":
        pytest.importorskip("tilelang")
    report = compile_only(task_for(path), path, dsl, "sm_90a", {}, 300)
    assert report["ok"], report.get("message")
    assert report["artifacts"].get("cubin", 0) > 0


GPU_EXAMPLES = [(d, p) for d, p in EXAMPLES if "cuda" in get_adapter(d).devices]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(
    ("dsl", "path"), GPU_EXAMPLES, ids=[f"{d}-{p.stem}" for d, p in GPU_EXAMPLES]
)
def test_worked_examples_pass_on_a_gpu(dsl, path, tmp_path):
    from kernelgraph.tools.harness.evaluate import evaluate

    if dsl == "tilelang":
        pytest.importorskip("tilelang")
    precision = EXAMPLE_PRECISION.get(path.stem, "fp32")
    config = EvalConfig(dsl=dsl, device="cuda", seeds=2, precision=precision)
    verdict = evaluate(task_for(path), path, config, cache=EvalCache(tmp_path), use_cache=False)
    assert verdict.passed, verdict.message


# ---------------------------------------------------------------- hardware notes


@pytest.mark.parametrize(
    ("machine", "arch"),
    [("x86_64", "x86_64"), ("AMD64", "x86_64"), ("aarch64", "aarch64"), ("arm64", "aarch64")],
)
def test_cpu_arch_comes_from_the_machine(monkeypatch, machine, arch):
    monkeypatch.delenv(prompts.ARCH_ENV, raising=False)
    monkeypatch.setattr(prompts.platform, "machine", lambda: machine)
    assert prompts.hardware_arch("cpu") == arch
    assert prompts.hardware_notes("cpu").startswith("# Hardware:")


@pytest.mark.parametrize(
    ("capability", "arch"),
    [((9, 0), "hopper"), ((8, 0), "ampere"), ((8, 6), "ampere"), ((8, 9), "ada"), (None, "")],
)
def test_gpu_arch_comes_from_the_compute_capability(monkeypatch, capability, arch):
    monkeypatch.delenv(prompts.ARCH_ENV, raising=False)
    monkeypatch.setattr(prompts, "_cuda_capability", lambda index: capability)
    assert prompts.hardware_arch("cuda") == arch
    assert prompts.hardware_arch("cuda:1") == arch


def test_hardware_notes_for_hopper_and_missing_notes(monkeypatch):
    monkeypatch.delenv(prompts.ARCH_ENV, raising=False)
    monkeypatch.setattr(prompts, "_cuda_capability", lambda index: (9, 0))
    assert "132 SMs" in prompts.hardware_notes("cuda")
    monkeypatch.setattr(prompts, "_cuda_capability", lambda index: (8, 9))  # no ada.md
    assert prompts.hardware_notes("cuda") == ""
    monkeypatch.setattr(prompts.platform, "machine", lambda: "riscv64")
    assert prompts.hardware_notes("cpu") == ""
    assert prompts.hardware_notes("npu") == ""


def test_the_arch_can_be_named_in_the_environment(monkeypatch):
    monkeypatch.setenv(prompts.ARCH_ENV, "hopper")
    assert prompts.hardware_arch("cuda") == "hopper"
    assert "Hopper" in prompts.hardware_notes("cpu")
    monkeypatch.setenv(prompts.ARCH_ENV, "../../README")
    assert prompts.hardware_notes("cuda") == ""


def test_hardware_notes_on_this_machine_do_not_crash():
    for device in ("cpu", "cuda"):
        assert isinstance(prompts.hardware_notes(device), str)

"""The task analysis: op classification and stages (in-process, on small models of our own), and
analyze_task end to end in its sandboxed worker (examples, broken tasks, huge shapes, the cache).

The sandboxed analyses run once per module, several at a time (each worker spends seconds
importing torch), against a cache directory of this module's own whose CPU peaks are fixed, so
speed-of-light numbers are exact.
"""

from __future__ import annotations

import json
import os
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from proc_helpers import wait_until_gone

from kernelgraph.state.analysis import TaskAnalysis, validate_analysis
from kernelgraph.tools.analysis import ANALYSIS_VERSION, analysis_cache_key, analyze_task
from kernelgraph.tools.analysis.ops import classify
from kernelgraph.tools.analysis.stages import build_stages, resolve
from kernelgraph.tools.analysis.trace import fx_graph_text, record_ops
from kernelgraph.tools.analysis.worker import analyze_module
from kernelgraph.tools.harness import sandbox
from kernelgraph.tools.harness.cache import EvalCache
from kernelgraph.tools.harness.env_info import cpu_model
from kernelgraph.tools.harness.evaluation import Evaluation
from kernelgraph.tools.harness.janitor import JANITOR
from kernelgraph.tools.harness.verdict import TaskError
from kernelgraph.tools.task import TaskSource

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
TASKS = Path(__file__).resolve().parent / "cases" / "tasks"
BANDWIDTH, FP32_FLOPS = 1e10, 1e11  # the fixed CPU peaks of this module's cache


# ---------------------------------------------------------------- classification table


@pytest.mark.parametrize(
    "op, kind",
    [
        ("aten.addmm.default", "gemm"),
        ("aten.bmm.default", "gemm"),
        ("aten.convolution.default", "conv"),
        ("aten.cudnn_convolution.default", "conv"),
        ("aten._softmax.default", "softmax"),
        ("aten._log_softmax.default", "softmax"),
        ("aten.logsumexp.default", "softmax"),
        ("aten.native_layer_norm.default", "norm"),
        ("aten._native_batch_norm_legit_no_training.default", "norm"),
        ("aten.mean.dim", "reduction"),
        ("aten.max.dim", "reduction"),
        ("aten.max.other", "pointwise"),  # elementwise maximum, by its overload
        ("aten.gelu.default", "pointwise"),
        ("aten.relu_.default", "pointwise"),  # in-place forms follow their base op
        ("aten._to_copy.default", "pointwise"),
        ("aten.__and__.Tensor", "pointwise"),
        ("aten.cumsum.default", "scan"),
        ("aten.max_pool2d_with_indices.default", "pool"),
        ("aten._scaled_dot_product_flash_attention.default", "attention"),
        ("aten.t.default", "view"),
        ("aten._unsafe_view.default", "view"),
        ("aten.empty.memory_format", "alloc"),
        ("aten.permute_copy.default", "layout"),
        ("aten.cat.default", "layout"),
        ("aten.gather.default", "index"),
        ("aten.some_future_op.default", "other"),
        ("mylib.custom.default", "other"),
        ("addmm", "gemm"),
    ],
)
def test_classify(op, kind):
    assert classify(op) == kind


# ---------------------------------------------------------------- stages of our own models


class Lambda(nn.Module):
    def __init__(self, fn, *modules: nn.Module) -> None:
        super().__init__()
        self.fn, self.inner = fn, nn.ModuleList(modules)

    def forward(self, *args):
        return self.fn(self, *args)


def summary(stages: list[dict]) -> list[tuple[str, int, int]]:
    """(kind, prologue length, epilogue length) per stage."""
    return [(s["kind"], len(s["prologue"]), len(s["epilogue"])) for s in stages]


def traced(model: nn.Module, *shapes) -> tuple[list[dict], list[dict]]:
    with torch.device("meta"):
        model = model.to("meta")
        inputs = [torch.randn(*shape) for shape in shapes]
        ops, _, _ = record_ops(model, inputs)
    return ops, build_stages(ops)


MODELS = {
    # name: (model, input shapes, expected stages)
    "softmax": (Lambda(lambda m, x: torch.softmax(x, -1)), [(4, 8)], [("softmax", 0, 0)]),
    "layer_norm": (nn.LayerNorm(8), [(4, 8)], [("norm", 0, 0)]),
    "linear_gelu": (
        Lambda(lambda m, x: F.gelu(m.inner[0](x)) * 0.5, nn.Linear(8, 16)),
        [(4, 8)],
        [("gemm", 0, 2)],
    ),
    "batched_linear": (  # 3-d input: view, addmm, view; the epilogue is seen through the views
        Lambda(lambda m, x: torch.relu(m.inner[0](x)), nn.Linear(8, 16)),
        [(2, 4, 8)],
        [("gemm", 0, 1)],
    ),
    "bmm_scale": (Lambda(lambda m, a, b: (a @ b) * 2), [(2, 4, 8), (2, 8, 3)], [("gemm", 0, 1)]),
    "conv_relu": (
        Lambda(lambda m, x: F.relu(m.inner[0](x)), nn.Conv2d(3, 4, 3)),
        [(1, 3, 8, 8)],
        [("conv", 0, 1)],
    ),  # fmt: skip
    "sum_of_squares_mean": (
        Lambda(lambda m, x: (x * x).sum(1) / 8),
        [(4, 8)],
        [("reduction", 1, 1)],
    ),
    "centering": (  # the subtraction broadcasts back to the input's size: a stage of its own
        Lambda(lambda m, x: x - x.mean(1, keepdim=True)),
        [(4, 8)],
        [("reduction", 0, 0), ("pointwise", 0, 0)],
    ),
    "pointwise_chain": (
        Lambda(lambda m, x, b: torch.clamp(x * torch.sigmoid(x) + b, -1, 1)),
        [(2, 3, 4, 4), (3, 1, 1)],
        [("pointwise", 0, 0)],
    ),
    "gemm_then_unrelated_pointwise": (
        Lambda(lambda m, a, b, y: (a @ b, y * 2)),
        [(4, 8), (8, 8), (4, 8)],
        [("gemm", 0, 0), ("pointwise", 0, 0)],
    ),
    "attention": (  # on meta: mul, bmm, _safe_softmax, bmm inside one composite call
        Lambda(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v) + 1),
        [(1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)],
        [("attention", 0, 1)],
    ),
    "rms_norm_with_prologue": (  # on meta rms_norm is pow, mean, add, rsqrt, mul
        Lambda(lambda m, x: m.inner[0](x * 2), nn.RMSNorm(8)),
        [(4, 8)],
        [("norm", 1, 0)],
    ),
    "conv_batchnorm_relu": (  # training mode: the step counter update belongs to no stage
        Lambda(
            lambda m, x: F.relu(m.inner[1](m.inner[0](x))), nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)
        ),  # fmt: skip
        [(2, 3, 8, 8)],
        [("conv", 0, 0), ("norm", 0, 1)],
    ),
    "pool_cumsum": (
        Lambda(lambda m, x: torch.cumsum(F.max_pool2d(x, 2), -1)),
        [(1, 2, 8, 8)],
        [("pool", 0, 0), ("scan", 0, 0)],
    ),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_stages_of_small_models(name):
    model, shapes, expected = MODELS[name]
    ops, stages = traced(model, *shapes)
    assert summary(stages) == expected, [(o["op"], o["kind"]) for o in ops]
    held = [i for stage in stages for i in stage["ops"]]
    assert len(held) == len(set(held)), "an op belongs to one stage at most"
    assert all(ops[i]["kind"] not in ("view", "alloc") for i in held)


def test_op_records_carry_shapes_flops_and_data_flow():
    ops, stages = traced(Lambda(lambda m, x: F.gelu(m.inner[0](x)), nn.Linear(8, 16)), (4, 8))
    assert [(o["op"], o["kind"]) for o in ops] == [
        ("aten.t", "view"),
        ("aten.addmm", "gemm"),
        ("aten.gelu", "pointwise"),
    ]
    addmm = ops[1]
    assert addmm["shape"] == [4, 16] and addmm["dtype"] == "float32"
    assert addmm["reads"] == ["param:inner.0.bias", "in:0", "op:0"]
    assert resolve("op:0", ops) == "param:inner.0.weight"  # through the transpose view
    assert addmm["arg_shapes"] == [[16], [4, 8], [8, 16]]
    assert addmm["flops"] == 2 * 4 * 8 * 16
    assert "f32[4,8]" in addmm["args"]
    assert stages[0]["reads"] == ["param:inner.0.bias", "in:0", "param:inner.0.weight"]
    assert stages[0]["flops"] == 2 * 4 * 8 * 16 and stages[0]["anchor"] == 1


def test_build_stages_needs_no_torch_and_skips_views():
    ops = [
        {"op": "aten.mm", "kind": "gemm", "shape": [4, 4], "reads": ["in:0", "in:1"]},
        {"op": "aten.view", "kind": "view", "shape": [16], "reads": ["op:0"]},
        {"op": "aten.add", "kind": "pointwise", "shape": [16], "reads": ["op:1", "param:b"]},
        {"op": "aten.mul", "kind": "pointwise", "shape": [2, 16], "reads": ["op:2", "in:2"]},
    ]
    stages = build_stages(ops)
    # the add joins the gemm as its epilogue (through the view); the mul broadcasts to a
    # bigger tensor, so it is a pointwise stage of its own that reads stage 0
    assert summary(stages) == [("gemm", 0, 1), ("pointwise", 0, 0)]
    assert stages[0]["ops"] == [0, 2] and stages[1]["reads"] == ["stage:0", "in:2"]


class LinearGelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 16)

    def forward(self, x):
        return F.gelu(self.linear(x))


class SignDependent(nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x


def test_fx_graph_text_has_shapes_and_module_calls():
    with torch.device("meta"):
        text, error = fx_graph_text(LinearGelu().to("meta"), [torch.randn(4, 8)])
    assert error is None
    assert text.splitlines() == [
        "%x: f32[4,8] = input x",
        "%linear: f32[4,16] = self.linear(%x)  # Linear(in_features=8, out_features=16, bias=True)",
        "%gelu: f32[4,16] = torch.nn.functional.gelu(%linear)",
        "return %gelu",
    ]


def test_fx_graph_is_null_on_data_dependent_control_flow():
    with torch.device("meta"):
        text, error = fx_graph_text(SignDependent(), [torch.randn(4)])
    assert text is None and "TraceError" in error


def test_an_input_passed_twice_keeps_its_first_label():
    model = Lambda(lambda m, a, b: a * b)
    with torch.device("meta"):
        x = torch.randn(4)
        ops, _, info = record_ops(model, [x, x])
    assert ops[0]["reads"] == ["in:0", "in:0"] and info["output_sources"] == ["op:0"]


class WrittenForCuda(nn.Module):
    """Moves itself and its data to the GPU, as many KernelBench references do."""

    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n).cuda()
        self.register_buffer("scale", torch.ones(n, device="cuda"))

    def forward(self, x):
        return torch.relu(self.linear(x.to("cuda")) * self.scale)


def test_a_task_written_for_cuda_is_analysed_on_meta_anywhere(analysis_env):
    module = types.ModuleType("our_task")  # our own code: it may run in this process
    module.Model = WrittenForCuda
    module.get_inputs = lambda: [torch.randn(8, 8).cuda()]
    module.get_init_inputs = lambda: [8]
    task = TaskSource(Path("our_task.py"), "N = 8\n")
    analysis = analyze_module(module, "cpu", task)
    assert analysis["traced_on"] == "meta" and analysis["constants"] == {"N": 8}
    assert summary(analysis["stages"]) == [("gemm", 0, 2)]
    assert analysis["parameters"][-1] == {
        "name": "scale",
        "shape": [8],
        "dtype": "float32",
        "buffer": True,
    }


# ---------------------------------------------------------------- sandboxed, end to end


@pytest.fixture(scope="module")
def analysis_env(tmp_path_factory):
    """A cache directory of this module's own, with fixed CPU peaks (no measuring)."""
    root = tmp_path_factory.mktemp("analysis-cache")
    entry = {"bandwidth": BANDWIDTH, "flops": {"fp32": FP32_FLOPS}, "measured_at": "fixed"}
    threads = {os.cpu_count() or 1, torch.get_num_threads()}
    peaks = {f"{cpu_model()} | threads={n}": entry for n in threads}
    (root / "cpu_peak.json").write_text(json.dumps(peaks))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELGRAPH_CACHE_DIR", str(root))
        yield EvalCache(root)


EXAMPLE_STAGES = {
    "matmul": [("gemm", 0, 0)],
    "linear_gelu_scale": [("gemm", 0, 2)],
    "softmax": [("softmax", 0, 0)],
    "layernorm": [("norm", 0, 0)],
    "mean_over_dim1": [("reduction", 0, 0)],
    "swish_bias_clamp": [("pointwise", 0, 0)],
    "conv3x3_relu": [("conv", 0, 1)],
}
MATMUL_SETS = {"M": 256, "N": 128, "K": 64}
BATCH = {
    **{name: (EXAMPLES / name / "task.py", {}) for name in EXAMPLE_STAGES},
    "matmul": (EXAMPLES / "matmul" / "task.py", MATMUL_SETS),
    "raises": (TASKS / "bad_reference_raises.py", {}),
    "huge": (TASKS / "analysis_huge.py", {}),
    "item_small": (TASKS / "analysis_item.py", {}),
    "item_large": (TASKS / "analysis_item.py", {"N": 2**27}),  # 512 MiB: no CPU fallback
    "sampled": (TASKS / "analysis_sampled_inputs.py", {"N": 2**29}),  # 4 GiB, never made
    "sampled_read": (TASKS / "analysis_sampled_inputs.py", {"N": 2**26, "READ_VALUE": 1}),
}


@pytest.fixture(scope="module")
def analyses(analysis_env):
    """analyze_task on every BATCH task, three workers at a time: name -> dict or TaskError."""
    sandbox.isolation()  # probe once, before the threads

    def one(name):
        path, sets = BATCH[name]
        try:
            return analyze_task(TaskSource.read(path, sets), "cpu", 60, analysis_env)
        except TaskError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(BATCH, pool.map(one, BATCH), strict=True))


def ok(analyses, name) -> dict:
    result = analyses[name]
    assert isinstance(result, dict), f"{name}: {result}"
    return result


@pytest.mark.parametrize("name", list(EXAMPLE_STAGES))
def test_example_stages(analyses, name):
    analysis = ok(analyses, name)
    assert analysis["trace"] == "aten" and analysis["traced_on"] == "meta"
    assert analysis["trace_error"] is None and analysis["fx_error"] is None
    assert summary(analysis["stages"]) == EXAMPLE_STAGES[name]
    last = len(analysis["stages"]) - 1
    assert [o["stage"] for o in analysis["outputs"]] == [last]
    assert analysis["dtypes"] == ["float32"] and analysis["version"] == ANALYSIS_VERSION
    assert analysis["fx_graph"].splitlines()[-1].startswith("return ")
    assert validate_analysis(analysis).stage_kinds() == [k for k, _, _ in EXAMPLE_STAGES[name]]


def test_example_details(analyses):
    mm = ok(analyses, "matmul")  # shrunk with --set-style sets
    assert mm["constants"] == MATMUL_SETS
    assert mm["inputs"] == [
        {"shape": [256, 64], "dtype": "float32"},
        {"shape": [64, 128], "dtype": "float32"},
    ]
    assert mm["outputs"][0]["shape"] == [256, 128]
    flops, nbytes = 2 * 256 * 128 * 64, 4 * (256 * 64 + 64 * 128 + 256 * 128)
    assert (mm["flops"], mm["min_bytes"]) == (flops, nbytes)
    assert mm["intensity"] == pytest.approx(flops / nbytes)
    assert mm["bound"] == "compute" == mm["sol"]["bound"]
    assert mm["sol"]["sol_ms"] == pytest.approx(1e3 * flops / FP32_FLOPS)
    assert mm["sol"]["peak_bandwidth"] == BANDWIDTH

    sm = ok(analyses, "softmax")
    assert sm["bound"] == "memory" and sm["flops"] == 0
    assert sm["sol"]["sol_ms"] == pytest.approx(1e3 * 2 * 4 * 4096 * 4096 / BANDWIDTH)

    lin = ok(analyses, "linear_gelu_scale")
    assert [(o["op"], o["kind"]) for o in lin["ops"]] == [
        ("aten.t", "view"),
        ("aten.addmm", "gemm"),
        ("aten.gelu", "pointwise"),
        ("aten.mul", "pointwise"),
    ]
    assert lin["stages"][0]["epilogue"] == [2, 3]
    assert {p["name"]: p["shape"] for p in lin["parameters"]} == {
        "linear.weight": [4096, 4096],
        "linear.bias": [4096],
    }
    assert lin["init_inputs"] == ["4096", "4096", "0.5"]
    assert "self.linear(%x)" in lin["fx_graph"]

    model = validate_analysis(lin)
    assert isinstance(model, TaskAnalysis) and model.ops[1].kind == "gemm"
    assert model.sol_ms == lin["sol"]["sol_ms"]


def test_task_raising_in_forward_is_a_task_error(analyses):
    error = analyses["raises"]
    assert isinstance(error, TaskError)
    assert "raises in Model.forward" in str(error) and "RuntimeError" in str(error)
    assert "bad_reference_raises.py" in str(error)


def test_huge_shapes_analyse_on_meta_without_memory(analyses):
    analysis = ok(analyses, "huge")  # 64 GiB of input: the worker's 16 GiB RSS limit holds
    assert analysis["inputs"] == [{"shape": [2**17, 2**17], "dtype": "float32"}]
    assert analysis["min_bytes"] > 4 * 2**34
    assert analysis["flops"] == 2 * 2**17 * 2**17 * 16
    assert summary(analysis["stages"]) == [("gemm", 0, 1)]


def test_meta_failure_falls_back_to_real_tensors_when_small(analyses):
    analysis = ok(analyses, "item_small")
    assert analysis["traced_on"] == "cpu" and analysis["trace"] == "aten"
    assert any("meta" in note for note in analysis["notes"])
    assert summary(analysis["stages"]) == [("reduction", 1, 0), ("pointwise", 0, 0)]


def test_meta_failure_on_a_large_task_is_reported_not_raised(analyses):
    analysis = ok(analyses, "item_large")
    assert analysis["trace"] is None and analysis["ops"] == [] and analysis["stages"] == []
    assert "too large" in analysis["trace_error"] and ".item()" in analysis["trace_error"]
    assert analysis["inputs"] == [{"shape": [2**27], "dtype": "float32"}]
    assert analysis["flops"] is None and analysis["bound"] is None


def test_inputs_drawn_from_a_distribution_trace_on_meta(analyses):
    """Its argument checks read values; with them off, 4 GiB of inputs cost nothing."""
    analysis = ok(analyses, "sampled")
    assert analysis["traced_on"] == "meta" and analysis["trace_error"] is None
    assert analysis["inputs"] == [{"shape": [2**29], "dtype": "float32"}] * 2
    assert summary(analysis["stages"]) == [("reduction", 2, 0)]  # sub, pow, mean


def test_the_references_estimate_on_meta_takes_distributions_too():
    """The prepare worker's FLOPs and bytes (speed-of-light's figures) come from meta tensors."""
    from kernelgraph.tools.harness.prepare import estimate_on_meta

    path, sets = BATCH["sampled"]
    estimate = estimate_on_meta(TaskSource.read(path, sets).load_module())
    assert estimate["meta_estimate"], estimate.get("meta_error")
    assert estimate["input_bytes"] == 2 * 4 * 2**29 and estimate["min_bytes"] > 4 * 2**30


def test_inputs_that_read_a_value_are_made_on_the_cpu_and_traced_as_meta(analyses):
    """Too large to trace on the CPU (512 MiB), but the forward needs no values."""
    analysis = ok(analyses, "sampled_read")
    assert analysis["trace"] == "aten" and analysis["trace_error"] is None
    assert analysis["traced_on"] == "meta" and analysis["flops"] is not None
    assert any("then traced on meta" in note for note in analysis["notes"])
    assert summary(analysis["stages"]) == [("reduction", 2, 0)]  # sub, pow, mean


def test_second_call_is_answered_from_the_cache(analyses, analysis_env, monkeypatch):
    def no_worker(*args, **kwargs):
        raise AssertionError("a cached analysis started a worker")

    monkeypatch.setattr(Evaluation, "worker", no_worker)
    path, sets = BATCH["softmax"]
    again = analyze_task(TaskSource.read(path, sets), "cpu", 60, analysis_env)
    assert again == analyses["softmax"]


def test_cache_key_follows_task_sizes_and_device():
    path = EXAMPLES / "matmul" / "task.py"
    base = analysis_cache_key(TaskSource.read(path), "cpu")
    assert base == analysis_cache_key(TaskSource.read(path), "cpu")
    assert base != analysis_cache_key(TaskSource.read(path), "cuda")
    assert base != analysis_cache_key(TaskSource.read(path, {"M": 8}), "cpu")


def test_hanging_forward_times_out_and_leaves_no_process(analysis_env, tmp_path, monkeypatch):
    spec_paths = []
    original = Evaluation.worker

    def spy(self, role, spec, *args, **kwargs):
        spec_paths.append(str(self.dir / role / "spec.json"))
        return original(self, role, spec, *args, **kwargs)

    monkeypatch.setattr(Evaluation, "worker", spy)
    task = TaskSource.read(TASKS / "analysis_hangs.py")
    with pytest.raises(TaskError, match="time limit") as info:
        analyze_task(task, "cpu", timeout_s=3, cache=EvalCache(tmp_path))
    assert "analysis_hangs.py" in str(info.value)
    assert len(spec_paths) == 1
    assert wait_until_gone(spec_paths[0]) == []
    JANITOR.wait()  # folders are removed by a background thread
    assert not Path(spec_paths[0]).parent.exists()  # the work directory is gone too
    assert not list((tmp_path / "evals").iterdir())  # a failure is not cached

import json
import os

import pytest
import torch

from kernelgraph.tools import roofline
from kernelgraph.tools.harness import env_info


@pytest.mark.parametrize(
    "name, key",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA A10", "A10"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
    ],
)
def test_gpu_name_maps_to_table_entry(name, key):
    peaks = roofline.gpu_peaks(name)
    assert peaks is not None and peaks.name == key
    assert key in peaks.source


@pytest.mark.parametrize(
    "name",
    ["NVIDIA B200", "NVIDIA GH200 480GB", "NVIDIA GeForce RTX 4090 D", "AMD Instinct MI300X"],
)
def test_unknown_gpu_has_no_peaks(name):
    assert roofline.gpu_peaks(name) is None


def test_h100_sxm_and_h200_datasheet_numbers():
    h100, h200 = roofline.gpu_peaks("NVIDIA H100 80GB HBM3"), roofline.gpu_peaks("NVIDIA H200")
    assert h100.bandwidth == pytest.approx(3.35e12)
    assert h200.bandwidth == pytest.approx(4.8e12)
    assert h100.flops["fp32"] == pytest.approx(67e12)
    assert h100.flops["bf16"] == h100.flops["fp16"] == pytest.approx(989e12)
    assert h200.flops == h100.flops


def test_every_rule_points_into_the_table():
    assert {rule.key for rule in roofline.GPU_RULES} <= set(roofline.GPU_TABLE)


def test_unknown_device_gives_reason_not_guess(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "NVIDIA B200")
    peaks, reason = roofline.resolve_peaks("cuda")
    assert peaks is None and "B200" in reason
    sol = roofline.speed_of_light(10**9, 10**9, peaks, torch.float32)
    assert sol["sol_ms"] is None and sol["reason"]
    assert roofline.sol_pct(sol["sol_ms"], 1.0) is None


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("m, n, k", [(64, 32, 16), (7, 5, 3)])
def test_count_flops_linear_and_matmul(device, m, n, k):
    with torch.device(device):
        linear = torch.nn.Linear(k, n, bias=False)
        x = torch.randn(m, k)
        w = torch.randn(k, n)
    assert roofline.count_flops(linear, [x]) == 2 * m * n * k
    assert roofline.count_flops(torch.matmul, [x, w]) == 2 * m * n * k


def test_count_flops_elementwise_is_zero():
    assert roofline.count_flops(torch.relu, [torch.randn(100)]) == 0


def test_min_bytes_counts_each_tensor_once():
    linear = torch.nn.Linear(8, 4)  # 32 + 4 fp32 parameters
    x = torch.randn(2, 8)
    out = linear(x)  # 2 x 4
    assert roofline.min_bytes([x], linear, out) == 4 * (16 + 36 + 8)
    # The same tensor passed twice, or as input and output (in place), counts once.
    assert roofline.min_bytes([x, x], None, x) == x.nbytes
    assert roofline.min_bytes({"a": [x], "b": 3}, [], (x.view(2, 8),)) == x.nbytes


def test_min_bytes_on_meta_tensors():
    with torch.device("meta"):
        a, b = torch.empty(10, dtype=torch.float16), torch.empty(10, dtype=torch.float16)
    assert roofline.min_bytes([a, b], None, None) == 40


H100 = roofline.gpu_peaks("NVIDIA H100 80GB HBM3")


def test_speed_of_light_memory_bound():
    # An elementwise op over 1 GB: no FLOPs counted, bound by bandwidth.
    sol = roofline.speed_of_light(0, 10**9, H100, torch.float32)
    assert sol["bound"] == "memory"
    assert sol["sol_ms"] == pytest.approx(1e3 * 1e9 / 3.35e12)
    assert sol["source"] == H100.source


@pytest.mark.parametrize(
    "dtype, tf32, peak",
    [
        (torch.float32, False, 494.5e12 / 3),  # fp32-accurate on tensor cores: tf32x3
        ("float32", True, 494.5e12),
        (torch.bfloat16, False, 989e12),
        ("float16", False, 989e12),
    ],
)
def test_speed_of_light_compute_bound_picks_dtype_peak(dtype, tf32, peak):
    n = 8192
    sol = roofline.speed_of_light(2 * n**3, 3 * n * n * 2, H100, dtype, tf32)
    assert sol["bound"] == "compute"
    assert sol["peak_flops"] == pytest.approx(peak)
    assert sol["sol_ms"] == pytest.approx(1e3 * 2 * n**3 / peak)


def test_speed_of_light_falls_back_to_fp32_and_says_so():
    v100 = roofline.gpu_peaks("Tesla V100-SXM2-16GB")
    sol = roofline.speed_of_light(10**12, 1, v100, torch.bfloat16)
    assert sol["peak_flops"] == pytest.approx(15.7e12)
    assert "bf16" in sol["note"]


@pytest.mark.parametrize(
    "sol_ms, kernel_ms, expected", [(1.0, 2.0, 50.0), (None, 2.0, None), (1.0, None, None)]
)
def test_sol_pct(sol_ms, kernel_ms, expected):
    assert roofline.sol_pct(sol_ms, kernel_ms) == expected


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGRAPH_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def fake_measure(monkeypatch):
    calls = []

    def measure():
        calls.append(torch.get_num_threads())
        return {"bandwidth": 1e10, "flops": {"fp32": 1e11}}

    monkeypatch.setattr(roofline, "measure_cpu", measure)
    return calls


def test_cpu_peaks_measured_once_then_read_from_cache(cache_dir, fake_measure):
    first = roofline.device_peaks("cpu")
    second = roofline.device_peaks("cpu")
    assert len(fake_measure) == 1
    assert first == second and first.bandwidth == 1e10 and first.flops == {"fp32": 1e11}
    cached = json.loads((cache_dir / "cpu_peak.json").read_text())
    key = f"{env_info.cpu_model()} | threads={torch.get_num_threads()}"
    assert cached[key]["bandwidth"] == 1e10


def test_cpu_peaks_keyed_by_thread_count(cache_dir, fake_measure):
    threads = torch.get_num_threads()
    try:
        roofline.cpu_peaks()
        torch.set_num_threads(threads + 1)
        roofline.cpu_peaks()
    finally:
        torch.set_num_threads(threads)
    roofline.cpu_peaks()
    assert fake_measure == [threads, threads + 1]


def test_cpu_measurement_is_plausible():
    peaks = roofline.measure_cpu(copy_mib=32, matmul_n=512, budget_s=0.05)
    assert 1e8 < peaks["bandwidth"] < 1e13
    assert 1e8 < peaks["flops"]["fp32"] < 1e15


def test_collect_env_is_fast_and_hostname_free():
    import socket
    import time

    start = time.perf_counter()
    env = env_info.collect_env("cpu", "triton 3.6")
    assert time.perf_counter() - start < 0.5
    assert env["torch_version"] == torch.__version__
    assert env["torch_threads"] == torch.get_num_threads()
    assert env["dsl_version"] == "triton 3.6"
    host = socket.gethostname()
    assert len(host) < 4 or host not in json.dumps(env)


def test_collect_env_records_no_unlisted_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-store")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    env = env_info.collect_env("cpu")
    assert "sk-do-not-store" not in json.dumps(env)
    assert env["omp_num_threads"] == "3"


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """An nvidia-smi on PATH that prints `output` and exits with `rc`."""

    def install(output: str, rc: int = 0):
        exe = tmp_path / "nvidia-smi"
        exe.write_text(f"#!/bin/sh\ncat <<'END'\n{output}\nEND\nexit {rc}\n")
        exe.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
        env_info._nvidia_smi.cache_clear()

    yield install
    env_info._nvidia_smi.cache_clear()


def test_nvidia_smi_row_matched_by_uuid(fake_smi):
    fake_smi("GPU-aaaa, 550.54, 1980, 2619, 1980, 2619\nGPU-bbbb, 550.54, 345, 2619, 1980, 2619")
    row = env_info._smi_for("bbbb")
    assert row["driver_version"] == "550.54"
    assert row["sm_clock_mhz"] == 345.0 and row["mem_clock_max_mhz"] == 2619.0


def test_nvidia_smi_failure_is_not_fatal(fake_smi):
    fake_smi("NVIDIA-SMI has failed", rc=9)
    assert env_info._smi_for("aaaa") == {"driver_version": None}


def _cache_entry(cache_dir, bandwidth, flops):
    key = f"{env_info.cpu_model()} | threads={torch.get_num_threads()}"
    entry = {"bandwidth": bandwidth, "flops": {"fp32": flops}, "measured_at": "then"}
    (cache_dir / "cpu_peak.json").write_text(json.dumps({key: entry}))


@pytest.mark.parametrize(
    ("cached", "expected"), [((1e8, 1e9), (1e10, 1e11)), ((1e15, 1e9), (1e15, 1e11))]
)
def test_a_refresh_keeps_the_higher_figures(cache_dir, fake_measure, cached, expected):
    """A figure measured while the machine was loaded is too low, never too high."""
    _cache_entry(cache_dir, *cached)
    peaks = roofline.cpu_peaks(refresh=True)
    assert (peaks.bandwidth, peaks.flops["fp32"]) == expected


def _verdict():
    from kernelgraph.tools.harness.verdict import Timing, Verdict

    return Verdict("passed", "", "cpp", "cpu", "strict", "fp32", timing=Timing(kernel_ms=1.0))


def test_a_cpu_kernel_above_its_peak_measures_the_peak_again_once(
    cache_dir, fake_measure, monkeypatch
):
    from kernelgraph.tools.harness import sol_fill
    from kernelgraph.tools.harness.config import EvalConfig

    monkeypatch.setattr(sol_fill, "_CPU_REMEASURED", set())
    _cache_entry(cache_dir, 1e8, 1e9)  # measured under load
    stale = roofline.cpu_peaks().__dict__
    config = EvalConfig(dsl="cpp", device="cpu", threads=torch.get_num_threads())
    meta = {"flops": 0, "min_bytes": 1e7}  # in 1 ms: 1e10 B/s, 10000% of the stale 1e8
    first = _verdict()
    sol_fill.fill_sol(first, config, meta, stale)
    assert len(fake_measure) == 1
    assert first.sol_pct == pytest.approx(100.0) and not first.warnings  # of 1e10 measured again
    # the next worker reads the raised figures from the cache; this process measures no more
    assert roofline.cpu_peaks().bandwidth == 1e10
    second = _verdict()
    sol_fill.fill_sol(second, config, meta, stale)
    assert len(fake_measure) == 1
    assert second.sol_pct == pytest.approx(1e4) and "faster than the peak" in second.warnings[0]


def test_flops_by_op_separates_the_convolutions():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 4)
    )
    x = torch.randn(2, 3, 8, 8)
    by_op = roofline.flops_by_op(model, [x])
    conv = 2 * (2 * 8 * 6 * 6) * (3 * 3 * 3)  # outputs x K, two FLOPs each
    assert roofline.conv_flops(by_op) == conv
    assert sum(by_op.values()) == roofline.count_flops(model, [x]) == conv + 2 * 2 * 4 * 288


@pytest.mark.parametrize(
    ("device", "precision", "conv_flops", "rate"),
    [
        ("cuda", "fp32", 10**12, "tf32"),  # cuDNN may run the reference's convolutions in TF32
        ("cuda", "fp32", 0, "fp32"),  # matmuls stay IEEE: the tf32x3 third of the TF32 rate
        ("cuda", "ieee", 10**12, "fp32"),
        ("cuda", "tf32", 0, "tf32"),
    ],
)
def test_a_tasks_speed_of_light_takes_the_rate_its_reference_may_use(
    device, precision, conv_flops, rate
):
    """A tf32rn convolution ran at 101-154% of an fp32 bound (H100, level 1): the bound must
    take the TF32 rate wherever the reference may use it, or sol_pct overstates."""
    from kernelgraph.tools.harness.config import EvalConfig
    from kernelgraph.tools.harness.sol_fill import fill_sol
    from kernelgraph.tools.harness.verdict import Timing, Verdict

    verdict = Verdict("passed", "", "triton", device, "strict", precision)
    verdict.timing = Timing(kernel_ms=10.0)
    config = EvalConfig(dsl="triton", device=device, precision=precision)
    meta = {"flops": 10**12, "conv_flops": conv_flops, "min_bytes": 10**6}
    fill_sol(verdict, config, meta, vars(H100))
    expected = H100.flops["tf32"] / (3 if rate == "fp32" else 1)
    assert verdict.sol["peak_flops"] == pytest.approx(expected)
    assert verdict.sol_pct == pytest.approx(100 * 1e3 * 10**12 / expected / 10.0)


@pytest.mark.parametrize(("kernel_ms", "bound"), [(0.3155, "memory"), (0.01, "compute")])
def test_a_kernel_with_less_arithmetic_than_the_reference_is_bounded_by_its_memory(
    kernel_ms, bound
):
    """level2/51's mean over a GEMM's outputs, rewritten as a GEMV, ran at 529% of the bound
    of the reference's 2.7e11 FLOPs (H200): those FLOPs bound nothing then; the inputs and
    outputs' bytes still do. Faster than even those keeps the warning about caches."""
    from kernelgraph.tools.harness.config import EvalConfig
    from kernelgraph.tools.harness.sol_fill import fill_sol
    from kernelgraph.tools.harness.verdict import Timing, Verdict

    verdict = Verdict("passed", "", "triton", "cuda", "strict", "fp32")
    verdict.timing = Timing(kernel_ms=kernel_ms)
    meta = {"flops": 2 * 2048 * 8192 * 8192, "min_bytes": 402_718_720}
    fill_sol(verdict, EvalConfig(dsl="triton", device="cuda"), meta, vars(H100))
    memory_ms = 1e3 * 402_718_720 / H100.bandwidth
    assert verdict.sol["bound"] == bound
    if bound == "memory":
        assert verdict.sol_pct == pytest.approx(100 * memory_ms / kernel_ms)
        assert verdict.sol["reference_compute_pct"] > 100
        assert "less arithmetic" in verdict.warnings[0]
    else:
        assert verdict.sol_pct > 100 and "faster than the peak" in verdict.warnings[0]

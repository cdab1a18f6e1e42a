"""Builtin kernels under KernelBench's protocol: no weights are copied into ModelNew.

KernelBench seeds torch, builds `Model(*get_init_inputs())`, seeds again with the same seed,
builds `ModelNew(*get_init_inputs())`, then compares the outputs on seeded inputs (fp32: atol =
rtol = 1e-4). ModelNew's parameters match only if its __init__ makes them exactly as the
reference does; the builtin runs the reference's own __init__ (tools/builtin/reference_init.py).

PROTOCOL below re-implements that comparison. It runs in a subprocess that cannot import
kernelgraph (builtin_helpers.run_isolated), so the kernel file must stand alone too: candidate
code never runs in the test process. Uninitialised memory is poisoned with NaN (as the harness does), so
parameters left empty cannot pass by luck.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from builtin_helpers import builtin_generator, run_isolated

from kernelgraph.tools.builtin.reference_init import InitUnavailable, extract

PROTOCOL = r"""
import importlib.util
import sys

import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton reads kernel source through the module
    spec.loader.exec_module(module)
    return module


task = load(sys.argv[1], "reference_task")
kernel = load(sys.argv[2], "candidate_kernel")
torch.use_deterministic_algorithms(True, warn_only=True)
torch.utils.deterministic.fill_uninitialized_memory = True  # torch.empty gives NaN

SEED, ATOL, RTOL = 42, 1e-4, 1e-4
init_inputs = task.get_init_inputs()
with torch.no_grad():
    torch.manual_seed(SEED)
    model = task.Model(*init_inputs)
    torch.manual_seed(SEED)
    model_new = kernel.ModelNew(*init_inputs)
for trial in range(2):
    torch.manual_seed(SEED + 1 + trial)
    inputs = task.get_inputs()
    with torch.no_grad():
        expected = model(*inputs)
        actual = model_new(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    actual = actual if isinstance(actual, (tuple, list)) else [actual]
    assert len(actual) == len(expected), f"{len(actual)} outputs, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.shape == e.shape, f"output {i}: shape {tuple(a.shape)} != {tuple(e.shape)}"
        if a.is_floating_point():
            assert not a.isnan().any(), f"output {i}: NaN"
        err = (a.double() - e.double()).abs().max().item()
        assert torch.allclose(a, e, atol=ATOL, rtol=RTOL), f"output {i}: max abs error {err}"
print("KERNELBENCH PROTOCOL OK")
"""

# A KernelBench-style GEMM task: super(Model, self), init arguments named like the constants.
GEMM_MULTIPLY_LEAKY_RELU = """
import torch
import torch.nn as nn


class Model(nn.Module):
    \"\"\"Gemm, multiply, LeakyReLU.\"\"\"

    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        x = self.gemm(x)
        x = x * self.multiplier
        x = self.leaky_relu(x)
        return x


batch_size = __BATCH__
in_features = __IN__
out_features = __OUT__
multiplier = 2.0
negative_slope = 0.1


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, multiplier, negative_slope]
"""

# Bare nn.Parameter(torch.randn(...)) tensors, one made by a module-level helper, drawn in order.
BARE_PARAMETERS = """
import torch
import torch.nn as nn

batch_size, channels, height, width = 2, 6, 5, 7
bias_shape = (channels, 1, 1)
GAIN_SCALE = 0.5


def scaled_randn(shape):
    return torch.randn(shape) * GAIN_SCALE


class Model(nn.Module):
    def __init__(self, bias_shape, scaling):
        super().__init__()
        self.scaling = scaling
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.gain = nn.Parameter(scaled_randn(bias_shape))

    def forward(self, x):
        x = torch.sigmoid(x) * self.gain + self.bias
        return torch.clamp(x * self.scaling, -1.0, 1.5)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [bias_shape, 1.7]
"""

# Norm layers: BatchNorm in eval mode (its running statistics are buffers) with randomised
# statistics and affine parameters, then LayerNorm and a random scale.
NORMS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, width):
        super(Model, self).__init__()
        self.bn = nn.BatchNorm2d(channels)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)
            self.bn.weight.normal_()
            self.bn.bias.normal_()
        self.bn.eval()
        self.ln = nn.LayerNorm(width)
        self.scale = nn.Parameter(torch.randn(width))

    def forward(self, x):
        return self.ln(self.bn(x)) * self.scale


def get_inputs():
    return [torch.randn(2, 4, 3, 10)]


def get_init_inputs():
    return [4, 10]
"""


def gemm_task(batch: int, in_features: int, out_features: int) -> str:
    sizes = {"__BATCH__": batch, "__IN__": in_features, "__OUT__": out_features}
    source = GEMM_MULTIPLY_LEAKY_RELU
    for mark, value in sizes.items():
        source = source.replace(mark, str(value))
    return source


LAYERS_BUILT_IN_A_HELPER = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width, depth):
        super(Model, self).__init__()
        self.body = self._make_layers(width, depth)

    def _make_layers(self, width, depth):
        return nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(depth)])

    def forward(self, x):
        return self.body(x)


def get_inputs():
    return [torch.randn(6, 16)]


def get_init_inputs():
    return [16, 3]
"""

CPP_CASES = {
    "gemm_multiply_leaky_relu": gemm_task(37, 70, 29),
    "bare_parameters": BARE_PARAMETERS,
    "norms": NORMS,
    "layers_built_in_a_helper": LAYERS_BUILT_IN_A_HELPER,  # ResNet's _make_layer
}


def kernel_for(source: str, dsl: str, tmp_path: Path) -> tuple[Path, Path]:
    task = tmp_path / "task.py"
    task.write_text(source)
    kernel = tmp_path / f"kernel_{dsl}.py"
    kernel.write_text(builtin_generator(task, dsl, tmp_path).code())
    return task, kernel


def run_protocol(task: Path, kernel: Path, dsl: str) -> subprocess.CompletedProcess:
    script = task.parent / "kernelbench_protocol.py"
    script.write_text(PROTOCOL)
    env = {"TRITON_INTERPRET": "1"} if dsl == "triton" else {}
    return run_isolated(script, str(task), str(kernel), cwd=task.parent, env=env)


def assert_passes(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0 and "KERNELBENCH PROTOCOL OK" in proc.stdout, (
        proc.stdout[-2000:] + proc.stderr[-4000:]
    )


@pytest.mark.parametrize("name", list(CPP_CASES))
def test_builtin_cpp_kernels_pass_kernelbench_protocol(tmp_path, name):
    task, kernel = kernel_for(CPP_CASES[name], "cpp", tmp_path)
    assert "The reference's __init__:" in kernel.read_text()
    assert_passes(run_protocol(task, kernel, "cpp"))


def test_builtin_triton_kernel_passes_kernelbench_protocol(tmp_path):
    task, kernel = kernel_for(gemm_task(6, 20, 12), "triton", tmp_path)
    assert_passes(run_protocol(task, kernel, "triton"))


def test_the_protocol_catches_empty_parameters(tmp_path):
    """The fallback (no task source: parameters made empty under their state_dict names) fails
    the protocol, so the cases above pass because the weights match, not by chance."""
    task, _ = kernel_for(CPP_CASES["bare_parameters"], "cpp", tmp_path)
    generator = builtin_generator(task, "cpp", tmp_path)
    generator.reference, generator.why_not = None, "a test asks for the fallback"
    kernel = tmp_path / "kernel_fallback.py"
    kernel.write_text(generator.code())
    assert "could not be reused (a test asks for the fallback)" in kernel.read_text()
    proc = run_protocol(task, kernel, "cpp")
    assert proc.returncode != 0 and "output 0" in proc.stderr, proc.stdout + proc.stderr[-3000:]


# ---------------------------------------------------------------- extraction (no subprocess)


HELPERS_TASK = '''
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

HIDDEN = 8
UNUSED = object()


def width(n):
    return n * 2


class Block(nn.Module):
    """A helper module: its __init__ and what that calls are kept, its forward is not."""

    def __init__(self, c):
        super(Block, self).__init__()
        self.fc = nn.Linear(c, width(c))
        self._reset()

    def _reset(self):
        self.fc.bias.data.zero_()

    def forward(self, x):
        return F.relu(self.fc(x))


class Model(nn.Module):
    limit = 3

    def __init__(self, c=HIDDEN, eps=1e-5):
        nn.Module.__init__(self)
        self.block = Block(c)
        self.scale = nn.Parameter(torch.randn(width(c)) * math.sqrt(eps))
        self.init_weights()

    def init_weights(self):
        self.scale.data.mul_(2)

    def forward(self, x):
        return self.block(x) * self.scale


def get_inputs():
    return [torch.randn(2, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
'''


def test_extract_takes_init_its_methods_and_the_module_names_it_needs():
    ref = extract(HELPERS_TASK)
    assert ref.init.startswith("def __init__(self, c=HIDDEN, eps=1e-05):\n    super().__init__()")
    assert ref.class_body == ["limit = 3"]
    assert [m.split("(")[0] for m in ref.methods] == ["def init_weights"]
    module = "\n".join(ref.module)
    assert ref.names == {"math", "torch", "nn", "HIDDEN", "width", "Block"}
    assert "def _reset" in module and "def forward" not in module  # Block without its forward
    for absent in ("UNUSED", "import torch.nn.functional", "def get_inputs", "class Model"):
        assert absent not in module


@pytest.mark.parametrize(
    "source, reason",
    [
        (None, "not given"),
        ("import torch\n", "no top-level class Model"),
        ("class Model(Base):\n    pass\n", "subclasses Base"),
        (
            "import torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.n = len(get_inputs())\n",
            "refers to get_inputs",
        ),
        (
            "import torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.forward(1)\n    def forward(self, x):\n"
            "        return x\n",
            "runs forward",
        ),
    ],
    ids=["no source", "no Model", "other base", "reads the inputs", "runs forward"],
)
def test_extract_says_why_it_cannot(source, reason):
    with pytest.raises(InitUnavailable, match=reason):
        extract(source)


FALLBACK_TASK = """
import torch
import torch.nn as nn

HELPER


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(5))
        INIT

    def forward(self, x):
        return x + self.bias


def get_inputs():
    return [torch.randn(3, 5)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    "helper, init, reason",
    [
        # a helper that computes with torch and is passed around (so it may run outside
        # __init__) would get the file rejected
        (
            "def init_bias(p):\n    nn.init.normal_(p)",
            "self.init_fn = init_bias; self.init_fn(self.bias)",
            "the copied code fails the static checks: torch.nn.init.normal_",
        ),
        # the C++ kernel file binds _lib itself
        ("_lib = 0.5", "self.bias.data.fill_(_lib)", "the task's _lib would clash"),
    ],
    ids=["static checks", "name clash"],
)
def test_a_task_init_that_cannot_be_copied_falls_back_with_the_reason(
    tmp_path, helper, init, reason
):
    task = tmp_path / "task.py"
    task.write_text(FALLBACK_TASK.replace("HELPER", helper).replace("INIT", init))
    code = builtin_generator(task, "cpp", tmp_path).code()
    assert f"could not be reused ({reason}" in code
    assert helper.splitlines()[0] not in code and "torch.empty((5,)" in code


@pytest.mark.parametrize("precision, follows_defaults", [("fp32", True), ("ieee", False)])
def test_fp32_sets_pytorchs_default_tf32_flags_as_kernelbench_runs(precision, follows_defaults):
    """KernelBench's evaluator leaves PyTorch's TF32 flags as they are (cuDNN convolutions may
    use TF32, matmuls may not), so `--precision fp32` judges with the same flags; `ieee` turns
    TF32 off everywhere."""
    import sys

    import torch

    from kernelgraph.tools.harness.config import PRECISIONS
    from kernelgraph.tools.harness.reference import set_precision_flags

    flags = "torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32"
    fresh = subprocess.run([sys.executable, "-c", f"import torch; print({flags})"],
                           capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    try:
        set_precision_flags(PRECISIONS[precision])
        now = [str(torch.backends.cudnn.allow_tf32), str(torch.backends.cuda.matmul.allow_tf32)]
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
    assert (now == fresh) == follows_defaults
    assert now[1] == "False"  # IEEE matmuls under both


FP16_TASKS = {
    "matmul_softmax": ("torch.softmax((x @ y) * 0.1, dim=-1)",
                       "torch.randn(8, 16).half(), torch.randn(16, 12).half()"),
    # its math decomposition casts the attention weights to fp16 and drops the cast
    "attention": ("F.scaled_dot_product_attention(x, y, y)",
                  "torch.rand(1, 2, 16, 8).half(), torch.rand(1, 2, 16, 8).half()"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(FP16_TASKS))
def test_an_fp16_task_at_fp32_is_judged_in_fp32_as_kernelbench_casts(tmp_path, name):
    """KernelBench's evaluator casts floating inputs and the model to the precision's dtype, so
    an fp16 task (KernelBench's attention problem makes fp16 inputs) at fp32 is judged in fp32
    at 1e-4. Judged in fp16 at 1e-4 instead, one fp16 rounding step (2.4e-4 near 0.5) failed the
    builtin's honest kernel. The kernel must return fp32, as the cast reference does."""
    from builtin_helpers import task_file
    from test_builtin import generate, verify

    task = task_file(tmp_path, *FP16_TASKS[name])
    kernel = generate(task, tmp_path)
    assert "dtype=torch.float32" in kernel.read_text()
    verdict = verify(task, kernel, tmp_path)
    assert verdict.passed, verdict.message
    half = tmp_path / "half.py"  # the same kernel, its result cast back to the task's fp16
    head, _, result = kernel.read_text().rstrip().rpartition("\n        return ")
    half.write_text(f"{head}\n        return {result}.half()\n")
    verdict = verify(task, half, tmp_path)
    assert not verdict.passed and "float16" in verdict.message, verdict.message

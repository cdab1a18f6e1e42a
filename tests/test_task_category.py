"""The op family of a task from its file name (`tools/task_category.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgraph.tools.task_category import FAMILIES, TABLE, category_of, normalize

ROOT = Path(__file__).resolve().parents[1]
KERNELBENCH = ROOT.parent / "shared" / "kernelbench"
BUILTIN_SUITE = ROOT / "benchmarks" / "builtin_suite"

# Real KernelBench names (levels 1-3), hard-coded so that this runs without a checkout.
REAL_NAMES = {
    "1_Square_matrix_multiplication_": "gemm",
    "3_Batched_matrix_multiplication": "gemm",
    "4_Matrix_vector_multiplication_": "gemm",
    "9_Tall_skinny_matrix_multiplication_": "gemm",
    "10_3D_tensor_matrix_multiplication": "gemm",
    "12_Matmul_with_diagonal_matrices_": "gemm",
    "18_Matmul_with_transposed_both": "gemm",
    "5_Matrix_scalar_multiplication": "activation",  # elementwise, not a GEMM
    "19_ReLU": "activation",
    "20_LeakyReLU": "activation",
    "27_SELU_": "activation",
    "28_HardSigmoid": "activation",
    "30_Softsign": "activation",
    "88_MinGPTNewGelu": "activation",  # "Min" is not a reduction here
    "23_Softmax": "softmax",
    "24_LogSoftmax": "softmax",
    "33_BatchNorm": "norm",
    "36_RMSNorm_": "norm",
    "37_FrobeniusNorm_": "norm",
    "38_L1Norm_": "norm",
    "40_LayerNorm": "norm",
    "41_Max_Pooling_1D": "pooling",  # a max, but a pooling first
    "45_Average_Pooling_2D": "pooling",
    "47_Sum_reduction_over_a_dimension": "reduction",
    "49_Max_reduction_over_a_dimension": "reduction",
    "51_Argmax_over_a_dimension": "reduction",
    "52_Argmin_over_a_dimension": "reduction",
    "50_conv_standard_2D__square_input__square_kernel": "conv",
    "64_conv_transposed_1D": "conv",
    "87_conv_pointwise_2D": "conv",  # "pointwise" comes after "conv"
    "86_conv_depthwise_separable_2D": "conv",
    "89_cumsum": "scan",
    "90_cumprod": "scan",
    "93_masked_cumsum": "scan",
    "94_MSELoss": "loss",
    "95_CrossEntropyLoss": "loss",
    "98_KLDivLoss": "loss",
    "100_HingeLoss": "loss",
    "97_ScaledDotProductAttention": "attention",
    "level2/10_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh": "conv",
    "level2/14_Gemm_Divide_Sum_Scaling": "gemm",
    "level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp": "gemm",
    "level2/24_Conv3d_Min_Softmax": "conv",
    "level2/28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply": "gemm",
    "level2/99_Matmul_GELU_Softmax": "gemm",
    "9_ResNet18": "network",
    "35_LSTM": "network",
    "39_GRU": "network",
    "45_UNetSoftmax": "network",
    "32_ConvolutionalVisionTransformer": "network",
    "43_MinGPTCausalAttention": "attention",  # by stem; "level3/..." is a network
    "50_ReLUSelfAttention": "attention",
}

OTHER_NAMES = {
    "softmax_rows": "softmax",
    "pointwise_gelu": "activation",
    "reduction_sum_last": "reduction",
    "reduction_mean_relu_dim1": "reduction",
    "norm_layernorm": "norm",
    "norm_l2_rows": "norm",
    "gemm_tall_skinny": "gemm",
    "fused_linear_relu": "gemm",
    "fused_bmm_scale_residual": "gemm",
    "fused_conv_gelu": "conv",
    "attention_sdpa_fp16": "attention",
    "my_task": "other",
    "": "other",
}

# Level-1 files that may legitimately be "other" (none so far).
LEVEL1_OTHER: set[str] = set()

# What a builtin-suite file's name starts with says its family.
BUILTIN_PREFIXES = {
    "attention_": "attention",
    "fused_conv": "conv",
    "fused_linear": "gemm",
    "fused_matmul": "gemm",
    "fused_bmm": "gemm",
    "gemm_": "gemm",
    "norm_": "norm",
    "pointwise_": "activation",
    "reduction_": "reduction",
    "softmax_": "softmax",
}


@pytest.mark.parametrize(("name", "family"), sorted(REAL_NAMES.items()))
def test_kernelbench_names(name: str, family: str) -> None:
    assert category_of(name) == family


@pytest.mark.parametrize(("name", "family"), sorted(OTHER_NAMES.items()))
def test_free_form_names(name: str, family: str) -> None:
    assert category_of(name) == family


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("level3/43_MinGPTCausalAttention", "network"),
        ("level3/31_VisionAttention", "network"),
        ("/some/KernelBench/level3/1_MLP.py", "network"),
        ("/some/KernelBench/level1/23_Softmax.py", "softmax"),
        ("23_Softmax.py", "softmax"),
        ("suite/softmax_rows/task.py", "softmax"),
        ("C:\\bench\\level1\\90_cumprod.py", "scan"),
    ],
)
def test_prefixes_and_paths(name: str, family: str) -> None:
    assert category_of(name) == family


def test_normalize() -> None:
    assert normalize("/x/KernelBench/level2/14_Gemm_Divide.py") == "level2/14_gemm_divide"
    assert normalize("/x/suite/my_task/task.py") == "my_task"
    assert normalize("23_Softmax") == "23_softmax"


def test_table_families_are_known() -> None:
    assert {family for family, _ in TABLE} <= set(FAMILIES)
    assert "other" in FAMILIES


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("Softmax_Conv2d", "softmax"),  # the op named first decides
        ("Conv2d_Softmax", "conv"),
        ("Sum_Gemm", "reduction"),
        ("Gemm_Sum", "gemm"),
    ],
)
def test_first_op_named_decides(name: str, family: str) -> None:
    assert category_of(name) == family


def _stems(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_"))


def test_builtin_suite_prefixes() -> None:
    stems = _stems(BUILTIN_SUITE)
    assert stems, f"no task files in {BUILTIN_SUITE}"
    for stem in stems:
        expected = [f for prefix, f in BUILTIN_PREFIXES.items() if stem.startswith(prefix)]
        assert expected, f"{stem}: no prefix in BUILTIN_PREFIXES"
        assert category_of(stem) == expected[0], stem


@pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="no KernelBench checkout")
def test_every_level1_file_has_a_family() -> None:
    others = [s for s in _stems(KERNELBENCH / "level1") if category_of(s) == "other"]
    assert set(others) <= LEVEL1_OTHER, others


@pytest.mark.skipif(not (KERNELBENCH / "level2").is_dir(), reason="no KernelBench checkout")
def test_level2_files_are_conv_or_gemm() -> None:
    families = {s: category_of(f"level2/{s}") for s in _stems(KERNELBENCH / "level2")}
    assert {s: f for s, f in families.items() if f not in ("conv", "gemm")} == {}


@pytest.mark.skipif(not (KERNELBENCH / "level3").is_dir(), reason="no KernelBench checkout")
def test_level3_files_are_networks() -> None:
    for stem in _stems(KERNELBENCH / "level3"):
        assert category_of(f"level3/{stem}") == "network", stem
        assert category_of(stem) in ("network", "attention"), stem

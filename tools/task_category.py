"""The op family of a task, from its file name alone, so a bench can report by family.

Names are KernelBench's ("23_Softmax", "level2/14_Gemm_Divide_Sum_Scaling",
"50_conv_standard_2D__square_input__square_kernel") or free-form ("softmax_rows",
"pointwise_gelu"). A fused name is named after its ops in order, so the op named first decides:
every family's pattern is searched in the lowercased name and the match that starts earliest
wins; when two start at the same place (`max_pooling` is a max and a pooling), the family
listed first in `TABLE` wins. "activation" is every elementwise op, activations or not.
Whole networks (KernelBench level 3 and 4) are "network". Standard library only.
"""

from __future__ import annotations

import re

FAMILIES = (
    "gemm",
    "conv",
    "pooling",
    "norm",
    "softmax",
    "activation",
    "reduction",
    "loss",
    "scan",
    "attention",
    "network",
    "other",
)


def _word(keywords: str) -> str:
    """Whole tokens: `sum` in `sum_dim1`, not in `cumsum` nor `summary`."""
    return rf"(?<![a-z])(?:{'|'.join(keywords.split())})(?![a-z])"


def _prefix(keywords: str) -> str:
    """Tokens' starts: `conv` in `convtranspose2d` and `conv_standard`."""
    return rf"(?<![a-z])(?:{'|'.join(keywords.split())})"


def _inside(keywords: str) -> str:
    """Anywhere in a token, matched from the token's start: `norm` in `l1norm`, `batchnorm`."""
    return rf"[a-z0-9]*(?:{'|'.join(keywords.split())})"


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(patterns))


_NETWORKS = (
    "resnet vgg densenet squeezenet mobilenet efficientnet shufflenet regnet lenet alexnet "
    "googlenet inception unet netvlad mamba minigpt transformer swin mlp rnn lstm"
)
_ACTIVATIONS = (
    "relu gelu selu elu silu swish mish sigmoid tanh softplus softsign hardshrink softshrink"
)
_ELEMENTWISE = "pointwise elementwise clamp where sqrt rsqrt exp pow abs scale scaling"
_REDUCTIONS = "sum mean max min prod product argmax argmin amax amin reduce reduction"

# (family, pattern); the order only breaks ties between matches that start at the same place.
TABLE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("network", _any(r"^level[34]/", _inside(_NETWORKS), _prefix("gru"))),
    ("attention", _any(_inside("attention attn"), _word("sdpa"), r"scaled_?dot_?product")),
    ("loss", _any(_inside("loss"), r"cross_?entropy", r"kl_?div")),
    ("scan", _any(_inside("cumsum cumprod cummax cummin"), _word("scan"))),
    ("pooling", _any(_inside(r"(?:max|avg|average|mean)_?pool"), _prefix("pool"))),
    ("norm", _any(_inside("norm"))),
    ("softmax", _any(_inside("softmax logsumexp"))),
    ("conv", _any(_prefix("conv"))),
    (
        "gemm",
        _any(
            _inside("gemm gemv matmul bmm addmm"),
            _word("mm mv"),
            _prefix("linear"),
            r"matrix_(?:vector_)?multiplication",
        ),
    ),
    ("reduction", _any(_word(_REDUCTIONS))),
    (
        "activation",
        _any(_inside(_ACTIVATIONS), _word(_ELEMENTWISE), r"(?:matrix_)?scalar_multiplication"),
    ),
)

_LEVEL = re.compile(r"^level\d+$")


def normalize(name: str) -> str:
    """Lowercase, no `.py`, the task folder's name for `NAME/task.py`, and only a `levelN/`
    folder kept in front, so a path and a bench problem name classify alike."""
    parts = [p for p in name.replace("\\", "/").lower().split("/") if p]
    if parts and parts[-1].endswith(".py"):
        parts[-1] = parts[-1][:-3]
    if len(parts) > 1 and parts[-1] == "task":
        parts.pop()
    if len(parts) > 1 and _LEVEL.match(parts[-2]):
        return "/".join(parts[-2:])
    return parts[-1] if parts else ""


def category_of(name: str) -> str:
    """The op family of a task named NAME: one of `FAMILIES` ("other" when nothing matches)."""
    text = normalize(name)
    best: tuple[int, int, str] | None = None  # (match start, table row, family)
    for row, (family, pattern) in enumerate(TABLE):
        match = pattern.search(text)
        if match and (best is None or (match.start(), row) < best[:2]):
            best = (match.start(), row, family)
    return best[2] if best else "other"

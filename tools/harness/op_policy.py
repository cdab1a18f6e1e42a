"""Which PyTorch ops a candidate may execute. Standard library only (no torch import).

The runtime recorder (`guards.OpRecorder`) lists the ATen ops a candidate's forward ran, as
`str(OpOverload)`: "aten.mm.default", "aten.add.Tensor". `classify` sorts each into:

- "free": allocation, views, layout copies, initialising fills, metadata. They move or make
  memory but do not compute the answer, so every policy allows them.
- "heavy": library GEMM, convolution and attention (cuBLAS/cuDNN-class work). Policy "hybrid"
  lets a candidate keep these and write the rest as kernels; "strict" does not.
- "compute": everything else, unknown ops included. No policy allows them.

The static checks use the same tables for the matching torch.* names, so the two agree, which is
why this module must stay importable without torch.
"""

from __future__ import annotations

from collections.abc import Iterable

FREE, HEAVY, COMPUTE = "free", "heavy", "compute"
POLICIES = ("strict", "hybrid")
_FORBIDDEN = {"strict": {HEAVY, COMPUTE}, "hybrid": {COMPUTE}}


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


FREE_OPS = _words(
    # allocation
    "empty empty_like empty_strided empty_permuted new_empty new_empty_strided new_zeros new_ones "
    "new_full zeros zeros_like ones ones_like full full_like scalar_tensor arange "
    "_efficientzerotensor "
    # random initialisation: generating data, not computing the answer from the inputs
    "normal normal_ uniform_ random_ exponential_ randn randn_like rand rand_like randint "
    "randint_like randperm "
    # layout copies and dtype/device moves
    "copy_ _copy_from _copy_from_and_resize clone contiguous _to_copy to resize_ resize_as_ set_ "
    "_pin_memory pin_memory "
    # initialising accumulators
    "fill fill_ zero zero_ "
    # autograd and tracing bookkeeping
    "detach detach_ alias lift lift_fresh lift_fresh_copy resolve_conj resolve_neg "
    # views
    "view _unsafe_view _reshape_alias reshape as_strided as_strided_ t t_ transpose transpose_ "
    "permute expand expand_as squeeze squeeze_ unsqueeze unsqueeze_ flatten unflatten slice "
    "select narrow split split_with_sizes tensor_split chunk unbind view_as view_as_real "
    "view_as_complex diagonal movedim swapaxes swapdims unfold broadcast_to "
    # metadata and reading a scalar back (.item())
    "size stride sym_size sym_stride sym_numel sym_storage_offset numel dim is_contiguous "
    "is_same_size storage_offset is_pinned record_stream _local_scalar_dense item "
    "_has_compatible_shallow_copy_type _assert_tensor_metadata"
)
HEAVY_OPS = _words(
    "mm bmm addmm addmm_ baddbmm baddbmm_ addbmm addbmm_ matmul linear _addmm_activation "
    "_scaled_mm _int_mm convolution _convolution convolution_overrideable conv_tbc"
)
HEAVY_PREFIXES = (
    "conv1d", "conv2d", "conv3d", "conv_transpose", "conv_depthwise", "convolution_backward",
    "_conv_depthwise", "cudnn_convolution", "miopen_convolution", "mkldnn_convolution",
    "slow_conv", "_slow_conv", "thnn_conv", "_nnpack_spatial_convolution", "mkldnn_linear",
    "scaled_dot_product_attention", "_scaled_dot_product", "_flash_attention",
    "_efficient_attention", "_cudnn_attention",
)  # fmt: skip
FREE_NAMESPACES = _words("profiler")  # harness-side markers, never the candidate's work

# Tensor methods that compute (the receiver's type is unknown statically, so this is a
# deny-list; names that Python objects commonly share, like list.index, are left out).
TENSOR_COMPUTE_METHODS = _words(
    "matmul mm bmm addmm addmm_ baddbmm baddbmm_ addbmm addbmm_ mv dot outer inner __matmul__ "
    "__rmatmul__ _conv_forward sum nansum mean nanmean max min amax amin argmax argmin aminmax "
    "prod std var norm logsumexp cumsum cumprod cummax cummin median softmax log_softmax relu "
    "relu_ exp exp_ exp2 expm1 log log_ log2 log10 log1p sigmoid sigmoid_ tanh tanh_ sin cos tan "
    "erf erfc erfinv abs abs_ neg neg_ sqrt sqrt_ rsqrt rsqrt_ pow pow_ square reciprocal sign "
    "floor ceil round trunc frac clamp clamp_ clip clip_ clamp_min clamp_max add add_ sub sub_ "
    "mul mul_ div div_ true_divide floor_divide remainder fmod addcmul addcmul_ addcdiv addcdiv_ "
    "lerp lerp_ maximum minimum eq ne lt le gt ge logical_and logical_or logical_not where "
    "masked_fill masked_fill_ masked_scatter index_select gather scatter scatter_ scatter_add "
    "scatter_add_ index_add index_add_ index_put index_put_ index_fill take masked_select "
    "nonzero all any sort argsort topk kthvalue tril triu tril_ triu_ flip roll repeat "
    "repeat_interleave diag trace cross count_nonzero bincount histc unique numpy"
)
_HEAVY_METHOD_EXTRAS = _words("__matmul__ __rmatmul__ _conv_forward")


def normalize(op_name: object) -> str:
    """ "aten.mm.default", "aten::mm.out", "mm" -> "mm"; other namespaces keep theirs."""
    name = str(op_name).replace("::", ".")
    namespace, _, rest = name.partition(".")
    if not rest:
        return name
    base = rest.split(".")[0]
    return base if namespace == "aten" else f"{namespace}.{base}"


def classify(op_name: object) -> str:
    """ "free", "heavy" or "compute" for one op (an ATen name, an OpOverload, or a bare name)."""
    name = normalize(op_name)
    if "." in name:
        return FREE if name.split(".")[0] in FREE_NAMESPACES else COMPUTE
    if name in FREE_OPS:
        return FREE
    if name in HEAVY_OPS or name.startswith(HEAVY_PREFIXES):
        return HEAVY
    return COMPUTE


def method_kind(name: str) -> str | None:
    """For a tensor method name: None (not known to compute), "heavy" or "compute"."""
    if name not in TENSOR_COMPUTE_METHODS:
        return None
    return HEAVY if name in _HEAVY_METHOD_EXTRAS or classify(name) == HEAVY else COMPUTE


def violations(op_names: Iterable[object], policy: str) -> list[str]:
    """The ops (as given, first occurrence order, no repeats) that `policy` forbids."""
    if policy not in _FORBIDDEN:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    forbidden, seen, bad = _FORBIDDEN[policy], set(), []
    for op in op_names:
        name = str(op)
        if name not in seen:
            seen.add(name)
            if classify(name) in forbidden:
                bad.append(name)
    return bad

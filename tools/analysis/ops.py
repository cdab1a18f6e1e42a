"""What each ATen op is: the kind table and `classify` (stages are built in stages.py).

Standard library only (no torch): the parent side and the builtin generator use these tables
and functions on the analysis dict without importing torch.

Kinds (`classify`):
    pointwise   one output element from the same position of its inputs (broadcasting allowed):
                arithmetic, activations, comparisons, where, casts and copies
    reduction   reduces one or more dimensions: sum, mean, amax, max.dim, argmax, var, norm, losses
    softmax     _softmax, _log_softmax, _safe_softmax, logsumexp
    norm        native_layer_norm, native_group_norm, native_batch_norm and its _legit forms, rms_norm
    gemm        mm, addmm, bmm, baddbmm, matmul, linear, mv, dot
    conv        convolution and its backend forms (transposed too)
    pool        max/avg/adaptive pooling
    scan        cumsum, cumprod, cummax, cummin, logcumsumexp
    attention   scaled_dot_product_* and the fused attention kernels
    index       gather, scatter, index_select, embedding, ... (data-dependent addressing)
    layout      cat, stack, padding, flip, roll, repeat, pixel_shuffle: values moved, not computed
    resample    upsample_*, grid_sampler: interpolation
    sort        sort, topk, kthvalue, median
    random      rand*, bernoulli, dropout in training mode
    alloc       empty, zeros, full, arange, fill: memory made, no input read
    view        views and metadata (view, t, permute, expand, slice, detach...): no data moves
    other       everything else (unknown ops included)

`view` and `alloc` ops stay in the op list (their outputs link the data flow) but no stage
holds them. Extend the tables freely: a new kind needs no change to `stages.build_stages`, where every
kind but pointwise anchors a stage of its own.
"""

from __future__ import annotations

POINTWISE, REDUCTION, SOFTMAX, NORM = "pointwise", "reduction", "softmax", "norm"
GEMM, CONV, POOL, SCAN, ATTENTION = "gemm", "conv", "pool", "scan", "attention"
INDEX, LAYOUT, RESAMPLE, SORT, RANDOM = "index", "layout", "resample", "sort", "random"
ALLOC, VIEW, OTHER = "alloc", "view", "other"
KINDS = (
    POINTWISE, REDUCTION, SOFTMAX, NORM, GEMM, CONV, POOL, SCAN, ATTENTION,
    INDEX, LAYOUT, RESAMPLE, SORT, RANDOM, ALLOC, VIEW, OTHER,
)  # fmt: skip
NO_COMPUTE = frozenset({VIEW, ALLOC})  # kept in the op list, never in a stage
PROLOGUE_KINDS = frozenset({REDUCTION, SOFTMAX, NORM})  # row-wise: may absorb a pointwise run


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# ATen base names (the overload packet, without a trailing "_" of the in-place form).
TABLE: dict[str, frozenset[str]] = {
    POINTWISE: _words(
        # arithmetic
        "add sub rsub mul div true_divide floor_divide remainder fmod neg positive reciprocal "
        "abs absolute sign sgn square pow float_power sqrt rsqrt exp exp2 expm1 log log2 log10 "
        "log1p xlogy addcmul addcdiv lerp hypot copysign nextafter frac trunc floor ceil round "
        "fix clamp clamp_min clamp_max clip maximum minimum fmax fmin nan_to_num lgamma digamma "
        "erf erfc erfinv i0 logit sinc deg2rad rad2deg "
        # trigonometry
        "sin cos tan asin acos atan atan2 arctan2 sinh cosh tanh asinh acosh atanh "
        # activations
        "relu relu6 gelu sigmoid silu mish softplus elu celu selu hardtanh hardsigmoid hardswish "
        "hardshrink softshrink tanhshrink threshold leaky_relu rrelu rrelu_with_noise log_sigmoid "
        "log_sigmoid_forward _prelu_kernel prelu glu logaddexp logaddexp2 "
        # comparisons, logic, selection
        "eq ne lt le gt ge equal isnan isinf isfinite isneginf isposinf signbit logical_and "
        "logical_or logical_not logical_xor bitwise_and bitwise_or bitwise_xor bitwise_not "
        "bitwise_left_shift bitwise_right_shift __and__ __or__ __xor__ __lshift__ __rshift__ "
        "where masked_fill tril triu heaviside "
        # copies and casts
        "copy _copy_from _copy_from_and_resize clone contiguous _to_copy to type_as "
        "native_dropout_eval"
    ),
    REDUCTION: _words(
        "sum nansum mean nanmean amax amin aminmax argmax argmin prod var std var_mean std_mean "
        "norm linalg_vector_norm linalg_norm native_norm frobenius_norm nuclear_norm all any "
        "count_nonzero _euclidean_dist cdist _cdist_forward pdist _pdist_forward dist "
        "cosine_similarity "
        # losses
        "mse_loss l1_loss smooth_l1_loss huber_loss soft_margin_loss margin_ranking_loss "
        "hinge_embedding_loss kl_div binary_cross_entropy binary_cross_entropy_with_logits "
        "nll_loss nll_loss_forward nll_loss2d nll_loss2d_forward nll_loss_nd multi_margin_loss "
        "multilabel_margin_loss multilabel_margin_loss_forward cross_entropy_loss "
        "triplet_margin_loss poisson_nll_loss cosine_embedding_loss"
    ),
    SOFTMAX: _words("_softmax _log_softmax _safe_softmax softmax log_softmax logsumexp"),
    NORM: _words(
        "native_layer_norm layer_norm native_group_norm group_norm native_batch_norm batch_norm "
        "_native_batch_norm_legit _native_batch_norm_legit_no_training "
        "_native_batch_norm_legit_functional _batch_norm_with_update "
        "_batch_norm_with_update_functional _batch_norm_no_update _batch_norm_impl_index "
        "cudnn_batch_norm miopen_batch_norm instance_norm rms_norm _fused_rms_norm renorm"
    ),
    GEMM: _words(
        "mm addmm bmm baddbmm addbmm matmul linear mv addmv dot vdot inner outer addr ger einsum "
        "tensordot bilinear _trilinear _addmm_activation _scaled_mm _int_mm mkldnn_linear chain_matmul "
        "linalg_multi_dot"
    ),
    CONV: _words(
        "convolution _convolution convolution_overrideable conv1d conv2d conv3d conv_tbc "
        "conv_transpose1d conv_transpose2d conv_transpose3d _nnpack_spatial_convolution"
    ),
    POOL: _words(
        "max_pool1d max_pool2d max_pool3d max_pool1d_with_indices max_pool2d_with_indices "
        "max_pool3d_with_indices avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d "
        "adaptive_avg_pool2d adaptive_avg_pool3d _adaptive_avg_pool2d _adaptive_avg_pool3d "
        "adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d fractional_max_pool2d "
        "fractional_max_pool3d lp_pool1d lp_pool2d lp_pool3d max_unpool2d max_unpool3d "
        "mkldnn_max_pool2d mkldnn_max_pool3d"
    ),
    SCAN: _words("cumsum cumprod cummax cummin logcumsumexp _logcumsumexp"),
    ATTENTION: _words("_native_multi_head_attention"),
    INDEX: _words(
        "gather scatter scatter_add scatter_reduce index index_select index_add index_copy "
        "index_fill index_put index_reduce _index_put_impl _unsafe_index _unsafe_index_put "
        "_unsafe_masked_index _unsafe_masked_index_put_accumulate take take_along_dim "
        "masked_select masked_scatter embedding _embedding_bag _embedding_bag_forward_only "
        "embedding_bag one_hot nonzero nonzero_static argwhere bincount histc searchsorted "
        "bucketize slice_scatter select_scatter diagonal_scatter as_strided_scatter"
    ),
    LAYOUT: _words(
        "cat concat concatenate stack hstack vstack dstack constant_pad_nd pad reflection_pad1d "
        "reflection_pad2d reflection_pad3d replication_pad1d replication_pad2d replication_pad3d "
        "circular_pad1d circular_pad2d circular_pad3d _pad_circular flip fliplr flipud roll rot90 "
        "repeat repeat_interleave tile pixel_shuffle pixel_unshuffle channel_shuffle "
        "native_channel_shuffle im2col col2im diag diag_embed"
    ),
    RESAMPLE: _words(
        "upsample_nearest1d upsample_nearest2d upsample_nearest3d _upsample_nearest_exact1d "
        "_upsample_nearest_exact2d _upsample_nearest_exact3d upsample_linear1d upsample_bilinear2d "
        "upsample_trilinear3d upsample_bicubic2d _upsample_bilinear2d_aa _upsample_bicubic2d_aa "
        "grid_sampler grid_sampler_2d grid_sampler_3d affine_grid_generator"
    ),
    SORT: _words(
        "sort argsort msort topk kthvalue median nanmedian mode unique _unique _unique2 "
        "unique_consecutive unique_dim"
    ),
    RANDOM: _words(
        "rand rand_like randn randn_like randint randint_like randperm bernoulli normal uniform "
        "random exponential geometric cauchy log_normal multinomial native_dropout dropout "
        "_fused_dropout alpha_dropout feature_dropout feature_alpha_dropout"
    ),
    ALLOC: _words(
        "empty empty_like empty_strided empty_permuted new_empty new_empty_strided new_zeros "
        "new_ones new_full zeros zeros_like ones ones_like full full_like scalar_tensor arange "
        "linspace logspace eye fill zero _efficientzerotensor tensor lift lift_fresh "
        "lift_fresh_copy"
    ),
    VIEW: _words(
        "view _unsafe_view reshape _reshape_alias as_strided t transpose permute expand expand_as "
        "squeeze unsqueeze flatten unflatten slice select narrow split split_with_sizes "
        "unsafe_split unsafe_split_with_sizes tensor_split chunk unbind view_as view_as_real "
        "view_as_complex diagonal movedim moveaxis swapaxes swapdims unfold broadcast_to alias "
        "detach resolve_conj resolve_neg _conj _neg_view numpy_T mT mH adjoint real imag "
        "size stride sym_size sym_stride numel sym_numel dim is_contiguous "
        "is_non_overlapping_and_dense is_strides_like_format storage_offset sym_storage_offset "
        "is_same_size is_pinned record_stream _assert_tensor_metadata _assert_async "
        "_has_compatible_shallow_copy_type _local_scalar_dense item _nested_tensor_from_mask_left_aligned "
        "set resize resize_as"
    ),
}

# Overload-specific kinds, checked first: "max.other" is an elementwise maximum, "max.dim" a
# reduction; "pow.Scalar" etc. follow the base name.
OVERLOADS: dict[str, str] = {
    "max.other": POINTWISE,
    "min.other": POINTWISE,
    "max.dim": REDUCTION,
    "min.dim": REDUCTION,
    "max.default": REDUCTION,
    "min.default": REDUCTION,
    "max.names_dim": REDUCTION,
    "min.names_dim": REDUCTION,
}

# Name prefixes (after the table): backend variants that are too many to list.
PREFIXES: tuple[tuple[str, str], ...] = (
    ("scaled_dot_product", ATTENTION),
    ("_scaled_dot_product", ATTENTION),
    ("_flash_attention", ATTENTION),
    ("_efficient_attention", ATTENTION),
    ("_cudnn_attention", ATTENTION),
    ("cudnn_convolution", CONV),
    ("miopen_convolution", CONV),
    ("miopen_depthwise_convolution", CONV),
    ("mkldnn_convolution", CONV),
    ("slow_conv", CONV),
    ("_slow_conv", CONV),
    ("thnn_conv", CONV),
    ("_conv_depthwise", CONV),
    ("conv_depthwise", CONV),
    ("conv_transpose", CONV),
    ("_upsample", RESAMPLE),
    ("upsample", RESAMPLE),
    ("special_", POINTWISE),
)

# torch-level functions whose ATen ops belong together: every op run inside one call of these
# (outermost call only) forms one stage of the given kind, whatever the ops decompose into on the
# device traced (on meta tensors scaled_dot_product_attention becomes mul, bmm, _safe_softmax and
# bmm, and rms_norm becomes pow, mean, add, rsqrt, mul).
COMPOSITES: dict[str, str] = {
    "scaled_dot_product_attention": ATTENTION,
    "multi_head_attention_forward": ATTENTION,
    "flex_attention": ATTENTION,
    "rms_norm": NORM,
    "layer_norm": NORM,
    "group_norm": NORM,
    "batch_norm": NORM,
    "instance_norm": NORM,
    "local_response_norm": NORM,
    "normalize": NORM,
    "softmax": SOFTMAX,
    "log_softmax": SOFTMAX,
    "softmin": SOFTMAX,
    "logsumexp": SOFTMAX,
    "cosine_similarity": REDUCTION,
    "pairwise_distance": REDUCTION,
    "cross_entropy": REDUCTION,
    "kl_div": REDUCTION,
    "l1_loss": REDUCTION,
    "mse_loss": REDUCTION,
    "smooth_l1_loss": REDUCTION,
    "huber_loss": REDUCTION,
    "triplet_margin_loss": REDUCTION,
    "hinge_embedding_loss": REDUCTION,
    "cosine_embedding_loss": REDUCTION,
    "margin_ranking_loss": REDUCTION,
    "binary_cross_entropy": REDUCTION,
    "binary_cross_entropy_with_logits": REDUCTION,
    "nll_loss": REDUCTION,
    "lp_pool1d": POOL,
    "lp_pool2d": POOL,
    "lp_pool3d": POOL,
}

_BY_NAME = {name: kind for kind, names in TABLE.items() for name in names}


def split_name(op: object) -> tuple[str, str, str]:
    """ "aten.add_.Tensor" / "aten::add_.Tensor" / "add" -> (namespace, base name, overload)."""
    text = str(op).replace("::", ".")
    parts = text.split(".")
    if len(parts) == 1:
        return "aten", parts[0], "default"
    namespace, name = parts[0], parts[1]
    overload = parts[2] if len(parts) > 2 else "default"
    return namespace, name, overload


def base_name(name: str) -> str:
    """The out-of-place name: "add_" -> "add"; dunders ("__and__") stay as they are."""
    if name.endswith("_") and not name.endswith("__"):
        return name[:-1]
    return name


def classify(op: object) -> str:
    """The kind of one op: an OpOverload, "aten.addmm.default", "aten.addmm" or "addmm"."""
    namespace, name, overload = split_name(op)
    if namespace not in ("aten", "prims"):
        return OTHER
    name = base_name(name)
    kind = OVERLOADS.get(f"{name}.{overload}") or _BY_NAME.get(name)
    if kind:
        return kind
    if name.endswith("_copy") and _BY_NAME.get(name[: -len("_copy")]) == VIEW:
        return LAYOUT  # permute_copy, diagonal_copy...: a view made real, values moved
    for prefix, prefix_kind in PREFIXES:
        if name.startswith(prefix):
            return prefix_kind
    return OTHER


def is_inplace(op: object) -> bool:
    _, name, _ = split_name(op)
    return name != base_name(name)


# ---------------------------------------------------------------- stages

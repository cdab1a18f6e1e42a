"""What each ATen op is, and how a forward's op list groups into kernel-sized stages.

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
holds them. Extend the tables freely: a new kind needs no change to `build_stages`, where every
kind but pointwise anchors a stage of its own.
"""

from __future__ import annotations

from typing import Any

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


def resolve(label: str, ops: list[dict[str, Any]]) -> str:
    """Follow a data-flow label ("op:5") back through views to the op that computed the data.

    An `alloc` op (nothing read) and model inputs ("in:0"), parameters ("param:..."),
    buffers ("buffer:...") and other tensors ("const") are where the chain ends.
    """
    seen = 0
    while label.startswith("op:") and seen < len(ops) + 1:
        op = ops[int(label[3:])]
        if op.get("kind") != VIEW or not op.get("reads"):
            return label
        label = op["reads"][0]
        seen += 1
    return label


def _numel(shape: Any) -> int | None:
    if not isinstance(shape, list):
        return None
    total = 1
    for size in shape:
        total *= int(size)
    return total


class _Stage:
    def __init__(self, kind: str, first: int, anchor: int | None, composite: Any = None) -> None:
        self.kind, self.anchor = kind, anchor
        self.composite = composite  # the composite call's group id
        self.composite_name: str | None = None
        self.members = [first]
        self.prologue: list[int] = []
        self.epilogue: list[int] = []

    @property
    def last(self) -> int:
        return self.members[-1]


def _reads_any(op: dict, members: list[int], ops: list[dict]) -> bool:
    wanted = {f"op:{i}" for i in members}
    return any(resolve(label, ops) in wanted for label in op.get("reads") or [])


def stage_members(ops: list[dict[str, Any]]) -> list[int]:
    """Indices of the ops that stages hold: compute ops that are not state bookkeeping."""
    return [
        i for i, op in enumerate(ops) if op.get("kind") not in NO_COMPUTE and not op.get("state")
    ]


def build_stages(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Group the op list into stages, each a candidate for one kernel. In op order:

    - `view`/`alloc` ops and in-place updates of module state (BatchNorm's step counter) are
      skipped: they belong to no stage.
    - ops run inside one call of a COMPOSITES function (scaled_dot_product_attention, rms_norm,
      ...) form one stage of that function's kind.
    - a pointwise op joins an open pointwise stage whatever it reads. It joins any other open
      stage (gemm, conv, reduction, softmax, norm, pool, a composite...) as its **epilogue**
      when it reads that stage's result and its output has as many elements as that result
      (a bias add or an activation, not a broadcast back to a bigger tensor). Otherwise it
      opens a new pointwise stage.
    - a reduction, softmax or norm that reads an open pointwise stage's result, of as many
      elements as that result, takes that stage over: its ops become the **prologue**.
    - any other op opens a stage of its own kind (kind "other" included).

    Each stage: kind, ops (member indices in order), anchor (the op that gives the stage its
    kind, None for pointwise), prologue, epilogue, composite (function name or None), shape and
    dtype (of its last op), flops (sum of its ops'), reads (data from outside the stage:
    "in:N", "param:NAME", "buffer:NAME", "const", "stage:J", or "op:K" for a tensor made by an
    op outside every stage, e.g. an alloc).
    """
    stages: list[_Stage] = []
    open_stage: _Stage | None = None
    for i in stage_members(ops):
        op = ops[i]
        kind = op.get("kind", OTHER)
        group = op.get("group")
        if group is not None:
            if open_stage is not None and open_stage.composite == group:
                open_stage.members.append(i)
                if open_stage.anchor is None and kind == open_stage.kind:
                    open_stage.anchor = i
                continue
            composite_kind = op.get("composite_kind") or kind
            if _takes_prologue(op, composite_kind, open_stage, ops):
                open_stage.prologue = list(open_stage.members)
                open_stage.kind, open_stage.composite = composite_kind, group
                open_stage.composite_name = op.get("composite")
                open_stage.members.append(i)
                open_stage.anchor = i if kind == composite_kind else None
                continue
            open_stage = _Stage(composite_kind, i, None, group)
            open_stage.composite_name = op.get("composite")
            if kind == open_stage.kind:
                open_stage.anchor = i
            stages.append(open_stage)
            continue
        if kind == POINTWISE:
            if open_stage is not None and open_stage.kind == POINTWISE:
                open_stage.members.append(i)
                continue
            if (
                open_stage is not None
                and _reads_any(op, open_stage.members, ops)
                and _numel(op.get("shape")) == _numel(ops[open_stage.last].get("shape"))
            ):
                open_stage.members.append(i)
                open_stage.epilogue.append(i)
                continue
            open_stage = _Stage(POINTWISE, i, None)
            stages.append(open_stage)
            continue
        if _takes_prologue(op, kind, open_stage, ops):
            open_stage.kind, open_stage.anchor = kind, i
            open_stage.prologue = list(open_stage.members)
            open_stage.members.append(i)
            continue
        open_stage = _Stage(kind, i, i)
        stages.append(open_stage)
    return _describe(stages, ops)


def _takes_prologue(op: dict, kind: str, open_stage: _Stage | None, ops: list[dict]) -> bool:
    """A row-wise op reading all of the open pointwise stage's result: it takes that stage over."""
    if kind not in PROLOGUE_KINDS or open_stage is None or open_stage.kind != POINTWISE:
        return False
    if open_stage.composite is not None or not _reads_any(op, [open_stage.last], ops):
        return False
    shapes = op.get("arg_shapes") or []  # the first tensor argument: what is reduced
    return bool(shapes) and _numel(shapes[0]) == _numel(ops[open_stage.last].get("shape"))


def _describe(stages: list[_Stage], ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    owner = {i: s for s, stage in enumerate(stages) for i in stage.members}
    result = []
    for s, stage in enumerate(stages):
        reads: list[str] = []
        for i in stage.members:
            for label in ops[i].get("reads") or []:
                source = resolve(label, ops)
                if source.startswith("op:") and int(source[3:]) in owner:
                    if owner[int(source[3:])] == s:
                        continue
                    source = f"stage:{owner[int(source[3:])]}"
                if source not in reads:
                    reads.append(source)
        last = ops[stage.last]
        anchor = stage.anchor
        if anchor is None and stage.composite is not None:
            anchor = next((i for i in stage.members if ops[i].get("kind") != POINTWISE), None)
        result.append(
            {
                "kind": stage.kind,
                "ops": list(stage.members),
                "anchor": anchor,
                "prologue": stage.prologue,
                "epilogue": stage.epilogue,
                "composite": stage.composite_name,
                "shape": last.get("shape"),
                "dtype": last.get("dtype"),
                "flops": sum(int(ops[i].get("flops") or 0) for i in stage.members),
                "reads": reads,
            }
        )
    return result


def stage_of(label: str, ops: list[dict[str, Any]], stages: list[dict[str, Any]]) -> int | None:
    """The stage whose op computed the data behind `label`, or None (an input, a view of one)."""
    source = resolve(label, ops)
    if not source.startswith("op:"):
        return None
    index = int(source[3:])
    for s, stage in enumerate(stages):
        if index in stage["ops"]:
            return s
    return None

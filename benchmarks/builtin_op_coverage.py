"""Which torch operations the builtin writes: one small task per expression (KernelBench's
format), analysed, then the builtin's program generated for a DSL. Prints one line per case
(ok, or the builtin's reason) and the total; no kernel is run or verified here (the tests
verify what the builtin writes). Run: python benchmarks/builtin_op_coverage.py [--dsl cpp|triton]
[--device cpu|cuda] [NAME ...]"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _common import REPO

sys.path.insert(0, str(REPO / "tests"))
from builtin_helpers import builtin_generator, task_file  # noqa: E402

X = "torch.randn(4, 6, 10)"
XY = "torch.randn(4, 6, 10), torch.randn(4, 6, 10)"
M = "torch.randn(8, 12), torch.randn(8, 12)"
IMG = "torch.randn(2, 4, 12, 12)"
CASES = [
    ("nanmean", "torch.nanmean(x, dim=1)", X),
    ("aminmax", "torch.aminmax(x, dim=1)", X),
    ("all", "torch.all(x > 0, dim=1).float()", X),
    ("any", "torch.any(x > 0, dim=1).float()", X),
    ("count_nonzero", "torch.count_nonzero(x > 0, dim=1).float()", X),
    ("cdist", "torch.cdist(x, y)", M),
    ("dist", "torch.dist(x, y)", M),
    ("pairwise_distance", "F.pairwise_distance(x, y)", M),
    ("cosine_similarity", "F.cosine_similarity(x, y)", M),
    ("mse", "F.mse_loss(x, y)", M),
    ("l1", "F.l1_loss(x, y)", M),
    ("smooth_l1", "F.smooth_l1_loss(x, y)", M),
    ("huber", "F.huber_loss(x, y, delta=0.5)", M),
    ("soft_margin", "F.soft_margin_loss(x, torch.sign(y))", M),
    ("margin_ranking", "F.margin_ranking_loss(x[:, 0], y[:, 0], torch.sign(y[:, 1]))", M),
    ("hinge_embedding", "F.hinge_embedding_loss(x, torch.sign(y))", M),
    (
        "kl_div",
        "F.kl_div(torch.log_softmax(x, -1), torch.softmax(y, -1), reduction='batchmean')",
        M,
    ),
    ("bce", "F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(y))", M),
    ("bce_logits", "F.binary_cross_entropy_with_logits(x, torch.sigmoid(y))", M),
    ("nll", "F.nll_loss(torch.log_softmax(x, -1), (y[:, 0].abs() * 3).long())", M),
    ("ce", "F.cross_entropy(x, (y[:, 0].abs() * 3).long())", M),
    ("ce_probs", "F.cross_entropy(x, torch.softmax(y, -1))", M),
    ("ce_smooth", "F.cross_entropy(x, (y[:, 0].abs() * 3).long(), label_smoothing=0.1)", M),
    ("multi_margin", "F.multi_margin_loss(x, (y[:, 0].abs() * 3).long())", M),
    ("triplet", "F.triplet_margin_loss(x, y, x * 0.5 + y)", M),
    ("poisson_nll", "F.poisson_nll_loss(x, y.abs())", M),
    ("cosine_embedding", "F.cosine_embedding_loss(x, y, torch.sign(y[:, 0]))", M),
    ("gaussian_nll", "F.gaussian_nll_loss(x, y, y.abs() + 0.1)", M),
    ("softmin", "F.softmin(x, dim=1)", X),
    ("logsumexp", "torch.logsumexp(x, dim=1)", X),
    ("rms_norm", "F.rms_norm(x, (10,))", X),
    ("normalize", "F.normalize(x, dim=1)", X),
    ("local_response_norm", "F.local_response_norm(x, 3)", IMG),
    ("glu", "F.glu(x, dim=-1)", X),
    ("logsigmoid", "F.logsigmoid(x)", X),
    ("hardshrink", "F.hardshrink(x)", X),
    ("softshrink", "F.softshrink(x)", X),
    ("tanhshrink", "F.tanhshrink(x)", X),
    ("threshold", "F.threshold(x, 0.1, 20.0)", X),
    ("celu", "F.celu(x)", X),
    ("logit", "torch.logit(torch.sigmoid(x), eps=1e-6)", X),
    ("sign", "torch.sign(x)", X),
    ("frac", "torch.frac(x)", X),
    ("remainder", "torch.remainder(x, 0.7)", X),
    ("floor_divide", "torch.floor_divide(x, 0.7)", X),
    ("reciprocal", "torch.reciprocal(x.abs() + 1)", X),
    ("square", "torch.square(x)", X),
    ("exp2", "torch.exp2(x)", X),
    ("log2", "torch.log2(x.abs() + 1)", X),
    ("log10", "torch.log10(x.abs() + 1)", X),
    ("sinh", "torch.sinh(x)", X),
    ("cosh", "torch.cosh(x)", X),
    ("asin", "torch.asin(x.clamp(-0.9, 0.9))", X),
    ("atan", "torch.atan(x)", X),
    ("atan2", "torch.atan2(x, y)", XY),
    ("hypot", "torch.hypot(x, y)", XY),
    ("lerp", "torch.lerp(x, y, 0.3)", XY),
    ("addcmul", "torch.addcmul(x, x, y, value=0.5)", XY),
    ("addcdiv", "torch.addcdiv(x, x, y.abs() + 1, value=0.5)", XY),
    ("clamp_tensor", "torch.clamp(x, min=y)", XY),
    ("erfinv", "torch.erfinv(x.clamp(-0.9, 0.9))", X),
    ("lgamma", "torch.lgamma(x.abs() + 1)", X),
    ("cumsum", "torch.cumsum(x, dim=1)", X),
    ("cumprod", "torch.cumprod(x, dim=2)", X),
    ("cummax", "torch.cummax(x, dim=2).values", X),
    ("logcumsumexp", "torch.logcumsumexp(x, dim=2)", X),
    ("flip_cumsum", "torch.cumsum(x.flip(2), 2).flip(2)", X),
    ("lp_pool2d", "F.lp_pool2d(x, 2, 3)", IMG),
    ("adaptive_max_pool2d", "F.adaptive_max_pool2d(x, 5)", IMG),
    ("max_pool_indices", "F.max_pool2d(x, 2, return_indices=True)[1].float()", IMG),
    ("cat", "torch.cat([x, y * 2], dim=1)", XY),
    ("roll", "torch.roll(x, 2, dims=2)", X),
    ("repeat_interleave", "torch.repeat_interleave(x, 2, dim=1)", X),
    ("reflect_pad", "F.pad(x, (2, 2, 1, 1), mode='reflect')", IMG),
    ("replicate_pad", "F.pad(x, (2, 2, 1, 1), mode='replicate')", IMG),
    ("pixel_shuffle", "F.pixel_shuffle(x, 2)", IMG),
    ("gather", "torch.gather(x, 2, (y.abs() * 3).long().clamp(max=9))", XY),
    ("index_select", "torch.index_select(x, 1, torch.tensor([0, 2, 5]))", X),
    ("interp_nearest", "F.interpolate(x, scale_factor=2, mode='nearest')", IMG),
    (
        "interp_bilinear",
        "F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False)",
        IMG,
    ),
    ("embedding", "F.embedding((x[..., 0].abs() * 3).long(), y[0])", XY),
    ("einsum", "torch.einsum('bij,bkj->bik', x, y)", XY),
    ("outer", "torch.outer(x[0, 0], y[0, 0])", XY),
    ("diagonal", "torch.diagonal(x, dim1=1, dim2=2)", X),
    ("trace", "torch.trace(x[0])", X),
    ("tensordot", "torch.tensordot(x, y, dims=([1, 2], [1, 2]))", XY),
    (
        "baddbmm",
        "torch.baddbmm(x, x, y.transpose(1, 2)[:, :, :6])",
        "torch.randn(4, 6, 6), torch.randn(4, 6, 6)",
    ),
    (
        "addmm",
        "torch.addmm(x[0], x[0], y[0].t()[:, :6])",
        "torch.randn(4, 6, 6), torch.randn(4, 6, 6)",
    ),
    ("matmul_4d", "torch.matmul(x.unsqueeze(1), y.unsqueeze(1).transpose(-1, -2))", XY),
    ("tril", "torch.tril(x)", X),
    ("masked_fill", "x.masked_fill(x > 0.5, -1.0)", X),
    ("min_max_elementwise", "torch.maximum(x, y) - torch.minimum(x, y)", XY),
    ("sort", "torch.sort(x, dim=2).values", X),
    ("topk", "torch.topk(x, 3, dim=2).values", X),
    ("median", "torch.median(x, dim=2).values", X),
    ("argsort", "torch.argsort(x, dim=2).float()", X),
    ("std_unbiased_false", "torch.std(x, dim=(1, 2), unbiased=False)", X),
    ("mean_all", "x.mean()", X),
    ("sum_dtype", "x.sum(dim=1, dtype=torch.float64).float()", X),
    ("where_scalar", "torch.where(x > 0, x, 0.0)", X),
    ("erfc", "torch.erfc(x)", X),
    ("expm1", "torch.expm1(x)", X),
    ("selu_inplace", "F.selu(x * 1.0, inplace=True)", X),
    ("hardswish", "F.hardswish(x)", X),
    ("softplus_beta", "F.softplus(x, beta=2, threshold=5)", X),
    ("elu_alpha", "F.elu(x, alpha=0.5)", X),
    ("gelu_tanh", "F.gelu(x, approximate='tanh')", X),
    ("mish", "F.mish(x)", X),
    ("clamp_min", "x.clamp_min(0.1)", X),
    ("pow_tensor", "torch.pow(x.abs() + 0.5, y)", XY),
    ("rsub", "1.0 - x", X),
    ("div_floor", "torch.div(x, 0.3, rounding_mode='floor')", X),
    ("div_trunc", "torch.div(x, 0.3, rounding_mode='trunc')", X),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="only these cases")
    parser.add_argument("--dsl", default="cpp")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    written = total = 0
    for name, forward, inputs in CASES:
        if args.names and name not in args.names:
            continue
        total += 1
        with tempfile.TemporaryDirectory() as folder:
            try:
                task = task_file(Path(folder), forward, inputs)
                generator = builtin_generator(task, args.dsl, Path(folder), device=args.device)
                generator.code(generator.default_config())
            except Exception as exc:  # the builtin's reason is the figure here
                print(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}", flush=True)
                continue
        written += 1
        print(f"{name}: ok", flush=True)
    print(f"written: {written} of {total} ({args.dsl} on {args.device})")


if __name__ == "__main__":
    main()

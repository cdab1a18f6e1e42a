"""Ops the builtin once refused (found by sweeping torch's functional API): hyperbolic and other
pointwise math, binary cross-entropy and the margin losses, a fill made in forward, var_mean,
reductions over dims that are not adjacent, torch.roll, pixel (un)shuffle, reflect and replicate pads,
bitwise ops on booleans, a view that only eager's layout allows. Each is written in both DSLs and verified by the real harness against torch."""

from __future__ import annotations

import pytest
from builtin_helpers import builtin_generator, task_file, verify_forward

M = "torch.randn(8, 12), torch.randn(8, 12)"
X = "torch.randn(4, 6, 10)"
XY = "torch.randn(4, 6, 10), torch.randn(4, 6, 10)"
CASES = {
    "hyperbolic": (
        "(torch.sinh(x), torch.cosh(x), torch.tan(x * 0.5), torch.asinh(x * 3), "
        "torch.acosh(x.abs() + 1.5), torch.atanh(x.clamp(-0.9, 0.9)), torch.sinh(x * 1e-4))",
        X,
    ),
    "other_math": (
        "(torch.erfc(x), torch.hypot(x, y), torch.frac(x * 3), torch.floor_divide(x, 0.7), "
        "torch.logit(torch.sigmoid(x), eps=1e-3), torch.logit(torch.sigmoid(y)), F.logsigmoid(x * 9))",
        XY,
    ),
    "binary_cross_entropy": (
        "(F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(y)), "
        "F.binary_cross_entropy(torch.sigmoid(x), (y > 0).float(), reduction='sum'), "
        "F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(y), weight=y.abs(), reduction='none'))",
        M,
    ),
    "binary_cross_entropy_with_logits": (
        "(F.binary_cross_entropy_with_logits(x * 30, torch.sigmoid(y)), "
        "F.binary_cross_entropy_with_logits(x, (y > 0).float(), pos_weight=y[0].abs() + 0.5), "
        "F.binary_cross_entropy_with_logits(x, torch.sigmoid(y), weight=y.abs(), reduction='sum'))",
        M,
    ),
    "margin_losses": (
        "(F.soft_margin_loss(x, torch.sign(y)), F.hinge_embedding_loss(x, torch.sign(y), margin=0.5), "
        "F.cosine_embedding_loss(x, y, torch.sign(y[:, 0]), margin=0.2))",
        M,
    ),
    "var_mean_and_std_mean": (
        "(*torch.var_mean(x, dim=2), *torch.std_mean(x, dim=(0, 2), keepdim=True, correction=0))",
        X,
    ),
    # reductions over dims that are not adjacent: the input read with the kept dims first
    "non_adjacent_dims": (
        "(x.mean(dim=(0, 2), keepdim=True), torch.amax(x * 2 + 1, dim=(0, 2)), "
        "torch.norm(x, dim=(0, 2)), torch.std(x, dim=(0, 2)) + 1)",
        X,
    ),
    "aminmax_dist_logsumexp": (
        "(*torch.aminmax(x, dim=1), torch.dist(x, y), torch.dist(x, y, p=1), "
        "torch.logsumexp(x, dim=(0, 2)))",
        XY,
    ),
    "roll_and_pixel_shuffle": (
        "(torch.roll(x, 1, dims=2) * 2, torch.roll(x, (3, -2), dims=(1, 3)), torch.roll(x, 7) + 1, "
        "torch.relu(F.pixel_shuffle(x, 2)), F.pixel_unshuffle(x.transpose(2, 3), 2))",
        "torch.randn(2, 8, 4, 6)",
    ),
    "reflect_and_replicate_pads": (
        "(F.pad(x, (2, 3, 1, 2), mode='reflect') * 2, F.pad(x, (3, 1, 2, 2), mode='replicate'), "
        "F.pad(x[0], (1, 2), mode='reflect'), F.pad(x.unsqueeze(0), (1, 1, 2, 0, 1, 1), mode='replicate'))",
        "torch.randn(2, 3, 5, 6)",
    ),
    "batch_norm_by_hand": (
        "(x - x.mean(dim=(0, 2, 3), keepdim=True)) / "
        "torch.sqrt(x.var(dim=(0, 2, 3), keepdim=True, unbiased=False) + 1e-5)",
        "torch.randn(3, 4, 5, 6) * 2 + 1",
    ),
    "glu": ("(F.glu(x, dim=1), F.glu(x * 2, dim=-1), F.glu(torch.tanh(x), dim=0))", X),
    "inverse_trigonometry": (
        "(torch.atan(x * 3), torch.asin(torch.tanh(x)), torch.acos(torch.tanh(x) * 0.999), "
        "torch.atan2(x, y), torch.atan2(x, torch.zeros_like(y)), torch.atan2(torch.zeros_like(x), y), "
        "torch.asin(x), torch.atan(x * 1e4))",
        XY,
    ),
    "nearest_resize": (
        "(F.interpolate(x, scale_factor=2, mode='nearest'), F.interpolate(x, size=(12, 3), mode='nearest'), "
        "F.interpolate(x, scale_factor=(1, 0.5), mode='nearest-exact'), "
        "F.interpolate(x[:, :, 0], scale_factor=3), F.interpolate(x.unsqueeze(2), size=(2, 12, 6)))",
        "torch.randn(2, 3, 6, 6)",
    ),
    "truth_reductions": (
        "(torch.any(x > 0.5, dim=1), torch.all(x > -1.5, dim=2), torch.count_nonzero(x > 0, dim=1), "
        "torch.any(x > 2.0), torch.all(x.abs() < 9.0), torch.count_nonzero(torch.relu(x), dim=(0, 2)))",
        X,
    ),
    "boolean_bitwise": (  # Mamba's `~torch.tril(...)` mask
        "(x.masked_fill(~torch.tril(torch.ones(6, 10, dtype=torch.bool)), 0.0), "
        "((x > 0) & (x < 1)).float(), ((x > 1) | ~(x < -1)).float())",
        X,
    ),
    "label_smoothing": (  # its target mask's `~` was the bitwise not it refused
        "F.cross_entropy(x, torch.argmax(y, 1), label_smoothing=0.1)",
        M,
    ),
    "view_of_a_permuted_product": (  # eager's product keeps x.t()'s layout; ours is contiguous
        "(x.t() * 2).t().view(2, 24) @ y",
        "torch.randn(6, 8), torch.randn(24, 5)",
    ),
}


@pytest.mark.parametrize("dsl", ["cpp", "triton"])
@pytest.mark.parametrize("name", list(CASES))
def test_newly_written_ops_verify(tmp_path, dsl, name):
    forward, inputs = CASES[name]
    verify_forward(tmp_path, dsl, forward, inputs)


@pytest.mark.parametrize(
    ("forward", "definitions"),
    [("(torch.atan(x), torch.atan(torch.sum(x, dim=1)))", 1), ("torch.tanh(x)", 0)],
)
def test_a_jit_helper_is_defined_once_and_only_where_a_kernel_calls_it(
    tmp_path, forward, definitions
):
    task = task_file(tmp_path, forward, X)
    generator = builtin_generator(task, "triton", tmp_path, device="cuda")
    code = generator.code(generator.default_config())
    assert code.count("def _atan(") == definitions
    compile(code, "kernel.py", "exec")  # one module, its names defined before use


def test_a_nearest_resize_at_a_ratio_that_is_not_whole_is_refused(tmp_path):
    from kernelgraph.tools.builtin.errors import Unsupported

    task = task_file(
        tmp_path, "F.interpolate(x, size=(4, 4), mode='nearest')", "torch.randn(2, 3, 6, 6)"
    )
    with pytest.raises(Unsupported, match="not whole"):
        builtin_generator(task, "cpp", tmp_path).code(None)

"""Which fp32-to-TF32 operand rounding reproduces cuDNN's TF32 convolutions (PyTorch's default
flags, as KernelBench's evaluator runs them)? For KernelBench's level1/87 (1x1) and level1/86
(depthwise, then 1x1) at batch 4: each rounding of x and w, then the convolution in fp64, against
cuDNN's output; also cuBLAS's TF32 GEMM of the same 1x1 product. GPU only:

    python benchmarks/tf32_rounding_probe.py
"""

import torch
import torch.nn.functional as F

dev = "cuda"


# fp32 bits -> TF32 bits (the low 13 mantissa bits cleared), by rounding rule
ROUNDINGS = {
    "trunc": lambda b: b & ~0x1FFF,
    "rn_away": lambda b: (b + 0x1000) & ~0x1FFF,
    "rn_even": lambda b: (b + 0xFFF + ((b >> 13) & 1)) & ~0x1FFF,
}


def rnd(t, mode):
    if mode == "exact":
        return t
    return ROUNDINGS[mode](t.contiguous().view(torch.int32)).view(torch.float32)


def probe(name, x, w, **kw):
    ref = F.conv2d(x, w, **kw)
    print(name, "ref", tuple(ref.shape), flush=True)
    for mx in ("exact", "trunc", "rn_away", "rn_even"):
        for mw in ("exact", "trunc", "rn_away", "rn_even"):
            if mx != mw and not (mx in ("rn_away", "rn_even") and mw in ("rn_away", "rn_even")):
                continue
            emu = F.conv2d(rnd(x, mx).double(), rnd(w, mw).double(), **kw)
            d = (emu - ref.double()).abs()
            bad = (d > 1e-4 + 1e-4 * ref.double().abs()).sum().item()
            print(
                f"  x:{mx:8s} w:{mw:8s} max {d.max().item():.3e} mean {d.mean().item():.3e} over-tol {bad}",
                flush=True,
            )
            del emu, d
    # the same product as a cuBLAS TF32 GEMM
    if w.shape[-1] == 1 and kw.get("groups", 1) == 1:
        torch.backends.cuda.matmul.allow_tf32 = True
        mm = torch.matmul(x.permute(0, 2, 3, 1), w[:, :, 0, 0].t()).permute(0, 3, 1, 2)
        torch.backends.cuda.matmul.allow_tf32 = False
        print(
            f"  cuBLAS TF32 matmul vs cuDNN: max {(mm - ref).abs().max().item():.3e} equal {(mm == ref).float().mean().item():.4f}",
            flush=True,
        )
    del ref


def main() -> None:
    torch.manual_seed(0)
    assert torch.backends.cudnn.allow_tf32  # PyTorch's default
    x = torch.rand(4, 64, 1024, 1024, device=dev)
    w = torch.nn.Conv2d(64, 128, 1, bias=False).to(dev).weight.detach()
    probe("pointwise 87 (batch 4)", x, w)
    del x
    x = torch.rand(4, 64, 512, 512, device=dev)
    dw = torch.nn.Conv2d(64, 64, 3, padding=1, groups=64, bias=False).to(dev).weight.detach()
    probe("depthwise of 86", x, dw, padding=1, groups=64)
    y = F.conv2d(x, dw, padding=1, groups=64)
    probe("pointwise of 86", y, w)


if __name__ == "__main__":
    main()

"""TileLang: RMSNorm over the last dimension, one thread block per row.

The row is walked in block_N-wide chunks: pass 1 squares a chunk in a register fragment and
reduces it with T.reduce_sum (a block-wide reduction), adding into a running total; pass 2
writes x * rsqrt(total / N + eps) * w. Columns past N load 0 (pass 1) or are skipped (pass 2).
ModelNew creates its weight exactly as Model does, so seeded values match.
"""

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn


@tilelang.jit(out_idx=[-1])
def rmsnorm_kernel(M, N, eps, block_N, threads=256):
    n_chunks = (N + block_N - 1) // block_N

    @T.prim_func
    def rmsnorm(
        X: T.Tensor((M, N), "float32"),
        W: T.Tensor((N,), "float32"),
        Y: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(M, threads=threads) as row:
            sq = T.alloc_fragment((1, block_N), "float32")
            part = T.alloc_fragment((1,), "float32")
            total = T.alloc_fragment((1,), "float32")
            T.fill(total, 0.0)

            for c in T.serial(n_chunks):
                for i, j in T.Parallel(1, block_N):
                    sq[i, j] = T.if_then_else(
                        c * block_N + j < N,
                        X[row, c * block_N + j] * X[row, c * block_N + j],
                        0.0,
                    )
                T.reduce_sum(sq, part, dim=1)
                for i in T.Parallel(1):
                    total[i] = total[i] + part[i]

            for i in T.Parallel(1):
                total[i] = T.rsqrt(total[i] / N + eps)  # now the row's scale

            for c in T.serial(n_chunks):
                for i, j in T.Parallel(1, block_N):
                    if c * block_N + j < N:
                        Y[row, c * block_N + j] = (
                            X[row, c * block_N + j] * total[i] * W[c * block_N + j]
                        )

    return rmsnorm


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))  # same draw as Model
        self.eps = eps

    def forward(self, x):
        x = x.contiguous()
        N = x.shape[-1]
        x2 = x.view(-1, N)
        block_N = min(2048, max(256, 1 << (N - 1).bit_length()))  # a power of two >= 256
        kernel = rmsnorm_kernel(x2.shape[0], N, float(self.eps), block_N)
        return kernel(x2, self.weight.contiguous()).view(x.shape)

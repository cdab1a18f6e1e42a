"""TileLang: tiled fp32 GEMM C = A @ B with exact fp32 products (no TF32).

T.gemm would lower fp32 inputs to TF32 tensor-core instructions (10-bit mantissa), too coarse
for a 1e-4 tolerance, so the block tile is multiplied with plain FMAs instead: the (k, i, j)
loop over the shared-memory tiles is a T.Parallel over the accumulator fragment, which TileLang
spreads over the threads (each thread owns a few rows x 4 columns of C). T.Pipelined overlaps
the copies of the next K slab with this one's arithmetic; T.copy clips the tiles at the matrix
edges (zero fill on load, guarded store), so any M, N, K work.
"""

import tilelang
import tilelang.language as T
import torch.nn as nn


@tilelang.jit(out_idx=[-1])
def matmul_kernel(M, N, K, block_M=128, block_N=128, block_K=16, threads=256, num_stages=2):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), "float32"),
        B: T.Tensor((K, N), "float32"),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float32")
            B_shared = T.alloc_shared((block_K, block_N), "float32")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                for k in T.serial(block_K):
                    for i, j in T.Parallel(block_M, block_N):
                        C_local[i, j] += A_shared[i, k] * B_shared[k, j]
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a = a.contiguous()
        b = b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        kernel = matmul_kernel(M, N, K)  # compiled once per shape, then cached
        return kernel(a, b)

"""C++ (OpenMP, CPU) source of the builtin's blocked GEMM with its epilogue.

The [batch, m, n] output is cut into BLOCK_M x BLOCK_N tiles that threads share (static
schedule). For each BLOCK_K slice a thread packs its A block into MR-row panels and its B block
into NR-column panels (zero padded, so the micro-kernel never checks bounds) and runs an
MR x NR register micro-kernel (fp32 accumulators, two AVX-512 vectors wide) into a tile buffer.
The epilogue (bias, activation, scaling) is applied while the tile is stored. Tile sizes and
the thread count are run-time arguments: trying a config does not rebuild.
"""

from __future__ import annotations

from string import Template

from kernelgraph.tools.builtin.cpp_emit import (
    CppSyntax,
    dynamic_outputs,
    indent,
    index_type,
    print_stores,
    split_index,
)  # fmt: skip
from kernelgraph.tools.builtin.cpp_emit import signature as c_signature
from kernelgraph.tools.builtin.kernels import GemmKernel, Store
from kernelgraph.tools.builtin.printer import Printer

MR, NR = 6, 32  # register tile: 12 zmm accumulators
PARAMS = ["threads", "BLOCK_M", "BLOCK_N", "BLOCK_K"]

MICRO = Template(r"""#include <memory>

constexpr int64_t MR = $MR, NR = $NR;

// c[0:MR, 0:NR] (+)= A (MR x kc: element (i, p) at a[i * ai + p * ap]) times B (kc x NR,
// rows bs apart); packed panels have ai = 1, ap = MR, bs = NR.
static inline void kg_micro(const float* __restrict a, int64_t ai, int64_t ap,
                            const float* __restrict b, int64_t bs, float* __restrict c,
                            int64_t ldc, int64_t kc, bool first) {
    float acc[MR][NR];
    for (int64_t i = 0; i < MR; ++i)
        for (int64_t j = 0; j < NR; ++j) acc[i][j] = first ? 0.0f : c[i * ldc + j];
    for (int64_t p = 0; p < kc; ++p) {
        const float* bq = b + p * bs;
        #pragma GCC unroll 8
        for (int64_t i = 0; i < MR; ++i) {
            const float av = a[i * ai + p * ap];
            #pragma omp simd
            for (int64_t j = 0; j < NR; ++j) acc[i][j] += av * bq[j];
        }
    }
    for (int64_t i = 0; i < MR; ++i)
        for (int64_t j = 0; j < NR; ++j) c[i * ldc + j] = acc[i][j];
}
""")

BODY = Template(r"""    const int nt = kg_threads(threads);
    auto up = [](int64_t x, int64_t to) { return (std::max<int64_t>(x, 1) + to - 1) / to * to; };
    const int64_t BM = std::min(up(BLOCK_M, MR), up($M, MR));
    const int64_t BN = std::min(up(BLOCK_N, NR), up($N, NR));
    const int64_t BK = std::min<int64_t>(std::max<int64_t>(BLOCK_K, 1), $K);
    const int64_t tiles_m = ($M + BM - 1) / BM, tiles_n = ($N + BN - 1) / BN;
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        std::unique_ptr<float[]> apack(new float[BM * BK]), bpack(new float[BK * BN]),
            cbuf(new float[BM * BN]);
        #pragma omp for collapse(3) schedule(static)
        for (int64_t bb = 0; bb < $BATCH; ++bb)
        for (int64_t tn = 0; tn < tiles_n; ++tn)
        for (int64_t tm = 0; tm < tiles_m; ++tm) {
            const int64_t m0 = tm * BM, n0 = tn * BN;
            const int64_t mc = std::min<int64_t>(BM, $M - m0), nc = std::min<int64_t>(BN, $N - n0);
            const int64_t mp = up(mc, MR), np = up(nc, NR);
            const float* A = $A + bb * ${SA0}LL;
            const float* B = $B + bb * ${SB0}LL;
            for (int64_t k0 = 0; k0 < $K; k0 += BK) {
                const int64_t kc = std::min<int64_t>(BK, $K - k0);
                float* ap = apack.get();
                float* bp = bpack.get();
                for (int64_t i = 0; i < mp; i += MR)
                    if (!($A_DIRECT && i + MR <= mc))
$PACK_A
                for (int64_t j = 0; j < np; j += NR)
                    if (!($B_DIRECT && j + NR <= nc))
$PACK_B
                for (int64_t j = 0; j < np; j += NR) {
                    const bool bdirect = $B_DIRECT && j + NR <= nc;
                    const float* bj = bdirect ? B + k0 * ${SB1}LL + n0 + j : bp + j * kc;
                    for (int64_t i = 0; i < mp; i += MR) {
                        if ($A_DIRECT && i + MR <= mc)
                            kg_micro(A + (m0 + i) * ${SA1}LL + k0, ${SA1}LL, 1, bj,
                                     bdirect ? ${SB1}LL : NR, cbuf.get() + i * BN + j, BN, kc,
                                     k0 == 0);
                        else
                            kg_micro(ap + i * kc, 1, MR, bj, bdirect ? ${SB1}LL : NR,
                                     cbuf.get() + i * BN + j, BN, kc, k0 == 0);
                    }
                }
            }
            for (int64_t i = 0; i < mc; ++i) {
                const $IX k = bb * $M + m0 + i, n0x = n0;  // output row k: idx = k * N + r
                const float* crow = cbuf.get() + i * BN;
                #pragma omp simd
                for ($IX j = 0; j < static_cast<$IX>(nc); ++j) {
                    const float acc = crow[j];
                    const $IX r = n0x + j, idx = k * $N + r;
$EPILOGUE
                }
            }
        }
    }""")

# Packing loops, ordered so that the source is read along its contiguous axis.
PACK_A_ROWS = """                    for (int64_t ii = 0; ii < MR; ++ii)
                        for (int64_t p = 0; p < kc; ++p)
                            ap[i * kc + p * MR + ii] = i + ii < mc
                                ? A[(m0 + i + ii) * ${SA1}LL + (k0 + p) * ${SA2}LL] : 0.0f;"""
PACK_A_COLS = """                    for (int64_t p = 0; p < kc; ++p)
                        for (int64_t ii = 0; ii < MR; ++ii)
                            ap[i * kc + p * MR + ii] = i + ii < mc
                                ? A[(m0 + i + ii) * ${SA1}LL + (k0 + p) * ${SA2}LL] : 0.0f;"""
PACK_B_ROWS = """                    for (int64_t p = 0; p < kc; ++p)
                        for (int64_t jj = 0; jj < NR; ++jj)
                            bp[j * kc + p * NR + jj] = j + jj < nc
                                ? B[(k0 + p) * ${SB1}LL + (n0 + j + jj) * ${SB2}LL] : 0.0f;"""
PACK_B_COLS = """                    for (int64_t jj = 0; jj < NR; ++jj)
                        for (int64_t p = 0; p < kc; ++p)
                            bp[j * kc + p * NR + jj] = j + jj < nc
                                ? B[(k0 + p) * ${SB1}LL + (n0 + j + jj) * ${SB2}LL] : 0.0f;"""


def gemm_source(kernel: GemmKernel) -> str:
    a, b = kernel.a, kernel.b
    # the epilogue sees idx as (row k, column r): a bias over columns is read at r, not idx % n
    stores = [Store(s.arg, split_index(s.value, kernel.n), s.space) for s in kernel.stores]
    limits = {"idx": kernel.batch * kernel.m * kernel.n, "k": kernel.batch * kernel.m,
              "r": kernel.n, "acc": 0}  # fmt: skip
    ix = index_type(kernel, limits,
                    [s.value for s in stores])  # fmt: skip
    dynamic = dynamic_outputs(stores)
    epilogue = print_stores(Printer(CppSyntax()), stores, "idx", dynamic)
    values = dict(
        M=kernel.m, N=kernel.n, K=kernel.k, BATCH=kernel.batch, A=a.arg, B=b.arg, IX=ix,
        SA0=a.strides[0], SA1=a.strides[1], SA2=a.strides[2],
        SB0=b.strides[0], SB1=b.strides[1], SB2=b.strides[2],
    )  # fmt: skip
    pack_a = PACK_A_ROWS if a.strides[2] == 1 else PACK_A_COLS
    pack_b = PACK_B_ROWS if b.strides[2] == 1 or b.strides[1] != 1 else PACK_B_COLS
    values["A_DIRECT"] = "true" if a.strides[2] == 1 else "false"
    values["B_DIRECT"] = "true" if b.strides[2] == 1 else "false"
    values["PACK_A"] = Template(pack_a).substitute(values)
    values["PACK_B"] = Template(pack_b).substitute(values)
    values["EPILOGUE"] = "\n".join(indent(epilogue, 5))
    head = c_signature(kernel, dynamic, PARAMS) + " {"
    return "\n".join([MICRO.substitute(MR=MR, NR=NR), head, BODY.substitute(values), "}"])

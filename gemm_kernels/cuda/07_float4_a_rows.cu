// Chapter 07, ablation: float4 global loads with the A tile kept row-major.
//
// Chapter 07's kernel (07_float4.cu) changes two things at once relative to chapter 06's
// sgemm_tile_2d_reg: its global loads are 16 bytes wide (LDG.E.128), and its A tile is
// stored transposed, As[k][m]. This kernel makes the first change only, so that the
// 16-byte global loads can be measured on their own at the same tiles. Everything else
// is chapter 07's kernel: the template, the thread mapping ((tr, tc) = (t / (BN/TN),
// t % (BN/TN)), thread t owns rows tr*TM.., columns tc*TN..), the B tile and its
// loads, the VEC and scalar paths and their zero-filling of tile elements outside A
// and B, and the epilogue (float4 stores of C on the VEC path).
//
// The one difference: the A tile is As[m][k] (BM x BK, row-major, as in chapter 06).
//   * Store: the float4 fetched from A holds four consecutive k of one row m, which are
//     four adjacent words of As[m]; BK is a multiple of 4 and the float4 starts at a
//     multiple of 4, so it is 16-byte aligned and goes in whole with one STS.128
//     (chapter 07 needs four STS.32, one per row of its transposed tile).
//   * Reads: for each k a thread reads its TM values As[tr*TM + i][k], one float each,
//     exactly as chapter 06 does. They are BK words apart, so they cannot be read
//     together for one k. But the k loop is unrolled, and As[r][k..k+3] for four
//     consecutive k are adjacent and 16-byte aligned (k a multiple of 4, rows of BK
//     floats), so the compiler merges those four scalar reads into one LDS.128 along k,
//     as it does in chapter 06. The SASS therefore has as many LDS.128 of A per tile
//     (TM*BK/4) as chapter 07's, with no scalar LDS. The cost is registers: a thread
//     holds TM x 4 values of A at once (4 values of k for each of its rows) where
//     chapter 07 holds TM (one k). At the default that is 147 registers against 119
//     (ptxas 12.9, sm_90): one block of 256 threads per SM instead of two.
// So the shared-memory reads of this kernel and chapter 07's issue the same number
// of instructions and wavefronts; what the transposed tile of chapter 07 changes is the
// A store (STS.128 here, 4 x STS.32 there) and the registers.
//
// Bank analysis of the default, 128 x 128 x 8 tiles, 8 x 8 per thread, 256 threads
// (bank model: 32 banks of 4 bytes; a 128-bit access is 4 quarter-warp phases of 8
// lanes; the two quarters of a half-warp merge when, for every lane i, lane i^1 (or
// for every lane, lane i^2) reads the same address; half-warps never merge; a 32-bit
// access is one phase for the whole warp, lanes reading the same word are served by
// one broadcast):
//   * A store, STS.128 of As[m][k..k+3]: thread t stores float4 number f = t (the A tile
//     holds 128*8/4 = 256 float4s, one per thread), m = f / 2, k = 4 * (f % 2), at word
//     8m + k = 4f. A warp writes 32 consecutive float4 (512 bytes): each quarter-warp
//     covers the 32 banks once, 4 wavefronts, the minimum for 512 bytes. Chapter 07's
//     transposed store takes 4 STS.32 of 2 wavefronts each (a 2-way conflict): 8.
//   * B store: as in chapter 07, STS.128 of 32 consecutive float4, 4 wavefronts.
//   * A read, as written (32-bit loads of As[tr*8 + i][k]): tr is the same for the 16
//     lanes of a half-warp (16 threads per row of the thread grid), so they read one
//     word, a broadcast. The other half-warp has tr + 1 and reads the word 8*8 = 64
//     further on: the same bank (64 = 2*32), another word, so 2 wavefronts per load;
//     64 loads per tile would cost 128 wavefronts.
//   * A read, as compiled (LDS.128 of As[tr*8 + i][k..k+3]): all 16 lanes of a
//     half-warp read the same 16 bytes: broadcast, the quarters merge (i^1), 1 wavefront
//     per half-warp, 2 per instruction. 16 LDS.128 per tile: 32 wavefronts, the same
//     as chapter 07's 16 LDS.128 of As[k][tr*8 + 0..3] (and + 4).
//   * B read, as in chapter 07: LDS.128 of Bs[k][tc*8 + 0..3] (and + 4), chunks tc and
//     tc+4 of a quarter-warp on the same 4 banks: 8 wavefronts per instruction where
//     the 512 bytes need 4; 16 LDS.128 per tile, 128 wavefronts.
//   Per k and warp, on average: 2*2 (A) + 2*8 (B) = 20 wavefronts for 4 LDS.128, as in
//   chapter 07; per tile 8 wavefronts of stores (4 A + 4 B) against chapter 07's 12.
#include "common.cuh"
#include "vec4.cuh"

template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_float4_a_rows(int M, int N, int K, float alpha, const float* __restrict__ A,
                    const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = (BM / TM) * (BN / TN);
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 granularity");
    static_assert((BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0,
                  "every thread copies the same number of float4s");

    __shared__ __align__(16) float As[BM][BK];   // As[m][k] = A[row0 + m][k0 + k]
    __shared__ __align__(16) float Bs[BK][BN];   // Bs[k][n] = B[k0 + k][col0 + n]

    const int t = threadIdx.x;
    const int tr = t / (BN / TN), tc = t % (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    float acc[TM][TN] = {};

    for (int k0 = 0; k0 < K; k0 += BK) {
        // ---- global -> shared, zeros outside A and B
        if constexpr (VEC) {
#pragma unroll
            for (int i = 0; i < BM * BK / 4 / NT; ++i) {
                const int f = t + i * NT;                       // float4 number in the tile
                const int m = f / (BK / 4), k = f % (BK / 4) * 4;
                float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
                if (row0 + m < M && k0 + k < K) v = load_float4(A + (row0 + m) * K + k0 + k);
                *reinterpret_cast<float4*>(&As[m][k]) = v;       // row-major: one STS.128
            }
#pragma unroll
            for (int i = 0; i < BK * BN / 4 / NT; ++i) {
                const int f = t + i * NT;
                const int k = f / (BN / 4), n = f % (BN / 4) * 4;
                float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
                if (k0 + k < K && col0 + n < N) v = load_float4(B + (k0 + k) * N + col0 + n);
                *reinterpret_cast<float4*>(&Bs[k][n]) = v;       // STS.128
            }
        } else {
#pragma unroll
            for (int i = 0; i < BM * BK / NT; ++i) {
                const int e = t + i * NT;                       // element number in the tile
                const int m = e / BK, k = e % BK;
                As[m][k] = (row0 + m < M && k0 + k < K) ? A[(row0 + m) * K + k0 + k] : 0.f;
            }
#pragma unroll
            for (int i = 0; i < BK * BN / NT; ++i) {
                const int e = t + i * NT;
                const int k = e / BN, n = e % BN;
                Bs[k][n] = (k0 + k < K && col0 + n < N) ? B[(k0 + k) * N + col0 + n] : 0.f;
            }
        }
        __syncthreads();

        // ---- the outer products: per k, TM scalar reads of A (merged along k by the
        // compiler, see above), TN/4 LDS.128 of B, and TM*TN FFMA
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[tr * TM + i][k];
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[k][tc * TN + j]);
                b[j] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();   // everyone is done with As/Bs before the next copy overwrites them
    }

    // ---- registers -> C: float4 stores on the VEC path (N % 4 == 0 keeps them aligned)
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + tr * TM + i;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int c = col0 + tc * TN + j;
            float* out = C + r * N + c;
            if constexpr (VEC) {
                if (c < N)
                    gemm_epilogue4(make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2],
                                               acc[i][j + 3]), alpha, beta, out);
            } else {
#pragma unroll
                for (int jj = 0; jj < 4; ++jj)
                    if (c + jj < N) out[jj] = gemm_epilogue(acc[i][j + jj], alpha, beta, out + jj);
            }
        }
    }
}

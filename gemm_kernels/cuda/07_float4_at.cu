// Chapter 07's kernel on a pre-transposed A: the GEMM reads A^T from global memory.
//
// The kernel `float4` (07_float4.cu) fetches A a float4 at a time along k (four values
// of one row m) and stores it transposed, As[k][m], with four scalar STS.32 per float4.
// Here A has been transposed once in global memory beforehand (chapter 10), so the
// kernel is given At = A^T, a K x M row-major matrix: At[k * M + m] = A[m * K + k].
// A float4 of At holds four consecutive m of one k, exactly four consecutive words of
// one row of As[k][m], so the tile is stored with one STS.128 per float4, like B.
// Everything else is float4's: the 2D tiling (thread t owns the TM x TN patch at rows
// tr*TM.., columns tc*TN.., (tr, tc) = (t / (BN/TN), t % (BN/TN))), the B tile, the
// LDS.128 reads of the outer products, the FFMA order, and the epilogue.
//
// The launcher is called with the usual A (M x K); it makes At once, when it is built,
// so the calls it returns (the ones a benchmark times) run this GEMM alone. What the
// transpose costs is timed on its own (chapter 10's kernels).
//
// Alignment. The vector path (VEC) loads float4s of At along m and of B along n, and
// stores float4s of C: every row of At starts 16-byte aligned when M % 4 == 0 (At is a
// fresh allocation, 256-byte aligned), every row of B and C when N % 4 == 0; inside a
// row the float4s start at row0 + 4i or col0 + 4j, multiples of 4. So VEC needs
// M % 4 == 0 and N % 4 == 0, and any K (float4 needs K % 4 == 0 instead of M % 4 == 0).
// Any other shape takes the scalar path (VEC = false, chosen by the launcher from the
// shape). Both paths zero-fill tile elements outside At or B and never touch memory
// outside them: with VEC, M and N are multiples of 4, so a float4 is either wholly
// inside a row or wholly outside; a row k0 + k >= K is never read.
//
// Bank and sector analysis of the A copy at the default 128 x 128 x 8 tile, 256 threads
// (one float4 of At per thread and tile; float4 numbers in 07_float4.cu for comparison):
//   * Global load: float4 number f = t goes to k = t / 32, m = 4 * (t % 32), so warp w
//     reads row k0 + w of At, columns row0 .. row0 + 127: 512 contiguous bytes, four
//     whole 128-byte lines (float4: 16 rows of A, 32 bytes of each).
//   * Shared store: the same warp writes row w of As with one STS.128, 32 consecutive
//     float4s: each quarter-warp covers the 32 banks once, 4 wavefronts, the minimum for
//     512 bytes (float4: four STS.32 of 2 wavefronts each, 8 wavefronts, and 4 store
//     instructions where this is 1).
//   The reads of the tiles are float4's: per k and warp 2*2 (A, broadcast) + 2*8 (B,
//   2-way conflict) = 20 wavefronts for 4 LDS.128.
#include "common.cuh"
#include "vec4.cuh"

template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_float4_at(int M, int N, int K, float alpha, const float* __restrict__ At,
                const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = (BM / TM) * (BN / TN);
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BM % 4 == 0, "float4 granularity");
    static_assert((BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0,
                  "every thread copies the same number of float4s");

    __shared__ __align__(16) float As[BK][BM];   // As[k][m] = At[k0 + k][row0 + m]
    __shared__ __align__(16) float Bs[BK][BN];   // Bs[k][n] = B[k0 + k][col0 + n]

    const int t = threadIdx.x;
    const int tr = t / (BN / TN), tc = t % (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    float acc[TM][TN] = {};

    for (int k0 = 0; k0 < K; k0 += BK) {
        // ---- global -> shared, zeros outside At and B
        if constexpr (VEC) {
#pragma unroll
            for (int i = 0; i < BM * BK / 4 / NT; ++i) {
                const int f = t + i * NT;                       // float4 number in the tile
                const int k = f / (BM / 4), m = f % (BM / 4) * 4;
                float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
                if (k0 + k < K && row0 + m < M) v = load_float4(At + (k0 + k) * M + row0 + m);
                *reinterpret_cast<float4*>(&As[k][m]) = v;       // STS.128, no transposing
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
                const int k = e / BM, m = e % BM;               // consecutive lanes: along m
                As[k][m] = (k0 + k < K && row0 + m < M) ? At[(k0 + k) * M + row0 + m] : 0.f;
            }
#pragma unroll
            for (int i = 0; i < BK * BN / NT; ++i) {
                const int e = t + i * NT;
                const int k = e / BN, n = e % BN;
                Bs[k][n] = (k0 + k < K && col0 + n < N) ? B[(k0 + k) * N + col0 + n] : 0.f;
            }
        }
        __syncthreads();

        // ---- the outer products: per k, TM/4 + TN/4 LDS.128 and TM*TN FFMA
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&As[k][tr * TM + i]);
                a[i] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
            }
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

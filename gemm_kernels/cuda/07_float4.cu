// Chapter 07: float4 global loads, a transposed A tile, LDS.128 reads.
//
// Chapter 06's 2D tiling (a block of NT = (BM/TM)*(BN/TN) threads computes a BM x BN
// tile of C; thread t owns the TM x TN patch at rows tr*TM.., columns tc*TN.., with
// (tr, tc) = (t / (BN/TN), t % (BN/TN))), with three changes:
//
// 1. Global loads are 16 bytes wide. Each thread fetches float4s of A (4 consecutive k
//    of one row) and of B (4 consecutive columns of one row): LDG.E.128, a quarter of
//    the load instructions of chapter 06. A float4 load needs a 16-byte aligned
//    address. The matrices start 256-byte aligned (cupy allocations), so every row of A
//    starts 16-byte aligned when K % 4 == 0, and every row of B when N % 4 == 0; the
//    float4s then start at k0 + 4i or col0 + 4j, multiples of 4. That is the VEC path.
//    Any other shape takes the scalar path (VEC = false, chosen by the launcher from the
//    shape): the same kernel with one float per load. Both paths zero-fill tile
//    elements outside A or B and never touch memory outside them: with VEC, K and N are
//    multiples of 4, so a float4 is either wholly inside a row or wholly outside.
//
// 2. The A tile is stored transposed, As[k][m] (k-major), so the TM values of A that a
//    thread needs for one k (its column of the A tile) are contiguous in shared memory
//    and can be read as TM/4 LDS.128. The price: the float4 fetched from A holds four
//    values of one row m at k..k+3, which go to four different rows of As, so the
//    store is four scalar STS.32. B keeps its layout, Bs[k][n], stored with STS.128.
//
// 3. Shared memory is read 16 bytes at a time: for each k, TM/4 LDS.128 from As and
//    TN/4 LDS.128 from Bs, then TM*TN FFMAs (the outer product). For 8x8 that is
//    4 loads for 64 FFMAs. Chapter 06's kernel issues as many LDS.128 (the compiler
//    fuses its scalar reads), but its row-major A tile makes each LDS.128 of A bring
//    4 values of k, three of which wait in registers for their k; here one LDS.128
//    brings 4 values that the same k uses.
//
// Bank analysis of the default, 128 x 128 x 8 tiles, 8 x 8 per thread, 256 threads
// (bank model: 32 banks of 4 bytes; a 128-bit access is 4 quarter-warp phases of 8
// lanes; the two quarters of a half-warp merge when, for every lane i, lane i^1 (or
// for every lane, lane i^2) reads the same address; half-warps never merge):
//   * A store, As[k][m] = v: a warp covers tile rows m = 16w'..16w'+15 (2 lanes per
//     row: lane 2j fetched k 0..3 of row m, lane 2j+1 fetched k 4..7). For one of its
//     4 STS.32, lane 2j writes word k*128 + m, lane 2j+1 word (k+4)*128 + m: the same
//     bank (128 = 4*32), different words. Every bank gets 2 words: a 2-way conflict, 2
//     wavefronts per STS where 1 would do. Chapter 09 pads the rows.
//   * B store, STS.128 of Bs[k][4c..4c+3]: a warp writes 32 consecutive float4 (one row
//     of Bs, 512 bytes): each quarter-warp covers the 32 banks once, 4 wavefronts, the
//     minimum for 512 bytes.
//   * A read, LDS.128 of As[k][tr*8 + 0..3] (and + 4): tr is the same for the 16 lanes of
//     a half-warp, so all read one address: broadcast, the quarters merge (i^1),
//     1 wavefront per half-warp, 2 per instruction.
//   * B read, LDS.128 of Bs[k][tc*8 + 0..3] (and + 4): lane tc = 0..15 reads the 16 bytes
//     at word 8*tc. In a quarter (tc = 0..7) the chunks start at words 0, 8, ..., 56:
//     chunks tc and tc+4 hit the same 4 banks: 2-way conflict, 2 wavefronts per quarter,
//     no merging (neighbours read different addresses): 8 wavefronts per instruction
//     where the 512 bytes need 4. Chapter 09 changes which thread owns which outputs.
//   Per k and warp: 2*2 (A) + 2*8 (B) = 20 wavefronts for 4 LDS.128.
#include "common.cuh"
#include "vec4.cuh"

template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_float4(int M, int N, int K, float alpha, const float* __restrict__ A,
             const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = (BM / TM) * (BN / TN);
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 granularity");
    static_assert((BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0,
                  "every thread copies the same number of float4s");

    __shared__ __align__(16) float As[BK][BM];   // As[k][m] = A[row0 + m][k0 + k]
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
                As[k + 0][m] = v.x;                              // transposed: 4 x STS.32
                As[k + 1][m] = v.y;
                As[k + 2][m] = v.z;
                As[k + 3][m] = v.w;
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
                As[k][m] = (row0 + m < M && k0 + k < K) ? A[(row0 + m) * K + k0 + k] : 0.f;
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

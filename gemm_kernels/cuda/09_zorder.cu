// Chapter 09: conflict-free shared memory, both ways.
//
// Chapter 08's kernel (two shared stages, next tile prefetched into registers, float4
// global loads on the VEC path, scalar edge path) with 8 x 8 outputs per thread and two
// changes, each a template switch so the chapter can measure them one at a time:
//
// PAD (0 or 4): the k-major A tile gets rows of BM + PAD floats. This removes the
// 2-way conflict of the transposed store (the "BM + 4" padding of Li Shaoxia's SGEMM article). PAD = 4 rather than 1
// keeps every row start 16-byte aligned (LDS.128 needs that): (BM + 4) * 4 bytes is a
// multiple of 16 when BM is.
//
// ZORDER (true/false): which outputs a thread owns. In both layouts a thread owns 2 x 2
// sub-tiles of 4 x 4 that lie half a tile apart: rows 4*qr + 0..3 and BM/2 + 4*qr + 0..3,
// columns 4*qc + 0..3 and BN/2 + 4*qc + 0..3, where (qr, qc) is the thread's position in a
// (BM/8) x (BN/8) grid. So for each k a thread reads its A values with two LDS.128 (at
// words 4*qr and BM/2 + 4*qr of As row k) and its B values with two LDS.128 (at 4*qc and
// BN/2 + 4*qc of Bs row k). The layouts differ in how the 32 lanes of a warp sit in that
// grid:
//   ZORDER = false: row-major, qr = t / (BN/8), qc = t % (BN/8). For BN = 128, a warp is
//     2 grid rows x 16 columns.
//   ZORDER = true: a warp is a 4 x 8 block of the grid (16 rows x 32 columns of each
//     sub-tile), and the lane bits are dealt out so that neighbours share operands:
//         lane = b4 b3 b2 b1 b0 (bits)
//         qr = 4 * warp_row + (b4 b1)       2 bits: b1 is the low bit, b4 the high one
//         qc = 8 * warp_col + (b3 b2 b0)    3 bits: b0 is the low bit
//     qr does not depend on b0, so lanes i and i^1 always read the same A address; qc
//     does not depend on b1, so lanes i and i^2 always read the same B address.
//
// Bank analysis, default 128 x 128 x 8 (bank model: 32 banks x 4 bytes; a 128-bit access
// is 4 quarter-warp phases of 8 lanes, the two quarters of a half-warp merge into one
// phase when for every lane i, lane i^1 reads the same address (or every lane i^2 does);
// half-warps never merge; a phase costs as many wavefronts as the most distinct words
// one bank must deliver in it). Word addresses are relative to the start of row k of
// the stage; its bank offset is the same for all lanes and does not matter.
//
// A store (4 x STS.32 per thread per tile, VEC path). A warp's lanes 2j and 2j+1 fetched
// row m = m0 + j (j = 0..15) of the A tile, k = 0..3 and k = 4..7. For store number s
// (s = 0..3) lane 2j writes word (s) * LDA + m, lane 2j+1 word (s + 4) * LDA + m:
//   PAD = 0, LDA = 128: banks m % 32 and m % 32: every bank used by 2 words of two rows:
//     2-way conflict, 2 wavefronts per STS (8 per tile copy).
//   PAD = 4, LDA = 132: bank (4s + m) % 32 for even lanes and (4s + 16 + m) % 32 for odd
//     ones; m runs over 16 consecutive values, so the even lanes cover 16 consecutive
//     banks and the odd ones the other 16: conflict-free, 1 wavefront (4 per tile copy).
//     (With BK = 16, four lanes share a row, k = 0, 4, 8, 12 land on banks offset by
//     0, 16, 32 = 0, 48 = 16: 2-way again. PAD = 4 is tuned for BK = 8.)
// B store (1 x STS.128 per thread per tile): a warp writes 32 consecutive float4 = one
//   row of Bs. Each quarter covers the 32 banks once: 4 wavefronts, the minimum.
//
// A read (LDS.128 at word 4*qr, and at 64 + 4*qr):
//   ZORDER = false: qr is the same for all 16 lanes of a half-warp (one grid row):
//     broadcast, the quarters merge (i^1): 1 wavefront per half-warp, 2 per warp.
//   ZORDER = true: in half-warp h (b4 = h), qr = 4*warp_row + 2h + b1: lanes with b1 = 0
//     read chunk 4*qr (words 4qr..4qr+3), lanes with b1 = 1 the next chunk. i and i^1
//     agree, so the quarters merge: 2 distinct chunks = 8 banks, 1 wavefront per
//     half-warp, 2 per warp.
// B read (LDS.128 at word 4*qc, and at 64 + 4*qc):
//   ZORDER = false: lanes 0..15 of a half-warp have qc = 0..15 (all different, so no
//     merging): 4 quarter phases, each 8 consecutive chunks = 128 bytes = 32 banks once:
//     1 wavefront each, 4 per warp. (Chapter 07's layout, 8 consecutive columns per
//     thread, had 2-way conflicts here: 8 per warp.)
//   ZORDER = true: in each half-warp qc = 8*warp_col + (b3 b2 b0) takes 8 values, each
//     read by the lane pair i, i^2. Rule i^2 holds, the quarters merge: 8 consecutive
//     chunks = 128 bytes = 32 banks once, 1 wavefront per half-warp, 2 per warp. (Both
//     half-warps read the same 8 chunks; half-warps never merge, so that is 2.)
// Per k and warp: ZORDER = true: 4 LDS.128 x 2 = 8 wavefronts;
//                 ZORDER = false: 2 x 2 + 2 x 4 = 12; chapter 07/08: 20.
// Each LDS.128 of a warp returns 512 bytes to registers; 2 wavefronts (256 bytes from
// the banks) is possible only because every 16-byte chunk goes to two lanes.
//
// The C stores (ZORDER = true): for a fixed row of a sub-tile, a warp stores 4 rows
// (4 values of qr) x 8 consecutive float4 = 4 full 128-byte lines.
#include "common.cuh"
#include "vec4.cuh"

// Global -> registers, unchanged from chapter 08; what is new is in sgemm_zorder,
// below.
template <int BM, int BN, int BK, int NT, bool VEC>
__device__ __forceinline__ void fetch_tiles(float (&ra)[BM * BK / NT], float (&rb)[BK * BN / NT],
                                            const float* __restrict__ A,
                                            const float* __restrict__ B,
                                            int M, int N, int K, int row0, int col0, int k0) {
    const int t = threadIdx.x;
    if constexpr (VEC) {
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / NT; ++i) {
            const int f = t + i * NT;
            const int m = f / (BK / 4), k = f % (BK / 4) * 4;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (row0 + m < M && k0 + k < K) v = load_float4(A + (row0 + m) * K + k0 + k);
            ra[4 * i] = v.x; ra[4 * i + 1] = v.y; ra[4 * i + 2] = v.z; ra[4 * i + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / NT; ++i) {
            const int f = t + i * NT;
            const int k = f / (BN / 4), n = f % (BN / 4) * 4;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (k0 + k < K && col0 + n < N) v = load_float4(B + (k0 + k) * N + col0 + n);
            rb[4 * i] = v.x; rb[4 * i + 1] = v.y; rb[4 * i + 2] = v.z; rb[4 * i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < BM * BK / NT; ++i) {
            const int e = t + i * NT;
            const int m = e / BK, k = e % BK;
            ra[i] = (row0 + m < M && k0 + k < K) ? A[(row0 + m) * K + k0 + k] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < BK * BN / NT; ++i) {
            const int e = t + i * NT;
            const int k = e / BN, n = e % BN;
            rb[i] = (k0 + k < K && col0 + n < N) ? B[(k0 + k) * N + col0 + n] : 0.f;
        }
    }
}

// Registers -> one shared stage. The only change from chapter 08: A rows are LDA long.
template <int BM, int BN, int BK, int NT, int LDA, bool VEC>
__device__ __forceinline__ void store_tiles(const float (&ra)[BM * BK / NT],
                                            const float (&rb)[BK * BN / NT],
                                            float (&As)[BK][LDA], float (&Bs)[BK][BN]) {
    const int t = threadIdx.x;
    if constexpr (VEC) {
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / NT; ++i) {
            const int f = t + i * NT;
            const int m = f / (BK / 4), k = f % (BK / 4) * 4;
#pragma unroll
            for (int j = 0; j < 4; ++j) As[k + j][m] = ra[4 * i + j];
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / NT; ++i) {
            const int f = t + i * NT;
            const int k = f / (BN / 4), n = f % (BN / 4) * 4;
            *reinterpret_cast<float4*>(&Bs[k][n]) =
                make_float4(rb[4 * i], rb[4 * i + 1], rb[4 * i + 2], rb[4 * i + 3]);
        }
    } else {
#pragma unroll
        for (int i = 0; i < BM * BK / NT; ++i) {
            const int e = t + i * NT;
            As[e % BK][e / BK] = ra[i];
        }
#pragma unroll
        for (int i = 0; i < BK * BN / NT; ++i) {
            const int e = t + i * NT;
            Bs[e / BN][e % BN] = rb[i];
        }
    }
}

// Launch bounds: on the VEC path ask ptxas for 2 resident blocks of 256 threads (at
// most 128 registers per thread; without the hint it takes 130 and only 1 block fits).
// The scalar edge path needs more registers for its addresses and is left uncapped.
template <int BM, int BN, int BK, int PAD, bool ZORDER, bool VEC>
__global__ void __launch_bounds__(BM * BN / 64, (VEC && BM * BN / 64 <= 256) ? 2 : 1)
sgemm_zorder(int M, int N, int K, float alpha, const float* __restrict__ A,
             const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = BM * BN / 64;       // 8 x 8 outputs per thread
    constexpr int LDA = BM + PAD;
    static_assert(BM % 32 == 0 && BN % 64 == 0, "a warp covers 32 rows x 64 columns");
    static_assert(PAD % 4 == 0, "rows of As must stay 16-byte aligned for LDS.128");
    static_assert(BK % 4 == 0 && (BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0,
                  "every thread copies the same number of float4s");

    __shared__ __align__(16) float As[2][BK][LDA];
    __shared__ __align__(16) float Bs[2][BK][BN];
    float ra[BM * BK / NT], rb[BK * BN / NT];

    const int t = threadIdx.x;
    int qr, qc;   // the thread's place in the (BM/8) x (BN/8) grid
    if constexpr (ZORDER) {
        constexpr int WARPS_N = BN / 64;   // warps across the grid: 8 grid columns each
        const int warp = t >> 5, lane = t & 31;
        qr = (warp / WARPS_N) * 4 + (((lane >> 1) & 1) | ((lane >> 3) & 2));
        qc = (warp % WARPS_N) * 8 + ((lane & 1) | ((lane >> 1) & 6));
    } else {
        qr = t / (BN / 8);
        qc = t % (BN / 8);
    }
    const int am = 4 * qr, bn = 4 * qc;   // first row / column of the thread's sub-tiles
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (K + BK - 1) / BK;

    // acc[i][j]: row am + i (i < 4) or BM/2 + am + i - 4, column bn + j (j < 4) or
    // BN/2 + bn + j - 4.
    float acc[8][8] = {};

    fetch_tiles<BM, BN, BK, NT, VEC>(ra, rb, A, B, M, N, K, row0, col0, 0);
    store_tiles<BM, BN, BK, NT, LDA, VEC>(ra, rb, As[0], Bs[0]);
    __syncthreads();

    for (int tile = 0; tile < tiles; ++tile) {
        const int cur = tile & 1;
        const bool more = tile + 1 < tiles;
        if (more)
            fetch_tiles<BM, BN, BK, NT, VEC>(ra, rb, A, B, M, N, K, row0, col0, (tile + 1) * BK);

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][am]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][BM / 2 + am]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][bn]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][BN / 2 + bn]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }

        if (more) store_tiles<BM, BN, BK, NT, LDA, VEC>(ra, rb, As[cur ^ 1], Bs[cur ^ 1]);
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int r = row0 + (i < 4 ? am + i : BM / 2 + am + i - 4);
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < 8; j += 4) {
            const int c = col0 + (j < 4 ? bn : BN / 2 + bn);
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

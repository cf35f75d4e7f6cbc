// Chapter 06: 2D block tiling. Each thread computes a TM x TN patch of outputs.
//
// A block of NT = (BM/TM) * (BN/TN) threads computes a BM x BN tile of C, walking K in
// steps of BK through a BM x BK tile of A and a BK x BN tile of B in shared memory
// (copied as in chapter 05). Thread t sits at (tr, tc) = (t / (BN/TN), t % (BN/TN)) in
// a (BM/TM) x (BN/TN) grid of threads. Three kernels differ only in the inner loop
// and in which outputs a thread owns:
//
// sgemm_tile_2d       inner-product order. For each output (i, j) the thread runs the
//                     dot product over k, reading both operands from shared memory:
//                     2 shared loads per FMA. The k loop is kept rolled (#pragma
//                     unroll 1), as a dot product on its own would be: written with
//                     k outermost and everything unrolled (the "2D-tile" kernel of Li Shaoxia's SGEMM article), ptxas
//                     keeps each loaded value in a register by itself and the SASS is
//                     the same as sgemm_tile_2d_reg's (same LDS.128 count, same FFMA).
// sgemm_tile_2d_reg   outer-product order with register caching (the "2D-tile
//                     register"). For each k: load the TM values of A's column and the
//                     TN values of B's row into registers once, then TM*TN FMAs:
//                     TM + TN values loaded for TM*TN FMAs. In the SASS the loads are
//                     wide: a thread's B row (TN adjacent words) is LDS.128, and its A
//                     values As[r][k..k+3] for 4 consecutive k are one LDS.128 too
//                     (the k loop is unrolled). 8x8, BK = 8: 32 LDS.128 for 512 FFMA.
// sgemm_tile_2d_strided  the same outer product, but the thread's outputs are spread
//                     out: rows tr + i*(BM/TM), columns tc + j*(BN/TN), instead of the
//                     contiguous patch rows tr*TM + i, columns tc*TN + j.
//
// Contiguous vs strided (the course notes' matrixMul_2_2 vs matrixMul_2_1: 128 x 128 x 8
// tiles, 4x4 outputs, 32 x 32 = 1024 threads). A warp is one row of 32 threads (tr
// fixed, tc = 0..31), so the A reads are broadcasts in both kernels, and both read
// As[r][k..k+3] with one LDS.128 (8 per tile). The B reads differ:
//   contiguous:  lane tc reads Bs[k][4*tc + j], j = 0..3. As four 32-bit loads the
//                lanes would be 4 words apart: 4-way bank conflicts. But the four
//                words of one thread are adjacent and 16-byte aligned, so ptxas emits
//                ONE LDS.128 per k: 4 quarter-warp phases of 8 lanes x 4 words = 32
//                banks each, conflict-free, 4 wavefronts for 128 words (the minimum).
//   strided:     lane tc reads Bs[k][tc + 32*j]: each of the 4 loads is 32
//                consecutive words (conflict-free, 1 wavefront), but a thread's four
//                words are 32 apart and cannot be merged: 4 LDS per k.
// Both move the same bytes in the same number of wavefronts; per tile the contiguous
// kernel issues 16 LDS.128 for 128 FFMA, the strided one 8 LDS.128 + 32 LDS. With
// 1024 threads (64 registers each at most) the issue slots that the extra loads and
// their address arithmetic take are not hidden. The global stores of C: strided, each
// store instruction of a warp writes 32 consecutive floats (one 128-byte line);
// contiguous, each writes 32 floats 4 apart (a 512-byte span, a quarter of each
// sector), and the 4 stores j = 0..3 together fill those sectors: the same sectors
// reach L2, in 4x more partial requests (once per tile of C, so it matters little).
// The copies of the tiles into shared memory are identical in both.
//
// With 8x8 outputs per thread (the common 128x128x8 tile, 256 threads, 16 threads per
// row of the thread grid) sgemm_tile_2d_reg is not conflict-free: a warp spans two
// thread rows, and in its B load
// Bs[k][8*tc .. 8*tc+3] lanes tc and tc+4 of a quarter warp hit the same 4 banks:
// 2 wavefronts per quarter, 8 per LDS.128 instead of 4. Chapter 09 removes this. The
// registry's default (8x4 per thread, the fastest of the H200 sweep) has no such conflict.
//
// Ragged shapes: tile elements outside A or B are copied as zeros, and each output is
// stored only if it lies inside C.
#include "common.cuh"

// Copy the BM x BK tile of A at (row0, k0) and the BK x BN tile of B at (k0, col0)
// into shared memory, NT threads at a time in row-major order (coalesced global
// reads, consecutive shared words), zeros outside the matrices.
template <int BM, int BN, int BK, int NT>
__device__ __forceinline__ void load_tiles(float (&As)[BM][BK], float (&Bs)[BK][BN],
                                           const float* __restrict__ A,
                                           const float* __restrict__ B,
                                           int M, int N, int K, int row0, int col0, int k0) {
    const int t = threadIdx.x;
#pragma unroll
    for (int i = 0; i < (BM * BK + NT - 1) / NT; ++i) {
        const int idx = t + i * NT;
        if ((BM * BK) % NT == 0 || idx < BM * BK) {
            const int r = idx / BK, c = idx % BK;
            const int gr = row0 + r, gc = k0 + c;
            As[r][c] = (gr < M && gc < K) ? A[gr * K + gc] : 0.f;
        }
    }
#pragma unroll
    for (int i = 0; i < (BK * BN + NT - 1) / NT; ++i) {
        const int idx = t + i * NT;
        if ((BK * BN) % NT == 0 || idx < BK * BN) {
            const int r = idx / BN, c = idx % BN;
            const int gr = k0 + r, gc = col0 + c;
            Bs[r][c] = (gr < K && gc < N) ? B[gr * N + gc] : 0.f;
        }
    }
}

// Store the TM x TN accumulators; output (i, j) goes to C[row(i)][col(j)].
template <int TM, int TN, int RSTEP, int CSTEP>
__device__ __forceinline__ void store_patch(const float (&acc)[TM][TN], float* __restrict__ C,
                                            int M, int N, int row, int col,
                                            float alpha, float beta) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row + i * RSTEP;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = col + j * CSTEP;
            if (r < M && c < N)
                C[r * N + c] = gemm_epilogue(acc[i][j], alpha, beta, &C[r * N + c]);
        }
    }
}

// ------------------------------------------------------------ inner-product order
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_tile_2d(int M, int N, int K, float alpha,
              const float* __restrict__ A, const float* __restrict__ B,
              float beta, float* __restrict__ C) {
    constexpr int NT = (BM / TM) * (BN / TN);
    __shared__ __align__(16) float As[BM][BK];
    __shared__ __align__(16) float Bs[BK][BN];

    const int tr = threadIdx.x / (BN / TN);
    const int tc = threadIdx.x % (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tiles<BM, BN, BK, NT>(As, Bs, A, B, M, N, K, row0, col0, k0);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                float dot = acc[i][j];
#pragma unroll 1
                for (int k = 0; k < BK; ++k)   // one dot product: 2 loads per FMA
                    dot += As[tr * TM + i][k] * Bs[k][tc * TN + j];
                acc[i][j] = dot;
            }
        __syncthreads();
    }
    store_patch<TM, TN, 1, 1>(acc, C, M, N, row0 + tr * TM, col0 + tc * TN, alpha, beta);
}

// ------------------------------------------------- outer product, register caching
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_tile_2d_reg(int M, int N, int K, float alpha,
                  const float* __restrict__ A, const float* __restrict__ B,
                  float beta, float* __restrict__ C) {
    constexpr int NT = (BM / TM) * (BN / TN);
    __shared__ __align__(16) float As[BM][BK];
    __shared__ __align__(16) float Bs[BK][BN];

    const int tr = threadIdx.x / (BN / TN);
    const int tc = threadIdx.x % (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    float a[TM], b[TN];   // A's column and B's row for one k

    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tiles<BM, BN, BK, NT>(As, Bs, A, B, M, N, K, row0, col0, k0);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[tr * TM + i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    store_patch<TM, TN, 1, 1>(acc, C, M, N, row0 + tr * TM, col0 + tc * TN, alpha, beta);
}

// ------------------------------------- outer product, outputs strided across the tile
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_tile_2d_strided(int M, int N, int K, float alpha,
                      const float* __restrict__ A, const float* __restrict__ B,
                      float beta, float* __restrict__ C) {
    constexpr int NT = (BM / TM) * (BN / TN);
    constexpr int RSTEP = BM / TM, CSTEP = BN / TN;   // distance between a thread's outputs
    __shared__ __align__(16) float As[BM][BK];
    __shared__ __align__(16) float Bs[BK][BN];

    const int tr = threadIdx.x / CSTEP;
    const int tc = threadIdx.x % CSTEP;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    float a[TM], b[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tiles<BM, BN, BK, NT>(As, Bs, A, B, M, N, K, row0, col0, k0);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[tr + i * RSTEP][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tc + j * CSTEP];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    store_patch<TM, TN, RSTEP, CSTEP>(acc, C, M, N, row0 + tr, col0 + tc, alpha, beta);
}

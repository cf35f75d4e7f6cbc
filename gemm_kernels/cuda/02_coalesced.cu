// Chapter 02: global-memory coalescing.
// A one-dimensional block of BLOCK*BLOCK threads. Consecutive thread indices (the
// lanes of one warp) take consecutive columns of C, so a warp's loads of B and its
// stores to C fall in consecutive addresses, and its loads of A are one broadcast.
//
// GRID only changes the order of the blocks, not the coalescing:
//   GRID = 0: blockIdx.x walks the tile columns of C, blockIdx.y the tile rows.
//   GRID = 1: the other way round (blockIdx.x -> tile row). Blocks with consecutive
//             numbers run together; with GRID = 1 they share one column panel of B
//             and read different rows of A, which changes what the L2 cache holds.
// (Unsigned indices, as siboehm's kernel 2 uses, measured 26% slower on the H200: the
// compiler can no longer step the B address with one 64-bit add per k.)
#include "common.cuh"

template <int BLOCK, int GRID>
__global__ void sgemm_coalesced(int M, int N, int K, float alpha,
                                const float* __restrict__ A, const float* __restrict__ B,
                                float beta, float* __restrict__ C) {
    const int tile_row = GRID == 0 ? blockIdx.y : blockIdx.x;
    const int tile_col = GRID == 0 ? blockIdx.x : blockIdx.y;
    const int row = tile_row * BLOCK + threadIdx.x / BLOCK;
    const int col = tile_col * BLOCK + threadIdx.x % BLOCK;
    if (row < M && col < N) {
        float acc = 0.f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);
    }
}

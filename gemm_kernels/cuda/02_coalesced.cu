// Chapter 02: global-memory coalescing.
// A one-dimensional block of BLOCK*BLOCK threads. Consecutive thread indices (the
// lanes of one warp) take consecutive columns of C, so a warp's loads of B and its
// stores to C fall in consecutive addresses, and its loads of A are one broadcast.
//
// Two knobs that leave the coalescing alone (defaults: the chapter's kernel):
//   GRID = 0: blockIdx.x walks the tile columns of C, blockIdx.y the tile rows.
//   GRID = 1: the other way round (blockIdx.x -> tile row). Blocks with consecutive
//             numbers run together; with GRID = 1 they share one column panel of B
//             and read different rows of A, which changes what the L2 cache holds.
//   IDX = 0:  int indices. Signed overflow is undefined, so the compiler may step the
//             B address by N*4 bytes per k with 64-bit arithmetic (IMAD.WIDE chains).
//   IDX = 1:  unsigned indices (wrap-around is defined): each address is one 32-bit
//             index scaled onto the base pointer, independent of the previous one.
#include "common.cuh"

template <int IDX> struct Index { using type = int; };
template <> struct Index<1> { using type = unsigned; };

template <int BLOCK, int GRID, int IDX>
__global__ void sgemm_coalesced(int M, int N, int K, float alpha,
                                const float* __restrict__ A, const float* __restrict__ B,
                                float beta, float* __restrict__ C) {
    using I = typename Index<IDX>::type;
    const I tile_row = GRID == 0 ? blockIdx.y : blockIdx.x;
    const I tile_col = GRID == 0 ? blockIdx.x : blockIdx.y;
    const I row = tile_row * BLOCK + threadIdx.x / BLOCK;
    const I col = tile_col * BLOCK + threadIdx.x % BLOCK;
    if (row < (I)M && col < (I)N) {
        float acc = 0.f;
        for (I k = 0; k < (I)K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);
    }
}

// Chapter 03: shared-memory cache blocking.
//
// A block of BLOCK x BLOCK threads computes one BLOCK x BLOCK tile of C, one element
// per thread, as in chapter 02. The difference is where the operands come from. The
// K dimension is walked in steps of BLOCK; at each step the block copies one
// BLOCK x BLOCK tile of A and one of B from global memory into shared memory (each
// thread copies one element of each), waits, and then every thread runs its partial
// dot product out of shared memory. Each element brought in from global memory is
// now used BLOCK times (by BLOCK threads) instead of once.
//
//   threadIdx.x -> column of C (and of the B tile): a warp's global loads of B and
//                  of A, and its stores to C, are consecutive addresses (coalesced).
//   threadIdx.y -> row of C (and of the A tile).
//
// Shared-memory accesses in the inner loop (32 lanes of one warp):
//   As[ty][k]  every lane of a tile row reads the same word: one broadcast.
//   Bs[k][tx]  consecutive lanes read consecutive words: 32 different banks.
// so the inner loop is free of bank conflicts (chapter 04 shows layouts that are not).
//
// Ragged shapes: the grid is rounded up, so a tile can stick out of A, B or C. A thread
// whose element lies outside the matrix writes a zero into the tile instead of loading
// (zeros add nothing to the dot product), and only threads inside C store. Threads
// outside C must still take part in the loads and in both barriers, so there is no
// early return.
#include "common.cuh"

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK * BLOCK)
sgemm_smem_tiled(int M, int N, int K, float alpha,
                 const float* __restrict__ A, const float* __restrict__ B,
                 float beta, float* __restrict__ C) {
    __shared__ float As[BLOCK][BLOCK];
    __shared__ float Bs[BLOCK][BLOCK];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * BLOCK + ty;
    const int col = blockIdx.x * BLOCK + tx;

    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += BLOCK) {
        // One element of each tile per thread, zero outside the matrices.
        const int ka = k0 + tx;   // column of A this thread copies
        const int kb = k0 + ty;   // row of B this thread copies
        As[ty][tx] = (row < M && ka < K) ? A[row * K + ka] : 0.f;
        Bs[ty][tx] = (kb < K && col < N) ? B[kb * N + col] : 0.f;
        __syncthreads();          // the tiles are complete

#pragma unroll
        for (int k = 0; k < BLOCK; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();          // everyone is done reading before the next copy
    }
    if (row < M && col < N)
        C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);
}

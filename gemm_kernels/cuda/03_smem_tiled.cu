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
// Tuning knobs (defaults: the kernel described above, GRID = 0, CHECKED = true):
//   GRID = 1: blockIdx.x walks the tile rows of C instead of its tile columns, so
//     blocks that run together share a column panel of B (and read different rows
//     of A): another order of reuse in the L2 cache.
//   CHECKED = false: the interior path, chosen by the launcher only when M, N and K
//     are multiples of BLOCK (EDGES="auto"). Every tile then lies wholly inside the
//     matrices, so the loads and the store need no bounds checks, and the operands
//     are walked with two pointers (A one tile right, B one tile down per step)
//     instead of recomputing row * K + k and k * N + col. Any other shape keeps the
//     checked path, so every shape stays correct.
#include "common.cuh"

// The dot products of one BLOCK-wide step, out of shared memory.
template <int BLOCK>
__device__ __forceinline__ float tile_dot(const float (&As)[BLOCK][BLOCK],
                                          const float (&Bs)[BLOCK][BLOCK],
                                          int ty, int tx, float acc) {
#pragma unroll
    for (int k = 0; k < BLOCK; ++k)
        acc += As[ty][k] * Bs[k][tx];
    return acc;
}

template <int BLOCK, int GRID, bool CHECKED>
__global__ void __launch_bounds__(BLOCK * BLOCK)
sgemm_smem_tiled(int M, int N, int K, float alpha,
                 const float* __restrict__ A, const float* __restrict__ B,
                 float beta, float* __restrict__ C) {
    __shared__ float As[BLOCK][BLOCK];
    __shared__ float Bs[BLOCK][BLOCK];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int tile_row = GRID == 0 ? blockIdx.y : blockIdx.x;
    const int tile_col = GRID == 0 ? blockIdx.x : blockIdx.y;
    const int row = tile_row * BLOCK + ty;
    const int col = tile_col * BLOCK + tx;

    float acc = 0.f;
    if (CHECKED) {
        for (int k0 = 0; k0 < K; k0 += BLOCK) {
            // One element of each tile per thread, zero outside the matrices.
            const int ka = k0 + tx;   // column of A this thread copies
            const int kb = k0 + ty;   // row of B this thread copies
            As[ty][tx] = (row < M && ka < K) ? A[row * K + ka] : 0.f;
            Bs[ty][tx] = (kb < K && col < N) ? B[kb * N + col] : 0.f;
            __syncthreads();          // the tiles are complete
            acc = tile_dot<BLOCK>(As, Bs, ty, tx, acc);
            __syncthreads();          // everyone is done reading before the next copy
        }
    } else {
        // Interior path (M, N, K multiples of BLOCK): no checks, pointers that step.
        const float* a = A + row * K + tx;   // A[row][tx], then one tile to the right
        const float* b = B + ty * N + col;   // B[ty][col], then one tile down
        for (int k0 = 0; k0 < K; k0 += BLOCK) {
            As[ty][tx] = *a;
            Bs[ty][tx] = *b;
            __syncthreads();
            acc = tile_dot<BLOCK>(As, Bs, ty, tx, acc);
            __syncthreads();
            a += BLOCK;
            b += BLOCK * N;
        }
    }
    if (!CHECKED || (row < M && col < N))
        C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);
}

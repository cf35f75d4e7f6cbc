// Chapter 04: shared-memory bank conflicts, one kernel with three knobs.
//
// The kernel is chapter 03's: a BLOCK x BLOCK block computes a BLOCK x BLOCK tile of
// C, one element per thread, with threadIdx.x -> column of C. The global loads are
// always the coalesced ones (consecutive lanes read consecutive addresses):
//
//   a = A[row0 + ty][k0 + tx]     the A element (m = ty, k = tx)
//   b = B[k0 + ty][col0 + tx]     the B element (k = ty, n = tx)
//
// and the inner loop always needs A(m = ty, k) and B(k, n = tx). Only the layout of
// the two tiles in shared memory changes, and with it which lanes hit which bank.
//
// LAYOUT 0, "conflict": both tiles keep k contiguous, as a CPU programmer would store
//   the rows of A and the columns of B for a dot product:
//     sA[m][k]  (address m*S + k)        sB[n][k]  (address n*S + k)
// LAYOUT 1, "transposed": both tiles are k-major, so that for one k the lanes of a
//   warp read neighbouring words:
//     sA[k][m]  (address k*S + m)        sB[k][n]  (address k*S + n)
// PAD: S = BLOCK + PAD is the row length of both tiles, in 4-byte words.
//
// Bank model (32 banks of 4 bytes, bank = word address % 32, one 32-bit access per
// lane; a warp access costs as many wavefronts as the most distinct words one bank
// must serve; identical words broadcast). For a warp, with S = BLOCK + PAD:
//
//   access           LAYOUT 0 (conflict)       LAYOUT 1 (transposed)
//   store a          sA[ty][tx]: ty*S + tx     sA[tx][ty]: tx*S + ty   (lanes stride S)
//   store b          sB[tx][ty]: tx*S + ty     sB[ty][tx]: ty*S + tx
//   read A (each k)  sA[ty][k]:  broadcast     sA[k][ty]:  broadcast
//   read B (each k)  sB[tx][k]:  lanes stride S    sB[k][tx]: consecutive
//
// BLOCK = 32 (a warp is one row of threads, tx = 0..31, ty fixed). A stride-S access
// costs gcd(S, 32) wavefronts:
//
//   PAD                       0    1    2    3    4
//   LAYOUT 0  store b, read B  32    1    2    1    4   (store a, read A: 1)
//   LAYOUT 1  store a          32    1    2    1    4   (everything else: 1)
//
// BLOCK = 16 (a warp is two rows of threads: tx = 0..15 for ty and for ty+1).
//   The stride-S access covers 2 x 16 lanes; the "consecutive" accesses cover two rows
//   whose start addresses are S apart, and with PAD > 0 the second row wraps into the
//   banks of the first: padding costs 2 wavefronts where nothing conflicted before.
//
//   PAD                       0    1    2    3    4
//   LAYOUT 0  store a         1    2    2    2    2
//             store b         8    2    1    2    2
//             read A          1    1    1    1    1   (two words, banks S apart)
//             read B          8    1    1    1    2   (second half-warp: same words)
//   LAYOUT 1  store a         8    2    1    2    2
//             store b         1    2    2    2    2
//             read A, read B  1    1    1    1    1
//
// So with BLOCK = 32: LAYOUT 0 conflicts 32-way in the inner loop (read B, 32 times
// per tile) and in one store; LAYOUT 1 fixes every read but leaves the store of a
// 32-way conflicted (once per tile); an odd PAD then removes the store conflict too.
// This is the sequence of the chapter: (conflict, 0) -> (transposed, 0) ->
// (transposed, 1).
//
// What the compiler emits changes the picture. In LAYOUT 0 each thread reads
// sA[ty][k], sA[ty][k+1], ... and sB[tx][k], sB[tx][k+1], ...: consecutive words of
// one thread, which ptxas merges into one wide load when the row start (S*4 bytes)
// is aligned: LDS.128 for PAD = 0 and 4, LDS.64 for PAD = 2, plain LDS for PAD odd.
// LAYOUT 1 always uses plain LDS (a thread's words for k and k+1 are S apart); the
// stores are always plain STS. A 64-bit access is served in two half-warp phases and
// a 128-bit one in four quarter-warp phases (the two quarters of one half merge when
// lane i and lane i^1, or i and i^2, read the same address, as for a broadcast).
// Wavefronts per warp for one BLOCK-wide tile step (sum over the loads of the inner
// loop; one store of each tile), as the SASS of sm_90 has them:
//
//   BLOCK = 32                  PAD=0     1     2     3     4
//   LAYOUT 0  LDS width           128    32    64    32   128
//             read A               16    32    16    32    16
//             read B              256    32    32    32    32
//             store a / store b  1/32   1/1   1/2   1/1   1/4
//   LAYOUT 1  read A, read B       32    32    32    32    32
//             store a / store b  32/1   1/1   2/1   1/1   4/1
//
//   BLOCK = 16                  PAD=0     1     2     3     4
//   LAYOUT 0  LDS width           128    32    64    32   128
//             read A                8    16     8    16     8
//             read B               64    16    16    16    16
//             store a / store b   1/8   2/2   2/1   2/2   2/2
//   LAYOUT 1  read A, read B       16    16    16    16    16
//             store a / store b   8/1   2/2   1/2   2/2   2/2
//
// A conflict-free 32-bit load costs 1 wavefront; a conflict-free LDS.128 costs 4 (or
// 2 when it is a broadcast), but brings 4 words per lane. So LAYOUT 0 with PAD = 0 is
// 8x too slow in its B reads (32-way conflicted quarter phases), while LAYOUT 0 with
// PAD = 2 or 4 is conflict-free and issues fewer load instructions than LAYOUT 1.
// Check compiler.sass of the configuration before comparing with the profiler.
//
// Ragged shapes as in chapter 03: zeros are copied for elements outside A or B, and
// only threads inside C store.
#include "common.cuh"

template <int BLOCK, int LAYOUT, int PAD>
__global__ void __launch_bounds__(BLOCK * BLOCK)
sgemm_smem_layout(int M, int N, int K, float alpha,
                  const float* __restrict__ A, const float* __restrict__ B,
                  float beta, float* __restrict__ C) {
    constexpr int S = BLOCK + PAD;              // row length of both tiles, in words
    __shared__ float sA[BLOCK * S];
    __shared__ float sB[BLOCK * S];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * BLOCK + ty;
    const int col = blockIdx.x * BLOCK + tx;

    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += BLOCK) {
        const int ka = k0 + tx;
        const int kb = k0 + ty;
        const float a = (row < M && ka < K) ? A[row * K + ka] : 0.f;   // (m=ty, k=tx)
        const float b = (kb < K && col < N) ? B[kb * N + col] : 0.f;   // (k=ty, n=tx)
        if (LAYOUT == 0) {
            sA[ty * S + tx] = a;    // sA[m][k]
            sB[tx * S + ty] = b;    // sB[n][k]
        } else {
            sA[tx * S + ty] = a;    // sA[k][m]
            sB[ty * S + tx] = b;    // sB[k][n]
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BLOCK; ++k) {
            if (LAYOUT == 0)
                acc += sA[ty * S + k] * sB[tx * S + k];
            else
                acc += sA[k * S + ty] * sB[k * S + tx];
        }
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);
}

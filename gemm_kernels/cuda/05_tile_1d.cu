// Chapter 05: 1D block tiling. Each thread computes TM outputs of one column of C.
//
// A block of NT = BM*BN/TM threads computes a BM x BN tile of C. K is walked in steps
// of BK: the block copies a BM x BK tile of A and a BK x BN tile of B into shared
// memory, then each thread accumulates TM results:
//
//   thread t:  column tc = t % BN of the tile,  rows tr*TM .. tr*TM + TM-1, tr = t / BN
//
//   for k in 0..BK-1:
//       b = Bs[k][tc]                         one shared load, kept in a register ...
//       for i in 0..TM-1:
//           acc[i] += As[tr*TM + i][k] * b    ... and reused TM times
//
// Chapter 03's source reads two shared values per FMA. Here a step of k costs 1 load of B and
// TM loads of A for TM FMAs, and the loads of A walk along k inside one thread, so the
// compiler merges them into wide loads (LDS.64/LDS.128, see the SASS). In a warp the
// 32 lanes have consecutive tc and (when BN >= 32) the same tr: the B read is 32
// consecutive words and the A read is a broadcast, both free of bank conflicts.
//
// Copying the tiles: the NT threads walk the BM*BK elements of the A tile (and the
// BK*BN elements of the B tile) in row-major order, NT at a time, so consecutive lanes
// copy consecutive elements of a row of A or B (coalesced global loads, conflict-free
// shared stores). The trip count is a compile-time constant; the guard `idx < size`
// is only compiled in when NT does not divide the tile, so any BM, BN, BK, TM
// combination works. Elements outside A or B are written as zeros (ragged M, N, K),
// and only outputs inside C are stored.
#include "common.cuh"

template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__(BM * BN / TM)
sgemm_tile_1d(int M, int N, int K, float alpha,
              const float* __restrict__ A, const float* __restrict__ B,
              float beta, float* __restrict__ C) {
    constexpr int NT = BM * BN / TM;                   // threads per block
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];

    const int t = threadIdx.x;
    const int tc = t % BN;                             // column inside the tile
    const int tr = t / BN;                             // group of TM rows
    const int row0 = blockIdx.y * BM;                  // first row of the C tile
    const int col0 = blockIdx.x * BN;                  // first column of the C tile

    float acc[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) acc[i] = 0.f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Copy the A tile (BM x BK) and the B tile (BK x BN), zeros outside.
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
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][tc];
#pragma unroll
            for (int i = 0; i < TM; ++i)
                acc[i] += As[tr * TM + i][k] * b;
        }
        __syncthreads();
    }

    const int col = col0 + tc;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + tr * TM + i;
        if (row < M && col < N)
            C[row * N + col] = gemm_epilogue(acc[i], alpha, beta, &C[row * N + col]);
    }
}

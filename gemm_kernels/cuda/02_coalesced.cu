// Chapter 02: global-memory coalescing.
// A one-dimensional block of BLOCK*BLOCK threads. Consecutive thread indices (the
// lanes of one warp) take consecutive columns of C, so a warp's loads of B and its
// stores to C fall in consecutive addresses, and its loads of A are one broadcast.
#include "common.cuh"

template <int BLOCK>
__global__ void sgemm_coalesced(int M, int N, int K, float alpha,
                                const float* __restrict__ A, const float* __restrict__ B,
                                float beta, float* __restrict__ C) {
    const int row = blockIdx.y * BLOCK + threadIdx.x / BLOCK;
    const int col = blockIdx.x * BLOCK + threadIdx.x % BLOCK;
    if (row < M && col < N) {
        float acc = 0.f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);
    }
}

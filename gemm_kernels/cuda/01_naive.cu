// Chapter 01: the naive kernel. One thread computes one element C[row][col].
//
// X_TO_COL picks how the thread index maps onto C:
//   0: threadIdx.x runs down a column (row = x). The 32 lanes of a warp read
//      A[row*K + k] from 32 different rows: 32 separate sectors per load.
//   1: threadIdx.x runs along a row (col = x). The lanes read one A element
//      (a broadcast) and 32 consecutive B elements: 4 sectors per load.
#include "common.cuh"

template <int BLOCK, int X_TO_COL>
__global__ void sgemm_naive(int M, int N, int K, float alpha,
                            const float* __restrict__ A, const float* __restrict__ B,
                            float beta, float* __restrict__ C) {
    const int x = blockIdx.x * BLOCK + threadIdx.x;
    const int y = blockIdx.y * BLOCK + threadIdx.y;
    const int row = X_TO_COL ? y : x;
    const int col = X_TO_COL ? x : y;
    if (row < M && col < N) {   // the grid is rounded up: edge threads do nothing
        float acc = 0.f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);
    }
}

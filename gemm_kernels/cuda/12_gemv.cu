// Chapter 12: the memory-bound end of GEMM. When M == 1 or N == 1, C = alpha*A@B + beta*C
// is a matrix-vector product: each element of the matrix operand is used once, so the
// time is the time to read it (2 FLOPs per 4 bytes read: far left of the ridge of any
// GPU's roofline). Tiles, shared memory and register blocking buy nothing; what counts
// is reading the matrix at full bandwidth: wide loads, contiguous per warp, and enough
// of them in flight on every SM (split-K adds blocks when the product alone has few).
//
// ROWS (N == 1, C = A x): one warp per row of A, whose 32 lanes read the row in float4s
// (VEC: K % 4 == 0, so every row starts 16-byte aligned) and sum their partial dot
// products with warp shuffles. A warp reads 512 contiguous bytes per step.
// COLS (M == 1, C = x B): a block owns 32 * W consecutive columns (W = 4 floats per lane
// on the VEC path, N % 4 == 0); its 8 warps take every 8th row of its slice of K, each
// lane keeps W running sums, and the 8 warps' sums are added in shared memory. A warp
// reads 512 (128) contiguous bytes of one row of B per step.
//
// Split-K (split_k.cuh): blockIdx.z is a slice of K (of whole 128-element chunks for
// ROWS, which keeps the float4 alignment, and of whole groups of 8 rows for COLS).
#include "common.cuh"
#include "split_k.cuh"

constexpr int GEMV_THREADS = 256;
constexpr int GEMV_WARPS = GEMV_THREADS / 32;

template <bool COLS, bool VEC>
__global__ void __launch_bounds__(GEMV_THREADS)
sgemv(int M, int N, int K, float alpha, const float* __restrict__ A,
      const float* __restrict__ B, float beta, float* __restrict__ C) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int k_begin, KS;
    C += static_cast<size_t>(blockIdx.z) * M * N;
    if constexpr (!COLS) {
        split_k_range<128>(K, &k_begin, &KS);
        const int row = blockIdx.x * GEMV_WARPS + warp;
        if (row >= M) return;                  // the whole warp leaves together
        const float* a = A + static_cast<size_t>(row) * K + k_begin;
        const float* x = B + k_begin;
        float sum = 0.f;
        if constexpr (VEC) {
#pragma unroll 4
            for (int k = 4 * lane; k < KS; k += 128) {
                const float4 u = *reinterpret_cast<const float4*>(a + k);
                const float4 v = *reinterpret_cast<const float4*>(x + k);
                sum = fmaf(u.x, v.x, fmaf(u.y, v.y, fmaf(u.z, v.z, fmaf(u.w, v.w, sum))));
            }
        } else {
#pragma unroll 4
            for (int k = lane; k < KS; k += 32) sum = fmaf(a[k], x[k], sum);
        }
#pragma unroll
        for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, d);
        if (lane == 0) C[row] = gemm_epilogue(sum, alpha, beta, C + row);
    } else {
        constexpr int W = VEC ? 4 : 1;
        __shared__ float part[GEMV_WARPS][32 * W];
        split_k_range<GEMV_WARPS>(K, &k_begin, &KS);
        const int c = blockIdx.x * 32 * W + W * lane;      // this lane's first column
        const float* x = A + k_begin;
        const float* b = B + static_cast<size_t>(k_begin) * N + c;
        float acc[W] = {};
        if (c < N) {       // VEC: N % 4 == 0, so a float4 is wholly inside or outside
#pragma unroll 4
            for (int k = warp; k < KS; k += GEMV_WARPS) {
                const float xk = x[k];
                if constexpr (VEC) {
                    const float4 v = *reinterpret_cast<const float4*>(b + static_cast<size_t>(k) * N);
                    acc[0] = fmaf(xk, v.x, acc[0]); acc[1] = fmaf(xk, v.y, acc[1]);
                    acc[2] = fmaf(xk, v.z, acc[2]); acc[3] = fmaf(xk, v.w, acc[3]);
                } else {
                    acc[0] = fmaf(xk, b[static_cast<size_t>(k) * N], acc[0]);
                }
            }
        }
#pragma unroll
        for (int w = 0; w < W; ++w) part[warp][W * lane + w] = acc[w];
        __syncthreads();
        // the first 32 * W threads add the 8 warps' sums of one column each
        if (threadIdx.x < 32 * W) {
            const int col = blockIdx.x * 32 * W + threadIdx.x;
            float s = part[0][threadIdx.x];
#pragma unroll
            for (int w = 1; w < GEMV_WARPS; ++w) s += part[w][threadIdx.x];
            if (col < N) C[col] = gemm_epilogue(s, alpha, beta, C + col);
        }
    }
}

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
// COLS (M == 1, C = x B): a block owns 32 * V consecutive columns (V = 4 floats per lane
// on the VEC path, N % 4 == 0); its WARPS warps take every WARPS-th row of its slice of
// K, each lane keeps V running sums, and the warps' sums are added in shared memory. A
// warp reads 512 (128) contiguous bytes of one row of B per step.
// WARPS (8 or 32) is the block's size in warps: a block of COLS owns few columns, so
// more warps per block put more rows of B in flight at once, with fewer slices of K.
// STREAM (COLS): B is read with streaming loads (__ldcs, ld.global.cs: "cache streaming",
// lines allocated evict-first), the hint for data read once; chapter 12 times and
// profiles the two kinds of load side by side.
//
// Split-K (split_k.cuh): blockIdx.z is a slice of K (of whole 128-element chunks for
// ROWS, which keeps the float4 alignment, and of whole groups of WARPS rows for COLS). With
// more than one slice a block writes its partial sums (alpha = 1, beta = 0) into plane z
// of the workspace W, and the last block of each output range adds the planes into C
// (split_k_finish): one launch, where a second kernel would add several microseconds to
// a product that takes a few tens.
#include "common.cuh"
#include "split_k.cuh"

template <bool COLS, bool VEC, int WARPS, bool STREAM>
__global__ void __launch_bounds__(WARPS * 32)
sgemv(int M, int N, int K, float alpha, const float* __restrict__ A,
      const float* __restrict__ B, float beta, float* __restrict__ C,
      float* __restrict__ W, unsigned* __restrict__ arrived) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int k_begin, KS;
    // a slice's partial sums go to its plane of W; without a split, C = alpha*A@B + beta*C
    const bool split = gridDim.z > 1;
    const size_t plane = static_cast<size_t>(M) * N;
    float* out = split ? W + blockIdx.z * plane : C;
    const float a_out = split ? 1.f : alpha, b_out = split ? 0.f : beta;
    int first, count;                          // the outputs this block computes
    if constexpr (!COLS) {
        split_k_range<128>(K, &k_begin, &KS);
        first = blockIdx.x * WARPS;
        count = min(WARPS, M - first);
        const int row = first + warp;
        // rows are whole warps: a warp past M computes nothing, but stays for the
        // barriers of split_k_finish
        if (row < M) {
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
            if (lane == 0) out[row] = gemm_epilogue(sum, a_out, b_out, out + row);
        }
    } else {
        constexpr int V = VEC ? 4 : 1;
        __shared__ float part[WARPS][32 * V];
        split_k_range<WARPS>(K, &k_begin, &KS);
        first = blockIdx.x * 32 * V;
        count = min(32 * V, N - first);
        const int c = first + V * lane;                    // this lane's first column
        const float* x = A + k_begin;
        const float* b = B + static_cast<size_t>(k_begin) * N + c;
        float acc[V] = {};
        if (c < N) {       // VEC: N % 4 == 0, so a float4 is wholly inside or outside
#pragma unroll 4
            for (int k = warp; k < KS; k += WARPS) {
                const float xk = x[k];
                if constexpr (VEC) {
                    const float4* row = reinterpret_cast<const float4*>(b + static_cast<size_t>(k) * N);
                    const float4 v = STREAM ? __ldcs(row) : *row;
                    acc[0] = fmaf(xk, v.x, acc[0]); acc[1] = fmaf(xk, v.y, acc[1]);
                    acc[2] = fmaf(xk, v.z, acc[2]); acc[3] = fmaf(xk, v.w, acc[3]);
                } else {
                    const float* row = b + static_cast<size_t>(k) * N;
                    acc[0] = fmaf(xk, STREAM ? __ldcs(row) : *row, acc[0]);
                }
            }
        }
#pragma unroll
        for (int w = 0; w < V; ++w) part[warp][V * lane + w] = acc[w];
        __syncthreads();
        // one thread per column (fewer at the matrix's edge) adds the warps' sums
        if (threadIdx.x < count) {
            const int col = first + threadIdx.x;
            float s = part[0][threadIdx.x];
#pragma unroll
            for (int w = 1; w < WARPS; ++w) s += part[w][threadIdx.x];
            out[col] = gemm_epilogue(s, a_out, b_out, out + col);
        }
    }
    if (split) split_k_finish(plane, first, count, W, alpha, beta, C, arrived + blockIdx.x);
}

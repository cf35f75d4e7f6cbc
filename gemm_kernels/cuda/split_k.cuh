// Split-K (chapter 12): the K dimension of one GEMM is cut into S slices, one per
// blockIdx.z, so that a shape with few tiles of C still gives every SM work. Each slice
// writes its partial product alpha = 1, beta = 0 into its own M x N plane of a workspace
// W[S][M][N]; split_k_reduce then forms C = alpha * (W[0] + ... + W[S-1]) + beta * C.
//
// Deterministic: the slices are summed in the same order, z = 0, 1, ..., S-1, on every
// run, so the same inputs give bit-identical results. (Adding the partial sums into C
// with atomicAdd avoids the workspace and the second kernel, but the order in which the
// additions land changes from run to run, and with it the rounding.)
//
// A kernel can also finish the sum itself, in the same launch (split_k_finish): the
// last of the S blocks of an output range to arrive adds the S planes of that range.
// The gemv does so: its whole launch takes a few tens of microseconds, of which the
// second kernel's start and its read of the planes would be several.
#pragma once
#include "common.cuh"

// The k range [*begin, *begin + *len) of slice blockIdx.z, out of gridDim.z slices of
// whole BK tiles. The launcher chooses gridDim.z so that no slice is empty:
// z = ceil(tiles / ceil(tiles / S)) for a requested S, where tiles = ceil(K / BK).
template <int BK>
__device__ __forceinline__ void split_k_range(int K, int* begin, int* len) {
    const int tiles = (K + BK - 1) / BK;
    const int per = (tiles + gridDim.z - 1) / gridDim.z;
    *begin = min(K, static_cast<int>(blockIdx.z) * per * BK);
    *len = min(K, *begin + per * BK) - *begin;
}

// C = alpha * sum_z W[z] + beta * C over the M*N elements (VEC: four at a time, when
// M*N % 4 == 0; C and W then start 16-byte aligned). Each thread walks the elements in
// steps of the whole grid, so any grid size covers any matrix.
template <typename T, bool VEC>
__global__ void split_k_reduce(int M, int N, int S, T alpha, const T* __restrict__ W,
                               T beta, T* __restrict__ C) {
    static_assert(!VEC || sizeof(T) == 4, "the vector path reads float4");
    const size_t plane = static_cast<size_t>(M) * N;
    const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
    if constexpr (VEC) {
        for (size_t i = (blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x) * 4;
             i < plane; i += 4 * step) {
            float4 s = *reinterpret_cast<const float4*>(W + i);
            for (int z = 1; z < S; ++z) {
                const float4 w = *reinterpret_cast<const float4*>(W + z * plane + i);
                s.x += w.x; s.y += w.y; s.z += w.z; s.w += w.w;
            }
            float4 out = make_float4(alpha * s.x, alpha * s.y, alpha * s.z, alpha * s.w);
            if (beta != T(0)) {   // BLAS: C is not read when beta == 0
                const float4 c = *reinterpret_cast<const float4*>(C + i);
                out.x += beta * c.x; out.y += beta * c.y; out.z += beta * c.z; out.w += beta * c.w;
            }
            *reinterpret_cast<float4*>(C + i) = out;
        }
    } else {
        for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
             i < plane; i += step) {
            T s = W[i];
            for (int z = 1; z < S; ++z) s += W[z * plane + i];
            C[i] = gemm_epilogue(s, alpha, beta, C + i);
        }
    }
}

// The one-launch ending (chapter 12's gemv): called by every thread of a block once its
// partial sums of outputs [first, first + count) are stored in plane blockIdx.z of the
// workspace W (planes of `plane` elements). *arrived counts the blocks of this output
// range that are done; the one that finds gridDim.z - 1 blocks before it is the last,
// and forms C = alpha * (W[0] + ... + W[S-1]) + beta * C for the range, in plane order,
// so the result does not depend on which block came last. It then sets the count back
// to 0 for the next launch. The fence before the count makes this block's planes
// visible to whichever block reads them; the last block reads them through L2 (__ldcg),
// not from its own L1, which may hold nothing of them but must not hold stale lines.
template <typename T>
__device__ void split_k_finish(size_t plane, int first, int count, const T* W, T alpha,
                               T beta, T* C, unsigned* arrived) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(arrived, 1u) == gridDim.z - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
        T s = __ldcg(W + first + i);
        for (unsigned z = 1; z < gridDim.z; ++z) s += __ldcg(W + z * plane + first + i);
        C[first + i] = gemm_epilogue(s, alpha, beta, C + first + i);
    }
    if (threadIdx.x == 0) *arrived = 0;
}

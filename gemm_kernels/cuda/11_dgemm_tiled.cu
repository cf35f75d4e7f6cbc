// Chapter 11: 64-bit shared memory.
//
// dgemm_tiled: the shared-memory tiled multiply of chapter 03 in double precision.
// A block of BLOCK x BLOCK threads computes a BLOCK x BLOCK tile of C. For each step
// along K it stages a BLOCK x BLOCK tile of A and of B in shared memory, then every
// thread reads one row of the A tile and one column of the B tile:
//
//     A_shared[threadIdx.y][k]  the same 8-byte word for a whole row of threads
//     B_shared[k][threadIdx.x]  consecutive 8-byte words along threadIdx.x
//
// An 8-byte shared load (LDS.64) is served in two half-warp phases of 16 lanes x
// 8 bytes = 128 bytes, the width of the 32 banks. With BLOCK = 16 a half-warp is one
// row of threads. Its B read takes 16 consecutive words (all 32 banks once): no
// conflict. Its A read, as written, is one double per half-warp; the two half-warps'
// doubles (rows ty and ty + 1) lie 128 bytes apart, in the same bank, and since every
// lane agrees with its neighbour the two phases merge into one that must deliver two
// words of one bank: a 2-way conflict. ptxas does not emit it that way: it fuses the
// reads of k and k + 1 into one LDS.128, whose two phases each read one address (the
// chapter prices both).
#include "common.cuh"

template <int BLOCK>
__global__ void dgemm_tiled(int M, int N, int K, double alpha,
                            const double* __restrict__ A, const double* __restrict__ B,
                            double beta, double* __restrict__ C) {
    __shared__ double A_shared[BLOCK][BLOCK];
    __shared__ double B_shared[BLOCK][BLOCK];

    const int row = blockIdx.y * blockDim.y + threadIdx.y;   // row of C and of A
    const int col = blockIdx.x * blockDim.x + threadIdx.x;   // column of C and of B
    double acc = 0.0;

    for (int tile = 0; tile * BLOCK < K; ++tile) {
        const int j = tile * BLOCK + threadIdx.x;   // the column of A this thread stages
        const int i = tile * BLOCK + threadIdx.y;   // the row of B this thread stages
        // Outside the matrices stage zeros, which add nothing to the dot product.
        A_shared[threadIdx.y][threadIdx.x] = (row < M && j < K) ? A[row * K + j] : 0.0;
        B_shared[threadIdx.y][threadIdx.x] = (i < K && col < N) ? B[i * N + col] : 0.0;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BLOCK; ++k)
            acc += A_shared[threadIdx.y][k] * B_shared[k][threadIdx.x];
        __syncthreads();   // the next tile must not overwrite words still being read
    }
    if (row < M && col < N)
        C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);
}

// sgemm_tiled_vec: where the 64- and 128-bit phase rules show up in float.
// The same tiling, but each thread computes VEC neighbouring elements of one row of C,
// so the B tile is BLOCK x (BLOCK * VEC) and the inner loop reads the VEC B values a
// thread needs with one VEC-wide shared load (VEC = 2: LDS.64, VEC = 4: LDS.128):
//
//     b = B_shared[k][VEC*threadIdx.x .. VEC*threadIdx.x + VEC - 1]
//
// 64-bit: two half-warp phases of 16 lanes x 8 bytes; 128-bit: four quarter-warp
// phases of 8 lanes x 16 bytes. Each phase here reads 128 consecutive bytes, so no
// phase has a conflict; the phases do not merge (neighbouring lanes read different
// addresses), so a warp's B load costs 2 (VEC = 2) or 4 (VEC = 4) wavefronts.
// Global loads and stores stay scalar and bounds-checked: any M, N, K works.
template <int VEC> struct FloatVec;
template <> struct FloatVec<1> { using type = float; };
template <> struct FloatVec<2> { using type = float2; };
template <> struct FloatVec<4> { using type = float4; };

template <int VEC>
__device__ __forceinline__ float lane(const typename FloatVec<VEC>::type& v, int j);
template <> __device__ __forceinline__ float lane<1>(const float& v, int) { return v; }
template <> __device__ __forceinline__ float lane<2>(const float2& v, int j) {
    return j == 0 ? v.x : v.y;
}
template <> __device__ __forceinline__ float lane<4>(const float4& v, int j) {
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

template <int BLOCK, int VEC>
__global__ void sgemm_tiled_vec(int M, int N, int K, float alpha,
                                const float* __restrict__ A, const float* __restrict__ B,
                                float beta, float* __restrict__ C) {
    using V = typename FloatVec<VEC>::type;
    constexpr int WIDTH = BLOCK * VEC;                      // columns of C per block
    __shared__ float A_shared[BLOCK][BLOCK];
    __shared__ __align__(16) float B_shared[BLOCK][WIDTH];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * BLOCK + ty;
    const int col0 = blockIdx.x * WIDTH;                    // first column of the block
    float acc[VEC] = {};

    for (int k0 = 0; k0 < K; k0 += BLOCK) {
        A_shared[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.f;
        // Stage a BLOCK x WIDTH tile of B: VEC scalar loads per thread, consecutive
        // threads on consecutive columns (coalesced).
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            const int c = tx + j * BLOCK;
            B_shared[ty][c] = (k0 + ty < K && col0 + c < N) ? B[(k0 + ty) * N + col0 + c] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BLOCK; ++k) {
            const float a = A_shared[ty][k];
            const V b = reinterpret_cast<const V*>(&B_shared[k][0])[tx];
#pragma unroll
            for (int j = 0; j < VEC; ++j) acc[j] += a * lane<VEC>(b, j);
        }
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
        const int c = col0 + tx * VEC + j;
        if (row < M && c < N) C[row * N + c] = gemm_epilogue(acc[j], alpha, beta, &C[row * N + c]);
    }
}

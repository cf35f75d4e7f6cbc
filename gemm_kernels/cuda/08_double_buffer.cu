// Chapter 08: double buffering (two shared-memory stages, the next tile prefetched into
// registers).
//
// Chapter 07 runs, for every BK-deep step along K:
//     copy tile k (global -> registers -> shared); __syncthreads();
//     compute on tile k;                           __syncthreads();
// The second barrier exists only because the next copy overwrites the buffer that
// slower threads may still be reading (write after read). And while a warp waits for
// its global loads (hundreds of cycles), it has nothing else to do; only the other
// resident warps can hide that wait.
//
// Here the shared tiles exist twice, As[2][BK][BM] and Bs[2][BK][BN]:
//     prologue:   fetch tile 0 into registers, store it to stage 0, __syncthreads()
//     step t:     issue the global loads of tile t+1 into registers    (LDG, no wait)
//                 compute on stage t&1                                 (the loads fly)
//                 store the registers to stage (t+1)&1                 (first use of them)
//                 __syncthreads()                                      (the only barrier)
// The global loads of tile t+1 are in flight while tile t is computed: each warp hides
// its own load latency behind BK*TM*TN FFMAs. One barrier per step suffices: the store
// of step t writes stage (t+1)&1, last read during step t-1, and every thread passed the
// barrier at the end of step t-1 after finishing that read. The store cannot race with
// the reads of stage t&1 either: it writes the other stage.
//
// The cost: staging registers for the prefetched tile (BM*BK/NT + BK*BN/NT floats per
// thread, 8 for the default) and twice the shared memory (16 KiB for 128x128x8). When
// does it not help? When enough warps are resident to hide the loads anyway (chapter
// 07 at 2 blocks/SM already overlaps one block's copy with the other's compute), and
// when the extra registers cost a resident block; the measurement decides.
//
// Everything else is chapter 07: the same tile copies (float4 on the VEC path, scalar
// otherwise, zeros outside A and B), the same k-major As tile with its 2-way store
// conflict, the same thread layout and bank behaviour of the LDS.128 reads (see
// 07_float4.cu), the same stores of C.
#include "common.cuh"
#include "vec4.cuh"

// Global -> registers: this thread's share of the A tile at (row0, k0) and the B tile at
// (k0, col0), zeros outside the matrices. On the VEC path ra/rb hold float4s back to back.
template <int BM, int BN, int BK, int NT, bool VEC>
__device__ __forceinline__ void fetch_tiles(float (&ra)[BM * BK / NT], float (&rb)[BK * BN / NT],
                                            const float* __restrict__ A,
                                            const float* __restrict__ B,
                                            int M, int N, int K, int row0, int col0, int k0) {
    const int t = threadIdx.x;
    if constexpr (VEC) {
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / NT; ++i) {
            const int f = t + i * NT;
            const int m = f / (BK / 4), k = f % (BK / 4) * 4;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (row0 + m < M && k0 + k < K) v = load_float4(A + (row0 + m) * K + k0 + k);
            ra[4 * i] = v.x; ra[4 * i + 1] = v.y; ra[4 * i + 2] = v.z; ra[4 * i + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / NT; ++i) {
            const int f = t + i * NT;
            const int k = f / (BN / 4), n = f % (BN / 4) * 4;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (k0 + k < K && col0 + n < N) v = load_float4(B + (k0 + k) * N + col0 + n);
            rb[4 * i] = v.x; rb[4 * i + 1] = v.y; rb[4 * i + 2] = v.z; rb[4 * i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < BM * BK / NT; ++i) {
            const int e = t + i * NT;
            const int m = e / BK, k = e % BK;
            ra[i] = (row0 + m < M && k0 + k < K) ? A[(row0 + m) * K + k0 + k] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < BK * BN / NT; ++i) {
            const int e = t + i * NT;
            const int k = e / BN, n = e % BN;
            rb[i] = (k0 + k < K && col0 + n < N) ? B[(k0 + k) * N + col0 + n] : 0.f;
        }
    }
}

// Registers -> one shared stage: A transposed (4 x STS.32 per float4), B as is (STS.128).
template <int BM, int BN, int BK, int NT, bool VEC>
__device__ __forceinline__ void store_tiles(const float (&ra)[BM * BK / NT],
                                            const float (&rb)[BK * BN / NT],
                                            float (&As)[BK][BM], float (&Bs)[BK][BN]) {
    const int t = threadIdx.x;
    if constexpr (VEC) {
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / NT; ++i) {
            const int f = t + i * NT;
            const int m = f / (BK / 4), k = f % (BK / 4) * 4;
#pragma unroll
            for (int j = 0; j < 4; ++j) As[k + j][m] = ra[4 * i + j];
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / NT; ++i) {
            const int f = t + i * NT;
            const int k = f / (BN / 4), n = f % (BN / 4) * 4;
            *reinterpret_cast<float4*>(&Bs[k][n]) =
                make_float4(rb[4 * i], rb[4 * i + 1], rb[4 * i + 2], rb[4 * i + 3]);
        }
    } else {
#pragma unroll
        for (int i = 0; i < BM * BK / NT; ++i) {
            const int e = t + i * NT;
            As[e % BK][e / BK] = ra[i];
        }
#pragma unroll
        for (int i = 0; i < BK * BN / NT; ++i) {
            const int e = t + i * NT;
            Bs[e / BN][e % BN] = rb[i];
        }
    }
}

template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_double_buffer(int M, int N, int K, float alpha, const float* __restrict__ A,
                    const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int NT = (BM / TM) * (BN / TN);
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 granularity");
    static_assert((BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0,
                  "every thread copies the same number of float4s");

    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];
    float ra[BM * BK / NT], rb[BK * BN / NT];   // the prefetched next tile

    const int t = threadIdx.x;
    const int tr = t / (BN / TN), tc = t % (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (K + BK - 1) / BK;

    float acc[TM][TN] = {};

    fetch_tiles<BM, BN, BK, NT, VEC>(ra, rb, A, B, M, N, K, row0, col0, 0);
    store_tiles<BM, BN, BK, NT, VEC>(ra, rb, As[0], Bs[0]);
    __syncthreads();

    for (int tile = 0; tile < tiles; ++tile) {
        const int cur = tile & 1;
        const bool more = tile + 1 < tiles;
        if (more)   // issue the loads of the next tile now; they land while we compute
            fetch_tiles<BM, BN, BK, NT, VEC>(ra, rb, A, B, M, N, K, row0, col0, (tile + 1) * BK);

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&As[cur][k][tr * TM + i]);
                a[i] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[cur][k][tc * TN + j]);
                b[j] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }

        if (more) store_tiles<BM, BN, BK, NT, VEC>(ra, rb, As[cur ^ 1], Bs[cur ^ 1]);
        __syncthreads();   // the next stage is complete, and nobody reads this one any more
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + tr * TM + i;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int c = col0 + tc * TN + j;
            float* out = C + r * N + c;
            if constexpr (VEC) {
                if (c < N)
                    gemm_epilogue4(make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2],
                                               acc[i][j + 3]), alpha, beta, out);
            } else {
#pragma unroll
                for (int jj = 0; jj < 4; ++jj)
                    if (c + jj < N) out[jj] = gemm_epilogue(acc[i][j + jj], alpha, beta, out + jj);
            }
        }
    }
}

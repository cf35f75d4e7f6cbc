// Chapter 14's kernel, everything but the swizzle: the copies, ldmatrix, mma.sync and the
// kernel hgemm_mma (14_mma.cu explains them). The file that includes this one defines
// chunk_at<CHUNKS, SWIZZLE>(r, c) first: where chunk c of row r of a shared tile whose
// rows are CHUNKS 16-byte chunks long is stored. The kernel below relies on two of its
// properties: it is a permutation of each row's chunks (no two chunks share a place), and
// rows 8 apart are permuted alike (the addresses are worked out once for rows 0-7 and
// reused 8, 16, ... rows further on).
#pragma once
#include <cuda_fp16.h>
#include "common.cuh"


// ------------------------------------------------------------------ the copies
// The address of a shared-memory element as the shared-memory instructions take it (32
// bits, in bytes from the start of the block's shared memory).
__device__ __forceinline__ unsigned shared_address(const half* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared address `dst`; zeros where `valid` is false (src is then
// not read). sm_80 and newer: cp.async, which does not wait for the data.
__device__ __forceinline__ void copy_16(unsigned dst, const half* src, bool valid) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(valid ? 16 : 0));
#else
    const uint4 v = valid ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
#endif
}

__device__ __forceinline__ void copy_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Wait until at most N groups of copies are still in flight (the plain loads of older
// GPUs have all landed already).
template <int N>
__device__ __forceinline__ void copy_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
#endif
}

// A ROWS x COLS tile of a rows x cols row-major matrix, from element (r0, c0), into a
// shared tile with rows of COLS halves: each of the THREADS threads copies whole 16-byte
// chunks to their (swizzled) places; chunks outside the matrix become zeros (cols % 8 ==
// 0, so a chunk is wholly inside or outside). This general copy serves the tiles that
// cross an edge of the matrix; TileStream below copies the others with far fewer
// instructions.
template <int ROWS, int COLS, int THREADS, bool SWIZZLE>
__device__ __forceinline__ void copy_tile(unsigned tile, const half* src, int rows, int cols,
                                          int r0, int c0) {
    constexpr int CHUNKS = COLS / 8;
    static_assert(ROWS * CHUNKS % THREADS == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int j = 0; j < ROWS * CHUNKS / THREADS; ++j) {
        const int i = threadIdx.x + j * THREADS;
        const int r = i / CHUNKS, c = i % CHUNKS;
        const bool ok = r0 + r < rows && c0 + 8 * c < cols;
        copy_16(tile + 2 * (r * COLS + 8 * chunk_at<CHUNKS, SWIZZLE>(r, c)),
                src + static_cast<size_t>(ok ? r0 + r : 0) * cols + (ok ? c0 + 8 * c : 0), ok);
    }
}

// The tiles one thread copies as K advances, with its addresses worked out once (chapter
// 09's hoisting). A thread's chunks of a tile sit in one column of chunks, every
// THREADS / CHUNKS rows, so from the first chunk's address the others are a fixed stride
// away, in global and in shared memory; each step along K moves the source by a fixed
// amount too. Copying a tile that lies wholly inside the matrix then takes a 64-bit add
// and a cp.async per chunk, where copy_tile spends about 18 instructions on the bounds,
// the clamping and the 64-bit products of each chunk.
template <int ROWS, int COLS, int THREADS, bool SWIZZLE>
struct TileStream {
    static constexpr int CHUNKS = COLS / 8, COPIES = ROWS * CHUNKS / THREADS;
    static constexpr int ROW_STEP = THREADS / CHUNKS;   // rows between a thread's chunks
    static_assert(THREADS % CHUNKS == 0, "a thread's chunks share a column of chunks");
    const half* src;   // the thread's first chunk in the current tile
    size_t stride;     // elements between its chunks in global memory (ROW_STEP rows)
    unsigned dst;      // its first chunk in a shared tile, in bytes from the tile's start

    // For the tile at (r0, c0) of a rows x cols matrix.
    __device__ __forceinline__ TileStream(const half* m, int cols, int r0, int c0) {
        const int r = threadIdx.x / CHUNKS, c = threadIdx.x % CHUNKS;
        src = m + static_cast<size_t>(r0 + r) * cols + c0 + 8 * c;
        stride = static_cast<size_t>(ROW_STEP) * cols;
        dst = 2 * (r * COLS + 8 * chunk_at<CHUNKS, SWIZZLE>(r, c));
    }

    // Copy the current tile into the shared tile at address `tile` (no bounds: the
    // caller knows the tile is inside the matrix).
    __device__ __forceinline__ void copy(unsigned tile) const {
        const half* s = src;
#pragma unroll
        for (int j = 0; j < COPIES; ++j, s += stride) {
            // rows ROW_STEP apart keep the swizzle's row bits when ROW_STEP % 8 == 0, so
            // the shared offset is a constant the compiler folds into the instruction
            const int r = threadIdx.x / CHUNKS + j * ROW_STEP, c = threadIdx.x % CHUNKS;
            copy_16(tile + (ROW_STEP % 8 == 0 ? dst + 2 * j * ROW_STEP * COLS
                                               : 2 * (r * COLS + 8 * chunk_at<CHUNKS, SWIZZLE>(r, c))),
                    s, true);
        }
    }
};

// ------------------------------------------------------------------ ldmatrix and mma
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

// d += a * b for one 16 x 8 x 16 tile: a = 4 registers of A (2 halves each), b = 2 of B.
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4],
                                          unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else   // sm_75: two k = 8 halves (a[0], a[1] and b0 are k 0-7; a[2], a[3] and b1 k 8-15)
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b0));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[2]), "r"(a[3]), "r"(b1));
#endif
}

// ------------------------------------------------------------------ the kernel
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool SWIZZLE>
__global__ void __launch_bounds__(32 * WARPS_M * WARPS_N)
hgemm_mma(int M, int N, int K, float alpha, const half* __restrict__ A,
          const half* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;           // a warp's region
    constexpr int FM = WM / 16, FN = WN / 8;                      // its mma tiles
    constexpr int A_CHUNKS = BK / 8, B_CHUNKS = BN / 8;            // 16-byte chunks per row
    static_assert(FM >= 1 && FN % 2 == 0 && BK % 16 == 0, "whole ldmatrix.x4 loads");
    extern __shared__ __align__(128) unsigned char smem[];
    constexpr unsigned A_STAGE = BM * BK * 2, B_STAGE = BK * BN * 2;   // bytes per stage
    const unsigned As = shared_address(reinterpret_cast<half*>(smem));   // [STAGES][BM][BK]
    const unsigned Bs = As + STAGES * A_STAGE;                           // [STAGES][BK][BN]

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (K + BK - 1) / BK;

    // Tile t into stage s: the A tile (BM rows of BK halves at (row0, t BK)) and the B
    // tile (BK rows of BN halves at (t BK, col0)). Blocks inside the matrix copy through
    // the hoisted streams while the tile is whole (every tile but a ragged last one);
    // the others through copy_tile, which checks each chunk. The test is the same for
    // every thread of the block, so the warps do not diverge.
    const bool inside = row0 + BM <= M && col0 + BN <= N;
    TileStream<BM, BK, THREADS, SWIZZLE> a_stream(A, K, inside ? row0 : 0, 0);
    TileStream<BK, BN, THREADS, SWIZZLE> b_stream(B, N, 0, inside ? col0 : 0);
    auto load_tile = [&](int t, int s) {
        if (inside && (t + 1) * BK <= K) {
            a_stream.copy(As + s * A_STAGE);
            b_stream.copy(Bs + s * B_STAGE);
        } else {
            copy_tile<BM, BK, THREADS, SWIZZLE>(As + s * A_STAGE, A, M, K, row0, t * BK);
            copy_tile<BK, BN, THREADS, SWIZZLE>(Bs + s * B_STAGE, B, K, N, t * BK, col0);
        }
        a_stream.src += BK;                                  // the next tile along K
        b_stream.src += static_cast<size_t>(BK) * N;
    };

    // Where each lane's ldmatrix reads, from the start of a stage, also worked out once.
    // A: lane l gives row (l % 16) of each 16-row tile i, chunk kk / 8 + l / 16. The
    // swizzle looks only at a row's bits 0-2, which rows 16 apart share, so tile i is
    // a_at[kk / 16] plus i whole 16-row blocks.
    // B (k-major): lane l gives row kk + l % 16, the chunk of columns 16 jj + 8 (l / 16)
    // of the warp's region: two 8-column mma tiles per ldmatrix.x4.trans. Rows 16 apart
    // again share the swizzle, so step kk is b_at[jj] plus kk whole rows.
    unsigned a_at[BK / 16], b_at[FN / 2];
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
        const int r = warp_m * WM + lane % 16;
        a_at[kk / 16] = 2 * (r * BK + 8 * chunk_at<A_CHUNKS, SWIZZLE>(r, kk / 8 + lane / 16));
    }
#pragma unroll
    for (int jj = 0; jj < FN / 2; ++jj) {
        const int r = lane % 16, c = (warp_n * WN + 16 * jj) / 8 + lane / 16;
        b_at[jj] = 2 * (r * BN + 8 * chunk_at<B_CHUNKS, SWIZZLE>(r, c));
    }

    float acc[FM][FN][4] = {};

    // The prologue fills STAGES - 1 stages; one group of copies per tile (an empty group
    // past the last tile keeps the count of groups in flight the same every step).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) load_tile(s, s);
        copy_commit();
    }

    // The ring: stage `read` holds tile t, stage `write` receives tile t + STAGES - 1.
    int read = 0, write = STAGES - 1;
    for (int t = 0; t < tiles; ++t) {
        copy_wait<STAGES - 2>();   // tile t has landed (at most STAGES - 2 newer in flight)
        __syncthreads();           // ... for every thread; and stage `write`, read during
                                   // step t - 1, is free
        if (t + STAGES - 1 < tiles) load_tile(t + STAGES - 1, write);
        copy_commit();

        const unsigned as = As + read * A_STAGE, bs = Bs + read * B_STAGE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[FM][4];
#pragma unroll
            for (int i = 0; i < FM; ++i)
                ldmatrix_x4(a[i], as + a_at[kk / 16] + i * 16 * BK * 2);
#pragma unroll
            for (int j = 0; j < FN; j += 2) {
                unsigned b[4];
                ldmatrix_x4_trans(b, bs + b_at[j / 2] + kk * BN * 2);
#pragma unroll
                for (int i = 0; i < FM; ++i) {
                    mma_16816(acc[i][j], a[i], b[0], b[1]);
                    mma_16816(acc[i][j + 1], a[i], b[2], b[3]);
                }
            }
        }
        read = read + 1 == STAGES ? 0 : read + 1;
        write = write + 1 == STAGES ? 0 : write + 1;
    }
    copy_wait<0>();   // no copy may still write shared memory when the block ends

    // Epilogue: lane l holds rows l / 4 and l / 4 + 8, columns 2 (l % 4) + {0, 1} of each
    // 16 x 8 tile: two neighbours, stored as one float2 (N % 8 == 0 and c is even, so
    // both are inside C when c is, and the pair is 8-byte aligned). Every element inside
    // C is written with alpha and beta.
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = row0 + warp_m * WM + 16 * i + lane / 4 + 8 * h;
                const int c = col0 + warp_n * WN + 8 * j + 2 * (lane % 4);
                if (r < M && c < N) {
                    float2* out = reinterpret_cast<float2*>(C + static_cast<size_t>(r) * N + c);
                    float2 v = make_float2(alpha * acc[i][j][2 * h], alpha * acc[i][j][2 * h + 1]);
                    if (beta != 0.0f) {   // as gemm_epilogue: C is not read when beta == 0
                        const float2 old = *out;
                        v.x += beta * old.x;
                        v.y += beta * old.y;
                    }
                    *out = v;
                }
            }
}

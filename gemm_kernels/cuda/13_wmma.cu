// Chapter 13: tensor cores through WMMA, CUDA's warp matrix functions (<mma.h>).
//
// A tensor core multiplies small matrices in one instruction. WMMA exposes it to C++ as
// an operation of a whole warp: the 32 lanes together hold a 16 x 16 tile of A, of B
// and of the accumulator in "fragments" (each lane keeps some elements; which ones is
// not specified), and wmma::mma_sync(acc, a, b, acc) computes acc += a * b for one
// 16 x 16 x 16 step. The inputs are half precision (FP16: 11-bit significand), the
// accumulator single precision, so C = alpha * A @ B + beta * C here takes A and B in
// FP16 and C, alpha and beta in FP32. Every load, mma and store of a fragment is
// collective: all 32 lanes of the warp must call it, with the same pointer and stride.
//
// hgemm_wmma_naive: one warp per 16 x 16 tile of C, its fragments loaded straight from
//   global memory (the course notes' kernel, written anew). load_matrix_sync reads
//   whole 16 x 16 tiles from 32-byte-aligned addresses, so M, N and K must be multiples
//   of 16; the launcher refuses other shapes with that reason.
// hgemm_wmma_tiled: a block stages BM x BK tiles of A and BK x BN tiles of B in shared
//   memory (two buffers: the next tile's loads are in flight while the tensor cores
//   work on the current one, as in chapter 08), and each of its 8 warps computes a
//   (BM / WARPS_M) x (BN / WARPS_N) region of C as a grid of 16 x 16 fragments. Any
//   shape: loads outside A or B fill zeros, and C goes out through shared memory,
//   element by element with bounds (alpha and beta applied there).
#include <mma.h>
#include <cuda_fp16.h>
#include "common.cuh"

using namespace nvcuda;

constexpr int WMMA_TILE = 16;     // the m16n16k16 shape: one fragment is a 16 x 16 tile

// ------------------------------------------------------------------ the naive kernel
// A block is WM x WN warps (blockDim = (32, WM * WN)): row threadIdx.y of the block is
// one warp, since a warp is 32 consecutive threads with x running fastest.
template <int WM, int WN>
__global__ void __launch_bounds__(32 * WM * WN)
hgemm_wmma_naive(int M, int N, int K, float alpha, const half* __restrict__ A,
                 const half* __restrict__ B, float beta, float* __restrict__ C) {
    const int warp_m = threadIdx.y / WN, warp_n = threadIdx.y % WN;
    const int row = (blockIdx.y * WM + warp_m) * WMMA_TILE;
    const int col = (blockIdx.x * WN + warp_n) * WMMA_TILE;
    if (row >= M || col >= N) return;               // the whole warp leaves together

    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += WMMA_TILE) {
        wmma::load_matrix_sync(a, A + static_cast<size_t>(row) * K + k, K);
        wmma::load_matrix_sync(b, B + static_cast<size_t>(k) * N + col, N);
        wmma::mma_sync(acc, a, b, acc);
    }
    // An accumulator fragment loaded from C holds C's elements in the same places as
    // acc holds its own, so the epilogue can work element by element on the fragments.
    float* c = C + static_cast<size_t>(row) * N + col;
    if (beta != 0.0f) {                              // BLAS: C is not read when beta == 0
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> c0;
        wmma::load_matrix_sync(c0, c, N, wmma::mem_row_major);
        for (int i = 0; i < acc.num_elements; ++i) acc.x[i] = alpha * acc.x[i] + beta * c0.x[i];
    } else {
        for (int i = 0; i < acc.num_elements; ++i) acc.x[i] = alpha * acc.x[i];
    }
    wmma::store_matrix_sync(c, acc, N, wmma::mem_row_major);
}

// ------------------------------------------------------------------ the tiled kernel
constexpr int TILED_WARPS = 8;
constexpr int TILED_THREADS = 32 * TILED_WARPS;

// Copy one BR x BC tile (row-major, leading dimension ld) starting at (r0, c0) of a
// rows x cols matrix into registers, 8 halves (16 bytes) per slot; slots outside the
// matrix are zeros. VEC: cols % 8 == 0, so a slot is wholly inside or outside and its
// 16-byte load is aligned; otherwise element by element.
template <int BR, int BC, bool VEC>
struct TileLoader {
    static constexpr int SLOTS = BR * BC / 8;
    static constexpr int PER_THREAD = (SLOTS + TILED_THREADS - 1) / TILED_THREADS;
    uint4 reg[PER_THREAD];

    __device__ __forceinline__ void load(const half* src, int rows, int cols, int ld,
                                         int r0, int c0) {
#pragma unroll
        for (int i = 0; i < PER_THREAD; ++i) {
            const int s = threadIdx.x + i * TILED_THREADS;
            const int r = r0 + s / (BC / 8), c = c0 + 8 * (s % (BC / 8));
            uint4 v = make_uint4(0, 0, 0, 0);
            if (s < SLOTS && r < rows) {
                const half* p = src + static_cast<size_t>(r) * ld + c;
                if constexpr (VEC) {
                    if (c < cols) v = *reinterpret_cast<const uint4*>(p);
                } else {
                    half h[8];
#pragma unroll
                    for (int e = 0; e < 8; ++e) h[e] = c + e < cols ? p[e] : __float2half(0.0f);
                    v = *reinterpret_cast<const uint4*>(h);
                }
            }
            reg[i] = v;
        }
    }
    // The same slots into a shared tile whose rows are BC + PAD halves long.
    template <int PAD>
    __device__ __forceinline__ void store(half (*tile)[BC + PAD]) const {
#pragma unroll
        for (int i = 0; i < PER_THREAD; ++i) {
            const int s = threadIdx.x + i * TILED_THREADS;
            if (s < SLOTS)
                *reinterpret_cast<uint4*>(&tile[s / (BC / 8)][8 * (s % (BC / 8))]) = reg[i];
        }
    }
};

// PAD halves at the end of each shared row: 8 (16 bytes) makes consecutive rows start
// in different banks, which the fragment loads need to be free of bank conflicts; 0
// shows what they cost (rows of BK = 32 halves are 64 bytes: every other row then
// starts in the same banks).
template <int BM, int BN, int BK, int WARPS_M, int PAD, bool VEC>
__global__ void __launch_bounds__(TILED_THREADS, 2)
hgemm_wmma_tiled(int M, int N, int K, float alpha, const half* __restrict__ A,
                 const half* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int WARPS_N = TILED_WARPS / WARPS_M;
    constexpr int FM = BM / WARPS_M / WMMA_TILE, FN = BN / WARPS_N / WMMA_TILE;
    static_assert(FM >= 1 && FN >= 1 && BK % WMMA_TILE == 0, "a warp holds whole fragments");
    // Rows of 16-byte multiples keep every fragment's first element 32-byte aligned.
    static_assert(((BK + PAD) * 2) % 16 == 0 && ((BN + PAD) * 2) % 16 == 0, "aligned rows");

    // Two buffers of each tile; after the main loop the same bytes hold the epilogue's
    // scratch (one 16 x 16 float tile per warp).
    constexpr int A_BYTES = 2 * BM * (BK + PAD) * 2, B_BYTES = 2 * BK * (BN + PAD) * 2;
    constexpr int SCRATCH_BYTES = TILED_WARPS * WMMA_TILE * WMMA_TILE * 4;
    __shared__ __align__(128) unsigned char smem[A_BYTES + B_BYTES > SCRATCH_BYTES
                                                 ? A_BYTES + B_BYTES : SCRATCH_BYTES];
    auto As = reinterpret_cast<half (*)[BM][BK + PAD]>(smem);
    auto Bs = reinterpret_cast<half (*)[BK][BN + PAD]>(smem + A_BYTES);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    TileLoader<BM, BK, VEC> a_next;
    TileLoader<BK, BN, VEC> b_next;
    const int tiles = (K + BK - 1) / BK;
    a_next.load(A, M, K, K, row0, 0);
    b_next.load(B, K, N, N, 0, col0);
    a_next.template store<PAD>(As[0]);
    b_next.template store<PAD>(Bs[0]);
    __syncthreads();

    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        if (t + 1 < tiles) {               // the next tile's loads fly during the mma
            a_next.load(A, M, K, K, row0, (t + 1) * BK);
            b_next.load(B, K, N, N, (t + 1) * BK, col0);
        }
#pragma unroll
        for (int kk = 0; kk < BK; kk += WMMA_TILE) {
            // The warp keeps the smaller set of fragments (of A or of B) for the whole
            // step and loads the other one fragment at a time: fewer registers.
            wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[FM <= FN ? FM : 1];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b[FM <= FN ? 1 : FN];
            const half* a_at = &As[cur][warp_m * FM * WMMA_TILE][kk];
            const half* b_at = &Bs[cur][kk][warp_n * FN * WMMA_TILE];
            if constexpr (FM <= FN) {
#pragma unroll
                for (int i = 0; i < FM; ++i)
                    wmma::load_matrix_sync(a[i], a_at + i * WMMA_TILE * (BK + PAD), BK + PAD);
#pragma unroll
                for (int j = 0; j < FN; ++j) {
                    wmma::load_matrix_sync(b[0], b_at + j * WMMA_TILE, BN + PAD);
#pragma unroll
                    for (int i = 0; i < FM; ++i) wmma::mma_sync(acc[i][j], a[i], b[0], acc[i][j]);
                }
            } else {
#pragma unroll
                for (int j = 0; j < FN; ++j)
                    wmma::load_matrix_sync(b[j], b_at + j * WMMA_TILE, BN + PAD);
#pragma unroll
                for (int i = 0; i < FM; ++i) {
                    wmma::load_matrix_sync(a[0], a_at + i * WMMA_TILE * (BK + PAD), BK + PAD);
#pragma unroll
                    for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[0], b[j], acc[i][j]);
                }
            }
        }
        if (t + 1 < tiles) {   // the other buffer: its last readers passed the barrier below
            a_next.template store<PAD>(As[cur ^ 1]);
            b_next.template store<PAD>(Bs[cur ^ 1]);
        }
        __syncthreads();
    }

    // Epilogue: each warp writes its fragments one at a time to its 16 x 16 float
    // scratch in shared memory (the tiles are free now: every warp passed the last
    // barrier), and its lanes store the elements that fall inside C, 8 each, with alpha
    // and beta.
    float* scratch = reinterpret_cast<float*>(smem) + warp * WMMA_TILE * WMMA_TILE;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            wmma::store_matrix_sync(scratch, acc[i][j], WMMA_TILE, wmma::mem_row_major);
            __syncwarp();
            const int r0 = row0 + (warp_m * FM + i) * WMMA_TILE;
            const int c0 = col0 + (warp_n * FN + j) * WMMA_TILE;
#pragma unroll
            for (int e = lane; e < WMMA_TILE * WMMA_TILE; e += 32) {
                const int r = r0 + e / WMMA_TILE, c = c0 + e % WMMA_TILE;
                if (r < M && c < N) {
                    float* out = C + static_cast<size_t>(r) * N + c;
                    *out = gemm_epilogue(scratch[e], alpha, beta, out);
                }
            }
            __syncwarp();             // the scratch is rewritten by the next fragment
        }
}

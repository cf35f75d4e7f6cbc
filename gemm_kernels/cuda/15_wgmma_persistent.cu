// Chapter 15, last step: the warp-specialised kernel made persistent. hgemm_wgmma_ws
// launches one block per tile of C, and a block's life has three parts that do not
// overlap: the producer fills the ring while the tensor cores wait (the first STAGES
// copies), the main loop, and the epilogue, where the consumers write C while the copy
// engine and the tensor cores have nothing to do. With one block per SM (the ring takes
// most of the shared memory), those gaps are paid once per tile.
//
// Here the grid is one block per SM (or fewer, when there are fewer tiles), and each block
// walks the tiles pid = blockIdx.x, blockIdx.x + gridDim.x, ... in turn (the same grouped
// order as hgemm_wgmma_ws's block_tile, given a tile number instead of a block number).
// The producer runs ahead through the tiles: the ring's step count goes on from one tile
// to the next, so while the consumers write tile i's C, the copies of tile i + 1's first
// steps are already landing, and its first wgmma can start as soon as the epilogue ends.
// The barriers' parities follow that running count (step / STAGES), not the tile's own.
//
// Everything else is hgemm_wgmma_ws's: the same TMA boxes, descriptors, wgmma, register
// trade and epilogue, from the helpers of 15_wgmma.cu.
#include "15_wgmma.cu"

// The tile (x: column of tiles, y: row of tiles) numbered `pid` among tiles_x x tiles_y,
// in groups of GROUP tile rows walked column by column (GROUP = 1: row by row).
template <int GROUP>
__device__ __forceinline__ int2 tile_at(int pid, int tiles_x, int tiles_y) {
    if constexpr (GROUP == 1) return make_int2(pid % tiles_x, pid / tiles_x);
    const int per_group = GROUP * tiles_x;                     // tiles in a full group
    const int first = pid / per_group * GROUP;                 // its first tile row
    const int rows = min(tiles_y - first, GROUP);
    const int in_group = pid % per_group;
    return make_int2(in_group / rows, first + in_group % rows);
}

// C = alpha d + beta C for one consumer's 64 x 256 part of the tile at (row0, col0):
// thread t holds rows 16 (t / 32) + (t % 32) / 4 and 8 more, column pairs 8 j + 2 (t % 4).
__device__ __forceinline__ void store_tile(const float (&d)[128], int M, int N, float alpha,
                                           float beta, float* __restrict__ C, int row0,
                                           int col0) {
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
#pragma unroll
    for (int j = 0; j < 32; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = row0 + 16 * w + lane / 4 + 8 * h;
            const int col = col0 + 8 * j + 2 * (lane % 4);
            if (r < M && col < N) {
                float2* out = reinterpret_cast<float2*>(C + static_cast<size_t>(r) * N + col);
                float2 v = make_float2(alpha * d[4 * j + 2 * h], alpha * d[4 * j + 2 * h + 1]);
                if (beta != 0.0f) {
                    const float2 old = *out;
                    v.x += beta * old.x;
                    v.y += beta * old.y;
                }
                *out = v;
            }
        }
}

// The ring's barriers: "full" completed by one arrival and the copy's bytes, "empty" by
// `releases` arrivals (the consumers that must be done with a stage before its refill).
template <int STAGES>
__device__ __forceinline__ void ring_init(unsigned long long (&full)[STAGES],
                                          unsigned long long (&empty)[STAGES],
                                          unsigned releases) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            barrier_init(smem_u32(&full[s]), 1);
            barrier_init(smem_u32(&empty[s]), releases);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
}

// One consumer's step: wait for the stage's copy (phase `parity` of its full barrier),
// then its 64 rows of the BM x 64 A tile times the 64 x 256 B tile into d, waited for.
template <unsigned B_BYTES>
__device__ __forceinline__ void consume(float (&d)[128], unsigned full_bar, unsigned parity,
                                        unsigned a_tile, unsigned b_tile) {
    barrier_wait(full_bar, parity);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 64; kk += 16)
        wgmma_step(d, descriptor(a_tile + 2 * kk, 16, 1024),
                   descriptor(b_tile + 128 * kk, B_BYTES / 4, 1024));
    wgmma_commit();
    wgmma_wait<0>();
}

// A BM x 256 tile of C at a time, BM = 64 CONSUMERS; K in steps of 64 through STAGES
// buffers; the grid's blocks share the tiles out.
template <int CONSUMERS, int STAGES, int GROUP>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), 1)
hgemm_wgmma_persistent(int M, int N, int K, float alpha, const half* __restrict__ A,
                       const half* __restrict__ B, float beta, float* __restrict__ C,
                       const __grid_constant__ TensorMap map_a,
                       const __grid_constant__ TensorMap map_b) {
    constexpr int BM = 64 * CONSUMERS, BN = 256, BK = 64;
    constexpr unsigned A_BYTES = BM * BK * 2, B_BYTES = BK * BN * 2;
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

    const unsigned base = (smem_u32(smem) + 1023) & ~1023u;
    const unsigned As = base, Bs = base + STAGES * A_BYTES;
    const int wg = threadIdx.x / 128;
    const int tiles_x = (N + BN - 1) / BN, tiles_y = (M + BM - 1) / BM;
    const int tiles = tiles_x * tiles_y, steps = (K + BK - 1) / BK;

    ring_init(full, empty, CONSUMERS);
    __syncthreads();

    if (wg == 0) {                                   // the producer
        registers_down<40>();
        if (threadIdx.x == 0) {
            int step = 0;                            // this block's steps, over its tiles
            for (int pid = blockIdx.x; pid < tiles; pid += gridDim.x) {
                const int2 tile = tile_at<GROUP>(pid, tiles_x, tiles_y);
                for (int t = 0; t < steps; ++t, ++step) {
                    const int s = step % STAGES;
                    // the stage's previous use (step - STAGES) must have been consumed
                    if (step >= STAGES)
                        barrier_wait(smem_u32(&empty[s]), (step / STAGES - 1) & 1);
                    const unsigned bar = smem_u32(&full[s]);
                    barrier_expect(bar, A_BYTES + B_BYTES);
                    tma_load(As + s * A_BYTES, map_a, t * BK, tile.y * BM, bar);
#pragma unroll
                    for (int h = 0; h < BN / 64; ++h)        // B: four 64 x 64 boxes
                        tma_load(Bs + s * B_BYTES + h * (B_BYTES / 4), map_b,
                                 tile.x * BN + 64 * h, t * BK, bar);
                }
            }
        }
        return;
    }

    registers_up<232>();                             // a consumer: rows 64 (wg - 1) on
    const int c = wg - 1;
    float d[128];
    int step = 0;
    for (int pid = blockIdx.x; pid < tiles; pid += gridDim.x) {
        const int2 tile = tile_at<GROUP>(pid, tiles_x, tiles_y);
#pragma unroll
        for (int i = 0; i < 128; ++i) d[i] = 0.f;
        for (int t = 0; t < steps; ++t, ++step) {
            const int s = step % STAGES;
            consume<B_BYTES>(d, smem_u32(&full[s]), (step / STAGES) & 1,
                                      As + s * A_BYTES + c * 64 * 128, Bs + s * B_BYTES);
            if (threadIdx.x % 128 == 0) barrier_arrive(smem_u32(&empty[s]));
        }
        store_tile(d, M, N, alpha, beta, C, tile.y * BM + c * 64, tile.x * BN);
    }
}

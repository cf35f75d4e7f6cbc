// Chapter 15, a further step: thread-block clusters and TMA multicast. Two blocks that
// compute tiles of C one above the other read the same B tile at every step along K.
// Launched as a cluster of 2 (the blocks (x, 2i) and (x, 2i + 1), on two SMs of one GPC,
// each able to reach the other's shared memory), each block copies only half of that B
// tile from global memory, and one TMA instruction writes the half into the shared
// memory of both blocks (multicast): B's traffic from the L2 halves.
//
// What the sharing costs is synchronisation across the pair:
// * a block's "full" barrier now also counts the bytes its partner's copy writes into it,
//   so both blocks' barriers must be initialised before either copies
//   (a cluster-wide barrier after the initialisation);
// * a block may overwrite a stage only when the consumers of BOTH blocks are done with
//   it, since its copy writes both: each "empty" barrier waits for 2 CONSUMERS arrivals,
//   and each consumer arrives on its own block's barrier and on its partner's (mapa gives
//   the partner's address of the same barrier);
// * neither block may exit while its partner can still arrive on its barriers (a second
//   cluster-wide barrier at the end).
// Everything else is hgemm_wgmma_ws's (15_wgmma.cu) with the persistent kernel's tile
// order, ring set-up, consumer step and epilogue (15_wgmma_persistent.cu), applied to
// pairs of tile rows.
#include "15_wgmma_persistent.cu"

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

// Every thread of both blocks arrives, then waits for all the others (release/acquire at
// cluster scope: what a block wrote before is seen by its partner after).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// Arrive on the barrier at the same place in block `rank`'s shared memory.
__device__ __forceinline__ void barrier_arrive_in(unsigned bar, unsigned rank) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(bar), "r"(rank));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n"
                 :: "r"(remote) : "memory");
}

// barrier_wait with cluster-scope acquire: the arrivals it waits for include the
// partner's, whose reads of the stage must be over before this block's copy rewrites it.
__device__ __forceinline__ void barrier_wait_cluster(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n"
                     " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}

// tma_load into the same place of every block in `mask` (bit i: the block of rank i), each
// block's barrier at `bar`'s place receiving the bytes written into it.
__device__ __forceinline__ void tma_load_multicast(unsigned dst, const TensorMap& map, int x,
                                                   int y, unsigned bar, unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x), "r"(y),
                    "r"(bar), "h"(mask) : "memory");
}

// Clusters of 2 blocks along y: tile rows 2i and 2i + 1 of one column of tiles (the grid's
// y is rounded up to even; a block below the matrix copies zeros and stores nothing).
template <int CONSUMERS, int STAGES, int GROUP>
__global__ void __cluster_dims__(1, 2, 1) __launch_bounds__(128 * (CONSUMERS + 1), 1)
hgemm_wgmma_cluster(int M, int N, int K, float alpha, const half* __restrict__ A,
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
    const unsigned rank = cluster_rank();
    // the pair's place: pairs of tile rows in the grouped order, this block's row in it
    const int2 pair = tile_at<GROUP>(blockIdx.y / 2 * gridDim.x + blockIdx.x, gridDim.x,
                                     gridDim.y / 2);
    const int row0 = (2 * pair.y + rank) * BM, col0 = pair.x * BN;
    const int steps = (K + BK - 1) / BK;

    ring_init(full, empty, 2 * CONSUMERS);           // both blocks' consumers free a stage
    cluster_sync();

    if (wg == 0) {                                   // the producer
        registers_down<40>();
        if (threadIdx.x == 0)
            for (int t = 0; t < steps; ++t) {
                const int s = t % STAGES;
                // both blocks' consumers must be done with the stage's previous tile
                if (t >= STAGES) barrier_wait_cluster(smem_u32(&empty[s]), (t / STAGES - 1) & 1);
                const unsigned bar = smem_u32(&full[s]);
                barrier_expect(bar, A_BYTES + B_BYTES);   // own A, both halves of B
                tma_load(As + s * A_BYTES, map_a, t * BK, row0, bar);
#pragma unroll
                for (int h = 2 * rank; h < 2 * rank + 2; ++h)   // this block's half of B
                    tma_load_multicast(Bs + s * B_BYTES + h * (B_BYTES / 4), map_b,
                                       col0 + 64 * h, t * BK, bar, 0b11);
            }
    } else {
        registers_up<232>();                         // a consumer: rows 64 (wg - 1) on
        const int c = wg - 1;
        float d[128];
#pragma unroll
        for (int i = 0; i < 128; ++i) d[i] = 0.f;
        for (int t = 0; t < steps; ++t) {
            const int s = t % STAGES;
            consume<B_BYTES>(d, smem_u32(&full[s]), (t / STAGES) & 1,
                                      As + s * A_BYTES + c * 64 * 128, Bs + s * B_BYTES);
            if (threadIdx.x % 128 == 0) {            // the stage is free in this block ...
                barrier_arrive(smem_u32(&empty[s]));
                barrier_arrive_in(smem_u32(&empty[s]), rank ^ 1);   // ... and for its partner
            }
        }
        store_tile(d, M, N, alpha, beta, C, row0 + c * 64, col0);
    }
    cluster_sync();                                  // the partner no longer arrives here
}

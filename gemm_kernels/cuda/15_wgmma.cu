// Chapter 15: Hopper's own tensor-core path. The tiles travel global -> shared by the Tensor
// Memory Accelerator (TMA), one instruction per tile, and the tensor cores read both
// operands straight from shared memory with wgmma, an instruction of a whole warpgroup (4
// warps, 128 threads) that runs asynchronously.
//
// TMA. The host describes each matrix once in a tensor map (cuTensorMapEncodeTiled: the
// address, the sizes, the row stride, the box one copy moves, and the swizzle); the
// kernel gets it as a __grid_constant__ parameter and names it in
// cp.async.bulk.tensor.2d, with the coordinates of the box. One thread issues the copy;
// the hardware computes every address, fills the parts of the box outside the matrix
// with zeros, and writes the box in the 128-byte swizzle (the XOR of chapter 14, done by
// the copy engine). The copy reports its bytes to an mbarrier in shared memory; the
// threads that need the tile wait on that barrier's phase.
//
// wgmma. wgmma.mma_async.m64nNk16 multiplies a 64 x 16 tile of A by a 16 x N tile of B
// into 64 x N FP32 accumulators spread over the warpgroup's registers (thread t of the
// warpgroup: rows 16 (t / 32) + (t % 32) / 4 and 8 more, columns 8 j + 2 (t % 4) and
// the next, j = 0 .. N / 8 - 1, as mma.sync's 16 x 8 tiles repeated). A and B are given
// by 64-bit shared-memory descriptors: the start address, the strides between 8 x 16-byte
// "core matrices" and the swizzle mode, which must match the layout TMA wrote. A's rows
// run along K (K-major); B is row-major K x N, so its rows run along N (MN-major, the
// instruction's transpose flag for B).
//
// This kernel keeps the pipeline simple, to show the two instructions: STAGES shared
// buffers, each with a "full" mbarrier. Thread 0 starts the copies of the first STAGES
// tiles; at every step each warpgroup waits for its stage's barrier, issues the 4 wgmma
// of the 64-deep tile, waits for them, and after a __syncthreads thread 0 refills that
// stage with the tile STAGES steps ahead.
//
// Shapes: TMA needs row strides that are multiples of 16 bytes, so K % 8 == 0 and
// N % 8 == 0; M, N and K need not be multiples of the tile (TMA's zero fill, and the
// epilogue's bounds). sm_90a only: wgmma and these TMA forms exist on Hopper alone.
#include <cuda_fp16.h>
#include "common.cuh"

// The tensor map's bytes, as cuTensorMapEncodeTiled wrote them (CUtensorMap: 128 bytes,
// 64-byte aligned). The kernel only passes its address to the copy instruction.
struct alignas(64) TensorMap { unsigned long long opaque[16]; };

// ------------------------------------------------------------------ mbarrier and TMA
__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}

// Arrive on the barrier, announcing `bytes` of copies that will complete on it.
__device__ __forceinline__ void barrier_expect(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(bar), "r"(bytes) : "memory");
}

// Wait until the barrier's phase `parity` has completed (its arrivals and bytes are in).
__device__ __forceinline__ void barrier_wait(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}

// The box of `map` at element (x: column, y: row) into shared memory at `dst`; its bytes
// complete on barrier `bar`.
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap& map, int x, int y,
                                         unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x), "r"(y),
                    "r"(bar) : "memory");
}

// ------------------------------------------------------------------ wgmma
// A shared-memory descriptor: start address, leading and stride byte offsets (in units of
// 16 bytes), and swizzle mode 1 (128-byte swizzle) in bits 62-63.
__device__ __forceinline__ unsigned long long descriptor(unsigned addr, unsigned lead,
                                                         unsigned stride) {
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4)
         | static_cast<unsigned long long>(lead >> 4) << 16
         | static_cast<unsigned long long>(stride >> 4) << 32
         | 1ull << 62;
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}

// d += A * B for a 64 x N x 16 step of the warpgroup (N = 128: 64 accumulators per
// thread; N = 256: 128), A K-major and B MN-major (transposed), both from shared memory.
// The accumulators start at zero, so every step adds (scale-d true).
__device__ __forceinline__ void wgmma_step(float (&d)[64], unsigned long long a,
                                           unsigned long long b) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(a), "l"(b), "n"(1));
}

__device__ __forceinline__ void wgmma_step(float (&d)[128], unsigned long long a,
                                           unsigned long long b) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(a), "l"(b), "n"(1));
}

// ------------------------------------------------------------------ the kernel
// BM x 128 tiles of C, BM / 64 warpgroups (one per 64 rows), K in steps of 64 through
// STAGES buffers. LEAD_B and STRIDE_B: the byte offsets of B's descriptor (MN-major: the
// distance between 64-column halves of the tile, and between groups of 8 rows).
template <int BM, int STAGES, int LEAD_B, int STRIDE_B>
__global__ void __launch_bounds__(128 * (BM / 64))
hgemm_wgmma(int M, int N, int K, float alpha, const half* __restrict__ A,
            const half* __restrict__ B, float beta, float* __restrict__ C,
            const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b) {
    constexpr int BN = 128, BK = 64;
    constexpr unsigned A_BYTES = BM * BK * 2, B_BYTES = BK * BN * 2;   // one stage's tiles
    // 128-byte swizzled tiles start on 1024-byte boundaries
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES];

    const unsigned base = (smem_u32(smem) + 1023) & ~1023u;
    const unsigned As = base, Bs = base + STAGES * A_BYTES;
    const int wg = threadIdx.x / 128;                       // this thread's warpgroup
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (K + BK - 1) / BK;

    // Stage s receives tile t: A's BM x 64 box at (t BK, row0), B's two 64 x 64 boxes at
    // (col0, t BK) and (col0 + 64, t BK), each 64 rows of 128 bytes.
    auto load = [&](int t, int s) {
        const unsigned bar = smem_u32(&full[s]);
        barrier_expect(bar, A_BYTES + B_BYTES);
        tma_load(As + s * A_BYTES, map_a, t * BK, row0, bar);
        tma_load(Bs + s * B_BYTES, map_b, col0, t * BK, bar);
        tma_load(Bs + s * B_BYTES + B_BYTES / 2, map_b, col0 + 64, t * BK, bar);
    };
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) barrier_init(smem_u32(&full[s]), 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0)
        for (int s = 0; s < STAGES && s < tiles; ++s) load(s, s);

    float d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0.f;

    for (int t = 0; t < tiles; ++t) {
        const int s = t % STAGES;
        barrier_wait(smem_u32(&full[s]), (t / STAGES) & 1);
        const unsigned a_tile = As + s * A_BYTES + wg * 64 * 128, b_tile = Bs + s * B_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            // A: 64 rows of 128 bytes, 8-row groups 1024 bytes apart; step kk is 2 kk bytes
            // along the (swizzled) rows. B: step kk starts kk rows (128 bytes each) down.
            wgmma_step(d, descriptor(a_tile + 2 * kk, 16, 1024),
                       descriptor(b_tile + 128 * kk, LEAD_B, STRIDE_B));
        }
        wgmma_commit();
        wgmma_wait<0>();
        __syncthreads();                      // every warpgroup is done with stage s
        if (threadIdx.x == 0 && t + STAGES < tiles) load(t + STAGES, s);
    }

    // Epilogue: thread t of the warpgroup holds rows 16 w + l / 4 (+ 8), w = warp in the
    // warpgroup, l = lane, and columns 8 j + 2 (l % 4) (+ 1): float2 pairs inside C when
    // the first is (N % 8 == 0).
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = row0 + wg * 64 + 16 * w + lane / 4 + 8 * h;
            const int c = col0 + 8 * j + 2 * (lane % 4);
            if (r < M && c < N) {
                float2* out = reinterpret_cast<float2*>(C + static_cast<size_t>(r) * N + c);
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

// ------------------------------------------------------------------ warp specialisation
// The same instructions, with the work split by role. Warpgroup 0 produces: one of its
// threads issues every TMA copy, waiting only for a stage to be free. Warpgroups 1 ..
// CONSUMERS consume: each waits for its stage to be full, issues the wgmma of its 64 rows
// of the tile and, when they are done, tells the producer the stage is free again (each
// stage has two mbarriers: "full", completed by the copy's bytes, and "empty", completed
// by one arrival of every consumer). No __syncthreads in the loop: the roles run apart,
// the copies of the tiles ahead in flight while the tensor cores work.
//
// The producer needs few registers and the consumers many (a 64 x 256 accumulator tile is
// 128 per thread), so the warpgroups trade them: setmaxnreg lowers the producer's to 40
// and raises the consumers' to 232 (40 x 128 + 232 x 256 = 64,512 of the SM's 65,536).

__device__ __forceinline__ void barrier_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}

template <int REGISTERS>
__device__ __forceinline__ void registers_down() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(REGISTERS));
}

template <int REGISTERS>
__device__ __forceinline__ void registers_up() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(REGISTERS));
}

// The tile of C (x: column of tiles, y: row of tiles) this block computes. Blocks start
// roughly in the order pid = blockIdx.y * gridDim.x + blockIdx.x. With GROUP > 1, pids
// walk groups of GROUP tile rows column by column instead of row by row (chapter 09's
// grouped rasterisation): the blocks running together cover a squarer part of C, so the
// rows of A and columns of B they read are fewer and stay in L2. At 8192^3 a row of 32
// tiles of 128 x 256 reads all 128 MB of B, more than the L2 holds.
template <int GROUP>
__device__ __forceinline__ int2 block_tile() {
    if constexpr (GROUP == 1) return make_int2(blockIdx.x, blockIdx.y);
    const int pid = blockIdx.y * gridDim.x + blockIdx.x;
    const int per_group = GROUP * gridDim.x;                   // blocks in a full group
    const int first = pid / per_group * GROUP;                 // its first tile row
    const int rows = min(static_cast<int>(gridDim.y) - first, GROUP);
    const int in_group = pid % per_group;
    return make_int2(in_group / rows, first + in_group % rows);
}

// A BM x 256 tile of C per block, BM = 64 CONSUMERS; K in steps of 64 through STAGES
// buffers.
template <int CONSUMERS, int STAGES, int GROUP>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), 1)
hgemm_wgmma_ws(int M, int N, int K, float alpha, const half* __restrict__ A,
               const half* __restrict__ B, float beta, float* __restrict__ C,
               const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b) {
    constexpr int BM = 64 * CONSUMERS, BN = 256, BK = 64;
    constexpr unsigned A_BYTES = BM * BK * 2, B_BYTES = BK * BN * 2;
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];

    const unsigned base = (smem_u32(smem) + 1023) & ~1023u;
    const unsigned As = base, Bs = base + STAGES * A_BYTES;
    const int wg = threadIdx.x / 128;
    const int2 tile = block_tile<GROUP>();
    const int row0 = tile.y * BM, col0 = tile.x * BN;
    const int tiles = (K + BK - 1) / BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            barrier_init(smem_u32(&full[s]), 1);
            barrier_init(smem_u32(&empty[s]), CONSUMERS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {                                   // the producer
        registers_down<40>();
        if (threadIdx.x == 0)
            for (int t = 0; t < tiles; ++t) {
                const int s = t % STAGES;
                // the stage's previous tile (t - STAGES) must have been consumed
                if (t >= STAGES) barrier_wait(smem_u32(&empty[s]), (t / STAGES - 1) & 1);
                const unsigned bar = smem_u32(&full[s]);
                barrier_expect(bar, A_BYTES + B_BYTES);
                tma_load(As + s * A_BYTES, map_a, t * BK, row0, bar);
#pragma unroll
                for (int h = 0; h < BN / 64; ++h)            // B: four 64 x 64 boxes
                    tma_load(Bs + s * B_BYTES + h * (B_BYTES / 4), map_b, col0 + 64 * h,
                             t * BK, bar);
            }
        return;
    }

    registers_up<232>();                             // a consumer: rows 64 (wg - 1) on
    const int c = wg - 1;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;
    for (int t = 0; t < tiles; ++t) {
        const int s = t % STAGES;
        barrier_wait(smem_u32(&full[s]), (t / STAGES) & 1);
        const unsigned a_tile = As + s * A_BYTES + c * 64 * 128, b_tile = Bs + s * B_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16)
            wgmma_step(d, descriptor(a_tile + 2 * kk, 16, 1024),
                       descriptor(b_tile + 128 * kk, B_BYTES / 4, 1024));
        wgmma_commit();
        wgmma_wait<0>();
        if (threadIdx.x % 128 == 0) barrier_arrive(smem_u32(&empty[s]));
    }

    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = row0 + c * 64 + 16 * w + lane / 4 + 8 * h;
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

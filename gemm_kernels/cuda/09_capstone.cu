// Chapter 09, capstone: the fastest FP32 (FFMA only: no tensor cores, no TF32) kernel
// of the series, for Hopper (sm_90).
//
// What it keeps from chapters 07-09: a BM x BN tile per block, walked along K one BK-wide
// tile per iteration of the main loop; a k-major A tile with rows padded to BM + 4; sub-tiles of 4 x 4 per thread read
// with LDS.128; the z-order lane layout that lets every LDS.128 merge its quarter-warps;
// outer-product FFMAs; float4 stores of C.
//
// What is new:
//
// 1. cp.async (SASS: LDGSTS): global -> shared copies that bypass the registers. A
//    thread issues the copy and moves on; `cp.async.commit_group` closes a group of
//    copies and `cp.async.wait_group n` waits until at most n of the thread's groups are
//    still in flight. No staging registers (chapter 08 needed 8), no STS instructions,
//    and the copies of several future tiles can be in flight at once.
//
// 2. STAGES shared buffers used as a ring. Before the loop, tiles 0..STAGES-2 are
//    requested. In iteration t the block computes on stage t % STAGES and requests tile
//    t+STAGES-1 into stage (t-1) % STAGES, the one it finished in iteration t-1. A copy
//    has STAGES-1 iterations of compute to arrive instead of one.
//
// 3. The A tile is transposed by the copy itself. A 16-byte cp.async cannot transpose
//    (its 4 floats are consecutive in global memory and land consecutively in shared
//    memory). But cp.async also copies 4 bytes, so each float of A is copied straight to
//    its transposed place As[k][m]. Per tile, a thread issues BM*BK/NT 4-byte copies of A
//    (8 for the default: 128 * 16 / 256). For every 4 of them the z-order kernel uses
//    1 LDG.128 + 4 STS.32 + 4 staging registers: the same number of shared-memory
//    writes, no registers, no waiting. (The
//    alternative, 16-byte copies of A in its natural layout As[m][k], read along k,
//    needs a different register blocking and new bank analysis; this keeps chapter 09's
//    reads.) The copy order makes both sides clean: the 32 lanes of a warp copy 4 rows x
//    8 k (lane = 8 * row + k): 4 fully used 32-byte sectors of global memory, and shared
//    words k*(BM+4) + m in banks (4k + m) % 32, k = 0..7, m = 0..3: 32 different banks,
//    1 wavefront. B keeps its layout and is copied 16 bytes at a time (VEC path,
//    N % 4 == 0) or 4 bytes at a time (scalar edge path); a warp writes 512 (128)
//    consecutive bytes of one row: conflict-free. Since A never needs 16-byte alignment,
//    the fast path needs only N % 4 == 0 (rows of B and C 16-byte aligned); K can be
//    anything.
//
// 4. Warp tiling. A warp owns a WM x WN region of the block tile; inside it the 32 lanes
//    form chapter 09's 4 x 8 z-order grid (qr from lane bits b4 b1, qc from b3 b2 b0),
//    and a lane owns MI x NJ sub-tiles of 4 x 4 (MI = WM/16, NJ = WN/32) at rows
//    wm + 16i + 4qr + 0..3 and columns wn + 32j + 4qc + 0..3. Per k a thread issues MI + NJ
//    LDS.128 for 16*MI*NJ FFMAs. Bank analysis of each LDS.128 (as in 09_zorder.cu):
//    A: a half-warp reads 2 consecutive chunks (qr = 2h + b1), lanes i and i^1 agree: the
//    quarters merge, 1 wavefront per half-warp; B: a half-warp reads 8 consecutive chunks
//    (128 bytes starting at a multiple of 32 words), lanes i and i^2 agree: merged, 1
//    wavefront per half-warp. 2 wavefronts per LDS.128, the least possible.
//
// 5. Register double buffering of the fragments: while the FFMAs of k run on
//    fa[k & 1], fb[k & 1], the LDS.128 of k+1 fill the other pair, so shared-memory
//    latency hides behind independent FFMAs. At the last k of a tile the next fragments
//    come from the next stage, so the wait for the next tile (cp.async.wait_group +
//    __syncthreads, once per tile) sits there, before the last FFMAs of the tile.
//
// 6. Grouped rasterisation (GROUP > 1). Blocks are numbered pid = by * gridDim.x + bx,
//    roughly the order in which they start. Instead of mapping pid to tile (by, bx) row
//    by row, groups of GROUP tile rows are walked column by column: the blocks running
//    at the same time cover a squarer region of C, so they share more of the rows of A
//    and columns of B they read, and more of those reads hit in L2.
//
// The default was chosen by measurement (the 4096^3 sweep on the H200, all in
// figures/data/): 128 x 128 x 16 tiles, 8 warps of 32 x 64, so 8 x 8 outputs per thread,
// 4 stages (66560 bytes of dynamic shared memory) and HOIST on. ptxas fits it in 127
// registers, so two blocks of 256 threads share an SM (16 warps). On Hopper an SM
// sub-partition issues one instruction per cycle and the FFMA pipe takes one warp
// instruction per cycle, so every non-FFMA instruction in the main loop costs an FFMA
// slot: HOIST raises the FFMA share of the default's main loop (chapter 09 counts it for
// each configuration and measures what each step is worth). The 128 x 256 x 8 tile (8 x 16
// per thread, over 200 registers, one block per SM) has a slightly larger FFMA share; at
// 4096^3 it measured slightly slower than the default (two resident blocks can overlap
// one block's per-tile wait with the other's FFMAs; one block cannot).
//
// Synchronisation, in iteration t (STAGES = S; the fragments of k are loaded at k-1):
//    k = 0:       load fragments k = 1 from stage t % S; issue the copies of tile t+S-1
//                 into stage (t-1) % S and commit them (an empty group when
//                 t+S-1 >= tiles, to keep the group count regular); FFMAs of k = 0.
//    k = 1..BK-2: load fragments k + 1; FFMAs of k.
//    k = BK-1:    cp.async.wait_group S-2: t+S groups are committed, at most S-2 in
//                 flight, so this thread's copies of tile t+1 have landed;
//                 __syncthreads(): so have everyone's; load fragments k = 0 of tile t+1
//                 from stage (t+1) % S; FFMAs of k = BK-1.
//    Write after read: the copies into stage (t-1) % S are issued at k = 0 of iteration
//    t, after every thread passed the barrier of iteration t-1, and every thread's last
//    read of that stage (fragments k = BK-1 of tile t-1, loaded at k = BK-2 of iteration
//    t-1) comes before that barrier.
//
// Edges: every copy is predicated. Source rows beyond M are clamped to row M-1, columns
// beyond N to column 0 and k beyond K to K-1, so every address formed lies inside A or
// B; the predicate (src-size 0) then makes cp.async write zeros instead of the data.
// Zeros only ever replace elements outside the matrices, so NaN and Inf inside A and B
// propagate as in cuBLAS: a zero A row (row >= M) meets real B values only in rows of C
// that are not stored, and likewise for columns; along K both operands are zero. Stores
// of C are guarded; on the VEC path (N % 4 == 0) a float4 of C is wholly inside or
// wholly outside.
//
// HOIST (template flag, on by default): the copy addresses leave the main loop. In the
// SASS of the default, each of a tile's 10 copies (8 of A, 2 of B) costs several
// instructions: clamps of k, 64-bit address products, predicates, shared addresses. With HOIST the tiles are shifted
// along K so that tile 0 holds the remainder K % BK (tile t covers k = kb + t*BK + 0..BK-1,
// kb = K - tiles*BK in (-BK, 0]); tile 0 is issued before the loop with the checks (k < 0
// copies zeros), and every later tile is whole: its copies need no K test and no clamp.
// Each thread keeps one source pointer per A row it copies and one for B, advanced by
// BK columns / BK rows per tile, and one shared base per operand, so a copy is one
// LDGSTS with an immediate offset. Rows beyond M and columns beyond N keep their clamped
// addresses (set up once) but are no longer zeroed: they only reach accumulators of
// rows / columns of C that are never stored. The main loop keeps fewer non-FFMA
// instructions than without HOIST (chapter 09 shows both SASS counts).
#include "common.cuh"
#include "vec4.cuh"

// 4-byte copy global -> shared; src_bytes = 0 writes a zero and reads nothing.
// (.ca: the 4-byte form may not bypass L1; only 16-byte copies can use .cg.)
__device__ __forceinline__ void cp_async_4(float* dst, const float* src, bool valid) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(d), "l"(src), "r"(valid ? 4 : 0) : "memory");
}

// 16-byte copy global -> shared, L2 only (.cg); both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async_16(float* dst, const float* src, bool valid) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Unpredicated forms for the HOIST path, with the shared address already a 32-bit
// shared-window address (so that a per-copy constant folds into the instruction).
__device__ __forceinline__ void cp_async_4(unsigned dst, const float* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n"
                 :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_16(unsigned dst, const float* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                 :: "r"(dst), "l"(src) : "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP, int MINB,
          bool HOIST, bool VEC>
__global__ void __launch_bounds__(32 * (BM / WM) * (BN / WN), MINB)
sgemm_capstone(int M, int N, int K, float alpha, const float* __restrict__ A,
               const float* __restrict__ B, float beta, float* __restrict__ C) {
    constexpr int WARPS_N = BN / WN;
    constexpr int NT = 32 * (BM / WM) * WARPS_N;
    constexpr int MI = WM / 16, NJ = WN / 32;   // 4x4 sub-tiles per thread, down / across
    constexpr int TM = 4 * MI, TN = 4 * NJ;     // outputs per thread
    constexpr int LDA = BM + 4;                 // padded row of the k-major A tile
    constexpr int A_STAGE = BK * LDA, B_STAGE = BK * BN;   // floats per stage
    // A copies: element e of the tile -> k = 8 * (e / (8*BM)) + e % 8, m = (e / 8) % BM.
    constexpr int A_PER = BM * BK / NT;         // 4-byte copies per thread per tile
    constexpr int A_STEP = NT / 8;              // tile rows between them
    // B copies: BW floats each, B_CPR of them per tile row.
    constexpr int BW = VEC ? 4 : 1;
    constexpr int B_CPR = BN / BW;
    constexpr int B_PER = BK * B_CPR / NT;
    constexpr int B_STEP = NT / B_CPR;          // tile rows between a thread's copies
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 32 == 0, "warp tiling");
    static_assert(BK % 8 == 0 && BM % A_STEP == 0 && (BM * BK) % NT == 0, "A copy layout");
    static_assert(NT % B_CPR == 0 && BK % B_STEP == 0, "B copy layout");
    static_assert(STAGES >= 2, "at least two stages");

    extern __shared__ __align__(16) float smem[];
    float* const As = smem;                        // [STAGES][BK][LDA]
    float* const Bs = smem + STAGES * A_STAGE;     // [STAGES][BK][BN]

    // ---- which tile of C this block computes
    int by = blockIdx.y, bx = blockIdx.x;
    if constexpr (GROUP > 1) {
        const int pid = blockIdx.y * gridDim.x + blockIdx.x;
        const int per_group = GROUP * gridDim.x;          // blocks in a full group
        const int first = pid / per_group * GROUP;        // its first tile row
        const int rows = min(static_cast<int>(gridDim.y) - first, GROUP);
        const int in_group = pid % per_group;
        by = first + in_group % rows;                     // down the group's rows first
        bx = in_group / rows;                             // then across
    }
    const int row0 = by * BM, col0 = bx * BN;

    // ---- the thread's outputs: warp tile, then the z-order lane grid
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int qr = ((lane >> 1) & 1) | ((lane >> 3) & 2);   // 0..3, from lane bits b4 b1
    const int qc = (lane & 1) | ((lane >> 1) & 6);          // 0..7, from lane bits b3 b2 b0
    const int am = (warp / WARPS_N) * WM + 4 * qr;          // + 16*i: rows in the tile
    const int bn = (warp % WARPS_N) * WN + 4 * qc;          // + 32*j: columns in the tile

    // ---- the thread's copies. Everything that does not change along K is computed
    // here, once: the source row offsets (rows beyond M clamped to row M-1, columns
    // beyond N to column 0, so that every address formed is inside the matrix) and
    // whether the row / column is real. Per tile only the k index remains (clamped to
    // K-1 in the same way), so each copy costs a few integer instructions.
    const int a_k = t % 8, a_m = t / 8;   // copy i: tile row a_m + (i*A_STEP) % BM,
                                          //         tile k a_k + 8 * ((i*A_STEP) / BM)
    int a_off[A_PER];                     // offset of the copy's source row in A
    unsigned a_row_ok = 0;                // bit i: that row is inside A
#pragma unroll
    for (int i = 0; i < A_PER; ++i) {
        const int r = row0 + a_m + (i * A_STEP) % BM;
        a_off[i] = min(r, M - 1) * K;
        a_row_ok |= (r < M ? 1u : 0u) << i;
    }
    const int b_k = t / B_CPR, b_n = t % B_CPR * BW;   // copy i: tile row b_k + i*B_STEP
    const bool b_col_ok = col0 + b_n < N;
    const int b_col = b_col_ok ? col0 + b_n : 0;
    const int tiles = (K + BK - 1) / BK;

    auto issue_tile = [&](int tile, int stage) {
        const int k0 = tile * BK;
        float* const as = As + stage * A_STAGE;
        float* const bs = Bs + stage * B_STAGE;
#pragma unroll
        for (int i = 0; i < A_PER; ++i) {
            const int m = a_m + (i * A_STEP) % BM;
            const int k = a_k + 8 * ((i * A_STEP) / BM);
            const bool ok = ((a_row_ok >> i) & 1u) && k0 + k < K;
            cp_async_4(as + k * LDA + m, A + a_off[i] + min(k0 + k, K - 1), ok);
        }
#pragma unroll
        for (int i = 0; i < B_PER; ++i) {
            const int k = b_k + i * B_STEP;
            const bool ok = b_col_ok && k0 + k < K;
            const float* src = B + min(k0 + k, K - 1) * N + b_col;
            if constexpr (VEC) cp_async_16(bs + k * BN + b_n, src, ok);
            else               cp_async_4(bs + k * BN + b_n, src, ok);
        }
    };

    // Fragments of k: A rows am + 16i + 0..3, B columns bn + 32j + 0..3.
    auto load_frags = [&](float (&fa)[TM], float (&fb)[TN], int stage, int k) {
        const float* as = As + stage * A_STAGE + k * LDA + am;
        const float* bs = Bs + stage * B_STAGE + k * BN + bn;
#pragma unroll
        for (int i = 0; i < MI; ++i) {
            const float4 v = *reinterpret_cast<const float4*>(as + 16 * i);
            fa[4 * i] = v.x; fa[4 * i + 1] = v.y; fa[4 * i + 2] = v.z; fa[4 * i + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
            const float4 v = *reinterpret_cast<const float4*>(bs + 32 * j);
            fb[4 * j] = v.x; fb[4 * j + 1] = v.y; fb[4 * j + 2] = v.z; fb[4 * j + 3] = v.w;
        }
    };

    float acc[TM][TN] = {};
    float fa[2][TM], fb[2][TN];

    // ---- HOIST variant (see the top of the file): tile t covers k = kb + t*BK + 0..BK-1,
    // kb = K - tiles*BK in (-BK, 0]; only tile 0 is checked along K, later tiles are whole.
    // A thread's A copies come from A_ROWS rows (a_m + A_STEP*r) and, for BK > 8, from
    // k blocks 8 apart in each row: one pointer per row, the k blocks at +8 floats (an
    // immediate offset). Its B copies are B_STEP rows apart: one pointer, + i*B_STEP*N.
    constexpr int A_ROWS = BM / A_STEP;
    [[maybe_unused]] const int kb = K - tiles * BK;
    [[maybe_unused]] const float* a_src[A_ROWS];   // row r's source in the next whole tile
    [[maybe_unused]] const float* b_src = nullptr; // first B row of the next whole tile
    [[maybe_unused]] const int b_rows = B_STEP * N;   // between a thread's B copies
    [[maybe_unused]] const unsigned a_dst =
        static_cast<unsigned>(__cvta_generic_to_shared(As + a_k * LDA + a_m));
    [[maybe_unused]] const unsigned b_dst =
        static_cast<unsigned>(__cvta_generic_to_shared(Bs + b_k * BN + b_n));
    // Tile 0, the only one that is checked along K.
    [[maybe_unused]] auto issue_first = [&] {
#pragma unroll
        for (int i = 0; i < A_PER; ++i) {
            const int m = a_m + (i * A_STEP) % BM;
            const int k = kb + a_k + 8 * ((i * A_STEP) / BM);
            cp_async_4(As + (k - kb) * LDA + m, A + a_off[i] + max(k, 0), k >= 0);
        }
#pragma unroll
        for (int r = 0; r < A_ROWS; ++r) a_src[r] = A + a_off[r] + kb + a_k + BK;  // tile 1
#pragma unroll
        for (int i = 0; i < B_PER; ++i) {
            const int k = kb + b_k + i * B_STEP;
            const float* src = B + max(k, 0) * N + b_col;
            if constexpr (VEC) cp_async_16(Bs + (k - kb) * BN + b_n, src, k >= 0);
            else               cp_async_4(Bs + (k - kb) * BN + b_n, src, k >= 0);
        }
        b_src = B + (kb + b_k + BK) * N + b_col;    // tile 1 (used only when tiles > 1)
    };
    // A whole tile into stage `stage`: no predicates, no clamps; then advance.
    [[maybe_unused]] auto issue_next = [&](int stage) {
        const unsigned ad = a_dst + stage * (A_STAGE * 4);
        const unsigned bd = b_dst + stage * (B_STAGE * 4);
#pragma unroll
        for (int i = 0; i < A_PER; ++i)
            cp_async_4(ad + 4 * ((i % A_ROWS) * A_STEP + 8 * (i / A_ROWS) * LDA),
                       a_src[i % A_ROWS] + 8 * (i / A_ROWS));
#pragma unroll
        for (int r = 0; r < A_ROWS; ++r) a_src[r] += BK;
#pragma unroll
        for (int i = 0; i < B_PER; ++i) {
            if constexpr (VEC) cp_async_16(bd + 4 * i * B_STEP * BN, b_src + i * b_rows);
            else               cp_async_4(bd + 4 * i * B_STEP * BN, b_src + i * b_rows);
        }
        b_src += BK * N;
    };

    // ---- prologue: request tiles 0..STAGES-2, wait for tile 0
    if constexpr (HOIST) {
        issue_first();
        cp_async_commit();
#pragma unroll
        for (int s = 1; s < STAGES - 1; ++s) {
            if (s < tiles) issue_next(s);
            cp_async_commit();
        }
    } else {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < tiles) issue_tile(s, s);
            cp_async_commit();
        }
    }
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_frags(fa[0], fb[0], 0, 0);

    int rs = 0;             // stage being computed: tile % STAGES
    int ws = STAGES - 1;    // stage being filled: (tile + STAGES - 1) % STAGES
    for (int tile = 0; tile < tiles; ++tile) {
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k == BK - 1) {   // the next tile must be in shared memory for everyone
                cp_async_wait<STAGES - 2>();
                __syncthreads();
            }
            const int next_stage = k < BK - 1 ? rs : (rs + 1 == STAGES ? 0 : rs + 1);
            load_frags(fa[(k + 1) & 1], fb[(k + 1) & 1], next_stage, (k + 1) % BK);
            if (k == 0) {
                if (tile + STAGES - 1 < tiles) {
                    if constexpr (HOIST) issue_next(ws);
                    else                 issue_tile(tile + STAGES - 1, ws);
                }
                cp_async_commit();
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] = fmaf(fa[k & 1][i], fb[k & 1][j], acc[i][j]);
        }
        rs = rs + 1 == STAGES ? 0 : rs + 1;
        ws = ws + 1 == STAGES ? 0 : ws + 1;
    }
    // (The fragments loaded at the last k of the last tile come from a stage nobody
    // filled; they are never used. No copy is in flight: tile tiles-1 was waited for.)

    // ---- C = alpha * acc + beta * C, guarded at the edges
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + am + 16 * (i / 4) + i % 4;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
            const int c = col0 + bn + 32 * j;
            float* out = C + r * N + c;
            if constexpr (VEC) {
                if (c < N)
                    gemm_epilogue4(make_float4(acc[i][4 * j], acc[i][4 * j + 1],
                                               acc[i][4 * j + 2], acc[i][4 * j + 3]),
                                   alpha, beta, out);
            } else {
#pragma unroll
                for (int jj = 0; jj < 4; ++jj)
                    if (c + jj < N)
                        out[jj] = gemm_epilogue(acc[i][4 * j + jj], alpha, beta, out + jj);
            }
        }
    }
}

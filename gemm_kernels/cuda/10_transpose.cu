// Chapter 10: matrix transpose, a kernel that only moves data.
//
// Every kernel here takes (rows, cols, in, out) with `in` row-major rows x cols.
// "copy" kernels write out = in (rows x cols); "transpose" kernels write out = in^T,
// a cols x rows row-major matrix with out[c][r] = in[r][c].
//
// The grid tiles `in` with TILE x TILE squares: blockIdx.x walks the tile columns,
// blockIdx.y the tile rows. A block has TILE x ROWS threads, so each thread handles
// TILE / ROWS elements of its tile column, ROWS rows apart (the "stride" loop).
// Every access is bounds-checked: any rows, cols >= 1 work, ragged edges included.
// Offsets are computed in size_t so matrices with more than 2^31 elements work.
#include "common.cuh"

// ------------------------------------------------------------------ baselines

// The copy every transpose is measured against: the same tiles, the same threads,
// reads and writes both coalesced (a warp touches consecutive addresses).
template <typename T, int TILE, int ROWS>
__global__ void copy(int rows, int cols, const T* __restrict__ in, T* __restrict__ out) {
    const int c = blockIdx.x * TILE + threadIdx.x;
    for (int dy = 0; dy < TILE; dy += ROWS) {
        const int r = blockIdx.y * TILE + threadIdx.y + dy;
        if (r < rows && c < cols)
            out[(size_t)r * cols + c] = in[(size_t)r * cols + c];
    }
}

// The same copy with a stop in shared memory: what a tile costs when nothing is
// rearranged (one extra store, one extra load and a barrier per element).
template <typename T, int TILE, int ROWS>
__global__ void copy_smem(int rows, int cols, const T* __restrict__ in, T* __restrict__ out) {
    __shared__ T tile[TILE][TILE];
    const int c = blockIdx.x * TILE + threadIdx.x;
    for (int dy = 0; dy < TILE; dy += ROWS) {
        const int r = blockIdx.y * TILE + threadIdx.y + dy;
        if (r < rows && c < cols)
            tile[threadIdx.y + dy][threadIdx.x] = in[(size_t)r * cols + c];
    }
    __syncthreads();
    for (int dy = 0; dy < TILE; dy += ROWS) {
        const int r = blockIdx.y * TILE + threadIdx.y + dy;
        if (r < rows && c < cols)
            out[(size_t)r * cols + c] = tile[threadIdx.y + dy][threadIdx.x];
    }
}

// ------------------------------------------------------------------ transposes

// Naive: lanes of a warp read consecutive elements of one row of `in` (coalesced),
// then write them down one column of `out`: 32 lanes, 32 rows of `out`, 32 separate
// 32-byte sectors per store instruction of which 4 (float) or 8 (double) bytes are used.
template <typename T, int TILE, int ROWS>
__global__ void transpose_naive(int rows, int cols, const T* __restrict__ in,
                                T* __restrict__ out) {
    const int c = blockIdx.x * TILE + threadIdx.x;
    for (int dy = 0; dy < TILE; dy += ROWS) {
        const int r = blockIdx.y * TILE + threadIdx.y + dy;
        if (r < rows && c < cols)
            out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
    }
}

// Shared tile: read a tile row by row (coalesced), and write the transposed tile
// row by row (coalesced) by reading the shared tile column by column. The column
// read tile[threadIdx.x][...] has lanes TILE words apart: with TILE = 32 all 32 lanes
// of a warp hit the same bank, a 32-way conflict.
template <typename T, int TILE, int ROWS>
__global__ void transpose_smem(int rows, int cols, const T* __restrict__ in,
                               T* __restrict__ out) {
    __shared__ T tile[TILE][TILE];
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const int tx = threadIdx.x;
    for (int dy = 0; dy < TILE; dy += ROWS) {
        const int ty = threadIdx.y + dy;
        if (row0 + ty < rows && col0 + tx < cols)
            tile[ty][tx] = in[(size_t)(row0 + ty) * cols + col0 + tx];
    }
    __syncthreads();
    // This block writes rows col0.. of `out` (columns of `in`), columns row0.. of `out`.
    for (int dy = 0; dy < TILE; dy += ROWS) {
        const int ty = threadIdx.y + dy;
        if (col0 + ty < cols && row0 + tx < rows)
            out[(size_t)(col0 + ty) * rows + row0 + tx] = tile[tx][ty];
    }
}

// Padded tile: the same kernel with PAD unused elements at the end of each tile row.
// With a row length of TILE + 1 words, walking down a column moves one bank over,
// so the column read spreads over all 32 banks.
//
// Two knobs for ragged shapes (ORDER = 0, STACK = 1 is the kernel just described;
// the registry's default, ORDER = 1, STACK = 2, won the H200 sweep at 8191 x 4097).
// When `rows` is odd, the rows of `out` are not sector aligned: the TILE elements a
// block writes into one row of `out` start and end inside 32-byte sectors
// that the neighbouring block (the next tile down a column of `in`) fills in.
//   STACK = 2: a block takes two tiles, one under the other (2*TILE rows of `in`), and
//     writes 2*TILE consecutive elements of each row of `out`: half as many of these
//     shared sectors, and each block completes the ones in the middle itself.
//   ORDER = 1: blockIdx.x walks down the tile rows (blockIdx.y across the columns),
//     so the block that fills in the other part of a sector is the next one launched,
//     not one a whole row of tiles later.
template <typename T, int TILE, int ROWS, int PAD, int ORDER = 0, int STACK = 1>
__global__ void transpose_padded(int rows, int cols, const T* __restrict__ in,
                                 T* __restrict__ out) {
    constexpr int H = STACK * TILE;                      // tile rows per block
    __shared__ T tile[H][TILE + PAD];
    const int row0 = (ORDER == 0 ? blockIdx.y : blockIdx.x) * H;
    const int col0 = (ORDER == 0 ? blockIdx.x : blockIdx.y) * TILE;
    const int tx = threadIdx.x;
    for (int dy = 0; dy < TILE; dy += ROWS) {
#pragma unroll
        for (int s = 0; s < STACK; ++s) {              // row y of tile s
            const int y = s * TILE + threadIdx.y + dy;
            if (row0 + y < rows && col0 + tx < cols)
                tile[y][tx] = in[(size_t)(row0 + y) * cols + col0 + tx];
        }
    }
    __syncthreads();
    // Rows col0 + ty of `out` (TILE of them), columns row0 .. row0 + H - 1; the lanes
    // of a warp take consecutive columns, STACK tiles one after the other.
    for (int dy = 0; dy < TILE; dy += ROWS) {
        const int ty = threadIdx.y + dy;
#pragma unroll
        for (int s = 0; s < STACK; ++s) {
            const int x = s * TILE + tx;
            if (col0 + ty < cols && row0 + x < rows)
                out[(size_t)(col0 + ty) * rows + row0 + x] = tile[x][ty];
        }
    }
}

// Diagonal block order (against "partition camping", where the blocks running at one
// time all hit the same DRAM partition). The padded kernel with one change: which
// tile a block takes. Blocks are numbered in launch order, b = x + gridDim.x * y, and
// consecutive numbers go down a diagonal of tiles, (t, 0), (t+1, 1), (t+2, 2), ...,
// so blocks that run together read different tile rows and write different tile
// columns. The map is a bijection for any grid: for each tile row y, the tile columns
// (q + y) mod gridDim.x, q = 0..gridDim.x-1, are all different.
// (Shifting x by y alone, x' = (x + y) mod gridDim.x, keeps every block of one launch
// row inside one tile row, so it changes the order but not what runs together.)
template <typename T, int TILE, int ROWS, int PAD>
__global__ void transpose_diagonal(int rows, int cols, const T* __restrict__ in,
                                   T* __restrict__ out) {
    __shared__ T tile[TILE][TILE + PAD];
    const int b = blockIdx.x + gridDim.x * blockIdx.y;
    const int tile_y = b % gridDim.y;
    const int tile_x = (b / gridDim.y + tile_y) % gridDim.x;
    const int row0 = tile_y * TILE, col0 = tile_x * TILE;
    const int tx = threadIdx.x;
    for (int dy = 0; dy < TILE; dy += ROWS) {
        const int ty = threadIdx.y + dy;
        if (row0 + ty < rows && col0 + tx < cols)
            tile[ty][tx] = in[(size_t)(row0 + ty) * cols + col0 + tx];
    }
    __syncthreads();
    for (int dy = 0; dy < TILE; dy += ROWS) {
        const int ty = threadIdx.y + dy;
        if (col0 + ty < cols && row0 + tx < rows)
            out[(size_t)(col0 + ty) * rows + row0 + tx] = tile[tx][ty];
    }
}

// ------------------------------------------------------------------ beyond

// VEC elements of T that move as one 4-, 8- or 16-byte access.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
    T v[VEC];
};

template <int BYTES>
__device__ __forceinline__ bool aligned_to(const void* p) {
    return reinterpret_cast<unsigned long long>(p) % BYTES == 0;
}

// Fast transpose: more bytes per thread, fewer instructions per byte.
//
// A block has (TILE / VEC) x ROWS threads, VEC = VEC_BYTES / sizeof(T). On the vector
// path each thread reads VEC consecutive elements of a tile row with one 8- or
// 16-byte load, scatters them into the shared tile, and after the barrier gathers VEC
// elements of one tile column (= VEC consecutive elements of a row of `out`) and
// writes them with one vector store.
//
// The vector paths need aligned vectors: VEC_LOAD is chosen (by the launcher, from the
// shape) only when cols % VEC == 0, VEC_STORE only when rows % VEC == 0, and both are
// also checked against the pointers at run time (one test for the whole grid). Then a
// vector never straddles the matrix edge: it is either wholly inside or wholly
// outside, so one bounds check per vector is enough. Otherwise the scalar path runs:
// the same threads renumbered as a TILE-wide block (warps along tile rows), the
// classic padded transpose.
//
// (Moving aligned pairs on rows of odd length, one element peeled off where a row piece
// starts odd, was tried for the ragged float case and measured no faster than the
// scalar path; block order and two tiles per block helped instead: transpose_padded.)
//
// Shared tile row length TILE + PAD. For float, TILE = 32, VEC = 4, PAD = 1 a warp is
// 8 x 4 threads and both the scattered store (banks 4*tx + j + ty) and the gathering
// load (banks 4*tx + ty, as 33 = 1 mod 32) cover 32 different banks.
template <typename T, int TILE, int ROWS, int VEC_BYTES, int PAD, bool VEC_LOAD, bool VEC_STORE>
__global__ void transpose_fast(int rows, int cols, const T* __restrict__ in,
                               T* __restrict__ out) {
    constexpr int VEC = VEC_BYTES / sizeof(T);
    constexpr int LANES = TILE / VEC;                    // blockDim.x
    constexpr int THREADS = LANES * ROWS;
    constexpr int SROWS = THREADS / TILE;                // rows per pass, scalar path
    static_assert(VEC >= 1 && TILE % VEC == 0 && THREADS % TILE == 0, "bad tile shape");
    using V = Pack<T, VEC>;

    __shared__ T tile[TILE][TILE + PAD];
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * LANES + tx;
    const int sx = tid % TILE, sy = tid / TILE;          // scalar-path renumbering

    // Read tile rows row0 + r, columns col0 .. col0 + TILE - 1.
    if (VEC_LOAD && aligned_to<VEC_BYTES>(in)) {
#pragma unroll
        for (int i = 0; i < TILE / ROWS; ++i) {
            const int r = ty + i * ROWS;
            const int gr = row0 + r, gc = col0 + tx * VEC;
            if (gr < rows && gc < cols) {
                const V v = *reinterpret_cast<const V*>(in + (size_t)gr * cols + gc);
#pragma unroll
                for (int j = 0; j < VEC; ++j) tile[r][tx * VEC + j] = v.v[j];
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < TILE / SROWS; ++i) {
            const int r = sy + i * SROWS;
            const int gr = row0 + r, gc = col0 + sx;
            if (gr < rows && gc < cols) tile[r][sx] = in[(size_t)gr * cols + gc];
        }
    }
    __syncthreads();

    // Write rows col0 + r of `out` (column r of the tile), columns row0 .. row0 + TILE - 1.
    if (VEC_STORE && aligned_to<VEC_BYTES>(out)) {
#pragma unroll
        for (int i = 0; i < TILE / ROWS; ++i) {
            const int r = ty + i * ROWS;
            const int gr = col0 + r, gc = row0 + tx * VEC;
            if (gr < cols && gc < rows) {
                V v;
#pragma unroll
                for (int j = 0; j < VEC; ++j) v.v[j] = tile[tx * VEC + j][r];
                *reinterpret_cast<V*>(out + (size_t)gr * rows + gc) = v;
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < TILE / SROWS; ++i) {
            const int r = sy + i * SROWS;
            const int gr = col0 + r, gc = row0 + sx;
            if (gr < cols && gc < rows) out[(size_t)gr * rows + gc] = tile[sx][r];
        }
    }
}

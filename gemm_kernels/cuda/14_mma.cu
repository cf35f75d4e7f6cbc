// Chapter 14: below WMMA. The tensor cores' own warp instruction, mma.sync, fed by
// ldmatrix from a swizzled shared-memory tile that a cp.async pipeline fills.
//
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 multiplies a 16 x 16 FP16 tile of A
// by a 16 x 8 tile of B and adds a 16 x 8 FP32 tile, in one instruction of the warp
// (SASS: HMMA.16816.F32). Unlike a WMMA fragment, the layout of its registers is
// documented (PTX ISA, "Matrix Fragments for mma.m16n8k16"): lane l holds the elements
// of rows l / 4 and l / 4 + 8, columns 2 (l % 4) and 2 (l % 4) + 1, of its tiles, so the
// epilogue can write C straight from the accumulators.
//
// The fragments come from shared memory through ldmatrix: one instruction of the warp
// reads four 8 x 8 matrices of 16-bit values, lanes 8i to 8i+7 giving the addresses of
// the 8 rows (16 bytes each) of matrix i, and leaves each lane holding exactly the
// elements the mma wants (.trans for B, stored k-major). Each 8-lane phase reads 8 rows
// of 16 bytes: free of bank conflicts only if those 8 rows start in 8 different groups of
// 4 banks. Rows of a tile are 64 bytes (A: BK = 32 halves) or 256 bytes (B: BN = 128
// halves) long, so without help 4 or all 8 of them fall on the same banks. Chapter 13
// padded the rows; here the 16-byte chunks of each row are permuted instead (an XOR
// swizzle): chunk c of row r is stored at chunk c ^ f(r), which sends the 8 rows of every
// matrix to 8 different bank groups and costs no extra bytes.
//
// A block of WARPS_M x WARPS_N warps computes a BM x BN tile of C; each warp a
// (BM / WARPS_M) x (BN / WARPS_N) region, as a grid of 16 x 8 mma tiles. The larger a
// warp's region, the more mma each fragment loaded from shared memory feeds (a 64 x 64
// region: 128 bytes of ldmatrix per mma; 64 x 32: 192), and the more registers its
// accumulators take. K goes in steps of BK through a ring of STAGES
// shared-memory buffers: cp.async copies (16 bytes each, zero-filled outside A and B) for
// the tiles STAGES - 1 steps ahead are in flight while the tensor cores work on the
// current one (chapter 09's pipeline).
//
// Shapes: 16-byte copies need rows that are whole 16-byte chunks, so K % 8 == 0 and
// N % 8 == 0 (the launcher refuses other shapes with that reason); M, N and K need not be
// multiples of the tile. On GPUs older than sm_80 (a T4), the same kernel compiles with
// plain 16-byte loads in place of cp.async and two m16n8k8 mma per m16n8k16 step.
#include <cuda_fp16.h>

// ------------------------------------------------------------------ the swizzle
// The 16-byte chunk where chunk `c` of row `r` is stored, in a tile whose rows are
// CHUNKS chunks long. The XOR takes as many bits of the row as make the 8 rows of one
// ldmatrix matrix land in 8 different 128-byte-line positions: rows of 4 chunks (64
// bytes) share a 128-byte line two by two, so the row's bits 1-2 go in; rows of 8 or more
// chunks start a line each, so bits 0-2 go in.
template <int CHUNKS, bool SWIZZLE>
__device__ __forceinline__ int chunk_at(int r, int c) {
    if constexpr (!SWIZZLE) return c;
    else if constexpr (CHUNKS == 4) return c ^ ((r >> 1) & 3);
    else return c ^ (r & 7);
}

#include "14_mma_kernel.cuh"

// The order in which a GEMM's blocks take their tiles of C (chapter 09's grouped
// rasterisation, for the tensor-core kernels). Blocks start roughly in the order
// pid = blockIdx.y * gridDim.x + blockIdx.x. With GROUP == 1 block (x, y) takes tile
// (x, y): the blocks running together cover a few whole rows of tiles, so together they
// read every column of B. With GROUP > 1 the pids walk groups of GROUP tile rows column
// by column: the blocks running together cover a squarer part of C, read fewer rows of A
// and columns of B, and find more of them in L2. (Chapter 15's kernels carry their own
// copy of this function, recorded before it moved here.)
#pragma once

template <int GROUP>
__device__ __forceinline__ int2 grouped_tile() {
    if constexpr (GROUP == 1) return make_int2(blockIdx.x, blockIdx.y);
    const int pid = blockIdx.y * gridDim.x + blockIdx.x;
    const int per_group = GROUP * gridDim.x;                   // blocks in a full group
    const int first = pid / per_group * GROUP;                 // its first tile row
    const int rows = min(static_cast<int>(gridDim.y) - first, GROUP);
    const int in_group = pid % per_group;
    return make_int2(in_group / rows, first + in_group % rows);
}

// Chapter 00: a measured ceiling for the L2 cache.
//
// The buffer `in` (rows x cols floats, read as one flat array) is small enough to stay
// in the L2. Each thread owns one 16-byte vector of it (four consecutive floats) and
// loads that vector PASSES times, with loads that skip the SM's L1: the first pass
// brings the buffer from DRAM into the L2, every later pass is served by the L2. Timed
// at several PASSES, the time grows by one L2 pass per extra pass, and the slope of
// time over PASSES is the L2's read bandwidth (the first pass and the launch drop out).
//
// Nothing may be optimised away: the PASSES loaded copies of a word are combined with
// a bitwise OR (x | x == x whatever the bits are), and the result is written once to
// `out`, so out == in is also the correctness check. Every launch writes the buffer
// once: PASSES reads and one write of rows * cols * 4 bytes.
//
// Signature of the series' copy kernels: (rows, cols, in, out), row-major, any
// rows, cols >= 1; in and out 16-byte aligned (the launcher checks).

// ld.relaxed.gpu: a load that must see the writes of every SM of the GPU, so it is
// served by the L2 (an SM's L1 is not coherent with the other SMs'). A weaker load would
// not do: ptxas merges repeated plain loads of one address, ld.global.cg included, into
// one, and `asm volatile` only stops the compiler before it (NVVM), not ptxas.
__device__ __forceinline__ uint4 load16(const float* p) {
    uint4 v;
    asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ unsigned load4(const float* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

template <typename T, int PASSES>
__global__ void l2_read(int rows, int cols, const T* __restrict__ in, T* __restrict__ out) {
    static_assert(sizeof(T) == 4, "l2_read moves 4-byte words");
    const size_t n = (size_t)rows * cols;
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i + 4 <= n) {
        uint4 acc = load16(in + i);
        // Unrolled by 8: eight independent loads in flight per thread, enough to cover
        // the L2's latency with two thousand threads per SM, at 32 registers of data.
#pragma unroll 8
        for (int p = 1; p < PASSES; ++p) {
            const uint4 v = load16(in + i);
            acc.x |= v.x;
            acc.y |= v.y;
            acc.z |= v.z;
            acc.w |= v.w;
        }
        *reinterpret_cast<uint4*>(out + i) = acc;
    } else {
        // The last one to three words when rows * cols is not a multiple of 4.
        for (size_t j = i; j < n; ++j) {
            unsigned acc = 0;
            for (int p = 0; p < PASSES; ++p)
                acc |= load4(in + j);
            out[j] = __uint_as_float(acc);
        }
    }
}

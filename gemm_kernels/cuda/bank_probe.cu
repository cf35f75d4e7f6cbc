// Hardware probe for the shared-memory bank model (gemm_kernels/banks.py).
//
// Launched with exactly one warp (32 threads, one block). Lane i reads W bytes of shared
// memory at byte offset offsets[i], with ONE load instruction (LDS, LDS.64 or LDS.128),
// or does nothing when offsets[i] < 0. Nsight Compute then counts the wavefronts of that
// single warp instruction (l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum).
//
// The shared array is first filled with its own word indices (smem[w] = w). Those are
// stores (counted under op_st, not op_ld), and they let the host check that every lane
// read the address it was given: out[i] = sum of the W/4 word indices it loaded, or -1.

constexpr int PROBE_SMEM_BYTES = 32768;
constexpr int PROBE_SMEM_WORDS = PROBE_SMEM_BYTES / 4;

template <int W> struct ProbeVec;
template <> struct ProbeVec<4>  { using T = float;  };
template <> struct ProbeVec<8>  { using T = float2; };
template <> struct ProbeVec<16> { using T = float4; };

__device__ __forceinline__ float probe_sum(float v)  { return v; }
__device__ __forceinline__ float probe_sum(float2 v) { return v.x + v.y; }
__device__ __forceinline__ float probe_sum(float4 v) { return (v.x + v.y) + (v.z + v.w); }

template <int W>
__global__ void __launch_bounds__(32) bank_probe(const int* __restrict__ offsets,
                                                 float* __restrict__ out) {
    static_assert(W == 4 || W == 8 || W == 16, "W is the bytes per lane: 4, 8 or 16");
    using T = typename ProbeVec<W>::T;
    __shared__ __align__(16) float smem[PROBE_SMEM_WORDS];

    const int lane = threadIdx.x;
    for (int w = lane; w < PROBE_SMEM_WORDS; w += 32)
        smem[w] = static_cast<float>(w);
    __syncthreads();

    const int off = offsets[lane];
    float result = -1.f;
    if (off >= 0) {
        // The single shared-memory load of the kernel: one LDS / LDS.64 / LDS.128.
        const T v = *reinterpret_cast<const T*>(reinterpret_cast<const char*>(smem) + off);
        result = probe_sum(v);
    }
    out[lane] = result;
}

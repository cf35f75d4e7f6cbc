// Enough of CUDA C++ to run a student's kernel on the CPU (see cpu_step.py): every
// thread of a block is a host thread, blocks run one after another, __shared__ arrays
// are static storage (one block at a time uses them) and __syncthreads() is a barrier
// of the block's threads. It runs the kernel's arithmetic and indexing as written, so a
// wrong index, a missing bounds check or a missing barrier shows; it says nothing about
// speed, and inline PTX (asm) does not exist here.
#pragma once
#include <pthread.h>

#include <cmath>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
extern thread_local uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
constexpr int warpSize = 32;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
#define __constant__ static const

struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// CUDA's min/max take any mix of integer and floating types.
template <class A, class B> inline auto min(A a, B b) -> decltype(a < b ? a : b) {
    return b < a ? b : a;
}
template <class A, class B> inline auto max(A a, B b) -> decltype(a < b ? a : b) {
    return a < b ? b : a;
}

// The block's barrier. Threads that have returned from the kernel no longer count, as
// on the GPU, so `if (row >= M) return;` before a __syncthreads() does not hang here.
// The count is kept under a mutex; the waiting is on the generation number alone (a
// futex), so a release wakes every thread at once without a queue for the mutex.
struct BlockBarrier {
    std::mutex m;
    int live = 0, arrived = 0;
    std::atomic<unsigned> generation{0};
    void release() {               // with m held
        arrived = 0;
        generation.fetch_add(1);
        generation.notify_all();
    }
    void wait() {
        unsigned g;
        {
            std::lock_guard<std::mutex> lock(m);
            g = generation.load();
            if (++arrived == live) { release(); return; }
        }
        generation.wait(g);
    }
    void leave() {
        std::lock_guard<std::mutex> lock(m);
        if (--live > 0 && arrived == live) release();
    }
};
extern BlockBarrier cpu_block_barrier;
inline void __syncthreads() { cpu_block_barrier.wait(); }

// Warp shuffles through one slot per thread and two block barriers: right when every
// live thread of the block calls them the same number of times (a reduction that every
// warp runs in full, as in chapter 12's gemv); a warp that has left the kernel as a
// whole does not count, as for __syncthreads().
inline float cpu_shuffle_slots[1024];
inline float __shfl_xor_sync(unsigned, float value, int lane_mask, int = warpSize) {
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    cpu_shuffle_slots[t] = value;
    cpu_block_barrier.wait();
    const float other = cpu_shuffle_slots[(t & ~31u) | ((t & 31u) ^ unsigned(lane_mask))];
    cpu_block_barrier.wait();
    return other;
}
// Lane l gets lane l + delta's value, or its own where l + delta passes the warp's end
// (width 32), as on the GPU.
inline float __shfl_down_sync(unsigned, float value, unsigned delta, int = warpSize) {
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    cpu_shuffle_slots[t] = value;
    cpu_block_barrier.wait();
    const float other = (t & 31u) + delta < 32u ? cpu_shuffle_slots[t + delta] : value;
    cpu_block_barrier.wait();
    return other;
}

// The one-launch ending of a split-K kernel (split_k.cuh): blocks run one after another
// here, so every store of a block is seen by the next, and the last block of an output
// range is the one whose count reaches gridDim.z - 1, as on the GPU. The count is
// atomic all the same: the block's threads are host threads.
inline void __threadfence() {}
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }   // streaming: a hint only
inline unsigned atomicAdd(unsigned* p, unsigned v) {
    return std::atomic_ref<unsigned>(*p).fetch_add(v);
}

// Barriers of one warp: here the block's barrier, so right when every live warp of the
// block calls it the same number of times (as in chapter 13's epilogue).
inline void __syncwarp(unsigned = 0xffffffffu) { cpu_block_barrier.wait(); }

// Half precision: the compiler's own IEEE binary16 type, rounded to nearest like
// __float2half.
using half = _Float16;
inline half __float2half(float f) { return static_cast<half>(f); }
inline float __half2float(half h) { return static_cast<float>(h); }
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

// WMMA (chapter 13). On a GPU the 32 lanes of a warp share a fragment, each holding
// some of its elements; here every lane holds the whole tile (num_elements covers it
// all, so element-wise loops over x[] stay right) and does the whole load or product
// itself. Every load and store first checks that all lanes of the warp passed the same
// pointer and stride, since a fragment belongs to the whole warp: a kernel whose lanes
// disagree (a warp index computed as if a warp were 8 x 8 threads) is stopped with a
// message instead of giving the GPU's undefined result. Stores are made by lane 0 only.
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static constexpr int rows = __is_same(Use, matrix_b) ? K : M;
    static constexpr int cols = __is_same(Use, matrix_a) ? K : N;
    static constexpr int num_elements = rows * cols;
    T x[num_elements];
};

inline const void* cpu_wmma_pointer[1024];
inline unsigned cpu_wmma_stride[1024];

inline void cpu_wmma_same_in_warp(const void* p, unsigned ldm, const char* what) {
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    cpu_wmma_pointer[t] = p;
    cpu_wmma_stride[t] = ldm;
    cpu_block_barrier.wait();
    const unsigned first = t & ~31u;
    if (cpu_wmma_pointer[first] != p || cpu_wmma_stride[first] != ldm) {
        std::fprintf(stderr, "wmma::%s: lane %u of warp %u (thread (%u, %u, %u)) passed "
                     "another pointer or stride than lane 0 of its warp: a fragment belongs "
                     "to the whole warp, so its 32 lanes (32 consecutive threads, x "
                     "fastest) must pass the same ones\n", what, t & 31u, t / 32u,
                     threadIdx.x, threadIdx.y, threadIdx.z);
        std::abort();
    }
    cpu_block_barrier.wait();
}

template <class Use, int M, int N, int K, class T, class L, class V>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, V v) {
    for (int i = 0; i < f.num_elements; ++i) f.x[i] = static_cast<T>(v);
}

template <class Use, int M, int N, int K, class T, class L>
inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const T* p, unsigned ldm) {
    cpu_wmma_same_in_warp(p, ldm, "load_matrix_sync");
    using F = fragment<Use, M, N, K, T, L>;
    for (int r = 0; r < F::rows; ++r)
        for (int c = 0; c < F::cols; ++c)
            f.x[r * F::cols + c] = __is_same(L, col_major) ? p[c * ldm + r] : p[r * ldm + c];
}

template <int M, int N, int K, class T>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const T* p, unsigned ldm,
                             layout_t layout) {
    cpu_wmma_same_in_warp(p, ldm, "load_matrix_sync");
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c)
            f.x[r * N + c] = layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
}

template <int M, int N, int K, class T>
inline void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm,
                              layout_t layout) {
    cpu_wmma_same_in_warp(p, ldm, "store_matrix_sync");
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    if (t % 32 == 0)
        for (int r = 0; r < M; ++r)
            for (int c = 0; c < N; ++c)
                (layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * N + c];
    cpu_block_barrier.wait();        // the tile is in memory for every lane after the call
}

// d = a * b + c: exact products of the half inputs, sums in float.
template <int M, int N, int K, class TA, class LA, class LB, class TC>
inline void mma_sync(fragment<accumulator, M, N, K, TC>& d,
                     const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TA, LB>& b,
                     const fragment<accumulator, M, N, K, TC>& c) {
    TC out[M * N];
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            TC s = c.x[i * N + j];
            for (int k = 0; k < K; ++k)
                s += static_cast<TC>(a.x[i * K + k]) * static_cast<TC>(b.x[k * N + j]);
            out[i * N + j] = s;
        }
    for (int i = 0; i < M * N; ++i) d.x[i] = out[i];
}
}  // namespace wmma
}  // namespace nvcuda

// Enough of CUDA C++ to run a student's kernel on the CPU (see cpu_step.py): every
// thread of a block is a host thread, blocks run one after another, __shared__ arrays
// are static storage (one block at a time uses them) and __syncthreads() is a barrier
// of the block's threads. It runs the kernel's arithmetic and indexing as written, so a
// wrong index, a missing bounds check or a missing barrier shows; it says nothing about
// speed, and inline PTX (asm) does not exist here: the one exception is the cp.async
// helpers of chapter 09 (cp_async_4, cp_async_16, cp_async_commit, cp_async_wait<N>),
// whose asm definitions the CPU build takes out of the kernel's text and replaces by the
// emulation at the end of this file (cpu_step.emulated_text).
#pragma once
#include <pthread.h>

#include <cmath>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <type_traits>
#include <vector>

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
struct alignas(16) double2 { double x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// CUDA's min/max take any mix of integer and floating types. They return a value: with
// two arguments of one type, `a < b ? a : b` is an lvalue, and a reference to a
// parameter would dangle (g++ -O1 with ThreadSanitizer then read garbage).
template <class A, class B>
inline auto min(A a, B b) -> std::decay_t<decltype(a < b ? a : b)> {
    return b < a ? b : a;
}
template <class A, class B>
inline auto max(A a, B b) -> std::decay_t<decltype(a < b ? a : b)> {
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
// The lowest thread of the block whose lane disagrees with lane 0 of its warp: the one
// the message names, so that a kernel's message is the same from run to run (whichever
// thread got to the check first would otherwise name itself). Stays ~0u while all agree.
inline std::atomic<unsigned> cpu_wmma_first_bad{~0u};

inline void cpu_wmma_same_in_warp(const void* p, unsigned ldm, const char* what) {
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    cpu_wmma_pointer[t] = p;
    cpu_wmma_stride[t] = ldm;
    cpu_block_barrier.wait();
    const unsigned first = t & ~31u;
    if (cpu_wmma_pointer[first] != p || cpu_wmma_stride[first] != ldm) {
        unsigned seen = cpu_wmma_first_bad.load();
        while (t < seen && !cpu_wmma_first_bad.compare_exchange_weak(seen, t)) {}
    }
    cpu_block_barrier.wait();
    if (cpu_wmma_first_bad.load() == t) {
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

// Dynamic shared memory (`extern __shared__ T name[];`, which the CPU build turns into
// `T* const name = reinterpret_cast<T*>(cpu_dynamic_shared);`): one allocation of
// exactly the launch's dynamic size, so that AddressSanitizer stops an access past it.
// The driver fills it with NaN (every byte 0xff) before each block, as no GPU promises
// anything about what a block finds there.
inline unsigned char* cpu_dynamic_shared = nullptr;
inline size_t cpu_dynamic_bytes = 0;

// A shared-window address is here the offset into the dynamic shared memory.
inline size_t __cvta_generic_to_shared(const void* p) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    if (cpu_dynamic_shared == nullptr || c < cpu_dynamic_shared ||
        c > cpu_dynamic_shared + cpu_dynamic_bytes) {
        std::fprintf(stderr, "cp.async: __cvta_generic_to_shared got an address outside the "
                     "dynamic shared memory (extern __shared__); the CPU emulation knows "
                     "shared-window addresses of that memory only\n");
        std::abort();
    }
    return static_cast<size_t>(c - cpu_dynamic_shared);
}

// cp.async, emulated with PTX's rules and the latest landing they allow. Each thread
// keeps its copies: those issued since its last commit (the open group) and its
// committed groups, oldest first. cp_async_wait<N>() completes every committed group
// but the N most recent, in order (cp.async.wait_group N); a copy lands then and never
// earlier, and until it lands its destination reads as the NaN CPU_IN_FLIGHT (written
// when the copy is issued: on a GPU it holds the old value or the new one, whichever
// the timing gives). So a tile read before the wait that covers it reads NaN, on every
// run. The source is read when the copy is issued (AddressSanitizer checks it there,
// at the line of the copy); src-size 0 (`valid` false) reads nothing and lands zeros.
// Copies that a thread's block ends with, never waited for, are counted for the
// grader's note (stderr, "cp.async note:").
constexpr uint32_t CPU_IN_FLIGHT = 0x7fc0ca5au;
struct CpuCopy {
    unsigned char* dst;
    unsigned char data[16];
    int bytes;
};
struct CpuCpAsync {
    std::vector<CpuCopy> open;
    std::deque<std::vector<CpuCopy>> groups;
};
inline thread_local CpuCpAsync cpu_cp_async;
inline std::atomic<long> cpu_cp_async_unwaited{0}, cpu_cp_async_uncommitted{0};

__attribute__((noinline)) inline void cpu_cp_async_issue(void* dst, const void* src,
                                                          int bytes, bool valid) {
    if (bytes == 16 && ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src))
                        & 15u)) {
        std::fprintf(stderr, "cp.async: a 16-byte copy between addresses that are not both "
                     "16-byte aligned (a misaligned address on a GPU)\n");
        std::abort();
    }
    CpuCopy c{static_cast<unsigned char*>(dst), {}, bytes};
    if (valid) std::memcpy(c.data, src, bytes);
    for (int i = 0; i < bytes; i += 4) std::memcpy(c.dst + i, &CPU_IN_FLIGHT, 4);
    cpu_cp_async.open.push_back(c);
}

__attribute__((noinline)) inline void cpu_cp_async_land(const std::vector<CpuCopy>& group) {
    for (const CpuCopy& c : group) std::memcpy(c.dst, c.data, c.bytes);
}

inline void cp_async_4(void* dst, const void* src, bool valid = true) {
    cpu_cp_async_issue(dst, src, 4, valid);
}
inline void cp_async_16(void* dst, const void* src, bool valid = true) {
    cpu_cp_async_issue(dst, src, 16, valid);
}
inline void cp_async_4(size_t shared, const void* src, bool valid = true) {
    cpu_cp_async_issue(cpu_dynamic_shared + shared, src, 4, valid);
}
inline void cp_async_16(size_t shared, const void* src, bool valid = true) {
    cpu_cp_async_issue(cpu_dynamic_shared + shared, src, 16, valid);
}
inline void cp_async_commit() {
    cpu_cp_async.groups.push_back(std::move(cpu_cp_async.open));
    cpu_cp_async.open.clear();
}
template <int N>
inline void cp_async_wait() {
    while (cpu_cp_async.groups.size() > static_cast<size_t>(N)) {
        cpu_cp_async_land(cpu_cp_async.groups.front());
        cpu_cp_async.groups.pop_front();
    }
}
// At the end of each block (the driver): what was never waited for is counted and
// dropped, so that the next block starts with none.
inline void cpu_cp_async_block_end() {
    long unwaited = 0;
    for (const auto& g : cpu_cp_async.groups) unwaited += static_cast<long>(g.size());
    cpu_cp_async_unwaited += unwaited;
    cpu_cp_async_uncommitted += static_cast<long>(cpu_cp_async.open.size());
    cpu_cp_async.groups.clear();
    cpu_cp_async.open.clear();
}
inline void cpu_cp_async_note() {
    if (cpu_cp_async_unwaited || cpu_cp_async_uncommitted)
        std::fprintf(stderr, "cp.async note: %ld copies committed but never waited for, %ld "
                     "never committed, when their blocks ended\n",
                     cpu_cp_async_unwaited.load(), cpu_cp_async_uncommitted.load());
}

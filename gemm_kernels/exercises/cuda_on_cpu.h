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

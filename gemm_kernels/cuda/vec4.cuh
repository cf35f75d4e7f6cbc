// float4 helpers shared by the kernels of chapters 07-09.
#pragma once
#include "common.cuh"

// gemm_epilogue for four consecutive elements of C that start at a 16-byte aligned
// address: one 128-bit store (STG.128), and one 128-bit load of the old C values only
// when beta != 0 (BLAS semantics, as in gemm_epilogue: NaN already in C never leaks
// into the result when beta == 0).
__device__ __forceinline__ void gemm_epilogue4(float4 acc, float alpha, float beta,
                                               float* c) {
    float4 out;
    if (beta == 0.f) {
        out = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
    } else {
        const float4 old = *reinterpret_cast<const float4*>(c);
        out = make_float4(alpha * acc.x + beta * old.x, alpha * acc.y + beta * old.y,
                          alpha * acc.z + beta * old.z, alpha * acc.w + beta * old.w);
    }
    *reinterpret_cast<float4*>(c) = out;
}

// One float4 from global memory (LDG.E.128). The address must be 16-byte aligned.
__device__ __forceinline__ float4 load_float4(const float* p) {
    return *reinterpret_cast<const float4*>(p);
}

// Shared by every GEMM kernel of the series.
#pragma once

// C = alpha * acc + beta * C with BLAS semantics: when beta == 0, C is not read, so
// NaN or garbage already in C cannot leak into the result. The course's checkers rely
// on it: they fill C with NaN before a launch, so a kernel that reads C when beta == 0
// shows NaN in its result.
template <typename T>
__device__ __forceinline__ T gemm_epilogue(T acc, T alpha, T beta, const T* c) {
    return beta == T(0) ? alpha * acc : alpha * acc + beta * *c;
}

// The CPU emulation's stand-in for CUDA's <cuda_fp16.h>: cuda_on_cpu.h (included before
// every kernel) defines half and its conversions.
#pragma once

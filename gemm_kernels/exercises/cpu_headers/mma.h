// The CPU emulation's stand-in for CUDA's <mma.h>: cuda_on_cpu.h (included before every
// kernel) defines what the series uses of nvcuda::wmma.
#pragma once

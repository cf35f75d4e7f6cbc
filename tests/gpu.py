"""Marker for tests that need a GPU: skipped, with the reason, where CuPy sees none."""
import pytest

from gemm_kernels import device

needs_gpu = pytest.mark.skipif(not device.is_live(),
                               reason="needs a GPU that CuPy can use (recorded mode here)")

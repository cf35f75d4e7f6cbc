"""For authors, on a GPU: time a few configurations of one kernel at one shape, beside its
reference, without recording them (to choose what a chapter records and explains).

    python scripts/try_configs.py KERNEL MxNxK '{"BM": 128}' '{"BM": 64}' ...
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gemm_kernels.measure.record import measure, rate_text   # noqa: E402

if __name__ == "__main__":
    kernel, shape, *configs = sys.argv[1:]
    dims = tuple(int(d) for d in shape.split("x"))
    for c in configs or ["{}"]:
        params = json.loads(c)
        print(f"{kernel} {params}: {rate_text(measure(kernel, dims, params))}", flush=True)

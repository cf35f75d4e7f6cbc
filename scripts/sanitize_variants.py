"""Under compute-sanitizer on the GPU host: the chapter's code variants (notebook/
timed_variants.py) named on the command line, each checked on small ragged shapes, so
that memcheck and racecheck see every path of them. Exit 1 if a check fails."""
import sys

from gemm_kernels.measure.check import check
from gemm_kernels.notebook.timed_variants import get

SHAPES = ((33, 65, 17), (127, 129, 45), (1, 4, 3))

if __name__ == "__main__":
    bad = 0
    for name in sys.argv[1:]:
        t = get(name)
        for p in t.configurations():
            for s in SHAPES:
                r = check(t.kernel(), s, p)
                bad += r.ok is False
                print(f"{name} {p} {s}: {'ok' if r.ok else r.message}", flush=True)
    sys.exit(1 if bad else 0)

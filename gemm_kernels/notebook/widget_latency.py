"""How long a widget takes to show a new configuration once it is compiled (live only).

`python -m gemm_kernels.notebook.widget_latency`: for a few kernels, compile the default and a
configuration the process has not run yet (both the timed path and the ragged check's
path), then time Explorer.evaluate (the correctness check on 257x263x129 plus the timing
at 2048^3) twice: the first Run of the widget, which also pays CuPy's one-time costs
(its own helper kernels for inputs, poisoning and norms, compiled on first use in a
process and cached on disk after), then the new configuration, which is what every
later change of a control costs.
"""
import time

from gemm_kernels.core import compiler

from gemm_kernels.core import device

from gemm_kernels.notebook import widgets
from gemm_kernels.core.kernels import get
from gemm_kernels.core.launch import DTYPES

CASES = [("coalesced", {"BLOCK": 16}), ("tile_2d_reg", {"BM": 128, "BN": 64, "BK": 8, "TM": 8, "TN": 4}),
         ("capstone", {"BN": 256, "BK": 8, "WM": 64, "WN": 64}),
         ("transpose_padded", {"TILE": 64, "ROWS": 16})]


def main():
    if not device.is_live():
        raise SystemExit("needs a GPU")
    for name, params in CASES:
        ex = widgets.Explorer(name)
        k = get(name)
        check_shape = widgets.CHECK_SHAPE if k.op in DTYPES else widgets.CHECK_SHAPE[:2]
        for shape in (ex.shape, check_shape):
            for p in (k.defaults(), params):
                compiler.function(k, p, shape)
        for what, p in (("first Run", k.defaults()), ("new config", params)):
            t = time.perf_counter()
            res = ex.evaluate(p)
            print(f"{name:<18} {what:<10} {time.perf_counter() - t:6.2f} s  {res['message']}")


if __name__ == "__main__":
    main()

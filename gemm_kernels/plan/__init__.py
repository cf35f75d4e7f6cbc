"""Choosing a kernel, a tile and a split of K for a shape (chapter 12), and `sgemm`.

    waves.py      tiles, resident blocks and waves: the arithmetic of filling a GPU
    model.py      the time model of a plan, its constants fitted from recorded sweeps
    choose.py     the candidates for a shape, the plan the model picks, and sgemm()
    calibrate.py  on a GPU: the calibration sweeps, the fit (rules.json), the benchmark

May import core/ and measure/; nothing here is imported by core/ or measure/.
"""

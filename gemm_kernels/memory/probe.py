"""Check the bank model (`gemm_kernels.banks`) against the hardware.

Each named pattern is one warp-wide shared-memory load: 32 byte offsets (None = the lane
does not load) and a width of 4, 8 or 16 bytes. `cuda/bank_probe.cu` performs exactly
that one load (one LDS / LDS.64 / LDS.128 in the SASS) with a single warp, so Nsight
Compute's wavefront counter for shared loads measures the pattern and nothing else.

On a GPU host with Nsight Compute, from the repository root:

    python -m gemm_kernels.memory.probe --out tests/data/bank_probe.json

profiles every pattern in one ncu run (ncu starts this module again with ``--launch``),
writes the measurements next to the model's predictions, and prints a table.
``--list`` prints the patterns and the model's predictions without a GPU.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gemm_kernels.memory import banks
from gemm_kernels.core.registry import CUDA_DIR

SOURCE = CUDA_DIR / "bank_probe.cu"
SMEM_BYTES = 32768                      # PROBE_SMEM_BYTES in bank_probe.cu
KERNEL_REGEX = "bank_probe"
METRIC_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
METRIC_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
METRICS = [METRIC_WAVEFRONTS, METRIC_CONFLICTS]


@dataclass(frozen=True)
class Pattern:
    name: str
    width: int
    addresses: tuple           # 32 byte offsets, None = inactive lane
    note: str

    def analysis(self) -> banks.Analysis:
        return banks.analyse(self.addresses, self.width)

    def offsets(self) -> list[int]:
        """What the kernel reads from global memory: -1 for an inactive lane."""
        return [-1 if a is None else int(a) for a in self.addresses]


def _p(name, width, addresses, note) -> Pattern:
    addrs = tuple(None if a is None or a < 0 else int(a) for a in addresses)
    banks.analyse(addrs, width)                 # validates lane count and alignment
    top = max((a + width for a in addrs if a is not None), default=0)
    if top > SMEM_BYTES:
        raise ValueError(f"pattern {name} reads up to byte {top}, beyond the probe's "
                         f"{SMEM_BYTES}-byte shared array")
    return Pattern(name, width, addrs, note)


L = range(32)
S, B, T = banks.strided, banks.broadcast, banks.tile


def _patterns() -> list[Pattern]:
    ps = []
    # ---- 32-bit (LDS) -------------------------------------------------------------
    for s in (1, 2, 4, 8, 16, 32, 33):
        ps.append(_p(f"w4_stride{s}", 4, S(s), f"lane i reads float i*{s}"))
    ps += [
        _p("w4_broadcast", 4, B(64), "every lane reads the same float"),
        _p("w4_two_words_two_banks", 4, [0 if i < 16 else 4 for i in L],
           "lanes 0-15 read word 0, lanes 16-31 word 1: two broadcasts, two banks"),
        _p("w4_two_words_one_bank", 4, [0 if i % 2 == 0 else 128 for i in L],
           "even lanes read word 0, odd lanes word 32: two words in bank 0"),
        _p("w4_first_half_only", 4, S(1, active=lambda i: i < 16),
           "lanes 0-15 read consecutive floats, lanes 16-31 inactive"),
        _p("w4_stride32_even_lanes", 4, S(32, active=lambda i: i % 2 == 0),
           "stride 32 with the odd lanes inactive: 16 words in bank 0"),
        _p("w4_all_inactive", 4, [None] * 32,
           "no lane loads (the LDS is issued fully predicated off)"),
        _p("w4_tile32_column5", 4, S(32, base=5 * 4),
           "column 5 of a float[32][32] tile"),
        _p("w4_tile32_column5_pad1", 4, S(32, padding=1, base=5 * 4),
           "column 5 of a float[32][33] tile (+1 padding)"),
        _p("w4_block16_As_row", 4, T(lambda i: i // 16, lambda i: 3, 16),
           "As[ty][k] of a float[16][16] tile, 16x16 blocks (two rows per warp)"),
        _p("w4_block16_Bs_col", 4, T(lambda i: 3, lambda i: i % 16, 16),
           "Bs[k][tx] of a float[16][16] tile: both half-warps read the same 16 floats"),
        _p("w4_gemm_As_transposed_store", 4,
           T(lambda i: (i % 2) * 4, lambda i: i // 2, 128),
           "address pattern of the transposed A-tile store As[(col4*4)][row] (BM=128, "
           "two threads per A row), measured as a load"),
        _p("w4_gemm_As_transposed_store_pad4", 4,
           T(lambda i: (i % 2) * 4, lambda i: i // 2, 132),
           "the same with the BM+4 padded tile: conflict-free"),
    ]
    # ---- 64-bit (LDS.64) ----------------------------------------------------------
    ps += [
        _p("w8_consecutive", 8, S(1, 8), "lane i reads double i: two half-warp phases"),
        _p("w8_broadcast", 8, B(0, 8), "every lane reads the same double: merged, 1 wavefront"),
        _p("w8_stride2", 8, S(2, 8), "lane i reads double 2i"),
        _p("w8_pairs_xor1", 8, [(i // 2) * 8 for i in L],
           "lanes i and i^1 read the same double: half-warps merge"),
        _p("w8_pairs_xor2", 8, [((i // 4) * 2 + i % 2) * 8 for i in L],
           "lanes i and i^2 read the same double: half-warps merge"),
        _p("w8_pairs_xor1_stride2", 8, [(i // 2) * 16 for i in L],
           "merged (i^1 pairs), but doubles 0 and 16 share banks 0-1"),
        _p("w8_even_lanes_consecutive", 8,
           [(i // 2) * 8 if i % 2 == 0 else None for i in L],
           "only even lanes load, 16 consecutive doubles: merged into one wavefront"),
        _p("w8_halves_identical", 8, [(i % 16) * 8 for i in L],
           "both half-warps read the same 16 doubles (i^16 equal, no i^1/i^2 rule)"),
        _p("w8_dtile32_column", 8, S(32, 8), "column of a double[32][32] tile"),
        _p("w8_dtile32_column_pad1", 8, S(32, 8, padding=1),
           "column of a double[32][33] tile (+1 padding)"),
        _p("w8_block16_As_row", 8, T(lambda i: i // 16, lambda i: 3, 16, elem_bytes=8),
           "A_shared[ty][k] of a double[16][16] tile, 16x16 blocks"),
        _p("w8_block16_Bs_col", 8, T(lambda i: 3, lambda i: i % 16, 16, elem_bytes=8),
           "B_shared[k][tx] of a double[16][16] tile, 16x16 blocks"),
    ]
    # ---- 128-bit (LDS.128) --------------------------------------------------------
    ps += [
        _p("w16_consecutive", 16, S(1, 16), "lane i reads float4 i: four quarter-warp phases"),
        _p("w16_broadcast", 16, B(0, 16),
           "every lane reads the same float4: quarters merge, half-warps do not"),
        _p("w16_stride2", 16, S(2, 16), "lane i reads float4 2i"),
        _p("w16_pairs_xor1", 16, [(i // 2) * 16 for i in L],
           "lanes i and i^1 read the same float4"),
        _p("w16_pairs_xor2", 16, [((i // 4) * 2 + i % 2) * 16 for i in L],
           "lanes i and i^2 read the same float4"),
        _p("w16_even_lanes_consecutive", 16,
           [(i // 2) * 16 if i % 2 == 0 else None for i in L],
           "only even lanes load, consecutive float4s: quarters merge"),
        _p("w16_first_quarter_only", 16, S(1, 16, active=lambda i: i < 8),
           "lanes 0-7 read consecutive float4s, the rest inactive"),
        _p("w16_merge_first_half_only", 16,
           [(i // 2) * 16 if i < 16 else (32 + i) * 16 for i in L],
           "half-warp 0 has i^1 pairs, half-warp 1 reads distinct float4s: tells "
           "whether the merge rule is checked per half-warp (3) or warp-wide (4)"),
        _p("w16_tile32_column", 16, S(32, 16), "column of a float4[32][32] tile"),
        _p("w16_tile32_column_pad1", 16, S(32, 16, padding=1),
           "column of a float4[32][33] tile (+1 float4 padding)"),
        _p("w16_gemm_As_fragment", 16, T(lambda i: 5, lambda i: (i // 16) * 8, 128),
           "register load of A in 2D tiling (BM=128, TM=8, 16 threads per row of "
           "threads): float4 As[k][threadRow*8], two addresses per warp"),
        _p("w16_gemm_Bs_fragment_tn8", 16, T(lambda i: 5, lambda i: (i % 16) * 8, 128),
           "register load of B (TN=8 consecutive per thread): float4 Bs[k][threadCol*8]"),
        _p("w16_gemm_Bs_fragment_split", 16, T(lambda i: 5, lambda i: (i % 16) * 4, 128),
           "the conflict-free layout: float4 Bs[k][threadCol*4] (second float4 at +64)"),
    ]
    names = [p.name for p in ps]
    assert len(names) == len(set(names)), "duplicate pattern names"
    return ps


PATTERNS: list[Pattern] = _patterns()


def by_name(name: str) -> Pattern:
    for p in PATTERNS:
        if p.name == name:
            return p
    raise KeyError(f"no probe pattern {name!r}; known: {', '.join(p.name for p in PATTERNS)}")


# ------------------------------------------------------------------ GPU side

def expected_output(p: Pattern) -> list[float]:
    """What the probe writes per lane: the sum of the word indices loaded, or -1."""
    out = []
    for a in p.addresses:
        if a is None:
            out.append(-1.0)
        else:
            w = a // 4
            out.append(float(sum(range(w, w + p.width // 4))))
    return out


def _module():
    import cupy
    exprs = [f"bank_probe<{w}>" for w in banks.WIDTHS]
    mod = cupy.RawModule(code=SOURCE.read_text(), options=("-std=c++17",),
                         name_expressions=exprs)
    return {w: mod.get_function(f"bank_probe<{w}>") for w in banks.WIDTHS}


def run(patterns: list[Pattern] | None = None) -> list[dict]:
    """Launch the probe once per pattern, in order, on the current GPU, and check that each
    lane loaded what it was given. Returns [{"name", "ok", "mismatched_lanes"}]."""
    import cupy
    import numpy as np
    patterns = PATTERNS if patterns is None else patterns
    funcs = _module()
    report = []
    for p in patterns:
        offsets = cupy.asarray(np.array(p.offsets(), dtype=np.int32))
        out = cupy.empty(32, dtype=cupy.float32)
        funcs[p.width]((1,), (32,), (offsets, out))
        got = cupy.asnumpy(out)
        bad = [i for i, (g, e) in enumerate(zip(got, expected_output(p))) if g != e]
        report.append({"name": p.name, "ok": not bad, "mismatched_lanes": bad})
    cupy.cuda.Device().synchronize()
    return report


def device_info() -> dict:
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"]
    return {"name": name.decode() if isinstance(name, bytes) else str(name),
            "compute_capability": f"{props['major']}.{props['minor']}",
            "cupy": cupy.__version__}


def _launch_main(manifest: str | None) -> int:
    """The process ncu profiles: launch every pattern, record order and checks."""
    report = run()
    info = {"device": device_info(), "launched": report}
    if manifest:
        Path(manifest).write_text(json.dumps(info))
    bad = [r["name"] for r in report if not r["ok"]]
    if bad:
        print(f"probe loaded wrong values for: {bad}", file=sys.stderr)
        return 1
    return 0


# ------------------------------------------------------------------ profiling

def profile(patterns: list[Pattern] | None = None) -> dict:
    """Profile all patterns in one ncu run and return the JSON-ready record."""
    from gemm_kernels.measure import ncu
    patterns = PATTERNS if patterns is None else patterns
    if patterns is not PATTERNS:
        raise ValueError("profile() runs the module's PATTERNS (the child process "
                         "launches exactly those)")
    if not ncu.available():
        raise RuntimeError("Nsight Compute (ncu) not found on this machine")
    with tempfile.TemporaryDirectory() as d:
        manifest = Path(d) / "launched.json"
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        launches = ncu.profile([sys.executable, "-m", "gemm_kernels.memory.probe", "--launch",
                                "--manifest", str(manifest)],
                               METRICS, KERNEL_REGEX, env=env)
        if not manifest.exists():
            raise RuntimeError("the profiled process wrote no launch manifest")
        info = json.loads(manifest.read_text())
    if len(launches) != len(patterns):
        raise RuntimeError(f"ncu profiled {len(launches)} probe launches, expected "
                           f"{len(patterns)}: {[l['kernel'] for l in launches]}")
    bad = [r["name"] for r in info["launched"] if not r["ok"]]
    if bad:
        raise RuntimeError(f"the probe loaded wrong values for {bad}")
    results = []
    for p, launch in zip(patterns, launches):
        kname = launch["kernel"]
        # ncu names the kernel "void bank_probe<8>(const int *, float *)" (demangled) or
        # "bank_probe" (function base): check the width where the name shows it.
        if "bank_probe" not in kname or ("<" in kname and f"<{p.width}>" not in kname):
            raise RuntimeError(f"launch order mismatch: pattern {p.name} (width {p.width}) "
                               f"lines up with ncu's launch {launch['id']}: {kname}")
        a = p.analysis()
        m = launch["metrics"]
        results.append({
            "name": p.name, "width": p.width, "addresses": list(p.addresses), "note": p.note,
            "kernel": launch["kernel"],
            "measured_wavefronts": int(round(m[METRIC_WAVEFRONTS])),
            "measured_conflicts": int(round(m[METRIC_CONFLICTS])),
            "model_wavefronts": a.wavefronts, "model_conflicts": a.conflicts,
            "model_ideal": a.ideal,
        })
    return {"schema": 1, "device": info["device"], "ncu": ncu.version(),
            "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "metrics": {"wavefronts": METRIC_WAVEFRONTS, "conflicts": METRIC_CONFLICTS},
            "results": results}


def table(rows: list[dict]) -> str:
    """A text table: pattern, width, model and measured wavefronts and conflicts."""
    head = f"{'pattern':34} {'W':>2}  {'model wf':>8} {'meas wf':>7}  {'model cf':>8} {'meas cf':>7}  ok"
    lines = [head, "-" * len(head)]
    for r in rows:
        mw, mc = r.get("measured_wavefronts"), r.get("measured_conflicts")
        ok = "" if mw is None else ("yes" if (mw, mc) == (r["model_wavefronts"],
                                                           r["model_conflicts"]) else
                                    "wf" if mw == r["model_wavefronts"] else "NO")
        lines.append(f"{r['name']:34} {r['width']:>2}  {r['model_wavefronts']:>8} "
                     f"{'' if mw is None else mw:>7}  {r['model_conflicts']:>8} "
                     f"{'' if mc is None else mc:>7}  {ok}")
    return "\n".join(lines)


def model_rows() -> list[dict]:
    out = []
    for p in PATTERNS:
        a = p.analysis()
        out.append({"name": p.name, "width": p.width, "model_wavefronts": a.wavefronts,
                    "model_conflicts": a.conflicts, "model_ideal": a.ideal, "note": p.note})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gemm_kernels.memory.probe",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the measurements (JSON) to this file")
    ap.add_argument("--list", action="store_true",
                    help="print the patterns and the model's predictions (no GPU needed)")
    ap.add_argument("--launch", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--manifest", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.launch:
        return _launch_main(args.manifest)
    if args.list or not args.out:
        print(table(model_rows()))
        if not args.list:
            print("\n(give --out FILE on a GPU host with ncu to measure)")
        return 0
    try:
        record = profile()
    except RuntimeError as e:
        print(f"bank probe failed: {e}", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    rows = record["results"]
    print(f"{record['device']['name']} ({record['ncu']}), {record['created']}")
    print(table(rows))
    wf_ok = sum(r["measured_wavefronts"] == r["model_wavefronts"] for r in rows)
    cf_ok = sum(r["measured_conflicts"] == r["model_conflicts"] for r in rows)
    print(f"\nwavefronts agree on {wf_ok}/{len(rows)} patterns, "
          f"conflicts on {cf_ok}/{len(rows)}; written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

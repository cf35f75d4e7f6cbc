"""Studies: the measurements a chapter's argument rests on, each made in one process.

A study is a list of steps (a kernel and its parameters, one change from the step
before where it is a ladder) measured at a few shapes, either timed with the harness
(`kind="time"`: every step's row has its own reference, and all rows name the same run),
profiled with Nsight Compute (`kind="ncu"`: each step launched once under one ncu
run, with the study's counters) or run for seconds beside its reference with the clock
and power sampled (`kind="clocks"`, `measure.clocks`). `python -m gemm_kernels study NAME...` records them;
the notebooks read them back with `results(name, shape)`.

Counter names are the ones Nsight Compute documents; a study may also give a pattern
(`re:` prefix) that is matched against the names the installed ncu knows, so a counter
family (every stall reason) is recorded without typing each name.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from gemm_kernels.core.kernels import KERNELS

CUBE_4096 = (4096, 4096, 4096)
CUBE_2048 = (2048, 2048, 2048)
CUBE_1024 = (1024, 1024, 1024)
# Chapter 10's awkward shape: neither side a multiple of a tile, rows of odd length.
ODD_TRANSPOSE = (8191, 4097)
# A GEMM with few columns: the transpose of A (M x K) costs a larger share of the GEMM,
# whose work is M*N*K. 256 blocks of 128 x 128: one wave at two blocks per SM on an H200.
NARROW_N = (8192, 512, 4096)
PRETRANSPOSED_A = "ch10_pretransposed_a"
# siboehm's kernel-5 tile: 128 x 128 x 8, 8 x 8 outputs per thread.
K5 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
# siboehm's kernel-4 tile: 64 x 64 x 8, 8 outputs per thread.
K4 = {"BM": 64, "BN": 64, "BK": 8, "TM": 8}

# Where each warp of an SM sub-partition waits, per issued instruction (the "warp state"
# of Nsight Compute): one counter per reason.
STALLS = "re:^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\\.ratio$"
ISSUE = ["smsp__issue_active.avg.pct_of_peak_sustained_active",
         "sm__warps_active.avg.pct_of_peak_sustained_active",
         "smsp__inst_executed.sum", "sm__cycles_elapsed.avg", "gpu__time_duration.sum"]
PIPES = ["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
         "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
         "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed",
         "smsp__inst_executed_pipe_lsu.sum", "smsp__inst_executed_op_shared_ld.sum"]
# Every shared-memory wavefront and bank conflict the L1's data pipe counts, by kind.
SHARED_ALL = "re:^l1tex__data_(pipe_lsu_wavefronts|bank_conflicts_pipe_lsu)_mem_shared[a-z_]*\\.sum$"
CACHES = ["l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct",
          "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
          "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
          "lts__t_sectors_srcunit_tex_op_read.sum", "dram__bytes_read.sum",
          "dram__bytes_write.sum"]
# What the L1 spends on global loads: its wavefronts (one per cycle in each stage) and
# how busy it is; with the cycles, these decide whether chapters 01-02 are limited by
# the cache lines the L1 handles per cycle.
L1_LINES = ["re:^l1tex__(t_output_wavefronts_pipe_lsu_mem_global_op_ld"
            "|data_pipe_lsu_wavefronts_mem_lg[a-z_]*)\\.sum$",
            "l1tex__throughput.avg.pct_of_peak_sustained_active",
            "l1tex__lsu_writeback_active.avg.pct_of_peak_sustained_active",
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sector_hit_rate.pct"]
# Every stage of the L1 that Nsight Compute's l1tex__throughput takes the maximum of
# (its "breakdown"), each as a share of its peak, and the rate at which the SM's
# sub-partitions hand load/store instructions to the L1: which one is the busiest.
L1_STAGES = ["re:^l1tex__[a-z0-9_]+\\.avg\\.pct_of_peak_sustained_active$",
             "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
             "smsp__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
             "l1tex__data_pipe_lsu_wavefronts_mem_lg_cmd_read.sum",
             "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
DRAM = ["dram__bytes_read.sum", "dram__bytes_write.sum",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_sector_hit_rate.pct",
        "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
        "smsp__inst_executed_op_global_ld.sum"]
# cp.async (LDGSTS) writes shared memory without an STS: its own counters.
LDGSTS = ["re:^(l1tex|smsp)__.*ldgsts.*\\.sum$",
          "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
          "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
          "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]


@dataclass(frozen=True)
class Step:
    label: str          # what this step is, for the reader ("+ 4 stages")
    kernel: str
    params: dict
    # A copy or transpose step in a study of GEMM shapes (M, N, K): the GEMM operand
    # ("A", "B" or "C") whose matrix it moves, and so the shape it runs at (A: M x K).
    # None: the step runs at the study's shape itself.
    operand: str | None = None
    # A variant of `kernel` that a chapter times beside the registry (its name in
    # `notebook.timed_variants`, where the variants are built: "double_buffer: without
    # if (more), ..."): the step launches that text, at `kernel`'s parameters, and its
    # rows carry the variant's name and the hash of its text. None: the registry kernel.
    variant: str | None = None


OPERANDS = {"A": lambda M, N, K: (M, K), "B": lambda M, N, K: (K, N),
            "C": lambda M, N, K: (M, N)}


def step_shape(step: Step, shape) -> tuple:
    """The shape `step` runs at in a study at `shape`: the shape itself, or for a step
    with an operand that operand's matrix (rows, cols) at the GEMM shape (M, N, K)."""
    if step.operand is None:
        return tuple(shape)
    if step.operand not in OPERANDS:
        raise ValueError(f"operand {step.operand!r} is not one of {', '.join(OPERANDS)}")
    if len(shape) != 3:
        raise ValueError(f"operand {step.operand!r} needs a GEMM shape (M, N, K), "
                         f"got {tuple(shape)}")
    return OPERANDS[step.operand](*shape)


# The variants a step may name (`Step.variant`): name -> a function that builds its
# Kernel. The layer that makes them registers them (`notebook.timed_variants` does, on
# import, for every variant the chapters time): measure imports no chapter code.
_VARIANTS: dict = {}


def register_variant(name: str, build) -> None:
    """Make variant `name` (built by `build()`, a Kernel) one that a step may name."""
    _VARIANTS[name] = build


def step_kernel(step: Step):
    """The kernel a step launches: the registry's `step.kernel`, or the registered
    variant the step names (built where the chapters build it, so a study profiles the
    very text a chapter timed)."""
    if step.variant is None:
        return KERNELS[step.kernel]
    if step.variant not in _VARIANTS:
        raise ValueError(f"no variant named {step.variant!r} is registered (the chapters' "
                         "variants are registered by importing "
                         "gemm_kernels.notebook.timed_variants)")
    return _VARIANTS[step.variant]()


KINDS = ("time", "ncu", "clocks")


@dataclass(frozen=True)
class Study:
    name: str
    chapter: str
    question: str       # what the study answers, in the chapter's words
    kind: str           # one of KINDS
    steps: tuple[Step, ...]
    shapes: tuple[tuple, ...]
    metrics: tuple[str, ...] = ()
    # references timed at every shape too, in the same run, each beside its own
    # reference (a "time" study: cuBLAS BF16 beside cuBLAS FP16)
    references: tuple[str, ...] = ()


def _capstone(**change):
    """The capstone's first rung (2 stages, BK = 8, per-tile addresses, plain order)
    with `change` applied: the steps of chapter 09's ladder."""
    base = {"BM": 128, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "STAGES": 2, "GROUP": 1,
            "MINB": 1, "HOIST": False}
    return {**base, **change}


_ZORDER = {"BM": 128, "BN": 128, "BK": 8}
# The capstone with one set of fragment registers (notebook/ch09_split.py builds it).
_ONE_SET = "capstone: one fragment set"
# Step 4 of chapter 09's ladder, one change at a time (notebook/ch09_split.py): the
# z-order kernel's copies made cp.async into its two stages; the capstone's warp tiles
# with one fragment set; the capstone itself (two fragment sets).
_STEP_4 = (
    Step("+ cp.async copies, 2 stages", "zorder", {**_ZORDER, "PAD": 4, "ZORDER": True},
         variant="zorder: cp.async ring, 2 stages"),
    Step("+ warp tiles (one fragment set)", "capstone", _capstone(),
         variant=_ONE_SET),
    Step("+ double-buffered fragments", "capstone", _capstone()))
_LADDER_STEPS = (
    Step("chapter 08: staged through registers", "double_buffer", K5),
    Step("2 x 2 sub-tiles of 4 x 4 per thread", "zorder",
         {**_ZORDER, "PAD": 0, "ZORDER": False}),
    Step("+ A tile rows padded to BM + 4", "zorder",
         {**_ZORDER, "PAD": 4, "ZORDER": False}),
    Step("+ z-order lanes", "zorder", {**_ZORDER, "PAD": 4, "ZORDER": True}),
    *_STEP_4,
    Step("+ 4 stages", "capstone", _capstone(STAGES=4)),
    Step("+ BK = 16", "capstone", _capstone(STAGES=4, BK=16)),
    Step("+ hoisted copy addresses (the capstone's default)", "capstone",
         _capstone(STAGES=4, BK=16, HOIST=True)),
    Step("+ grouped block order", "capstone",
         _capstone(STAGES=4, BK=16, HOIST=True, GROUP=8)))
STUDY_LIST = (
    Study("ch09_ladder", "09",
          "From chapter 08's kernel to the capstone, one change per step",
          "time", _LADDER_STEPS, (CUBE_2048, CUBE_4096)),
    # The same steps where the capstone's kernel runs them, built with MINB = 2 (two
    # blocks per SM): the ladder's second column, timed in the ladder's run.
    Study("ch09_ladder_minb2", "09",
          "The capstone's steps of the ladder, built to fit two blocks per SM", "time",
          tuple(replace(s, label=f"{s.label}, MINB = 2", params={**s.params, "MINB": 2})
                for s in _LADDER_STEPS if "MINB" in s.params),
          (CUBE_2048, CUBE_4096)),
    # Step 7 (the capstone's default) with one of its choices undone: BK = 8 (step 6)
    # and one fragment set (step 4c), each as built and with MINB = 2. Timed in the
    # ladder's run, so that each is compared with step 7's own rows.
    Study("ch09_step7_choices", "09",
          "Does the capstone still need BK = 16 and its second fragment set?", "time",
          tuple(Step(label + (", MINB = 2" if m == 2 else ""), "capstone",
                     _capstone(STAGES=4, BK=bk, HOIST=True, MINB=m), variant=variant)
                for label, bk, variant in (("step 7 at BK = 8", 8, None),
                                           ("step 7 with one fragment set", 16, _ONE_SET))
                for m in (1, 2)),
          (CUBE_2048, CUBE_4096)),
    Study("ch07_ablation", "07",
          "Chapter 06's tile, then 16-byte global loads, then the transposed A tile",
          "time", (
              Step("chapter 06: scalar loads, A row-major", "tile_2d_reg", K5),
              Step("+ 16-byte global loads (LDG.128)", "float4_a_rows", K5),
              Step("+ transposed A tile (LDS.128 of A)", "float4", K5)),
          (CUBE_2048, CUBE_4096)),
    Study("ch08_one_block", "08",
          "Does double buffering pay when a second block per SM no longer hides the "
          "loads?", "time", (
              Step("chapter 07, two blocks per SM", "float4", K5),
              Step("chapter 08, two blocks per SM", "double_buffer", K5),
              Step("chapter 07, one block per SM", "float4", {**K5, "ONE_PER_SM": True}),
              Step("chapter 08, one block per SM", "double_buffer",
                   {**K5, "ONE_PER_SM": True})),
          (CUBE_4096,)),
    # Chapter 06's path from K5 to the default and the K5 tile's four patches at the size
    # its counters are profiled at; K5 itself and the default are recorded there already,
    # so only the other steps are timed (a row timed again would replace theirs).
    Study("ch06_path_4096", "06",
          "The steps between K5 and the default, and the K5 tile's other patches, at 4096^3",
          "time", (
              Step("patch 8x4", "tile_2d_reg", {**K5, "TN": 4}),
              Step("BM 64", "tile_2d_reg", {**K5, "TN": 4, "BM": 64}),
              Step("patch 4x8", "tile_2d_reg", {**K5, "TM": 4}),
              Step("patch 4x4", "tile_2d_reg", {**K5, "TM": 4, "TN": 4})),
          (CUBE_4096,)),
    Study("ch05_outputs", "05", "How many outputs should a thread compute?", "time", (
              Step("1 output per thread (chapter 03)", "smem_tiled", {"BLOCK": 32}),
              Step("2 outputs per thread", "tile_1d", {"BM": 64, "BN": 32, "BK": 8, "TM": 2}),
              Step("4 outputs per thread", "tile_1d", {"BM": 64, "BN": 64, "BK": 8, "TM": 4}),
              Step("8 outputs per thread (kernel-4 tile)", "tile_1d", K4),
              Step("16 outputs per thread (the default)", "tile_1d", {})),
          (CUBE_4096,)),
    # The exercise's question: the default tile with its threads down a column of the
    # tile first (notebook/ch05_down_column.py), counted beside the kernel as written.
    Study("ch05_down_column", "05", "The default tile with its threads down the column "
          "first: the shared-memory wavefronts counted", "ncu", (
              Step("along the row (as written)", "tile_1d", {}),
              Step("down the column first", "tile_1d", {},
                   variant="tile_1d: threads down the column first")),
          (CUBE_2048,), (SHARED_ALL, STALLS, *ISSUE)),
    Study("ch05_outputs_stalls", "05",
          "Where the warps wait with 2 and 4 outputs per thread (BK = 8, 1024 threads)", "ncu", (
              Step("2 outputs per thread", "tile_1d", {"BM": 64, "BN": 32, "BK": 8, "TM": 2}),
              Step("4 outputs per thread", "tile_1d", {"BM": 64, "BN": 64, "BK": 8, "TM": 4})),
          (CUBE_4096,), (STALLS, *ISSUE, *PIPES)),
    Study("stalls", "00",
          "Where the warps wait: stall reasons per issued instruction", "ncu", (
              Step("chapter 03", "smem_tiled", {}),
              Step("chapter 05, kernel-4 tile", "tile_1d", K4),
              Step("chapter 05, default", "tile_1d", {}),
              Step("chapter 06, kernel-5 tile", "tile_2d_reg", K5),
              Step("chapter 07", "float4", K5),
              Step("chapter 08", "double_buffer", K5),
              Step("chapter 07, one block per SM", "float4", {**K5, "ONE_PER_SM": True}),
              Step("chapter 08, one block per SM", "double_buffer",
                   {**K5, "ONE_PER_SM": True}),
              Step("chapter 09, z-order", "zorder", {}),
              Step("capstone", "capstone", {})),
          (CUBE_4096,), (STALLS, *ISSUE, *PIPES)),
    Study("ch06_path_stalls", "06",
          "From K5 to the default one change at a time: where the warps wait", "ncu", (
              Step("K5", "tile_2d_reg", K5),
              Step("patch 8x4", "tile_2d_reg", {**K5, "TN": 4}),
              Step("BM 64", "tile_2d_reg", {**K5, "TN": 4, "BM": 64}),
              Step("BK 16 = default", "tile_2d_reg", {})),
          (CUBE_4096,), (STALLS, *ISSUE, *PIPES)),
    Study("ch03_caches", "03",
          "Shared-memory tiling at 4096^3: DRAM and cache traffic, and where the warps "
          "wait at each block size", "ncu", (
              Step("BLOCK = 8", "smem_tiled", {"BLOCK": 8}),
              Step("BLOCK = 16", "smem_tiled", {"BLOCK": 16}),
              Step("BLOCK = 32", "smem_tiled", {"BLOCK": 32})),
          (CUBE_4096,), (*CACHES, STALLS, *ISSUE)),
    # The course notes' question: chapter 03's kernel with tx and ty swapped (a variant
    # registered by notebook.ch03_evidence), its shared-memory wavefronts beside the
    # kernel as written.
    Study("ch03_swap", "03", "Chapter 03's kernel with threadIdx.x down the rows of C",
          "ncu", (
              Step("as written", "smem_tiled", {"BLOCK": 32}),
              Step("tx and ty swapped", "smem_tiled", {"BLOCK": 32},
                   variant="smem_tiled: tx and ty swapped")),
          (CUBE_2048,), (STALLS, *ISSUE, *PIPES)),
    # The L1 data pipe serves shared memory and global loads alike (chapter 02): its
    # wavefronts of both kinds at each block size, to test the count "shared wavefronts +
    # global wavefronts per warp and step" that ranks chapter 03's block sizes.
    Study("ch03_l1_pipe", "03", "Chapter 03's kernel: the L1 data pipe's wavefronts, "
          "shared and global together, at each block size", "ncu", (
              Step("BLOCK = 4", "smem_tiled", {"BLOCK": 4}),
              Step("BLOCK = 8", "smem_tiled", {"BLOCK": 8}),
              Step("BLOCK = 16", "smem_tiled", {"BLOCK": 16}),
              Step("BLOCK = 32", "smem_tiled", {"BLOCK": 32})),
          (CUBE_4096,),
          ("re:^l1tex__data_pipe_lsu_wavefronts(_mem_(lgds|shared)(_cmd_read|_cmd_write"
           "|_op_ld|_op_st)?)?\\.sum$",
           "re:^l1tex__data_bank_conflicts_pipe_lsu_mem_(global|shared)[a-z_]*\\.sum$",
           "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", *ISSUE)),
    Study("ch00_naive_dram", "00", "The naive kernel and cuBLAS-sized traffic at 4096^3",
          "ncu", (
              Step("naive, x->row", "naive", {"BLOCK": 32, "MAPPING": "x->row"}),),
          (CUBE_4096,), tuple(DRAM)),
    Study("ch07_one_per_sm_caches", "07",
          "Chapter 07's kernel with one and two blocks per SM: cache hit rates and waits",
          "ncu", (
              Step("two blocks per SM", "float4", K5),
              Step("one block per SM", "float4", {**K5, "ONE_PER_SM": True})),
          (CUBE_4096,), (*CACHES, STALLS, *ISSUE)),
    Study("ch02_caches", "02", "Why BLOCK = 8 runs at half the speed of BLOCK = 32", "ncu", (
              Step("BLOCK = 8", "coalesced", {"BLOCK": 8}),
              Step("BLOCK = 16", "coalesced", {"BLOCK": 16}),
              Step("BLOCK = 32", "coalesced", {"BLOCK": 32})),
          (CUBE_4096,), (*CACHES, STALLS, *ISSUE)),
    Study("ch02_l1_lines", "02", "Lines the L1 handles per cycle, naive and coalesced", "ncu", (
              Step("naive x->row, BLOCK = 8", "naive", {"BLOCK": 8, "MAPPING": "x->row"}),
              Step("naive x->row, BLOCK = 32", "naive", {"BLOCK": 32, "MAPPING": "x->row"}),
              Step("BLOCK = 8", "coalesced", {"BLOCK": 8}),
              Step("BLOCK = 16", "coalesced", {"BLOCK": 16}),
              Step("BLOCK = 32", "coalesced", {"BLOCK": 32})),
          (CUBE_2048,), (*L1_LINES, STALLS, *ISSUE)),
    # Chapter 01's own x->col mapping (one warp along a row of C, like chapter 02's
    # coalesced kernel) counted as ch02_l1_lines counts the others, on and off 128-byte
    # lines, so that chapter 01 reads its own kernel's wavefronts.
    Study("ch01_xcol_l1", "01", "What the L1 counts for the naive kernel's x->col loads",
          "ncu", tuple(Step(f"naive x->col, BLOCK = {b}", "naive",
                            {"BLOCK": b, "MAPPING": "x->col"}) for b in (8, 16, 32)),
          ((2047, 2047, 2047), CUBE_2048), (*L1_LINES, STALLS, *ISSUE)),
    # The one naive configuration of chapter 01's six that chapter 02's profile leaves
    # out (x->row at BLOCK = 16), counted the same way.
    Study("ch01_xrow_l1", "01", "What the L1 counts for the naive kernel's x->row loads at "
          "BLOCK = 16", "ncu", (Step("naive x->row, BLOCK = 16", "naive",
                                     {"BLOCK": 16, "MAPPING": "x->row"}),),
          (CUBE_2048,), (*L1_LINES, STALLS, *ISSUE)),
    # x->col off 128-byte lines, timed (its rows at 2048^3 are the chapter's own timings,
    # which a row timed again here would replace)
    Study("ch01_xcol_2047", "01", "The naive kernel's x->col mapping off 128-byte lines",
          "time", tuple(Step(f"naive x->col, BLOCK = {b}", "naive",
                             {"BLOCK": b, "MAPPING": "x->col"}) for b in (8, 16, 32)),
          ((2047, 2047, 2047),)),
    Study("ch02_l1_stages", "02", "What limits the coalesced kernel at BLOCK = 32: the load "
          "pipe, or a stage of the L1 other than the lines", "ncu", (
              Step("naive x->row, BLOCK = 32", "naive", {"BLOCK": 32, "MAPPING": "x->row"}),
              Step("BLOCK = 8", "coalesced", {"BLOCK": 8}),
              Step("BLOCK = 32", "coalesced", {"BLOCK": 32})),
          (CUBE_2048,), (*L1_STAGES, *ISSUE)),
    # Chapter 02's alignment: the coalesced kernel where every row of B starts a 128-byte
    # line (2048) and where it does not (2047), timed in one run: does the rate fall as
    # the line count rises?
    Study("ch02_alignment", "02", "The coalesced kernel with B's rows on and off 128-byte "
          "lines", "time", (
              Step("BLOCK = 16", "coalesced", {"BLOCK": 16}),
              Step("BLOCK = 32", "coalesced", {"BLOCK": 32})),
          ((2047, 2047, 2047), CUBE_2048)),
    # The smallest block of the same comparison, timed in a run of its own (added once the
    # profile below showed its wavefronts falling most off the lines).
    Study("ch02_alignment_block8", "02", "The coalesced kernel at BLOCK = 8 with B's rows on "
          "and off 128-byte lines", "time", (
              Step("BLOCK = 8", "coalesced", {"BLOCK": 8}),),
          ((2047, 2047, 2047), CUBE_2048)),
    # The naive kernel reading down columns of A (x->row) on and off 128-byte lines: at an
    # odd row length its lanes' words fall on different banks but in as many lines as
    # lanes: does the L1 then charge the banks or the lines (its tag stage)?
    Study("ch02_naive_alignment", "02", "The naive kernel (x->row) on and off 128-byte lines",
          "time", (
              Step("naive x->row, BLOCK = 8", "naive", {"BLOCK": 8, "MAPPING": "x->row"}),
              Step("naive x->row, BLOCK = 32", "naive", {"BLOCK": 32, "MAPPING": "x->row"})),
          ((2047, 2047, 2047), CUBE_2048)),
    Study("ch02_naive_alignment_l1", "02", "What the L1 counts for the naive kernel's loads on "
          "and off 128-byte lines", "ncu", (
              Step("naive x->row, BLOCK = 8", "naive", {"BLOCK": 8, "MAPPING": "x->row"}),
              Step("naive x->row, BLOCK = 32", "naive", {"BLOCK": 32, "MAPPING": "x->row"})),
          ((2047, 2047, 2047), CUBE_2048),
          (*L1_LINES,
           "re:^l1tex__data_bank_conflicts_pipe_lsu_mem_global[a-z_]*\\.sum$",
           "re:^l1tex__data_pipe_lsu_wavefronts[a-z_]*\\.sum$", *ISSUE)),
    # The same kernel profiled on and off 128-byte lines: what the L1's data stage counts
    # for global loads (wavefronts, bank conflicts) when rows of A stop sharing a bank
    # (a stride of 2047 words) and rows of B straddle two lines: does it count lines or
    # words that compete for one bank? At 2048 the two counts coincide.
    Study("ch02_alignment_l1", "02", "What the L1 counts for global loads on and off "
          "128-byte lines: lines, or words on one bank", "ncu", (
              Step("BLOCK = 8", "coalesced", {"BLOCK": 8}),
              Step("BLOCK = 16", "coalesced", {"BLOCK": 16}),
              Step("BLOCK = 32", "coalesced", {"BLOCK": 32})),
          ((2047, 2047, 2047), CUBE_2048),
          (*L1_LINES, *L1_STAGES,
           "re:^l1tex__data_bank_conflicts_pipe_lsu_mem_global[a-z_]*\\.sum$",
           "re:^l1tex__data_pipe_lsu_wavefronts[a-z_]*\\.sum$", *ISSUE)),
    Study("ch05_depth_stalls", "05", "The default tile at BK = 8 and BK = 16: where the warps "
          "wait", "ncu", (
              Step("BK = 8", "tile_1d", {"BM": 64, "BN": 64, "BK": 8, "TM": 16}),
              Step("BK = 16", "tile_1d", {"BM": 64, "BN": 64, "BK": 16, "TM": 16})),
          (CUBE_4096,), (STALLS, *ISSUE, *PIPES)),
    Study("ch07_depth_stalls", "07", "Chapter 07's kernel at BK = 8 and BK = 16: where the "
          "warps wait", "ncu", (
              Step("BK = 8", "float4", K5),
              Step("BK = 16", "float4", {**K5, "BK": 16})),
          (CUBE_4096,), (STALLS, *ISSUE, *PIPES)),
    Study("ch09_step_stalls", "09", "Where the warps wait before and after the cp.async ring, "
          "and at the capstone", "ncu", (
              Step("+ z-order lanes", "zorder", {**_ZORDER, "PAD": 4, "ZORDER": True}),
              *_STEP_4,
              Step("+ 4 stages", "capstone", _capstone(STAGES=4)),
              Step("+ BK = 16", "capstone", _capstone(STAGES=4, BK=16)),
              Step("+ hoisted copy addresses (the capstone's default)", "capstone",
                   _capstone(STAGES=4, BK=16, HOIST=True))),
          (CUBE_4096,), (STALLS, *ISSUE, *PIPES)),
    # Part A of chapter 09's ladder (steps 0 to 3), profiled on the ladder's GPU and size:
    # the shared loads' wavefronts and bank conflicts, and where the warps wait, before and
    # after step 1 removes chapter 08's conflict.
    Study("ch09_part_a_stalls", "09", "Part A of the ladder counted: shared-load wavefronts, "
          "bank conflicts and stalls of steps 0 to 3", "ncu", _LADDER_STEPS[:4],
          (CUBE_4096,), (STALLS, *ISSUE, *PIPES, *LDGSTS[1:])),
    Study("ch11_dgemm_stalls", "11", "The tiled DGEMM at BLOCK = 8, 16 and 32: where the warps "
          "wait", "ncu", (
              Step("BLOCK = 8", "dgemm_tiled", {"BLOCK": 8}),
              Step("BLOCK = 16", "dgemm_tiled", {"BLOCK": 16}),
              Step("BLOCK = 32", "dgemm_tiled", {"BLOCK": 32})),
          (CUBE_2048,), (STALLS, *ISSUE, *PIPES)),
    Study("ch07_ablation_counters", "07", "The same three steps, counted", "ncu", (
              Step("chapter 06: scalar loads, A row-major", "tile_2d_reg", K5),
              Step("+ 16-byte global loads (LDG.128)", "float4_a_rows", K5),
              Step("+ transposed A tile (LDS.128 of A)", "float4", K5)),
          (CUBE_4096,), (*ISSUE, *PIPES, *LDGSTS[1:], STALLS)),
    Study("ch09_ldgsts", "09", "What cp.async writes into shared memory, counted", "ncu", (
              Step("chapter 09, z-order (LDG + STS)", "zorder", {}),
              Step("capstone (LDGSTS)", "capstone", {})),
          (CUBE_1024,), tuple(LDGSTS)),
    # Does the capstone's padded A tile (LDA = BM + 4) pay for its 4-byte cp.async copies?
    # The bank model says 1 wavefront per copy padded, 8 unpadded; ncu counted 4 padded.
    # The capstone as built and with rows of BM (notebook/ch09_unpadded.py), counted.
    Study("ch09_unpadded", "09", "The capstone's A tile padded and unpadded: shared-memory "
          "wavefronts and bank conflicts, counted", "ncu", (
              Step("capstone (A rows of BM + 4)", "capstone", {}),
              Step("capstone, A tile unpadded (rows of BM)", "capstone", {},
                   variant="capstone: A tile unpadded")),
          (CUBE_1024,), tuple(LDGSTS)),
    # The same variant timed beside cuBLAS, alone: a timing of the capstone itself at these
    # shapes would replace the ladder's rows of step 7 (compare the shares of cuBLAS).
    # Unpadded, ptxas gives the capstone 129 registers: one block per SM, where the capstone
    # as built runs two. The MINB = 2 build holds it to two blocks, so that the pad's own
    # cost is set apart from the lost block.
    Study("ch09_unpadded_time", "09", "The capstone with its A tile unpadded, timed", "time", (
              Step("capstone, A tile unpadded (rows of BM)", "capstone", {},
                   variant="capstone: A tile unpadded"),
              Step("capstone, A tile unpadded (rows of BM), MINB = 2", "capstone",
                   {"MINB": 2}, variant="capstone: A tile unpadded")),
          (CUBE_2048, CUBE_4096)),
    Study(PRETRANSPOSED_A, "10",
          "Chapter 07's kernel on a pre-transposed A: is the GEMM faster, and does the "
          "saving pay for the transpose?", "time", (
              Step("chapter 07: A as it is (4 STS.32 per float4 of A)", "float4", K5),
              Step("A^T given (1 STS.128 per float4 of A)", "float4_at", K5),
              Step("the transpose that makes A^T (M x K, float32)", "transpose_fast",
                   {"T": "float"}, operand="A")),
          (CUBE_2048, CUBE_4096, NARROW_N)),
    Study("ch10_dram", "10", "DRAM traffic and loads in flight at 8191 x 4097", "ncu", (
              Step("copy", "copy", {}),
              Step("padded tile, one tile per block", "transpose_padded", {"STACK": 1}),
              Step("padded tile, two tiles stacked per block", "transpose_padded",
                   {"STACK": 2}),
              Step("diagonal block order", "transpose_diagonal", {}),
              Step("vector loads and stores", "transpose_fast", {})),
          (ODD_TRANSPOSE,), (*DRAM, STALLS, *ISSUE)),
)
# Chapter 12's shortfalls against cuBLAS, profiled: the ragged N (the scalar path of B
# and C, and B padded) beside the same tile at the nearest shape with N % 4 == 0, and the two
# matrix-vector paths with and without a split of K (and M == 1 with plain loads of B
# instead of streaming ones).
STUDY_LIST += (
    Study("ch12_ragged_n", "12",
          "Why 4097 x 1023 x 515 runs slower than 4096 x 1024 x 515", "ncu", (
              Step("64 x 128 tiles, no split", "capstone_split",
                   {"BM": 64, "BN": 128, "SPLIT": 1}),
              Step("64 x 128 tiles, no split, B padded", "capstone_split",
                   {"BM": 64, "BN": 128, "SPLIT": 1, "PAD_B": True})),
          ((4097, 1023, 515), (4096, 1024, 515)), (STALLS, *ISSUE, *PIPES, *DRAM)),
    # Chapter 12's worst shortfall: the small ragged shape where cuBLAS splits K. Would a
    # split have helped the plan's tile (or the wider one)? Each timed beside cuBLAS.
    Study("ch12_small_splits", "12", "Splits of K at the small ragged shape, timed", "time",
          tuple(Step(f"{bm}x{bn} tiles, " + (f"K in {s} slices" if s > 1 else "no split"),
                     "capstone_split", {"BM": bm, "BN": bn, "SPLIT": s, "PAD_B": True})
                for bm, bn in ((64, 64), (64, 128)) for s in (1, 2, 3, 4)),
          ((777, 555, 333),)),
    Study("ch12_gemv", "12", "Where the matrix-vector products spend their time", "ncu", (
              Step("K in 16 slices", "gemv", {"SPLIT": 16}),
              Step("K in 16 slices, plain loads", "gemv", {"SPLIT": 16, "STREAM": False}),
              Step("no split", "gemv", {"SPLIT": 1})),
          ((1, 4096, 4096), (4096, 1, 4096)), (STALLS, *ISSUE, *DRAM)),
)
# Chapter 12: the M == 1 plan's own launch (the rules' block size, split and loads at
# 1 x 4096 x 4096), profiled like ch12_gemv's, so that the chapter's account of that call
# rests on the launch that was timed and not only on ch12_gemv's other splits.
STUDY_LIST += (
    Study("ch12_gemv_plan", "12", "The M == 1 plan's own launch, profiled", "ncu", (
              Step("the plan: 32 warps per block, K in 4 slices, streaming loads", "gemv",
                   {"SPLIT": 4, "WARPS": 32, "STREAM": True}),),
          ((1, 4096, 4096),), (STALLS, *ISSUE, *DRAM)),
)
# Chapter 13: where the WMMA kernels' time goes. The naive kernel (fragments straight
# from global memory), the tiled one without and with padded shared rows (the fragment
# loads are ldmatrix, LDSM: their shared-memory wavefronts and bank conflicts), and the
# tensor pipe's share of the cycles.
TENSOR = ["re:^sm__(pipe_tensor_op_hmma_cycles_active|inst_executed_pipe_tensor_op_hmma)"
          "\\.(sum|avg\\.pct_of_peak_sustained_active)$",
          "re:^smsp__inst_executed_op_ldsm\\.sum$"]
STUDY_LIST += (
    Study("ch13_wmma", "13", "Where the WMMA kernels spend their time", "ncu", (
              Step("one warp per tile, fragments from global memory", "wmma_naive", {}),
              Step("shared tiles, rows not padded", "wmma_tiled", {"PAD": 0}),
              Step("shared tiles, rows padded by 8 halves", "wmma_tiled", {"PAD": 8})),
          (CUBE_4096,), (STALLS, *ISSUE, SHARED_ALL, *TENSOR, *DRAM)),
    # Where the naive kernel's loads queue: each LDG.E touches 8 lines, so the L1's stages
    # (the busiest of them against its peak) decide whether the L1 is the queue.
    Study("ch13_naive_l1", "13", "The naive WMMA kernel's loads: how busy each stage of "
          "the L1 is", "ncu", (
              Step("one warp per tile, fragments from global memory", "wmma_naive", {}),),
          (CUBE_4096,), (*L1_STAGES, *L1_LINES)),
    # The control of that reading: rows 8,192 bytes apart (4096) fall on the same banks
    # of the L1's data stage; rows 8,224 bytes apart (4112, 32 past a multiple of 128)
    # do not. Both sizes in one profile, with their kernel times.
    Study("ch13_naive_stride", "13", "The naive WMMA kernel with rows on and off a "
          "multiple of 128 bytes", "ncu", (
              Step("one warp per tile, fragments from global memory", "wmma_naive", {}),),
          (CUBE_4096, (4112, 4112, 4112)),
          ("l1tex__data_pipe_lsu_wavefronts_mem_lgds_cmd_read.sum",
           "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
           "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_active",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_gds_op_ld.avg.pct_of_peak_sustained_active",
           *ISSUE)),
    # The size off the power of two timed (no profiler): the naive and tiled WMMA kernels
    # beside the FP32 capstone, each beside its own cuBLAS, in one run: is the naive
    # kernel's loss to FFMA at the chapter's sizes a power-of-two effect? (Only 4112^3:
    # a timing at 4096^3 would replace the chapter's own rows.)
    Study("ch13_size_4112", "13", "The WMMA kernels and the FP32 capstone with rows 32 bytes "
          "past a multiple of 128, timed", "time", (
              Step("naive WMMA", "wmma_naive", {}),
              Step("tiled WMMA", "wmma_tiled", {}),
              Step("FP32 capstone", "capstone", {})),
          ((4112, 4112, 4112),)),
    # The tiled kernel with its next tile loaded after the mma (no loads in flight
    # during it), timed alone: its own run and cuBLAS (a timing of wmma_tiled itself
    # would replace the chapter's row).
    Study("ch13_no_overlap", "13", "The tiled WMMA kernel without its loads in flight "
          "during the mma", "time", (
              Step("next tile loaded after the mma", "wmma_tiled", {},
                   variant="wmma_tiled: next tile loaded after the mma"),),
          (CUBE_4096,)),
)
# Chapter 14: the mma.sync kernel's shared-memory layouts (ldmatrix wavefronts and bank
# conflicts without and with the swizzle) and what its tiles wait on, at 4096^3 and at
# 8192^3 (where they run a few percent slower against cuBLAS at the same clock).
STUDY_LIST += (
    Study("ch14_mma", "14", "What the swizzle removes, and what the mma.sync kernel waits on",
          "ncu", (
              Step("plain rows", "mma_sync", {"SWIZZLE": False}),
              Step("swizzled rows", "mma_sync", {"SWIZZLE": True}),
              Step("BK = 64, 3 stages", "mma_sync", {"BK": 64, "STAGES": 3})),
          (CUBE_4096, (8192, 8192, 8192)), (STALLS, *ISSUE, SHARED_ALL, *TENSOR, *DRAM)),
)
# Chapter 14: the SM clock and power of the mma.sync kernel and of cuBLAS, each run for
# seconds (the profiler locks the clock, so its profiles cannot show a difference there).
STUDY_LIST += (
    Study("ch14_clocks", "14", "At which clock the mma.sync kernel and cuBLAS run, and at "
          "what power", "clocks", (
              Step("BK = 32, 4 stages", "mma_sync", {}),
              Step("BK = 64, 3 stages", "mma_sync", {"BK": 64, "STAGES": 3})),
          (CUBE_2048, CUBE_4096, (8192, 8192, 8192))),
)
# Chapter 15: the Hopper kernels. wgmma runs on the tensor pipe's warpgroup path (its
# shared-memory reads are the op_gmma wavefronts); what each kernel waits on, with one
# block of warpgroups doing everything and with the roles split, and how much of the
# tensor pipe each keeps busy.
# The instruction counter says how often wgmma issues, not how busy the tensor cores
# are (one wgmma keeps them busy for many cycles): the tensor pipe's active cycles of
# the HMMA/HGMMA kind, and the FP16 HGMMA math operations, against their peaks, say
# that (names as this ncu lists them for sm_90).
HOPPER_TENSOR = ["re:^sm__inst_executed_pipe_tensor_op_gmma\\.(sum|avg\\.pct_of_peak_sustained_active)$",
                 "re:^sm__(pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active|"
                 "ops_path_tensor_op_hgmma_src_fp16)\\.(sum|avg\\.pct_of_peak_sustained_active)$"]
STUDY_LIST += (
    Study("ch15_hopper", "15", "What the TMA + wgmma kernels keep busy, and what they wait on",
          "ncu", (
              Step("one role: TMA + wgmma, __syncthreads per step", "wgmma_tma", {}),
              Step("warp-specialised, 4 stages, row order", "wgmma_ws", {}),
              Step("warp-specialised, 3 stages, groups of 16 rows", "wgmma_ws",
                   {"STAGES": 3, "GROUP": 16})),
          (CUBE_4096, (8192, 8192, 8192)),
          (STALLS, *ISSUE, SHARED_ALL, *HOPPER_TENSOR, *DRAM)),
    # The study above changes the stages and the order at once between its last two
    # steps, and at 8192^3 the timed runs move more with the power limit than either
    # change: each change alone, at the profiler's locked clock, says which of the two
    # cuts the DRAM bytes and the time.
    Study("ch15_order_profile", "15", "At 8192^3, is it the stages or the order of the "
          "blocks that cuts the DRAM traffic and the time", "ncu", (
              Step("4 stages, row order", "wgmma_ws", {}),
              Step("3 stages, row order", "wgmma_ws", {"STAGES": 3}),
              Step("4 stages, groups of 16 rows", "wgmma_ws", {"GROUP": 16}),
              Step("3 stages, groups of 16 rows", "wgmma_ws", {"STAGES": 3, "GROUP": 16})),
          ((8192, 8192, 8192),), (*ISSUE, *HOPPER_TENSOR, *DRAM)),
)
# Chapter 15: the kernels of the tensor-core chapters, each chapter's best, beside cuBLAS
# FP16 in one run (one plot compares them), and cuBLAS with BF16 inputs beside FP16; and the one-role kernel against the
# warp-specialised one at equal stages, and row order against groups of 16 rows, at
# every size, all in one run (their differences are a few per cent: separate runs on
# a GPU held at its power limit would not settle them).
TENSOR_SIZES = tuple((n, n, n) for n in (1024, 2048, 4096, 8192))
STUDY_LIST += (
    Study("ch13_15_ladder", "15", "The best kernel of each tensor-core chapter beside cuBLAS "
          "FP16, in one run", "time", (
              Step("13 wmma_tiled, padded rows", "wmma_tiled", {"PAD": 8}),
              Step("14 mma_sync, BK 64, 3 stages", "mma_sync", {"BK": 64, "STAGES": 3}),
              Step("15 warp-specialised, 3 stages, groups of 16 rows", "wgmma_ws",
                   {"STAGES": 3, "GROUP": 16})),
          (CUBE_4096, (8192, 8192, 8192)), references=("cublas_bf16",)),
    Study("ch15_orders", "15", "One role or two at equal stages, and the order of the "
          "blocks, in one run", "time", (
              Step("one role, 4 stages", "wgmma_tma", {}),
              Step("one role, 3 stages", "wgmma_tma", {"STAGES": 3}),
              Step("warp-specialised, 4 stages, row order", "wgmma_ws", {}),
              Step("warp-specialised, 3 stages, row order", "wgmma_ws", {"STAGES": 3}),
              Step("warp-specialised, 3 stages, groups of 16 rows", "wgmma_ws",
                   {"STAGES": 3, "GROUP": 16})),
          TENSOR_SIZES),
)
# Chapter 15's last step: the warp-specialised kernel made persistent (one block per SM
# walking the tiles), beside the same kernel with one block per tile, in one run.
STUDY_LIST += (
    Study("ch15_persistent", "15", "One block per tile, or one block per SM walking the "
          "tiles", "time", (
              Step("one block per tile", "wgmma_ws", {"STAGES": 3, "GROUP": 16}),
              Step("persistent, groups of 16 rows", "wgmma_persistent", {}),
              Step("persistent, row order", "wgmma_persistent", {"GROUP": 1}),
              Step("persistent, 4 stages", "wgmma_persistent", {"STAGES": 4})),
          TENSOR_SIZES),
)
# And its clusters of 2 blocks, each copying half of the B tile they share and multicasting
# it to both, beside one block per tile, in one run.
STUDY_LIST += (
    Study("ch15_cluster", "15", "Clusters of 2 blocks sharing B by TMA multicast, or one "
          "block per tile", "time", (
              Step("one block per tile", "wgmma_ws", {"STAGES": 3, "GROUP": 16}),
              Step("clusters of 2, pairs in groups of 8", "wgmma_cluster", {}),
              Step("clusters of 2, row order", "wgmma_cluster", {"GROUP": 1}),
              Step("clusters of 2, arrivals released at cluster scope", "wgmma_cluster",
                   {}, variant="wgmma_cluster: arrivals released at cluster scope")),
          TENSOR_SIZES),
)
# Chapter 08's payoff, profiled: the sources its payoff times at 2048^3, chapters 07 and
# 08 and the variants of chapter 08's kernel whose loads stay in flight (by their names
# in `notebook.timed_variants`, `ch08_prefetch.ALTERNATIVES`), with two blocks per SM and
# with one, at the chapter's tile and at BK = 16: does the wait on global loads shrink
# where the prefetch pays?
CH08_PAYOFF = (2048, 2048, 2048)
_CH08_SOURCES = (("chapter 07's kernel", "float4", None),
                 ("chapter 08's kernel", "double_buffer", None),
                 *((v, "double_buffer", f"double_buffer: {v}") for v in (
                     "without if (more), + __launch_bounds__(256, 2)",
                     "if (more) on the store only, + __launch_bounds__(256, 2)",
                     "compute, then fetch, then store, + __launch_bounds__(256, 2)",
                     "last tile peeled off the loop, + __launch_bounds__(256, 2)")))
STUDY_LIST += (
    Study("ch08_payoff_stalls", "08",
          "Where the warps wait in the sources of chapter 08's payoff, with two blocks per "
          "SM and with one", "ncu",
          tuple(Step(f"{who}, {'one block' if one else 'two blocks'} per SM, "
                     f"BK = {tile['BK']}", kernel, {**tile, "ONE_PER_SM": one},
                     variant=variant)
                for tile in (K5, {**K5, "BK": 16}) for one in (False, True)
                for who, kernel, variant in _CH08_SOURCES),
          (CH08_PAYOFF,), (STALLS, *ISSUE, *PIPES)),
)
# Chapter 08's payoff at more sizes than 2048^3: the exercise's answer (chapter 08's kernel
# without the if, two blocks per SM) timed beside cuBLAS at the sizes where chapters 07 and
# 08 were timed (their rows stay those of their own runs: a timing here would replace
# them and break the runs that other tables compare within), so the comparison is by each
# row's share of the cuBLAS timed beside it.
STUDY_LIST += (
    Study("ch08_payoff_sizes", "08",
          "Does the exercise's answer gain at every size, not only at 2048^3?", "time",
          (Step("no if + budget (the exercise's answer)", "double_buffer", K5,
                variant="double_buffer: without if (more), + __launch_bounds__(256, 2)"),),
          (CUBE_1024, CUBE_4096, (8192, 8192, 8192))),
)
# Chapter 10's naive transpose, profiled beside the copy and the padded transpose: its
# store sends one sector per lane; is the L2 (requests, sectors, its busiest stage) or
# DRAM what the naive store waits for?
L2_WRITES = ["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
             "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
             "lts__t_requests_srcunit_tex_op_write.sum",
             "lts__t_sectors_srcunit_tex_op_write.sum",
             # the L2's own stages (what lts__throughput takes the maximum of), not
             # every per-unit, per-operation family the L2 counts
             "re:^lts__(t_sectors|t_tag_requests|t_requests|d_sectors|xbar2lts_cycles_active"
             "|lts2xbar_cycles_active|cycles_active)\\.avg\\.pct_of_peak_sustained_elapsed$",
             "lts__throughput.avg.pct_of_peak_sustained_elapsed"]
STUDY_LIST += (
    Study("ch10_naive_store", "10",
          "What the naive transpose's store waits for: the L2's requests or DRAM", "ncu",
          tuple(Step(f"{who}, {t}", kernel, {"T": t}) for t in ("float", "double")
                for who, kernel in (("copy", "copy"), ("naive transpose", "transpose_naive"),
                                    ("padded transpose", "transpose_padded"))),
          ((8192, 8192),), (*L2_WRITES, *DRAM, STALLS, *ISSUE)),
    # Chapter 10's closing experiment: the two-tile padded transpose as built (1 load,
    # then 7, before its shared stores) and with every load first (8): do the warps wait
    # less for their loads, and does DRAM get busier?
    Study("ch10_loads_first", "10",
          "The best transpose with every load before its first shared store", "ncu",
          tuple(Step(label, "transpose_padded", {"T": "float"}, variant=variant)
                for label, variant in (
                    ("as built", "transpose_padded: as built, timed beside every-load-first"),
                    ("every load first", "transpose_padded: every load first"))),
          ((8192, 8192), ODD_TRANSPOSE), (*DRAM, STALLS, *ISSUE)),
    # Chapter 10's exercise, profiled like the copy: its worked solution (every load before
    # the first store, one round trip) beside the chapter's copy (two round trips), in one
    # run, with the counters the copy's latency argument reads (warps active, the
    # long-scoreboard stall, the loads executed, the profiler's clock).
    Study("ch10_solution_profile", "10",
          "The exercise's copy with every load first, profiled beside the chapter's copy",
          "ncu", (Step("copy", "copy", {"T": "float"}),
                  Step("worked solution: every load first", "copy",
                       {"T": "float", "TILE": 32, "ROWS": 8},
                       variant="10_in_flight: worked solution")),
          ((8192, 8192),), (*DRAM, STALLS, *ISSUE)),
)
STUDIES = {s.name: s for s in STUDY_LIST}


def get(name: str) -> Study:
    try:
        return STUDIES[name]
    except KeyError:
        raise ValueError(f"no study named {name!r}; known studies: "
                         f"{', '.join(STUDIES)}") from None


def problems(study: Study) -> list[str]:
    """Why a study could not run as written (unknown kernels, invalid parameters, a
    step whose shape is not one its kernel takes)."""
    from gemm_kernels.core.launch import shape_problem
    out = []
    for s in study.steps:
        if s.kernel not in KERNELS:
            out.append(f"{study.name}: step {s.label!r} names no kernel {s.kernel!r}")
            continue
        try:
            k = step_kernel(s)
        except ValueError as e:
            out.append(f"{study.name}: step {s.label!r}: {e}")
            continue
        if k.entry != KERNELS[s.kernel].entry:
            out.append(f"{study.name}: step {s.label!r}: variant {s.variant!r} is not a "
                       f"variant of {s.kernel!r}")
            continue
        try:
            bad = k.problems(s.params)
        except ValueError as e:
            bad = [str(e)]
        for shape in study.shapes:
            try:
                wrong = shape_problem(k, step_shape(s, shape))
            except ValueError as e:
                wrong = str(e)
            if wrong:
                bad.append(wrong)
                break
        out += [f"{study.name}: step {s.label!r}: {b}" for b in bad]
    if study.kind not in KINDS:
        out.append(f"{study.name}: kind {study.kind!r} is not one of {', '.join(KINDS)}")
    from gemm_kernels.measure.timing import REFERENCE_KERNELS
    out += [f"{study.name}: {r!r} is not a reference kernel" for r in study.references
            if r not in REFERENCE_KERNELS]
    if study.references and study.kind != "time":
        out.append(f"{study.name}: only a timed study times references")
    if study.kind == "ncu" and not study.metrics:
        out.append(f"{study.name}: an ncu study names no counters")
    return out


def launches(study: Study) -> list[tuple[Step, dict, tuple]]:
    """(step, full parameters, the step's shape) for every launch, in order: steps
    within the study's shapes."""
    return [(s, step_kernel(s).resolve(s.params), step_shape(s, shape))
            for shape in study.shapes for s in study.steps]


def ncu_spelling(metric: str) -> str:
    """A counter as `ncu --metrics` reads it: a `re:` pattern gets Nsight Compute's own
    prefix for a regular expression, `regex:` (ncu then takes every counter whose name
    the pattern matches, as `pick_metrics` does here); a plain name stays as it is."""
    return "regex:" + metric[3:] if metric.startswith("re:") else metric


def ncu_command(study: str, metrics=None) -> str:
    """The Nsight Compute command line that profiles the launches of `study` (each
    configuration once, at the study's shape) with `metrics` (default: every counter the
    study records): what the recording ran, to run again on another GPU."""
    st = get(study)
    metrics = st.metrics if metrics is None else metrics
    entries = sorted({KERNELS[s.kernel].entry for s in st.steps})
    return "\n".join([
        f'ncu --target-processes all -k "regex:^({"|".join(entries)})" \\',
        # a pattern in ncu's spelling (regex:) holds ( | ^ $: quoted for the shell
        "    --metrics " + ",\\\n".join(shlex.quote(ncu_spelling(m)) for m in metrics)
        + " \\",
        f"    python -m gemm_kernels.measure.profile --target {study}"])


def pick_metrics(wanted, known: set[str] | None) -> list[str]:
    """The counter names to ask ncu for: names as given, and for each `re:` pattern the
    known names it matches (sorted). Without a list of known names (ncu could not be
    asked) patterns give nothing; a plain name unknown to this ncu is left out."""
    import re
    out = []
    for w in wanted:
        if w.startswith("re:"):
            pat = re.compile(w[3:])
            out += sorted(n for n in (known or ()) if pat.search(n))
        elif known is None or w in known:
            out.append(w)
    return list(dict.fromkeys(out))


def results(name: str, shape=None, rec=None) -> list[tuple[Step, dict | None]]:
    """Each step of the study at `shape` (one of the study's shapes, the first by
    default; a step with an operand at that operand's shape) with its recorded row, or
    None where the recording (`rec`, default the one shown) has none for the current
    kernel source."""
    from gemm_kernels.measure import records
    study = get(name)
    shape = tuple(shape or study.shapes[0])
    if shape not in map(tuple, study.shapes):
        raise ValueError(f"{name} was not measured at {shape}; its shapes are "
                         f"{', '.join(map(str, study.shapes))}")
    rec = rec or records.current()
    out = []
    for step in study.steps:
        k = step_kernel(step)
        full, s = k.resolve(step.params), step_shape(step, shape)
        rows = [] if rec is None else [
            r for r in rec.find(k, s, full)
            if (r.get("study") == name if study.kind in ("ncu", "clocks")
                else "gflops" in r or "gbps" in r)]
        out.append((step, rows[0] if rows else None))
    return out


def complete_recording(name: str):
    """The recording for study `name`: the one shown if it holds a row for every step at
    every shape of the study, else the first other one that does (a study is recorded in
    one run on one GPU: its steps are compared only with each other), else the one shown."""
    from gemm_kernels.measure import records
    whole = lambda rec: all(row is not None for shape in get(name).shapes
                            for _, row in results(name, shape, rec))
    return records.first_holding(whole) or records.current()


def recording_of(name: str, shape=None):
    """The recording that holds study `name` (a row for some step): the one shown if it
    does, else the first of the others that does; None when none does. A chapter whose
    profile was taken on another GPU than its timings names that GPU beside it."""
    from gemm_kernels.measure import records
    return records.first_holding(lambda r: any(row for _, row in results(name, shape, rec=r)))


def runs(pairs) -> list[str]:
    """The runs that measured these (step, row) pairs, in order of first appearance."""
    return list(dict.fromkeys(r["run"] for _, r in pairs if r is not None))

"""Chapter 14's exercise, the XOR swizzle of mma_sync's shared tiles: each wrong swizzle
is refused by step 2 with the message that names its fault (a conflicted ldmatrix, rows 8
apart permuted differently, two chunks in one place, a chunk outside its row), a right
one passes with its predicted wavefronts, and step 3 says why it does not run without a
GPU (the kernel's PTX has no CPU emulation) instead of failing."""
import pytest

from gemm_kernels.exercises import ch14_checks
from gemm_kernels.exercises.catalog import get
from gemm_kernels.exercises.cpu_step import emulation_problem, ptx_instructions
from gemm_kernels.exercises.grader import SKIPPED, hint, student_kernel
from gemm_kernels.exercises.stubs import STUB
from exercise_helpers import FAIL, PASS, assert_right_and_timed, grade, status
from gpu import needs_gpu

NAME = "14_swizzle"
# One expression right for rows of 4 chunks (A) and of 16 (B): the chapter's two
# swizzles, c ^ ((r >> 1) & 3) and c ^ (r & 7).
SOLUTION = "c ^ ((r >> (4 / CHUNKS)) & (CHUNKS - 1) & 7)"


def cell(body: str) -> str:
    """The exercise cell with `body` as chunk_at's part to write."""
    return f"""// the swizzle
#include <cuda_fp16.h>

template <int CHUNKS, bool SWIZZLE>
__device__ __forceinline__ int chunk_at(int r, int c) {{
    int chunk = c;
    {body}
    if constexpr (!SWIZZLE) return c;
    return chunk;
}}

#include "14_mma_kernel.cuh"
"""


def static_step(expression: str):
    report = grade(NAME, cell(f"chunk = {expression};"), gpu=False, emulate=False)
    v = status(report)
    assert v["compile"][0] == PASS, v
    step = next(s for s in report.steps if s.name == "static")
    return step.status, step.detail, step.hint


def test_the_identity_is_refused_for_the_conflicts_of_both_tiles():
    verdict, detail, tip = static_step("c")
    assert verdict == FAIL
    assert "an ldmatrix of the A tile (CHUNKS = 4" in detail and "a 4-way conflict" in detail
    assert "the B tile (CHUNKS = 16" in detail and "an 8-way conflict" in detail
    assert "predicted per ldmatrix: A 16, B 32 wavefronts, against 4" in detail
    assert "rows 0, 2, 4 and 6 all land in 16-byte slot 0" in detail   # the A phase
    assert "128-byte lines" in tip


def test_xor_with_two_row_bits_leaves_a_conflicted():
    verdict, detail, _ = static_step("c ^ (r & 3)")
    assert verdict == FAIL and "an ldmatrix of the A tile" in detail
    assert "rows 0 and 4 both land" in detail and "a 2-way conflict" in detail
    assert "predicted per ldmatrix: A 8," in detail


def test_the_chapters_a_swizzle_alone_leaves_b_conflicted():
    verdict, detail, _ = static_step("c ^ ((r >> 1) & 3)")
    assert verdict == FAIL and "the A tile" not in detail.split("(predicted")[0]
    assert "an ldmatrix of the B tile" in detail and "A 4, B 8 wavefronts" in detail


def test_rows_8_apart_permuted_differently_are_refused_with_the_reason():
    verdict, detail, tip = static_step("c ^ ((r >> 3) & 3)")
    assert verdict == FAIL
    assert "rows 0 and 8 are permuted differently" in detail
    assert "works out the addresses of rows 0-7 once" in detail
    assert detail.count("works out the addresses") == 1     # the reason given once
    assert "r & 7" in tip


def test_two_chunks_in_one_place_are_not_a_permutation():
    verdict, detail, tip = static_step("c & 2")
    assert verdict == FAIL
    assert "chunks 0 and 1 of row 0 both go to place 0" in detail
    assert "loses a chunk of its data" in detail and "permute" in detail
    assert "wavefronts" not in detail        # a layout that loses data is not priced
    assert "permutation" in tip


def test_a_chunk_outside_its_row_is_refused_for_rows_of_4_chunks():
    verdict, detail, tip = static_step("c ^ 8")
    assert verdict == FAIL
    assert "the A tile (CHUNKS = 4" in detail and "is 8, past the end of the row" in detail
    assert "the B tile" not in detail        # c ^ 8 permutes rows of 16 chunks
    assert "CHUNKS - 1" in tip


def test_a_name_the_check_cannot_read_is_refused_by_the_check():
    verdict, detail, _ = static_step("c ^ (r & (CHUNKS - 1) & SWIZZLE)")
    assert verdict == FAIL and "'SWIZZLE'" in detail and "r, c, CHUNKS" in detail


def test_the_swizzle_written_twice_is_refused():
    src = cell("chunk = c;\n    chunk ^= r & 7;")
    v = status(grade(NAME, src, gpu=False, emulate=False))
    assert v["static"][0] == FAIL and "changes chunk after its line" in v["static"][1]


def test_two_branches_are_refused_with_the_one_line_form_to_write():
    src = cell("if constexpr (CHUNKS == 4) chunk = c ^ ((r >> 1) & 3);\n"
               "    else chunk = c ^ (r & 7);")
    v = status(grade(NAME, src, gpu=False, emulate=False))
    assert v["static"][0] == FAIL and "CHUNKS == 4 ? ... : ..." in v["static"][1]


def test_a_wrong_choice_by_chunks_is_still_priced():
    verdict, detail, _ = static_step("CHUNKS == 4 ? c ^ (r & 3) : c ^ (r & 7)")
    assert verdict == FAIL and "an ldmatrix of the A tile" in detail


def test_the_stub_is_reported_as_not_written():
    v = status(grade(NAME, cell(STUB), gpu=False, emulate=False))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert STUB in v["static"][1] and "ldmatrix" not in v["static"][1], v
    assert ch14_checks.swizzle_hint(v["static"][1]) == ""


@pytest.mark.parametrize("expression", [
    SOLUTION, "c ^ ((r >> (4 / CHUNKS)) % CHUNKS % 8)",
    # the chapter's two branches as one line, and the choice folded inside the XOR
    "CHUNKS == 4 ? c ^ ((r >> 1) & 3) : c ^ (r & 7)",
    "c ^ ((CHUNKS == 4 ? (r >> 1) : r) & 7 & (CHUNKS - 1))"])
def test_a_right_swizzle_passes_with_its_predicted_wavefronts(expression):
    verdict, detail, _ = static_step(expression)
    assert verdict == PASS, detail
    assert "predicted per ldmatrix: A 4, B 4 wavefronts" in detail
    assert "cp.async stores that fill the tiles: A 4, B 4" in detail


def test_without_a_gpu_step_3_is_skipped_with_the_reason_not_a_compiler_dump():
    report = grade(NAME, cell(f"chunk = {SOLUTION};"), gpu=False)
    v = status(report)
    assert v["compile"][0] == PASS and v["static"][0] == PASS, v
    verdict, detail = v["correct"]
    assert verdict == SKIPPED, v
    assert "inline PTX (cp.async, ldmatrix.sync, mma.sync) has no CPU emulation" in detail
    assert "step 2 checked" in detail and "error" not in detail, detail
    assert report.passed and not report.complete


def test_inline_ptx_is_found_in_the_headers_a_source_includes():
    k = student_kernel(get(NAME), cell(f"chunk = {SOLUTION};"))
    assert emulation_problem(k.source_text()) is None          # the cell has no asm
    assert "inline PTX" in emulation_problem(k.source_with_headers())


def test_ptx_instructions_are_named_plain_stores_only_alone():
    text = ('asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::);\n'
            'asm volatile("st.shared.v4.u32 [%0], {%1};" ::);\n'
            'asm volatile(\n  "mma.sync.aligned.m16n8k16.row.col" ::);\n'
            '// asm("ldmatrix.sync.aligned.x4") in a comment')
    assert ptx_instructions(text) == ["cp.async", "mma.sync"]
    assert ptx_instructions('asm volatile("ld.relaxed.gpu.global.u32 %0;");') == ["ld.relaxed"]
    assert emulation_problem("// no asm here, only a comment") is None


def test_each_steps_hint_names_the_swizzles_faults():
    ex = get(NAME)
    assert "permutation" in hint(ex, "correct", "wrong at 7x13x5")
    assert "r + 8" in hint(ex, "correct", "wrong at 7x13x5")
    assert hint(ex, "compile", "line 9: x") and hint(ex, "speed", "slow")


@needs_gpu
def test_the_solution_is_right_and_timed_on_a_gpu():
    assert_right_and_timed(grade(NAME, cell(f"chunk = {SOLUTION};"), gpu=True))


def test_the_copies_are_priced_in_the_kernels_order():
    b = ch14_checks.Tile("B", 32, 16)
    identity = [[c for c in range(16)] for _ in range(32)]
    spread = [[((c & 7) << 1) | (c >> 3) for c in range(16)] for _ in range(32)]
    # a warp's 8-lane phase stores chunks 0-7 of a row: the identity keeps them in one
    # 128-byte line, `spread` sends them to every other slot of two lines (2-way)
    assert ch14_checks.copy_store_cost(identity, b, 128) == 4
    assert ch14_checks.copy_store_cost(spread, b, 128) == 8


def test_every_ldmatrix_of_a_step_is_priced():
    a, b = ch14_checks.tiles({})
    assert (a.rows, a.chunks, b.rows, b.chunks) == (128, 4, 32, 16)
    table = {t.name: ch14_checks.chunk_table(SOLUTION, t) for t in (a, b)}
    loads = ch14_checks.ldmatrix_loads(table["A"], table["B"], a, b, {})
    # 2 warps along M x 4 16-row tiles x 2 k-steps; 2 warps along N x 4 column pairs x 2
    assert sum(t is a for t, *_ in loads) == 16 and sum(t is b for t, *_ in loads) == 16
    assert {an.wavefronts for *_, an in loads} == {4}


def test_a_swizzle_conflicted_only_at_rows_of_8_chunks_fails_naming_bk_64():
    # right at 4 and 16 chunks (the graded tiles), 2-way conflicted at 8 (BK = 64)
    verdict, detail, tip = static_step("CHUNKS == 16 ? c ^ (r & 7) : c ^ ((r >> 1) & 3)")
    assert verdict == FAIL
    assert "every tile width the chapter uses; with BK = 64, BN = 64" in detail
    assert "rows of 8 chunks" in detail and "the A tile (CHUNKS = 8" in detail
    assert "a 2-way conflict" in detail
    assert "Rows of 8, 16 or 32 chunks start a line each" in tip


def test_a_swizzle_conflicted_only_at_rows_of_32_chunks_fails_naming_bn_256():
    verdict, detail, _ = static_step(
        "CHUNKS == 32 ? c ^ ((r >> 1) & 7) : CHUNKS == 4 ? c ^ ((r >> 1) & 3) : c ^ (r & 7)")
    assert verdict == FAIL
    assert "with BN = 256 (A rows of 4 chunks, B rows of 32 chunks)" in detail
    assert "the B tile (CHUNKS = 32" in detail


def test_the_chapters_swizzle_passes_at_every_width():
    for extra in ch14_checks.OTHER_WIDTHS:
        v = ch14_checks.assess(cell("chunk = CHUNKS == 4 ? c ^ ((r >> 1) & 3) : c ^ (r & 7);"),
                               tuple(sorted(extra.items())))
        assert not v.problems and v.ldmatrix == {"A": 4, "B": 4}

"""Chapter 11's exercise, a transposed tile of doubles without bank conflicts: the layouts a
student tries are priced as the SASS reads them (rows of 16 refused 16-way on the store
and 8-way on the LDS.128 read, rows of 18 refused 2-way on the store alone, rows of 17 and
an XOR swizzle accepted), a read that does not find what was stored and the untransposed
layout are refused with their reason, the check's width rule agrees with ptxas, and wrong
tiles are refused on a GPU."""
from collections import Counter

import pytest

from gemm_kernels.core import analysis
from gemm_kernels.exercises import ch11_checks
from gemm_kernels.exercises.ch11_checks import tiles_64bit
from gemm_kernels.exercises.submission import submission_sass
from exercise_helpers import FAIL, PASS, refused_as_wrong, solution, static_verdict
from gpu import needs_gpu

NAME = "11_dgemm"
DECL = "__shared__ double B_shared[BLOCK][BLOCK + 1];"
STORE = "B_shared[threadIdx.x][threadIdx.y] = b;"
READ = "B_shared[threadIdx.x][k];"


def variant(pitch=None, store=None, read=None) -> str:
    src = solution(NAME)
    assert DECL in src and STORE in src and READ in src
    if pitch is not None:
        src = src.replace(DECL, f"__shared__ double B_shared[BLOCK][{pitch}];")
    if store is not None:
        src = src.replace(STORE, f"{store} = b;")
    if read is not None:
        src = src.replace(READ, f"{read};")
    return src


SWIZZLE = dict(pitch="BLOCK", store="B_shared[threadIdx.x][threadIdx.y ^ threadIdx.x]",
               read="B_shared[threadIdx.x][k ^ threadIdx.x]")


def test_rows_of_16_conflict_in_the_store_and_the_wide_read():
    v = static_verdict(NAME, variant(pitch="BLOCK"))
    assert v["compile"][0] == PASS and v["static"][0] == FAIL, v
    assert "the store to B_shared[threadIdx.x][threadIdx.y] (STS.64) costs warp 0 32 " \
           "wavefronts where 2 would do: a 16-way bank conflict in each half-warp" in v["static"][1]
    assert "the read of B_shared[threadIdx.x][k] (LDS.128" in v["static"][1]
    assert "32 wavefronts where 4 would do: an 8-way bank conflict in each quarter-warp" \
        in v["static"][1], v


def test_rows_of_18_read_well_as_lds128_but_store_2_way():
    """The two rules disagree on one layout: the LDS.128 read is conflict-free, the STS.64
    store is not."""
    v = static_verdict(NAME, variant(pitch="BLOCK + 2"))
    assert v["static"][0] == FAIL, v
    assert "the store to B_shared[threadIdx.x][threadIdx.y] (STS.64) costs warp 0 4 " \
           "wavefronts where 2 would do: a 2-way" in v["static"][1]
    assert "the read of" not in v["static"][1], v


@pytest.mark.parametrize("layout", [dict(pitch="BLOCK + 1"), dict(pitch="BLOCK + 3"), SWIZZLE],
                         ids=["rows of 17", "rows of 19", "xor swizzle"])
def test_conflict_free_layouts_pass(layout):
    v = static_verdict(NAME, variant(**layout))
    assert v["static"][0] == PASS, v


def test_a_read_that_does_not_find_the_store_is_refused():
    v = static_verdict(NAME, variant(read="B_shared[threadIdx.x][k + 1]"))
    assert v["static"][0] == FAIL and "at k = 0 reads [0][1] for threadIdx.x = 0, but the " \
        "store put B(tile * BLOCK + 0, col) at [0][0]" in v["static"][1], v


def test_the_untransposed_layout_is_not_this_exercise():
    v = static_verdict(NAME, variant(pitch="BLOCK", store="B_shared[threadIdx.y][threadIdx.x]",
                                     read="B_shared[k][threadIdx.x]"))
    assert v["static"][0] == FAIL and "this exercise stores B transposed" in v["static"][1], v


def test_two_elements_in_one_slot_are_refused():
    v = static_verdict(NAME, variant(store="B_shared[threadIdx.x][threadIdx.y / 2]",
                                     read="B_shared[threadIdx.x][k / 2]"))
    assert v["static"][0] == FAIL and "in the same slot" in v["static"][1], v


def test_an_index_the_check_cannot_read_is_named():
    v = static_verdict(NAME, variant(read="B_shared[threadIdx.x][col % BLOCK]"))
    assert v["static"][0] == FAIL and "cannot evaluate the read of B_shared[threadIdx.x]" \
        "[col % BLOCK]" in v["static"][1] and "'col' in 'col % BLOCK'" in v["static"][1], v


@pytest.mark.parametrize("pitch", [16, 17, 18, 19, 20, 24])
def test_the_width_rule_is_what_ptxas_does(pitch):
    """Rows of an even length keep k and k + 1 16-byte aligned: ptxas reads them with one
    LDS.128 (16 per step with A's 8); rows of an odd length: one LDS.64 per k."""
    src = variant(pitch=str(pitch))
    slot = ch11_checks.slot_function(ch11_checks.Access("B_shared", "ld", "threadIdx.x", "k"),
                                     pitch, 16)
    sass = submission_sass(NAME, "dgemm_tiled", {"BLOCK": 16}, src)
    ops = Counter(f for _, f, _ in analysis.main_loop(sass) if f.startswith("LDS"))
    if ch11_checks.read_pairs(slot, 16):
        assert pitch % 2 == 0 and ops == {"LDS.128": 16}, ops
    else:
        assert pitch % 2 == 1 and ops == {"LDS.128": 8, "LDS.64": 16}, ops


def test_the_swizzled_read_stays_lds64():
    sass = submission_sass(NAME, "dgemm_tiled", {"BLOCK": 16}, variant(**SWIZZLE))
    ops = Counter(f for _, f, _ in analysis.main_loop(sass) if f.startswith("LDS"))
    assert ops == {"LDS.128": 8, "LDS.64": 16}, ops


# An XOR swizzle by an even number keeps k and k + 1 side by side, 16-byte aligned, so
# the layout allows LDS.128; ptxas cannot prove it and reads B with LDS.64 (A keeps its 8
# LDS.128 and one more pair merges). The check must price the LDS.64 it compiled to.
EVEN_SWIZZLE = dict(pitch="BLOCK",
                    store="B_shared[threadIdx.x][threadIdx.y ^ (2 * (threadIdx.x & 7))]",
                    read="B_shared[threadIdx.x][k ^ (2 * (threadIdx.x & 7))]")


def test_an_even_swizzle_compiled_to_lds64_is_priced_as_lds64():
    src = variant(**EVEN_SWIZZLE)
    read = ch11_checks.Access("B_shared", "ld", "threadIdx.x", "k ^ (2 * (threadIdx.x & 7))")
    slot = ch11_checks.slot_function(read, 16, 16)
    assert ch11_checks.read_pairs(slot, 16)          # the layout would allow LDS.128
    sass = submission_sass(NAME, "dgemm_tiled", {"BLOCK": 16}, src)
    ops = Counter(f for _, f, _ in analysis.main_loop(sass) if f.startswith("LDS"))
    assert ops["LDS.128"] < 16 and ops["LDS.64"] > 0, ops
    # without the SASS the read is priced as an LDS.128 and passes; with it, as the
    # LDS.64 it is, 2-way in each half-warp
    assert not any("the read of" in p for p in tiles_64bit(16)(src))
    problems = tiles_64bit(16, NAME, "dgemm_tiled", {"BLOCK": 16})(src)
    read = [p for p in problems if p.startswith("the read of B_shared")]
    assert len(read) == 1 and "(LDS.64)" in read[0] and "a 2-way" in read[0], problems


def test_the_loop_lds128_go_to_a_first():
    """Eight LDS.128 (A's own) leave none for B: its pairable read is an LDS.64; sixteen
    leave eight, enough for B's read."""
    accesses = [ch11_checks.Access("A_shared", "ld", "threadIdx.y", "k"),
                ch11_checks.Access("B_shared", "ld", "threadIdx.x", "k")]
    slots = {a: ch11_checks.slot_function(a, 18, 16) for a in accesses}
    w = ch11_checks.widths(accesses, slots, 16, 8)
    assert w[accesses[0]] == 16 and w[accesses[1]] == 8
    w = ch11_checks.widths(accesses, slots, 16, 16)
    assert w[accesses[0]] == 16 and w[accesses[1]] == 16
    assert ch11_checks.widths(accesses, slots, 16)[accesses[1]] == 16


# Typical wrong answers the static step cannot see, refused on a GPU by the element-wise
# check.
WRONG = {
    "A tile read down a column": ("A_shared[threadIdx.y][k]", "A_shared[k][threadIdx.y]"),
    "no zeros outside the matrices": ("(row < M && j < K) ? A[row * K + j] : 0.0",
                                      "A[row * K + j]"),
}


@needs_gpu
@pytest.mark.parametrize("what", WRONG)
def test_wrong_answers_are_refused_on_a_gpu(what):
    refused_as_wrong(NAME, *WRONG[what])


# ------------------------------------------------------------------ the check on CPU

def _kernel(pitch, store, read, a_read="A_shared[threadIdx.y][k]"):
    return ("__shared__ double A_shared[BLOCK][BLOCK];\n"
            f"__shared__ double B_shared[BLOCK][{pitch}];\n"
            "A_shared[threadIdx.y][threadIdx.x] = 0.0;\n"
            f"{store} = b;\nacc += {a_read} * {read};\n")


T_STORE, T_READ = "B_shared[threadIdx.x][threadIdx.y]", "B_shared[threadIdx.x][k]"


def test_the_check_accepts_one_double_of_padding():
    assert tiles_64bit(16)(_kernel("BLOCK + 1", T_STORE, T_READ)) == []


def test_the_check_prices_even_rows_as_lds128_reads():
    problems = tiles_64bit(16)(_kernel("BLOCK + 4", T_STORE, T_READ))
    assert len(problems) == 2 and "(STS.64)" in problems[0] and "a 4-way" in problems[0]
    assert "(LDS.128" in problems[1] and "a 2-way" in problems[1], problems


def test_a_broadcast_of_a_is_no_conflict():
    """A_shared[ty][k]: one LDS.128 broadcast per half-warp, 2 wavefronts of 4."""
    assert tiles_64bit(16)(_kernel("BLOCK + 1", T_STORE, T_READ)) == []
    # read as an LDS.64 (a padded A tile): the half-warps merge, 2 wavefronts of 2
    src = _kernel("BLOCK + 1", T_STORE, T_READ).replace("A_shared[BLOCK][BLOCK]",
                                                         "A_shared[BLOCK][BLOCK + 1]")
    assert tiles_64bit(16)(src) == []


def test_comments_are_not_read_as_code():
    src = _kernel("BLOCK + 1", T_STORE, T_READ) + "// B_shared[threadIdx.y][threadIdx.x] = b;\n"
    assert tiles_64bit(16)(src) == []


def test_a_missing_access_is_named():
    src = ("__shared__ double A_shared[BLOCK][BLOCK];\n"
           "__shared__ double B_shared[BLOCK][BLOCK + 1];\n"
           "A_shared[threadIdx.y][threadIdx.x] = 0.0;\nacc += A_shared[threadIdx.y][k];\n")
    assert tiles_64bit(16)(src) == [
        f"no store to B_shared found: stage the tile and read it in the inner loop. "
        f"{ch11_checks.FORM}",
        f"no read of B_shared found: stage the tile and read it in the inner loop. "
        f"{ch11_checks.FORM}"]


def test_a_refused_form_shows_the_form_the_check_reads():
    """A layout written with a helper variable is refused: the message shows the accepted
    form by the given A_shared accesses, which give nothing of B_shared away."""
    v = static_verdict(NAME, variant(read="B_shared[threadIdx.x][col % BLOCK]"))
    assert "as the cell writes A_shared[threadIdx.y][threadIdx.x]" in v["static"][1], v


def test_a_mapping_error_gets_the_mapping_hint_and_a_conflict_the_banks_hint():
    from gemm_kernels.exercises.catalog import get
    from gemm_kernels.exercises.grader import hint
    ex = get(NAME)
    wrong_row = ("the store to B_shared[threadIdx.y][threadIdx.x] is row 0 for threadIdx = "
                 "(1, 0): this exercise stores B transposed, so a thread's row of B_shared is "
                 "the column of B it owns, threadIdx.x")
    assert hint(ex, "static", wrong_row).startswith("B_shared[threadIdx.x][c] must hold")
    conflict = ("the store to B_shared[threadIdx.x][threadIdx.y] (STS.64) costs warp 0 4 "
                "wavefronts where 2 would do: a 2-way bank conflict in each half-warp")
    assert hint(ex, "static", conflict).startswith("in each phase")


def test_rows_shorter_than_the_tile_are_refused():
    assert "at least BLOCK = 16" in tiles_64bit(16)(_kernel("BLOCK - 1", T_STORE, T_READ))[0]


def test_an_index_outside_the_tile_is_named():
    problems = tiles_64bit(16)(_kernel("BLOCK + 1", T_STORE, "B_shared[threadIdx.x][k + 2]"))
    assert problems and "outside the tile's 16 rows of 17" in problems[0], problems


def test_names_for_the_thread_indices_are_read_as_the_indices():
    """`const int tx = threadIdx.x, ty = threadIdx.y;`, as chapters 05 on write it, is not
    refused as an expression the check cannot evaluate."""
    assert ch11_checks.aliases("const int tx = threadIdx.x, ty = threadIdx.y;\n"
                               "int row = blockIdx.y * BLOCK + threadIdx.y;\n"
                               "for (int k = 0; k < BLOCK; ++k)") == \
        {"tx": "threadIdx.x", "ty": "threadIdx.y"}
    src = solution(NAME).replace(
        "    const int row = blockIdx.y",
        "    const int tx = threadIdx.x, ty = threadIdx.y;\n    const int row = blockIdx.y", 1)
    src = src.replace("B_shared[threadIdx.x][threadIdx.y] = b;", "B_shared[tx][ty] = b;") \
        .replace("B_shared[threadIdx.x][k];", "B_shared[tx][k];")
    assert "B_shared[tx][ty]" in src and "B_shared[tx][k]" in src
    v = static_verdict(NAME, src)
    assert v["static"][0] == PASS, v
    # and a conflict written with the names is still priced
    bad = src.replace("B_shared[BLOCK][BLOCK + 1]", "B_shared[BLOCK][BLOCK]")
    assert "16-way bank conflict" in static_verdict(NAME, bad)["static"][1]


def test_a_passing_layout_is_priced_in_the_report():
    """The pass message gives the layout's cost: B's store and read, and the step's total
    next to the chapter's kernel (52 wavefronts per warp and step at BLOCK = 16)."""
    check = tiles_64bit(16)
    note = check.note(_kernel("BLOCK + 1", T_STORE, T_READ))
    assert "the store to B_shared[threadIdx.x][threadIdx.y] STS.64, 2 wavefronts" in note
    assert "the read of B_shared[threadIdx.x][k] LDS.64, 2 wavefronts per instruction, " \
           "16 per tile step" in note
    assert "in all 52 wavefronts per warp and tile step, the same as the chapter's kernel" \
        in note, note
    assert ch11_checks.chapter_cost(16) == 52
    # a refused layout gets no price
    assert check.note(_kernel("BLOCK", T_STORE, T_READ)) == ""


def test_the_static_step_reports_the_price():
    v = static_verdict(NAME, variant(pitch="BLOCK + 1"))
    assert v["static"][0] == PASS and "in all 52 wavefronts per warp and tile step" \
        in v["static"][1], v

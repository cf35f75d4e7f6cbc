"""Chapter 03's own modules: the price of a copy mapping (memory.ch03_copies) agrees with
the bank model of the chapter's kernel, the copy bug is what the chapter says, the
pictures are readable, and the evidence helpers read the recording."""
import pytest

from gemm_kernels.memory import ch03_04_tiles, ch03_copies
from gemm_kernels.exercises.notebooks import solution_source


def test_the_chapters_mapping_costs_what_the_kernels_bank_model_says():
    p = ch03_copies.price(ch03_copies.mappings()["as written"])
    assert p["wavefronts"] == ch03_04_tiles.wavefronts_per_step("smem_tiled", {"BLOCK": 32}) == 50
    assert p["load A"] == p["load B"] == (4, 4)
    assert all(p[k][0] == p[k][1] for k in ("store As", "store Bs", "read As", "read Bs"))


def test_the_swapped_mapping_reads_and_writes_down_columns():
    p = ch03_copies.price(ch03_copies.mappings()["swapped"])
    assert p["load A"] == p["load B"] == (32, 4)
    assert p["store As"] == p["store Bs"] == (32, 1)
    assert p["wavefronts"] == 2 * 32 + 8 * 32 + 32


def test_sectors_count_distinct_32_byte_pieces():
    assert ch03_copies.sectors(range(32)) == (4, 4)
    assert ch03_copies.sectors([5] * 32) == (1, 1)
    assert ch03_copies.sectors([i * 4096 for i in range(32)]) == (32, 4)


def test_a_warps_copies_touch_one_line_per_row_of_the_block_it_spans():
    # a warp spans 1 row of a 32-wide block, 2 of a 16-wide, 4 of an 8-wide, and the
    # 16 threads of BLOCK = 4 make 4 rows: one line of A and one of B per row
    assert [ch03_copies.global_lines(b) for b in (32, 16, 8, 4)] == [2, 4, 8, 8]
    # rows one line apart or less share lines
    assert ch03_copies.global_lines(4, K=4, N=4) == 2


def test_the_copy_bug_copies_one_element_per_row_and_computes_the_wrong_product():
    got = ch03_copies.copy_bug()
    assert not got["buggy"]["right"] and got["correct"]["right"]
    assert all(len(set(row)) == 1 for row in got["buggy"]["As"])
    assert got["buggy"]["distinct A elements"] == 4 and got["correct"]["distinct A elements"] == 16


def test_the_copy_bug_figure_prints_nothing_and_counts_in_its_title(capsys):
    # the figure answers a question and is folded under it: a printed line would not fold
    from gemm_kernels.notebook import ch03_pictures
    import matplotlib.pyplot as plt
    fig = ch03_pictures.copy_bug()
    title = fig._suptitle.get_text()
    plt.close(fig)
    assert capsys.readouterr().out == ""
    assert "buggy copy: 64 of 64 elements of C wrong" in title
    assert "correct copy: 0 of 64 elements of C wrong" in title
    # the correct copy is the exercise's answer: no panel spells its code
    titles = [ax.get_title() for ax in fig.axes]
    assert "the correct copy: As" in titles and "the correct copy: Bs" in titles
    assert not any("k0 + tx" in t or "k0 + ty" in t for t in titles)


def test_the_emulation_refuses_partial_tiles():
    with pytest.raises(ValueError, match="multiples of BLOCK"):
        ch03_copies.emulate([[1.0] * 6] * 6, [[1.0] * 6] * 6, 4)


@pytest.mark.parametrize("name", ["thread_zoom", "wavefront_lanes", "copy_bug"])
def test_the_chapters_pictures_are_readable(name):
    from test_pictures import test_pictures_are_readable
    from gemm_kernels.notebook import ch03_pictures
    test_pictures_are_readable(name, getattr(ch03_pictures, name))


def test_thread_zoom_refuses_a_thread_outside_the_block():
    from gemm_kernels.notebook import ch03_pictures
    with pytest.raises(ValueError, match="tx=8"):
        ch03_pictures.thread_zoom(BLOCK=8, tx=8)


def test_the_mistakes_are_four_changes_of_the_solution():
    from gemm_kernels.notebook import ch03_evidence
    src = solution_source("03_tile_loop")
    got = ch03_evidence.mistakes(src)
    assert len(got) == 4 and all(v != src for v in got.values())

"""display.source: one function by default (what the chapters showed so far), the whole
file with the helpers it calls from its headers when asked."""
import pytest

from gemm_kernels.core.kernels import KERNELS
from gemm_kernels.notebook import display


def test_whole_shows_header_helpers_kernel_and_included_helpers():
    text = display.source("capstone", whole=True)
    file = KERNELS["capstone"].source_text()
    assert text.startswith(file.rstrip())                       # the file, unchanged
    for needed in ("// Synchronisation, in iteration t", "// HOIST (template flag",
                   "void cp_async_4(", "void cp_async_wait()", "sgemm_capstone("):
        assert needed in text
    # the included functions the kernel calls, each once, under its header's name
    assert text.count("// from common.cuh:\n") == 1 and "T gemm_epilogue(" in text
    assert text.count("// from vec4.cuh:\n") == 1 and "void gemm_epilogue4(" in text
    assert "load_float4" not in text                            # not called: not shown


def test_whole_follows_the_files_own_calls():
    assert "float4 load_float4(" in display.source("zorder", whole=True)


def test_default_is_still_the_kernel_function_with_its_comment():
    text = display.source("capstone")
    assert text.startswith("template <int BM, int BN, int BK, int WM")
    assert "// Chapter 09, capstone" not in text and text.endswith("}")
    assert display.source("zorder").startswith("// Launch bounds:")


def test_between_shows_the_lines_an_argument_needs():
    text = display.source("float4", between=("As[k + 0][m] = v.x;", "As[k + 3][m] = v.w;"))
    assert text.splitlines()[0].startswith("As[k + 0][m] = v.x;") and len(text.splitlines()) == 4
    # several excerpts in one, joined by "..."; a one-line excerpt when both markers match it
    two = display.source("float4_a_rows", between=[("float As[BM][BK]", "float As"),
                                                   ("a[i] = As[tr * TM + i][k];", "a[i]")])
    assert two.count("\n...\n") == 1 and len(two.splitlines()) == 3
    import pytest
    with pytest.raises(ValueError, match="no line contains"):
        display.source("float4", between=("not in the file", "}"))


def test_fold_shortens_long_operand_lists_only():
    text = display.source("wgmma_ws", between=("void wgmma_step(float (&d)[128]", '"l"(a)'),
                          fold=True)
    assert "{%0, %1, ..., %127}" in text and '"+f"(d[0]), "+f"(d[1]), ..., "+f"(d[127])' in text
    assert "%129" in text and len(max(text.splitlines(), key=len)) < 150
    short = '{%0, %1, %2, %3}, "+f"(d[0])'
    assert display.fold_operands(short) == short


def test_omit_leaves_a_part_out_of_the_whole_file():
    """Chapter 13's appendix shows its file whole but without the exercise's answer."""
    import pytest
    text = display.source("wmma_tiled", whole=True,
                          omit=[("// hgemm_wmma_naive:", "// hgemm_wmma_tiled:"),
                                ("the naive kernel", "the tiled kernel")])
    assert "hgemm_wmma_naive" not in text and "hgemm_wmma_tiled(" in text
    assert text.startswith("// Chapter 13") and "// from common.cuh:" in text
    with pytest.raises(ValueError, match="no line contains"):
        display.source("wmma_tiled", whole=True, omit=[("not in the file", "}")])


def test_ptx_shared_loads_shows_the_front_end_merged_the_reads():
    """float4_a_rows reads its row-major A tile with scalar source reads; NVRTC's PTX
    already holds them as 128-bit loads, before ptxas runs."""
    from gemm_kernels.notebook import display
    text = str(display.ptx_shared_loads("float4_a_rows"))
    assert "x ld.shared.v4.f32" in text and "x ld.shared.f32" not in text
    assert "e.g. ld.shared.v4.f32 {" in text
    assert "x ld.shared.f32" in str(display.ptx_shared_loads("tile_2d"))


def test_folded_shows_its_table_closed_under_a_summary():
    from gemm_kernels.core.table import Table
    from gemm_kernels.notebook import display
    html = display.Folded(Table([{"a": 1}], ["a"]), "Show the check")._repr_html_()
    assert html.startswith("<details><summary>Show the check</summary><table")
    assert html.endswith("</table></details>")


def test_folded_draws_a_figure_closed_and_escapes_a_text():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from gemm_kernels.notebook import display
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    html = display.Folded(fig, "Show the picture")._repr_html_()
    assert html.startswith("<details><summary>Show the picture</summary><img src=\"data:image/png;base64,")
    assert fig.number not in plt.get_fignums()   # closed: the inline backend shows it no more
    text = display.Folded(display.Text("a < b"), "Show the source")._repr_html_()
    assert "<pre>a &lt; b</pre>" in text


def test_stub_keeps_the_braces_and_indentation_around_a_left_out_branch():
    """The M == 1 kernel shown with the N == 1 branch left out: the `if constexpr` line,
    one comment at the body's indentation, then `} else {` as in the file; the rest of
    the function unchanged. A marker that opens no block is refused."""
    import pytest
    note = "the N == 1 branch: your exercise"
    text = str(display.source("12_gemv.cu", entry="sgemv",
                              stub=[("if constexpr (!COLS)", note)]))
    assert f"    if constexpr (!COLS) {{\n        // ... {note}\n    }} else {{\n" in text
    assert "split_k_range<128>" not in text and "__shfl_xor_sync" not in text
    assert "    if (split) split_k_finish(" in text and "        constexpr int V = VEC" in text
    assert text.count("{") == text.count("}")
    with pytest.raises(ValueError):
        display.source("12_gemv.cu", entry="sgemv", stub=[("int first, count", note)])


def test_as_cell_numbers_lines_as_the_grader_does():
    """The %%exercise line is line 1, the source's first line is line 2."""
    text = display.as_cell("int a;\nint b;\nint c;\n", "01_index", lines=(2, 3))
    assert text == "  2  int a;\n  3  int b;"
    assert display.as_cell("x", "e").split("\n")[0] == "  1  %%exercise e"


def test_numbered_and_line_of_find_the_same_lines():
    text = "a\nb marker\nc\nd marker"
    shown = str(display.numbered(text)).split("\n")
    assert shown[1] == "2  b marker" and len(shown) == 4
    assert display.line_of(text, "marker") == 2 and display.line_of(text, "marker", 3) == 4
    with pytest.raises(ValueError):
        display.line_of(text, "absent")


def test_kernel_diff_shows_only_the_changes_between_the_markers():
    before = "head\nvoid k() {\n  x = 1;\n  y = 2;\n  z = 3;\n}\ntail"
    after = before.replace("y = 2;", "y = 4;")
    diff = str(display.kernel_diff(before, after, ("old", "new"), "void k", "}"))
    assert diff.splitlines()[:3] == ["--- old", "+++ new", "..."]
    assert "-  y = 2;" in diff and "+  y = 4;" in diff and "head" not in diff

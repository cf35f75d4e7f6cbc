"""The one reader of CUDA comments: what it takes out, what it keeps, and the digest that
keys recorded rows (a comment edit keeps it, a code edit changes it)."""
from gemm_kernels.core import cuda_text
from gemm_kernels.core.kernels import KERNELS

SRC = ('// header: 4 copies\n'
       'asm volatile("cp.async.cg.shared.global [%0], [%1], 16; // not a comment\\n");\n'
       'char q = \'"\'; /* a block\n comment */ int x = a / b; // tail\n')


def test_comments_blanked_keeps_offsets_lines_and_literals():
    out = cuda_text.comments_blanked(SRC)
    assert len(out) == len(SRC) and out.count("\n") == SRC.count("\n")
    assert "header" not in out and "block" not in out and "tail" not in out
    assert "// not a comment" in out          # inside a string: code
    assert "int x = a / b;" in out and "char q = '\"';" in out


def test_without_comments_leaves_one_space_per_comment():
    out = cuda_text.without_comments("a/*x\ny*/b // c\nd")
    assert out == "a b  \nd"


def test_digest_ignores_comments_and_spacing_only():
    base = cuda_text.code_digest(SRC)
    reworded = SRC.replace("4 copies", "8 + 2 copies, reworded at length").replace(
        "int x", "int   x")
    assert cuda_text.code_digest(reworded) == base
    # negative controls: each change of code, including inside a string, changes it
    for old, new in (("a / b", "a / c"), ("16;", "8;"), ("cp.async.cg", "cp.async.ca"),
                     ("'\"'", "'x'")):
        assert old in SRC
        assert cuda_text.code_digest(SRC.replace(old, new)) != base, old


def test_kernel_hash_is_the_code_digest_of_its_text():
    k = KERNELS["capstone"]
    text = k.source_text()
    assert k.source_hash() == cuda_text.code_digest(k.source_with_headers())
    commented = k.with_code("// a new first line\n" + text, name=k.name, source=k.source)
    assert commented.source_hash() == k.source_hash()
    edited = k.with_code(text.replace("#pragma unroll", "#pragma unroll 1", 1),
                         name=k.name, source=k.source)
    assert edited.source_hash() != k.source_hash()

"""CUDA C++ text read as code: its comments found once, for every reader that must not
mistake a comment for code (the hash that keys a kernel's recorded rows, the static
checks of a student's source, the CPU build of an exercise).

String and character literals are skipped whole, so a `//` inside an asm string is code,
never the start of a comment."""
from __future__ import annotations

import hashlib
import re

_LITERAL_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|'
                                 r'(/\*.*?\*/|//[^\n]*)', re.S)


def _each_comment(text: str, by) -> str:
    return _LITERAL_OR_COMMENT.sub(lambda m: by(m.group(1)) if m.group(1) else m.group(0),
                                   text)


def comments_blanked(text: str) -> str:
    """`text` with every comment made spaces, its line breaks kept: every offset and
    line number of the code stays what the author sees."""
    return _each_comment(text, lambda c: re.sub(r"[^\n]", " ", c))


def without_comments(text: str) -> str:
    """`text` with each comment replaced by one space."""
    return _each_comment(text, lambda c: " ")


def code_digest(text: str) -> str:
    """A short hash of the code alone: comments out, every run of white space one space.
    Rewording a comment keeps the digest (the compiled kernel is the same); any change
    to the code changes it."""
    code = " ".join(without_comments(text).split())
    return hashlib.sha1(code.encode()).hexdigest()[:12]

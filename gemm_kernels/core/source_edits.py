"""Kernel texts derived from others by a few edits (chapter 12's split-K capstone,
chapter 09's in-between ladder steps): each edit is an (old, new) pair that must apply
exactly once, so that a change in the original text that an edit no longer matches is
an error, never a silently different kernel."""
from __future__ import annotations


def apply(text: str, edits, what: str) -> str:
    """`text` with every (old, new) edit applied, each exactly once."""
    for old, new in edits:
        n = text.count(old)
        if n != 1:
            raise ValueError(f"{what}: edit applies {n} times, not once: {old.strip()[:70]!r}")
        text = text.replace(old, new)
    return text

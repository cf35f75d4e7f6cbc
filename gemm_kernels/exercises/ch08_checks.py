"""Chapter 08's static check: the order of one double-buffered step, read from the
source of the K loop (`for (int tile = ...`, the line the exercise gives).

The point of the chapter is that the global loads of the next tile are issued BEFORE the
compute on the current stage (they fly while it runs) and stored to the other stage
AFTER it (the registers are first needed then). Where the barriers go is checked on a
GPU: by racecheck, or by the element-wise check.
"""
from __future__ import annotations

import re

LOOP = re.compile(r"for\s*\(\s*int\s+tile\s*=")
CALLS = ("fetch_tiles", "compute_stage", "store_tiles")


def _loop_body(source: str) -> str | None:
    """The text between the braces of the K loop, or None when it is not there."""
    m = LOOP.search(source)
    if not m:
        return None
    start = source.find("{", m.end())
    depth = 0
    for i in range(start, len(source)):
        depth += {"{": 1, "}": -1}.get(source[i], 0)
        if depth == 0:
            return source[start + 1:i]
    return None


def step_order(source: str) -> list[str]:
    """Problems with the order of fetch_tiles, compute_stage and store_tiles in the K
    loop; empty when the next tile's loads come first and its store after the compute."""
    body = _loop_body(source)
    if body is None:
        return ["the K loop 'for (int tile = 0; tile < tiles; ++tile) { ... }' is not "
                "there any more: keep the loop as given and write its body"]
    body = re.sub(r"//[^\n]*", "", body)            # a call in a comment does not count
    at = {c: m.start() for c in CALLS for m in [re.search(rf"\b{c}\s*<", body)] if m}
    missing = [c for c in CALLS if c not in at]
    if missing:
        return [f"the K loop does not call {' or '.join(missing)}: each step loads the "
                "next tile, computes on the current stage and stores the next tile"]
    problems = []
    if at["fetch_tiles"] > at["compute_stage"]:
        problems.append("the K loop loads the next tile after compute_stage: issue "
                        "fetch_tiles first, so that its global loads are in flight while "
                        "the current stage is computed (that is what hides their latency)")
    if at["store_tiles"] < at["compute_stage"]:
        problems.append("the K loop stores the next tile before compute_stage: a store "
                        "needs the loaded values, so the warp would wait for its loads "
                        "right away; store after computing")
    return problems

"""What the notebooks show: the mode banner, kernel sources and SASS excerpts
(`display`), the explorer widgets (`widgets`) and their latency measurement, and the
pictures that teach chapters 03, 05 and 06 (`pictures`: the tile walk along K, which
outputs each thread computes and what it reads per step).

May import every other subpackage; nothing imports it.
"""

"""What the notebooks show: the mode banner, kernel sources and SASS excerpts
(`display`), the explorer widgets (`widgets`) and their latency measurement.

May import every other subpackage; nothing imports it.
"""

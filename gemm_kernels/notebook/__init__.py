"""What the notebooks show: the mode banner, kernel sources and SASS excerpts
(`display`), the explorer widgets (`widgets`) and their latency measurement, the
pictures that teach chapters 03, 05 and 06 (`pictures`: the tile walk along K, which
outputs each thread computes and what it reads per step), and chapter 09's pictures,
ladder and evidence tables (`capstone_pictures`) with its capstone explorer
(`capstone_widget`, built on `widgets.Explorer`), and each chapter's own tables and
pictures in a module named by its chapter (`ch06_tiles`, `ch07_ablation`, ...).

May import every other subpackage; nothing imports it.
"""

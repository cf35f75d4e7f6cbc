"""How the series' pictures stay readable: a look of its own for every plotted series,
text that contrasts with the cell under it, and labels sized to the cells they sit in.

Matplotlib is imported inside the functions, so importing this module stays cheap.
"""
from __future__ import annotations

# Labels smaller than this are hard to read in a browser at the default zoom: pictures
# draw fewer, larger labels (or none, and say so) rather than smaller ones.
MIN_LABEL_POINTS = 8
# Labels no larger than the axis labels, however large their cells.
MAX_LABEL_POINTS = 10
# Markers cycled next to the colours. Seven, coprime with the twenty colours, so the
# (colour, marker) pair repeats only after 140 series.
MARKERS = "os^vD<>"


def series_styles(n: int) -> list[tuple[tuple, str]]:
    """(colour, marker) for n series: tab20's ten saturated hues first, then their ten
    light partners, so no two of the first 20 series share a colour and neighbours in
    the list never get two shades of one hue."""
    import matplotlib
    tab20 = matplotlib.colormaps["tab20"].colors
    colours = tab20[0::2] + tab20[1::2]
    return [(colours[i % len(colours)], MARKERS[i % len(MARKERS)]) for i in range(n)]


def luminance(rgba) -> float:
    """Relative luminance (WCAG 2) of an sRGB colour with components in [0, 1]."""
    def linear(c):
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (linear(c) for c in rgba[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def text_colour(rgba) -> str:
    """'white' on a dark background, 'black' on a light one. The switch is at luminance
    0.179, where white and black text have the same contrast ratio with the cell:
    (1 + 0.05) / (L + 0.05) = (L + 0.05) / (0 + 0.05)."""
    return "white" if luminance(rgba) < 0.179 else "black"


def cell_points(ax, nx: int, ny: int) -> tuple[float, float]:
    """Width and height, in points, of one cell of an nx x ny grid that fills `ax` as
    drawn now (after the aspect ratio of an image has shrunk the axes)."""
    ax.apply_aspect()
    box = ax.get_position()
    w_in, h_in = ax.figure.get_size_inches()
    return box.width * w_in * 72 / nx, box.height * h_in * 72 / ny


def label_points(cell_w: float, cell_h: float, chars: int) -> float:
    """The largest font size (points, at most MAX_LABEL_POINTS) at which `chars` digits
    fit a cell_w x cell_h box with a little room around them: a digit of the default
    font (DejaVu Sans) is 0.64 em wide and 0.73 em high."""
    return min(MAX_LABEL_POINTS, cell_h, cell_w / (0.64 * chars + 0.2))


def fit_title(ax, title: str, fontsize: float = 10) -> None:
    """Set `title`, wrapped to the width of the axes' slot in the figure (a character is
    about 0.55 em wide), so it never runs into the title of the picture beside it. The
    slot, not the image: an image kept square may be much narrower than its slot."""
    import textwrap
    width_pt = ax.get_position(original=True).width * ax.figure.get_size_inches()[0] * 72
    lines = [textwrap.fill(line, max(20, int(width_pt / (0.55 * fontsize))))
             for line in title.split("\n")]
    ax.set_title("\n".join(lines), fontsize=fontsize)

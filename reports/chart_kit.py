"""What every chart of :mod:`reports.charts` shares: matplotlib set up headless (Agg backend) with the page's
style, the colours that mean the same on every chart, value axes that turn logarithmic over a wide range, and
labels placed beside points without covering one another.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")  # no display: must come before pyplot is imported
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Annotation  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

LOG_RANGE = 10  #: an axis whose largest value is this many times its smallest is drawn on a log scale
FAILING = "#c44e52"  #: colour of a codec with undeclared failures, on every chart
FAILING_MARK = " ⚠"  #: after such a codec's name
DOMINATED = "#b0b0b0"  #: codecs off the Pareto front
COLORS = {"bytes": "#4c72b0", "encode": "#dd8452", "decode": "#55a868"}

plt.rcParams.update({"font.size": 10, "axes.titlesize": 12, "axes.titleweight": "bold",
                     "axes.spines.top": False, "axes.spines.right": False})


#: where a point's label may go, tried in order: (dx, dy) in points, horizontal and vertical alignment
LABEL_SPOTS = ((6, 3, "left", "bottom"), (6, -3, "left", "top"), (-6, 3, "right", "bottom"),
               (-6, -3, "right", "top"), (0, 7, "center", "bottom"), (0, -7, "center", "top"),
               (6, 12, "left", "bottom"), (6, -12, "left", "top"), (-6, 12, "right", "bottom"),
               (-6, -12, "right", "top"))


def place_labels(fig: Figure, ax: Axes, labels: List[Tuple[Tuple[float, float], str, Dict[str, Any]]],
                 unlabelled: Sequence[Tuple[float, float]] = ()) -> None:
    """Label each (x, y) point at the first spot that overlaps no point (labelled or in ``unlabelled``) and no
    earlier label."""
    fig.draw_without_rendering()  # settle the layout so display coordinates are final
    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg), "charts are drawn with the Agg backend"
    renderer = canvas.get_renderer()
    xy = [point for point, _, _ in labels]
    taken = [Bbox.from_bounds(px - 4, py - 4, 8, 8) for px, py in ax.transData.transform([*xy, *unlabelled])]
    for point, (_, text, style) in zip(xy, labels):
        for spot in LABEL_SPOTS:
            note = annotate(ax, point, text, spot, style)
            if not any(note.get_window_extent(renderer).overlaps(box) for box in taken):
                break
            note.remove()
        else:  # crowded everywhere: the first spot it is
            note = annotate(ax, point, text, LABEL_SPOTS[0], style)
        taken.append(note.get_window_extent(renderer))


def annotate(ax: Axes, point: Tuple[float, float], text: str, spot: Tuple[float, float, str, str],
              style: Dict[str, Any]) -> Annotation:
    dx, dy, ha, va = spot
    return ax.annotate(text, point, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, **style)


def note_right(ax: Axes, point: Tuple[float, float], text: str, fontsize: float = 8) -> None:
    """A label just right of a bar's end or mark, vertically centred on it."""
    annotate(ax, point, text, (6, 0, "left", "center"), {"fontsize": fontsize})


def value_axis(ax: Axes, values: List[float], room: float, axis: str = "x", reach: Sequence[float] = (),
                log: bool = True) -> str:
    """Fit the value axis to ``values`` (and the marks in ``reach``) with ``room`` (a factor) past the largest:
    a log scale when ``values`` span LOG_RANGE x or more (and ``log``), else linear from 0. Returns ", log scale"
    or "" for the axis label."""
    known = [v for v in values if v and not math.isnan(v)]
    if not known:
        return ""
    low, high = min(known), max([*known, *reach])
    limits = getattr(ax, f"set_{axis}lim")
    if log and max(known) / low >= LOG_RANGE:
        getattr(ax, f"set_{axis}scale")("log")
        plain_log(ax.xaxis if axis == "x" else ax.yaxis)
        limits(low / 1.5, high * room ** 3)  # labels right of the bars need more room on a log axis
        return ", log scale"
    limits(0, high * room)
    return ""


def plain_log(axis: Any) -> None:
    """Ticks of a log axis at 1, 2, 5 x 10^n, written as plain numbers (0.5, 1, 2, 5, 10), not powers of ten."""
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())

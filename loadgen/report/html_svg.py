"""report.html's charts as inline SVG (pygal, a core dependency): one XY panel at a time.

Every chart is a ``pygal.XY`` drawn from numbers the page computed (html_figures.py), rendered
to an ``<svg>`` element that scales to its box. Nothing is fetched: pygal's tooltip script
(a CDN address by default) is turned off and its inline config script left out; its CSS is
inlined per chart, without its comments. Axes carry numbers written as numbers (``1,200``,
``0.05``: never ``1e+03``), with ticks chosen here (``nice_ticks``, ``log_ticks``); a
logarithmic axis is drawn as log10 of the values (shifted), labelled with the values themselves.
"""

from __future__ import annotations

import functools
import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pygal
from pygal.style import Style

FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip
SHADE = "#dff0df"
LABEL_WIDTH = 8  # characters of a y label, padded
# A log axis is drawn as log10(v) + LOG_SHIFT: pygal draws the guide at position 0 as an axis
# line, which at log10(1) = 0 would be a dark line at 1 ms.
LOG_SHIFT = 100.0
_PYGAL_SCRIPT = re.compile(r"<script[^>]*>window\.pygal.*?</script>", re.S)
_XML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_BLANK_LINES = re.compile(r"\n\s*\n+")
_STYLE = re.compile(r"(<style[^>]*>)(.*?)(</style>)", re.S)
_CHART_ID = re.compile(r"#chart-[0-9a-f-]{36}")
_VALUE = re.compile(r'<desc class="value">(.*?)</desc>', re.S)
_XY_DESC = re.compile(r'<desc class="[xy][ a-z]*">[^<]*</desc>')
_TAG = re.compile(r"<[^>]+>")
_DIGITS = re.compile(r"(\d+\.\d\d)\d+")


@dataclass
class Line:
    """One series of a panel: its points (None where it breaks), how it is stroked (a width of
    0: markers only)."""

    label: str
    points: list[tuple[float, float | None]]
    color: str
    width: float = 2.0
    dashed: bool = False
    fill: bool = False
    dots: bool | None = None  # None: as the panel says
    labels: list[str] | None = None  # a label printed beside each point


@dataclass
class Panel:
    """One chart: its title, axes and lines; ``x_ticks`` in the values' own units."""

    title: str
    x_title: str
    y_title: str
    lines: list[Line]
    x_range: tuple[float, float] | None = None
    y_range: tuple[float, float] | None = None  # None: from 0 (or the log range) to the top
    log_x: bool = False
    log_y: bool = False
    width: int = 1200
    height: int = 260
    y_suffix: str = ""
    legend: bool = True
    dots: bool = False
    shade: tuple[float, float] | None = None  # an x span shaded behind the lines (and named)


def number(value: float) -> str:
    """An axis label: ``1,200``, ``12.5``, ``0.05``; never scientific notation."""
    if not math.isfinite(value):
        return ""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    text = np.format_float_positional(value, precision=3, unique=True, fractional=False, trim="-")
    return text.rstrip(".")


def nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """About ``count`` round ticks (1, 2 or 5 times a power of ten apart) covering
    ``[low, high]``."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        high = low + 1.0 if math.isfinite(low) else 1.0
        low = low if math.isfinite(low) else 0.0
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = []
    k = 0
    while (tick := first + k * step) <= high + step * 1e-9:
        ticks.append(round(tick, 12))
        k += 1
    if ticks[-1] < high:
        ticks.append(round(first + k * step, 12))
    return ticks


def log_ticks(low: float, high: float) -> list[float]:
    """Ticks at 1, 2 and 5 times each power of ten between ``low`` and ``high`` (> 0), the
    decades alone when they span more than four."""
    low_power, high_power = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1.0,) if high_power - low_power > 4 else (1.0, 2.0, 5.0)
    ticks = [m * 10.0**p for p in range(low_power, high_power + 1) for m in steps]
    inside = [t for t in ticks if low <= t <= high]
    below = [t for t in ticks if t < low][-1:]
    above = [t for t in ticks if t > high][:1]
    return below + inside + above


def _style(colors: Sequence[str]) -> Style:
    return Style(
        background="#ffffff", plot_background="#ffffff", foreground="#3b4550",
        foreground_strong="#1d232a", foreground_subtle="#e6e8eb", colors=tuple(colors),
        font_family=FONT, title_font_size=15, label_font_size=11, major_label_font_size=11,
        legend_font_size=12, tooltip_font_size=11, opacity=".85", opacity_hover=".85",
        transition="none", stroke_opacity="1", stroke_opacity_hover="1",
        guide_stroke_color="#e6e8eb", major_guide_stroke_color="#e6e8eb",
        guide_stroke_dasharray="1,0", major_guide_stroke_dasharray="1,0",
    )  # fmt: skip


def _axis(
    values: list[float], log: bool, given: tuple[float, float] | None
) -> tuple[tuple[float, float], list[float]]:
    """The range and ticks of an axis holding ``values``: ``given`` if set (its ticks inside
    it), else from round tick to round tick."""
    finite = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
    if log:
        low, high = given or ((min(finite), max(finite)) if finite else (1.0, 10.0))
        ticks = log_ticks(low, high)
    else:
        low, high = given or (min(0.0, *finite) if finite else 0.0, max(finite, default=1.0))
        ticks = nice_ticks(low, high if high > low else low + 1.0)
    if given is None:
        return (ticks[0], ticks[-1]), ticks
    return given, [t for t in ticks if low - 1e-9 <= t <= high + 1e-9]


def _legend_columns(lines: list[Line], width: int) -> int:
    """As many legend entries a row as fit the chart's width at their longest label's length."""
    longest = max((len(line.label) for line in lines), default=1)
    return max(1, min(len(lines), 4, width // (6 * longest + 40)))


def _padded(text: str) -> str:
    """A y label padded with figure spaces to one width, so that every panel's plot starts
    at the same x and stacked panels share their time axis."""
    return "\u2007" * max(LABEL_WIDTH - len(text), 0) + text


def svg(panel: Panel) -> str:
    """A panel as an inline ``<svg>`` element (no script, nothing fetched)."""
    return compact(svg_text(panel))


def svg_text(panel: Panel) -> str:
    """A panel as pygal renders it (its tooltip script off)."""
    xs = [x for line in panel.lines for x, _ in line.points]
    ys = [y for line in panel.lines for _, y in line.points if y is not None]
    x_bounds, x_ticks = _axis(xs, panel.log_x, panel.x_range)
    y_bounds, y_ticks = _axis(ys, panel.log_y, panel.y_range)
    lines = [line for line in panel.lines if line.points]
    if not lines:  # pygal fails on axis labels without data: its own "no data" panel instead
        return _empty_text(panel)
    if panel.shade is not None:
        start, end = panel.shade
        top = y_bounds[1]
        lines.insert(0, Line("steady window", [(start, top), (end, top)], SHADE, 0.5, fill=True,
                             dots=False))  # fmt: skip
    to_x = (lambda v: math.log10(v) + LOG_SHIFT) if panel.log_x else (lambda v: v)
    to_y = (lambda v: math.log10(v) + LOG_SHIFT) if panel.log_y else (lambda v: v)
    y_suffix = panel.y_suffix
    columns = _legend_columns(lines, panel.width)  # pygal leaves no room for a second row
    chart = pygal.XY(
        title=panel.title, x_title=panel.x_title, y_title=panel.y_title,
        width=panel.width, height=panel.height, style=_style([ln.color for ln in lines]),
        show_legend=(panel.legend or panel.shade is not None) and bool(lines),
        legend_at_bottom=True, legend_at_bottom_columns=columns,
        margin_bottom=8 + 18 * (math.ceil(len(lines) / columns) - 1),
        truncate_legend=-1, print_labels=any(line.labels for line in lines),
        truncate_label=-1, js=[], disable_xml_declaration=True, show_dots=panel.dots,
        dots_size=4, allow_interruptions=True, include_x_axis=False, explicit_size=False,
        show_x_guides=True, show_y_guides=True, print_values=False, margin=8, spacing=8,
        xrange=(to_x(x_bounds[0]), to_x(x_bounds[1])),
        range=(to_y(y_bounds[0]), to_y(y_bounds[1])),
        x_labels=[to_x(t) for t in x_ticks], y_labels=[to_y(t) for t in y_ticks],
        x_value_formatter=(lambda v: number(10 ** (v - LOG_SHIFT))) if panel.log_x else number,
        value_formatter=(lambda v: _padded(number(10 ** (v - LOG_SHIFT)) + y_suffix))
        if panel.log_y
        else (lambda v: _padded(number(v) + y_suffix)),
        no_data_text="no data", tooltip_border_radius=0,
    )  # fmt: skip
    for line in lines:
        labels = line.labels or [""] * len(line.points)
        kept = [
            ((to_x(x), None if y is None or (panel.log_y and y <= 0) else to_y(y)), label)
            for (x, y), label in zip(line.points, labels, strict=True)
            if math.isfinite(x) and (x > 0 or not panel.log_x)
        ]
        points: list[object] = (
            [{"value": point, "label": label} for point, label in kept]
            if line.labels
            else [point for point, _ in kept]
        )
        chart.add(
            line.label, points, fill=line.fill, stroke=line.width > 0,
            show_dots=panel.dots if line.dots is None else line.dots,
            stroke_style={"width": line.width, "dasharray": "5,4" if line.dashed else None},
        )  # fmt: skip
    return str(chart.render(is_unicode=True))


def _empty_text(panel: Panel) -> str:
    """A panel with nothing to draw (a run whose every request failed): its title over pygal's
    "no data"."""
    chart = pygal.XY(
        title=panel.title, width=panel.width, height=panel.height, style=_style([]), js=[],
        disable_xml_declaration=True, explicit_size=False, show_legend=False,
        no_data_text="no data", margin=8,
    )  # fmt: skip
    return str(chart.render(is_unicode=True))


def compact(rendered: str) -> str:
    """pygal's SVG made light: no config script, comments or blank lines; only its colour
    and stroke rules kept (the rest is the page's, once: ``shared_css``); each point's hidden
    tooltip text made its native hover title; coordinates cut to 2 places (in tags only)."""
    text = _PYGAL_SCRIPT.sub("", rendered)
    text = _XML_COMMENT.sub("", text)  # pygal's banner, with its project's addresses
    text = _CSS_COMMENT.sub("", text)
    text = _STYLE.sub(lambda m: m[1] + "".join(_rules(m[2])[1]) + m[3], text)
    text = _VALUE.sub(lambda m: f"<title>{m[1].replace(chr(0x2007), '').strip()}</title>", text)
    text = _XY_DESC.sub("", text)
    text = _BLANK_LINES.sub("\n", text)
    return _TAG.sub(lambda m: _DIGITS.sub(r"\1", m[0]), text)


def _rules(css: str) -> tuple[list[str], list[str]]:
    """A chart's CSS rules: those shared by every chart (its id made ``.pygal-chart``), and
    its own series' colours and strokes (kept under its id)."""
    shared, colors = [], []
    for rule in css.split("}"):
        if "{" not in rule:
            continue
        if any(own in rule.split("{", 1)[0] for own in (".color-", ".serie-")):
            colors.append(rule + "}")
        else:
            shared.append(_CHART_ID.sub(".pygal-chart", rule) + "}")
    return shared, colors


@functools.cache
def shared_css() -> str:
    """The CSS every chart shares (pygal's base rules under the page's style), for the page's
    head: each chart keeps only its colours."""
    chart = svg_text(Panel("", "", "", [Line("", [(0.0, 0.0), (1.0, 1.0)], PALETTE[0])]))
    css = "".join(m[2] for m in _STYLE.finditer(_CSS_COMMENT.sub("", chart)))
    # the SVG's text is XML-escaped (``.graph &gt; .background``); the page's <style> is not
    return html.unescape("".join(dict.fromkeys(_rules(css)[0])))


def step_points(x: np.ndarray, y: np.ndarray) -> list[tuple[float, float | None]]:
    """A CDF's staircase: each value held until the next x (a horizontal then vertical step)."""
    points: list[tuple[float, float | None]] = []
    previous = 0.0
    for xi, yi in zip(np.asarray(x, float).tolist(), np.asarray(y, float).tolist(), strict=True):
        points += [(xi, previous), (xi, yi)]
        previous = yi
    return points


def bar_points(
    centers: np.ndarray, width: float, values: np.ndarray
) -> list[tuple[float, float | None]]:
    """Bins drawn as a filled outline of bars on a numeric time axis (pygal's XY has none)."""
    points: list[tuple[float, float | None]] = []
    for c, v in zip(np.asarray(centers, float).tolist(), np.asarray(values, float).tolist(),
                    strict=True):  # fmt: skip
        value = v if math.isfinite(v) else 0.0
        points += [(c - width / 2, value), (c + width / 2, value)]
    return points


def line_points(x: np.ndarray, y: np.ndarray) -> list[tuple[float, float | None]]:
    """Points of a line, broken where a value is missing (NaN)."""
    return [
        (xi, yi if math.isfinite(yi) else None)
        for xi, yi in zip(np.asarray(x, float).tolist(), np.asarray(y, float).tolist(), strict=True)
    ]

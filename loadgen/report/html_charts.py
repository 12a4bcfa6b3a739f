"""report.html's figures, drawn from html_figures.py's and html_server.py's data as inline SVG
(html_svg.py, pygal): the latency CDFs, the run over time (throughput, in flight, failures,
TTFT/ITL/E2EL percentiles per bin, then the server's own series, on one time axis) and a
campaign's throughput-latency planes.

Each figure is HTML: a grid of ``<svg>`` panels; a campaign's over-time panels come a point at
a time, each in its own ``<details>`` (the first open), so the page needs no script.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loadgen.report.html_figures import BANDS, cdf_points, spans_decades
from loadgen.report.html_server import ServerPanel
from loadgen.report.html_svg import (
    PALETTE,
    Line,
    Panel,
    bar_points,
    line_points,
    step_points,
    svg,
)
from loadgen.report.metric_table import LATENCY_BY_KEY

# The metric table names each latency: "TTFT distribution (CDF)", "p99 TTFT (ms)".
CDF_TITLES = {
    key: f"{LATENCY_BY_KEY[key].short} distribution (CDF)" for key in ("ttft", "itl", "e2el")
}
BAND_TITLES = {
    key: f"{LATENCY_BY_KEY[key].short} over time: p50, p90 and p99 of each bin"
    for key in ("ttft", "itl", "e2el")
}
TRADE_OFF_LATENCIES = ("ttft", "itl")  # a campaign's planes: output tok/s against their p99
OVER_TIME_TITLE = "Throughput and requests in flight over time"
REQUESTS_TITLE = "Completed requests per second"
TOKENS_TITLE = "Output tokens per second"
FLIGHT_TITLE = "Requests in flight"
FAILURES_TITLE = "Failed and cancelled requests per second, by kind"
CANCELLED_LABEL = "cancelled (in flight when the run stopped)"
FAILURE_PALETTE = ("#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
TRADE_OFF_TITLES = tuple(
    f"Output throughput vs p99 {LATENCY_BY_KEY[key].short}" for key in TRADE_OFF_LATENCIES
)
SERVER_X_TITLE = "seconds since the run's start (the server's scrapes)"
FRONT_COLOR = "#d62728"
POINT_COLOR = "#1f77b4"
MEETS_COLOR = "#2ca02c"
MISSES_COLOR = "#7f7f7f"
SLO_COLOR = "#2ca02c"
INTERVAL_COLOR = "#9aa3ad"
BAND_STYLES = ((2.0, False), (1.5, False), (1.5, True))  # p50, p90, p99: width, dashed
BAND_COLORS = ("#1f77b4", "#ff7f0e", "#d62728")
SERVER_COLORS = ("#17becf", "#9467bd", "#8c564b", "#bcbd22", "#e377c2", "#7f7f7f")


@dataclass
class Latencies:
    """One line of the CDFs: a run, or a campaign's point with its runs pooled (ms)."""

    label: str
    ttft_ms: np.ndarray
    itl_ms: np.ndarray
    e2el_ms: np.ndarray


@dataclass
class OverTime:
    """One run's time series, per bin of ``width_s`` seconds from t0."""

    label: str
    centers_s: np.ndarray
    width_s: float
    requests_per_s: np.ndarray
    tokens_per_s: np.ndarray
    in_flight_mean: np.ndarray
    in_flight_peak: np.ndarray
    # failed and cancelled requests per second by kind (html_figures.failures_per_s)
    failures_per_s: list[tuple[str, np.ndarray]] = field(default_factory=list)
    window_s: tuple[float, float] | None = None  # the steady window, shaded (--warmup-s)
    # latency key -> [bins, len(BANDS)] percentiles (ms) of each bin (html_figures.percentile_bands)
    bands_ms: dict[str, np.ndarray] = field(default_factory=dict)
    server: list[ServerPanel] = field(default_factory=list)  # html_server.server_panels
    server_note: str | None = None  # why there is no server panel


@dataclass
class TradeOff:
    """A campaign's points on one throughput-latency plane: x output tok/s, y a p99 (ms), each
    with its interval's ends across repeats (NaN without repeats)."""

    labels: list[str]
    x: list[float]
    x_low: list[float]
    x_high: list[float]
    y: list[float]
    y_low: list[float]
    y_high: list[float]
    front: list[int]  # the Pareto front's indices, by throughput
    meets: list[bool] | None = None  # each point meets --slo (None: no SLO)
    limit: float | None = None  # --slo's bound on this plane's latency, drawn as a line


def grid(panels: Sequence[str], columns: int) -> str:
    """Panels side by side, ``columns`` a row (one on a narrow window)."""
    cells = "".join(f'<div class="chart">{panel}</div>' for panel in panels)
    return f'<div class="charts" style="--columns: {columns}">{cells}</div>'


def cdf_figure(lines: Sequence[Latencies], names: Sequence[str] = tuple(CDF_TITLES)) -> str:
    """The CDFs of ``names`` (TTFT, ITL and E2EL; E2EL alone for pooling, whose answer has one
    instant) side by side, one line per run or point (x in ms, log where a metric's values span
    two decades)."""
    panels = []
    for name in names:
        values = [getattr(line, f"{name}_ms") for line in lines]
        log = spans_decades(np.concatenate(values) if values else np.zeros(0))
        drawn = []
        for k, line in enumerate(lines):
            x, y = cdf_points(getattr(line, f"{name}_ms"))
            drawn.append(Line(line.label, step_points(x, 100 * y), PALETTE[k % len(PALETTE)]))
        short = LATENCY_BY_KEY[name].short
        panels.append(svg(Panel(
            CDF_TITLES[name], f"{short} (ms{', log scale' if log else ''})",
            "requests at or below", drawn, y_range=(0.0, 100.0), log_x=log, y_suffix=" %",
            width=440, height=360, legend=len(lines) > 1,
        )))  # fmt: skip
    return grid(panels, len(panels))


def over_time_figure(series: Sequence[OverTime], tokens: bool = True) -> str:
    """A run's panels over time (``run_panels``); with several runs (a campaign's points),
    each run's in its own ``<details>``, the first open."""
    if len(series) == 1:
        return run_panels(series[0], tokens)
    parts = []
    for k, one in enumerate(series):
        opened = " open" if k == 0 else ""
        parts.append(f"<details{opened}><summary>{html.escape(one.label)}</summary>"
                     f"{run_panels(one, tokens)}</details>")  # fmt: skip
    return "".join(parts)


@dataclass(frozen=True)
class TimeAxis:
    """The time axis every panel of a run shares: its title, its span, the steady window."""

    title: str
    span: tuple[float, float]
    shade: tuple[float, float] | None = None

    def panel(self, title: str, unit: str, lines: list[Line], **extra: Any) -> str:
        """A panel of the run on this axis."""
        return svg(Panel(title, self.title, unit, lines, x_range=self.span, shade=self.shade,
                         **extra))  # fmt: skip


def run_panels(one: OverTime, tokens: bool = True) -> str:
    """Completed req/s, output tok/s (unless ``tokens`` is False: pooling has none), requests
    in flight, failed and cancelled requests per second stacked by kind (where there are some),
    each latency's p50/p90/p99 per bin, then the server's series (or why there are none), one
    under the other on the run's clock."""
    end_s = float(one.centers_s[-1] + one.width_s / 2) if len(one.centers_s) else 1.0
    axis = TimeAxis(f"seconds since the run's start (bins of {one.width_s:.3g} s)",
                    (0.0, end_s), one.window_s)  # fmt: skip

    def bar(title: str, unit: str, values: np.ndarray, color: str) -> str:
        points = bar_points(one.centers_s, one.width_s, values)
        return axis.panel(title, unit, [Line(unit, points, color, 1.0, fill=True)], legend=False)

    panels = [bar(REQUESTS_TITLE, "req/s", one.requests_per_s, "#1f77b4")]
    if tokens:
        panels.append(bar(TOKENS_TITLE, "tok/s", one.tokens_per_s, "#ff7f0e"))
    panels.append(axis.panel(FLIGHT_TITLE, "requests", [
        Line("mean in the bin", line_points(one.centers_s, one.in_flight_mean), "#2ca02c"),
        Line("peak in the bin", line_points(one.centers_s, one.in_flight_peak), "#2ca02c", 1.2,
             dashed=True),
    ]))  # fmt: skip
    if one.failures_per_s:
        panels.append(failures_panel(one, axis))
    for key, bands in one.bands_ms.items():
        panels.append(band_panel(key, one.centers_s, bands, axis))
    server_axis = TimeAxis(SERVER_X_TITLE, axis.span)
    panels += [drawn for panel in one.server if (drawn := server_panel(panel, server_axis))]
    note = f'<p class="sub">{html.escape(one.server_note)}</p>' if one.server_note else ""
    return grid(panels, 1) + note


def failures_panel(one: OverTime, axis: TimeAxis) -> str:
    """Failed and cancelled requests per second, stacked by kind (the most frequent at the
    bottom): each kind's band filled from the kinds under it to its own top."""
    colors = failure_colors([one])
    lines = []
    running = np.zeros(len(one.centers_s))
    tops = []
    for label, per_s in one.failures_per_s:
        running = running + per_s
        tops.append((label, running.copy()))
    for label, top in reversed(tops):  # the tallest first: each lower band is drawn over it
        points = bar_points(one.centers_s, one.width_s, top)
        lines.append(Line(label, points, colors[label], 1.0, fill=True))
    return axis.panel(FAILURES_TITLE, "req/s", lines)


def band_panel(key: str, centers_s: np.ndarray, bands: np.ndarray, axis: TimeAxis) -> str:
    """A latency's p50, p90 and p99 in each bin (ms; log where they span two decades)."""
    short = LATENCY_BY_KEY[key].short
    log = spans_decades(bands)
    lines = [
        Line(f"p{q:g}", line_points(centers_s, bands[:, k]), BAND_COLORS[k],
             BAND_STYLES[k][0], dashed=BAND_STYLES[k][1])
        for k, q in enumerate(BANDS)
    ]  # fmt: skip
    unit = f"{short} (ms{', log scale' if log else ''})"
    return axis.panel(BAND_TITLES[key], unit, lines, log_y=log, dots=len(centers_s) <= 30)


def server_panel(panel: ServerPanel, axis: TimeAxis) -> str:
    """One of the server's panels, on the run's time axis (samples past its end left out); ""
    when none of its samples falls inside."""
    lines = []
    for k, line in enumerate(panel.lines):
        inside = (line.t_s >= axis.span[0]) & (line.t_s <= axis.span[1])
        points = line_points(line.t_s[inside], line.values[inside])
        lines.append(Line(line.label, points, SERVER_COLORS[k % len(SERVER_COLORS)]))
    if not any(y is not None and y == y for line in lines for _, y in line.points):
        return ""  # nothing inside the run's span (pygal cannot draw an empty XY chart)
    few = max((len(line.points) for line in lines), default=0) <= 30
    suffix = " %" if panel.unit == "%" else ""
    return axis.panel(panel.title, panel.unit, lines, dots=few, y_suffix=suffix)


def failure_colors(series: Sequence[OverTime]) -> dict[str, str]:
    """One colour per failure kind across the runs, in the order they come; cancelled grey."""
    labels = dict.fromkeys(label for one in series for label, _ in one.failures_per_s)
    colors = {CANCELLED_LABEL: "#7f7f7f"}
    for label in labels:
        if label not in colors:
            colors[label] = FAILURE_PALETTE[(len(colors) - 1) % len(FAILURE_PALETTE)]
    return colors


def trade_off_figure(planes: Sequence[TradeOff]) -> str:
    """Output tok/s against p99 TTFT and p99 ITL, one marker per point labelled with it (green
    where it meets --slo, grey where it does not), the repeats' intervals as grey bars, the
    Pareto front marked and joined. Throughput is on a log axis where it spans a decade (a
    concurrency sweep's points otherwise crowd at the left)."""
    panels = []
    for plane, key in zip(planes, TRADE_OFF_LATENCIES, strict=False):
        log_x = spans_decades(np.asarray(plane.x), decades=1)
        lines = [interval_line(plane)]
        front = plane.front
        lines.append(Line("Pareto front", [(plane.x[i], plane.y[i]) for i in front],
                          FRONT_COLOR, 2.0))  # fmt: skip
        if plane.limit is not None and plane.x:
            span = [min(plane.x) * 0.95, max(plane.x) * 1.05]
            lines.append(Line(f"SLO: p99 {LATENCY_BY_KEY[key].short} ≤ {plane.limit:g} ms",
                              [(x, plane.limit) for x in span], SLO_COLOR, 1.5, dashed=True,
                              dots=False))  # fmt: skip
        groups = [("point", [True] * len(plane.x), POINT_COLOR)]
        if plane.meets is not None:
            groups = [("meets the SLO", plane.meets, MEETS_COLOR),
                      ("misses the SLO", [not m for m in plane.meets], MISSES_COLOR)]  # fmt: skip
        for name, chosen, color in groups:
            picked = [i for i, c in enumerate(chosen) if c]
            if picked:
                lines.append(Line(name, [(plane.x[i], plane.y[i]) for i in picked], color,
                                  0.0, labels=[plane.labels[i] for i in picked]))  # fmt: skip
        latency = LATENCY_BY_KEY[key]
        panels.append(svg(Panel(
            TRADE_OFF_TITLES[TRADE_OFF_LATENCIES.index(key)],
            f"output throughput (tok/s{', log scale' if log_x else ''})",
            latency.column("p99"), lines, log_x=log_x, width=640, height=440, dots=True,
        )))  # fmt: skip
    return grid(panels, len(panels))


def interval_line(plane: TradeOff) -> Line:
    """Each point's 95 % intervals across repeats, as crossing grey segments (none without)."""
    points: list[tuple[float, float | None]] = []
    for k in range(len(plane.x)):
        x, y = plane.x[k], plane.y[k]
        if math.isfinite(plane.x_low[k]) and math.isfinite(plane.x_high[k]):
            points += [(plane.x_low[k], y), (plane.x_high[k], y), (plane.x_high[k], None)]
        if math.isfinite(plane.y_low[k]) and math.isfinite(plane.y_high[k]):
            points += [(x, plane.y_low[k]), (x, plane.y_high[k]), (x, None)]
    return Line("95 % interval across runs", points, INTERVAL_COLOR, 1.2, dots=False)

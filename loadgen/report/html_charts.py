"""report.html's plotly figures, drawn from html_figures.py's data: the latency CDFs, the
throughput and in-flight time series, and a campaign's throughput-latency curves.

plotly is the optional ``[plot]`` extra: it is imported here, when a figure is drawn. Each
figure becomes a ``<div>`` and its ``<script>``, which call the one plotly.js the page inlines.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loadgen.report.html_figures import cdf_points, spans_decades
from loadgen.report.metric_table import LATENCY_BY_KEY

# The metric table names each latency: "TTFT distribution (CDF)", "p99 TTFT (ms)".
CDF_TITLES = {
    key: f"{LATENCY_BY_KEY[key].short} distribution (CDF)" for key in ("ttft", "itl", "e2el")
}
TRADE_OFF_LATENCIES = ("ttft", "itl")  # a campaign's planes: output tok/s against their p99
OVER_TIME_TITLE = "Throughput and requests in flight over time"
FAILURES_TITLE = "Failed and cancelled requests per second, by kind"
CANCELLED_LABEL = "cancelled (in flight when the run stopped)"
FAILURE_PALETTE = ("#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
TRADE_OFF_TITLES = tuple(
    f"Output throughput vs p99 {LATENCY_BY_KEY[key].short}" for key in TRADE_OFF_LATENCIES
)
# The modebar without plotly's logo (a link out) and the page's width, whatever the window.
FIGURE_CONFIG = {"displaylogo": False, "responsive": True}
FRONT_COLOR = "#d62728"
POINT_COLOR = "#1f77b4"
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 13}


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


def palette() -> list[str]:
    """The colours a figure gives its lines, in order."""
    from plotly.colors import qualitative

    return list(qualitative.Plotly)


def figure_html(fig: Any, height_px: int) -> str:
    """A figure as a ``<div>`` and its script, using the page's plotly.js."""
    fig.update_layout(font=FONT, template="plotly_white", height=height_px)
    return fig.to_html(
        full_html=False, include_plotlyjs=False, config=FIGURE_CONFIG, default_width="100%",
        default_height=f"{height_px}px",
    )  # fmt: skip


def cdf_figure(lines: Sequence[Latencies], names: Sequence[str] = tuple(CDF_TITLES)) -> str:
    """The CDFs of ``names`` (TTFT, ITL and E2EL; E2EL alone for pooling, whose answer has one
    instant) side by side, one line per run or point (x in ms, log where a metric's values span
    two decades)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1, cols=len(names), subplot_titles=[CDF_TITLES[name] for name in names],
        horizontal_spacing=0.07,
    )  # fmt: skip
    colors = palette()
    for k, line in enumerate(lines):
        for col, name in enumerate(names, start=1):
            x, y = cdf_points(getattr(line, f"{name}_ms"))
            fig.add_trace(
                go.Scatter(
                    x=x, y=100 * y, mode="lines", line={"shape": "hv", "width": 2,
                    "color": colors[k % len(colors)]}, name=line.label, legendgroup=line.label,
                    showlegend=col == 1 and len(lines) > 1,
                    hovertemplate=f"{line.label}<br>%{{x:.2f}} ms: %{{y:.2f}} % at or below"
                    "<extra></extra>",
                ),
                row=1, col=col,
            )  # fmt: skip
    for col, name in enumerate(names, start=1):
        values = [getattr(line, f"{name}_ms") for line in lines]
        every = np.concatenate(values) if values else np.zeros(0)
        log = spans_decades(every)
        fig.update_xaxes(
            title_text=f"{LATENCY_BY_KEY[name].short} (ms{', log scale' if log else ''})",
            type="log" if log else "linear", dtick="D2" if log else None, row=1, col=col,
        )  # fmt: skip
        fig.update_yaxes(range=[0, 100.5], ticksuffix=" %", row=1, col=col)
    fig.update_yaxes(title_text="requests at or below", row=1, col=1)
    fig.update_layout(
        margin={"t": 60, "b": 50, "l": 60, "r": 20},
        legend={"title": {"text": "point"}, "orientation": "h", "y": -0.2},
    )
    return figure_html(fig, 420 if len(lines) <= 1 else 470)


def over_time_figure(series: Sequence[OverTime], tokens: bool = True) -> str:
    """Completed req/s, output tok/s (unless ``tokens`` is False: pooling has none), requests
    in flight and, where any run has them, failed and cancelled requests per second stacked by
    kind, per bin, one run at a time: with several, a menu picks which one is shown."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    titles = ["Completed requests per second", "Output tokens per second", "Requests in flight"]
    if not tokens:
        titles.pop(1)
    flight = len(titles)  # the in-flight row
    failures = any(one.failures_per_s for one in series)
    if failures:
        titles.append(FAILURES_TITLE)
    fig = make_subplots(
        rows=len(titles), cols=1, shared_xaxes=True, vertical_spacing=0.07, subplot_titles=titles
    )
    owners: list[tuple[int, bool]] = []  # each trace's run, and whether it has a legend entry
    colors = _failure_colors(series)
    for k, one in enumerate(series):
        shown = k == 0
        bar = {"x": one.centers_s, "width": one.width_s * 0.95, "visible": shown,
               "showlegend": False}  # fmt: skip
        fig.add_trace(go.Bar(y=one.requests_per_s, marker_color="#1f77b4", name="req/s",
                             hovertemplate="%{x:.2f} s: %{y:.2f} req/s<extra></extra>", **bar),
                      row=1, col=1)  # fmt: skip
        owners.append((k, False))
        if tokens:
            fig.add_trace(go.Bar(y=one.tokens_per_s, marker_color="#ff7f0e", name="tok/s",
                                 hovertemplate="%{x:.2f} s: %{y:.1f} tok/s<extra></extra>",
                                 **bar), row=2, col=1)  # fmt: skip
            owners.append((k, False))
        fig.add_trace(
            go.Scatter(x=one.centers_s, y=one.in_flight_mean, mode="lines", visible=shown,
                       name="mean in the bin", line={"color": "#2ca02c", "width": 2},
                       legendgroup="flight", showlegend=shown,
                       hovertemplate="%{x:.2f} s: %{y:.1f} in flight (mean)<extra></extra>"),
            row=flight, col=1,
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(x=one.centers_s, y=one.in_flight_peak, mode="lines", visible=shown,
                       name="peak in the bin", line={"color": "#2ca02c", "width": 1,
                       "dash": "dot"}, legendgroup="flight", showlegend=shown,
                       hovertemplate="%{x:.2f} s: %{y:.0f} in flight (peak)<extra></extra>"),
            row=flight, col=1,
        )  # fmt: skip
        owners += [(k, True), (k, True)]
        for label, per_s in one.failures_per_s:
            fig.add_trace(
                go.Bar(x=one.centers_s, y=per_s, width=one.width_s * 0.95, visible=shown,
                       name=html.escape(label), marker_color=colors[label], showlegend=shown,
                       legendgroup=f"failure {label}",
                       hovertemplate=f"%{{x:.2f}} s: %{{y:.2f}}/s {_hover(label)}<extra></extra>"),
                row=flight + 1, col=1,
            )  # fmt: skip
            owners.append((k, True))
    if len(series) == 1 and series[0].window_s is not None:
        start_s, end_s = series[0].window_s
        fig.add_vrect(x0=start_s, x1=end_s, fillcolor="#2ca02c", opacity=0.08, line_width=0,
                      annotation_text="steady window", annotation_position="top left",
                      row="all", col=1)  # fmt: skip
    if len(series) > 1:
        buttons = []
        for k, one in enumerate(series):
            visible = [run == k for run, _ in owners]
            showlegend = [run == k and legend for run, legend in owners]
            buttons.append({"label": one.label, "method": "update",
                            "args": [{"visible": visible, "showlegend": showlegend}]})  # fmt: skip
        fig.update_layout(
            updatemenus=[{"buttons": buttons, "direction": "down", "x": 0, "xanchor": "left",
                          "y": 1.1, "yanchor": "bottom", "showactive": True}],
        )  # fmt: skip
    width = series[0].width_s if series else 1.0
    fig.update_xaxes(title_text=f"seconds since the run's start (bins of {width:.3g} s)",
                     row=len(titles), col=1)  # fmt: skip
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text="req/s", row=1, col=1)
    if tokens:
        fig.update_yaxes(title_text="tok/s", row=2, col=1)
    fig.update_yaxes(title_text="requests", row=flight, col=1)
    if failures:
        fig.update_yaxes(title_text="req/s", row=flight + 1, col=1)
    fig.update_layout(
        bargap=0,
        barmode="stack",
        margin={"t": 80 if len(series) > 1 else 60, "b": 50, "l": 70, "r": 20},
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": -0.1, "yanchor": "top"},
    )
    return figure_html(fig, (680 if tokens else 500) + (200 if failures else 0))


def _failure_colors(series: Sequence[OverTime]) -> dict[str, str]:
    """One colour per failure kind across the runs, in the order they come; cancelled grey."""
    labels = dict.fromkeys(label for one in series for label, _ in one.failures_per_s)
    colors = {CANCELLED_LABEL: "#7f7f7f"}
    for label in labels:
        if label not in colors:
            colors[label] = FAILURE_PALETTE[(len(colors) - 1) % len(FAILURE_PALETTE)]
    return colors


def _hover(label: str) -> str:
    """A kind as hover text: plotly's template braces and markup escaped (a server's text)."""
    return html.escape(label).replace("{", "&#123;").replace("}", "&#125;").replace("%", "&#37;")


def trade_off_figure(planes: Sequence[TradeOff]) -> str:
    """Output tok/s against p99 TTFT and p99 ITL, one marker per point labelled with it, the
    repeats' intervals as error bars, the Pareto front marked and joined. Throughput is on a
    log axis where it spans a decade (a concurrency sweep's points otherwise crowd at the left),
    and labels alternate above and below their markers, by throughput."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=TRADE_OFF_TITLES, horizontal_spacing=0.1)
    for col, plane in enumerate(planes, start=1):
        rank = np.argsort(np.argsort(plane.x, kind="stable"))
        fig.add_trace(
            go.Scatter(
                x=plane.x, y=plane.y, mode="markers+text", text=plane.labels,
                textposition=["top center" if r % 2 == 0 else "bottom center" for r in rank],
                name="point", legendgroup="point",
                showlegend=col == 1, marker={"size": 9, "color": POINT_COLOR},
                error_x=_error_bars(plane.x, plane.x_low, plane.x_high),
                error_y=_error_bars(plane.y, plane.y_low, plane.y_high),
                hovertemplate="%{text}<br>%{x:.1f} tok/s, %{y:.2f} ms<extra></extra>",
            ),
            row=1, col=col,
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=[plane.x[i] for i in plane.front], y=[plane.y[i] for i in plane.front],
                mode="lines+markers", name="Pareto front", legendgroup="front",
                showlegend=col == 1, line={"color": FRONT_COLOR, "width": 2},
                marker={"size": 15, "color": "rgba(0,0,0,0)",
                        "line": {"color": FRONT_COLOR, "width": 2}},
                hoverinfo="skip",
            ),
            row=1, col=col,
        )  # fmt: skip
        log_x = spans_decades(np.asarray(plane.x), decades=1)
        fig.update_xaxes(
            title_text=f"output throughput (tok/s{', log scale' if log_x else ''})",
            type="log" if log_x else "linear", rangemode="normal" if log_x else "tozero",
            dtick="D2" if log_x else None, row=1, col=col,
        )  # fmt: skip
        latency = LATENCY_BY_KEY[TRADE_OFF_LATENCIES[col - 1]]
        fig.update_yaxes(title_text=latency.column("p99"), rangemode="tozero", row=1, col=col)
    fig.update_layout(
        margin={"t": 60, "b": 50, "l": 70, "r": 20},
        legend={"orientation": "h", "y": -0.2},
    )
    return figure_html(fig, 470)


def _error_bars(mid: list[float], low: list[float], high: list[float]) -> dict[str, Any]:
    """plotly's asymmetric error bars from each interval's ends; none where there is none."""
    above = [h - m if np.isfinite(h) else None for m, h in zip(mid, high, strict=True)]
    below = [m - lo if np.isfinite(lo) else None for m, lo in zip(mid, low, strict=True)]
    visible = any(v is not None for v in above)
    return {"type": "data", "array": above, "arrayminus": below, "visible": visible,
            "color": "#7f7f7f", "thickness": 1.2, "width": 4}  # fmt: skip

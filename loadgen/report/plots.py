"""``--plot-timeline`` and ``--plot-dataset-stats``: upstream's two figures, from the results.

The timeline is an HTML page (plotly): one row per request, a TTFT bar from its send instant,
then a bar per inter-token gap coloured by ``--timeline-itl-thresholds``. The dataset figure is a
PNG (matplotlib): histograms of prompt, output and total tokens, and tokens per request. Both are
written beside the result file (``NAME.timeline.html``, ``NAME.dataset_stats.png``). plotly (with
pandas) and matplotlib are the optional ``[plot]`` extra.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

TIMELINE_COLORS = ("#109618", "#FF7F0E", "#D62728")
TTFT_COLOR = "#636EFA"


def itl_labels(thresholds_s: tuple[float, float]) -> list[str]:
    """Upstream's legend for the three ITL colours."""
    low, high = (t * 1000 for t in thresholds_s)
    return [f"ITL < {low:.0f}ms", f"{low:.0f}ms ≤ ITL < {high:.0f}ms", f"ITL ≥ {high:.0f}ms"]


def clock(seconds: float) -> str:
    """Seconds as upstream's HH:MM:SS.mmm timeline label."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{int(hours):02d}:{int(minutes):02d}:{secs:06.3f}"


def timeline_segments(
    start_s: np.ndarray,
    ttft_s: np.ndarray,
    itls_s: list[list[float]],
    prompt_lens: np.ndarray,
    output_lens: np.ndarray,
    thresholds_s: tuple[float, float],
) -> list[dict[str, Any]]:
    """The bars of upstream's timeline: per request, TTFT then each ITL, times from the first
    send. A request's end is its TTFT plus its ITLs, as upstream's plot computes it."""
    if len(start_s) == 0:
        return []
    labels = itl_labels(thresholds_s)
    origin = float(np.min(start_s))
    segments = []
    for i in range(len(start_s)):
        start = float(start_s[i]) - origin
        ttft = float(ttft_s[i])
        itls = itls_s[i]
        common = {
            "request_id": f"Req {i}",
            "prompt_tokens": int(prompt_lens[i]),
            "output_tokens": int(output_lens[i]),
            "req_start_time": clock(start),
            "req_finish_time": clock(start + ttft + sum(itls)),
        }
        bars = [("TTFT", start, ttft)]
        at = start + ttft
        for gap in itls:
            kind = labels[0] if gap < thresholds_s[0] else labels[1 if gap < thresholds_s[1] else 2]
            bars.append((kind, at, gap))
            at += gap
        for kind, begin, length in bars:
            segments.append(
                {
                    **common,
                    "start": clock(begin),
                    "end": clock(begin + length),
                    "type": kind,
                    "segment_start": clock(begin),
                    "segment_end": clock(begin + length),
                    "duration": f"{length:.3f}s",
                }
            )
    return segments


def write_timeline_html(
    segments: list[dict[str, Any]], path: Path, thresholds_s: tuple[float, float]
) -> None:
    """Upstream's plotly timeline of ``segments``, as one HTML file."""
    import plotly.express as px
    import plotly.io as pio

    labels = itl_labels(thresholds_s)
    with warnings.catch_warnings():  # pandas parsing the HH:MM:SS.mmm labels, harmlessly
        warnings.filterwarnings("ignore", message="Could not infer format")
        _timeline_figure(px, pio, segments, path, labels)


def _timeline_figure(px: Any, pio: Any, segments: list[dict[str, Any]], path: Path,
                     labels: list[str]) -> None:  # fmt: skip
    fig = px.timeline(
        segments,
        x_start="start",
        x_end="end",
        y="request_id",
        color="type",
        color_discrete_map={"TTFT": TTFT_COLOR, **dict(zip(labels, TIMELINE_COLORS, strict=True))},
        category_orders={"type": ["TTFT", *labels]},
        hover_data=[
            "prompt_tokens", "output_tokens", "req_start_time", "req_finish_time",
            "segment_start", "segment_end", "duration",
        ],
    )  # fmt: skip
    fig.update_traces(
        hovertemplate="<b>%{y}</b><br>Type: %{fullData.name}<br>Start: %{customdata[4]}<br>"
        "End: %{customdata[5]}<br>Duration: %{customdata[6]}<br>"
        "Prompt Tokens: %{customdata[0]}<br>Output Tokens: %{customdata[1]}<br>"
        "Request Start Time: %{customdata[2]}<br>Request End Time: %{customdata[3]}<br>"
        "<extra></extra>"
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(xaxis_title="Time", yaxis_title="Request ID", showlegend=True)
    pio.write_html(fig, str(path))


def write_dataset_stats_png(prompt_lens: np.ndarray, output_lens: np.ndarray, path: Path) -> None:
    """Upstream's 2x2 figure of the token counts, as one PNG."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    prompt = np.asarray(prompt_lens)
    output = np.asarray(output_lens)
    fig, ((ax1, ax2), (ax3, ax4)) = plt.subplots(2, 2, figsize=(14, 10))
    histograms = (
        (ax1, prompt, "steelblue", "Prompt Tokens", "Prompt Tokens Distribution"),
        (ax2, output, "coral", "Output Tokens", "Output Tokens Distribution"),
        (ax3, prompt + output, "mediumseagreen", "Total Tokens (Prompt + Output)",
         "Total Tokens Distribution"),
    )  # fmt: skip
    for ax, values, color, xlabel, title in histograms:
        ax.hist(values, bins=30, color=color, edgecolor="black", alpha=0.7)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("Frequency")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    ids = np.arange(len(prompt))
    ax4.bar(ids, prompt, label="Prompt Tokens", color="steelblue", alpha=0.7)
    ax4.bar(ids, output, bottom=prompt, label="Output Tokens", color="coral", alpha=0.7)
    ax4.set_xlabel("Request ID")
    ax4.set_ylabel("Tokens")
    ax4.set_title("Tokens per Request (Stacked)")
    ax4.legend()
    ax4.grid(True, alpha=0.3, axis="y")
    plt.tight_layout()
    plt.savefig(str(path), dpi=150, bbox_inches="tight")
    plt.close(fig)

"""How the views show a run bounded by time and its steady window: the console's block and
line (report.html tabulates the block), and the result JSON's ``loadgen.steady_window`` and
``loadgen.time_bound``.

The window's figures are the metric table's campaign rows (``steady.window_metrics``), labelled
as the run's own; upstream's keys keep their whole-run meaning.
"""

from __future__ import annotations

import math
from typing import Any

from loadgen.report.metric_table import CAMPAIGN, FIGURE_BY_KEY, figures_in, latencies_in
from loadgen.report.rows import Block, Row
from loadgen.report.run_summary import Steady, TimeBound
from loadgen.report.steady import campaign_statistics


def steady_title(steady: Steady) -> str:
    """The block's title, which names the window: `` Steady window 5.00 s to 85.00 s ``."""
    window = steady.window
    return f" Steady window {window.start_s:.2f} s to {window.end_s:.2f} s "


def steady_block(steady: Steady, pooling: bool, percentiles: tuple[float, ...]) -> Block:
    """The steady window's block: what it kept and trimmed, then the campaign figures and
    latencies counted over it (a figure it could not count is left out)."""
    window, metrics = steady.window, steady.metrics
    rows: list[Row] = [
        ("Warm-up, cool-down trimmed (s):", f"{steady.warmup_s:g}, {steady.cooldown_s:g}", ""),
        ("Window length (s):", window.duration_s, ".2f"),
        ("Requests in the window:", int(window.kept.sum()), ""),
        ("Requests outside it:", window.trimmed, ""),
    ]
    for figure in figures_in(CAMPAIGN, pooling):
        value = metrics.get(figure.key, math.nan)
        if math.isfinite(value):
            rows.append((figure.label, int(value) if figure.spec == "" else value, figure.spec))
    for latency in latencies_in(CAMPAIGN):
        for stat in campaign_statistics(percentiles):
            value = metrics.get(f"{stat}_{latency.key}_ms", math.nan)
            if math.isfinite(value):
                rows.append((f"{stat.capitalize()} {latency.short} (ms):", value, ".2f"))
    return Block(steady_title(steady), tuple(rows))


def time_bound_line(bound: TimeBound) -> str:
    """The console's line on what --duration's deadline did."""
    cancelled = (
        f"; {bound.cancelled} in flight when --duration-grace-s {bound.grace_s:g} ran out were "
        "cancelled"
        if bound.cancelled
        else ""
    )
    if bound.ran_out_s is not None:
        return (
            f"--duration {bound.duration_s:g} s: all {bound.prepared} requests prepared were "
            f"sent, the last {bound.ran_out_s:.2f} s after t0: the run ran out of requests "
            f"before the deadline (give --num-prompts more){cancelled}"
        )
    otherwise = bound.not_sent_otherwise
    unsent = (
        f" ({otherwise} more never left the client: a stop, or a worker gone)" if otherwise else ""
    )
    return (
        f"--duration {bound.duration_s:g} s: {bound.prepared - bound.not_sent - otherwise} of "
        f"the {bound.prepared} requests prepared were sent before the deadline{unsent}{cancelled}"
    )


def steady_json(steady: Steady | None) -> dict[str, Any] | None:
    """``loadgen.steady_window``: the window (s after t0), its counts and its figures (None
    where one could not be counted); None without --warmup-s or --cooldown-s."""
    if steady is None:
        return None
    window = steady.window
    return {
        "warmup_s": steady.warmup_s,
        "cooldown_s": steady.cooldown_s,
        "start_s": window.start_s,
        "end_s": window.end_s,
        "duration_s": window.duration_s,
        "requests": int(window.kept.sum()),
        "trimmed": window.trimmed,
        **{k: _json_number(k, v) for k, v in steady.metrics.items()},
    }


def _json_number(key: str, value: float) -> float | int | None:
    """A window figure as the JSON holds it: a count as an integer, None where not counted."""
    if not math.isfinite(value):
        return None
    figure = FIGURE_BY_KEY.get(key)
    return int(value) if figure is not None and figure.spec == "" else value


def time_bound_json(bound: TimeBound | None) -> dict[str, Any] | None:
    """``loadgen.time_bound``: --duration, its grace and what the deadline did; None
    without --duration."""
    if bound is None:
        return None
    return {
        "duration_s": bound.duration_s,
        "grace_s": bound.grace_s,
        "prepared": bound.prepared,
        "not_sent_at_deadline": bound.not_sent,
        "cancelled_at_grace": bound.cancelled,
        "ran_out_s": bound.ran_out_s,  # every request prepared was sent by then (unpaced)
        # prepared in blocks as the run went: their size and each one's prompt seed
        "block_size": bound.block_size,
        "block_seeds": bound.block_seeds,
    }

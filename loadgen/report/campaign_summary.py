"""A campaign's figures: each run's metrics (over its steady state with --steady-state), each
point's mean and 95 % confidence interval across its runs, summary.csv and the console table.

A renderer of each run's ``RunSummary``: the metric table's rows whose views name ``campaign``
are its columns. Pure functions: no sockets, no files but the CSV written at the end.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from loadgen.report.failures import most_frequent
from loadgen.report.metric_table import (
    CAMPAIGN,
    CAMPAIGN_TABLE,
    FIGURE_BY_KEY,
    TABLE_STATISTIC,
    figures_in,
    latencies_in,
)
from loadgen.report.run_summary import RunSummary
from loadgen.report.server_figures import window_keys
from loadgen.report.steady import (
    CountedRequests,
    SteadyWindow,
    campaign_statistics,
    counted,
    steady_window,
    window_metrics,
)
from loadgen.terminal import printable

# Two-sided 95 % quantiles of Student's t, by degrees of freedom (1..30).
T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
Z975 = 1.959964


def t_quantile_975(dof: int) -> float:
    """Student's t two-sided 95 % quantile for ``dof`` degrees of freedom (a table to 30, then
    the Cornish-Fisher expansion, within 0.001 of the exact value)."""
    if dof < 1:
        return math.nan
    if dof <= len(T975):
        return T975[dof - 1]
    z = Z975
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


def mean_ci95(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and 95 % confidence interval (t distribution) of the finite ``values``; the
    interval is NaN with fewer than two."""
    finite = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if len(finite) == 0:
        return math.nan, math.nan, math.nan
    mean = float(finite.mean())
    if len(finite) < 2:
        return mean, math.nan, math.nan
    half = t_quantile_975(len(finite) - 1) * float(finite.std(ddof=1)) / math.sqrt(len(finite))
    return mean, mean - half, mean + half


def metric_keys(percentiles: Sequence[float] = ()) -> tuple[str, ...]:
    """summary.csv's metric columns, in order: each campaign latency's statistics, then the
    campaign figures (the metric table's rows whose views name ``campaign``)."""
    statistics = campaign_statistics(percentiles)
    latencies = (
        f"{stat}_{latency.key}_ms" for latency in latencies_in(CAMPAIGN) for stat in statistics
    )
    return (*latencies, *(f.key for f in figures_in(CAMPAIGN, pooling=False)))


def run_problem(summary: RunSummary) -> str | None:
    """Why a run does not count among its point's: it lost workers (or never ended: its
    records stop short), or no request completed; None when it counts."""
    if summary.ending.worker_problems:
        return "the run lost workers: " + "; ".join(summary.ending.worker_problems)
    if summary.totals.completed == 0:
        first = printable((summary.errors.first.splitlines() or [""])[0])
        return f"every request failed; the first error: {first}"
    return None


def counted_window(summary: RunSummary, steady: bool = False) -> SteadyWindow | None:
    """The window a campaign counts of one run: ``--steady-state``'s (``steady``), else the
    run's --warmup-s/--cooldown-s window; None: the whole run."""
    requests = summary.requests
    sent = requests.results.sent_s >= 0
    if steady:
        return steady_window(requests.results.sent_s, requests.end_s, sent)
    return None if summary.steady is None else summary.steady.window


def counted_requests(summary: RunSummary, steady: bool = False) -> CountedRequests:
    """The requests a campaign counts of one run (its window's: ``counted_window``), and their
    latencies."""
    results, timings = summary.requests.results, summary.requests.timings
    window = counted_window(summary, steady)
    kept = window.kept if window is not None else np.ones(len(results.sent_s), bool)
    return counted(results, timings, kept)


def summary_metrics(summary: RunSummary, steady: bool = False) -> tuple[dict[str, float], int]:
    """One run's campaign metrics from its summary, and how many requests the steady state
    trimmed (0 without it). Without it the figures are the run's own (its result JSON's);
    with it they are counted over the steady window (a figure it cannot count is NaN)."""
    results, timings = summary.requests.results, summary.requests.timings
    window = counted_window(summary, steady)
    settings = summary.settings
    if window is None:
        metrics = window_metrics(
            results,
            timings,
            np.ones(len(results.sent_s), bool),
            summary.totals.duration,
            pooling=settings.pooling,
            percentiles=settings.percentiles,
            goodput=settings.goodput,
        )
        figures = figures_in(CAMPAIGN, settings.pooling)
        metrics |= {f.key: _number(getattr(summary.totals, f.key)) for f in figures}
        return metrics, 0
    metrics = window_metrics(
        results,
        timings,
        window.kept,
        window.duration_s,
        pooling=settings.pooling,
        percentiles=settings.percentiles,
        goodput=settings.goodput,
        outcome=summary.errors.outcome,
        not_sent=float(summary.totals.not_sent),  # never in a window: the run's own count
    )
    metrics |= window_keys(summary.server_series, window.start_s, window.end_s)
    return metrics, window.trimmed


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)


@dataclass
class PointRuns:
    """One point of the grid and what its runs gave."""

    name: str
    max_concurrency: int | None
    request_rate: float
    metrics: list[dict[str, float]] = field(default_factory=list)  # one per finished run
    trimmed: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # why runs failed, one line each
    error_kinds: list[dict[str, int]] = field(default_factory=list)  # each run's failed by kind


def summary_rows(
    points: Sequence[PointRuns], num_runs: int, percentiles: Sequence[float] = ()
) -> list[dict[str, object]]:
    """summary.csv's rows, one per point: each metric (its mean across runs, and with repeats
    the 95 % t interval's ends; ``percentiles``: the runs' --metric-percentiles), the runs that
    finished, the requests trimmed, the errors."""
    rows = []
    for point in points:
        row: dict[str, object] = {
            "point": point.name,
            "max_concurrency": "" if point.max_concurrency is None else point.max_concurrency,
            "request_rate": point.request_rate,
            "runs": num_runs,
            "runs_ok": len(point.metrics),
            "steady_state_trimmed": sum(point.trimmed),
        }
        for key in metric_keys(percentiles):
            mean, low, high = mean_ci95([m.get(key, math.nan) for m in point.metrics])
            if num_runs == 1:
                row[key] = _cell(mean)
            else:
                row[f"{key}_mean_of_runs"] = _cell(mean)
                row[f"{key}_ci95_t_low"] = _cell(low)
                row[f"{key}_ci95_t_high"] = _cell(high)
        row["top_error_kind"] = top_error_kind(point.error_kinds)
        row["error"] = "; ".join(point.errors)
        rows.append(row)
    return rows


def top_error_kind(runs: Sequence[Mapping[str, int]]) -> str:
    """The most frequent kind of failure over a point's runs ("" when none failed)."""
    kinds = most_frequent(sum((Counter(by_kind) for by_kind in runs), Counter()))
    return kinds[0][0] if kinds else ""


def _cell(value: float) -> object:
    return "" if not math.isfinite(value) else round(value, 4)


def write_summary_csv(path: str, rows: Sequence[dict[str, object]]) -> None:
    """Write the rows as CSV with a header line."""
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def table_columns(pooling: bool) -> tuple[tuple[str, str], ...]:
    """The console table's columns as (summary.csv's key, the metric table's title): the
    figures a pooling or a generation run reports, then each latency's TABLE_STATISTIC, of the
    rows whose views name ``campaign table``, in the table's order."""
    figures = ((f.key, f.title) for f in figures_in(CAMPAIGN_TABLE, pooling))
    latencies = (
        (f"{TABLE_STATISTIC}_{latency.key}_ms", latency.column(TABLE_STATISTIC))
        for latency in latencies_in(CAMPAIGN_TABLE)
    )
    return (*figures, *latencies)


def summary_table(
    rows: Sequence[dict[str, object]],
    num_runs: int,
    keys: Sequence[str] = (),
    *,
    pooling: bool = False,
) -> list[str]:
    """The console's table at the campaign's end: per point, runs finished, then the metric
    table's ``campaign table`` columns and the other ``keys`` (an SLO's) (means across runs, ±
    the interval's half width with repeats), and with an SLO the runs that met it; a figure
    measured only when asked (goodput) is left out when no point has it."""
    columns = table_columns(pooling)
    named = {key for key, _ in columns}
    shown = [
        (key, title)
        for key, title in (*columns, *((key, key) for key in keys if key not in named))
        if key not in FIGURE_BY_KEY
        or FIGURE_BY_KEY[key].shown != "known"
        or any(_shown(row, key, num_runs) != "-" for row in rows)
    ]
    slo = bool(rows) and "slo_met_runs" in rows[0]
    header = f"{'point':<40} {'ok':>5} " + " ".join(f"{title:>22}" for _, title in shown)
    header += f" {'SLO met':>7}" if slo else ""
    lines = ["=" * len(header), header, "-" * len(header)]
    for row in rows:
        cells = [_shown(row, key, num_runs) for key, _ in shown]
        ok = f"{row['runs_ok']}/{row['runs']}"
        line = f"{row['point']:<40} {ok:>5} " + " ".join(f"{c:>22}" for c in cells)
        if slo:
            line += f" {str(row['slo_met_runs']) + '/' + str(row['runs']):>7}"
        lines.append(line)
        if row["error"]:
            lines.append(f"  failed: {row['error']}")
        if row.get("top_error_kind"):
            lines.append(f"  failed requests, most often: {row['top_error_kind']}")
    lines.append("=" * len(header))
    if num_runs > 1:
        lines.append("means across runs ± half width of their 95 % interval (Student's t)")
    return lines


def _shown(row: dict[str, object], key: str, num_runs: int) -> str:
    if num_runs == 1:
        value = row.get(key, "")
        return "-" if value == "" else f"{value:.2f}"
    mean, low, high = (
        row.get(f"{key}{s}", "") for s in ("_mean_of_runs", "_ci95_t_low", "_ci95_t_high")
    )
    if mean == "":
        return "-"
    if low == "":
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {(high - low) / 2:.2f}"  # type: ignore[operator]

"""A campaign's figures: each run's metrics (over its steady state with --steady-state), each
point's mean across its runs and, with MIN_RUNS runs or more, its 95 % interval
(loadgen/report/intervals.py: a latency's from a bootstrap over the runs and their requests, a
throughput's or a count's Student's t clipped at 0), summary.csv and the console table.

A renderer of each run's ``RunSummary``: the metric table's rows whose views name ``campaign``
are its columns. Pure functions: no sockets, no files but the CSV written at the end.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from loadgen.report.failures import most_frequent
from loadgen.report.intervals import (
    MIN_RUNS,
    Clusters,
    finite_mean,
    no_interval_reason,
    point_interval,
    request_replicates,
    runs_interval,
)
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

INTERVAL_NOTE = (
    "mean across runs [95 % interval: a latency's from a bootstrap over runs and their "
    "requests, the other figures' Student's t over runs, clipped at 0]"
)


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


def run_replicates(
    summary: RunSummary,
    steady: bool = False,
    latencies: Collection[str] | None = None,
) -> dict[str, np.ndarray]:
    """One run's bootstrap replicates over its counted requests (``counted_requests``) of
    each latency statistic summary.csv has (its key, in ms; the run's --metric-percentiles;
    ``latencies``: only those latency keys'): ``intervals.request_replicates``, a request's ITL
    gaps drawn together."""
    requests = counted_requests(summary, steady)
    gaps = np.diff(summary.requests.timings.itl_offsets)[requests.ok]
    shapes = {  # which of the counted requests each sample's values belong to
        "tpot": requests.output_lens > 1,
        "itl": gaps,
    }
    samples = {}
    for latency in latencies_in(CAMPAIGN):
        if latencies is not None and latency.key not in latencies:
            continue
        values = requests.sample(latency.key) * 1000.0
        owned = shapes.get(latency.key)
        samples[latency.key] = (
            Clusters.singletons(values) if owned is None else Clusters(values, owned.astype(int))
        )
    statistics = campaign_statistics(summary.settings.percentiles)
    tables = request_replicates(samples, statistics)
    return {
        f"{stat}_{latency}_ms": table[:, column]
        for latency, table in tables.items()
        for column, stat in enumerate(statistics)
    }


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
    # each finished run's ``run_replicates``, in the order of ``metrics``: a latency's interval
    # needs them (a point without them shows none for its latencies)
    replicates: list[dict[str, np.ndarray]] = field(default_factory=list)

    def interval(self, key: str) -> tuple[float, float]:
        """The 95 % interval of a metric's mean across the runs (NaN, NaN: none): with fewer
        than MIN_RUNS runs that measured it none; a latency's from the runs' replicates, any
        other figure's Student's t clipped to its range (0 up, 100 at most for a %)."""
        values = [m.get(key, math.nan) for m in self.metrics]
        finite = [i for i, v in enumerate(values) if math.isfinite(v)]
        if len(finite) < MIN_RUNS:
            return math.nan, math.nan
        if key in FIGURE_BY_KEY:
            upper = 100.0 if FIGURE_BY_KEY[key].unit == "%" else math.inf
            return runs_interval(values, 0.0, upper)
        drawn = [self.replicates[i].get(key) for i in finite if i < len(self.replicates)]
        if len(self.replicates) != len(self.metrics) or any(d is None for d in drawn):
            return math.nan, math.nan
        return point_interval(finite_mean(values), [d for d in drawn if d is not None])


def summary_rows(
    points: Sequence[PointRuns], num_runs: int, percentiles: Sequence[float] = ()
) -> list[dict[str, object]]:
    """summary.csv's rows, one per point: each metric (with repeats its mean across runs, and
    with MIN_RUNS or more its 95 % interval's ends, empty where the point has fewer runs that
    measured it: ``PointRuns.interval``; ``percentiles``: the runs' --metric-percentiles), the
    runs that finished, the requests trimmed, the errors."""
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
            mean = finite_mean([m.get(key, math.nan) for m in point.metrics])
            if num_runs == 1:
                row[key] = _cell(mean)
                continue
            row[f"{key}_mean_of_runs"] = _cell(mean)
            if num_runs >= MIN_RUNS:
                low, high = point.interval(key)
                row[f"{key}_ci95_low"] = _cell(low)
                row[f"{key}_ci95_high"] = _cell(high)
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
    table's ``campaign table`` columns and the other ``keys`` (an SLO's) (with repeats means
    across runs, then ``[low, high]``, their 95 % interval, where a point has one), and with an
    SLO the runs that met it; a figure measured only when asked (goodput) is left out when no
    point has it; below, what the figures are and why a point has no interval."""
    columns = table_columns(pooling)
    named = {key for key, _ in columns}
    shown = [
        (key, title)
        for key, title in (*columns, *((key, key) for key in keys if key not in named))
        if key not in FIGURE_BY_KEY
        or FIGURE_BY_KEY[key].shown != "known"
        or any(_shown(row, key, num_runs) != "-" for row in rows)
    ]
    cells = [[_shown(row, key, num_runs) for key, _ in shown] for row in rows]
    widths = [
        max(22, len(title), *(len(line[k]) for line in cells)) for k, (_, title) in enumerate(shown)
    ]
    slo = bool(rows) and "slo_met_runs" in rows[0]
    header = f"{'point':<40} {'ok':>5} " + " ".join(
        f"{title:>{w}}" for (_, title), w in zip(shown, widths, strict=True)
    )
    header += f" {'SLO met':>7}" if slo else ""
    lines = ["=" * len(header), header, "-" * len(header)]
    for row, line_cells in zip(rows, cells, strict=True):
        ok = f"{row['runs_ok']}/{row['runs']}"
        line = f"{row['point']:<40} {ok:>5} " + " ".join(
            f"{c:>{w}}" for c, w in zip(line_cells, widths, strict=True)
        )
        if slo:
            line += f" {str(row['slo_met_runs']) + '/' + str(row['runs']):>7}"
        lines.append(line)
        if row["error"]:
            lines.append(f"  failed: {row['error']}")
        if row.get("top_error_kind"):
            lines.append(f"  failed requests, most often: {row['top_error_kind']}")
    lines.append("=" * len(header))
    return [*lines, *interval_notes(rows, num_runs)]


def interval_notes(rows: Sequence[Mapping[str, object]], num_runs: int) -> list[str]:
    """What a table of summary.csv's rows shows with repeats, and why a point has no
    interval (fewer than MIN_RUNS runs finished), in a line or two; none for single runs."""
    if num_runs == 1:
        return []
    if num_runs < MIN_RUNS:
        return [f"means across runs; no interval: {no_interval_reason(num_runs)}"]
    short = [row for row in rows if int(str(row["runs_ok"])) < MIN_RUNS]
    notes = [INTERVAL_NOTE]
    if short:
        points = ", ".join(str(row["point"]) for row in short)
        fewest = min(int(str(row["runs_ok"])) for row in short)
        reason = no_interval_reason(fewest) or ""
        notes.append(f"no interval at {points}: as few as {reason}")
    return notes


def _shown(row: dict[str, object], key: str, num_runs: int) -> str:
    if num_runs == 1:
        value = row.get(key, "")
        return "-" if value == "" else f"{value:.2f}"
    mean, low, high = (
        row.get(f"{key}{s}", "") for s in ("_mean_of_runs", "_ci95_low", "_ci95_high")
    )
    if mean == "":
        return "-"
    if low == "" or high == "":
        return f"{mean:.2f}"
    decimals = interval_decimals(float(low), float(high))  # type: ignore[arg-type]
    return f"{mean:.{decimals}f} [{low:.{decimals}f}, {high:.{decimals}f}]"


def interval_decimals(low: float, high: float) -> int:
    """The decimals that show an interval's half width to 2 significant digits (0 to 4; 2
    for an interval of no width), so a mean is not shown finer than its interval knows it."""
    half = (high - low) / 2
    if not half > 0:
        return 2
    return min(max(1 - math.floor(math.log10(half)), 0), 4)

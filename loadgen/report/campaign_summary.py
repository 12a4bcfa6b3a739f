"""A campaign's figures: each run's metrics (over its steady state with --steady-state), each
point's mean and 95 % confidence interval across its runs, summary.csv and the console table.

A renderer of each run's ``RunSummary``: the metric table's rows whose views name ``campaign``
are its columns. Pure functions: no sockets, no files but the CSV written at the end.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from loadgen.report.metric_table import CAMPAIGN, figures_in, latencies_in
from loadgen.report.metrics import good_requests
from loadgen.report.run_summary import RunSummary
from loadgen.report.summary import percentile_word
from loadgen.terminal import printable

# Two-sided 95 % quantiles of Student's t, by degrees of freedom (1..30).
T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
Z975 = 1.959964


@dataclass(frozen=True)
class SteadyWindow:
    """Which requests a run's steady state keeps, and the window's length."""

    kept: np.ndarray  # bool [N]
    duration_s: float
    trimmed: int


def steady_window(send_s: np.ndarray, end_s: np.ndarray, sent: np.ndarray) -> SteadyWindow:
    """The requests sent after the first request ended and ended before the last one was sent
    (ramp-up and ramp-down trimmed); requests never sent are trimmed too."""
    if not sent.any():
        return SteadyWindow(np.zeros(len(sent), bool), 0.0, len(sent))
    first_end = float(end_s[sent].min())
    last_send = float(send_s[sent].max())
    kept = sent & (send_s >= first_end) & (end_s <= last_send)
    return SteadyWindow(kept, max(last_send - first_end, 0.0), int(len(sent) - kept.sum()))


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


def campaign_statistics(percentiles: Sequence[float] = ()) -> tuple[str, ...]:
    """The statistics a campaign keeps of each latency: mean, median, p99 and the run's other
    --metric-percentiles, in increasing order."""
    chosen = sorted({*percentiles, 99.0})
    return ("mean", "median", *(f"p{percentile_word(p)}" for p in chosen))


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


def summary_metrics(summary: RunSummary, steady: bool = False) -> tuple[dict[str, float], int]:
    """One run's campaign metrics from its summary, and how many requests the steady state
    trimmed (0 without it). Without it the figures are the run's own (its result JSON's);
    with it they are counted over the steady window (a figure it cannot count is NaN)."""
    requests = summary.requests
    results, timings = requests.results, requests.timings
    sent = results.sent_s >= 0
    window = steady_window(results.sent_s, requests.end_s, sent) if steady else None
    kept = window.kept if window is not None else np.ones(len(sent), bool)
    ok = kept & results.success & (np.diff(results.event_offsets) > 0)
    out = results.output_lens[ok]
    many = out > 1
    ttft, e2el = timings.ttft_s[ok], timings.latency_s[ok]
    tpot = np.zeros(len(out))
    tpot[many] = (e2el - ttft)[many] / (out[many] - 1)
    queue = timings.queue_s[ok]
    samples = {  # every latency of the metric table, so any of them may name the campaign
        "ttft": ttft,
        "e2el": e2el,
        "tpot": tpot[many],
        "itl": timings.itl_s[np.repeat(ok, np.diff(timings.itl_offsets))],
        "client_queue_time": queue,
        "e2el_including_client_queue": e2el + queue,
    }
    metrics: dict[str, float] = {}
    statistics = campaign_statistics(summary.settings.percentiles)
    for latency in latencies_in(CAMPAIGN):
        values_ms = samples[latency.key] * 1000.0
        for stat in statistics:
            metrics[f"{stat}_{latency.key}_ms"] = _statistic(stat, values_ms)
    figures = figures_in(CAMPAIGN, summary.settings.pooling)
    if window is None:
        metrics |= {f.key: _number(getattr(summary.totals, f.key)) for f in figures}
        return metrics, 0
    seconds = window.duration_s
    slos = summary.settings.goodput
    counted = {
        "completed": float(ok.sum()),
        "failed": float((kept & ~ok).sum()),
        "request_throughput": int(ok.sum()) / seconds if seconds > 0 else math.nan,
        "output_throughput": float(out.sum()) / seconds if seconds > 0 else math.nan,
        "request_goodput": (
            good_requests(ttft, tpot, e2el, slos) / seconds if slos and seconds > 0 else math.nan
        ),
    }
    metrics |= {f.key: counted.get(f.key, math.nan) for f in figures}
    return metrics, window.trimmed


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _statistic(stat: str, values: np.ndarray) -> float:
    if len(values) == 0:
        return math.nan
    if stat == "mean":
        return float(values.mean())
    if stat == "median":
        return float(np.median(values))
    return float(np.percentile(values, float(stat[1:])))


@dataclass
class PointRuns:
    """One point of the grid and what its runs gave."""

    name: str
    max_concurrency: int | None
    request_rate: float
    metrics: list[dict[str, float]] = field(default_factory=list)  # one per finished run
    trimmed: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # why runs failed, one line each


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
        row["error"] = "; ".join(point.errors)
        rows.append(row)
    return rows


def _cell(value: float) -> object:
    return "" if not math.isfinite(value) else round(value, 4)


def write_summary_csv(path: str, rows: Sequence[dict[str, object]]) -> None:
    """Write the rows as CSV with a header line."""
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def summary_table(rows: Sequence[dict[str, object]], num_runs: int) -> list[str]:
    """The console's table at the campaign's end: per point, runs finished, req/s, goodput
    (where a point measured it), output tok/s, TTFT and ITL p99, the server's prefix-cache hit
    rate (where it reported one) (means across runs, ± the interval's half width with
    repeats)."""
    goodput = any(_shown(row, "request_goodput", num_runs) != "-" for row in rows)
    rates = ("request_throughput", *(("request_goodput",) if goodput else ()), "output_throughput")
    hits = any(_shown(row, "prefix_cache_hit_rate", num_runs) != "-" for row in rows)
    shown = (*rates, "p99_ttft_ms", "p99_itl_ms", *(("prefix_cache_hit_rate",) if hits else ()))
    header = f"{'point':<40} {'ok':>5} " + " ".join(f"{key:>22}" for key in shown)
    lines = ["=" * len(header), header, "-" * len(header)]
    for row in rows:
        cells = [_shown(row, key, num_runs) for key in shown]
        ok = f"{row['runs_ok']}/{row['runs']}"
        lines.append(f"{row['point']:<40} {ok:>5} " + " ".join(f"{c:>22}" for c in cells))
        if row["error"]:
            lines.append(f"  failed: {row['error']}")
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

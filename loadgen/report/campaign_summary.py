"""A campaign's figures: each run's metrics (over its steady state with --steady-state), each
point's mean and 95 % confidence interval across its runs, summary.csv and the console table.

Pure functions of a run's report: no sockets, no files but the CSV written at the end.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from loadgen.report.metrics import RequestResults, Timings

LATENCIES = ("ttft", "tpot", "itl", "e2el")
STATISTICS = ("mean", "median", "p99")
LATENCY_KEYS = tuple(f"{stat}_{name}_ms" for name in LATENCIES for stat in STATISTICS)
COUNT_KEYS = ("request_throughput", "output_throughput", "completed", "failed")
METRIC_KEYS = (*LATENCY_KEYS, *COUNT_KEYS)

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


def run_metrics(
    results: RequestResults,
    timings: Timings,
    end_s: np.ndarray,
    whole_run: dict[str, float],
    steady: bool,
) -> tuple[dict[str, float], int]:
    """One run's summary metrics and how many requests the steady state trimmed (0 without
    it). ``whole_run``: the result JSON's throughputs and counts, used as they are when the
    whole run counts."""
    sent = results.send_s >= 0
    if steady:
        window = steady_window(results.send_s, end_s, sent)
        kept, trimmed = window.kept, window.trimmed
    else:
        kept, trimmed = np.ones(len(sent), bool), 0
    ok = kept & results.success & (np.diff(results.event_offsets) > 0)
    out = results.output_lens[ok]
    many = out > 1
    itl_counts = np.diff(timings.itl_offsets)
    samples = {
        "ttft": timings.ttft_s[ok],
        "e2el": timings.latency_s[ok],
        "tpot": (timings.latency_s[ok] - timings.ttft_s[ok])[many] / (out[many] - 1),
        "itl": timings.itl_s[np.repeat(ok, itl_counts)],
    }
    metrics: dict[str, float] = {}
    for name in LATENCIES:
        values_ms = samples[name] * 1000.0
        for stat in STATISTICS:
            metrics[f"{stat}_{name}_ms"] = _statistic(stat, values_ms)
    if steady:
        seconds = window.duration_s
        metrics["request_throughput"] = int(ok.sum()) / seconds if seconds > 0 else math.nan
        metrics["output_throughput"] = float(out.sum()) / seconds if seconds > 0 else math.nan
        metrics["completed"] = float(ok.sum())
        metrics["failed"] = float((kept & ~ok).sum())
    else:
        metrics.update({key: float(whole_run.get(key, math.nan)) for key in COUNT_KEYS})
    return metrics, trimmed


def _statistic(stat: str, values: np.ndarray) -> float:
    if len(values) == 0:
        return math.nan
    if stat == "mean":
        return float(values.mean())
    if stat == "median":
        return float(np.median(values))
    return float(np.percentile(values, 99))


@dataclass
class PointRuns:
    """One point of the grid and what its runs gave."""

    name: str
    max_concurrency: int | None
    request_rate: float
    metrics: list[dict[str, float]] = field(default_factory=list)  # one per finished run
    trimmed: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # why runs failed, one line each


def summary_rows(points: Sequence[PointRuns], num_runs: int) -> list[dict[str, object]]:
    """summary.csv's rows, one per point: each metric (its mean across runs, and with repeats
    the 95 % t interval's ends), the runs that finished, the requests trimmed, the errors."""
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
        for key in METRIC_KEYS:
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
    """The console's table at the campaign's end: per point, runs finished, req/s, output
    tok/s, TTFT and ITL p99 (means across runs, ± the interval's half width with repeats)."""
    shown = ("request_throughput", "output_throughput", "p99_ttft_ms", "p99_itl_ms")
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
        value = row[key]
        return "-" if value == "" else f"{value:.2f}"
    mean, low, high = (row[f"{key}{s}"] for s in ("_mean_of_runs", "_ci95_t_low", "_ci95_t_high"))
    if mean == "":
        return "-"
    if low == "":
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {(high - low) / 2:.2f}"  # type: ignore[operator]

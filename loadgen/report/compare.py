"""``loadgen compare``: runs side by side, each metric's difference with a bootstrap confidence
interval from the runs' records, flagged where it is larger than the noise.

A side is one run's records, or several runs pooled (a folder of repeats). Every later side is
compared with the first. For each latency metric (TTFT, TPOT, ITL, E2EL: mean, median, p99) the
difference (side − first) is resampled: the requests of each side are drawn with replacement
(a request's ITLs travel together, so gaps of one stream are never split: a cluster bootstrap),
the statistic is recomputed on both, and the 2.5th and 97.5th percentiles of the differences
are the 95 % interval. A difference whose interval leaves out 0 is flagged: the two runs'
requests could not have produced it by chance alone. Throughputs are one figure per run: with a
single run a side there is nothing to resample, so they are shown without an interval. A run
with more than ITL_DRAW_LIMIT gaps draws its ITL interval from a random part of its requests.

Runs whose settings differ (``setting_differences``: every flag that shapes the traffic) are
still compared, with a warning naming the flags. A figure a side does not have (no request
succeeded) is shown as ``-``. The requests that did not complete are counted too (failed,
cancelled, not sent: loadgen/report/failures.py), without an interval.

A campaign's points compared point by point (loadgen/report/compare_campaigns.py) and result
JSONs without records (loadgen/report/compare_summaries.py) reuse these rows and this table.

Pure functions: the samples of a run, the bootstrap and the table, tested without sockets.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from loadgen.records.model import RunRecords
from loadgen.records.redact import redact_config
from loadgen.report.campaign_summary import counted_window
from loadgen.report.intervals import gather
from loadgen.report.metrics import tpot_of
from loadgen.report.run_summary import RunSummary
from loadgen.report.settings import TRAFFIC_FLAGS, stored_settings
from loadgen.report.summarize import summarize

CONFIDENCE = 0.95
# ITL intervals are drawn from at most this many gaps a side (whole requests picked at random):
# each draw of a 10,000-request run's 1.3 M gaps cost 75 ms. Fewer gaps give a wider interval,
# never a narrower one; the values shown are always those of every gap.
ITL_DRAW_LIMIT = 100_000
DEFAULT_RESAMPLES = 1000
SEED = 0
LATENCIES = ("ttft", "tpot", "itl", "e2el")
STATISTICS = ("mean", "median", "p99")
# The requests that did not complete, each side's total: (the row's name, Samples' field).
COUNTS = (("failed", "failed"), ("cancelled", "cancelled"), ("not sent", "not_sent"))


class Side(Protocol):
    """What the table says of a side: its name and how many runs it pools."""

    name: str
    runs: int


@dataclass
class Samples:
    """One side's per-request figures (seconds), successful requests only."""

    name: str
    ttft_s: np.ndarray
    tpot_s: np.ndarray  # requests with more than one output token
    e2el_s: np.ndarray
    itl_s: np.ndarray  # every gap, request-major
    itl_offsets: np.ndarray  # [R+1] request r owns itl_s[off[r]:off[r+1]]
    request_throughput: float
    output_throughput: float
    runs: int
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    not_sent: int = 0


@dataclass
class Row:
    """One metric compared: the first side's value, another's, the difference and its interval."""

    metric: str
    base: float
    other: float
    low: float  # the difference's interval; NaN where not resampled
    high: float
    count: bool = False  # a count of requests: shown whole

    @property
    def delta(self) -> float:
        """other − base."""
        return self.other - self.base

    @property
    def flagged(self) -> bool:
        """The interval leaves out 0: larger than the noise."""
        return not math.isnan(self.low) and (self.low > 0 or self.high < 0)


def samples_of(name: str, runs: Sequence[RunRecords]) -> Samples:
    """The figures of one side: its runs' successful requests pooled, each run summarized as
    its report summarizes it (a crashed run's outputs as its report counts them)."""
    return pooled_samples(name, [summarize(stored_settings(run, name), run) for run in runs])


def pooled_samples(
    name: str,
    summaries: Sequence[RunSummary],
    steady: bool = False,
    itl_sample: int | None = None,
) -> Samples:
    """The figures of one side from its runs' summaries: the successful requests pooled
    (``steady``: only those of each run's --steady-state window, as a campaign counts them).
    Every ITL is read into memory (a comparison's bootstrap draws from them all), unless
    ``itl_sample``: then at most that many of each run (``Timings.itl_sample``), one cluster,
    for a drawing."""
    ttft, tpot, e2el, itls, counts = [], [], [], [], []
    completed = output = 0
    duration = 0.0
    for summary in summaries:
        results, timings = summary.requests.results, summary.requests.timings
        ok = results.success  # as the report counts them (a success has a token event)
        window = counted_window(summary, steady) if steady else None
        if window is not None:
            ok = ok & window.kept
        ttft.append(timings.ttft_s[ok])
        e2el.append(timings.latency_s[ok])
        out = results.output_lens[ok]
        tpot.append(tpot_of(timings.ttft_s[ok], timings.latency_s[ok], out))
        if itl_sample is None:
            itls.append(timings.itl_values(ok))
            counts.append(np.diff(timings.itl_offsets)[ok])
        else:
            itls.append(timings.itl_sample(ok, itl_sample))
            counts.append(np.array([len(itls[-1])], np.int64))
        output += int(out.sum())
        if window is not None:
            completed += int(ok.sum())
            duration += window.duration_s
        else:
            completed += summary.totals.completed
            end_s = summary.requests.end_s
            duration += float(end_s.max()) if len(end_s) else 0.0
    sizes = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return Samples(
        name=name,
        ttft_s=np.concatenate(ttft) if ttft else np.zeros(0),
        tpot_s=np.concatenate(tpot) if tpot else np.zeros(0),
        e2el_s=np.concatenate(e2el) if e2el else np.zeros(0),
        itl_s=np.concatenate(itls) if itls else np.zeros(0),
        itl_offsets=offsets,
        request_throughput=completed / duration if duration > 0 else 0.0,
        output_throughput=output / duration if duration > 0 else 0.0,
        runs=len(summaries),
        completed=sum(s.totals.completed for s in summaries),
        failed=sum(s.totals.failed for s in summaries),
        cancelled=sum(s.totals.cancelled for s in summaries),
        not_sent=sum(s.totals.not_sent for s in summaries),
    )


def setting_differences(base: Sequence[RunRecords], other: Sequence[RunRecords]) -> list[str]:
    """``--flag A vs B`` for each traffic setting a run differs in, secrets as ``***``: each run
    of ``other`` against the base run in its place (run k against run k: a campaign's repeats
    each draw from a seed of their own, the same in two campaigns given one --seed; the last
    base run where ``other`` has more), and ``base``'s later runs against its first but for
    their seed."""
    configs = [redact_config(run.start.config) for run in base]
    pairs: list[tuple[dict[str, Any], dict[str, Any], tuple[str, ...]]] = [
        (configs[0], config, ("seed",)) for config in configs[1:]
    ]
    pairs += [
        (configs[min(k, len(configs) - 1)], redact_config(run.start.config), ())
        for k, run in enumerate(other)
    ]
    differ: dict[str, tuple[Any, Any]] = {}
    for first, config, skipped in pairs:
        for field, flag in TRAFFIC_FLAGS.items():
            if (
                flag not in differ
                and field not in skipped
                and config.get(field) != first.get(field)
            ):
                differ[flag] = (first.get(field), config.get(field))
    return [f"{flag} {_shown(a)} vs {_shown(b)}" for flag, (a, b) in differ.items()]


def _shown(value: Any, limit: int = 60) -> str:
    """A setting's value as a short text."""
    text = value if isinstance(value, str | float) else json.dumps(value, default=str)
    text = str(text)  # a float as Python writes it: inf, not JSON's Infinity
    return text if len(text) <= limit else text[: limit - 3] + "..."


# Each statistic of every row of a 2-D sample (the last axis): a batch of draws at once.
_OF_ROWS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mean": lambda x: np.mean(x, axis=-1),
    "median": lambda x: np.median(x, axis=-1),
    "p99": lambda x: np.percentile(x, 99, axis=-1),
}
# Values drawn at once when a side's requests are drawn by value: the draws go in batches of
# this many values (16 MB), not one by one (1,000 numpy calls per statistic and side).
BATCH_VALUES = 2_000_000


class Statistic:
    """``mean``, ``median`` or ``p99``: of a sample (NaN for an empty one), or of each row of
    a batch of resamples (``of_rows``)."""

    def __init__(self, name: str) -> None:
        if name not in _OF_ROWS:
            raise ValueError(f"unknown statistic {name!r}")
        self.name = name
        self.of_rows = _OF_ROWS[name]

    def __call__(self, x: np.ndarray) -> float:
        return float(self.of_rows(x)) if len(x) else math.nan


def statistic(name: str) -> Statistic:
    """``mean``, ``median`` or ``p99`` of a sample (NaN for an empty one)."""
    return Statistic(name)


def bootstrap_differences(
    base: np.ndarray,
    other: np.ndarray,
    stats: Sequence[Callable[[np.ndarray], float]],
    *,
    base_offsets: np.ndarray | None = None,
    other_offsets: np.ndarray | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = SEED,
) -> list[tuple[float, float]]:
    """For each of ``stats``, the 95 % percentile interval of ``stat(other) − stat(base)`` over
    ``resamples`` draws (each draw serves every statistic).

    With offsets, a sample is clusters (``x[off[r]:off[r+1]]`` is request r's) and requests are
    drawn, not values. NaN, NaN when a side is empty or ``resamples`` is 0.
    """
    if resamples <= 0 or not len(base) or not len(other):
        return [(math.nan, math.nan)] * len(stats)
    rng = np.random.default_rng(seed)
    batched = [stat for stat in stats if isinstance(stat, Statistic)]
    if base_offsets is None and other_offsets is None and len(batched) == len(stats):
        diffs = _batched_differences(base, other, batched, resamples, rng)
    else:
        draw_base = _drawer(base, base_offsets, rng)
        draw_other = _drawer(other, other_offsets, rng)
        diffs = np.empty((resamples, len(stats)))
        for k in range(resamples):
            a, b = draw_base(), draw_other()
            diffs[k] = [stat(b) - stat(a) for stat in stats]
    tail = 100 * (1 - CONFIDENCE) / 2
    intervals = []
    for column in diffs.T:
        column = column[~np.isnan(column)]
        if not len(column):
            intervals.append((math.nan, math.nan))
            continue
        low, high = np.percentile(column, [tail, 100 - tail])
        intervals.append((float(low), float(high)))
    return intervals


def _batched_differences(
    base: np.ndarray,
    other: np.ndarray,
    stats: Sequence[Statistic],
    resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``resamples`` draws by value of both sides, in batches (``BATCH_VALUES``): each
    statistic's difference per draw, [resamples, stats]."""
    diffs = np.empty((resamples, len(stats)))
    rows = max(1, BATCH_VALUES // max(len(base), len(other)))
    for start in range(0, resamples, rows):
        count = min(rows, resamples - start)
        a = base[rng.integers(0, len(base), (count, len(base)))]
        b = other[rng.integers(0, len(other), (count, len(other)))]
        for column, stat in enumerate(stats):
            diffs[start : start + count, column] = stat.of_rows(b) - stat.of_rows(a)
    return diffs


def requests_within(
    values: np.ndarray, offsets: np.ndarray, limit: int, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray]:
    """Whole requests, drawn at random without replacement, whose values add up to at most
    ``limit`` (all of them when they fit): the clusters and their offsets."""
    sizes = np.diff(offsets)
    if int(sizes.sum()) <= limit:
        return values, offsets
    order = np.random.default_rng(seed).permutation(len(sizes))
    kept = order[np.cumsum(sizes[order]) <= limit]
    return gather(values, offsets, kept), np.concatenate(([0], np.cumsum(sizes[kept])))


def _drawer(
    values: np.ndarray, offsets: np.ndarray | None, rng: np.random.Generator
) -> Callable[[], np.ndarray]:
    """A function returning one resample of ``values`` (by value, or by cluster)."""
    if offsets is None:
        return lambda: values[rng.integers(0, len(values), len(values))]
    clusters = len(offsets) - 1
    return lambda: gather(values, offsets, rng.integers(0, clusters, clusters))


def compare(base: Samples, other: Samples, resamples: int = DEFAULT_RESAMPLES) -> list[Row]:
    """Every metric of ``other`` against ``base``, latencies in ms."""
    rows = []
    stats = [statistic(name) for name in STATISTICS]
    for metric in LATENCIES:
        a, b = _sample(base, metric), _sample(other, metric)
        if metric == "itl":
            (draw_a, off_a), (draw_b, off_b) = (
                requests_within(base.itl_s, base.itl_offsets, ITL_DRAW_LIMIT),
                requests_within(other.itl_s, other.itl_offsets, ITL_DRAW_LIMIT),
            )
            intervals = bootstrap_differences(
                draw_a, draw_b, stats, base_offsets=off_a, other_offsets=off_b,
                resamples=resamples,
            )  # fmt: skip
        else:
            intervals = bootstrap_differences(a, b, stats, resamples=resamples)
        for name, stat, (low, high) in zip(STATISTICS, stats, intervals, strict=True):
            rows.append(
                Row(f"{name} {metric} (ms)", 1000 * stat(a), 1000 * stat(b),
                    1000 * low, 1000 * high)
            )  # fmt: skip
    rows.append(
        Row("request throughput (req/s)", base.request_throughput, other.request_throughput,
            math.nan, math.nan)
    )  # fmt: skip
    rows.append(
        Row("output throughput (tok/s)", base.output_throughput, other.output_throughput,
            math.nan, math.nan)
    )  # fmt: skip
    return rows + count_rows(base, other)


def count_rows(base: Samples, other: Samples) -> list[Row]:
    """The requests each side completed, and those that did not, by outcome (no interval)."""
    return [
        Row(name, float(getattr(base, field)), float(getattr(other, field)), math.nan,
            math.nan, count=True)
        for name, field in (("completed", "completed"), *COUNTS)
    ]  # fmt: skip


def _sample(samples: Samples, metric: str) -> np.ndarray:
    return {
        "ttft": samples.ttft_s,
        "tpot": samples.tpot_s,
        "itl": samples.itl_s,
        "e2el": samples.e2el_s,
    }[metric]


def table_lines(base: Side, others: Sequence[tuple[Side, list[Row]]]) -> list[str]:
    """The console table: one block per compared side."""
    lines = []
    for other, rows in others:
        lines.append(
            f"{other.name} against {base.name} ({other.runs} and {base.runs} run(s); "
            f"difference = {other.name} − {base.name}, {100 * CONFIDENCE:.0f} % bootstrap "
            "interval; * where it leaves out 0)"
        )
        lines += row_lines(rows)
    return lines


def row_lines(rows: Sequence[Row], indent: str = "  ") -> list[str]:
    """The rows of one comparison under their header: base, other, the difference, its share
    of the base, its interval (``-``: none) and the mark."""
    lines = [
        f"{indent}{'metric':<28}{'base':>11}{'other':>11}{'delta':>11}{'delta %':>9}"
        f"{'interval of delta':>24}"
    ]
    for row in rows:
        share = 100 * row.delta / row.base if row.base else math.nan
        interval = "-" if math.isnan(row.low) else f"[{row.low:.3g}, {row.high:.3g}]"
        mark = " *" if row.flagged else ""
        value, delta = (".0f", "+.0f") if row.count else (".3f", "+.3f")
        lines.append(
            f"{indent}{row.metric:<28}{_figure(row.base, value):>11}"
            f"{_figure(row.other, value):>11}{_figure(row.delta, delta):>11}"
            f"{_figure(share, '+.1f', '%'):>9}{interval:>24}{mark}"
        )
    return lines


def _figure(value: float, spec: str, unit: str = "") -> str:
    """A figure for the table; ``-`` where there is none (a side without a success)."""
    return f"{value:{spec}}{unit}" if math.isfinite(value) else "-"


def rows_json(base: Side, others: Sequence[tuple[Side, list[Row]]]) -> dict:
    """The comparison as JSON: per compared side, each metric's figures."""
    return {
        "base": base.name,
        "confidence": CONFIDENCE,
        "comparisons": [
            {"name": other.name, "metrics": metrics_json(rows)} for other, rows in others
        ],
    }


def metrics_json(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Each row's figures as JSON (null where a side has none; no interval: null)."""
    return [
        {
            "metric": row.metric,
            "base": _finite(row.base),
            "other": _finite(row.other),
            "delta": _finite(row.delta),
            "interval": None if math.isnan(row.low) else [_finite(row.low), _finite(row.high)],
            "flagged": row.flagged,
        }
        for row in rows
    ]


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None

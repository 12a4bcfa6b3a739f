"""The data behind report.html's figures: latency CDFs, throughput, in-flight, failures and
latency percentiles per time bin, the Pareto front of a campaign's points, and how a point is
labelled (the server's series: html_server.py).

Pure functions of numpy arrays (seconds in, the figures' units out), and of the token events
read a chunk of requests at a time (``EventSource``: tokens and ITL percentiles per bin);
loadgen/report/html_charts.py draws them. Each output is bounded (a CDF has at most
``max_points`` points, a time series ``TARGET_BINS`` bins), so a run of a million requests
makes a page of the same size as a run of a hundred.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from loadgen.records.event_source import EventSource
from loadgen.report.binned_percentiles import binned_percentiles
from loadgen.report.metrics import gaps_of_chunk

CDF_POINTS = 1000
CDF_ITL_SAMPLE = 1 << 20  # the ITL CDF draws at most this many gaps of a run (every k-th)
TARGET_BINS = 100
TAIL_SHARE = 0.01  # the top 1 % of a CDF's ranks get their own, log-spaced points
MIN_WIDTH_S = 1e-3
COMPLETIONS_PER_BIN = 5
LEAST_BINS = 10
FAILURE_LABELS = 5  # failures over time: the 5 most frequent kinds drawn apart, then "other"
OTHER_FAILURES = "other"
BANDS = (50.0, 90.0, 99.0)  # latency over time: these percentiles of each bin


def cdf_points(values: np.ndarray, max_points: int = CDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of the finite ``values``: (value, fraction of values at or below it),
    ascending. Every value when there are at most ``max_points``; else the values at evenly
    spaced ranks plus a quarter of the points log-spaced over the top 1 % of ranks (the tail a
    p99 lives in), the smallest and largest always kept."""
    ordered = np.sort(np.asarray(values, dtype=float)[np.isfinite(values)])
    n = len(ordered)
    if n <= max_points:
        ranks = np.arange(n)
    else:
        tail_points = max_points // 4
        even = np.rint(np.linspace(0, n - 1, max_points - tail_points)).astype(np.int64)
        from_top = np.rint(np.geomspace(1, max(1.0, n * TAIL_SHARE), tail_points)).astype(np.int64)
        ranks = np.unique(np.concatenate((even, n - from_top)))
    return ordered[ranks], (ranks + 1) / n if n else np.zeros(0)


def spans_decades(values: np.ndarray, decades: float = 2.0) -> bool:
    """Whether the positive finite ``values`` span at least ``decades`` powers of ten (the axis
    is then logarithmic)."""
    positive = np.asarray(values, dtype=float)
    positive = positive[np.isfinite(positive) & (positive > 0)]
    if len(positive) < 2:
        return False
    return bool(positive.max() / positive.min() >= 10**decades)


@dataclass(frozen=True)
class TimeBins:
    """Equal consecutive bins from t0 to a run's end: their edges (seconds) and width."""

    edges: np.ndarray  # [B+1]
    width_s: float

    @property
    def centers(self) -> np.ndarray:
        """Each bin's middle, where its value is drawn."""
        return (self.edges[:-1] + self.edges[1:]) / 2


def bin_count(completed: int, target: int = TARGET_BINS) -> int:
    """How many bins a run's time series gets: ``target``, fewer when the run has fewer than
    ``COMPLETIONS_PER_BIN`` completions a bin on average (at least ``LEAST_BINS``), so that a
    slow run's req/s is not a row of 0s and 1s."""
    return int(min(target, max(LEAST_BINS, completed // COMPLETIONS_PER_BIN)))


def time_bins(length_s: float, count: int = TARGET_BINS) -> TimeBins:
    """``count`` equal bins over ``[0, length_s]`` (one of 1 ms for a run of no length): no bin
    sticks out past the end, where a part-covered bin would make a rate jump."""
    if length_s <= 0:
        return TimeBins(np.array([0.0, MIN_WIDTH_S]), MIN_WIDTH_S)
    edges = np.linspace(0.0, length_s, count + 1)
    return TimeBins(edges, length_s / count)


def completions_per_s(end_s: np.ndarray, ok: np.ndarray, bins: TimeBins) -> np.ndarray:
    """Requests that finished successfully per second of each bin (by their end instant)."""
    counts, _ = np.histogram(np.asarray(end_s)[ok], bins=bins.edges)
    return counts / bins.width_s


def token_shares(event_offsets: np.ndarray, output_lens: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Each request's output tokens spread evenly over its token events: each event's share
    (0 for a failed request's, and for one without an event), so the bins add up to the run's
    total."""
    counts = np.diff(event_offsets)
    share = np.divide(output_lens, counts, out=np.zeros(len(counts)), where=counts > 0)
    return np.where(ok, share, 0.0)


def tokens_per_s_chunked(events: EventSource, shares: np.ndarray, bins: TimeBins) -> np.ndarray:
    """Output tokens per second of each bin, each event's share of its request's tokens
    (``token_shares``) counted at its arrival; the events (s) read a chunk of requests at a
    time, the bins' sums added chunk by chunk (a chart's line: no printed figure reads it)."""
    totals = np.zeros(len(bins.edges) - 1)
    counts_all = np.asarray(events.counts, dtype=np.int64)
    for first, end, values in events.chunks():
        weights = np.repeat(shares[first:end], counts_all[first:end])
        part, _ = np.histogram(values, bins=bins.edges, weights=weights)
        totals += part
    return totals / bins.width_s


def in_flight(
    send_s: np.ndarray, end_s: np.ndarray, bins: TimeBins
) -> tuple[np.ndarray, np.ndarray]:
    """Requests in flight (sent, not yet ended: ``[send, end)``) in each bin: the time-weighted
    mean over the bin, and the most at any instant of it."""
    starts = np.sort(np.asarray(send_s, dtype=float))
    ends = np.sort(np.asarray(end_s, dtype=float))
    mean = np.diff(_area_until(starts, ends, bins.edges)) / bins.width_s
    times = np.concatenate((starts, ends))
    steps = np.concatenate((np.ones(len(starts)), -np.ones(len(ends))))
    order = np.lexsort((steps, times))  # at one instant an end comes before a start
    times, level = times[order], np.cumsum(steps[order])
    peak = np.empty(len(bins.edges) - 1)
    for k, (low, high) in enumerate(zip(bins.edges[:-1], bins.edges[1:], strict=True)):
        # The level once every step at ``low`` is taken, then each level inside the bin (the
        # levels between one instant's steps are never above both of their neighbours).
        first, last = np.searchsorted(times, low, side="right"), np.searchsorted(times, high)
        at_start = level[first - 1] if first else 0.0
        peak[k] = max(at_start, level[first:last].max()) if last > first else at_start
    return mean, peak


def _area_until(starts: np.ndarray, ends: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The integral of the in-flight count from -inf to each instant of ``at`` (sorted
    ``starts`` and ``ends``): each started request adds ``t - start``, each ended one takes
    back ``t - end``."""
    started = np.searchsorted(starts, at, side="right")
    ended = np.searchsorted(ends, at, side="right")
    start_sums = np.concatenate(([0.0], np.cumsum(starts)))
    end_sums = np.concatenate(([0.0], np.cumsum(ends)))
    return (started * at - start_sums[started]) - (ended * at - end_sums[ended])


def pareto_front(throughput: Sequence[float], latency: Sequence[float]) -> list[int]:
    """The indices of the points no other point beats: none has at least their throughput and
    at most their latency with one of the two strictly better; by throughput, ascending. A
    point with a NaN is never on it."""
    valid = [
        i for i, (x, y) in enumerate(zip(throughput, latency, strict=True))
        if math.isfinite(x) and math.isfinite(y)
    ]  # fmt: skip
    front = []
    for i in valid:
        x, y = throughput[i], latency[i]
        beaten = any(
            throughput[j] >= x and latency[j] <= y and (throughput[j] > x or latency[j] < y)
            for j in valid
        )
        if not beaten:
            front.append(i)
    return sorted(front, key=lambda i: (throughput[i], -latency[i]))


def point_label(
    max_concurrency: int | None, request_rate: float, *, caps_vary: bool, rates_vary: bool
) -> str:
    """How a figure names a campaign's point: ``c=4`` (its --max-concurrency), ``r=20/s`` (its
    --request-rate), both when both vary, the concurrency (else the rate) when neither does."""
    cap = f"c={'none' if max_concurrency is None else max_concurrency}"
    rate = f"r={_number(request_rate)}/s"
    if caps_vary and rates_vary:
        return f"{cap} {rate}"
    if rates_vary or (not caps_vary and max_concurrency is None):
        return rate
    return cap


def _number(value: float) -> str:
    """20.0 as ``20``, 2.5 as ``2.5``, inf as ``inf``."""
    if math.isinf(value):
        return "inf"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def failures_per_s(
    end_s: np.ndarray, labels: Sequence[str], bins: TimeBins, listed: int = FAILURE_LABELS
) -> list[tuple[str, np.ndarray]]:
    """Requests that ended in failure per second of each bin (by their end instant), one series
    per label, most frequent first: the ``listed`` most frequent labels each on its own, the
    rest together as ``other``. A request labelled "" is left out (it completed, or was never
    sent and so has no instant); none at all gives no series."""
    chosen = np.array([label != "" for label in labels], dtype=bool)
    if not chosen.any():
        return []
    named = np.asarray(labels, dtype=object)[chosen]
    ends = np.asarray(end_s, dtype=float)[chosen]
    counted = sorted(Counter(named.tolist()).items(), key=lambda kind: (-kind[1], kind[0]))
    series = []
    for label, _ in counted[:listed]:
        counts, _ = np.histogram(ends[named == label], bins=bins.edges)
        series.append((label, counts / bins.width_s))
    rest = np.isin(named, [label for label, _ in counted[listed:]])
    if rest.any():
        counts, _ = np.histogram(ends[rest], bins=bins.edges)
        series.append((OTHER_FAILURES, counts / bins.width_s))
    return series


def percentile_bands(
    at_s: np.ndarray, values: np.ndarray, bins: TimeBins, quantiles: Sequence[float] = BANDS
) -> np.ndarray:
    """The ``quantiles`` (percent) of the ``values`` measured in each bin (by their instants
    ``at_s``), shape [bins, quantiles]; NaN where a bin has no value. The run's last instant
    falls in the last bin; instants outside the bins are left out."""
    at = np.asarray(at_s, dtype=float)
    value = np.asarray(values, dtype=float)
    count = len(bins.edges) - 1
    out = np.full((count, len(quantiles)), np.nan)
    kept = np.isfinite(at) & np.isfinite(value)
    at, value = at[kept], value[kept]
    index = np.searchsorted(bins.edges, at, side="right") - 1
    index[at == bins.edges[-1]] = count - 1
    inside = (index >= 0) & (index < count)
    index, value = index[inside], value[inside]
    order = np.argsort(index, kind="stable")
    index, value = index[order], value[order]
    starts = np.searchsorted(index, np.arange(count + 1))
    for k in range(count):
        if starts[k + 1] > starts[k]:
            out[k] = np.percentile(value[starts[k] : starts[k + 1]], quantiles)
    return out


def itl_bands(
    events: EventSource, ok: np.ndarray, bins: TimeBins, quantiles: Sequence[float] = BANDS
) -> np.ndarray:
    """``percentile_bands`` of the ``ok`` requests' ITLs (ms), each at the instant of its later
    token event, from the events (s) a chunk of requests at a time: each bin's percentiles
    exact (loadgen/report/binned_percentiles.py)."""
    count = len(bins.edges) - 1
    counts_all = np.asarray(events.counts, dtype=np.int64)

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for first, end, values in events.chunks():
            counts = counts_all[first:end]
            owner_ok = np.repeat(ok[first:end], np.maximum(counts - 1, 0))
            at = gaps_of_chunk(values, counts, later=True)[owner_ok]
            value = 1e3 * gaps_of_chunk(values, counts)[owner_ok]
            kept = np.isfinite(at) & np.isfinite(value)
            at, value = at[kept], value[kept]
            index = np.searchsorted(bins.edges, at, side="right") - 1
            index[at == bins.edges[-1]] = count - 1
            inside = (index >= 0) & (index < count)
            yield index[inside], value[inside]

    return binned_percentiles(chunks, count, quantiles)

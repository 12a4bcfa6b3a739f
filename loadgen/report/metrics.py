"""Benchmark metrics, computed with numpy from columnar per-request results.

Definitions follow ``vllm bench serve`` (reference §3.2). For request i released at r_i, sent at
s_i, with token-event instants e_i[0..m_i-1] (SSE events whose ``choices`` list is not empty):

    ttft_i    = e_i[0] - s_i                       (0 when it has no event)
    latency_i = e_i[m_i-1] - s_i                   (E2EL; 0 for a failed request)
    itl_i     = [e_i[k] - e_i[k-1] for k >= 1]     (one entry per SSE event, not per token)
    tpot_i    = (latency_i - ttft_i) / (out_i - 1) only for out_i > 1
    queue_i   = s_i - r_i                          (time spent waiting for a concurrency slot)

Aggregates use successful requests only: ITL is pooled over all of them; mean/median/std
(population, ddof=0) and percentiles (linear interpolation) are taken in seconds and
reported in ms; an empty sample gives 0 for every statistic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from loadgen.records.events import RequestOrderEvents
from loadgen.report.chunked_stats import Chunks, chunked_stats
from loadgen.report.stats import sample_stats

GOODPUT_METRICS = ("ttft", "tpot", "e2el")


@dataclass
class RequestResults:
    """What a run measured, one entry per request (index = request index); times in seconds."""

    success: np.ndarray  # bool [N]
    released_s: np.ndarray  # float64 [N], when its worker released it to be sent
    sent_s: np.ndarray  # float64 [N], when it was written to the connection
    event_s: np.ndarray  # float64 [E], token-event instants, request-major
    event_offsets: np.ndarray  # int64 [N+1]; request i owns event_s[off[i]:off[i+1]]
    prompt_lens: np.ndarray  # int64 [N]
    output_lens: np.ndarray  # int64 [N], after the usage/re-tokenization fallback; 0 if failed
    input_audio_s: np.ndarray | None = None  # float64 [N]: openai-audio's input_audio_duration

    @property
    def num_requests(self) -> int:
        """How many requests the run accounted for."""
        return len(self.success)


@dataclass
class Timings:
    """Per-request latencies derived from the instants (seconds)."""

    ttft_s: np.ndarray  # [N]
    latency_s: np.ndarray  # [N]
    queue_s: np.ndarray  # [N]
    itl_s: np.ndarray  # [E - N'] all inter-event gaps, request-major
    itl_offsets: np.ndarray  # [N+1]; request i owns itl_s[off[i]:off[i+1]]

    def itls_of(self, i: int) -> np.ndarray:
        """The inter-token latencies of request i."""
        return self.itl_s[self.itl_offsets[i] : self.itl_offsets[i + 1]]


@dataclass
class MetricStats:
    """mean, median, std and the selected percentiles of one metric, in milliseconds."""

    mean_ms: float
    median_ms: float
    std_ms: float
    percentiles_ms: list[tuple[float, float]]


@dataclass
class BenchmarkMetrics:
    """The aggregate figures of a generation run."""

    completed: int
    failed: int
    total_input: int
    total_output: int
    request_throughput: float
    request_goodput: float
    output_throughput: float
    total_token_throughput: float
    max_output_tokens_per_s: float
    max_concurrent_requests: int
    stats: dict[str, MetricStats] = field(default_factory=dict)
    rtfx: float = 0.0  # the successful requests' audio seconds per second of the run (ASR)


@dataclass
class PoolingMetrics:
    """The aggregate figures of a pooling run (upstream's EmbedBenchmarkMetrics)."""

    completed: int
    failed: int
    total_input: int
    total_input_sequences: int
    request_throughput: float
    input_sequence_throughput: float
    total_token_throughput: float
    stats: dict[str, MetricStats] = field(default_factory=dict)


def derive_timings(results: RequestResults) -> Timings:
    """TTFT, E2EL, queue time and ITLs of every request from its instants."""
    counts = np.diff(results.event_offsets)
    has_events = counts > 0
    first_idx = np.minimum(results.event_offsets[:-1], max(len(results.event_s) - 1, 0))
    last_idx = np.maximum(results.event_offsets[1:] - 1, 0)
    events = results.event_s if len(results.event_s) else np.zeros(1)
    ttft = np.where(has_events, events[first_idx] - results.sent_s, 0.0)
    latency = np.where(results.success & has_events, events[last_idx] - results.sent_s, 0.0)
    queue = results.sent_s - results.released_s

    # Gaps between consecutive events, dropping the ones that straddle two requests.
    gaps = np.diff(results.event_s)
    within = np.ones(len(gaps), dtype=bool)
    boundaries = results.event_offsets[1:-1]
    boundaries = boundaries[(boundaries > 0) & (boundaries < len(results.event_s))]
    within[boundaries - 1] = False
    itl_counts = np.maximum(counts - 1, 0)
    itl_offsets = np.concatenate(([0], np.cumsum(itl_counts))).astype(np.int64)
    return Timings(ttft, latency, queue, gaps[within], itl_offsets)


def latency_from_intended(
    results: RequestResults, scheduled_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """TTFT and E2EL of the successful requests counted from their scheduled (intended) send
    instant rather than the actual one, so client queueing and late sends are inside them: the
    coordinated-omission-free view of a paced run (wrk2's corrected latency)."""
    ok = results.success & (np.diff(results.event_offsets) > 0)
    first = results.event_s[results.event_offsets[:-1][ok]]
    last = results.event_s[results.event_offsets[1:][ok] - 1]
    return first - scheduled_s[ok], last - scheduled_s[ok]


def summarize(values_s: np.ndarray, percentiles: list[float]) -> MetricStats:
    """Statistics of one sample in ms, as upstream computes them (0 for an empty sample)."""
    s = sample_stats(values_s, percentiles, scale=1000)
    return MetricStats(
        mean_ms=s.mean, median_ms=s.median, std_ms=s.std, percentiles_ms=s.percentiles
    )


def tokens_per_second(send_s: np.ndarray, latency_s: np.ndarray, token_s: np.ndarray) -> np.ndarray:
    """Token events in each whole second since the first send (int64 counts).

    Buckets are b = int(t - min(send)) for b in [0, ceil(max(send + latency) - min(send)) + 1);
    every SSE event counts as one token, as upstream does. Successful requests only.
    """
    if len(send_s) == 0:
        return np.zeros(0, dtype=np.int64)
    origin = send_s.min()
    num_buckets = math.ceil((send_s + latency_s).max() - origin) + 1
    buckets = (token_s - origin).astype(np.int64)
    buckets = buckets[(buckets >= 0) & (buckets < num_buckets)]
    return np.bincount(buckets, minlength=num_buckets)


def peak_output_tokens_per_s(
    send_s: np.ndarray, latency_s: np.ndarray, token_s: np.ndarray
) -> float:
    """Largest count of token events in any whole second since the first send."""
    counts = tokens_per_second(send_s, latency_s, token_s)
    return float(counts.max()) if len(counts) else 0.0


def peak_concurrency(start_s: np.ndarray, end_s: np.ndarray) -> int:
    """Most requests in flight at once: a sweep over half-open intervals [start, end).

    At equal instants departures are counted before arrivals, so back-to-back requests
    do not overlap.
    """
    if len(start_s) == 0:
        return 0
    times = np.concatenate((start_s, end_s))
    deltas = np.concatenate((np.ones(len(start_s), np.int64), -np.ones(len(end_s), np.int64)))
    order = np.lexsort((deltas, times))
    return int(np.cumsum(deltas[order]).max())


def good_requests(
    ttft_s: np.ndarray, tpot_s: np.ndarray, e2el_s: np.ndarray, slos_ms: dict[str, float]
) -> int:
    """How many requests meet every SLO given (ms); tpot is 0 for requests with out <= 1."""
    ok = np.ones(len(ttft_s), dtype=bool)
    for name, values in (("ttft", ttft_s), ("tpot", tpot_s), ("e2el", e2el_s)):
        if name in slos_ms:
            ok &= values <= slos_ms[name] / 1000
    return int(ok.sum())


def latency_stats(
    latency_s: np.ndarray, queue_s: np.ndarray, percentiles: list[float]
) -> dict[str, MetricStats]:
    """E2EL, client queue time and their sum, over the same successful requests."""
    return {
        "e2el": summarize(latency_s, percentiles),
        "client_queue_time": summarize(queue_s, percentiles),
        "e2el_including_client_queue": summarize(latency_s + queue_s, percentiles),
    }


def tpot_of(ttft_s: np.ndarray, latency_s: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Each request's TPOT, (E2EL − TTFT) / (out − 1), for the requests with out > 1."""
    multi = out > 1
    return (latency_s[multi] - ttft_s[multi]) / (out[multi] - 1)


def calculate_metrics(
    results: RequestResults,
    timings: Timings,
    duration_s: float,
    percentiles: list[float],
    goodput_slos_ms: dict[str, float] | None = None,
) -> BenchmarkMetrics:
    """All aggregate metrics of a generation run; see the module docstring for definitions."""
    ok = results.success
    out = results.output_lens[ok]
    ttft = timings.ttft_s[ok]
    latency = timings.latency_s[ok]
    multi = out > 1
    tpot = tpot_of(ttft, latency, out)
    tpot_for_goodput = np.zeros(len(out))
    tpot_for_goodput[multi] = tpot

    counts = np.diff(results.event_offsets)
    event_owner_ok = np.repeat(ok, counts)
    itl_owner_ok = np.repeat(ok, np.maximum(counts - 1, 0))

    total_input = int(results.prompt_lens[ok].sum())
    total_output = int(results.output_lens.sum())
    completed = int(ok.sum())
    good = good_requests(ttft, tpot_for_goodput, latency, goodput_slos_ms or {})
    send_ok = results.sent_s[ok]
    queue_ok = timings.queue_s[ok]
    stats = {
        "ttft": summarize(ttft, percentiles),
        "tpot": summarize(tpot, percentiles),
        "itl": summarize(timings.itl_s[itl_owner_ok], percentiles),
        **latency_stats(latency, queue_ok, percentiles),
    }
    return BenchmarkMetrics(
        completed=completed,
        failed=results.num_requests - completed,
        total_input=total_input,
        total_output=total_output,
        request_throughput=completed / duration_s,
        request_goodput=good / duration_s,
        output_throughput=total_output / duration_s,
        total_token_throughput=(total_input + total_output) / duration_s,
        max_output_tokens_per_s=peak_output_tokens_per_s(
            send_ok, latency, results.event_s[event_owner_ok]
        ),
        max_concurrent_requests=peak_concurrency(send_ok, send_ok + latency),
        stats=stats,
        rtfx=(
            float(results.input_audio_s[ok].sum()) / duration_s
            if results.input_audio_s is not None
            else 0.0
        ),
    )


def calculate_pooling_metrics(
    results: RequestResults,
    timings: Timings,
    input_sequences: np.ndarray,
    duration_s: float,
    percentiles: list[float],
) -> PoolingMetrics:
    """The aggregate metrics of a pooling run: counts, throughputs and E2EL (its only timing;
    a pooling answer's single instant makes TTFT equal to it)."""
    ok = results.success
    latency = timings.latency_s[ok]
    queue_ok = timings.queue_s[ok]
    completed = int(ok.sum())
    total_input = int(results.prompt_lens[ok].sum())
    total_sequences = int(input_sequences[ok].sum())
    return PoolingMetrics(
        completed=completed,
        failed=results.num_requests - completed,
        total_input=total_input,
        total_input_sequences=total_sequences,
        request_throughput=completed / duration_s,
        input_sequence_throughput=total_sequences / duration_s,
        total_token_throughput=total_input / duration_s,
        stats=latency_stats(latency, queue_ok, percentiles),
    )


# --- the same figures from a records file, a bounded chunk of requests at a time -------------


def event_bounds_s(events: RequestOrderEvents) -> tuple[np.ndarray, np.ndarray]:
    """Each request's first and last token-event instant (s after t0; NaN without one), the
    two per-request figures TTFT and E2EL read, from the file in chunks."""
    first = np.full(len(events.counts), np.nan)
    last = np.full(len(events.counts), np.nan)
    for start, end, event_ns in events.chunks():
        counts = events.counts[start:end]
        has = counts > 0
        ends = np.cumsum(counts)
        event_s = event_ns / 1e9
        first[start:end][has] = event_s[(ends - counts)[has]]
        last[start:end][has] = event_s[ends[has] - 1]
    return first, last


def timings_from_bounds(
    results: RequestResults, first_s: np.ndarray, last_s: np.ndarray
) -> Timings:
    """``derive_timings``' TTFT, E2EL and queue time from each request's first and last event
    (its ITLs are left to ``itl_chunks``: the Timings hold none)."""
    has_events = ~np.isnan(first_s)
    ttft = np.where(has_events, first_s - results.sent_s, 0.0)
    latency = np.where(results.success & has_events, last_s - results.sent_s, 0.0)
    queue = results.sent_s - results.released_s
    counts = np.diff(results.event_offsets)
    itl_offsets = np.concatenate(([0], np.cumsum(np.maximum(counts - 1, 0)))).astype(np.int64)
    return Timings(ttft, latency, queue, np.zeros(0), itl_offsets)


def itl_chunks(events: RequestOrderEvents, kept: np.ndarray, max_events: int = 1 << 20) -> Chunks:
    """The ITLs of the ``kept`` requests, request-major as ``derive_timings`` lays them out
    (each a difference of instants in seconds), a chunk of requests at a time."""

    def chunks() -> Iterator[np.ndarray]:
        for start, end, event_ns in events.chunks(max_events):
            counts = events.counts[start:end]
            gaps = np.diff(event_ns / 1e9)
            within = np.ones(len(gaps), dtype=bool)
            boundaries = np.cumsum(counts)[:-1]
            boundaries = boundaries[(boundaries > 0) & (boundaries < len(event_ns))]
            within[boundaries - 1] = False
            owner_kept = np.repeat(kept[start:end], np.maximum(counts - 1, 0))
            yield gaps[within][owner_kept]

    return chunks


def peak_output_tokens_per_s_chunked(
    events: RequestOrderEvents, ok: np.ndarray, send_ok: np.ndarray, latency_ok: np.ndarray
) -> float:
    """``peak_output_tokens_per_s`` of the successful requests, counting their token events
    per whole second a chunk of requests at a time."""
    if len(send_ok) == 0:
        return 0.0
    origin = send_ok.min()
    num_buckets = math.ceil((send_ok + latency_ok).max() - origin) + 1
    counts = np.zeros(num_buckets, np.int64)
    for start, end, event_ns in events.chunks():
        owner_ok = np.repeat(ok[start:end], events.counts[start:end])
        buckets = (event_ns[owner_ok] / 1e9 - origin).astype(np.int64)
        buckets = buckets[(buckets >= 0) & (buckets < num_buckets)]
        counts += np.bincount(buckets, minlength=num_buckets)
    return float(counts.max()) if len(counts) else 0.0


def itl_stats_chunked(
    events: RequestOrderEvents, ok: np.ndarray, percentiles: list[float]
) -> MetricStats:
    """``summarize`` of the successful requests' ITLs, read from the file in chunks, equal to
    the in-memory figure to the last bit (loadgen/report/chunked_stats.py)."""
    s = chunked_stats(itl_chunks(events, ok), percentiles, scale=1000)
    return MetricStats(
        mean_ms=s.mean, median_ms=s.median, std_ms=s.std, percentiles_ms=s.percentiles
    )

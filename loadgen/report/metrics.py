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

The token events are read a bounded chunk of requests at a time (``EventSource``: the run's
records file), never laid out whole: per request only its first and last instant are read;
the ITLs are statistics of chunks (loadgen/report/chunked_stats.py), to the last bit numpy's
on the whole array.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from loadgen.records.event_source import CHUNK_EVENTS, ArrayEvents, EventSource
from loadgen.report.chunked_stats import ChunkedSample, Chunks
from loadgen.report.stats import SampleStats, sample_stats

GOODPUT_METRICS = ("ttft", "tpot", "e2el")


@dataclass
class RequestResults:
    """What a run measured, one entry per request (index = request index); times in seconds."""

    success: np.ndarray  # bool [N]
    released_s: np.ndarray  # float64 [N], when its worker released it to be sent
    sent_s: np.ndarray  # float64 [N], when it was written to the connection
    # Token-event instants (s), request-major, when held in memory (tests); empty when
    # ``events`` is given. Read them through ``event_source`` only.
    event_s: np.ndarray
    event_offsets: np.ndarray  # int64 [N+1]; request i's events are [off[i], off[i+1])
    prompt_lens: np.ndarray  # int64 [N]
    output_lens: np.ndarray  # int64 [N], after the usage/re-tokenization fallback; 0 if failed
    input_audio_s: np.ndarray | None = None  # float64 [N]: openai-audio's input_audio_duration
    events: EventSource | None = None  # the token-event instants (s) a chunk at a time

    def __post_init__(self) -> None:
        if self.events is None:
            self.events = ArrayEvents(self.event_s, self.event_offsets)

    @property
    def event_source(self) -> EventSource:
        """The token-event instants in seconds after t0, a chunk of requests at a time."""
        assert self.events is not None  # __post_init__ sets it
        return self.events

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
    itl_offsets: np.ndarray  # [N+1]; request i's ITLs are [off[i], off[i+1]) request-major
    events: EventSource  # the token-event instants (s) the ITLs are read from, chunk by chunk
    # Each request's first and last token-event instant (s; NaN without one), when known
    bounds_s: tuple[np.ndarray, np.ndarray] | None = None

    def itl_chunks(self, kept: np.ndarray | None = None, max_events: int = CHUNK_EVENTS) -> Chunks:
        """The ITLs of the ``kept`` requests (all without it), request-major, a chunk of
        requests at a time: each the difference of two instants in seconds."""
        return itl_chunks(self.events, kept, max_events)

    def itl_values(self, kept: np.ndarray | None = None) -> np.ndarray:
        """The ITLs of the ``kept`` requests laid out whole: only for the views whose figures
        need every value at once (a campaign's bootstrap, ``loadgen compare``) and tests."""
        parts = list(self.itl_chunks(kept)())
        return np.concatenate(parts) if parts else np.zeros(0)

    def itl_sample(self, kept: np.ndarray, limit: int) -> np.ndarray:
        """Every k-th ITL of the ``kept`` requests (request-major), k the least that keeps at
        most ``limit``: a fixed-size sample for a drawing (a CDF's line), never a figure."""
        total = int(np.diff(self.itl_offsets)[kept].sum())
        step = max(1, -(-total // limit))
        parts, seen = [], 0
        for chunk in self.itl_chunks(kept)():
            parts.append(chunk[(-seen) % step :: step])
            seen += len(chunk)
        return np.concatenate(parts) if parts else np.zeros(0)

    def itl_lists(self) -> list[np.ndarray]:
        """Each request's ITLs, in request order: every value held, for --save-detailed's
        ``itls``, --plot-timeline and calibrate, whose output lists them all."""
        values = self.itl_values()
        return [
            values[a:b] for a, b in zip(self.itl_offsets[:-1], self.itl_offsets[1:], strict=True)
        ]

    def itls_of(self, i: int) -> np.ndarray:
        """The inter-token latencies of request i (reads its events)."""
        kept = np.zeros(len(self.ttft_s), bool)
        kept[i] = True
        return self.itl_values(kept)


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
    """TTFT, E2EL, queue time of every request from its instants (each request's first and
    last, ``EventSource.ends``), and where its ITLs are read from."""
    first_s, last_s = event_bounds_s(results.event_source)
    has_events = ~np.isnan(first_s)
    ttft = np.where(has_events, first_s - results.sent_s, 0.0)
    latency = np.where(results.success & has_events, last_s - results.sent_s, 0.0)
    queue = results.sent_s - results.released_s
    counts = np.asarray(results.event_source.counts, dtype=np.int64)
    itl_offsets = np.concatenate(([0], np.cumsum(np.maximum(counts - 1, 0)))).astype(np.int64)
    return Timings(ttft, latency, queue, itl_offsets, results.event_source, (first_s, last_s))


def latency_from_intended(
    results: RequestResults,
    scheduled_s: np.ndarray,
    bounds_s: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """TTFT and E2EL of the successful requests counted from their scheduled (intended) send
    instant rather than the actual one, so client queueing and late sends are inside them: the
    coordinated-omission-free view of a paced run (wrk2's corrected latency). ``bounds_s``:
    each request's first and last event (``Timings.bounds_s``), else read from the events."""
    ok = results.success & (np.diff(results.event_offsets) > 0)
    first, last = bounds_s if bounds_s is not None else event_bounds_s(results.event_source)
    return first[ok] - scheduled_s[ok], last[ok] - scheduled_s[ok]


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

    total_input = int(results.prompt_lens[ok].sum())
    total_output = int(results.output_lens.sum())
    completed = int(ok.sum())
    good = good_requests(ttft, tpot_for_goodput, latency, goodput_slos_ms or {})
    send_ok = results.sent_s[ok]
    queue_ok = timings.queue_s[ok]
    # The tokens per second are counted in the ITLs' first pass over the events.
    tokens = TokensPerSecond(results.event_source.counts, ok, send_ok, latency)
    stats = {
        "ttft": summarize(ttft, percentiles),
        "tpot": summarize(tpot, percentiles),
        "itl": itl_summary(timings, ok, percentiles, first_pass=tokens),
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
        max_output_tokens_per_s=tokens.peak(),
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


# --- the figures of the token events, read a bounded chunk of requests at a time ------------


def event_bounds_s(events: EventSource) -> tuple[np.ndarray, np.ndarray]:
    """Each request's first and last token-event instant (NaN without one), the two
    per-request figures TTFT and E2EL read (``EventSource.ends``: no pass over the events)."""
    has = np.asarray(events.counts) > 0
    first, last = events.ends()
    return np.where(has, first, np.nan), np.where(has, last, np.nan)


def gaps_of_chunk(values: np.ndarray, counts: np.ndarray, later: bool = False) -> np.ndarray:
    """The gaps between consecutive events of each request of a chunk (``counts`` events
    each, request-major), those that straddle two requests left out; ``later``: instead of
    each gap, the later of its two events (the instant it was measured)."""
    gaps = values[1:] if later else np.diff(values)
    within = np.ones(len(gaps), dtype=bool)
    boundaries = np.cumsum(counts)[:-1]
    boundaries = boundaries[(boundaries > 0) & (boundaries < len(values))]
    within[boundaries - 1] = False
    return gaps[within]


def itl_chunks(
    events: EventSource, kept: np.ndarray | None = None, max_events: int = CHUNK_EVENTS
) -> Chunks:
    """The ITLs of the ``kept`` requests (all without it), request-major as ``Timings`` lays
    them out, a chunk of requests at a time."""
    counts_all = np.asarray(events.counts, dtype=np.int64)

    def chunks() -> Iterator[np.ndarray]:
        for start, end, values in events.chunks(max_events):
            counts = counts_all[start:end]
            gaps = gaps_of_chunk(values, counts)
            if kept is None:
                yield gaps
            else:
                yield gaps[np.repeat(kept[start:end], np.maximum(counts - 1, 0))]

    return chunks


def itl_summary(
    timings: Timings,
    kept: np.ndarray,
    percentiles: list[float],
    first_pass: ChunkReader | None = None,
) -> MetricStats:
    """``summarize`` of the ``kept`` requests' ITLs, from chunks, equal to the in-memory
    figure to the last bit (loadgen/report/chunked_stats.py)."""
    s = itl_stats(timings, kept, percentiles, first_pass)
    return MetricStats(
        mean_ms=s.mean, median_ms=s.median, std_ms=s.std, percentiles_ms=s.percentiles
    )


# Reads each chunk of a pass over the events: first request, end request, their events.
ChunkReader = Callable[[int, int, np.ndarray], None]


def itl_stats(
    timings: Timings,
    kept: np.ndarray,
    percentiles: list[float],
    first_pass: ChunkReader | None = None,
) -> SampleStats:
    """``sample_stats`` of the ``kept`` requests' ITLs in ms, from chunks: two passes over the
    events where their values allow (their count is known from the counts: the sum, max and
    first bucket counts, then the squares and the ranks' values). ``first_pass`` reads the
    first pass's chunks too, so that it needs no pass of its own."""
    events = timings.events
    counts = np.asarray(events.counts, dtype=np.int64)
    kept = np.asarray(kept, dtype=bool)
    sample = ChunkedSample(percentiles, int(np.maximum(counts - 1, 0)[kept].sum()))
    every = bool(kept.all())
    reader = first_pass
    while (itls := sample.wants_pass()) or reader is not None:
        if itls:
            sample.begin()
        for start, end, values in events.chunks():
            if reader is not None:
                reader(start, end, values)
            if itls:
                sample.add(kept_gaps(values, counts[start:end], None if every else kept[start:end]))
        if itls:
            sample.end()
        reader = None
    return sample.stats(1000, 0.0)


def kept_gaps(values: np.ndarray, counts: np.ndarray, kept: np.ndarray | None) -> np.ndarray:
    """The ITLs of a chunk's ``kept`` requests (all of them for None), request-major: the
    gaps of ``gaps_of_chunk`` with one mask."""
    gaps = np.diff(values)
    if not len(gaps):
        return gaps
    inside = np.ones(len(gaps), dtype=bool) if kept is None else np.repeat(kept, counts)[1:]
    boundaries = np.cumsum(counts)[:-1]
    inside[boundaries[(boundaries > 0) & (boundaries < len(values))] - 1] = False
    return gaps[inside]


class TokensPerSecond:
    """``tokens_per_second`` of the successful requests (``ok``), counted from the events a
    chunk at a time as a pass goes (integer counts: equal to the whole array's)."""

    def __init__(
        self, counts: np.ndarray, ok: np.ndarray, send_ok: np.ndarray, latency_ok: np.ndarray
    ) -> None:
        self.event_counts = np.asarray(counts, dtype=np.int64)
        self.ok = ok
        self.every = bool(ok.all())
        self.origin = send_ok.min() if len(send_ok) else 0.0
        buckets = math.ceil((send_ok + latency_ok).max() - self.origin) + 1 if len(send_ok) else 0
        self.counts = np.zeros(buckets, np.int64)

    def __call__(self, start: int, end: int, values: np.ndarray) -> None:
        """The events of requests start..end (s)."""
        if not len(self.counts):
            return
        if not self.every:
            values = values[np.repeat(self.ok[start:end], self.event_counts[start:end])]
        buckets = (values - self.origin).astype(np.int64)
        if not len(buckets):
            return
        low, high = int(buckets.min()), int(buckets.max())
        if low < 0 or high >= len(self.counts):
            buckets = buckets[(buckets >= 0) & (buckets < len(self.counts))]
            high = len(self.counts) - 1
        self.counts[: high + 1] += np.bincount(buckets, minlength=high + 1)

    def peak(self) -> float:
        """The most tokens counted in one second."""
        return float(self.counts.max()) if len(self.counts) else 0.0


def tokens_per_second_chunked(
    events: EventSource, ok: np.ndarray, send_ok: np.ndarray, latency_ok: np.ndarray
) -> np.ndarray:
    """``tokens_per_second`` of the successful requests, their token events counted per whole
    second a chunk of requests at a time (integer counts: equal to the whole array's)."""
    tokens = TokensPerSecond(events.counts, ok, send_ok, latency_ok)
    if len(tokens.counts):
        for start, end, values in events.chunks():
            tokens(start, end, values)
    return tokens.counts

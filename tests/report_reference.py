"""The report's figures that read token events, computed the in-memory way, for parity tests.

``reference_summary`` is ``summarize``'s summary of a run with every figure that reads token
events recomputed as the report computed it before it read them in chunks: every event laid
out whole (``materialized``), then numpy over the whole arrays (TTFT and E2EL by index, every
ITL in one array, the peak second by one bincount, percentiles by ``np.percentile``). A test
renders both summaries (result JSON, console, request rows) and compares them byte for byte:
any figure the chunked path got wrong differs.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from loadgen.records.event_source import ArrayEvents, materialized
from loadgen.records.model import RunRecords
from loadgen.report.conversations import conversation_figures
from loadgen.report.metrics import (
    MetricStats,
    Timings,
    good_requests,
    peak_concurrency,
    peak_output_tokens_per_s,
    tpot_of,
)
from loadgen.report.metrics import summarize as metric_summary
from loadgen.report.run_summary import RunSummary, Settings
from loadgen.report.steady import campaign_statistics, window_metrics
from loadgen.report.summarize import summarize
from loadgen.report.verdict import RunScale, not_judged, verdict


@dataclasses.dataclass
class WholeTimings:
    """A run's timings from its events laid out whole (the former ``derive_timings``)."""

    event_s: np.ndarray
    offsets: np.ndarray
    ttft_s: np.ndarray
    latency_s: np.ndarray
    itl_s: np.ndarray
    itl_offsets: np.ndarray


def whole_timings(event_ns: np.ndarray, offsets: np.ndarray, sent_s, success) -> WholeTimings:
    """TTFT, E2EL and every ITL by indexing the whole request-major arrays."""
    event_s = event_ns / 1e9
    counts = np.diff(offsets)
    has_events = counts > 0
    first_idx = np.minimum(offsets[:-1], max(len(event_s) - 1, 0))
    last_idx = np.maximum(offsets[1:] - 1, 0)
    events = event_s if len(event_s) else np.zeros(1)
    ttft = np.where(has_events, events[first_idx] - sent_s, 0.0)
    latency = np.where(success & has_events, events[last_idx] - sent_s, 0.0)
    gaps = np.diff(event_s)
    within = np.ones(len(gaps), dtype=bool)
    boundaries = offsets[1:-1]
    boundaries = boundaries[(boundaries > 0) & (boundaries < len(event_s))]
    within[boundaries - 1] = False
    itl_offsets = np.concatenate(([0], np.cumsum(np.maximum(counts - 1, 0)))).astype(np.int64)
    return WholeTimings(event_s, offsets, ttft, latency, gaps[within], itl_offsets)


def reference_summary(settings: Settings, run: RunRecords) -> RunSummary:
    """``summarize(settings, run)`` with each figure read from token events computed in
    memory over the whole arrays."""
    summary = summarize(settings, run)
    requests, results = summary.requests, summary.requests.results
    event_ns, offsets = materialized(requests.events)
    ok = results.success
    whole = whole_timings(event_ns, offsets, results.sent_s, ok)
    percentiles = list(settings.percentiles)
    timings = Timings(
        whole.ttft_s,
        whole.latency_s,
        requests.timings.queue_s,
        whole.itl_offsets,
        ArrayEvents(whole.event_s, offsets),
    )
    itl_ok = whole.itl_s[np.repeat(ok, np.diff(whole.itl_offsets))]
    ttft, latency, out = whole.ttft_s[ok], whole.latency_s[ok], results.output_lens[ok]
    queue = timings.queue_s[ok]
    stats: dict[str, MetricStats] = {
        "ttft": metric_summary(ttft, percentiles),
        "tpot": metric_summary(tpot_of(ttft, latency, out), percentiles),
        "itl": metric_summary(itl_ok, percentiles),
        "e2el": metric_summary(latency, percentiles),
        "client_queue_time": metric_summary(queue, percentiles),
        "e2el_including_client_queue": metric_summary(latency + queue, percentiles),
    }
    send_ok = results.sent_s[ok]
    owner_ok = np.repeat(ok, np.diff(offsets))
    totals = summary.totals
    if not settings.pooling:
        tpot_goodput = np.zeros(len(out))
        tpot_goodput[out > 1] = tpot_of(ttft, latency, out)
        good = good_requests(ttft, tpot_goodput, latency, dict(settings.goodput or {}))
        totals = dataclasses.replace(
            totals,
            max_output_tokens_per_s=peak_output_tokens_per_s(
                send_ok, latency, whole.event_s[owner_ok]
            ),
            max_concurrent_requests=peak_concurrency(send_ok, send_ok + latency),
            request_goodput=good / totals.duration if settings.goodput else None,
        )
    intended = summary.intended
    if intended is not None:
        has = ok & (np.diff(offsets) > 0)
        scheduled_s = requests.scheduled_ns / 1e9
        first = whole.event_s[offsets[:-1][has]] - scheduled_s[has]
        last = whole.event_s[offsets[1:][has] - 1] - scheduled_s[has]
        samples = {"e2el": last} if settings.pooling else {"ttft": first, "e2el": last}
        intended = {k: metric_summary(x, percentiles) for k, x in samples.items()}
    client = _client(summary, run, whole, itl_ok)
    steady = summary.steady
    if steady is not None:
        metrics = window_metrics(
            results,
            timings,
            steady.window.kept,
            steady.window.duration_s,
            pooling=settings.pooling,
            percentiles=settings.percentiles,
            goodput=settings.goodput,
            outcome=summary.errors.outcome,
            not_sent=float(summary.totals.not_sent),
        )
        kept_ok = steady.window.kept & ok & (np.diff(offsets) > 0)
        values_ms = whole.itl_s[np.repeat(kept_ok, np.diff(whole.itl_offsets))] * 1000.0
        for stat in campaign_statistics(settings.percentiles):
            metrics[f"{stat}_itl_ms"] = _statistic(stat, values_ms)
        steady = dataclasses.replace(steady, metrics=steady.metrics | metrics)
    return dataclasses.replace(
        summary,
        latencies={name: stats[name] for name in summary.latencies},
        totals=totals,
        intended=intended,
        client=client,
        steady=steady,
        multi_turn=conversation_figures(run, timings),
        requests=dataclasses.replace(
            requests, timings=timings, events=ArrayEvents(event_ns, offsets)
        ),
    )


def _client(summary: RunSummary, run: RunRecords, whole: WholeTimings, itl_ok: np.ndarray):
    """The verdict with the scale's medians from the whole arrays."""
    results, settings = summary.requests.results, summary.settings
    ok = results.success & (np.diff(whole.offsets) > 0)
    first = (whole.latency_s if settings.pooling else whole.ttft_s)[ok]
    health = summary.client.health
    scale = RunScale(
        itl_ms=_median_ms(itl_ok) if not settings.pooling else None,
        ttft_ms=_median_ms(first),
        ttft_name=health.scale.ttft_name,
        arrival_gap_ms=health.scale.arrival_gap_ms,
    )
    health = dataclasses.replace(health, scale=scale)
    judged = verdict(health) if run.end is not None else not_judged(health)
    return dataclasses.replace(summary.client, health=health, verdict=judged)


def _median_ms(values_s: np.ndarray) -> float | None:
    return float(np.median(values_s)) * 1000 if len(values_s) else None


def _statistic(stat: str, values: np.ndarray) -> float:
    if len(values) == 0:
        return math.nan
    if stat == "mean":
        return float(values.mean())
    if stat == "median":
        return float(np.median(values))
    return float(np.percentile(values, float(stat[1:])))

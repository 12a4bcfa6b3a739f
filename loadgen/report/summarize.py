"""``summarize(settings, run) -> RunSummary``: a run's report computed once from its records.

A function of plain data (the run's ``Settings`` and ``RunRecords``): no socket, no clock, no
formatting, so the live run and ``loadgen report RECORDS`` summarize the same way and every view
renders the same figures. Just over 500 lines because ``summarize`` is the one place a
``RunSummary`` is assembled from the figure modules it calls; split, its parts would only pass
each other the run.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime
from typing import Any

import numpy as np

from loadgen.records.event_source import ScaledEvents
from loadgen.records.model import RunEnd, RunRecords, per_request
from loadgen.records.server_series import MetricSeries
from loadgen.report.conversations import conversation_figures
from loadgen.report.decoding import (
    diffusion_stats,
    parse_diffusion,
    parse_spec_decode,
    spec_decode_stats,
)
from loadgen.report.failures import (
    CANCELLED,
    FAILED,
    NOT_SENT,
    OUTCOMES,
    kinds_of_failed,
    outcomes,
)
from loadgen.report.metric_table import LATENCIES
from loadgen.report.metrics import (
    BenchmarkMetrics,
    PoolingMetrics,
    RequestResults,
    Timings,
    calculate_metrics,
    calculate_pooling_metrics,
    derive_timings,
    itl_stats,
    latency_from_intended,
)
from loadgen.report.metrics import summarize as sample_summary
from loadgen.report.output_lens import resolve_output_lens
from loadgen.report.prefix_cache import prefix_cache_hits
from loadgen.report.probes import ProbeResults, probe_stats
from loadgen.report.run_context import run_context
from loadgen.report.run_summary import (
    Client,
    Connections,
    Decoding,
    Ending,
    Errors,
    Identity,
    Requests,
    RunSummary,
    Settings,
    Steady,
    TimeBound,
    Totals,
)
from loadgen.report.server_figures import figure_keys, server_figures, window_keys
from loadgen.report.stats import sample_stats
from loadgen.report.steady import sent_by_deadline, timed_window, window_metrics
from loadgen.report.verdict import RunScale, not_judged, server_note, verdict
from loadgen.report.verdict import measure as client_health
from loadgen.schedule import rps_change_events
from loadgen.schedule_blocks import block_seeds
from workers.protocol import CANCELLED_AT_DEADLINE, NOT_SENT_PREFIX, ConnectionStats


def summarize(settings: Settings, run: RunRecords) -> RunSummary:
    """The summary of a run's records under its settings. A run that never ended (the records
    of a crash) is summarized as interrupted, with what its records hold; ``gates`` is left
    empty (the result JSON judges them: ``run_report.build_report``)."""
    prepared = run.num_requests
    run = sent_by_deadline(run)  # --duration: the requests its deadline left unsent go
    end = run_end(run, settings.pooling)
    records = run.records
    results = request_results(run, end)
    ends = records["end_ns"]
    duration_s = max(float(ends.max()) / 1e9 if len(ends) else 0.0, 1e-9)
    timings = derive_timings(results)  # no pass over the events; ITLs are read in chunks
    metrics: BenchmarkMetrics | PoolingMetrics
    percentiles = list(settings.percentiles)
    if settings.pooling:
        metrics = calculate_pooling_metrics(
            results, timings, run.input_sequences, duration_s, percentiles
        )
    else:
        metrics = calculate_metrics(
            results, timings, duration_s, percentiles, goodput_slos_ms=settings.goodput
        )
    rate = paced_rate(settings, run.scheduled_ns)
    errors = per_request(run.errors, run.num_requests)
    outcome = outcomes(records["success"].astype(bool), errors)
    itl_median_ms = (
        metrics.stats["itl"].median_ms
        if isinstance(metrics, BenchmarkMetrics) and _itl_count(results, timings)
        else None
    )
    health = _client(settings, run, end, results, timings, rate, itl_median_ms)
    hits = prefix_cache_hits(
        records["cached_tokens"], results.prompt_lens, run.start.counters_before, end.counters_after
    )
    totals = with_outcomes(totals_of(settings, metrics, duration_s), outcome)
    if hits is not None and not settings.pooling:
        totals = dataclasses.replace(totals, prefix_cache_hit_rate=hits.hit_rate)
    summary = RunSummary(
        settings=settings,
        identity=Identity(
            model_id=run.start.model_id,
            tokenizer_id=run.start.tokenizer_id,
            loadgen_version=run.start.loadgen_version,
            num_workers=run.start.num_workers,
            schedule_sha256=run.start.schedule_sha256,
            t0_s=run.start.t0_ns / 1e9,
            t0_wall=run.start.t0_wall,
            context=run_context(run.start),
        ),
        totals=totals,
        latencies={name: metrics.stats[name] for name in reported_metrics(settings)},
        intended=_intended(settings, results, timings, run.scheduled_ns, rate),
        connections=Connections(
            stats=end.connection_stats,
            new_during_run=sample_stats(
                records["connect_ns"][records["connect_ns"] > 0] / 1e6, [50, 99]
            ),
            truncated_streams=int(records["truncated"].sum()),
            text_capped=int(records["text_capped"].sum()),
        ),
        errors=Errors(errors, kinds_of_failed(outcome, errors), outcome),
        decoding=_decoding(run, end, duration_s),
        probes=(
            probe_stats(ProbeResults(end.probe_latencies_s, end.probe_failures))
            if end.probe_latencies_s is not None
            else None
        ),
        client=health,
        ending=Ending(end.interrupted, end.worker_problems, end.hosts),
        multi_turn=conversation_figures(run, timings),
        rps_change_events=_rps_change_events(
            settings, run.scheduled_ns, datetime.fromisoformat(run.start.t0_wall)
        ),
        requests=Requests(
            results=results,
            timings=timings,
            generated_texts=per_request(run.texts, run.num_requests),
            server_queue_s=records["server_queue_s"],
            server_ttft_s=records["server_ttft_s"],
            end_s=ends / 1e9,
            rows=records,
            worker=run.worker,
            scheduled_ns=run.scheduled_ns,
            events=run.event_source,
        ),
        gates=[],
        steady=_steady(settings, results, timings, ends / 1e9, outcome),
        time_bound=_time_bound(settings, prepared, run),
        prefix_cache=hits,
    )
    return with_server(summary, run.server_metrics)


def with_server(summary: RunSummary, series: list[MetricSeries] | None) -> RunSummary:
    """The summary with the server's figures from the series scraped during the run
    (report/server_figures.py: the totals', and the steady window's over it), its sentence
    after the client's verdict, and the series; the same summary when none was scraped."""
    if not series:
        return summary
    keys = figure_keys(server_figures(series, run_s=summary.totals.duration))
    steady = summary.steady
    if steady is not None:
        window = steady.window
        in_window = window_keys(series, window.start_s, window.end_s)
        steady = dataclasses.replace(steady, metrics=steady.metrics | in_window)
    client = summary.client
    note = server_note(
        keys["server_queued_pct"],
        keys["server_waiting_peak"],
        keys["server_kv_cache_peak_pct"],
        keys["server_preemptions"],
    )
    if note is not None:
        client = dataclasses.replace(client, verdict=f"{client.verdict} | {note}")
    return dataclasses.replace(
        summary,
        totals=dataclasses.replace(
            summary.totals,
            server_kv_cache_mean_pct=keys["server_kv_cache_mean_pct"],
            server_kv_cache_peak_pct=keys["server_kv_cache_peak_pct"],
            server_waiting_peak=keys["server_waiting_peak"],
            server_queued_pct=keys["server_queued_pct"],
            server_preemptions=keys["server_preemptions"],
            server_prefix_cache_hit_rate=keys["server_prefix_cache_hit_rate"],
        ),
        steady=steady,
        client=client,
        server_series=series,
    )


def _time_bound(settings: Settings, prepared: int, run: RunRecords) -> TimeBound | None:
    """What --duration's deadline did to the run; None without --duration."""
    if settings.duration is None:
        return None
    cancelled = sum(error == CANCELLED_AT_DEADLINE for error in run.errors.values())
    block = settings.duration_block
    not_sent = prepared - run.num_requests
    sent_s = run.records["sent_ns"] / 1e9
    unpaced = math.isinf(settings.request_rate) or settings.self_timed
    # (a run that did not end, its records file torn, ran out of nothing it can tell of)
    ended = run.end is not None
    ran_out = not_sent == 0 and unpaced and ended and bool((sent_s >= 0).any())
    otherwise = sum(error.startswith(NOT_SENT_PREFIX) for error in run.errors.values())
    return TimeBound(
        settings.duration,
        settings.duration_grace_s,
        prepared,
        not_sent,
        cancelled,
        float(sent_s.max()) if ran_out else None,
        block,
        None if block is None else block_seeds(settings.seed, prepared, block),
        otherwise,
    )


def _steady(
    settings: Settings,
    results: RequestResults,
    timings: Timings,
    end_s: np.ndarray,
    outcome: np.ndarray,
) -> Steady | None:
    """The steady window of --warmup-s and --cooldown-s and its figures; None without them."""
    warmup_s, cooldown_s = settings.warmup_s, settings.cooldown_s
    if not warmup_s and not cooldown_s:
        return None
    sent = results.sent_s >= 0
    window = timed_window(results.sent_s, end_s, sent, warmup_s, cooldown_s)
    metrics = window_metrics(
        results,
        timings,
        window.kept,
        window.duration_s,
        pooling=settings.pooling,
        percentiles=settings.percentiles,
        goodput=settings.goodput,
        outcome=outcome,
        not_sent=float((outcome == NOT_SENT).sum()),  # never in a window: the run's own count
    )
    return Steady(warmup_s, cooldown_s, window, metrics)


def totals_of(
    settings: Settings, metrics: BenchmarkMetrics | PoolingMetrics, duration_s: float
) -> Totals:
    """The metric table's figures of the run."""
    common: dict[str, Any] = {
        "duration": duration_s,
        "completed": metrics.completed,
        "failed": metrics.failed,
        "total_input_tokens": metrics.total_input,
        "request_throughput": metrics.request_throughput,
        "total_token_throughput": metrics.total_token_throughput,
    }
    if isinstance(metrics, PoolingMetrics):
        return Totals(
            **common,
            total_input_sequences=metrics.total_input_sequences,
            input_sequence_throughput=metrics.input_sequence_throughput,
        )
    return Totals(
        **common,
        total_output_tokens=metrics.total_output,
        request_goodput=metrics.request_goodput if settings.goodput else None,
        output_throughput=metrics.output_throughput,
        max_output_tokens_per_s=metrics.max_output_tokens_per_s,
        max_concurrent_requests=metrics.max_concurrent_requests,
        rtfx=metrics.rtfx,
    )


def reported_metrics(settings: Settings) -> list[str]:
    """The selected latencies that are reported, in the metric table's order (upstream's) and
    under upstream's conditions: TTFT, TPOT and ITL only for generation with a tokenizer; the
    client's queue only with --max-concurrency (and queue-inclusive E2EL at a finite rate)."""
    selected = set(settings.metrics)
    with_tokens = not settings.pooling and settings.tokenizer
    concurrency = settings.max_concurrency is not None
    paced = not math.isinf(settings.request_rate)
    return [
        latency.key
        for latency in LATENCIES
        if latency.key in selected
        and (with_tokens or not latency.tokens)
        and (concurrency or not latency.concurrency)
        and (paced or not latency.paced)
    ]


def with_outcomes(totals: Totals, outcome: np.ndarray) -> Totals:
    """The totals with the requests that did not complete counted by outcome: upstream's
    ``failed`` the failed alone, the cancelled and the not sent apart."""
    counts = np.bincount(outcome, minlength=len(OUTCOMES))
    return dataclasses.replace(
        totals,
        failed=int(counts[FAILED]),
        cancelled=int(counts[CANCELLED]),
        not_sent=int(counts[NOT_SENT]),
    )


def _intended(
    settings: Settings,
    results: RequestResults,
    timings: Timings,
    scheduled_ns: np.ndarray,
    rate: float | None,
) -> dict[str, Any] | None:
    """TTFT and E2EL from the scheduled send instant of a paced run (E2EL only for pooling,
    whose answer has one instant: its TTFT is its E2EL); None for an unpaced run."""
    if rate is None:
        return None
    ttft_s, e2el_s = latency_from_intended(results, scheduled_ns / 1e9, timings.bounds_s)
    samples = {"e2el": e2el_s} if settings.pooling else {"ttft": ttft_s, "e2el": e2el_s}
    return {k: sample_summary(x, list(settings.percentiles)) for k, x in samples.items()}


def _decoding(run: RunRecords, end: RunEnd, duration_s: float) -> Decoding:
    before, after = run.start.counters_before, end.counters_after
    return Decoding(
        spec_decode=spec_decode_stats(
            *(parse_spec_decode(page) if page else None for page in (before, after))
        ),
        diffusion=diffusion_stats(
            parse_diffusion(before) if before else None,
            parse_diffusion(after) if after else None,
            duration_s,
        ),
    )


def _client(
    settings: Settings,
    run: RunRecords,
    end: RunEnd,
    results: RequestResults,
    timings: Timings,
    rate: float | None,
    itl_median_ms: float | None = None,
) -> Client:
    """The client's health over the run and its verdict (not judged for a run that never
    ended); ``itl_median_ms``: the successful requests' median ITL (None without one)."""
    records = run.records
    released = records["released_ns"] >= 0
    send_lag_ms = (records["released_ns"][released] - run.scheduled_ns[released]) / 1e6
    health = client_health(
        send_lag_ms,
        end.loop_lag_ns,
        end.worker_cpu_ns,
        end.worker_wall_ns,
        rate or math.inf,
        scale=run_scale(
            results,
            timings,
            run.scheduled_ns,
            pooling=settings.pooling,
            paced=rate is not None,
            itl_median_ms=itl_median_ms,
        ),
        host=end.host,
        first_token_s=first_tokens_s(results, timings),
    )
    judged = verdict(health) if run.end is not None else not_judged(health)
    return Client(health, sample_stats(send_lag_ms, [50, 99]), judged)


def first_tokens_s(results: RequestResults, timings: Timings) -> np.ndarray:
    """The successful requests' first-token instants (s from t0), for the verdict's closed loop."""
    counts = np.diff(results.event_offsets)
    ok = results.success & (counts > 0)
    return (results.sent_s + timings.ttft_s)[ok]


def run_end(run: RunRecords, pooling: bool) -> RunEnd:
    """The run's end as its records hold it, or, for a run whose records stop short, the end
    its report assumes (``unfinished_end``)."""
    return run.end if run.end is not None else unfinished_end(run, pooling)


def request_results(run: RunRecords, end: RunEnd) -> RequestResults:
    """What the metrics read of a run: its rows' instants and counts, the prompt as the server
    counted it where it did, the output as the run's end counted it."""
    records = run.records
    prompt_lens = np.where(
        records["prompt_tokens"] >= 0, records["prompt_tokens"], run.input_tokens
    ).astype(np.int64)
    return RequestResults(
        success=records["success"].astype(bool),
        released_s=records["released_ns"] / 1e9,
        sent_s=records["sent_ns"] / 1e9,
        event_s=np.zeros(0),
        event_offsets=run.event_offsets,
        prompt_lens=prompt_lens,
        output_lens=end.output_lens,
        input_audio_s=run.input_audio_s,
        events=ScaledEvents(run.event_source, 1e9),  # each chunk as event_ns / 1e9 gives it
    )


def unfinished_end(run: RunRecords, pooling: bool) -> RunEnd:
    """The end of a run whose records stop short (it crashed): interrupted, the client's own
    figures unknown, each output counted from the server's usage (1 without one, as upstream
    counts without a tokenizer)."""
    return RunEnd(
        interrupted=True,
        worker_problems=["the run did not end: its records file stops before the end"],
        worker_cpu_ns=[],
        worker_wall_ns=[],
        connection_stats=ConnectionStats(),
        loop_lag_ns=np.zeros(0, np.int64),
        output_lens=(
            np.zeros(run.num_requests, np.int64)
            if pooling
            else resolve_output_lens(run.records, run.texts, None)
        ),
        counters_after=None,
        probe_latencies_s=None,
    )


def paced_rate(settings: Settings, scheduled_ns: np.ndarray) -> float | None:
    """The highest rate the schedule paces requests at (its send lag is then judged), or None
    for an unpaced run (everything due at once): a finite --request-rate, a ramp-up's end rate,
    or a self-timed trace's mean rate."""
    if settings.self_timed:
        span_s = float(scheduled_ns[-1]) / 1e9
        return len(scheduled_ns) / span_s if span_s > 0 else None
    if settings.ramp_up_strategy is not None:
        return float(settings.ramp_up_end_rps or 0) or None
    rate = settings.request_rate
    return None if math.isinf(rate) else rate


def _rps_change_events(
    settings: Settings, scheduled_ns: np.ndarray, t0_wall: datetime
) -> list[dict[str, Any]] | None:
    """Upstream's ``rps_change_events`` of a ramp-up run, stamped from the schedule; else None
    (a ramp-up without both rates is refused before a run: validate())."""
    strategy, start_rps, end_rps = (
        settings.ramp_up_strategy,
        settings.ramp_up_start_rps,
        settings.ramp_up_end_rps,
    )
    if strategy is None or start_rps is None or end_rps is None:
        return None
    return rps_change_events(strategy, start_rps, end_rps, scheduled_ns / 1e9, t0_wall)


def run_scale(
    results: RequestResults,
    timings: Timings,
    scheduled_ns: np.ndarray,
    *,
    pooling: bool,
    paced: bool,
    itl_median_ms: float | None = None,
) -> RunScale:
    """The medians the verdict weighs the client's delay against, in ms: ITL and TTFT of the
    successful requests (E2EL for pooling, whose answer has one instant), and a paced run's
    median gap between scheduled arrivals. ``itl_median_ms``: the ITL's, when the metrics
    have it (the events are read once more, in chunks, when they do not)."""
    ok = results.success
    counts = np.diff(results.event_offsets)
    if itl_median_ms is None and not pooling and _itl_count(results, timings):
        itl_median_ms = itl_stats(timings, ok, []).median
    first_s = (timings.latency_s if pooling else timings.ttft_s)[ok & (counts > 0)]
    gaps_s = np.diff(np.sort(scheduled_ns)) / 1e9 if paced else np.zeros(0)
    return RunScale(
        itl_ms=itl_median_ms if not pooling else None,
        ttft_ms=_median_ms(first_s),
        ttft_name="E2EL" if pooling else "TTFT",
        arrival_gap_ms=_median_ms(gaps_s),
    )


def _itl_count(results: RequestResults, timings: Timings) -> int:
    """How many ITLs the successful requests have."""
    return int(np.diff(timings.itl_offsets)[results.success].sum())


def _median_ms(values_s: np.ndarray) -> float | None:
    return float(np.median(values_s)) * 1000 if len(values_s) else None


def with_gates(summary: RunSummary, gates: list[str]) -> RunSummary:
    """The summary with the --fail-on conditions its result JSON breaches."""
    return dataclasses.replace(summary, gates=gates)

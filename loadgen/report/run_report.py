"""A run's report from its records: the console summary, the plots and the result JSON.

``build_report`` is a function of plain data (the configuration and ``RunRecords``); it opens
no socket and reads no clock, so the live run and ``loadgen report RECORDS`` build the same
report. ``write_report`` shows it and writes its files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.config import RunConfig, parse_itl_thresholds
from loadgen.records.model import RunEnd, RunRecords
from loadgen.report.conversations import conversation_figures, conversation_lines
from loadgen.report.decoding import (
    diffusion_stats,
    parse_diffusion,
    parse_spec_decode,
    spec_decode_stats,
)
from loadgen.report.gates import breaches
from loadgen.report.hosts import host_lines
from loadgen.report.metrics import (
    BenchmarkMetrics,
    PoolingMetrics,
    RequestResults,
    Timings,
    calculate_metrics,
    calculate_pooling_metrics,
    derive_timings,
    latency_from_intended,
    summarize,
)
from loadgen.report.output_lens import resolve_output_lens
from loadgen.report.plots import (
    timeline_segments,
    write_dataset_stats_png,
    write_timeline_html,
)
from loadgen.report.probes import ProbeResults, probe_stats
from loadgen.report.result_json import build_result, result_path, stats_json, write_result
from loadgen.report.run_context import run_context
from loadgen.report.stats import SampleStats, sample_stats
from loadgen.report.summary import (
    connection_notes,
    failure_preamble,
    intended_lines,
    plot_lines,
    reported_metrics,
    summary_lines,
    text_capped_note,
    truncated_note,
)
from loadgen.report.verdict import RunScale, not_judged, verdict
from loadgen.report.verdict import measure as client_health
from loadgen.schedule import rps_change_events
from workers.protocol import ConnectionStats


@dataclass
class Report:
    """A run's report, built and not yet shown: the console lines, the result JSON (when the
    flags ask for one) and what the plots are drawn from."""

    lines: list[str]
    result: dict[str, Any] | None
    path: str  # the result file's path (upstream's name, or --result-filename)
    results: RequestResults
    timings: Timings
    completed: int
    first_error: str
    caveat: str | None  # why the report covers only part of the run, if it does
    breaches: list[str]  # the --fail-on gates the result breaches, one line each
    verdict: str  # the client's verdict, the console's last line and the JSON's last key


def run_end(run: RunRecords, pooling: bool) -> RunEnd:
    """The run's end as its records hold it, or, for a run whose records stop short, the end
    its report assumes (``unfinished_end``)."""
    return run.end if run.end is not None else unfinished_end(run, pooling)


def request_results(run: RunRecords, end: RunEnd) -> RequestResults:
    """What the metrics read of a run: its rows' instants and counts, the prompt as the server
    counted it where it did, the output as the run's end counted it."""
    records = run.records
    prompt_lens = np.where(
        records["prompt_tokens"] >= 0, records["prompt_tokens"], run.prompt_lens
    ).astype(np.int64)
    return RequestResults(
        success=records["success"].astype(bool),
        arrival_s=records["arrival_ns"] / 1e9,
        send_s=records["send_ns"] / 1e9,
        event_s=run.event_ns / 1e9,
        event_offsets=run.event_offsets,
        prompt_lens=prompt_lens,
        output_lens=end.output_lens,
        audio_s=run.audio_s,
    )


def build_report(config: RunConfig, run: RunRecords, *, date: str) -> Report:
    """The report of a run's records: the console summary and the result JSON.

    ``date`` stamps the result (upstream's ``%Y%m%d-%H%M%S``). A run that never ended (the
    records of a crash) is reported as interrupted, with what its records hold.
    """
    end = run_end(run, config.pooling)
    start = run.start
    records = run.records
    num_requests = run.num_requests
    results = request_results(run, end)
    ends = records["end_ns"]
    duration_s = max(float(ends.max()) / 1e9 if len(ends) else 0.0, 1e-9)
    timings = derive_timings(results)
    errors = [run.errors.get(i, "") for i in range(num_requests)]
    lines: list[str] = []
    metrics: BenchmarkMetrics | PoolingMetrics
    if config.pooling:  # upstream prints neither failures nor a plot for pooling
        metrics = calculate_pooling_metrics(
            results, timings, run.input_sequences, duration_s, config.percentiles()
        )
    else:
        metrics = calculate_metrics(
            results, timings, duration_s, config.percentiles(), goodput_slos_ms=config.goodput
        )
        lines += failure_preamble([e for e in errors if e])
        lines += plot_lines(results, timings)
    metric_names = reported_metrics(config)
    counters = (start.counters_before, end.counters_after)
    before, after = counters
    decoding = (
        spec_decode_stats(*(parse_spec_decode(page) if page else None for page in counters)),
        diffusion_stats(
            parse_diffusion(before) if before else None,
            parse_diffusion(after) if after else None,
            duration_s,
        ),
    )
    probe = (
        probe_stats(ProbeResults(end.probe_latencies_s, end.probe_failures))
        if end.probe_latencies_s is not None
        else None
    )
    lines += summary_lines(config, metrics, duration_s, metric_names, probe, decoding)
    rate = paced_rate(config, run.scheduled_ns)
    from_intended = None
    if rate is not None:
        ttft_s, e2el_s = latency_from_intended(results, run.scheduled_ns / 1e9)
        # A pooling answer has one instant: its TTFT is its E2EL, so only E2EL is shown.
        samples = {"e2el": e2el_s} if config.pooling else {"ttft": ttft_s, "e2el": e2el_s}
        intended = {k: summarize(x, config.percentiles()) for k, x in samples.items()}
        lines += intended_lines(intended)
        from_intended = {k: stats_json(stats) for k, stats in intended.items()}
    connect = sample_stats(records["connect_ns"][records["connect_ns"] > 0] / 1e6, [50, 99])
    if connect.count:
        lines.append(
            f"note: {connect.count} requests opened a new connection during the run "
            f"(p50 {connect.median:.2f} ms, max {connect.max:.2f} ms), "
            "inside their TTFT"
        )
    stats = end.connection_stats
    lines += connection_notes(stats)
    truncated = int(records["truncated"].sum())
    lines += truncated_note(truncated)
    text_capped = int(records["text_capped"].sum())
    lines += text_capped_note(text_capped)

    sent = records["arrival_ns"] >= 0
    send_lag_ms = (records["arrival_ns"][sent] - run.scheduled_ns[sent]) / 1e6
    health = client_health(
        send_lag_ms,
        end.loop_lag_ns,
        end.worker_cpu_ns,
        end.worker_wall_ns,
        rate or math.inf,
        scale=run_scale(
            results, timings, run.scheduled_ns, pooling=config.pooling, paced=rate is not None
        ),
        host=end.host,
    )
    client_verdict = verdict(health) if run.end is not None else not_judged(health)
    conversations = conversation_figures(run, timings)
    lines += conversation_lines(conversations)
    lines += host_lines(end.hosts)
    lines.append(client_verdict)
    loadgen_extra = {
        "version": start.loadgen_version,
        "workers": start.num_workers,
        "connections_preopened": stats.preopened_at_t0,
        "connections_closed_before_use": stats.closed_before_use,
        "resent_on_stale_connection": stats.resent,
        "truncated_streams": truncated,
        "text_capped": text_capped,
        "connection_reuse_stopped": stats.reuse_stopped,
        "schedule_sha256": start.schedule_sha256,
        "send_lag_ms": _p50_p99_max(sample_stats(send_lag_ms, [50, 99])),
        "from_intended": from_intended,  # None unless the run was paced
        "new_connections_during_run": {
            "count": connect.count,
            "connect_ms": _p50_p99_max(connect),
        },
        "worker_problems": end.worker_problems,
        "hosts": end.hosts,
        "multi_turn": conversations,  # None unless --multi-turn
        "interrupted": end.interrupted,
        "client": health.to_json(),
        **run_context(start),
        "verdict": client_verdict,  # last, so the result JSON ends with it
    }
    path = result_path(config, start.model_id, date)
    result = None
    if config.save_result or config.append_result or config.fail_on:
        result = build_result(
            config=config,
            date=date,
            model_id=start.model_id,
            tokenizer_id=start.tokenizer_id,
            duration_s=duration_s,
            metrics=metrics,
            results=results,
            timings=timings,
            start_origin_s=start.t0_ns / 1e9,
            errors=errors,
            generated_texts=[run.texts.get(i, "") for i in range(num_requests)],
            metric_names=metric_names,
            loadgen_extra=loadgen_extra,
            rps_change_events=_rps_change_events(
                config, run.scheduled_ns, datetime.fromisoformat(start.t0_wall)
            ),
            probe=probe,
            decoding=decoding,
            server_metrics=(records["server_queue_s"], records["server_ttft_s"]),
        )
    breached = breaches(config.fail_on, result) if result is not None else []
    return Report(
        lines=lines,
        result=result if config.save_result or config.append_result else None,
        path=path,
        results=results,
        timings=timings,
        completed=metrics.completed,
        first_error=next((e for e in errors if e), ""),
        caveat=_caveat(end),
        breaches=breached,
        verdict=client_verdict,
    )


def _caveat(end: RunEnd) -> str | None:
    """Why the report covers only part of the run: its workers' problems, or an interruption."""
    if end.worker_problems:
        return "; ".join(end.worker_problems)
    if end.interrupted:
        return "the run was interrupted: the results cover the requests that finished"
    return None


def write_report(config: RunConfig, report: Report) -> None:
    """Print the report and write the plots and the result file the flags ask for."""
    for line in report.lines:
        print(line)
    if config.plot_timeline or config.plot_dataset_stats:  # upstream draws before it saves
        _plot(config, Path(report.path), report.results, report.timings)
    if report.result is not None:
        write_result(report.path, report.result, append=config.append_result)
        print(f"Results written to {report.path}")


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


def _plot(config: RunConfig, path: Path, results: RequestResults, timings: Timings) -> None:
    """--plot-timeline and --plot-dataset-stats beside the result file; a figure that cannot be
    drawn is a warning, as upstream, and the results are still written."""
    path.parent.mkdir(parents=True, exist_ok=True)  # --result-dir, as for the result file
    if config.plot_timeline:
        timeline = path.with_suffix(".timeline.html")
        if config.pooling:
            print("warning: --plot-timeline draws token timings; a pooling run has none")
        else:
            try:
                segments = timeline_segments(
                    results.send_s,
                    timings.ttft_s,
                    [timings.itls_of(i).tolist() for i in range(results.num_requests)],
                    results.prompt_lens,
                    results.output_lens,
                    parse_itl_thresholds(config.timeline_itl_thresholds),
                )
                write_timeline_html(
                    segments, timeline, parse_itl_thresholds(config.timeline_itl_thresholds)
                )
                print(f"Timeline plot saved to: {timeline}")
            except Exception as exc:  # a figure is not worth the results
                print(f"warning: Failed to generate timeline plot: {exc}")
    if config.plot_dataset_stats:
        stats = path.with_suffix(".dataset_stats.png")
        try:
            write_dataset_stats_png(results.prompt_lens, results.output_lens, stats)
            print(f"Dataset statistics plot saved to: {stats}")
        except Exception as exc:
            print(f"warning: Failed to generate dataset statistics plot: {exc}")


def paced_rate(config: RunConfig, scheduled_ns: np.ndarray) -> float | None:
    """The highest rate the schedule paces requests at (its send lag is then judged), or None
    for an unpaced run (everything due at once): a finite --request-rate, a ramp-up's end rate,
    or a self-timed trace's mean rate."""
    if config.self_timed_trace:
        span_s = float(scheduled_ns[-1]) / 1e9
        return len(scheduled_ns) / span_s if span_s > 0 else None
    if config.ramp_up_strategy is not None:
        return float(config.ramp_up_end_rps or 0) or None
    return None if math.isinf(config.request_rate) else config.request_rate


def _rps_change_events(
    config: RunConfig, scheduled_ns: np.ndarray, t0_wall: datetime
) -> list[dict[str, Any]] | None:
    """Upstream's ``rps_change_events`` of a ramp-up run, stamped from the schedule; else None."""
    if config.ramp_up_strategy is None:
        return None
    return rps_change_events(
        config.ramp_up_strategy,
        config.ramp_up_start_rps,
        config.ramp_up_end_rps,
        scheduled_ns / 1e9,
        t0_wall,
    )


def run_scale(
    results: RequestResults,
    timings: Timings,
    scheduled_ns: np.ndarray,
    *,
    pooling: bool,
    paced: bool,
) -> RunScale:
    """The medians the verdict weighs the client's delay against, in ms: ITL and TTFT of the
    successful requests (E2EL for pooling, whose answer has one instant), and a paced run's
    median gap between scheduled arrivals."""
    ok = results.success
    counts = np.diff(results.event_offsets)
    itl_s = timings.itl_s[np.repeat(ok, np.maximum(counts - 1, 0))]
    first_s = (timings.latency_s if pooling else timings.ttft_s)[ok & (counts > 0)]
    gaps_s = np.diff(np.sort(scheduled_ns)) / 1e9 if paced else np.zeros(0)
    return RunScale(
        itl_ms=_median_ms(itl_s) if not pooling else None,
        ttft_ms=_median_ms(first_s),
        ttft_name="E2EL" if pooling else "TTFT",
        arrival_gap_ms=_median_ms(gaps_s),
    )


def _median_ms(values_s: np.ndarray) -> float | None:
    return float(np.median(values_s)) * 1000 if len(values_s) else None


def _p50_p99_max(stats: SampleStats) -> dict[str, float]:
    """p50, p99 and max of a sample's statistics as JSON keys (zeros when it is empty)."""
    return {"p50": stats.at(50), "p99": stats.at(99), "max": stats.max}

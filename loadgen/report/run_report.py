"""A run's report from what it collected: the console summary, the plots and the result JSON.

``report_run`` is a function of plain data (the workers' records, the configuration and what
preparation knew); it opens no socket and reads no clock, so the same report can be rebuilt
from saved records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from loadgen import __version__
from loadgen.config import RunConfig, parse_itl_thresholds
from loadgen.payloads import input_sequences
from loadgen.report.collected import Collected
from loadgen.report.decoding import (
    diffusion_stats,
    parse_diffusion,
    parse_spec_decode,
    spec_decode_stats,
)
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
from loadgen.report.plots import (
    timeline_segments,
    write_dataset_stats_png,
    write_timeline_html,
)
from loadgen.report.result_json import build_result, result_path, stats_json, write_result
from loadgen.report.stats import SampleStats, sample_stats
from loadgen.report.summary import (
    connection_notes,
    failure_preamble,
    intended_lines,
    plot_lines,
    reported_metrics,
    summary_lines,
)
from loadgen.report.verdict import measure as client_health
from loadgen.report.verdict import verdict
from loadgen.schedule import rps_change_events, schedule_hash


@dataclass
class RunMeta:
    """What preparation knew of the run that the records do not say."""

    model_id: str  # tokenizer / model identity, as upstream's model_id
    tokenizer_id: str | None  # None with --skip-tokenizer-init
    prompts: list[Any]
    prompt_lens: np.ndarray  # the dataset's counts, used where the server reported none
    scheduled_ns: np.ndarray
    num_workers: int


@dataclass
class Outcome:
    """What the caller needs of the report to choose the exit code."""

    completed: int
    first_error: str


def report_run(
    config: RunConfig,
    meta: RunMeta,
    collected: Collected,
    output_lens: np.ndarray,
    *,
    date: str,
    t0_wall: datetime,
    probe: dict[str, Any] | None = None,
    counters: tuple[str | None, str | None] = (None, None),
) -> Outcome:
    """Print the console summary and write the plots and result file the flags ask for.

    ``date`` stamps the result (upstream's ``%Y%m%d-%H%M%S``), ``t0_wall`` is the wall-clock
    instant of t0 (for ramp-up's ``rps_change_events``), ``counters`` the server's /metrics
    pages before and after the run.
    """
    records = collected.records
    num_requests = len(meta.prompts)
    prompt_lens = np.where(
        records["prompt_tokens"] >= 0, records["prompt_tokens"], meta.prompt_lens
    ).astype(np.int64)
    results = RequestResults(
        success=records["success"].astype(bool),
        arrival_s=records["arrival_ns"] / 1e9,
        send_s=records["send_ns"] / 1e9,
        event_s=collected.event_ns / 1e9,
        event_offsets=collected.event_offsets,
        prompt_lens=prompt_lens,
        output_lens=output_lens,
    )
    ends = records["end_ns"]
    duration_s = max(float(ends.max()) / 1e9 if len(ends) else 0.0, 1e-9)
    timings = derive_timings(results)
    errors = [collected.errors.get(i, "") for i in range(num_requests)]
    metrics: BenchmarkMetrics | PoolingMetrics
    if config.pooling:  # upstream prints neither failures nor a plot for pooling
        sequences = np.array([input_sequences(config.backend, p) for p in meta.prompts], np.int64)
        metrics = calculate_pooling_metrics(
            results, timings, sequences, duration_s, config.percentiles()
        )
    else:
        metrics = calculate_metrics(
            results, timings, duration_s, config.percentiles(), goodput_slos_ms=config.goodput
        )
        _print(failure_preamble([e for e in errors if e]))
        _print(plot_lines(results, timings))
    metric_names = reported_metrics(config)
    before, after = counters
    decoding = (
        spec_decode_stats(*(parse_spec_decode(page) if page else None for page in counters)),
        diffusion_stats(
            parse_diffusion(before) if before else None,
            parse_diffusion(after) if after else None,
            duration_s,
        ),
    )
    _print(summary_lines(config, metrics, duration_s, metric_names, probe, decoding))
    rate = paced_rate(config, meta.scheduled_ns)
    from_intended = None
    if rate is not None:
        ttft_s, e2el_s = latency_from_intended(results, meta.scheduled_ns / 1e9)
        # A pooling answer has one instant: its TTFT is its E2EL, so only E2EL is shown.
        samples = {"e2el": e2el_s} if config.pooling else {"ttft": ttft_s, "e2el": e2el_s}
        intended = {k: summarize(x, config.percentiles()) for k, x in samples.items()}
        _print(intended_lines(intended))
        from_intended = {k: stats_json(stats) for k, stats in intended.items()}
    connect = sample_stats(records["connect_ns"][records["connect_ns"] > 0] / 1e6, [50, 99])
    if connect.count:
        print(
            f"note: {connect.count} requests opened a new connection during the run "
            f"(p50 {connect.median:.2f} ms, max {connect.max:.2f} ms), "
            "inside their TTFT"
        )
    stats = collected.connection_stats
    _print(connection_notes(stats))

    sent = records["arrival_ns"] >= 0
    send_lag_ms = (records["arrival_ns"][sent] - meta.scheduled_ns[sent]) / 1e6
    health = client_health(
        send_lag_ms,
        collected.loop_lag_ns,
        collected.worker_cpu_ns,
        collected.worker_wall_ns,
        rate or math.inf,
    )
    client_verdict = verdict(health)
    print(client_verdict)
    loadgen_extra = {
        "version": __version__,
        "workers": meta.num_workers,
        "connections_preopened": stats.preopened_at_t0,
        "connections_closed_before_use": stats.closed_before_use,
        "resent_on_stale_connection": stats.resent,
        "connection_reuse_stopped": stats.reuse_stopped,
        "schedule_sha256": schedule_hash(meta.scheduled_ns),
        "send_lag_ms": _p50_p99_max(sample_stats(send_lag_ms, [50, 99])),
        "from_intended": from_intended,  # None unless the run was paced
        "new_connections_during_run": {
            "count": connect.count,
            "connect_ms": _p50_p99_max(connect),
        },
        "worker_problems": collected.worker_problems,
        "interrupted": collected.interrupted,
        "client": health.to_json(),
        "verdict": client_verdict,  # last, so the result JSON ends with it
    }
    if config.plot_timeline or config.plot_dataset_stats:  # upstream draws before it saves
        _plot(config, Path(result_path(config, meta.model_id, date)), results, timings)
    if config.save_result or config.append_result:
        result = build_result(
            config=config,
            date=date,
            model_id=meta.model_id,
            tokenizer_id=meta.tokenizer_id,
            duration_s=duration_s,
            metrics=metrics,
            results=results,
            timings=timings,
            start_origin_s=collected.t0_ns / 1e9,
            errors=errors,
            generated_texts=[collected.texts.get(i, "") for i in range(num_requests)],
            metric_names=metric_names,
            loadgen_extra=loadgen_extra,
            rps_change_events=_rps_change_events(config, meta.scheduled_ns, t0_wall),
            probe=probe,
            decoding=decoding,
            server_metrics=(records["server_queue_s"], records["server_ttft_s"]),
        )
        path = result_path(config, meta.model_id, date)
        write_result(path, result, append=config.append_result)
        print(f"Results written to {path}")
    return Outcome(metrics.completed, next((e for e in errors if e), ""))


def _print(lines: list[str]) -> None:
    for line in lines:
        print(line)


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


def _p50_p99_max(stats: SampleStats) -> dict[str, float]:
    """p50, p99 and max of a sample's statistics as JSON keys (zeros when it is empty)."""
    return {"p50": stats.at(50), "p99": stats.at(99), "max": stats.max}

"""The console summary: upstream's "Serving Benchmark Result" block, line for line, and
loadgen's own blocks and notes around it."""

from __future__ import annotations

import importlib.util
import math
import shutil
from typing import Any

import numpy as np

from loadgen.config import RunConfig
from loadgen.report.decoding import summary_block as decoding_block
from loadgen.report.metrics import (
    BenchmarkMetrics,
    MetricStats,
    PoolingMetrics,
    RequestResults,
    Timings,
    tokens_per_second,
)
from loadgen.report.probes import probe_lines
from loadgen.report.rows import RULE, row, section_title
from loadgen.terminal import printable
from workers.protocol import ConnectionStats

SUMMARY_TITLE = section_title(" Serving Benchmark Result ", "=")  # the report's first line
METRIC_TITLES = {
    "ttft": ("TTFT", "Time to First Token"),
    "tpot": ("TPOT", "Time per Output Token (excl. 1st token)"),
    "itl": ("ITL", "Inter-token Latency"),
    "e2el": ("E2EL", "End-to-end Latency"),
    "client_queue_time": ("Client Queue Time", "Client-side Queueing"),
    "e2el_including_client_queue": (
        "E2EL incl. Client Queue",
        "Queue-inclusive End-to-end Latency",
    ),
}


def percentile_word(p: float) -> str:
    """'99' for 99.0, '99.9' for 99.9: upstream's naming of percentile keys and labels."""
    return str(int(p)) if int(p) == p else str(p)


def reported_metrics(config: RunConfig) -> list[str]:
    """The selected metrics that are reported, in upstream's order and under its conditions:
    TTFT, TPOT and ITL only for generation with a tokenizer."""
    selected = set(config.selected_metrics())
    with_tokens = not config.pooling and not config.skip_tokenizer_init
    order = ["ttft", "tpot", "itl"] if with_tokens else []
    order.append("e2el")
    if config.max_concurrency is not None:
        order.append("client_queue_time")
        if not math.isinf(config.request_rate):
            order.append("e2el_including_client_queue")
    return [m for m in order if m in selected]


def failure_preamble(errors: list[str]) -> list[str]:
    """Upstream's list of the first failures, printed before the summary."""
    if not errors:
        return []
    lines = ["Failed requests during benchmark run detected (capping to 10):"]
    lines += [f"Error {i}: {printable(err)}" for i, err in enumerate(errors[:10])]  # a server's
    return lines


def summary_lines(
    config: RunConfig,
    metrics: BenchmarkMetrics | PoolingMetrics,
    duration_s: float,
    metric_names: list[str],
    probe: dict[str, Any] | None = None,
    decoding: tuple[dict[str, Any] | None, dict[str, Any] | None] = (None, None),
) -> list[str]:
    """The "Serving Benchmark Result" block, line for line as upstream prints it."""
    lines = [SUMMARY_TITLE]
    lines.append(row("Successful requests:", metrics.completed))
    lines.append(row("Failed requests:", metrics.failed))
    if config.max_concurrency is not None:
        lines.append(row("Maximum request concurrency:", config.max_concurrency))
    if not math.isinf(config.request_rate):
        lines.append(row("Request rate configured (RPS):", config.request_rate, ".2f"))
    lines.append(row("Benchmark duration (s):", duration_s, ".2f"))
    lines.append(row("Total input tokens:", metrics.total_input))
    has_tokenizer = not config.skip_tokenizer_init
    if isinstance(metrics, PoolingMetrics):
        lines.append(row("Request throughput (req/s):", metrics.request_throughput, ".2f"))
        lines.append(row("Input throughput (inputs/s):", metrics.input_sequence_throughput, ".2f"))
    else:
        if has_tokenizer:
            lines.append(row("Total generated tokens:", metrics.total_output))
        lines.append(row("Request throughput (req/s):", metrics.request_throughput, ".2f"))
        if config.goodput:
            lines.append(row("Request goodput (req/s):", metrics.request_goodput, ".2f"))
        if has_tokenizer:
            lines.append(row("Output token throughput (tok/s):", metrics.output_throughput, ".2f"))
            lines.append(
                row("Peak output token throughput (tok/s):", metrics.max_output_tokens_per_s, ".2f")
            )
        lines.append(row("Peak concurrent requests:", metrics.max_concurrent_requests, ".2f"))
        if metrics.rtfx > 0.0:
            lines.append(row("RTFx (Inverse Real-Time Factor):", metrics.rtfx, ".2f"))
    if has_tokenizer:
        lines.append(row("Total token throughput (tok/s):", metrics.total_token_throughput, ".2f"))
    if probe is not None:
        lines += probe_lines(probe)
    for name in metric_names:
        lines += _metric_block(name, metrics.stats[name])
    lines += decoding_block(*decoding)
    lines.append(RULE)
    return lines


def intended_lines(stats_by_name: dict[str, MetricStats]) -> list[str]:
    """loadgen's block for paced runs: TTFT and E2EL counted from the scheduled send instant."""
    lines = [section_title(" From intended send time (wrk2-style) ")]
    for name, stats in stats_by_name.items():
        short = name.upper()
        lines.append(row(f"Mean {short} from intended (ms):", stats.mean_ms, ".2f"))
        lines.append(row(f"Median {short} from intended (ms):", stats.median_ms, ".2f"))
        for p, value in stats.percentiles_ms:
            lines.append(row(f"P{percentile_word(p)} {short} from intended (ms):", value, ".2f"))
    lines.append(RULE)
    return lines


def _metric_block(name: str, stats: MetricStats) -> list[str]:
    short, title = METRIC_TITLES[name]
    lines = [section_title(title)]
    lines.append(row(f"Mean {short} (ms):", stats.mean_ms, ".2f"))
    lines.append(row(f"Median {short} (ms):", stats.median_ms, ".2f"))
    for p, value in stats.percentiles_ms:
        lines.append(row(f"P{percentile_word(p)} {short} (ms):", value, ".2f"))
    return lines


def plot_lines(results: RequestResults, timings: Timings) -> list[str]:
    """Upstream's terminal plot when termplotlib and gnuplot are installed; nothing otherwise
    (upstream's tip to install them is an advertisement no run asked for)."""
    if not results.success.any():
        return []
    if importlib.util.find_spec("termplotlib") is None or shutil.which("gnuplot") is None:
        return []
    import termplotlib as tpl  # optional; only drawn when the user has it

    ok = results.success
    start = results.send_s[ok]
    end = start + timings.latency_s[ok]
    origin = start.min()
    owner_ok = np.repeat(ok, np.diff(results.event_offsets))
    tokens = tokens_per_second(start, timings.latency_s[ok], results.event_s[owner_ok])
    seconds = len(tokens)
    first = (start - origin).astype(np.int64)
    last = np.minimum(np.ceil(end - origin).astype(np.int64), seconds)
    concurrent = np.zeros(seconds + 1)
    np.add.at(concurrent, first, 1)
    np.add.at(concurrent, np.maximum(last, first), -1)
    fig = tpl.figure()
    fig.plot(np.arange(seconds), tokens, title="Output tokens per second")
    fig.plot(
        np.arange(seconds), np.cumsum(concurrent)[:seconds], title="Concurrent requests per second"
    )
    return [fig.get_string()]


def truncated_note(count: int) -> list[str]:
    """The console warning on streams that ended without ``data: [DONE]``, when any did."""
    if not count:
        return []
    streams = "1 stream" if count == 1 else f"{count} streams"
    return [
        f"warning: {streams} ended without data: [DONE]; counted as upstream counts them "
        "(a success when a token event came before the end; an event cut short is dropped)"
    ]


def text_capped_note(count: int) -> list[str]:
    """The console note on requests whose kept text was cut to the cap, when any was."""
    if not count:
        return []
    requests = "1 request" if count == 1 else f"{count} requests"
    return [
        f"note: {requests} sent more text than kept (64 characters per token event of the "
        "output guard, 1 MiB without max_tokens): the text was cut to that cap before it was "
        "re-tokenised or saved (loadgen.text_capped)"
    ]


def connection_notes(stats: ConnectionStats) -> list[str]:
    """Console notes on what the server did to the connections, when it did anything."""
    notes = []
    if stats.resent:
        notes.append(
            f"note: {stats.resent} requests were re-sent once on a fresh connection: the server "
            "had closed their pooled connection before reading them (timed from the re-send)"
        )
    if stats.reuse_stopped:
        notes.append(
            "note: the server closes the connection after every response (as llama.cpp's "
            "server does); connections were no longer reused"
        )
    if stats.closed_before_use:
        notes.append(
            f"note: the server closed {stats.closed_before_use} of the "
            f"{stats.preopened_at_t0} connections open at t0 before any request used them"
        )
    return notes

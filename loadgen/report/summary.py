"""The console summary, a renderer of ``RunSummary``: upstream's "Serving Benchmark Result"
block, line for line (its rows from the metric table), and loadgen's own blocks and notes."""

from __future__ import annotations

import importlib.util
import math
import shutil
from typing import Any

import numpy as np

from loadgen.report.conversations import conversation_block, conversation_lines
from loadgen.report.decoding import decoding_blocks
from loadgen.report.failures import FAILED, failure_lines
from loadgen.report.hosts import host_lines
from loadgen.report.metric_table import LATENCY_BY_KEY, Figure, console_figures
from loadgen.report.metrics import (
    MetricStats,
    RequestResults,
    Timings,
    tokens_per_second_chunked,
)
from loadgen.report.probes import probe_block
from loadgen.report.rows import RULE, Block, Row, block_lines, section_title
from loadgen.report.run_summary import RunSummary
from loadgen.report.steady_views import steady_block, time_bound_line
from loadgen.terminal import printable
from workers.protocol import ConnectionStats

SUMMARY_TEXT = " Serving Benchmark Result "
SUMMARY_TITLE = section_title(SUMMARY_TEXT, "=")  # the report's first line


def percentile_word(p: float) -> str:
    """'99' for 99.0, '99.9' for 99.9: upstream's naming of percentile keys and labels."""
    return str(int(p)) if int(p) == p else str(p)


def console_lines(summary: RunSummary) -> list[str]:
    """The console report of a run, line for line: upstream's failures, plot and "Serving
    Benchmark Result" block, then loadgen's blocks and notes, the verdict last."""
    lines: list[str] = []
    if not summary.settings.pooling:  # upstream prints neither failures nor a plot for pooling
        failed = summary.errors.outcome == FAILED  # not cancelled or not sent: as upstream's
        errors = [e for e, f in zip(summary.errors.per_request, failed, strict=True) if e and f]
        lines += failure_preamble(errors)
        lines += plot_lines(summary.requests.results, summary.requests.timings)
    return lines + table_and_verdict(summary)


def table_and_verdict(summary: RunSummary) -> list[str]:
    """The report from its title (SUMMARY_TITLE) to the client's verdict: what -q shows. The
    requests that did not complete are counted by kind after upstream's blocks."""
    lines = summary_lines(summary)
    if summary.intended is not None:
        lines += intended_lines(summary.intended)
    totals = summary.totals
    lines += failure_lines(summary.errors.by_kind, totals.failed, totals.cancelled, totals.not_sent)
    if summary.steady is not None:
        lines += [*block_lines(_steady_block(summary)), RULE]
    lines += notes(summary)
    lines += conversation_lines(summary.multi_turn)
    lines += host_lines(summary.ending.hosts)
    lines.append(summary.client.verdict)
    return lines


def notes(summary: RunSummary) -> list[str]:
    """The notes on what --duration's deadline did, and on what the connections did: new ones
    during the run, the server's habits, streams cut short, text cut to the cap."""
    connections = summary.connections
    connect = connections.new_during_run
    lines = [] if summary.time_bound is None else [time_bound_line(summary.time_bound)]
    if connect.count:
        lines.append(
            f"note: {connect.count} requests opened a new connection during the run "
            f"(p50 {connect.median:.2f} ms, max {connect.max:.2f} ms), "
            "inside their TTFT"
        )
    lines += connection_notes(connections.stats)
    lines += truncated_note(connections.truncated_streams)
    lines += text_capped_note(connections.text_capped)
    return lines


def failure_preamble(errors: list[str]) -> list[str]:
    """Upstream's list of the first failures, printed before the summary."""
    if not errors:
        return []
    lines = ["Failed requests during benchmark run detected (capping to 10):"]
    lines += [f"Error {i}: {printable(err)}" for i, err in enumerate(errors[:10])]  # a server's
    return lines


def summary_blocks(summary: RunSummary) -> list[Block]:
    """The blocks of upstream's "Serving Benchmark Result", in order: the metric table's
    figures, the probes, a block per reported latency, the decoding figures."""
    figures: list[Row] = []
    for figure in console_figures(summary.settings.pooling):
        value = getattr(getattr(summary, figure.of), figure.key)
        if _shown(figure, value, summary):
            figures.append((figure.label, value, figure.spec))
    blocks = [Block(SUMMARY_TEXT, tuple(figures), "=")]
    if summary.probes is not None:
        blocks.append(probe_block(summary.probes))
    blocks += [latency_block(name, stats) for name, stats in summary.latencies.items()]
    blocks += decoding_blocks(summary.decoding.spec_decode, summary.decoding.diffusion)
    return blocks


def report_blocks(summary: RunSummary) -> list[Block]:
    """Every block of the report, as report.html tabulates them: the summary's, then the
    intended send time's and the conversations' where the run has them."""
    blocks = summary_blocks(summary)
    if summary.intended is not None:
        blocks.append(intended_block(summary.intended))
    if summary.multi_turn is not None:
        blocks.append(conversation_block(summary.multi_turn))
    if summary.steady is not None:
        blocks.append(_steady_block(summary))
    return blocks


def _steady_block(summary: RunSummary) -> Block:
    settings = summary.settings
    assert summary.steady is not None
    return steady_block(summary.steady, settings.pooling, settings.percentiles)


def summary_lines(summary: RunSummary) -> list[str]:
    """The "Serving Benchmark Result" block, line for line as upstream prints it."""
    return [*(line for block in summary_blocks(summary) for line in block_lines(block)), RULE]


def _shown(figure: Figure, value: Any, summary: RunSummary) -> bool:
    """Whether the console shows a figure of this run (the table's ``shown``)."""
    if figure.shown == "tokenizer":
        return summary.settings.tokenizer
    if figure.shown == "known":
        return value is not None
    if figure.shown == "nonzero":
        return bool(value)
    if figure.shown == "finite":
        return not math.isinf(value)
    return True


def intended_block(stats_by_name: dict[str, MetricStats]) -> Block:
    """loadgen's block for paced runs: TTFT and E2EL counted from the scheduled send instant."""
    rows: list[Row] = []
    for name, stats in stats_by_name.items():
        short = name.upper()
        rows.append((f"Mean {short} from intended (ms):", stats.mean_ms, ".2f"))
        rows.append((f"Median {short} from intended (ms):", stats.median_ms, ".2f"))
        for p, value in stats.percentiles_ms:
            rows.append((f"P{percentile_word(p)} {short} from intended (ms):", value, ".2f"))
    return Block(" From intended send time (wrk2-style) ", tuple(rows))


def intended_lines(stats_by_name: dict[str, MetricStats]) -> list[str]:
    """The intended send time's block, line for line, closed."""
    return [*block_lines(intended_block(stats_by_name)), RULE]


def latency_block(name: str, stats: MetricStats) -> Block:
    """Upstream's block of one latency: mean, median and the percentiles, in ms."""
    latency = LATENCY_BY_KEY[name]
    short = latency.short
    rows: list[Row] = [
        (f"Mean {short} (ms):", stats.mean_ms, ".2f"),
        (f"Median {short} (ms):", stats.median_ms, ".2f"),
    ]
    rows += [(f"P{percentile_word(p)} {short} (ms):", v, ".2f") for p, v in stats.percentiles_ms]
    return Block(latency.title, tuple(rows))


def plot_lines(results: RequestResults, timings: Timings) -> list[str]:
    """Upstream's terminal plot when termplotlib and gnuplot are installed; nothing otherwise
    (upstream's tip to install them is an advertisement no run asked for)."""
    if not results.success.any():
        return []
    if importlib.util.find_spec("termplotlib") is None or shutil.which("gnuplot") is None:
        return []
    import termplotlib as tpl  # optional; only drawn when the user has it

    ok = results.success
    start = results.sent_s[ok]
    end = start + timings.latency_s[ok]
    origin = start.min()
    tokens = tokens_per_second_chunked(results.event_source, ok, start, timings.latency_s[ok])
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

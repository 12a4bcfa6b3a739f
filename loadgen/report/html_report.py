"""report.html: one self-contained page for a run or a campaign, to open offline and share.

The page holds the run settings, the verdict, the summary table, the requests that did not
complete by outcome and kind, the TTFT/ITL/E2EL CDFs, throughput, in flight and failures over
time, TTFT/ITL/E2EL percentiles per time bin, the server's own series recorded during the run
(from the records file) and, for a campaign, the throughput-latency curves with the Pareto
front. The charts are inline SVG (html_charts.py, pygal): the page has no script and fetches
nothing from the network. A run's page is a renderer of its report's ``RunSummary``
(``run_page``): its settings rows, verdict and gates, and the summary table made from the
console's blocks (so from the metric table). A campaign's page is html_campaign.py's.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import jinja2
import numpy as np
from markupsafe import Markup

from loadgen.records.model import RunRecords
from loadgen.records.redact import redact_argv, redact_text, redact_url
from loadgen.records.server_series import MetricSeries
from loadgen.report.compare import Samples, pooled_samples
from loadgen.report.failures import CANCELLED, FAILED, error_kind, most_frequent
from loadgen.report.hosts import host_lines
from loadgen.report.html_charts import (
    CANCELLED_LABEL,
    OVER_TIME_TITLE,
    Latencies,
    OverTime,
    cdf_figure,
    over_time_figure,
)
from loadgen.report.html_figures import (
    CDF_ITL_SAMPLE,
    TimeBins,
    bin_count,
    completions_per_s,
    failures_per_s,
    in_flight,
    itl_bands,
    percentile_bands,
    time_bins,
    token_shares,
    tokens_per_s_chunked,
)
from loadgen.report.html_server import server_panels, why_no_panels
from loadgen.report.html_svg import shared_css
from loadgen.report.html_template import PAGE_TEMPLATE
from loadgen.report.metric_table import LATENCY_BY_KEY
from loadgen.report.run_report import Report
from loadgen.report.run_summary import RunSummary
from loadgen.report.summary import notes, report_blocks

RECORDS_SUFFIX = ".records.arrow"
VERDICT_OK = "client: OK: "
GENERATION_CDFS = ("ttft", "itl", "e2el")
POOLING_CDFS = ("e2el",)  # a pooling answer has one instant: its TTFT is its E2EL
FAILURE_OUTCOMES = ("failed", "cancelled", "not sent")  # the failures table's order


@dataclass(frozen=True)
class ServerRecord:
    """What a run's records hold of the server's own series: the series (None when none were
    scraped) and whether the run asked for them (None: its records predate the flag)."""

    series: list[MetricSeries] | None = None
    asked: bool | None = None


def server_record(run: RunRecords) -> ServerRecord:
    """The server's series of a run's records, and whether the run asked for them."""
    asked = run.start.config.get("server_metrics")
    return ServerRecord(run.server_metrics, asked if isinstance(asked, bool) else None)


def html_path_for(records: str) -> Path:
    """A run's page beside its records: ``NAME.records.arrow`` -> ``NAME.report.html``."""
    path = Path(records)
    return path.with_name(path.name.removesuffix(RECORDS_SUFFIX) + ".report.html")


@dataclass
class Table:
    """A table of the page: its header, then rows; a row of one cell is a section's title."""

    header: list[str]
    rows: list[list[str]]


def settings_rows(
    summary: RunSummary, extra: list[tuple[str, str]], workers: str | None = None
) -> list[tuple[str, str]]:
    """What the run was, from its summary: its command line (secrets already hidden in the
    records, hidden again here for records from elsewhere), server, model, dataset, loadgen,
    date and workers (the run's own count unless ``workers`` says otherwise), ``extra``, its
    SLOs (--goodput's, named as the metric table names each latency; --fail-on's) and host."""
    settings, identity = summary.settings, summary.identity
    context = identity.context
    workers = workers or f"{identity.num_workers} worker(s)"
    argv = " ".join(shlex.quote(arg) for arg in redact_argv(context["command_line"]))
    dataset = ", ".join(f"{k}={v}" for k, v in context["dataset"].items() if v is not None)
    environment = context["environment"] or {}
    host = ", ".join(
        f"{k} {environment[k]}" for k in ("python", "platform", "cpu_count") if k in environment
    )
    server = redact_url(settings.server_url) + (" (the embedded mock)" if settings.mock else "")
    rows = [
        ("command line", argv),
        ("server", server),
        ("model", identity.model_id),
        ("backend / endpoint", f"{settings.backend} {settings.endpoint}"),
        ("dataset", dataset),
        ("loadgen", f"{identity.loadgen_version}, {workers}"),
        ("started", identity.t0_wall),
        *extra,
        ("goodput SLOs", goodput_slos(settings.goodput)),
        ("--fail-on", ", ".join(settings.fail_on)),
        ("host", host),
    ]
    return [(name, value) for name, value in rows if value]


def goodput_slos(slos: dict[str, float] | None) -> str:
    """--goodput's SLOs as ``TTFT <= 50 ms, E2EL <= 200 ms`` ("" without)."""
    return ", ".join(
        f"{LATENCY_BY_KEY[key].short} ≤ {format(ms, 'g')} {LATENCY_BY_KEY[key].unit}"
        for key, ms in (slos or {}).items()
    )


def summary_table(summary: RunSummary) -> Table:
    """The report's blocks (upstream's and loadgen's) as rows: a section title, then label and
    value as the console shows them."""
    rows: list[list[str]] = []
    for block in report_blocks(summary):
        rows.append([block.title.strip()])
        rows += [[label.rstrip(":"), format(value, spec)] for label, value, spec in block.rows()]
    return Table(["metric", "value"], rows)


def run_notes(summary: RunSummary) -> list[str]:
    """Why the report covers only part of the run, if it does (``loadgen report`` says it on
    stderr), the console's notes after the summary's blocks, and where the workers ran (the
    requests that did not complete have their own table: ``failures_table``)."""
    caveat = summary.ending.caveat
    return [
        *([f"note: {caveat}"] if caveat else []),
        *notes(summary),
        *host_lines(summary.ending.hosts),
    ]


def failure_rows(summary: RunSummary) -> list[tuple[str, str, int]]:
    """The requests of a run that did not complete, as (outcome, kind, count): the failed by
    kind, most frequent first, then the cancelled and the not sent; none when all completed."""
    totals = summary.totals
    failed, cancelled, not_sent = FAILURE_OUTCOMES
    return [
        *((failed, kind, n) for kind, n in most_frequent(summary.errors.by_kind)),
        *([(cancelled, "in flight when the run stopped", totals.cancelled)]
          if totals.cancelled else []),
        *([(not_sent, "never left the client", totals.not_sent)] if totals.not_sent else []),
    ]  # fmt: skip


def failures_table(summary: RunSummary) -> Table | None:
    """The run's requests that did not complete, by outcome and kind, with each one's share
    of the run's requests; None when all completed."""
    rows = failure_rows(summary)
    if not rows:
        return None
    total = max(len(summary.errors.per_request), 1)
    return Table(
        ["outcome", "kind", "requests", "share of requests"],
        [[outcome, kind, f"{n:,}", f"{100 * n / total:.1f} %"] for outcome, kind, n in rows],
    )


def run_latencies(label: str, summaries: list[RunSummary]) -> Latencies:
    """The CDFs' line of a run, or of a point's runs pooled: every successful request's TTFT
    and E2EL, and its gaps between token events, in ms. The ITL line draws a fixed-size
    sample of the gaps (every k-th: ``CDF_ITL_SAMPLE`` at most per run), a drawing only: no
    figure is read from it."""
    return latencies_of(pooled_samples(label, summaries, itl_sample=CDF_ITL_SAMPLE))


def latencies_of(samples: Samples) -> Latencies:
    """The CDFs' line of a side's samples, in ms."""
    return Latencies(samples.name, samples.ttft_s * 1e3, samples.itl_s * 1e3, samples.e2el_s * 1e3)


def run_over_time(label: str, summary: RunSummary, server: ServerRecord | None = None) -> OverTime:
    """A run's completions, output tokens, in-flight requests, failures and latency
    percentiles per bin (100 bins, fewer for a run of fewer than 500 requests), and the panels
    of the server's series (``server``: the run's records'; none given, no server panel)."""
    results, ends_s = summary.requests.results, summary.requests.end_s
    length_s = float(ends_s.max()) if len(ends_s) else 0.0
    bins = time_bins(length_s, bin_count(int(results.success.sum())))
    sent = (results.sent_s >= 0) & (ends_s >= results.sent_s)
    mean, peak = in_flight(results.sent_s[sent], ends_s[sent], bins)
    tokens = token_shares(results.event_offsets, results.output_lens, results.success)
    names = POOLING_CDFS if summary.settings.pooling else GENERATION_CDFS
    panels = server_panels(server.series or []) if server is not None else []
    return OverTime(
        label=label,
        centers_s=bins.centers,
        width_s=bins.width_s,
        requests_per_s=completions_per_s(ends_s, results.success, bins),
        tokens_per_s=tokens_per_s_chunked(results.event_source, tokens, bins),
        in_flight_mean=mean,
        in_flight_peak=peak,
        failures_per_s=failures_per_s(ends_s, failure_labels(summary), bins),
        window_s=(
            None
            if summary.steady is None
            else (summary.steady.window.start_s, summary.steady.window.end_s)
        ),
        bands_ms=latency_bands(summary, bins, names),
        server=panels,
        server_note=(
            why_no_panels(server.series, server.asked)
            if server is not None and not panels
            else None
        ),
    )


def latency_bands(
    summary: RunSummary, bins: TimeBins, names: Sequence[str]
) -> dict[str, np.ndarray]:
    """Each latency of ``names``' p50/p90/p99 per bin (ms), every successful request's value
    at the instant it was measured: its TTFT at its first token, each ITL at the later token
    (read in chunks, each bin's percentiles exact: ``itl_bands``), its E2EL at its last."""
    results, timings = summary.requests.results, summary.requests.timings
    ok = results.success
    sent = results.sent_s
    measured = {
        "ttft": ((sent + timings.ttft_s)[ok], timings.ttft_s[ok]),
        "e2el": ((sent + timings.latency_s)[ok], timings.latency_s[ok]),
    }
    return {
        name: (
            itl_bands(results.event_source, ok, bins)
            if name == "itl"
            else percentile_bands(measured[name][0], 1e3 * measured[name][1], bins)
        )
        for name in names
    }


def failure_labels(summary: RunSummary) -> list[str]:
    """What failures over time calls each request: a failed one its kind, a cancelled one
    ``CANCELLED_LABEL``, any other "" (left out: completed, or never sent)."""
    errors = summary.errors
    return [
        error_kind(e) if o == FAILED else CANCELLED_LABEL if o == CANCELLED else ""
        for o, e in zip(errors.outcome.tolist(), errors.per_request, strict=True)
    ]


def run_page(report: Report, title: str, server: ServerRecord | None = None) -> str:
    """The page of one run from its report (the figures from its summary) and the server's
    series its records hold."""
    pooling = report.summary.settings.pooling
    names = POOLING_CDFS if pooling else GENERATION_CDFS
    run_latency = run_latencies(title, [report.summary])
    verdict, gates = report.verdict, report.breaches  # --fail-on's, when the report judged them
    return render(
        title=title,
        kind="run",
        settings=settings_rows(report.summary, []),
        verdicts=[(verdict, verdict.startswith(VERDICT_OK)), *((g, False) for g in gates)],
        verdict_summary=None,
        notes=[redact_text(note) for note in run_notes(report.summary)],
        summary=summary_table(report.summary),
        failures=failures_table(report.summary),
        figures=[
            ("Latency distributions", cdf_figure([run_latency], names)),
            (
                OVER_TIME_TITLE,
                over_time_figure(
                    [run_over_time(title, report.summary, server or ServerRecord())],
                    tokens=not pooling,
                ),
            ),
        ],
    )


def render(**page: object) -> str:
    """The page from its parts (``figures``: title and the figure's HTML)."""
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = environment.from_string(PAGE_TEMPLATE)
    figures = [(title, Markup(html)) for title, html in page.pop("figures")]  # type: ignore[attr-defined]
    return template.render(
        **page, figures=figures, chart_css=Markup(shared_css()),
        generated=datetime.now().astimezone().isoformat(timespec="seconds"),
    )  # fmt: skip

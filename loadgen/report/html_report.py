"""report.html: one self-contained page for a run or a campaign, to open offline and share.

The page holds the run settings, the verdict, the summary table, the TTFT/ITL/E2EL CDFs,
throughput and in flight over time and, for a campaign, the throughput-latency curves with the
Pareto front. plotly.js is inlined once in the page's head; every figure's script calls it, and
nothing is fetched from the network. A run's page is built from its records and its report
(``run_page``); a campaign's from its folder: summary.csv, each run's records and result JSON
(``campaign_page``), so ``loadgen report FOLDER --format html`` and the campaign's own end draw
the same page.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import jinja2
from markupsafe import Markup

from loadgen.config import PLOT_EXTRA, missing_libraries
from loadgen.records.arrow_file import RecordsFileError, read_records
from loadgen.records.model import RunRecords
from loadgen.records.redact import redact_argv, redact_text, redact_url
from loadgen.report.campaign_summary import metric_keys
from loadgen.report.compare import Samples, pooled_samples
from loadgen.report.hosts import host_lines
from loadgen.report.html_charts import (
    OVER_TIME_TITLE,
    Latencies,
    OverTime,
    TradeOff,
    cdf_figure,
    over_time_figure,
    trade_off_figure,
)
from loadgen.report.html_figures import (
    bin_count,
    completions_per_s,
    event_tokens,
    in_flight,
    pareto_front,
    point_label,
    time_bins,
    tokens_per_s,
)
from loadgen.report.html_template import PAGE_TEMPLATE
from loadgen.report.metric_table import CAMPAIGN, figures_in
from loadgen.report.offline import stored_config
from loadgen.report.run_context import dataset_settings
from loadgen.report.run_report import Report
from loadgen.report.run_summary import RunSummary
from loadgen.report.summarize import summarize
from loadgen.report.summary import notes, report_blocks

CAMPAIGN_REPORT = "report.html"
RECORDS_SUFFIX = ".records.arrow"
VERDICT_OK = "client: OK: "
GENERATION_CDFS = ("ttft", "itl", "e2el")
POOLING_CDFS = ("e2el",)  # a pooling answer has one instant: its TTFT is its E2EL
_RUN_NUMBER = re.compile(r"-run=(\d+)\.records\.arrow$")


def plotly_missing() -> str | None:
    """Why report.html cannot be drawn here, in one line; None when plotly is installed."""
    if missing_libraries("--format html"):
        return f"plotly is not installed: {PLOT_EXTRA}"
    return None


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
    run: RunRecords, extra: list[tuple[str, str]], workers: str | None = None
) -> list[tuple[str, str]]:
    """What the run was: its command line (secrets already hidden in the records, hidden again
    here for records from elsewhere), server, model, dataset, loadgen, date and workers (the
    run's own count unless ``workers`` says otherwise)."""
    config = stored_config(run, "the records")
    start = run.start
    workers = workers or f"{start.num_workers} worker(s)"
    argv = " ".join(shlex.quote(arg) for arg in redact_argv(start.command_line))
    dataset = ", ".join(
        f"{k}={v}" for k, v in dataset_settings(start.config).items() if v is not None
    )
    environment = start.environment or {}
    host = ", ".join(
        f"{k} {environment[k]}" for k in ("python", "platform", "cpu_count") if k in environment
    )
    rows = [
        ("command line", argv),
        ("server", redact_url(config.server_url) + (" (the embedded mock)" if config.mock else "")),
        ("model", start.model_id),
        ("backend / endpoint", f"{config.backend} {config.endpoint}"),
        ("dataset", dataset),
        ("loadgen", f"{start.loadgen_version}, {workers}"),
        ("started", start.t0_wall),
        *extra,
        ("host", host),
    ]
    return [(name, value) for name, value in rows if value]


def summary_table(summary: RunSummary) -> Table:
    """The report's blocks (upstream's and loadgen's) as rows: a section title, then label and
    value as the console shows them."""
    rows: list[list[str]] = []
    for block in report_blocks(summary):
        rows.append([block.title.strip()])
        rows += [[label.rstrip(":"), format(value, spec)] for label, value, spec in block.rows()]
    return Table(["metric", "value"], rows)


def run_notes(summary: RunSummary) -> list[str]:
    """The console's notes after the summary's blocks, the failed requests counted by kind
    (the console lists only the first ten), and where the workers ran."""
    return [*notes(summary), *error_kinds_note(summary), *host_lines(summary.ending.hosts)]


def error_kinds_note(summary: RunSummary) -> list[str]:
    """One line counting the failed requests by kind, most frequent first; none without."""
    kinds = sorted(summary.errors.by_kind.items(), key=lambda kind: (-kind[1], kind[0]))
    if not kinds:
        return []
    return ["failed requests by kind: " + ", ".join(f"{n} × {kind}" for kind, n in kinds)]


def run_latencies(label: str, summaries: list[RunSummary]) -> Latencies:
    """The CDFs' line of a run, or of a point's runs pooled: every successful request's TTFT
    and E2EL and every gap between its token events, in ms."""
    return latencies_of(pooled_samples(label, summaries))


def latencies_of(samples: Samples) -> Latencies:
    """The CDFs' line of a side's samples, in ms."""
    return Latencies(samples.name, samples.ttft_s * 1e3, samples.itl_s * 1e3, samples.e2el_s * 1e3)


def run_over_time(label: str, summary: RunSummary) -> OverTime:
    """A run's completions, output tokens and in-flight requests per bin (100 bins, fewer for
    a run of fewer than 500 requests)."""
    results, ends_s = summary.requests.results, summary.requests.end_s
    length_s = float(ends_s.max()) if len(ends_s) else 0.0
    bins = time_bins(length_s, bin_count(int(results.success.sum())))
    sent = (results.sent_s >= 0) & (ends_s >= results.sent_s)
    mean, peak = in_flight(results.sent_s[sent], ends_s[sent], bins)
    tokens = event_tokens(results.event_offsets, results.output_lens, results.success)
    return OverTime(
        label=label,
        centers_s=bins.centers,
        width_s=bins.width_s,
        requests_per_s=completions_per_s(ends_s, results.success, bins),
        tokens_per_s=tokens_per_s(results.event_s, tokens, bins),
        in_flight_mean=mean,
        in_flight_peak=peak,
    )


def run_page(run: RunRecords, report: Report, title: str) -> str:
    """The page of one run from its records and its report."""
    pooling = report.summary.settings.pooling
    names = POOLING_CDFS if pooling else GENERATION_CDFS
    run_latency = run_latencies(title, [report.summary])
    verdict = report.verdict
    return render(
        title=title,
        kind="run",
        settings=settings_rows(run, []),
        verdicts=[(verdict, verdict.startswith(VERDICT_OK))],
        verdict_summary=None,
        notes=[redact_text(note) for note in run_notes(report.summary)],
        summary=summary_table(report.summary),
        figures=[
            ("Latency distributions", cdf_figure([run_latency], names)),
            (
                OVER_TIME_TITLE,
                over_time_figure([run_over_time(title, report.summary)], tokens=not pooling),
            ),
        ],
    )


@dataclass
class CampaignPoint:
    """One point of a campaign folder: its summary.csv row, its label and its runs' files."""

    row: dict[str, str]
    label: str
    records: list[Path]  # by run number
    results: list[Path]  # the result JSON of each run that wrote one


def campaign_points(folder: Path) -> list[CampaignPoint]:
    """The points of a campaign folder, in summary.csv's order, with their runs' files."""
    summary = folder / "summary.csv"
    if not summary.is_file():
        raise RecordsFileError(f"{folder}: no summary.csv, so not a campaign's folder")
    with summary.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    if not rows or "point" not in rows[0]:
        raise RecordsFileError(f"{summary}: no points in it")
    caps = {row["max_concurrency"] for row in rows}
    rates = {row["request_rate"] for row in rows}
    points = []
    for row in rows:
        cap = int(row["max_concurrency"]) if row["max_concurrency"] else None
        label = point_label(cap, float(row["request_rate"]), caps_vary=len(caps) > 1,
                            rates_vary=len(rates) > 1)  # fmt: skip
        files = sorted((folder / row["point"]).glob(f"*{RECORDS_SUFFIX}"), key=_run_number)
        results = [f.with_name(f.name.removesuffix(RECORDS_SUFFIX) + ".json") for f in files]
        points.append(CampaignPoint(row, label, files, [r for r in results if r.is_file()]))
    return points


def _run_number(path: Path) -> tuple[int, str]:
    match = _RUN_NUMBER.search(path.name)
    return (int(match[1]) if match else -1, path.name)


def campaign_page(folder: Path) -> str:
    """The page of a campaign from its folder."""
    points = campaign_points(folder)
    with_runs = [p for p in points if p.records]
    if not with_runs:
        raise RecordsFileError(f"{folder}: no run of any point left a records file")
    runs = {p.row["point"]: [read_records(str(f)) for f in p.records] for p in with_runs}
    first = runs[with_runs[0].row["point"]][0]
    num_runs = int(points[0].row["runs"])
    steady = ", steady state only" if first.start.config.get("steady_state") else ""
    extra = [("campaign", f"{len(points)} point(s), {num_runs} run(s) each{steady}")]
    verdicts = []
    for point in points:
        for path in point.results:
            verdict = json.loads(path.read_text(encoding="utf-8")).get("loadgen", {}).get("verdict")
            if verdict:
                verdicts.append(f"{point.label} {path.stem.rpartition('-')[2]}: {verdict}")
    summaries = {  # each run summarized as its report summarizes it
        point: [summarize(stored_config(run, str(folder)), run) for run in point_runs]
        for point, point_runs in runs.items()
    }
    latencies = [run_latencies(p.label, summaries[p.row["point"]]) for p in with_runs]
    over_time = [
        run_over_time(
            f"{p.label} (run 0)" if num_runs > 1 else p.label, summaries[p.row["point"]][0]
        )
        for p in with_runs
    ]
    pooling = stored_config(first, str(folder)).pooling
    names = POOLING_CDFS if pooling else GENERATION_CDFS
    figures = [("Latency distributions", cdf_figure(latencies, names))]
    planes = trade_off_planes(points, num_runs)
    if planes is not None:
        figures.append(("Throughput and latency", trade_off_figure(planes)))
    caption = (" (one point at a time: pick it in the menu; the point's first run)"
               if len(over_time) > 1 else "")  # fmt: skip
    figures.append((f"{OVER_TIME_TITLE}{caption}",
                    over_time_figure(over_time, tokens=not pooling)))  # fmt: skip
    return render(
        title=folder.resolve().name,
        kind="campaign",
        settings=settings_rows(first, extra, campaign_workers(runs)),
        verdicts=[(text, VERDICT_OK in text) for text in verdicts],
        verdict_summary=verdict_summary(verdicts, sum(len(p.records) for p in points)),
        notes=[f"{p.label}: {redact_text(p.row['error'])}" for p in points if p.row.get("error")],
        summary=campaign_table(points, num_runs),
        summary_note="summary.csv, one row per point"
        + (": the mean across runs, its 95 % interval (Student's t) below" if num_runs > 1 else ""),
        figures=figures,
    )


def campaign_workers(runs: dict[str, list[RunRecords]]) -> str:
    """The campaign's worker counts: one, or the range when points planned different ones
    (a point's cap can need fewer workers than the campaign started)."""
    counts = sorted({run.start.num_workers for point_runs in runs.values() for run in point_runs})
    if len(counts) == 1:
        return f"{counts[0]} worker(s)"
    return f"{counts[0]} to {counts[-1]} workers, by point"


def verdict_summary(verdicts: list[str], runs: int) -> str:
    """How many of a campaign's runs the client judged OK (each run's verdict is listed)."""
    ok = sum(VERDICT_OK in text for text in verdicts)
    if not verdicts:
        return f"no verdict: none of the {runs} run(s) wrote a result"
    bad = len(verdicts) - ok
    return f"{ok} of {len(verdicts)} runs: client OK" + (f"; {bad} not: below" if bad else "")


def _value(row: dict[str, str], key: str, num_runs: int) -> tuple[float, float, float]:
    """A metric of a summary.csv row: its mean and its interval's ends (NaN where empty)."""

    def number(text: str | None) -> float:
        return float(text) if text not in (None, "") else math.nan

    if num_runs == 1:
        return number(row.get(key)), math.nan, math.nan
    return tuple(  # type: ignore[return-value]
        number(row.get(f"{key}{s}")) for s in ("_mean_of_runs", "_ci95_t_low", "_ci95_t_high")
    )


def trade_off_planes(points: list[CampaignPoint], num_runs: int) -> list[TradeOff] | None:
    """Output tok/s against p99 TTFT and against p99 ITL, per point that has both; None with
    fewer than one such point."""
    planes = []
    for metric in ("p99_ttft_ms", "p99_itl_ms"):
        kept = [p for p in points
                if all(math.isfinite(_value(p.row, k, num_runs)[0])
                       for k in ("output_throughput", metric))]  # fmt: skip
        if not kept:
            return None
        xs = [_value(p.row, "output_throughput", num_runs) for p in kept]
        ys = [_value(p.row, metric, num_runs) for p in kept]
        planes.append(TradeOff(
            labels=[p.label for p in kept],
            x=[x[0] for x in xs], x_low=[x[1] for x in xs], x_high=[x[2] for x in xs],
            y=[y[0] for y in ys], y_low=[y[1] for y in ys], y_high=[y[2] for y in ys],
            front=pareto_front([x[0] for x in xs], [y[0] for y in ys]),
        ))  # fmt: skip
    return planes


_CAMPAIGN_FIGURES = figures_in(CAMPAIGN, pooling=False)
_MEASURED_WHEN_ASKED = {f.key for f in _CAMPAIGN_FIGURES if f.shown == "known"}
_PERCENTILE_KEY = re.compile(r"^p(\d+(?:\.\d+)?)_[a-z0-9_]+_ms")


def campaign_columns(percentiles: Sequence[float] = ()) -> tuple[str, ...]:
    """summary.csv's throughputs, its counts, then its latencies (with ``percentiles``, the
    runs' --metric-percentiles, beside p99)."""
    return (
        *(f.key for f in _CAMPAIGN_FIGURES if f.unit.endswith("/s")),
        *(f.key for f in _CAMPAIGN_FIGURES if not f.unit.endswith("/s")),
        *(key for key in metric_keys(percentiles) if key.endswith("_ms")),
    )


def row_percentiles(points: list[CampaignPoint]) -> list[float]:
    """The percentiles summary.csv's rows have columns for."""
    found = {
        float(m[1]) for point in points for key in point.row if (m := _PERCENTILE_KEY.match(key))
    }
    return sorted(found)


def column_title(key: str) -> str:
    """``p99_ttft_ms`` as ``p99 TTFT (ms)``, ``output_throughput`` as ``output tok/s``."""
    names = {
        "request_throughput": "req/s",
        "request_goodput": "goodput req/s",
        "output_throughput": "output tok/s",
    }
    if key in names:
        return names[key]
    parts = key.split("_")
    if len(parts) == 3 and parts[2] == "ms":
        return f"{parts[0]} {parts[1].upper()} (ms)"
    return key


def campaign_table(points: list[CampaignPoint], num_runs: int) -> Table:
    """summary.csv's rows: per point its runs and each metric (with repeats, the mean across
    runs above its 95 % interval)."""
    columns = [  # a figure measured only when asked (goodput) is left out when none has it
        key
        for key in campaign_columns(row_percentiles(points))
        if key not in _MEASURED_WHEN_ASKED
        or any(math.isfinite(_value(point.row, key, num_runs)[0]) for point in points)
    ]
    header = ["point", "runs ok", "trimmed", *map(column_title, columns)]
    rows = []
    for point in points:
        cells = [f"{point.label}\n{point.row['point']}",
                 f"{point.row['runs_ok']}/{point.row['runs']}",
                 point.row.get("steady_state_trimmed", "")]  # fmt: skip
        for key in columns:
            mean, low, high = _value(point.row, key, num_runs)
            cell = "-" if not math.isfinite(mean) else _format(mean)
            if math.isfinite(low):
                cell += f"\n[{_format(low)}, {_format(high)}]"
            cells.append(cell)
        rows.append(cells)
    return Table(header, rows)


def _format(value: float) -> str:
    """A table's number: whole (with thousands' commas) when it is one or large, else 2 places."""
    return f"{value:,.0f}" if abs(value) >= 1000 or value.is_integer() else f"{value:.2f}"


def plotly_js() -> Markup:
    """plotly.js itself, to inline once in the page."""
    from plotly.offline import get_plotlyjs

    return Markup(get_plotlyjs())


def render(**page: object) -> str:
    """The page from its parts (``figures``: title and the figure's HTML)."""
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = environment.from_string(PAGE_TEMPLATE)
    figures = [(title, Markup(html)) for title, html in page.pop("figures")]  # type: ignore[attr-defined]
    return template.render(
        **page, figures=figures, plotly_js=plotly_js(),
        generated=datetime.now().astimezone().isoformat(timespec="seconds"),
    )  # fmt: skip


def write_campaign_report(folder: str, output: str | None = None) -> Path:
    """Draw a campaign folder's page to ``output`` (default ``FOLDER/report.html``)."""
    target = Path(output) if output else Path(folder) / CAMPAIGN_REPORT
    target.write_text(campaign_page(Path(folder)), encoding="utf-8")
    return target


def campaign_report_line(folder: str) -> str:
    """Draw a campaign's report.html at its end; the line that says where, or why it was
    skipped (the campaign's results stand either way)."""
    if problem := plotly_missing():
        return f"{CAMPAIGN_REPORT} skipped: {problem}"
    try:
        path = write_campaign_report(folder)
    except Exception as exc:  # a page is not worth the campaign's exit code
        return f"{CAMPAIGN_REPORT} skipped: {redact_text(str(exc))}"
    return f"Report written to {path}"

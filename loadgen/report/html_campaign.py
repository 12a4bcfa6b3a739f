"""report.html of a campaign, drawn from its folder.

summary.csv says which points there were, how many runs each had and why runs failed; every
figure the page shows comes from the runs' reports, rebuilt from their records files as
``loadgen report RECORDS`` rebuilds them (``build_report``). The table is summary.csv's rows
computed again from those summaries by the function that wrote them
(``campaign_summary.summary_rows``), its columns the metric table's rows whose views name
``campaign``, titled by the table; the verdicts and the --fail-on gates are each run's. So
``loadgen report FOLDER --format html`` and the campaign's own end draw the same page, and a
metric added to the table gets its column without another edit.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.records.checks import RecordsFileError
from loadgen.records.read import read_records
from loadgen.records.redact import redact_text
from loadgen.report.campaign_summary import (
    PointRuns,
    interval_notes,
    run_problem,
    run_replicates,
    summary_metrics,
    summary_rows,
)
from loadgen.report.html_charts import (
    OVER_TIME_TITLE,
    TRADE_OFF_LATENCIES,
    TradeOff,
    cdf_figure,
    over_time_figure,
    trade_off_figure,
)
from loadgen.report.html_figures import pareto_front, point_label
from loadgen.report.html_report import (
    FAILURE_OUTCOMES,
    GENERATION_CDFS,
    POOLING_CDFS,
    RECORDS_SUFFIX,
    VERDICT_OK,
    ServerRecord,
    Table,
    failure_rows,
    render,
    run_latencies,
    run_over_time,
    server_record,
    settings_rows,
)
from loadgen.report.intervals import MIN_RUNS
from loadgen.report.metric_table import CAMPAIGN, FIGURE_BY_KEY, figures_in, latencies_in
from loadgen.report.report_output import NO_FILES
from loadgen.report.run_report import Report, build_report
from loadgen.report.run_summary import RunSummary
from loadgen.report.settings import stored_settings
from loadgen.report.slo import best_line, mark_points, read_campaign_json, slo_gates, with_slo
from loadgen.report.steady import campaign_statistics

CAMPAIGN_REPORT = "report.html"
_RUN_NUMBER = re.compile(r"-run=(\d+)\.records\.arrow$")
_UNDATED = ""  # a run's result JSON is not written here: its date stamp is never read


@dataclass
class CampaignPoint:
    """One point of a campaign folder: its summary.csv row (the point, its runs, their errors),
    its label, its runs' records files and the reports rebuilt from them."""

    row: dict[str, str]
    label: str
    records: list[Path]  # by run number
    reports: list[Report] = field(default_factory=list)  # one per records file, in its order
    servers: list[ServerRecord] = field(default_factory=list)  # the server's series, likewise

    @property
    def name(self) -> str:
        """The point's folder: ``max_concurrency=4-request_rate=inf``."""
        return self.row["point"]

    def run_name(self, index: int) -> str:
        """``run=1``: the run whose records are ``records[index]``."""
        return self.records[index].name.removesuffix(RECORDS_SUFFIX).rpartition("-")[2]

    def counted(self) -> list[RunSummary]:
        """The summaries of the runs the campaign counted (``run_problem``: it lost no workers,
        it ended, a request completed)."""
        return [r.summary for r in self.reports if run_problem(r.summary) is None]


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
        label = point_label(_cap(row), float(row["request_rate"]), caps_vary=len(caps) > 1,
                            rates_vary=len(rates) > 1)  # fmt: skip
        files = sorted((folder / row["point"]).glob(f"*{RECORDS_SUFFIX}"), key=_run_number)
        points.append(CampaignPoint(row, label, files))
    return points


def _cap(row: dict[str, str]) -> int | None:
    return int(row["max_concurrency"]) if row["max_concurrency"] else None


def _run_number(path: Path) -> tuple[int, str]:
    match = _RUN_NUMBER.search(path.name)
    return (int(match[1]) if match else -1, path.name)


def read_reports(points: list[CampaignPoint]) -> None:
    """Each run's report, rebuilt from its records file with the settings it ran with (its
    files are the campaign's: none is written here)."""
    for point in points:
        for path in point.records:
            run = read_records(str(path))
            settings = stored_settings(run, str(path))
            point.reports.append(build_report(settings, NO_FILES, run, date=_UNDATED))
            point.servers.append(server_record(run))


def campaign_page(folder: Path) -> str:
    """The page of a campaign from its folder."""
    points = campaign_points(folder)
    with_runs = [p for p in points if p.records]
    if not with_runs:
        raise RecordsFileError(f"{folder}: no run of any point left a records file")
    read_reports(points)
    first = with_runs[0].reports[0].summary
    settings = first.settings
    search = settings.search
    num_runs = 1 if search else int(points[0].row["runs"])  # a search's columns: each load's mean
    steady = settings.steady_state
    runs = point_runs(points, steady)
    figures = summary_rows(runs, num_runs, settings.percentiles)
    for row, point in zip(figures, points, strict=True):
        row["runs"] = int(point.row["runs"])  # a search's loads have their own counts
    slo = settings.slo
    marks = mark_points(runs, slo_gates(slo)) if slo else None
    figures = with_slo(figures, marks) if marks is not None else figures
    shape = (f"a search of {search}: {len(points)} load(s)" if search
             else f"{len(points)} point(s), {num_runs} run(s) each")  # fmt: skip
    extra = [("campaign", shape + (", steady state only" if steady else ""))]
    if slo:
        extra.append(("SLO", ", ".join(slo)))
    over_time = [
        run_over_time(
            f"{p.label} (run 0)" if num_runs > 1 else p.label, p.reports[0].summary, p.servers[0]
        )
        for p in with_runs
    ]
    pooling = first.settings.pooling
    names = POOLING_CDFS if pooling else GENERATION_CDFS
    latencies = [run_latencies(p.label, [r.summary for r in p.reports]) for p in with_runs]
    charts = [("Latency distributions", cdf_figure(latencies, names))]
    planes = trade_off_planes(points, figures, num_runs, slo=marks is not None)
    if planes is not None:
        for plane, metric in zip(planes, TRADE_OFF_LATENCIES, strict=True):
            plane.limit = slo_limit(slo, f"p99_{metric}_ms")
    if planes is not None:
        charts.append(("Throughput and latency", trade_off_figure(planes)))
    caption = (" (one point at a time, the point's first run: open it below)"
               if len(over_time) > 1 else "")  # fmt: skip
    charts.append((f"{OVER_TIME_TITLE}{caption}",
                   over_time_figure(over_time, tokens=not pooling)))  # fmt: skip
    verdicts = run_verdicts(points)
    total_runs = sum(len(p.records) for p in points) if search else num_runs * len(points)
    notes = [f"{p.label}: {redact_text(p.row['error'])}" for p in points if p.row.get("error")]
    if marks is not None:
        notes.insert(0, best_line(slo, runs, marks))
    document = read_campaign_json(str(folder))
    tables = []
    if search and document is not None and isinstance(document.get("search"), dict):
        notes.insert(0, search_line(document["search"]))
        tables.append(("Search", SEARCH_NOTE, search_table(document["search"])))
    return render(
        title=folder.resolve().name,
        kind="campaign",
        settings=settings_rows(first, extra, campaign_workers(points)),
        verdicts=[*verdicts, *((line, False) for line in gate_lines(points))],
        verdict_summary=verdict_summary([text for text, _ in verdicts], total_runs),
        notes=notes,
        summary=campaign_table(points, figures, num_runs, pooling),
        failures=campaign_failures(with_runs),
        failures_note="each point's runs added up"
        + ("; each point's first run over time, below" if len(with_runs) > 1 else ""),
        tables=tables,
        summary_note="; ".join([SUMMARY_NOTE, *interval_notes(figures, num_runs)]),
        figures=charts,
    )


def point_figures(
    points: list[CampaignPoint], num_runs: int, steady: bool, percentiles: Sequence[float]
) -> list[dict[str, object]]:
    """summary.csv's row of each point, from the summaries of the runs the campaign counted."""
    return summary_rows(point_runs(points, steady), num_runs, percentiles)


def point_runs(points: list[CampaignPoint], steady: bool) -> list[PointRuns]:
    """Each point's counted runs' metrics (as the campaign measured them), and the errors
    summary.csv gave it."""
    runs = []
    for point in points:
        counted = point.counted()
        measured = [summary_metrics(summary, steady) for summary in counted]
        drawn = [run_replicates(s, steady) for s in counted] if len(counted) >= MIN_RUNS else []
        errors = [text for text in point.row.get("error", "").split("; ") if text]
        runs.append(PointRuns(point.name, _cap(point.row), float(point.row["request_rate"]),
                              metrics=[metrics for metrics, _ in measured],
                              trimmed=[trimmed for _, trimmed in measured],
                              error_kinds=[r.summary.errors.by_kind for r in point.reports],
                              errors=errors, replicates=drawn))  # fmt: skip
    return runs


SUMMARY_NOTE = "summary.csv's rows, computed again from each run's records"
SEARCH_NOTE = (
    "every run of the search in order; the evidence: each SLO key's value and its 95 % interval "
    "(a bootstrap over the run's requests), for the run, then for its load's runs pooled (over "
    "their requests; with 3 runs or more over the runs and their requests)"
)


def search_line(search: dict[str, Any]) -> str:
    """The search's answer, from the campaign's JSON."""
    kind, best = search.get("kind", ""), search.get("best")
    if best is None:
        return f"Search of {kind}: no load met the SLO ({search.get('stopped', '')})"
    return f"Highest {kind} within the SLO: {best:g} ({search.get('stopped', '')})"


def search_table(search: dict[str, Any]) -> Table:
    """A row per probe of the search: its load, the run, this run's evidence, and the load's
    verdict on its runs so far."""
    table = Table(["probe", "load", "run", "this run", "the load's verdict", "its runs pooled"], [])
    for probe in search.get("probes", []):
        verdict = "meets the SLO" if probe["load_meets"] else "misses the SLO"
        if probe["load_near_line"]:
            verdict += "\nnear the line"
        table.rows.append([
            str(probe["probe"]), f"{probe['load']:g}\n{probe['point']}", f"run={probe['run']}",
            "failed" if probe["failed"] else _evidence(probe["estimates"]),
            verdict, f"{probe['load_runs']} run(s)\n{_evidence(probe['load_estimates'])}",
        ])  # fmt: skip
    return table


def _evidence(estimates: dict[str, dict[str, float | None]]) -> str:
    """``p99_ttft_ms 41.2 [39.0, 44.8]``, one key after another."""
    parts = []
    for key, e in estimates.items():
        value, low, high = e.get("value"), e.get("low"), e.get("high")
        text = f"{key} {'-' if value is None else _format(value)}"
        if low is not None and high is not None:
            text += f" [{_format(low)}, {_format(high)}]"
        parts.append(text)
    return "; ".join(parts)


def campaign_failures(points: list[CampaignPoint]) -> Table | None:
    """The requests that did not complete, by outcome and kind (rows, the most frequent
    first) and point (columns), each point's runs added up; None when all completed."""
    counts: dict[tuple[str, str], list[int]] = {}
    for k, point in enumerate(points):
        for report in point.reports:
            for outcome, kind, n in failure_rows(report.summary):
                counts.setdefault((outcome, kind), [0] * len(points))[k] += n
    if not counts:
        return None
    order = sorted(counts, key=lambda key: (FAILURE_OUTCOMES.index(key[0]), -sum(counts[key])))
    return Table(
        ["outcome", "kind", *(point.label for point in points)],
        [[outcome, kind, *(f"{n:,}" for n in counts[outcome, kind])] for outcome, kind in order],
    )


def run_verdicts(points: list[CampaignPoint]) -> list[tuple[str, bool]]:
    """Each run's verdict on its client, named by its point and run, and whether it is OK."""
    return [
        (f"{point.label} {point.run_name(i)}: {r.verdict}", r.verdict.startswith(VERDICT_OK))
        for point in points
        for i, r in enumerate(point.reports)
    ]


def gate_lines(points: list[CampaignPoint]) -> list[str]:
    """The --fail-on gates each run breached, one line each, named by its point and run."""
    return [
        f"{point.label} {point.run_name(i)}: {line}"
        for point in points
        for i, report in enumerate(point.reports)
        for line in report.breaches
    ]


def campaign_workers(points: list[CampaignPoint]) -> str:
    """The campaign's worker counts: one, or the range when points planned different ones
    (a point's cap can need fewer workers than the campaign started)."""
    counts = sorted({r.summary.identity.num_workers for p in points for r in p.reports})
    if len(counts) == 1:
        return f"{counts[0]} worker(s)"
    return f"{counts[0]} to {counts[-1]} workers, by point"


def verdict_summary(verdicts: list[str], runs: int) -> str:
    """How many of a campaign's runs the client judged OK (each run's verdict is listed)."""
    ok = sum(VERDICT_OK in text for text in verdicts)
    if not verdicts:
        return f"no verdict: none of the {runs} run(s) left its records"
    bad = len(verdicts) - ok
    return f"{ok} of {len(verdicts)} runs: client OK" + (f"; {bad} not: below" if bad else "")


def interval_keys(key: str) -> tuple[str, str]:
    """summary.csv's columns of a metric's interval across runs (absent: no interval)."""
    return f"{key}_ci95_low", f"{key}_ci95_high"


def _value(row: dict[str, object], key: str, num_runs: int) -> tuple[float, float, float]:
    """A metric of a summary.csv row: its mean and its interval's ends (NaN where empty or
    absent: no error bar)."""

    def number(cell: object) -> float:
        return math.nan if cell in (None, "") else float(cell)  # type: ignore[arg-type]

    if num_runs == 1:
        return number(row.get(key)), math.nan, math.nan
    low, high = interval_keys(key)
    return number(row.get(f"{key}_mean_of_runs")), number(row.get(low)), number(row.get(high))


def trade_off_planes(
    points: list[CampaignPoint], rows: list[dict[str, object]], num_runs: int, slo: bool = False
) -> list[TradeOff] | None:
    """Output tok/s against p99 TTFT and against p99 ITL, per point that has both, each marked
    as meeting --slo or not (``slo``: the rows have ``slo_met``); None with fewer than one such
    point. An interval's low end is drawn from 0 at the lowest: neither a throughput nor a
    latency is negative, though two runs' t interval can reach below."""
    planes = []
    for metric in (f"p99_{key}_ms" for key in TRADE_OFF_LATENCIES):
        kept = [(p, row) for p, row in zip(points, rows, strict=True)
                if all(math.isfinite(_value(row, k, num_runs)[0])
                       for k in ("output_throughput", metric))]  # fmt: skip
        if not kept:
            return None
        xs = [_value(row, "output_throughput", num_runs) for _, row in kept]
        ys = [_value(row, metric, num_runs) for _, row in kept]
        planes.append(TradeOff(
            labels=[p.label for p, _ in kept],
            x=[x[0] for x in xs], x_low=[_from_0(x[1]) for x in xs], x_high=[x[2] for x in xs],
            y=[y[0] for y in ys], y_low=[_from_0(y[1]) for y in ys], y_high=[y[2] for y in ys],
            front=pareto_front([x[0] for x in xs], [y[0] for y in ys]),
            meets=[row.get("slo_met") == "yes" for _, row in kept] if slo else None,
        ))  # fmt: skip
    return planes


_LIMIT = re.compile(r"^\s*([a-z0-9_.]+)\s*(<=|<)\s*([0-9.]+)\s*$")


def slo_limit(conditions: Sequence[str], key: str) -> float | None:
    """The bound --slo puts on ``key`` from above (``p99_ttft_ms<=500``: 500), if any."""
    for condition in conditions:
        for part in condition.split(","):
            match = _LIMIT.match(part)
            if match and match[1] == key:
                return float(match[3])
    return None


def _from_0(low: float) -> float:
    return max(low, 0.0) if math.isfinite(low) else low


def campaign_columns(percentiles: Sequence[float], pooling: bool) -> list[tuple[str, str]]:
    """summary.csv's figures as (key, the metric table's title): the throughputs, the counts,
    then each latency's statistics (``percentiles``: the runs' --metric-percentiles)."""
    figures = figures_in(CAMPAIGN, pooling)
    statistics = campaign_statistics(percentiles)
    return [
        *((f.key, f.title) for f in figures if f.unit.endswith("/s")),
        *((f.key, f.title) for f in figures if not f.unit.endswith("/s")),
        *(
            (f"{stat}_{latency.key}_ms", latency.column(stat))
            for latency in latencies_in(CAMPAIGN)
            for stat in statistics
        ),
    ]


def campaign_table(
    points: list[CampaignPoint], rows: list[dict[str, object]], num_runs: int, pooling: bool
) -> Table:
    """Per point: its runs counted, the requests the steady state trimmed, the client's
    verdicts (and the --fail-on gates where any were set), then each figure (with repeats,
    the mean across runs above its 95 % interval)."""
    percentiles = next((r.summary.settings.percentiles for p in points for r in p.reports), ())
    gated = any(r.summary.settings.fail_on for p in points for r in p.reports)
    columns = [  # a figure measured only when asked (goodput) is left out when none has it
        (key, title)
        for key, title in campaign_columns(percentiles, pooling)
        if key not in FIGURE_BY_KEY
        or FIGURE_BY_KEY[key].shown != "known"
        or any(math.isfinite(_value(row, key, num_runs)[0]) for row in rows)
    ]
    slo = bool(rows) and "slo_met_runs" in rows[0]
    header = ["point", "runs ok", "trimmed", "client OK", *(["gates breached"] if gated else []),
              *(["SLO met"] if slo else [])]  # fmt: skip
    table = Table([*header, *(title for _, title in columns)], [])
    for point, row in zip(points, rows, strict=True):
        judged = [r.verdict.startswith(VERDICT_OK) for r in point.reports]
        cells = [f"{point.label}\n{point.name}", f"{row['runs_ok']}/{row['runs']}",
                 str(row["steady_state_trimmed"]), f"{sum(judged)}/{len(judged)}"]  # fmt: skip
        if gated:
            cells.append(f"{sum(bool(r.breaches) for r in point.reports)}/{len(judged)}")
        if slo:
            cells.append(f"{row['slo_met_runs']}/{row['runs']}"
                         + ("\nthe point meets it" if row["slo_met"] == "yes" else ""))  # fmt: skip
        for key, _ in columns:
            mean, low, high = _value(row, key, num_runs)
            cell = "-" if not math.isfinite(mean) else _format(mean)
            if math.isfinite(low):
                cell += f"\n[{_format(low)}, {_format(high)}]"
            cells.append(cell)
        table.rows.append(cells)
    return table


def _format(value: float) -> str:
    """A table's number: whole (with thousands' commas) when it is one or large, else 2 places."""
    return f"{value:,.0f}" if abs(value) >= 1000 or value.is_integer() else f"{value:.2f}"


def write_campaign_report(folder: str, output: str | None = None) -> Path:
    """Draw a campaign folder's page to ``output`` (default ``FOLDER/report.html``)."""
    target = Path(output) if output else Path(folder) / CAMPAIGN_REPORT
    target.write_text(campaign_page(Path(folder)), encoding="utf-8")
    return target


def campaign_report_line(folder: str) -> str:
    """Draw a campaign's report.html at its end; the line that says where, or why it was
    skipped (the campaign's results stand either way)."""
    try:
        path = write_campaign_report(folder)
    except Exception as exc:  # a page is not worth the campaign's exit code
        return f"{CAMPAIGN_REPORT} skipped: {redact_text(str(exc))}"
    return f"Report written to {path}"

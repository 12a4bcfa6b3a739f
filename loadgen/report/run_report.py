"""A run's report from its records: the console summary, the plots and the result JSON.

``build_report`` is a function of plain data (the run's ``Settings``, the files its
``ReportOutput`` asks for, and ``RunRecords``): it summarizes the run once (``summarize``) and
renders that summary as the console lines (``summary.console_lines``) and the result JSON
(``result_json.result_json``); it opens no socket and reads no clock, so the live run and
``loadgen report RECORDS`` build the same report. ``write_report`` shows it and writes its
files. Neither reads the configuration: loadgen/report/settings.py builds both once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.console import show_report
from loadgen.records.model import RunRecords
from loadgen.report.gates import breaches
from loadgen.report.metrics import RequestResults, Timings
from loadgen.report.plots import (
    timeline_segments,
    write_dataset_stats_png,
    write_timeline_html,
)
from loadgen.report.report_output import ReportOutput
from loadgen.report.result_json import result_json, result_path, write_result
from loadgen.report.run_summary import RunSummary, Settings
from loadgen.report.summarize import summarize, with_gates
from loadgen.report.summary import console_lines

log = logging.getLogger(__name__)


@dataclass
class Report:
    """A run's report, built and not yet shown: its summary, the console lines, the result JSON
    (when the flags ask for one), the result file's path and the files to write."""

    summary: RunSummary
    lines: list[str]
    result: dict[str, Any] | None
    path: str  # the result file's path (upstream's name, or --result-filename)
    output: ReportOutput  # what write_report writes
    # --plot-timeline's per-request ITLs (s), read while the records file is there (a
    # temporary one is removed before write_report); None when no timeline is drawn
    timeline_itls: list[list[float]] | None = None

    @property
    def results(self) -> RequestResults:
        """What the run measured, per request."""
        return self.summary.requests.results

    @property
    def timings(self) -> Timings:
        """Each request's latencies."""
        return self.summary.requests.timings

    @property
    def completed(self) -> int:
        """How many requests succeeded."""
        return self.summary.totals.completed

    @property
    def first_error(self) -> str:
        """The first request's error in request order ("" when none failed)."""
        return self.summary.errors.first

    @property
    def caveat(self) -> str | None:
        """Why the report covers only part of the run, if it does."""
        return self.summary.ending.caveat

    @property
    def breaches(self) -> list[str]:
        """The --fail-on gates the result breaches, one line each."""
        return self.summary.gates

    @property
    def verdict(self) -> str:
        """The client's verdict, the console's last line and the JSON's last key."""
        return self.summary.client.verdict


def build_report(settings: Settings, output: ReportOutput, run: RunRecords, *, date: str) -> Report:
    """The report of a run's records under its settings: its summary (``summarize``) rendered
    as the console lines and, when ``output`` writes it, the result JSON (``date`` stamps it:
    upstream's ``%Y%m%d-%H%M%S``). A run that never ended (the records of a crash) is reported
    as interrupted, with what its records hold."""
    summary = summarize(settings, run)
    result = None
    if output.writes_result or settings.fail_on:
        result = result_json(summary, date)
        if settings.fail_on:
            summary = with_gates(summary, breaches(settings.fail_on, result))
    return Report(
        summary=summary,
        lines=console_lines(summary),
        result=result if output.writes_result else None,
        path=result_path(settings, output, summary.identity.model_id, date),
        output=output,
        timeline_itls=(
            [gaps.tolist() for gaps in summary.requests.timings.itl_lists()]
            if output.plot_timeline and not settings.pooling
            else None
        ),
    )


def write_report(report: Report) -> None:
    """Show the report (loadgen/console.py) and write the plots and the result file its
    ``output`` asks for."""
    show_report(report.lines, report.summary)
    output = report.output
    if output.plot_timeline or output.plot_dataset_stats:  # upstream draws before it saves
        _plot(output, report.summary.settings.pooling, Path(report.path), report)
    if report.result is not None:
        write_result(report.path, report.result, append=output.append_result)
        log.info(f"Results written to {report.path}")


def _plot(output: ReportOutput, pooling: bool, path: Path, report: Report) -> None:
    """--plot-timeline and --plot-dataset-stats beside the result file; a figure that cannot be
    drawn is a warning, as upstream, and the results are still written."""
    results, timings = report.results, report.timings
    path.parent.mkdir(parents=True, exist_ok=True)  # --result-dir, as for the result file
    if output.plot_timeline:
        assert output.itl_thresholds_s is not None  # ReportOutput requires them
        timeline = path.with_suffix(".timeline.html")
        if pooling:
            log.warning("warning: --plot-timeline draws token timings; a pooling run has none")
        else:
            try:
                segments = timeline_segments(
                    results.sent_s,
                    timings.ttft_s,
                    report.timeline_itls or [[] for _ in range(results.num_requests)],
                    results.prompt_lens,
                    results.output_lens,
                    output.itl_thresholds_s,
                )
                write_timeline_html(segments, timeline, output.itl_thresholds_s)
                log.info(f"Timeline plot saved to: {timeline}")
            except Exception as exc:  # a figure is not worth the results
                log.warning(f"warning: Failed to generate timeline plot: {exc}")
    if output.plot_dataset_stats:
        stats = path.with_suffix(".dataset_stats.png")
        try:
            write_dataset_stats_png(results.prompt_lens, results.output_lens, stats)
            log.info(f"Dataset statistics plot saved to: {stats}")
        except Exception as exc:
            log.warning(f"warning: Failed to generate dataset statistics plot: {exc}")

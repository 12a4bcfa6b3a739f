"""A run's report from its records: the console summary, the plots and the result JSON.

``build_report`` is a function of plain data (the configuration and ``RunRecords``): it
summarizes the run once (``summarize``) and renders that summary as the console lines
(``summary.console_lines``) and the result JSON (``result_json.result_json``); it opens no
socket and reads no clock, so the live run and ``loadgen report RECORDS`` build the same report.
``write_report`` shows it and writes its files.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.config import RunConfig, parse_itl_thresholds
from loadgen.console import show_report
from loadgen.records.model import RunRecords
from loadgen.report.gates import breaches
from loadgen.report.metrics import RequestResults, Timings
from loadgen.report.plots import (
    timeline_segments,
    write_dataset_stats_png,
    write_timeline_html,
)
from loadgen.report.result_json import result_json, result_path, write_result
from loadgen.report.run_summary import RunSummary
from loadgen.report.summarize import summarize, with_gates
from loadgen.report.summary import console_lines

log = logging.getLogger(__name__)


@dataclass
class Report:
    """A run's report, built and not yet shown: its summary, the console lines, the result JSON
    (when the flags ask for one) and the result file's path."""

    summary: RunSummary
    lines: list[str]
    result: dict[str, Any] | None
    path: str  # the result file's path (upstream's name, or --result-filename)

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


def build_report(config: RunConfig, run: RunRecords, *, date: str) -> Report:
    """The report of a run's records: its summary (``summarize``) rendered as the console lines
    and, when the flags ask for it, the result JSON (``date`` stamps it: upstream's
    ``%Y%m%d-%H%M%S``). A run that never ended (the records of a crash) is reported as
    interrupted, with what its records hold."""
    summary = summarize(config, run)
    result = None
    if config.save_result or config.append_result or config.fail_on:
        result = result_json(summary, date)
        if config.fail_on:
            summary = with_gates(summary, breaches(config.fail_on, result))
    return Report(
        summary=summary,
        lines=console_lines(summary),
        result=result if config.save_result or config.append_result else None,
        path=result_path(config, summary.identity.model_id, date),
    )


def write_report(config: RunConfig, report: Report) -> None:
    """Show the report (loadgen/console.py) and write the plots and the result file the flags
    ask for."""
    show_report(report.lines, report.summary)
    if config.plot_timeline or config.plot_dataset_stats:  # upstream draws before it saves
        _plot(config, Path(report.path), report.results, report.timings)
    if report.result is not None:
        write_result(report.path, report.result, append=config.append_result)
        log.info(f"Results written to {report.path}")


def _plot(config: RunConfig, path: Path, results: RequestResults, timings: Timings) -> None:
    """--plot-timeline and --plot-dataset-stats beside the result file; a figure that cannot be
    drawn is a warning, as upstream, and the results are still written."""
    path.parent.mkdir(parents=True, exist_ok=True)  # --result-dir, as for the result file
    if config.plot_timeline:
        timeline = path.with_suffix(".timeline.html")
        if config.pooling:
            log.warning("warning: --plot-timeline draws token timings; a pooling run has none")
        else:
            try:
                segments = timeline_segments(
                    results.sent_s,
                    timings.ttft_s,
                    [timings.itls_of(i).tolist() for i in range(results.num_requests)],
                    results.prompt_lens,
                    results.output_lens,
                    parse_itl_thresholds(config.timeline_itl_thresholds),
                )
                write_timeline_html(
                    segments, timeline, parse_itl_thresholds(config.timeline_itl_thresholds)
                )
                log.info(f"Timeline plot saved to: {timeline}")
            except Exception as exc:  # a figure is not worth the results
                log.warning(f"warning: Failed to generate timeline plot: {exc}")
    if config.plot_dataset_stats:
        stats = path.with_suffix(".dataset_stats.png")
        try:
            write_dataset_stats_png(results.prompt_lens, results.output_lens, stats)
            log.info(f"Dataset statistics plot saved to: {stats}")
        except Exception as exc:
            log.warning(f"warning: Failed to generate dataset statistics plot: {exc}")

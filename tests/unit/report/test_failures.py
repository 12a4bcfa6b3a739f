"""The requests that did not complete (loadgen/report/failures.py): each one's outcome, the
failed counted by kind, and every view that shows them (console, result JSON, per-request
rows, summary.csv, report.html's tables and failures over time), from made-up runs: no
sockets, no files."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from report_runs import CANCELLED_AT, NOT_SENT_AT, N, full_config, made_up_run, stopped_run
from svg_charts import charts, details

from loadgen.report.campaign_summary import (
    PointRuns,
    summary_metrics,
    summary_rows,
    summary_table,
    top_error_kind,
)
from loadgen.report.exports import request_rows
from loadgen.report.failures import (
    CANCELLED,
    COMPLETED,
    ERROR_KIND_CHARS,
    FAILED,
    NOT_SENT,
    error_kind,
    failure_lines,
    kinds_line,
    kinds_of_failed,
    outcomes,
)
from loadgen.report.gates import breaches
from loadgen.report.html_campaign import CampaignPoint, campaign_failures
from loadgen.report.html_charts import CANCELLED_LABEL, FAILURES_TITLE, over_time_figure
from loadgen.report.html_figures import OTHER_FAILURES, failures_per_s, time_bins
from loadgen.report.html_report import failures_table, run_over_time
from loadgen.report.result_json import result_json
from loadgen.report.rows import row
from loadgen.report.run_report import build_report
from loadgen.report.settings import output_of, settings_of
from loadgen.report.summarize import summarize
from loadgen.report.summary import console_lines
from workers import worker

SERVER_ERROR = "HTTP 500"  # the made-up runs' failure: "HTTP 500: boom"


def test_a_request_s_error_says_whether_it_failed_was_cancelled_or_never_sent() -> None:
    errors = [
        "",
        worker.NOT_SENT_AT_STOP,
        f"{worker.NOT_SENT_AFTER_FAILED_TURN} (turn 1: HTTP 500)",
        worker.CANCELLED,
        "HTTP 500 Internal Server Error: boom",
        "lost: worker 0 died",  # its worker never reported it: sent or not, nobody knows
        "",  # a failure without a text is a failure
        "request timeout: no answer within 5 s (--request-timeout)",
    ]
    success = np.array([True] + [False] * 7)
    assert outcomes(success, errors).tolist() == [
        COMPLETED, NOT_SENT, NOT_SENT, CANCELLED, FAILED, FAILED, FAILED, FAILED,
    ]  # fmt: skip


def test_an_error_s_kind_is_its_first_words_printable_and_capped() -> None:
    assert error_kind("HTTP 500 Internal Server Error: boom") == "HTTP 500 Internal Server Error"
    assert error_kind("ClientOSError: [Errno 104] reset") == "ClientOSError"
    assert error_kind("one two three four five six seven") == "one two three four five"
    assert error_kind("HTTP 400 \x1b[31mBad\x1b[0m\r\nRequest: x") == "HTTP 400 Bad Request"
    assert error_kind(": nothing before the colon") == "(empty)"
    long = error_kind("x" * 500 + ": a server's one long word")
    assert len(long) == ERROR_KIND_CHARS and long.endswith("…")


def test_the_kinds_count_the_failed_alone() -> None:
    errors = ["", "HTTP 500 Internal Server Error: a", worker.CANCELLED, worker.NOT_SENT_AT_STOP,
              "HTTP 500 Internal Server Error: b", "HTTP 503 Service Unavailable: c"]  # fmt: skip
    outcome = outcomes(np.array([True] + [False] * 5), errors)
    by_kind = kinds_of_failed(outcome, errors)
    assert by_kind == {"HTTP 500 Internal Server Error": 2, "HTTP 503 Service Unavailable": 1}
    assert sum(by_kind.values()) == int((outcome == FAILED).sum())


def test_the_console_lists_five_kinds_then_counts_the_rest() -> None:
    by_kind = {f"kind {k}": 10 - k for k in range(7)}
    assert kinds_line(by_kind) == (
        "failed requests by kind: 10 × kind 0, 9 × kind 1, 8 × kind 2, 7 × kind 3, "
        "6 × kind 4, 9 × 2 other kind(s)"
    )
    assert failure_lines({}, 0, 0, 0) == []  # a run whose requests all completed says nothing
    assert failure_lines({"HTTP 500": 3}, 3, 0, 0) == ["failed requests by kind: 3 × HTTP 500"]


def test_a_stopped_run_counts_failed_cancelled_and_not_sent_apart() -> None:
    cfg = full_config()
    summary = summarize(settings_of(cfg), stopped_run(cfg))
    totals = summary.totals
    assert (totals.completed, totals.failed, totals.cancelled, totals.not_sent) == (5, 1, 1, 1)
    assert summary.errors.by_kind == {SERVER_ERROR: 1}
    assert summary.errors.outcome[[CANCELLED_AT, NOT_SENT_AT, N - 1]].tolist() == [
        CANCELLED, NOT_SENT, FAILED,
    ]  # fmt: skip


def test_the_console_shows_upstream_s_failures_then_the_rest_by_kind() -> None:
    cfg = full_config()
    lines = console_lines(summarize(settings_of(cfg), stopped_run(cfg)))
    # Upstream's lines: the failed alone, as upstream counts them.
    assert lines[:2] == [
        "Failed requests during benchmark run detected (capping to 10):",
        "Error 0: HTTP 500: boom",
    ]
    assert "Error 1:" not in "\n".join(lines)
    failed_row = row("Failed requests:", 1, "")
    assert failed_row in lines
    after = lines[lines.index(failed_row) :]
    assert "failed requests by kind: 1 × HTTP 500" in after
    assert (
        "requests not completed: 1 failed, 1 cancelled (in flight when the run stopped), "
        "1 not sent (they never left the client)"
    ) in after


def test_a_run_that_only_failed_prints_its_kinds_and_no_counts_line() -> None:
    cfg = full_config()
    lines = console_lines(summarize(settings_of(cfg), made_up_run(cfg)))
    assert "failed requests by kind: 1 × HTTP 500" in lines
    assert not any(line.startswith("requests not completed") for line in lines)


def test_the_result_json_keeps_upstream_s_failed_and_adds_the_rest() -> None:
    cfg = full_config()
    result = result_json(summarize(settings_of(cfg), stopped_run(cfg)), "d")
    assert (result["completed"], result["failed"]) == (5, 1)
    assert result["loadgen"]["errors"] == {
        "failed": 1,
        "cancelled": 1,
        "not_sent": 1,
        "by_kind": {SERVER_ERROR: 1},
    }
    assert list(result["loadgen"])[-1] == "verdict"  # still last


def test_each_exported_row_has_its_outcome_and_kind() -> None:
    cfg = full_config()
    rows = request_rows(summarize(settings_of(cfg), stopped_run(cfg)), None)
    assert [row["outcome"] for row in rows] == [
        *["completed"] * 5, "cancelled", "not_sent", "failed",
    ]  # fmt: skip
    assert [row["error_kind"] for row in rows[CANCELLED_AT:]] == [
        "cancelled", "not sent", SERVER_ERROR,
    ]  # fmt: skip
    assert rows[0]["error_kind"] is None


def test_summary_csv_has_the_counts_and_the_top_kind() -> None:
    cfg = full_config()
    summary = summarize(settings_of(cfg), stopped_run(cfg))
    metrics, _ = summary_metrics(summary)
    assert (metrics["failed"], metrics["cancelled"], metrics["not_sent"]) == (1, 1, 1)
    steady, _ = summary_metrics(summary, steady=True)
    assert steady["not_sent"] == 1  # never in a window: the run's own count
    point = PointRuns("p", 4, 100.0, metrics=[metrics], error_kinds=[summary.errors.by_kind])
    (row,) = summary_rows([point], num_runs=1)
    assert (row["failed"], row["cancelled"], row["not_sent"]) == (1, 1, 1)
    assert row["top_error_kind"] == SERVER_ERROR
    assert f"  failed requests, most often: {SERVER_ERROR}" in summary_table([row], 1)


def test_the_top_kind_is_the_most_frequent_over_a_point_s_runs() -> None:
    assert top_error_kind([{"a": 2, "b": 1}, {"b": 2}]) == "b"
    assert top_error_kind([{}, {}]) == ""


def test_report_html_tabulates_the_run_s_failures() -> None:
    cfg = full_config()
    summary = summarize(settings_of(cfg), stopped_run(cfg))
    table = failures_table(summary)
    assert table is not None
    assert table.rows == [
        ["failed", SERVER_ERROR, "1", "12.5 %"],
        ["cancelled", "in flight when the run stopped", "1", "12.5 %"],
        ["not sent", "never left the client", "1", "12.5 %"],
    ]
    completed = dataclasses.replace(
        summary,
        totals=dataclasses.replace(summary.totals, failed=0, cancelled=0, not_sent=0),
        errors=dataclasses.replace(summary.errors, by_kind={}),
    )
    assert failures_table(completed) is None  # no table where every request completed


def test_report_html_tabulates_each_campaign_point_s_failures() -> None:
    cfg = full_config()
    stopped = build_report(settings_of(cfg), output_of(cfg), stopped_run(cfg), date="d")
    failed = build_report(settings_of(cfg), output_of(cfg), made_up_run(cfg), date="d")
    row = {"point": "p", "max_concurrency": "4", "request_rate": "100.0", "runs": "2"}
    points = [
        CampaignPoint(row, "c=4", [], [stopped, failed]),
        CampaignPoint(row, "c=8", [], [failed]),
    ]
    table = campaign_failures(points)
    assert table is not None
    assert table.header == ["outcome", "kind", "c=4", "c=8"]
    assert table.rows == [
        ["failed", SERVER_ERROR, "2", "1"],
        ["cancelled", "in flight when the run stopped", "1", "0"],
        ["not sent", "never left the client", "1", "0"],
    ]


def test_failures_over_time_count_each_failure_at_its_end_by_kind() -> None:
    bins = time_bins(1.0, 4)  # 0.25 s bins
    end_s = np.array([0.1, 0.2, 0.3, 0.6, 0.9, 0.95, 0.5])
    labels = ["a", "a", "b", "a", "c", "d", ""]
    series = failures_per_s(end_s, labels, bins, listed=2)
    assert [label for label, _ in series] == ["a", "b", OTHER_FAILURES]
    per_bin = {label: (per_s * bins.width_s).tolist() for label, per_s in series}
    assert per_bin == {
        "a": [2, 0, 1, 0],
        "b": [0, 1, 0, 0],
        OTHER_FAILURES: [0, 0, 0, 2],
    }
    assert failures_per_s(end_s, [""] * len(end_s), bins) == []


def test_a_run_s_failures_over_time_hold_its_failed_and_cancelled() -> None:
    cfg = full_config()
    series = run_over_time("run", summarize(settings_of(cfg), stopped_run(cfg)))
    counted = {label: float(per_s.sum()) * series.width_s for label, per_s in series.failures_per_s}
    assert counted == pytest.approx({SERVER_ERROR: 1.0, CANCELLED_LABEL: 1.0})


def test_fail_on_gates_the_cancelled_and_the_not_sent() -> None:
    cfg = full_config()
    result = result_json(summarize(settings_of(cfg), stopped_run(cfg)), "d")
    conditions = ["loadgen.errors.not_sent>0", "loadgen.errors.cancelled>1", "failed>0"]
    assert breaches(conditions, result) == [
        "breached: loadgen.errors.not_sent>0 (measured 1)",
        "breached: failed>0 (measured 1)",
    ]


def test_each_point_s_over_time_section_shows_its_own_failures() -> None:
    """A campaign's over-time figure, one point at a time: each point's section (a
    ``<details>``, the first open) stacks its own failure kinds, in its own legend."""
    cfg = full_config()
    stopped = run_over_time("stopped", summarize(settings_of(cfg), stopped_run(cfg)))
    plain = run_over_time("plain", summarize(settings_of(cfg), made_up_run(cfg)))
    page = over_time_figure([stopped, plain])
    assert page.startswith("<details open><summary>stopped</summary>")
    sections = details(page)
    assert [summary for summary, _ in sections] == ["stopped", "plain"]
    legends = []
    for _, body in sections:
        (failures,) = [chart for chart in charts(body) if chart.title == FAILURES_TITLE]
        legends.append(failures.legend)
    # the stack is drawn tallest first: the most frequent kind's band last, on top
    assert legends == [[CANCELLED_LABEL, SERVER_ERROR], [SERVER_ERROR]]
    flight = [chart for chart in charts(sections[1][1]) if chart.title == "Requests in flight"]
    assert flight[0].legend == ["mean in the bin", "peak in the bin"]

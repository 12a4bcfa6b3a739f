"""``-q/--quiet``: the option, and the stdout filter that keeps only the report (the summary table
through the client's verdict)."""

from __future__ import annotations

import io

import pytest

from loadgen.cli.quiet import ReportOnlyStdout
from loadgen.cli.run import run_command
from loadgen.report.rows import RULE, row
from loadgen.report.summary import SUMMARY_TITLE, truncated_note

CHATTER = [
    "Starting initial single prompt test run...",
    "Dataset: built in 3.20 s, cached as /home/u/.cache/loadgen/datasets/x.npz",
    "warning: --top-k has no effect with --backend openai",
    "Failed requests during benchmark run detected (capping to 10):",
    "Error 0: HTTP 500",
]
REPORT = [
    SUMMARY_TITLE,
    row("Successful requests:", 10),
    row("Benchmark duration (s):", 1.5, ".2f"),
    RULE,
    *truncated_note(1),  # a note of the report, before its verdict
    "client: OK: timings carry ≤ 0.40 ms of client delay at p99, 2.0 % of the median ITL",
]
AFTER = ["Results written to r.json", "Records written to r.records.arrow"]


def filtered(lines: list[str]) -> str:
    out = io.StringIO()
    quiet = ReportOnlyStdout(out)
    for line in lines:
        print(line, file=quiet)  # the line, then its newline in a write of its own
    return out.getvalue()


def test_only_the_report_goes_through() -> None:
    assert filtered([*CHATTER, *REPORT, *AFTER]) == "\n".join(REPORT) + "\n"


@pytest.mark.parametrize(
    "verdict",
    [
        "client-bound: timings carry ≤ 9.00 ms of client delay at p99; host busy: ...",
        "client: not judged: the run did not end, so its workers' loop lag and CPU were never "
        "reported; send lag p99 0.10 ms",
    ],
)
def test_every_verdict_ends_the_report(verdict: str) -> None:
    assert filtered([SUMMARY_TITLE, RULE, verdict, *AFTER]).splitlines() == [
        SUMMARY_TITLE,
        RULE,
        verdict,
    ]


def test_a_line_written_in_pieces_is_judged_whole() -> None:
    out = io.StringIO()
    quiet = ReportOnlyStdout(out)
    quiet.write(SUMMARY_TITLE[:10])
    assert out.getvalue() == ""
    quiet.write(SUMMARY_TITLE[10:] + "\nSuccessful")
    quiet.write(" requests: 1\nclient: OK: fine\nResults written to x\n")
    assert out.getvalue().splitlines() == [
        SUMMARY_TITLE,
        "Successful requests: 1",
        "client: OK: fine",
    ]


def test_no_report_prints_nothing() -> None:
    assert filtered(CHATTER) == ""


@pytest.mark.parametrize("spelling", ["-q", "--quiet"])
def test_the_option(spelling: str) -> None:
    assert run_command.make_context("run", [spelling]).params["quiet"] is True
    assert run_command.make_context("run", []).params["quiet"] is False

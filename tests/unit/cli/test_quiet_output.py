"""``-q/--quiet``: the option, and what it shows: the report's table through the client's
verdict, rendered from the run's summary (report/summary.py), and no other line on stdout."""

from __future__ import annotations

import logging

import pytest
from report_runs import full_config, made_up_run

from loadgen.cli.run import run_command
from loadgen.console import TO_STDERR, show_report, terminal_output
from loadgen.report.run_report import build_report
from loadgen.report.settings import output_of, settings_of
from loadgen.report.summary import SUMMARY_TITLE, table_and_verdict
from loadgen.report.verdict import VERDICT_HEADS

CHATTER = [
    "Starting initial single prompt test run...",
    "Dataset: built in 3.20 s, cached as /home/u/.cache/loadgen/datasets/x.npz",
    "warning: --top-k has no effect with --backend openai",
]
log = logging.getLogger("loadgen.session.runner")


def test_the_table_and_verdict_are_the_report_from_its_title() -> None:
    cfg = full_config()
    report = build_report(
        settings_of(cfg), output_of(cfg), made_up_run(cfg), date="20261203-100000"
    )
    assert report.lines[0] != SUMMARY_TITLE  # upstream's list of failures comes first
    quiet = table_and_verdict(report.summary)
    assert quiet == report.lines[report.lines.index(SUMMARY_TITLE) :]
    assert quiet[-1] == report.verdict and quiet[-1].startswith(VERDICT_HEADS)


def test_only_the_report_and_the_stderr_lines_are_shown(capsys: pytest.CaptureFixture) -> None:
    cfg = full_config()
    report = build_report(
        settings_of(cfg), output_of(cfg), made_up_run(cfg), date="20261203-100000"
    )
    with terminal_output(quiet=table_and_verdict):
        for line in CHATTER:
            log.info(line)
        show_report(report.lines, report.summary)
        log.info("Results written to r.json")
        log.warning("breached: mean_ttft_ms<10 (measured 12)", extra=TO_STDERR)
    out, err = capsys.readouterr()
    assert out == "".join(line + "\n" for line in table_and_verdict(report.summary))
    assert err == "breached: mean_ttft_ms<10 (measured 12)\n"


@pytest.mark.parametrize("spelling", ["-q", "--quiet"])
def test_the_option(spelling: str) -> None:
    assert run_command.make_context("run", [spelling]).params["quiet"] is True
    assert run_command.make_context("run", []).params["quiet"] is False

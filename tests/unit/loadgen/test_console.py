"""The one output channel (loadgen/console.py): the CLI's lines byte for byte, -q's narrowing,
and the Python API's collection, which prints nothing but what the caller's logging asks for."""

from __future__ import annotations

import logging

import pytest

from loadgen.console import (
    LOG,
    TO_STDERR,
    Note,
    collect_notes,
    show_report,
    terminal_output,
)

log = logging.getLogger("loadgen.session.somewhere")  # a module's logger below cli/
REPORT = ["=== title ===", "Successful requests: 3", "client: OK: fine"]


class Summary:
    """Stands for a RunSummary: the quiet view renders from it, not from the report's text."""

    lines = ("=== title ===", "client: OK: fine")


def quiet_view(summary: Summary) -> list[str]:
    return list(summary.lines)


def say_everything() -> None:
    log.info("Starting main benchmark run...")
    log.warning("warning: --top-k has no effect with --backend openai")
    show_report(REPORT, Summary())
    log.warning("breached: mean_ttft_ms<10 (measured 12)", extra=TO_STDERR)
    log.info("Records written to r.arrow")


def test_the_terminal_gets_each_line_as_print_wrote_it(capsys: pytest.CaptureFixture) -> None:
    with terminal_output():
        say_everything()
    out, err = capsys.readouterr()
    assert out == (
        "Starting main benchmark run...\n"
        "warning: --top-k has no effect with --backend openai\n"
        + "".join(line + "\n" for line in REPORT)
        + "Records written to r.arrow\n"
    )
    assert err == "breached: mean_ttft_ms<10 (measured 12)\n"


def test_a_line_with_a_percent_sign_is_shown_as_it_is(capsys: pytest.CaptureFixture) -> None:
    with terminal_output():
        log.info("Will increase RPS by 5 %s and 10 %")
    assert capsys.readouterr().out == "Will increase RPS by 5 %s and 10 %\n"


def test_quiet_shows_the_report_from_its_summary_and_the_stderr_lines(
    capsys: pytest.CaptureFixture,
) -> None:
    with terminal_output(quiet=quiet_view):
        say_everything()
    out, err = capsys.readouterr()
    assert out == "=== title ===\nclient: OK: fine\n"  # Summary.lines, not REPORT's text
    assert err == "breached: mean_ttft_ms<10 (measured 12)\n"


def test_without_a_front_end_nothing_is_printed(capsys: pytest.CaptureFixture) -> None:
    say_everything()  # not even Python's last-resort line for a warning
    assert capsys.readouterr() == ("", "")


def test_the_api_collects_the_notes_and_prints_nothing(capsys: pytest.CaptureFixture) -> None:
    with collect_notes() as notes:
        say_everything()
    assert capsys.readouterr() == ("", "")
    assert notes == [  # the report is not a note: the Result holds it
        Note("info", "Starting main benchmark run..."),
        Note("warning", "warning: --top-k has no effect with --backend openai"),
        Note("warning", "breached: mean_ttft_ms<10 (measured 12)"),
        Note("info", "Records written to r.arrow"),
    ]


def test_verbose_prints_as_the_cli_does(capsys: pytest.CaptureFixture) -> None:
    with terminal_output():
        say_everything()
    printed = capsys.readouterr()
    with collect_notes(verbose=True) as notes:
        say_everything()
    assert capsys.readouterr() == printed
    assert len(notes) == 4


def test_the_callers_logging_gets_what_its_levels_let_through(
    capsys: pytest.CaptureFixture,
) -> None:
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    root = logging.getLogger()
    keep = Keep()
    root.addHandler(keep)
    try:
        with collect_notes() as notes:  # the root's WARNING: the warnings only
            say_everything()
        assert seen == [
            "warning: --top-k has no effect with --backend openai",
            "breached: mean_ttft_ms<10 (measured 12)",
        ]
        seen.clear()
        LOG.setLevel(logging.INFO)  # the caller asks for loadgen's notes too
        with collect_notes():
            say_everything()
        assert seen[0] == "Starting main benchmark run..." and len(seen) == 5
    finally:
        root.removeHandler(keep)
        LOG.setLevel(logging.NOTSET)
    assert len(notes) == 4
    assert capsys.readouterr() == ("", "")


def test_the_logger_is_left_as_it_was() -> None:
    before = (LOG.handlers[:], LOG.level, LOG.propagate)
    with terminal_output(), collect_notes(), terminal_output(quiet=quiet_view):
        assert LOG.level == logging.INFO and not LOG.propagate
    assert (LOG.handlers, LOG.level, LOG.propagate) == before


def test_a_command_shows_the_lines_while_it_runs_and_no_longer() -> None:
    from click.testing import CliRunner

    from loadgen.cli import cli

    before = (LOG.handlers[:], LOG.level, LOG.propagate)
    refused = CliRunner().invoke(cli, ["run", "--mock", "--base-url", "http://h:1"])
    assert refused.exit_code == 2 and "--mock starts its own server" in refused.output
    assert (LOG.handlers, LOG.level, LOG.propagate) == before  # the API's runs print nothing

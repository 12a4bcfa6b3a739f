"""``loadgen report RECORDS``: a run's summary and result JSON, rebuilt offline from its records.

Its options are `run`'s reporting flags (the table's ``reporting`` ones: the output flags,
``--percentile-metrics``, ``--metric-percentiles``, ``--goodput``, the plots, ``--fail-on``...);
given again, they replace the run's own. Nothing else of the run can change: the records are
what was measured. Its own: ``--format csv|jsonl`` writes one row per request instead of the
summary (loadgen/report/exports.py), to ``--output`` or standard output; ``--format html``
draws report.html (loadgen/report/html_report.py) of a run, or of a campaign's folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from datetime import datetime
from pathlib import Path

import click

from loadgen.cli.options import click_option, given_values, quiet_option
from loadgen.cli.streams import show_output
from loadgen.cli.vllm_compat import normalize_argv
from loadgen.config import RUN_FLAGS, VLLM_BENCH_SERVE_FLAGS, ConfigError, RunConfig
from loadgen.flag import Flag
from loadgen.records.checks import RecordsFileError
from loadgen.records.read import read_records
from loadgen.report.compare_campaigns import campaign_table, read_campaign
from loadgen.report.exports import FORMATS, request_rows, write_rows
from loadgen.report.gate_keys import gate_problem
from loadgen.report.gates import report_breaches
from loadgen.report.html_campaign import CAMPAIGN_REPORT, write_campaign_report
from loadgen.report.html_report import RECORDS_SUFFIX, html_path_for, run_page, server_record
from loadgen.report.run_report import build_report, write_report
from loadgen.report.settings import output_of, report_config, settings_note, settings_of
from loadgen.report.slo import read_campaign_json
from loadgen.report.summary import table_and_verdict
from loadgen.session.preflight import file_path_problem, output_path_problem
from loadgen.session.search_plan import account_lines

REPORT_FLAGS = tuple(flag for flag in RUN_FLAGS if flag.reporting)
# `report`'s own options: what it writes.
FORMAT_FLAG = Flag(
    "--format",
    default="summary",
    field="export_format",
    choices=("summary", *FORMATS, "html"),
    help="summary: the console summary (and the files the flags ask for); csv or jsonl: one "
    "row per request (docs/records.md lists the columns), to --output or standard output, "
    "and the summary on standard error; html: one self-contained page with the settings, the "
    "summary and the figures (NAME.report.html beside the records, or FOLDER/report.html for a "
    "campaign's folder; needs the [plot] extra).",
)
OUTPUT_FLAG = Flag(
    "--output",
    Path,
    help="With --format csv|jsonl: the file the rows go to (default: standard output); the "
    "summary then stays on standard output. With --format html: the page's file.",
)


def report_option(flag: Flag) -> click.Option:
    """A reporting flag's option; its default is the run's own value, so none is shown."""
    option = click_option(flag)
    option.show_default = False
    return option


class ReportCommand(click.Command):
    """Reads argv as `run` does (underscores, several values after one flag); a flag of the
    run itself is click's "No such option"."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, normalize_argv(args, set(VLLM_BENCH_SERVE_FLAGS)))


@click.pass_context
def report_records(
    ctx: click.Context,
    /,
    records: str,
    export_format: str,
    output: Path | None,
    quiet: bool,
    **_: object,
) -> None:
    """Rebuild the report of the run whose records file is RECORDS; exit 3 when it breaches a
    --fail-on gate."""
    show_output(quiet=table_and_verdict if quiet else None)
    if output is not None and export_format == "summary":
        raise click.UsageError("--output needs --format csv, jsonl or html")
    html = export_format == "html"
    if Path(records).is_dir():
        if export_format in FORMATS:
            raise click.UsageError(
                f"{records} is a folder: --format {export_format} exports one run's records"
            )
        report_folder(ctx, records, html, output, quiet)
    date = datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        run = read_records(records)
        config = report_config(run, records, given_values(ctx, REPORT_FLAGS))
        settings, files = settings_of(config), output_of(config)
        if problem := gate_problem(settings, run.start.config):
            raise ConfigError(problem)  # an unknown key is refused before anything is printed
        report = build_report(settings, files, run, date=date)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except RecordsFileError as exc:  # not a records file, or damaged: bad input
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if problem := output_problem(config, export_format, output, records):
        click.echo(f"error: {problem}", err=True)  # before the summary: nothing half-written
        sys.exit(1)
    rows_to_stdout = export_format in FORMATS and output is None
    # Rows on standard output keep it clean: the summary and the paths go to standard error.
    with contextlib.redirect_stdout(sys.stderr) if rows_to_stdout else contextlib.nullcontext():
        write_report(report)
    if html:
        page = Path(output) if output is not None else html_path_for(records)
        page.write_text(
            run_page(report, Path(records).name.removesuffix(RECORDS_SUFFIX), server_record(run)),
            encoding="utf-8",
        )
        say(f"Report written to {page}", quiet)
    elif export_format != "summary":
        rows = request_rows(report.summary, config.request_id_prefix)
        if output is None:
            write_rows(rows, export_format, sys.stdout)
        else:
            with open(output, "w", encoding="utf-8", newline="") as out:
                write_rows(rows, export_format, out)
            say(f"{len(rows)} request rows written to {output}", quiet)
    if (note := settings_note(run, records)) and not quiet:
        click.echo(f"note: {note}", err=True)
    if report.caveat and not quiet:
        click.echo(f"note: {report.caveat}", err=True)
    sys.exit(report_breaches(report.breaches))


def say(line: str, quiet: bool) -> None:
    """A line that says where a file went (-q: none)."""
    if not quiet:
        print(line)


def output_problem(
    config: RunConfig, export_format: str, output: Path | None, records: str
) -> str | None:
    """Why a file this report writes could not be written (the result file and plots the flags
    ask for, --output, the html page), in one line naming the flag and the path; None when
    they can. Checked as a run's preflight checks its own: a probe file is created and removed
    where each goes. The records are read, not written."""
    if problem := output_path_problem(dataclasses.replace(config, save_records=False)):
        return problem
    if output is not None:
        shown, page = f"--output {output}", str(output)
    elif export_format == "html":
        shown, page = "--format html", str(html_path_for(records))
    else:
        return None
    problem = file_path_problem(page)
    return f"{shown}: {problem}" if problem else None


def report_folder(
    ctx: click.Context, folder: str, html: bool, output: Path | None, quiet: bool
) -> None:
    """A campaign's folder: its table in the terminal, or its report.html; then exit."""
    given = given_values(ctx, REPORT_FLAGS)
    if named := [flag.name for flag in REPORT_FLAGS if flag.field in given]:
        raise click.UsageError(
            f"a campaign's folder is reported as its runs were reported; drop {named[0]}"
        )
    if not html:
        print_campaign(folder, quiet)
    page_path = str(output) if output is not None else str(Path(folder) / CAMPAIGN_REPORT)
    if problem := file_path_problem(page_path):
        click.echo(f"error: {'--output ' if output is not None else ''}{problem}", err=True)
        sys.exit(1)
    try:
        page = write_campaign_report(folder, str(output) if output is not None else None)
    except (RecordsFileError, OSError, ValueError, KeyError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    say(f"Report written to {page}", quiet)
    sys.exit(0)


def print_campaign(folder: str, quiet: bool) -> None:
    """A campaign's table as the campaign printed it at its end, rebuilt from its records,
    with its SLO's line or its search's account (from campaign.json); then exit."""
    try:
        campaign = read_campaign(Path(folder), Path(folder).resolve().name)
        lines = campaign_table(campaign)
        search = (read_campaign_json(folder) or {}).get("search")
    except (RecordsFileError, OSError, ValueError, KeyError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2 if isinstance(exc, RecordsFileError) else 1)
    if isinstance(search, dict):
        lines += account_lines(search, campaign.slo)
    if not quiet:
        runs = sum(len(point.records) for point in campaign.points)
        lines.insert(0, f"Campaign {folder}: {len(campaign.points)} point(s), {runs} run(s) "
                        "with records; the table rebuilt from them")  # fmt: skip
    click.echo("\n".join(lines))
    sys.exit(0)


report_command = ReportCommand(
    "report",
    params=[
        click.Argument(["records"], type=click.Path(), metavar="PATH"),
        *(report_option(flag) for flag in REPORT_FLAGS),
        click_option(FORMAT_FLAG),
        click_option(OUTPUT_FLAG),
        quiet_option(
            "the summary table and the client's verdict (a campaign's folder: its table "
            "and the SLO's or the search's verdict)"
        ),
    ],
    callback=report_records,
    help="Rebuild a run's console summary and result JSON from its records file "
    "(NAME.records.arrow, written beside the result by --save-result), offline, export its "
    "requests (--format csv|jsonl), or draw report.html (--format html; PATH may be a "
    "campaign's folder). A campaign's folder alone prints the campaign's table again. "
    "Reporting flags given again replace the run's own; those not given keep the run's values.",
)

"""``loadgen report RECORDS``: a run's summary and result JSON, rebuilt offline from its records.

Its options are `run`'s reporting flags (the table's ``reporting`` ones: the output flags,
``--percentile-metrics``, ``--metric-percentiles``, ``--goodput``, the plots, ...); given
again, they replace the run's own. Nothing else of the run can change: the records are what
was measured.
"""

from __future__ import annotations

import sys
from datetime import datetime

import click

from loadgen.cli.options import click_option, given_values
from loadgen.cli.vllm_compat import normalize_argv
from loadgen.config import RUN_FLAGS, VLLM_BENCH_SERVE_FLAGS, ConfigError
from loadgen.flag import Flag
from loadgen.records.arrow_file import RecordsFileError
from loadgen.report.offline import rebuild_report
from loadgen.report.run_report import write_report

REPORT_FLAGS = tuple(flag for flag in RUN_FLAGS if flag.reporting)


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
def report_records(ctx: click.Context, records: str, **_: object) -> None:
    """Rebuild the report of the run whose records file is RECORDS."""
    date = datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        report, config = rebuild_report(records, given_values(ctx, REPORT_FLAGS), date=date)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except RecordsFileError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    write_report(config, report)
    if report.caveat:
        click.echo(f"note: {report.caveat}", err=True)


report_command = ReportCommand(
    "report",
    params=[
        click.Argument(["records"], type=click.Path(dir_okay=False)),
        *(report_option(flag) for flag in REPORT_FLAGS),
    ],
    callback=report_records,
    help="Rebuild a run's console summary and result JSON from its records file "
    "(NAME.records.arrow, written beside the result by --save-result), offline. Reporting "
    "flags given again replace the run's own; those not given keep the run's values.",
)

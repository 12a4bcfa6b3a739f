"""``loadgen compare BASE OTHER...``: runs side by side from their records files
(loadgen/report/compare.py says how the differences and their intervals are computed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from loadgen.cli.streams import show_output
from loadgen.records.arrow_file import records_path
from loadgen.records.checks import RecordsFileError
from loadgen.records.model import RunRecords
from loadgen.records.read import read_records
from loadgen.report.compare import (
    DEFAULT_RESAMPLES,
    compare,
    rows_json,
    samples_of,
    setting_differences,
    table_lines,
)
from loadgen.report.settings import settings_note
from loadgen.terminal import printable

RECORDS_SUFFIX = ".records.arrow"


def runs_of(argument: str) -> list[RunRecords]:
    """The runs one argument names: a records file, a result JSON (its records beside it), or
    a folder whose records files are pooled (a campaign's repeats)."""
    path = Path(argument)
    if path.is_dir():
        files = sorted(path.glob(f"*{RECORDS_SUFFIX}"))
        if not files:
            raise RecordsFileError(f"{argument}: a folder with no *{RECORDS_SUFFIX} file")
    elif path.suffix == ".json":
        files = [Path(records_path(argument))]
        if not files[0].exists():
            raise RecordsFileError(
                f"{argument}: no records file beside it ({files[0].name}); "
                "runs save one with --save-result"
            )
    else:
        files = [path]
    return [read_records(str(file)) for file in files]


def note_settings(argument: str, runs: list[RunRecords]) -> None:
    """Say once which settings of the runs this loadgen reads otherwise (settings_note)."""
    for note in dict.fromkeys(settings_note(run, argument) for run in runs):
        if note is not None:
            click.echo(printable(f"note: {note}"), err=True)


def short_name(argument: str) -> str:
    """How the table names a side: its folder's or file's name, less the file's suffix."""
    name = Path(argument.rstrip("/")).name or argument
    for suffix in (RECORDS_SUFFIX, ".json"):
        name = name.removesuffix(suffix)
    return name


@click.command(
    "compare",
    help="Compare runs: each OTHER against BASE, every latency metric's difference with a "
    "bootstrap 95 % interval from the runs' records, flagged (*) where it leaves out 0. A run "
    "is its records file (NAME.records.arrow), its result JSON (the records beside it), or a "
    "folder whose records files are pooled.",
)
@click.argument("base")
@click.argument("others", nargs=-1, required=True)
@click.option(
    "--resamples",
    type=click.IntRange(min=0),
    default=DEFAULT_RESAMPLES,
    show_default=True,
    help="Bootstrap draws per metric; 0 shows the differences without intervals.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, writable=True),
    help="Also write the comparison to this JSON file.",
)
def compare_command(
    base: str, others: tuple[str, ...], resamples: int, json_path: str | None
) -> None:
    """Compare OTHER runs with BASE."""
    show_output()
    try:
        base_runs = runs_of(base)
        base_samples = samples_of(short_name(base), base_runs)  # a wrong setting: refused
        note_settings(base, base_runs)
        compared = []
        for other in others:
            other_runs = runs_of(other)
            if differ := setting_differences(base_runs, other_runs):
                click.echo(
                    printable(f"warning: {other} was run with other settings than {base}: ")
                    + "; ".join(map(printable, differ)),
                    err=True,
                )
            samples = samples_of(short_name(other), other_runs)
            note_settings(other, other_runs)
            compared.append((samples, compare(base_samples, samples, resamples)))
    except RecordsFileError as exc:  # not a records file, or damaged: bad input
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo("\n".join(table_lines(base_samples, compared)))
    if json_path:
        Path(json_path).write_text(json.dumps(rows_json(base_samples, compared), indent=2) + "\n")

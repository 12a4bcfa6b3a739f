"""``loadgen compare BASE OTHER...``: runs side by side from their records files
(loadgen/report/compare.py says how the differences and their intervals are computed),
campaigns point by point (loadgen/report/compare_campaigns.py), or result JSONs without
records, loadgen's or `vllm bench serve`'s, by their summary figures
(loadgen/report/compare_summaries.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from loadgen.cli.options import quiet_option
from loadgen.cli.streams import show_output
from loadgen.records.arrow_file import records_path
from loadgen.records.checks import RecordsFileError
from loadgen.records.model import RunRecords
from loadgen.records.read import read_records
from loadgen.report.compare import (
    DEFAULT_RESAMPLES,
    compare,
    row_lines,
    rows_json,
    samples_of,
    setting_differences,
    table_lines,
)
from loadgen.report.compare_campaigns import (
    compare_campaigns,
    comparison_json,
    comparison_lines,
    is_campaign,
    read_campaign,
)
from loadgen.report.compare_summaries import (
    SUMMARY_ONLY,
    not_a_result,
    result_format,
    summary_rows,
    summary_side,
)
from loadgen.report.settings import settings_note
from loadgen.terminal import printable

RECORDS_SUFFIX = ".records.arrow"


class CompareError(Exception):
    """A side that cannot be compared as asked: one line, exit 2."""


def runs_of(argument: str) -> list[RunRecords]:
    """The runs one argument names: a records file, a result JSON (its records beside it), or
    a folder whose records files are pooled (a point's repeats)."""
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


def note_settings(argument: str, runs: list[RunRecords], quiet: bool = False) -> None:
    """Say once which settings of the runs this loadgen reads otherwise (settings_note)."""
    for note in dict.fromkeys(settings_note(run, argument) for run in runs):
        if note is not None and not quiet:
            click.echo(printable(f"note: {note}"), err=True)


def summary_document(argument: str) -> dict | None:
    """A result JSON that has no records beside it: its content (CompareError when it is not
    a result, loadgen's or `vllm bench serve`'s); None for every other side (records)."""
    path = Path(argument)
    if path.suffix != ".json" or path.is_dir() or Path(records_path(argument)).exists():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CompareError(f"{argument}: not JSON ({exc})") from None
    if result_format(document) is None:
        raise CompareError(not_a_result(argument))
    return document


def short_name(argument: str) -> str:
    """How the table names a side: its folder's or file's name, less the file's suffix."""
    name = Path(argument.rstrip("/")).name or argument
    for suffix in (RECORDS_SUFFIX, ".json"):
        name = name.removesuffix(suffix)
    return name


@click.command(
    "compare",
    help="Compare runs: each OTHER against BASE, every latency metric's difference with a "
    "bootstrap 95 % interval from the runs' records, flagged (*) where it leaves out 0, and "
    "the requests that failed, were cancelled or never sent. A run is its records file "
    "(NAME.records.arrow), its result JSON (the records beside it), or a folder whose records "
    "files are pooled. Two campaigns' folders are compared point by point, matched by their "
    "load. Result JSONs without records (loadgen's, or `vllm bench serve`'s) are compared by "
    "their summary figures, without intervals.",
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
    base: str, others: tuple[str, ...], resamples: int, json_path: str | None, quiet: bool
) -> None:
    """Compare OTHER runs with BASE."""
    show_output()
    try:
        sides = [base, *others]
        campaigns = [is_campaign(Path(side)) for side in sides]
        if any(campaigns):
            if not all(campaigns):
                campaign = sides[campaigns.index(True)]
                run = sides[campaigns.index(False)]
                raise CompareError(
                    f"compare campaigns with campaigns: {campaign} is a campaign's folder, "
                    f"{run} is not (a point's folder, CAMPAIGN/POINT, compares as a run)"
                )
            lines, document = campaign_comparison(base, others, resamples, quiet)
        else:
            documents = [summary_document(side) for side in sides]
            if any(document is not None for document in documents):
                lines, document = summary_comparison(sides, documents)
            else:
                lines, document = run_comparison(base, others, resamples, quiet)
    except (RecordsFileError, CompareError) as exc:  # not a records file, or damaged: bad input
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo("\n".join(lines))
    if json_path:
        Path(json_path).write_text(json.dumps(document, indent=2) + "\n")


compare_command.params.append(quiet_option("the comparison's table"))


def run_comparison(
    base: str, others: tuple[str, ...], resamples: int, quiet: bool
) -> tuple[list[str], dict]:
    """Runs compared from their records: the table's lines and the JSON."""
    base_runs = runs_of(base)
    base_samples = samples_of(short_name(base), base_runs)  # a wrong setting: refused
    note_settings(base, base_runs, quiet)
    compared = []
    for other in others:
        other_runs = runs_of(other)
        if (differ := setting_differences(base_runs, other_runs)) and not quiet:
            warn_settings(other, base, differ)
        samples = samples_of(short_name(other), other_runs)
        note_settings(other, other_runs, quiet)
        compared.append((samples, compare(base_samples, samples, resamples)))
    return table_lines(base_samples, compared), rows_json(base_samples, compared)


def warn_settings(other: str, base: str, differ: list[str]) -> None:
    """The warning that two sides ran with other traffic settings, naming them."""
    click.echo(
        printable(f"warning: {other} was run with other settings than {base}: ")
        + "; ".join(map(printable, differ)),
        err=True,
    )


def campaign_comparison(
    base: str, others: tuple[str, ...], resamples: int, quiet: bool
) -> tuple[list[str], dict]:
    """Campaigns compared point by point: the lines and the JSON (a comparison per OTHER)."""
    first = read_campaign(Path(base), short_name(base))
    lines: list[str] = []
    comparisons = []
    for other in others:
        comparison = compare_campaigns(
            first, read_campaign(Path(other), short_name(other)), resamples
        )
        if comparison.settings and not quiet:
            warn_settings(other, base, comparison.settings)
        lines += comparison_lines(comparison)
        comparisons.append(comparison_json(comparison))
    return lines, {"base": first.name, "kind": "campaigns", "comparisons": comparisons}


def summary_comparison(sides: list[str], documents: list[dict | None]) -> tuple[list[str], dict]:
    """Result JSONs compared by their summary figures: the lines and the JSON. Every side must
    then be a result JSON (with records beside it or not: its own figures are read)."""
    loaded = []
    for side, document in zip(sides, documents, strict=True):
        if document is None:
            if Path(side).suffix != ".json" or Path(side).is_dir():
                lone = next(s for s, d in zip(sides, documents, strict=True) if d is not None)
                raise CompareError(
                    f"{lone} has no records, so every side is compared by its result JSON; "
                    f"{side} is not one"
                )
            document = json.loads(Path(side).read_text(encoding="utf-8"))
            if result_format(document) is None:
                raise CompareError(not_a_result(side))
        loaded.append(summary_side(short_name(side), document))
    base, compared = loaded[0], [(side, summary_rows(loaded[0], side)) for side in loaded[1:]]
    lines = [SUMMARY_ONLY]
    for other, rows in compared:
        lines.append(
            f"{other.name} ({other.source}) against {base.name} ({base.source}); "
            f"difference = {other.name} − {base.name}"
        )
        lines += row_lines(rows)
    document = rows_json(base, compared) | {"summary_only": True}
    return lines, document

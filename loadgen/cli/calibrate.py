"""``loadgen calibrate``: its options; the measurement is loadgen/calibrate.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from loadgen.calibrate import MARGIN_MS, CalibrationError, calibrate, parse_concurrencies
from loadgen.cli.streams import show_output


def _concurrencies(ctx: click.Context, param: click.Parameter, value: str) -> list[int]:
    try:
        return parse_concurrencies(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("calibrate")
@click.option(
    "--concurrency",
    "concurrencies",
    default="64,256,1024",
    show_default=True,
    callback=_concurrencies,
    help="Comma list of concurrency steps, run lowest first.",
)
@click.option(
    "--workers",
    default=2,
    show_default=True,
    type=click.IntRange(min=1),
    help="Client worker processes.",
)
@click.option(
    "--itl-ms", default=50.0, show_default=True, type=click.FloatRange(min=0), help="Mock ITL."
)
@click.option(
    "--ttft-ms", default=0.0, show_default=True, type=click.FloatRange(min=0), help="Mock TTFT."
)
@click.option(
    "--input-len",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Prompt tokens per request.",
)
@click.option(
    "--output-len",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Tokens per request, one event each.",
)
@click.option(
    "--rounds",
    default=3.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Requests per step, as a multiple of its concurrency.",
)
@click.option(
    "--threshold-ms",
    default=None,
    type=click.FloatRange(min=0),
    help="Largest p99 TTFT and event-gap error a trustworthy step may have  [default: the "
    f"machine's wake-up floor measured before the step + {MARGIN_MS:g} ms].",
)
@click.option(
    "--floor-seconds",
    default=2.0,
    show_default=True,
    type=click.FloatRange(min=0.5),
    help="How long the machine's wake-up floor is measured before each step.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the server's records and the client's results here (default: a temporary "
    "directory, removed afterwards).",
)
def calibrate_command(**settings: Any) -> None:
    """Measure loadgen's own TTFT and inter-event timing error against the mock server's records.

    Starts `loadgen mock-server --record-timings`, runs `loadgen run` against it at each
    concurrency, and compares the client's per-request timings with the server's write instants
    (same clock, time.perf_counter_ns). Errors are client − server: positive means the client
    saw it later; event-gap errors are summarized by their absolute size. Before each step it
    measures the machine's floor (how late an idle process wakes for a timer and a datagram,
    at p99). A step is trustworthy when no request failed and both p99 errors are within the
    floor + 1 ms (or --threshold-ms); the last line says up to how many streams that holds.
    """
    show_output()
    try:
        calibrate(**settings)
    except CalibrationError as exc:
        raise click.ClickException(str(exc)) from None

"""``loadgen calibrate``: its options, and each step's client run in this process as `loadgen run`
runs it (its flags read by the CLI's parser as the Python API reads them, then ``run_outcome`` and
its run session); the measurement is loadgen/calibrate.py.

A step's time limit is a timer on a ``StopSwitch``: the run stops as on a stop signal, its
measured part kept. Ctrl-C, SIGTERM and SIGHUP stop the current step the same way (the run's
session handles them); between steps they end calibrate at once. Either way the rows measured
are printed, the mock server is stopped, and the exit code is 128 + the signal's number.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import click

from loadgen.calibrate import (
    CalibrationError,
    ClientStep,
    StepRun,
    calibrate,
    parse_concurrencies,
)
from loadgen.cli.keywords import build_config
from loadgen.cli.options import quiet_option
from loadgen.cli.streams import show_output
from loadgen.config import ConfigError, InputError
from loadgen.console import collect_notes
from loadgen.fleet.fanout import FanoutError
from loadgen.mock.process import MockServerError
from loadgen.report.summary import table_and_verdict
from loadgen.server.errors import ServerError
from loadgen.session.lifecycle import STOP_SIGNALS, RunFailed, StopSwitch
from loadgen.session.runner import RunInterrupted, run_outcome
from loadgen.text.chat_template import ChatTemplateError
from loadgen.text.tokenizer import TokenizerLoadError
from loadgen.timing_error import MARGIN_MS, ClientRun

TIME_LIMIT = signal.SIGALRM  # a step past its time limit is stopped as this signal would stop it
OUTSIDE_RUNS = (signal.SIGTERM, signal.SIGHUP)  # raised as StopSignal between the steps' runs
# A step's run that could not start or finish, as `loadgen run` reports them (cli/run.py).
STEP_ERRORS = (
    RunFailed,
    FanoutError,
    ServerError,
    MockServerError,
    TokenizerLoadError,
    ChatTemplateError,
    InputError,
    ConfigError,
)


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP outside a step's run: calibrate ends as on Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class CalibrateFailed(click.ClickException):
    """calibrate's error line (``Error: ...``) with its exit code: 1, or 128 + a signal's."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click's is a class attribute


def run_step(url: str, step: ClientStep) -> StepRun:
    """One step's client run against ``url``, in this process as `loadgen run` runs it, stopped
    at its time limit as a stop signal would stop it. Its notes are kept (the output channel's
    ``collect_notes``) and not shown: calibrate's table is the output."""
    try:
        config = build_config(step.options(url))
    except ValueError as exc:
        raise CalibrationError(f"loadgen run refused the step's settings: {exc}") from None
    stop = StopSwitch()
    timer = threading.Timer(step.time_limit_s, stop.request_stop, (TIME_LIMIT,))
    timer.daemon = True
    timer.start()
    try:
        with _handlers_kept(), _notes_unshown(), collect_notes():
            outcome = run_outcome(config, result_in_memory=True, stop=stop)
    except RunInterrupted as exc:  # stopped after its start: what it measured is kept
        return StepRun(ClientRun.from_summary(exc.outcome.report.summary), *ended_early(step, exc))
    except STEP_ERRORS as exc:
        why, code = ended_early(step, exc)
        raise CalibrationError(f"{why}: {exc}", code) from None
    finally:
        timer.cancel()
    return StepRun(ClientRun.from_summary(outcome.report.summary))


def ended_early(step: ClientStep, error: Exception) -> tuple[str, int]:
    """Why a step's run ended early, and calibrate's exit code for it: its time limit (1), a
    stop signal (128 + its number), or a failure (1)."""
    what = f"loadgen run at concurrency {step.concurrency}"
    code = getattr(error, "exit_code", 1)
    if code - 128 == TIME_LIMIT:
        return f"{what} did not finish in {step.time_limit_s:.0f} s", 1
    if code - 128 in STOP_SIGNALS:
        name = signal.Signals(code - 128).name
        return f"interrupted by {name} at the step of concurrency {step.concurrency}", code
    return f"{what} failed", 1


@contextlib.contextmanager
def _notes_unshown() -> Iterator[None]:
    """``collect_notes`` passes a run's notes on to what the ``loadgen`` logger's level lets
    through (docs/api.md): here nothing."""
    logger = logging.getLogger("loadgen")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise StopSignal(signum)


@contextlib.contextmanager
def _handlers_kept() -> Iterator[None]:
    """SIGTERM's and SIGHUP's handlers as they were before the block (a run's session hands
    them back to the defaults when it ends)."""
    main = threading.current_thread() is threading.main_thread()
    saved = {signum: signal.getsignal(signum) for signum in OUTSIDE_RUNS} if main else {}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            if handler is not None:  # None: set outside Python, and nothing to put back
                signal.signal(signum, handler)


@contextlib.contextmanager
def _signals_stop_calibrate() -> Iterator[None]:
    """While calibrate runs, SIGTERM and SIGHUP stop it as Ctrl-C does; then as they were."""
    with _handlers_kept():
        if threading.current_thread() is threading.main_thread():
            for signum in OUTSIDE_RUNS:
                signal.signal(signum, _raise_stop)
        yield


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

    Starts `loadgen mock-server --record-timings`, runs the client against it at each
    concurrency as `loadgen run` does, and compares the client's per-request timings with the
    server's write instants (same clock, time.perf_counter_ns). Errors are client − server:
    positive means the client saw it later; event-gap errors are summarized by their absolute
    size. Before each step it measures the machine's floor (how late an idle process wakes for
    a timer and a datagram, at p99). A step is trustworthy when no request failed and both p99
    errors are within the floor + 1 ms (or --threshold-ms); the last line says up to how many
    streams that holds. Ctrl-C stops the current step: its row covers the requests that
    finished, and the exit code is 130.
    """
    quiet = settings.pop("quiet")
    # -q: the table's header, its rows and the conclusion (calibrate's TABLE lines).
    show_output(quiet=table_and_verdict if quiet else None)
    try:
        with _signals_stop_calibrate():
            calibrate(**settings, run_step=run_step)
    except CalibrationError as exc:
        raise CalibrateFailed(str(exc), exc.exit_code) from None


calibrate_command.params.append(quiet_option("the table of steps and the conclusion"))

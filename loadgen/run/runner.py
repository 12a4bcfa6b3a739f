"""`loadgen run`: prepare the requests, fan them out to the workers, and report what came back.

``run`` reads as the run's phases: check the flags, start the mock if asked, start the workers,
get ready (preparation, the ready check, alignment, warm-ups), the timed run, output lengths,
the report (built from the run's records, which are saved as they come), the exit code. A
campaign (loadgen/run/campaign_run.py) is one more loop level around the timed run and the
report, with the same phases from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from loadgen.backends import check_endpoint
from loadgen.config import ConfigError, InputError, RunConfig
from loadgen.console import TO_STDERR
from loadgen.mock.process import EmbeddedMockServer
from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.collected import Collected
from loadgen.records.model import RunRecords, RunStart
from loadgen.report.gates import report_breaches
from loadgen.report.run_report import Report, build_report, write_report
from loadgen.run.campaign import is_campaign
from loadgen.run.dry_run import print_plan
from loadgen.run.fanout import WorkerPool
from loadgen.run.output_lens import output_lens_of
from loadgen.run.placement import worker_pool
from loadgen.run.preflight import preflight
from loadgen.run.prepare import Prepared, align, check_before_start, prepare
from loadgen.run.progress import print_traffic
from loadgen.run.records import finish_records, records_writer, run_end, run_records, run_start
from loadgen.run.timed_run import TimedRun, active_workers, timed_run
from loadgen.server.client import ServerClient, auth_headers
from loadgen.server.metrics import metrics_page
from loadgen.server.profile import profile
from loadgen.server.ready import check_ready, warm_up
from loadgen.server.tokenizer import ServerTokenizer
from loadgen.terminal import printable
from loadgen.text.tokenizer import MOCK_MODEL_NAME

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # exit 128 + the signal's number


class RunFailed(Exception):
    """The run ended without a usable measurement, or only partly; exit code attached."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class RunOutcome:
    """What a finished run hands back: its exit code, report, records and files."""

    exit_code: int
    report: Report
    records: RunRecords
    records_file: str | None  # None unless records were saved
    result_file: str | None  # None unless the flags asked for a result file


class StopSwitch:
    """Stops a run from another thread as a stop signal would: a run outside the main thread
    (the Python API under a notebook's event loop) can install no signal handlers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._target: tuple[asyncio.AbstractEventLoop, Callable[[int], None]] | None = None
        self._pending: int | None = None

    def attach(self, loop: asyncio.AbstractEventLoop, on_stop: Callable[[int], None]) -> None:
        """Route stop requests to ``on_stop`` on ``loop`` (one made before is passed on now)."""
        with self._lock:
            self._target = (loop, on_stop)
            if self._pending is not None:
                loop.call_soon_threadsafe(on_stop, self._pending)

    def detach(self) -> None:
        """The run is past stopping: requests from now on are ignored."""
        with self._lock:
            self._target = None

    def request_stop(self, signum: int = signal.SIGINT) -> None:
        """Ask the run to stop as ``signum`` would (safe from any thread)."""
        with self._lock:
            self._pending = signum
            if self._target is not None:
                loop, on_stop = self._target
                loop.call_soon_threadsafe(on_stop, signum)


def run(config: RunConfig) -> int:
    """Run a benchmark as configured (with --dry-run, print its plan); return the exit code."""
    if config.dry_run:  # preparation only: no worker started, no request sent
        check_before_start(config)
        return against_server(config, lambda: print_plan(config))
    return run_outcome(config).exit_code


def run_outcome(
    config: RunConfig, *, result_in_memory: bool = False, stop: StopSwitch | None = None
) -> RunOutcome:
    """Run a benchmark as configured; return its outcome (RunFailed when it failed).

    ``result_in_memory``: build the result JSON even when no flag asks for a result file (none
    is written then, nor a records file unless --save-records). ``stop``: a way to stop the run
    from another thread, besides the stop signals (which only the main thread can handle).
    """
    if config.dry_run:
        raise ConfigError("--dry-run prints a plan and has no outcome: run `loadgen run --dry-run`")
    if is_campaign(config):
        raise ConfigError(
            "a campaign (a list in --max-concurrency or --request-rate, --num-runs, "
            "--steady-state) runs with loadgen.run.campaign_run.run_campaign, as `loadgen run` "
            "does; here give one value of each"
        )
    check_before_start(config)
    preflight(config)  # the output paths and the open-file limit, before anything starts
    write_result = config.save_result or config.append_result
    if result_in_memory and not write_result:
        config = dataclasses.replace(
            config, save_result=True, save_records=bool(config.save_records)
        )
    return against_server(config, lambda: _run(config, write_result, stop))


Outcome = TypeVar("Outcome")


def against_server(config: RunConfig, main: Callable[[], Coroutine[Any, Any, Outcome]]) -> Outcome:
    """Start the mock if asked, check the endpoint, and run ``main`` in a new event loop."""
    mock = None
    if config.mock:
        prefill = ("--prefill-us-per-token", str(config.mock_prefill_us_per_token))
        mock = EmbeddedMockServer(config.mock_ttft_ms, config.mock_itl_ms, extra_args=prefill)
    try:
        if mock is not None:
            config.base_url = mock.start()
            config.model = config.model or MOCK_MODEL_NAME
        try:
            check_endpoint(config.backend, config.api_url)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        return asyncio.run(main())
    finally:
        if mock is not None:
            mock.stop()


async def _run(config: RunConfig, write_result: bool, stop: StopSwitch | None) -> RunOutcome:
    client = ServerClient(
        config.server_url, auth_headers(config.headers), config.insecure, config.connect_timeout
    )
    try:
        return await _run_with(config, client, write_result, stop)
    finally:
        # Last of all: reporting may still re-tokenize output through the server's tokenizer.
        await client.close()


async def _run_with(
    config: RunConfig, client: ServerClient, write_result: bool, stop: StopSwitch | None
) -> RunOutcome:
    pool = worker_pool(config)
    pool.start()  # workers import and connect while the dataset is built and the server awaited
    loop = asyncio.get_running_loop()
    preparing = asyncio.current_task()
    timed_run_started = False

    def on_stop_signal(signum: int) -> None:
        pool.request_stop(signum)
        if preparing is not None:  # waiting for a server or building a dataset: stop at once
            cancel_until_done(preparing, lambda: not timed_run_started)

    handles_signals = threading.current_thread() is threading.main_thread()
    for signum in STOP_SIGNALS if handles_signals else ():  # each stops it as Ctrl-C does
        loop.add_signal_handler(signum, on_stop_signal, signum)  # and the results are kept
    if stop is not None:
        stop.attach(loop, on_stop_signal)
    finished = False
    writer = None
    late: LateSignals | None = None
    try:
        prepared = await get_ready(config, client, pool)
        timed_run_started = True
        print_traffic(config)
        if pool.stop_requested:
            raise RunFailed("interrupted before the run started", pool.exit_code)
        counters_before = await metrics_page(client)
        start = run_start(config, prepared, active_workers(pool, prepared), counters_before)
        writer = records_writer(config, prepared, start, now())
        timed = await timed_run(config, client, pool, prepared, writer)
        finished = True
        # Not after Ctrl-C: a hung server would hold the exit for the page's timeout.
        counters_after = None if pool.stop_requested else await metrics_page(client)
        if config.profile:
            await profile(client, "stop")
    finally:
        if stop is not None:
            stop.detach()
        if finished:
            late = LateSignals(loop, handles_signals)  # a signal lets the report finish first
        else:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)
        pool.close(graceful=finished)
        if writer is not None and not finished:
            writer.close()  # what was written stays readable, with no end
    assert late is not None
    try:
        outcome = await _report(
            config, client, pool, prepared, start, timed, writer, counters_after, write_result
        )
    finally:
        late.remove()
    if late.signum is not None and not pool.stop_requested:
        # The run had ended and its results above are complete; say what stopped the process.
        raise RunFailed(
            f"interrupted by {signal.Signals(late.signum).name} while the report was written; "
            "the results above are complete",
            128 + late.signum,
        )
    return outcome


async def _report(
    config: RunConfig,
    client: ServerClient,
    pool: WorkerPool,
    prepared: Prepared,
    start: RunStart,
    timed: TimedRun,
    writer: RecordsWriter | None,
    counters_after: str | None,
    write_result: bool,
) -> RunOutcome:
    """Output lengths, the report, the records file's end, the result file and the exit code."""
    report, records, records_file = await finish(
        config, pool, prepared, start, timed, writer, counters_after
    )
    collected = timed.collected
    created = write_result and not os.path.lexists(report.path)
    try:
        write_report(config, report if write_result else dataclasses.replace(report, result=None))
    except OSError as exc:  # a full disk: the summary is printed, the records file is kept
        if created:  # no empty or half-written result file left behind
            with contextlib.suppress(OSError):
                os.remove(report.path)
        raise RunFailed(_unwritten(report.path, exc, records_file)) from None
    if records_file is not None:
        log.info(f"Records written to {records_file}")
    code = _exit_code(collected, report, pool)
    return RunOutcome(code, report, records, records_file, report.path if write_result else None)


async def finish(
    config: RunConfig,
    pool: WorkerPool,
    prepared: Prepared,
    start: RunStart,
    timed: TimedRun,
    writer: RecordsWriter | None,
    counters_after: str | None,
) -> tuple[Report, RunRecords, str | None]:
    """Output lengths, the report and the records file's end (RunFailed when the run failed
    fast); the report, the run's records and the records file."""
    if pool.failed_fast and timed.first_failures is not None:
        if writer is not None:
            writer.close()  # the rows so far stay readable
        raise RunFailed(
            timed.first_failures.stop_line(config.backend, config.endpoint, prepared.model_name)
        )
    collected = timed.collected
    output_lens = await asyncio.to_thread(output_lens_of, config, collected, prepared.tokenizer)
    end = run_end(collected, output_lens, counters_after, timed.probes, timed.host)
    records = run_records(config, prepared, start, collected, end)
    report = build_report(config, records, date=now())
    records_file = finish_records(writer, collected, end, report.path) if writer else None
    return report, records, records_file


class LateSignals:
    """Stop signals once the timed run is over: the first lets the report finish (its records
    are already saved) and is told, a second one exits at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop, listen: bool = True) -> None:
        self.loop = loop
        self.signum: int | None = None
        for signum in STOP_SIGNALS if listen else ():  # replaces the run's own handlers
            loop.add_signal_handler(signum, self._on_signal, signum)

    def _on_signal(self, signum: int) -> None:
        if self.signum is not None:
            os._exit(128 + signum)  # asked twice: no report is worth the wait
        self.signum = signum
        name = signal.Signals(signum).name
        log.info(
            f"note: {name}: finishing the report of the run; {name} again exits at once",
            extra=TO_STDERR,
        )

    def remove(self) -> None:
        """Back to the default handlers."""
        for signum in STOP_SIGNALS:
            self.loop.remove_signal_handler(signum)


def _unwritten(path: str, exc: OSError, records_file: str | None) -> str:
    """One line for a result file that could not be written, with how to get it back."""
    reason = exc.strerror or str(exc)
    if exc.filename is not None and exc.filename != path:
        reason = f"{reason}: {exc.filename}"
    if records_file is None:
        return f"cannot write the result file {path}: {reason}"
    return (
        f"cannot write the result file {path}: {reason}; the run's records are in "
        f"{records_file} (loadgen report {records_file} --save-result --result-dir DIR "
        "rebuilds it)"
    )


RECANCEL_S = 0.2


def cancel_until_done(task: asyncio.Task, still: Callable[[], bool]) -> None:
    """Cancel ``task``, and again every RECANCEL_S while it runs and ``still()`` holds.
    asyncio.wait_for (the ready check's retries) can swallow a cancellation that lands as an
    attempt ends (Python 3.10 and 3.11): with one cancel, a signal while a server refused
    connections was lost about 1 time in 8, and the run waited out the whole ready check."""
    if still() and not task.done():
        task.cancel()
        asyncio.get_running_loop().call_later(RECANCEL_S, cancel_until_done, task, still)


def now() -> str:
    """Upstream's date stamp of a result: ``%Y%m%d-%H%M%S``, local time."""
    return datetime.now().strftime("%Y%m%d-%H%M%S")


async def get_ready(config: RunConfig, client: ServerClient, pool: WorkerPool) -> Prepared:
    """Preparation, the ready check, alignment, warm-ups and --profile's start."""
    try:
        prepared = await prepare(config, client)
        if isinstance(prepared.tokenizer, ServerTokenizer):
            prepared.tokenizer.end_build()  # its deadline and progress bar end here
        await check_ready(config, client, prepared.first_body)
        prepared = await align(config, client, prepared)
        await warm_up(config, client, prepared.first_body)
        log.info("Starting main benchmark run...")
        if config.profile:
            await profile(client, "start")
    except asyncio.CancelledError:
        if pool.stop_requested:
            raise RunFailed("interrupted before the run started", pool.exit_code) from None
        raise
    return prepared


def _exit_code(collected: Collected, report: Report, pool: WorkerPool) -> int:
    """0, or RunFailed for an interrupted run, lost workers, or no request that completed; 3
    when a --fail-on gate was breached (the breaches are printed, last)."""
    if collected.interrupted:
        by = (
            ""
            if pool.stop_signal == signal.SIGINT
            else f" by {signal.Signals(pool.stop_signal).name}"
        )
        raise RunFailed(
            f"interrupted{by}: the results above cover the requests that finished", pool.exit_code
        )
    if collected.worker_problems:
        raise RunFailed("the run lost workers: " + "; ".join(collected.worker_problems))
    if report.completed == 0:
        first = report.first_error
        raise RunFailed(
            f"every request failed; the first error: {printable(first.splitlines()[0])}"
        )
    return report_breaches(report.breaches)

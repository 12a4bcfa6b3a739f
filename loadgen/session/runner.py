"""`loadgen run`: prepare the requests, fan them out to the workers, and report what came back.

``run`` reads as the run's phases: check the flags, open the run's session (the mock if asked,
the server client, the workers, the stop signals: loadgen/session/lifecycle.py), get ready
(preparation, the ready check, alignment, warm-ups), the timed run, output lengths, the report
(built from the run's records, which are saved as they come), the exit code. A campaign
(loadgen/session/campaign_run.py) is one more loop level around the timed run and the report,
in the same session and with the same phases from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
from dataclasses import dataclass
from datetime import datetime

from loadgen.config import ConfigError, InputError, RunConfig
from loadgen.fleet.fanout import WorkerPool
from loadgen.fleet.placement import worker_pool
from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.collected import Collected
from loadgen.records.events import RequestOrderEvents
from loadgen.records.model import RunRecords, RunStart
from loadgen.report.gates import report_breaches
from loadgen.report.run_report import Report, build_report, write_report
from loadgen.report.settings import output_of, settings_of
from loadgen.server.client import ServerClient
from loadgen.server.metrics import metrics_page
from loadgen.server.prefix_cache import reset_prefix_cache
from loadgen.server.profile import profile
from loadgen.server.ready import check_ready, warm_up
from loadgen.server.tokenizer import ServerTokenizer
from loadgen.session.campaign import is_campaign
from loadgen.session.dry_run import show_plan
from loadgen.session.flag_checks import check_before_start
from loadgen.session.lifecycle import RunFailed, RunSession, StopSwitch
from loadgen.session.output_lens import output_lens_of
from loadgen.session.preflight import preflight
from loadgen.session.prepare import Prepared, align, prepare
from loadgen.session.progress import show_traffic
from loadgen.session.records import (
    finish_records,
    read_rows_back,
    records_writer,
    run_end,
    run_records,
    run_start,
)
from loadgen.session.time_bound import (
    bounded_by_duration,
    first_block_config,
    tops_up,
    trace_problem,
)
from loadgen.session.timed_run import TimedRun, active_workers, timed_run
from loadgen.session.topup import DurationBlocks, first_block, with_schedule_hash
from loadgen.terminal import printable

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    """What a finished run hands back: its exit code, report, records and files."""

    exit_code: int
    report: Report
    records: RunRecords
    records_file: str | None  # None unless records were saved
    result_file: str | None  # None unless the flags asked for a result file


class RunInterrupted(RunFailed):
    """A stop signal (or a StopSwitch) ended the run after its timed part began: ``outcome``
    is what it measured, its report covering the requests that finished."""

    def __init__(self, message: str, exit_code: int, outcome: RunOutcome) -> None:
        super().__init__(message, exit_code)
        self.outcome = outcome


def run(config: RunConfig) -> int:
    """Run a benchmark as configured (with --dry-run, print its plan); return the exit code."""
    if config.dry_run:  # preparation only: no worker started, no request sent
        check_before_start(config)
        config = bounded_by_duration(config)
        with RunSession(config) as session:
            return session.run(show_plan)
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
            "--steady-state, --slo, --search) runs with "
            "loadgen.session.campaign_run.run_campaign, as `loadgen run` does; here give one "
            "value of each"
        )
    check_before_start(config)
    config = bounded_by_duration(config)
    preflight(config)  # the output paths and the open-file limit, before anything starts
    write_result = config.save_result or config.append_result
    if result_in_memory and not write_result:
        config = dataclasses.replace(
            config, save_result=True, save_records=bool(config.save_records)
        )
    with RunSession(config, stop) as session:
        return session.run(lambda session: _run(session, write_result))


async def _run(session: RunSession, write_result: bool) -> RunOutcome:
    """The run's phases: workers, readiness, the timed run, then the report."""
    config, client = session.config, session.client
    # The workers import and connect while the dataset is built and the server awaited.
    pool = session.start_workers(worker_pool(config))
    finished = False
    writer = None
    blocks = None  # --duration's blocks after the first
    try:
        topping = tops_up(config) and config.duration_block is not None
        first = first_block_config(config, config.duration_block or 0) if topping else config
        prepared = await get_ready(first, client, pool)
        if problem := trace_problem(config, prepared.scheduled_ns):
            raise InputError(problem)
        schedule = None
        if topping:
            prepared, schedule = await first_block(config, prepared)
        session.ready()
        show_traffic(config)
        if pool.stop_requested:
            raise RunFailed("interrupted before the run started", pool.exit_code)
        if config.reset_prefix_cache:
            await reset_prefix_cache(client)
        counters_before = await metrics_page(client)
        start = run_start(config, prepared, active_workers(pool, prepared), counters_before)
        start = with_schedule_hash(start, schedule)
        writer = records_writer(config, prepared, start, now())
        if schedule is not None:
            workers = active_workers(pool, prepared)
            blocks = DurationBlocks(config, client, prepared, schedule, workers, writer)
        answered = counters_before is not None
        timed = await timed_run(config, client, pool, prepared, writer, answered, blocks=blocks)
        finished = True
        # Not after Ctrl-C: a hung server would hold the exit for the page's timeout.
        counters_after = None if pool.stop_requested else await metrics_page(client)
        if config.profile:
            await profile(client, "stop")
    finally:
        await session.end_workers(graceful=finished, report_follows=finished)
        if writer is not None and not finished:
            writer.close()  # what was written stays readable, with no end
    outcome: RunOutcome | None = None
    try:
        with session.reporting():  # a stop signal now lets the report finish first
            outcome = await _report(
                config,
                client,
                pool,
                prepared,
                start,
                timed,
                writer,
                counters_after,
                write_result,
                blocks,
            )
    except RunFailed as exc:
        if outcome is None:
            raise
        outcome.exit_code = exc.exit_code  # stopped while its report was written: complete
        raise RunInterrupted(str(exc), exc.exit_code, outcome) from None
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
    blocks: DurationBlocks | None,
) -> RunOutcome:
    """Output lengths, the report, the records file's end, the result file and the exit code."""
    report, records, records_file = await finish(
        config, prepared, start, timed, writer, counters_after, blocks
    )
    collected = timed.collected
    created = write_result and not os.path.lexists(report.path)
    try:
        write_report(report if write_result else dataclasses.replace(report, result=None))
    except OSError as exc:  # a full disk: the summary is printed, the records file is kept
        if created:  # no empty or half-written result file left behind
            with contextlib.suppress(OSError):
                os.remove(report.path)
        raise RunFailed(_unwritten(report.path, exc, records_file)) from None
    if records_file is not None:
        log.info(f"Records written to {records_file}")
    outcome = RunOutcome(0, report, records, records_file, report.path if write_result else None)
    try:
        outcome.exit_code = _exit_code(collected, report, pool)
    except RunFailed as exc:
        if not collected.interrupted:
            raise
        outcome.exit_code = exc.exit_code
        raise RunInterrupted(str(exc), exc.exit_code, outcome) from None
    return outcome


async def finish(
    config: RunConfig,
    prepared: Prepared,
    start: RunStart,
    timed: TimedRun,
    writer: RecordsWriter | None,
    counters_after: str | None,
    blocks: DurationBlocks | None = None,
) -> tuple[Report, RunRecords, str | None]:
    """Output lengths, the report and the records file's end (RunFailed when the run failed
    fast); the report, the run's records and the records file. ``blocks``: a --duration
    run's, whose requests the report reads once the rows are read back."""
    if timed.fail_fast is not None and timed.fail_fast.stopped:
        if writer is not None:
            writer.close()  # the rows so far stay readable
        raise RunFailed(
            timed.fail_fast.stop_line(config.backend, config.endpoint, prepared.model_name)
        )
    collected = timed.collected
    # The rows the records file kept alone while the run went (the time is the report's: a
    # stop signal now lets it finish).
    values = blocks.ledger.names if blocks is not None else ()
    await asyncio.to_thread(read_rows_back, collected, writer, values)
    if blocks is not None:  # every block's requests, as the report reads them
        ended = blocks.ended(config, prepared, start, collected.interrupted, collected.file_values)
        config, prepared, start = ended
    output_lens = await asyncio.to_thread(output_lens_of, config, collected, prepared.tokenizer)
    end = run_end(collected, output_lens, counters_after, timed.probes, timed.host)
    if tops_up(config) and config.duration_block is not None:  # the file's start: block 0
        end = dataclasses.replace(
            end, num_requests=start.num_requests, schedule_sha256=start.schedule_sha256
        )
    records = run_records(config, prepared, start, collected, end, timed.server_metrics, writer)
    report = build_report(settings_of(config), output_of(config), records, date=now())
    events = records.events
    if isinstance(events, RequestOrderEvents) and writer is not None and writer.temporary:
        # Removed at its end: the run's summary (calibrate's ITLs, the Python API's records)
        # still reads its events from the mapping, kept until the records are freed.
        events.hold()
    records_file = finish_records(writer, collected, end, report.path) if writer else None
    if isinstance(events, RequestOrderEvents) and writer is not None:
        # Later readers (a campaign's summaries, the Python API's records) follow the file.
        gone = records_file is None and not os.path.exists(events.path)
        events.moved_to(None if gone else records_file or events.path)
    return report, records, records_file


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
        first = printable(report.first_error.splitlines()[0])
        if report.summary.time_bound is not None:  # cancelled at the grace is not "failed"
            raise RunFailed(
                f"no request completed within --duration and its grace; the first error: {first}"
            )
        raise RunFailed(f"every request failed; the first error: {first}")
    return report_breaches(report.breaches)

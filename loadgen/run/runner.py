"""`loadgen run`: prepare the requests, fan them out to the workers, and report what came back.

``run`` reads as the run's phases: check the flags, start the mock if asked, start the workers,
get ready (preparation, the ready check, alignment, warm-ups), the timed run, output lengths,
the report, the exit code.
"""

from __future__ import annotations

import asyncio
import signal
from datetime import datetime, timedelta
from time import perf_counter_ns

import numpy as np

from loadgen.config import InputError, RunConfig
from loadgen.mock.process import EmbeddedMockServer
from loadgen.payloads import check_endpoint
from loadgen.report.collected import Collected
from loadgen.report.probes import probe_stats
from loadgen.report.run_report import Outcome, report_run
from loadgen.run.fanout import WorkerPool
from loadgen.run.output_lens import output_lens_of
from loadgen.run.prepare import Prepared, align, check_before_start, prepare
from loadgen.run.progress import print_traffic
from loadgen.run.shards import planned_workers
from loadgen.run.timed_run import TimedRun, timed_run
from loadgen.server.client import ServerClient, auth_headers
from loadgen.server.metrics import metrics_page
from loadgen.server.profile import profile
from loadgen.server.ready import check_ready, warm_up
from loadgen.server.tokenizer import ServerTokenizer
from loadgen.text.tokenizer import MOCK_MODEL_NAME


class RunFailed(Exception):
    """The run ended without a usable measurement, or only partly; exit code attached."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def run(config: RunConfig) -> int:
    """Run a benchmark as configured; return the process exit code."""
    check_before_start(config)
    mock = EmbeddedMockServer(config.mock_ttft_ms, config.mock_itl_ms) if config.mock else None
    try:
        if mock is not None:
            config.base_url = mock.start()
            config.model = config.model or MOCK_MODEL_NAME
        try:
            check_endpoint(config.backend, config.api_url)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        return asyncio.run(_run(config))
    finally:
        if mock is not None:
            mock.stop()


async def _run(config: RunConfig) -> int:
    client = ServerClient(config.server_url, auth_headers(config.headers), config.insecure)
    try:
        return await _run_with(config, client)
    finally:
        # Last of all: reporting may still re-tokenize output through the server's tokenizer.
        await client.close()


async def _run_with(config: RunConfig, client: ServerClient) -> int:
    pool = WorkerPool(planned_workers(config))
    pool.start()  # workers import and connect while the dataset is built and the server awaited
    loop = asyncio.get_running_loop()
    preparing = asyncio.current_task()
    timed_run_started = False

    def on_sigint() -> None:
        pool.request_stop()
        if not timed_run_started and preparing is not None:
            preparing.cancel()  # waiting for a server or building a dataset: stop at once

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    finished = False
    try:
        prepared = await _get_ready(config, client, pool)
        timed_run_started = True
        print_traffic(config)
        if pool.stop_requested:
            raise RunFailed("interrupted before the run started", 130)
        timed = await timed_run(config, client, pool, prepared)
        finished = True
        counters_after = await metrics_page(client)
        if config.profile:
            await profile(client, "stop")
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        pool.close(graceful=finished)
    output_lens = await asyncio.to_thread(
        output_lens_of, config, timed.collected, prepared.tokenizer
    )
    outcome = _report(config, prepared, timed, counters_after, output_lens)
    return _exit_code(timed.collected, outcome)


async def _get_ready(config: RunConfig, client: ServerClient, pool: WorkerPool) -> Prepared:
    """Preparation, the ready check, alignment, warm-ups and --profile's start."""
    try:
        prepared = await prepare(config, client)
        if isinstance(prepared.tokenizer, ServerTokenizer):
            prepared.tokenizer.end_build()  # its deadline and progress bar end here
        await check_ready(config, client, prepared.bodies[0])
        prepared = await align(config, client, prepared)
        await warm_up(config, client, prepared.bodies[0])
        print("Starting main benchmark run...")
        if config.profile:
            await profile(client, "start")
    except asyncio.CancelledError:
        if pool.stop_requested:
            raise RunFailed("interrupted before the run started", 130) from None
        raise
    return prepared


def _report(
    config: RunConfig,
    prepared: Prepared,
    timed: TimedRun,
    counters_after: str | None,
    output_lens: np.ndarray,
) -> Outcome:
    """The report of the run (``report_run``), given what preparation knew and the clock."""
    collected = timed.collected
    # t0 is a perf_counter instant; its wall-clock time is now less the time elapsed since.
    t0_wall = datetime.now() - timedelta(microseconds=(perf_counter_ns() - collected.t0_ns) / 1e3)
    return report_run(
        config,
        prepared.meta(timed.num_workers),
        collected,
        output_lens,
        date=datetime.now().strftime("%Y%m%d-%H%M%S"),
        t0_wall=t0_wall,
        probe=probe_stats(timed.probes) if timed.probes is not None else None,
        counters=(timed.counters_before, counters_after),
    )


def _exit_code(collected: Collected, outcome: Outcome) -> int:
    """0, or RunFailed for an interrupted run, lost workers, or no request that completed."""
    if collected.interrupted:
        raise RunFailed("interrupted: the results above cover the requests that finished", 130)
    if collected.worker_problems:
        raise RunFailed("the run lost workers: " + "; ".join(collected.worker_problems))
    if outcome.completed == 0:
        first = outcome.first_error
        raise RunFailed(f"every request failed; the first error: {first.splitlines()[0]}")
    return 0

"""One benchmark's lifecycle, shared by a single run, a campaign and ``--dry-run``.

``RunSession`` owns what a run starts and must stop: the embedded mock server (``--mock``), the
server client, the worker pools, the stop signals (and ``StopSwitch``, their stand-in outside
the main thread), the cancellation of preparation they cause, and the teardown of all of it.
The phases themselves are runner.py's (a run), campaign_run.py's (a campaign) and
dry_run.py's; they ask the session for what they need and tell it when the timed part is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from loadgen.backends import check_endpoint
from loadgen.config import InputError, RunConfig
from loadgen.console import TO_STDERR
from loadgen.fleet.fanout import WorkerPool
from loadgen.mock.process import EmbeddedMockServer
from loadgen.server.client import ServerClient, auth_headers
from loadgen.text.tokenizer import MOCK_MODEL_NAME

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # exit 128 + the signal's number
RECANCEL_S = 0.2

Outcome = TypeVar("Outcome")


class RunFailed(Exception):
    """The run ended without a usable measurement, or only partly; exit code attached."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


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


class RunSession:
    """A run's (or a campaign's) mock, client, workers, stop signals and teardown.

    ``with RunSession(config) as session:`` starts the mock when asked (``session.config`` then
    names it) and checks the endpoint; ``session.run(main)`` runs ``main(session)`` in a new
    event loop with ``session.client`` open. ``start_workers`` starts a pool and, with the
    first, hands the stop signals to the session: one stops the current pool's run and, until
    ``ready``, cancels preparation. ``end_workers`` closes the pools when the timed part is
    over, and ``reporting`` guards the report that follows. Leaving the ``with`` stops the mock.
    """

    def __init__(self, config: RunConfig, stop: StopSwitch | None = None) -> None:
        self.config = config
        self.stop = stop
        self.mock: EmbeddedMockServer | None = None
        self.pools: list[WorkerPool] = []
        self.started = False  # preparation is over: a stop signal no longer cancels it
        self.handles_signals = threading.current_thread() is threading.main_thread()
        self._client: ServerClient | None = None
        self._preparing: asyncio.Task | None = None
        self._late: LateSignals | None = None

    def __enter__(self) -> RunSession:
        """Start the mock if asked, and check the endpoint for the backend."""
        config = self.config
        try:
            if config.mock:
                prefill = ("--prefill-us-per-token", str(config.mock_prefill_us_per_token))
                self.mock = EmbeddedMockServer(
                    config.mock_ttft_ms, config.mock_itl_ms, extra_args=prefill
                )
                base_url = self.mock.start()
                model = config.model or MOCK_MODEL_NAME
                self.config = dataclasses.replace(config, base_url=base_url, model=model)
            try:
                check_endpoint(self.config.backend, self.config.api_url)
            except ValueError as exc:
                raise InputError(str(exc)) from None
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the mock, if one was started."""
        if self.mock is not None:
            self.mock.stop()

    def run(self, main: Callable[[RunSession], Coroutine[Any, Any, Outcome]]) -> Outcome:
        """Run ``main(session)`` in a new event loop, the server client open meanwhile."""
        return asyncio.run(self._with_client(main))

    async def _with_client(
        self, main: Callable[[RunSession], Coroutine[Any, Any, Outcome]]
    ) -> Outcome:
        config = self.config
        self._client = ServerClient(
            config.server_url, auth_headers(config.headers), config.insecure, config.connect_timeout
        )
        try:
            return await main(self)
        finally:
            # Last of all: reporting may still re-tokenize output through the server's tokenizer.
            await self._client.close()

    @property
    def client(self) -> ServerClient:
        """The server client (inside ``run``)."""
        assert self._client is not None, "the client is open inside RunSession.run"
        return self._client

    @property
    def pool(self) -> WorkerPool:
        """The current worker pool (the last started)."""
        return self.pools[-1]

    def start_workers(self, pool: WorkerPool) -> WorkerPool:
        """Start ``pool`` (its workers import and connect while the caller goes on) as the
        current one; the first also hands the stop signals to the session."""
        pool.start()
        self.pools.append(pool)
        if len(self.pools) == 1:
            self._handle_signals()
        return pool

    def replace_workers(self, pool: WorkerPool) -> WorkerPool:
        """Close the current pool at once (a worker was lost, or may be mid-run) and start
        ``pool`` in its place; the stop signals stop the new one."""
        self.pool.close(graceful=False)
        return self.start_workers(pool)

    def _handle_signals(self) -> None:
        loop = asyncio.get_running_loop()
        self._preparing = asyncio.current_task()
        for signum in STOP_SIGNALS if self.handles_signals else ():  # each stops it as Ctrl-C
            loop.add_signal_handler(signum, self._on_stop_signal, signum)  # does, results kept
        if self.stop is not None:
            self.stop.attach(loop, self._on_stop_signal)

    def _on_stop_signal(self, signum: int) -> None:
        self.pool.request_stop(signum)
        if self._preparing is not None:  # waiting for a server or building a dataset: stop now
            cancel_until_done(self._preparing, lambda: not self.started)

    def ready(self) -> None:
        """Preparation is over: from now on a stop signal stops the workers' run only."""
        self.started = True

    async def end_workers(
        self, graceful: bool, report_follows: bool = False, dismiss: bool = False
    ) -> None:
        """The timed part is over: stop signals go back to their default handlers, or, when
        a report follows, let it finish (``reporting``); with ``dismiss`` the current pool's
        reusable workers are told there is no next run; every pool is closed (``graceful``:
        its workers may finish on their own)."""
        loop = asyncio.get_running_loop()
        if self.stop is not None:
            self.stop.detach()
        if report_follows:
            self._late = LateSignals(loop, self.handles_signals)  # the report finishes first
        else:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)
        if dismiss:
            await self.pool.dismiss()
        for pool in self.pools:
            pool.close(graceful=graceful)

    @contextlib.contextmanager
    def reporting(self) -> Iterator[None]:
        """While the report is written: a first stop signal lets it finish and is told, and
        RunFailed (128 + its number) follows it; a second one exits at once."""
        late = self._late
        assert late is not None, "end_workers(report_follows=True) comes first"
        try:
            yield
        finally:
            late.remove()
        if late.signum is not None and not self.pool.stop_requested:
            # The run had ended and its results above are complete; say what stopped the process.
            raise RunFailed(
                f"interrupted by {signal.Signals(late.signum).name} while the report was "
                "written; the results above are complete",
                128 + late.signum,
            )


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


def cancel_until_done(task: asyncio.Task, still: Callable[[], bool]) -> None:
    """Cancel ``task``, and again every RECANCEL_S while it runs and ``still()`` holds.
    asyncio.wait_for (the ready check's retries) can swallow a cancellation that lands as an
    attempt ends (Python 3.10 and 3.11): with one cancel, a signal while a server refused
    connections was lost about 1 time in 8, and the run waited out the whole ready check."""
    if still() and not task.done():
        task.cancel()
        asyncio.get_running_loop().call_later(RECANCEL_S, cancel_until_done, task, still)

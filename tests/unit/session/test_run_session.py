"""The run session's lifecycle with stand-in workers (loadgen/session/lifecycle.py): a stop
request cancels preparation until the session is ready and stops the current pool's run; the
timed part's end closes every pool; a stop signal while the report is written lets it finish
and is told."""

from __future__ import annotations

import asyncio
import signal

import pytest

from loadgen.config import RunConfig
from loadgen.session.lifecycle import RunFailed, RunSession, StopSwitch


class Pool:
    """Stands in for a WorkerPool: what the session asked of it."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.stop_requested = False

    def start(self) -> None:
        self.calls.append("start")

    def request_stop(self, signum: int) -> None:
        self.calls.append(f"stop {signal.Signals(signum).name}")
        self.stop_requested = True

    async def dismiss(self) -> None:
        self.calls.append("dismiss")

    def close(self, graceful: bool) -> None:
        self.calls.append(f"close graceful={graceful}")


def test_a_stop_during_preparation_cancels_it_and_stops_the_pool():
    switch = StopSwitch()
    session = RunSession(RunConfig(), stop=switch)
    pool = Pool()

    async def main(session: RunSession) -> str:
        session.start_workers(pool)  # type: ignore[arg-type]
        try:
            switch.request_stop(signal.SIGTERM)
            await asyncio.sleep(5)  # preparation, cancelled
        except asyncio.CancelledError:
            return "cancelled"
        finally:
            await session.end_workers(graceful=False)
        return "prepared"

    assert session.run(main) == "cancelled"
    assert pool.calls == ["start", "stop SIGTERM", "close graceful=False"]


def test_once_ready_a_stop_stops_the_workers_only_and_new_pools_take_over():
    switch = StopSwitch()
    session = RunSession(RunConfig(), stop=switch)
    first, second = Pool(), Pool()

    async def main(session: RunSession) -> str:
        session.start_workers(first)  # type: ignore[arg-type]
        session.ready()
        session.replace_workers(second)  # type: ignore[arg-type]  (the first was lost)
        switch.request_stop(signal.SIGINT)
        await asyncio.sleep(0.3)  # a cancellation would land here
        await session.end_workers(graceful=True, dismiss=True)
        return "ran"

    assert session.run(main) == "ran"
    assert first.calls == ["start", "close graceful=False", "close graceful=True"]
    assert second.calls == ["start", "stop SIGINT", "dismiss", "close graceful=True"]


def test_a_stop_signal_while_the_report_is_written_lets_it_finish_then_says_so(terminal, capsys):
    session = RunSession(RunConfig())
    pool = Pool()

    async def main(session: RunSession) -> str:
        session.start_workers(pool)  # type: ignore[arg-type]
        session.ready()
        await session.end_workers(graceful=True, report_follows=True)
        with session.reporting():
            assert session._late is not None
            session._late._on_signal(signal.SIGTERM)  # as the handler it installed is called
            return "the report"

    with pytest.raises(RunFailed, match="interrupted by SIGTERM while the report") as raised:
        session.run(main)
    assert raised.value.exit_code == 143
    assert "note: SIGTERM: finishing the report of the run" in capsys.readouterr().err
    assert pool.calls == ["start", "close graceful=True"]


def test_the_report_of_a_run_without_a_late_signal_is_returned():
    session = RunSession(RunConfig())

    async def main(session: RunSession) -> str:
        session.start_workers(Pool())  # type: ignore[arg-type]
        await session.end_workers(graceful=True, report_follows=True)
        with session.reporting():
            return "the report"

    assert session.run(main) == "the report"

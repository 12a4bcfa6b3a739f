"""workers/pool.py's preopen() against the raw-socket server of tests/raw_http_server.py (in a
thread of the test process): it opens what it was asked for, and when it cannot, it says why."""

from __future__ import annotations

import asyncio

import aiohttp
from helpers import hang_guard
from raw_http_server import Habits, RawServer

from workers import pool
from workers.pool import PoolConnector, preopen


async def _preopen(port: int, count: int) -> tuple[int, str, str]:
    connector = PoolConnector(limit=count, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        return await preopen(
            session, connector, f"http://127.0.0.1:{port}/v1/models", {}, None, count
        )


def test_every_connection_asked_for_is_opened_with_nothing_to_say(monkeypatch) -> None:
    # The budget bounds t0's delay in a run; here it only must not run out on a busy machine.
    monkeypatch.setattr(pool, "PREOPEN_BUDGET_S", hang_guard(pool.PREOPEN_BUDGET_S))
    habits = Habits(close_after_stream_s=None)
    with RawServer(habits) as server:
        opened, error, short = asyncio.run(_preopen(server.port, 200))
    assert (opened, error, short) == (200, "", "")
    assert habits.connections == 200


def test_a_server_that_keeps_no_idle_connection_is_named_as_the_reason() -> None:
    with RawServer(Habits(close_after_get=True)) as server:
        opened, error, short = asyncio.run(_preopen(server.port, 100))
    assert opened < 100
    assert error == ""
    assert "the server closed" in short


def test_the_budget_is_named_when_it_runs_out(monkeypatch) -> None:
    monkeypatch.setattr(pool, "PREOPEN_BUDGET_S", 0.0)
    monkeypatch.setattr(pool, "PREOPEN_EACH_S", 0.0)
    monkeypatch.setattr(pool, "PREOPEN_POLL_S", 0.0)
    with RawServer(Habits(close_after_stream_s=None)) as server:
        opened, error, short = asyncio.run(_preopen(server.port, 50))
    assert (opened, error) == (0, "")  # the budget was spent before the first GET
    assert short == "opening them took longer than its 0.0 s budget"


def test_a_refused_connection_is_the_first_error_and_the_reason() -> None:
    with RawServer(Habits()) as server:
        port = server.port
    opened, error, short = asyncio.run(_preopen(port, 10))  # nobody listens any more
    assert opened == 0
    assert error.startswith("ClientConnectorError")
    assert short == f"a GET failed: {error}"

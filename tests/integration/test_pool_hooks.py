"""aiohttp's pool internals that workers/worker.py's PoolConnector hooks, pinned against the
raw-socket server of tests/raw_http_server.py in a thread of the test process."""

from __future__ import annotations

import asyncio

import aiohttp
from raw_http_server import Habits, RawServer

from workers.pool import FRESH_ONLY, PoolConnector


def _pooled(connector: PoolConnector) -> int:
    return sum(len(conns) for conns in connector._conns.values())


async def _pool_hooks() -> tuple[int, int, int, int]:
    """Pre-open two connections, use one, then stop reuse; report what the hooks saw."""
    habits = Habits(close_after_stream_s=None)
    with RawServer(habits) as server:
        url = f"http://127.0.0.1:{server.port}/v1/models"
        connector = PoolConnector()
        async with aiohttp.ClientSession(connector=connector) as session:
            connector.preopening = True
            token = FRESH_ONLY.set(True)  # as the worker pre-opens: never from the pool
            for _ in range(2):
                async with session.get(url) as response:
                    await response.read()
            FRESH_ONLY.reset(token)
            connector.preopening = False
            opened = connector.open_preopened()
            async with session.get(url) as response:  # takes a pre-opened one from the pool
                await response.read()
            unused = len(connector.preopened)
            connector.reuse = False
            pooled_before = _pooled(connector)
            async with session.get(url) as response:  # the other pooled one, closed after
                await response.read()
            return opened, unused, pooled_before, _pooled(connector)


def test_pool_hooks_match_this_aiohttp() -> None:
    opened, unused, pooled_before, pooled_after = asyncio.run(_pool_hooks())
    assert opened == 2  # FRESH_ONLY made each GET open its own connection
    assert unused == 1  # taking a pooled one removes it from the pre-opened set
    assert (pooled_before, pooled_after) == (2, 1)  # with reuse off a used one is not pooled

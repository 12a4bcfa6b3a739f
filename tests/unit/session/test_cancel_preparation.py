"""A stop signal during preparation stops it even when an await swallows one cancellation (as
asyncio.wait_for can in Python 3.10 and 3.11): loadgen/session/lifecycle.py cancel_until_done."""

from __future__ import annotations

import asyncio
import contextlib

from loadgen.session.lifecycle import RECANCEL_S, cancel_until_done


async def swallows_the_first_cancel(log: list[str]) -> None:
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        log.append("swallowed")  # the race: the attempt ended, the cancellation is lost
    await asyncio.sleep(60)


def test_a_swallowed_cancellation_is_repeated_until_preparation_ends():
    async def scenario() -> tuple[list[str], float]:
        log: list[str] = []
        task = asyncio.create_task(swallows_the_first_cancel(log))
        await asyncio.sleep(0)
        start = asyncio.get_running_loop().time()
        cancel_until_done(task, lambda: True)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        assert task.cancelled()
        return log, asyncio.get_running_loop().time() - start

    log, waited = asyncio.run(scenario())
    assert log == ["swallowed"]
    assert waited < RECANCEL_S + 1  # the second cancellation ended it, not the 60 s sleep


def test_no_cancellation_once_preparation_is_over():
    async def scenario() -> bool:
        task = asyncio.create_task(asyncio.sleep(0.5))
        await asyncio.sleep(0)
        cancel_until_done(task, lambda: False)  # the timed run has started: not ours to stop
        await task
        return task.cancelled()

    assert asyncio.run(scenario()) is False

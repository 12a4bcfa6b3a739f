"""The dispatcher's timer: never early, woken at once by a stop, and a working fallback."""

from __future__ import annotations

import asyncio
import sys
from time import perf_counter_ns

import pytest

from workers.precise_timer import PreciseTimer


async def lateness_ms(timer: PreciseTimer, waits: int = 20) -> list[float]:
    late = []
    for k in range(waits):
        deadline = perf_counter_ns() + (1 + k % 5) * 1_000_000
        await timer.wait_until(deadline)
        late.append((perf_counter_ns() - deadline) / 1e6)
    return late


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux-only")
def test_timerfd_wakes_at_the_deadline_never_before() -> None:
    async def scenario() -> list[float]:
        timer = PreciseTimer(asyncio.get_running_loop())
        assert timer.precise
        try:
            return await lateness_ms(timer)
        finally:
            timer.close()

    late = asyncio.run(scenario())
    assert min(late) >= 0
    # How late it wakes is this machine's, not the timer's: scripts/bench/wake_latency.py
    # measures it (its "timer" p50; under 1 ms on a quiet machine).


def test_wake_cuts_a_wait_short_and_the_fallback_works() -> None:
    async def scenario() -> None:
        timer = PreciseTimer(asyncio.get_running_loop())
        timer.close()  # no timerfd: the loop's own timers
        assert not timer.precise
        await timer.wait_until(perf_counter_ns() + 2_000_000)
        waiting = asyncio.create_task(timer.wait_until(perf_counter_ns() + 60 * 10**9))
        await asyncio.sleep(0.01)
        timer.wake()
        await asyncio.wait_for(waiting, 30)  # woken: nearer now than the 60 s deadline

    asyncio.run(scenario())

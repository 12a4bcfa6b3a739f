"""The worker's own loop-lag probe (workers/loop_probe.py): a stall that holds the loop is seen
whole, the ticks it missed counted, and each sample is the longest lag of one interval's ticks."""

from __future__ import annotations

import asyncio
import time
from array import array

import pytest

from workers.loop_probe import PROBE_INTERVAL_NS, TICK_NS, LoopProbe
from workers.precise_timer import libc_with_timerfd

pytestmark = pytest.mark.skipif(libc_with_timerfd() is None, reason="no timerfd here")


async def probe_around_stall(stall_s: float, after_s: float) -> tuple[array[int], float]:
    """The samples of a probe around a stall of ``stall_s``, and how long it ran (s)."""
    samples: array[int] = array("q")
    started = time.perf_counter()
    probe = LoopProbe(asyncio.get_running_loop(), samples)
    try:
        await asyncio.sleep(0.015)
        time.sleep(stall_s)  # holds the loop: no tick is read until it ends
        await asyncio.sleep(after_s)
    finally:
        probe.close()
    return samples, time.perf_counter() - started


def test_a_stall_longer_than_an_interval_is_seen_whole() -> None:
    stall_ms = 35
    samples, _ = asyncio.run(probe_around_stall(stall_ms / 1000, 0.05))
    # The first tick missed expired within one tick of the stall's start, so its lag is at
    # least the stall less a tick; the coarse 10 ms probe saw at most the stall less 10 ms.
    assert max(samples) / 1e6 >= stall_ms - TICK_NS / 1e6
    # The stall spans several intervals: each one's sample has the longest lag of its ticks.
    assert sum(s >= PROBE_INTERVAL_NS for s in samples) >= 2


def test_samples_come_one_per_interval() -> None:
    samples, ran_s = asyncio.run(probe_around_stall(0.0, 0.1))
    # One per full interval the probe ran, never one per tick (ten times as many); ticks that
    # expired just before it closed may go unread on a busy host.
    intervals = ran_s / (PROBE_INTERVAL_NS / 1e9)
    assert intervals / 2 - 1 <= len(samples) <= intervals + 1

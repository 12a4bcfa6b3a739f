"""A worker's own loop-lag probe: a kernel timer, beside or instead of the coordinator's datagrams.

Local workers also take the coordinator's UDP probes (workers/protocol.py), which measure how
long an arriving datagram waits for the loop; but the coordinator sends them from its own loop,
which a burst of requests keeps as busy as the worker's, so they thin out exactly when the
worker's loop is held longest. A remote worker's coordinator is across a network, whose delay
would be counted as the loop's. So every worker arms one periodic Linux timerfd
(absolute CLOCK_MONOTONIC expiries every ``TICK_NS``) that the loop reads like any socket; each
tick's lag is how long after its expiry the loop got to it, the same delay an arriving chunk's
stamp sees, and each sample is the longest lag of the ticks of one ``PROBE_INTERVAL_NS``. A
tick missed while the loop was held is answered by the next read and counted too, so a stall
is seen whole, to within a tick: a chunk that came between two ticks waited at most the next
tick's lag plus one tick (scripts/bench/accuracy.py's bursts showed a 10 ms probe missing up to
10 ms of a stall). One timer for the worker, never one per request. Where timerfd cannot be had
the probe is off and a remote worker reports no loop-lag samples.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
from array import array
from time import perf_counter_ns

from workers.precise_timer import (
    CLOCK_MONOTONIC,
    TFD_CLOEXEC,
    TFD_NONBLOCK,
    TFD_TIMER_ABSTIME,
    Itimerspec,
    Timespec,
    libc_with_timerfd,
)

PROBE_INTERVAL_NS = 10_000_000  # one sample per this, as often as the coordinator probes
TICK_NS = 1_000_000  # the timer's period: how finely a stall's start is seen
TICKS_PER_SAMPLE = PROBE_INTERVAL_NS // TICK_NS


class LoopProbe:
    """Samples the loop's lag, the longest of each PROBE_INTERVAL_NS's ticks, into ``samples``
    until ``close``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, samples: array[int]) -> None:
        self.loop = loop
        self.samples = samples
        self.fd = -1
        libc = libc_with_timerfd()
        if libc is None:
            return
        fd = libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        if fd < 0:
            return
        self.first_ns = perf_counter_ns() + TICK_NS
        self.expiries = 0
        self.longest = 0  # the longest lag of the current sample's ticks so far
        interval = Timespec(0, TICK_NS)
        first = Timespec(self.first_ns // 1_000_000_000, self.first_ns % 1_000_000_000)
        spec = Itimerspec(interval, first)
        if libc.timerfd_settime(fd, TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            os.close(fd)
            return
        self.fd = fd
        loop.add_reader(fd, self._expired)

    def _expired(self) -> None:
        now = perf_counter_ns()
        try:
            count = int.from_bytes(os.read(self.fd, 8), "little")
        except BlockingIOError:
            return
        # Every tick this wake answers counts: older ones in the same read were missed whole
        # while the loop was held, and a chunk that came with any of them waited as long.
        for k in range(self.expiries, self.expiries + count):
            self.longest = max(self.longest, now - (self.first_ns + k * TICK_NS))
            if k % TICKS_PER_SAMPLE == TICKS_PER_SAMPLE - 1:
                self.samples.append(self.longest)
                self.longest = 0
        self.expiries += count

    def close(self) -> None:
        """Stop sampling and release the timer."""
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1

"""A remote worker's loop-lag probe: a timer of its own instead of the coordinator's datagrams.

Local workers take the coordinator's UDP probes (workers/protocol.py), which measure how long
an arriving datagram waits for the loop. A remote worker's coordinator is across a network,
whose delay would be counted as the loop's; so the worker arms one periodic Linux timerfd
(``PROBE_INTERVAL_NS``, absolute CLOCK_MONOTONIC expiries) that the loop reads like any socket,
and each sample is how long after its expiry the loop got to it: the same delay an arriving
chunk's stamp sees. One timer for the worker, never one per request. Where timerfd cannot be
had the probe is off and the worker reports no loop-lag samples.
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

PROBE_INTERVAL_NS = 10_000_000  # as often as the coordinator probes local workers


class LoopProbe:
    """Samples the loop's lag every PROBE_INTERVAL_NS into ``samples`` until ``close``."""

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
        self.first_ns = perf_counter_ns() + PROBE_INTERVAL_NS
        self.expiries = 0
        interval = Timespec(0, PROBE_INTERVAL_NS)
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
        self.expiries += count
        # The newest expiry is the one this wake answers: older ones in the same read were
        # missed whole, and the newest's age is what a chunk arriving with it would wait.
        expired_ns = self.first_ns + (self.expiries - 1) * PROBE_INTERVAL_NS
        self.samples.append(max(0, now - expired_ns))

    def close(self) -> None:
        """Stop sampling and release the timer."""
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1

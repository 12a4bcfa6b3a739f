"""Wake an asyncio loop at an exact ``perf_counter_ns`` instant: a Linux timerfd, read by the
loop like any socket.

uvloop's timers count whole milliseconds from a clock cached once per loop pass, so a release
timed with them fires up to about a millisecond early or late. A timerfd armed with the absolute
CLOCK_MONOTONIC instant (the clock ``time.perf_counter_ns`` reads on Linux) becomes readable
when the kernel's high-resolution timer expires, so the dispatcher wakes as promptly as it would
for an arriving response. Elsewhere, or when timerfd cannot be had, ``PreciseTimer`` falls back
to the loop's own timers.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import sys
import time

CLOCK_MONOTONIC = 1
TFD_NONBLOCK = os.O_NONBLOCK
TFD_CLOEXEC = os.O_CLOEXEC
TFD_TIMER_ABSTIME = 1


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", Timespec), ("it_value", Timespec)]


def libc_with_timerfd() -> ctypes.CDLL | None:
    """The C library, where a timerfd on perf_counter_ns's clock can be had (else None)."""
    if not sys.platform.startswith("linux"):
        return None
    if time.get_clock_info("perf_counter").implementation != "clock_gettime(CLOCK_MONOTONIC)":
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


class PreciseTimer:
    """One re-armable timer; ``wait_until`` may be cut short by ``wake``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiter: asyncio.Future[None] | None = None
        self.libc = libc_with_timerfd()
        self.fd = -1
        if self.libc is not None:
            self.fd = self.libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        if self.fd >= 0:
            loop.add_reader(self.fd, self._expired)

    @property
    def precise(self) -> bool:
        """Whether a timerfd is in use (rather than the loop's millisecond timers)."""
        return self.fd >= 0

    async def wait_until(self, deadline_ns: int) -> None:
        """Return at ``deadline_ns`` (perf_counter_ns), or earlier if ``wake`` is called."""
        self.waiter = self.loop.create_future()
        if self.fd >= 0:
            self._arm(deadline_ns)
            handle = None
        else:
            delay_s = max(0.0, (deadline_ns - time.perf_counter_ns()) / 1e9)
            handle = self.loop.call_later(delay_s, self.wake)
        try:
            await self.waiter
        finally:
            if handle is not None:
                handle.cancel()
            self.waiter = None

    def wake(self) -> None:
        """End the current wait now."""
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def close(self) -> None:
        """Release the timerfd."""
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1

    def _arm(self, deadline_ns: int) -> None:
        deadline_ns = max(deadline_ns, 1)  # an all-zero it_value would disarm it
        spec = Itimerspec(
            Timespec(0, 0), Timespec(deadline_ns // 1_000_000_000, deadline_ns % 1_000_000_000)
        )
        assert self.libc is not None
        if self.libc.timerfd_settime(self.fd, TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def _expired(self) -> None:
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            return
        self.wake()

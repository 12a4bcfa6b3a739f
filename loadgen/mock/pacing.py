"""The stream pacer: writes every paced stream's due token events from one millisecond timer.

Token event ``k`` of a stream is due ``ttft + k * itl`` after its response headers went out; a
stream that fell behind sends every event already due in one write.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from array import array
from dataclasses import dataclass
from time import perf_counter_ns

from loadgen.mock.events import Events


@dataclass(slots=True, eq=False)
class PacedStream:
    """A streamed response whose token events the pacer writes."""

    transport: asyncio.Transport
    events: Events
    first_ms: float  # loop clock, in ms, when token event 0 is due; event k is due ITL * k later
    head_events: int  # 1 when the role chunk goes out with token event 0 (chat), else 0
    record: array | None
    done: asyncio.Future[None]  # resolved once the last event is written or the client is gone
    sent: int = 0  # token events written so far
    # Read nothing more once the last event is out: a request the client sends right after it
    # is never seen by a server that closes after each stream (llama.cpp).
    stop_reading: bool = False


# Slack for float error when clock readings and deadlines are rounded to whole milliseconds.
_MS_EPS = 1e-3


class Pacer:
    """Writes the due token events of every paced stream from one timer, a tick per millisecond.

    Streams wait in buckets keyed by the millisecond of the loop clock at which their next event
    is due (the first at or after the deadline); one timer is armed for the earliest bucket. A
    tick writes the due events of every stream in the buckets that are due, so an event costs no
    timer, future or task switch of its own. uvloop's clock and timers count whole milliseconds,
    so per-stream sleeps were no more precise than these ticks.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, itl_ms: float) -> None:
        self.loop = loop
        self.itl_ms = itl_ms
        self.buckets: dict[int, list[PacedStream]] = {}
        self.keys: list[int] = []  # heap of the buckets' keys
        self.timer: asyncio.TimerHandle | None = None
        self.timer_key = 0  # the bucket the timer is armed for (or, in a tick, is serving)

    def now_ms(self) -> float:
        """The loop clock in milliseconds."""
        return self.loop.time() * 1000.0

    def start(self, stream: PacedStream) -> None:
        """Write what is already due of a new stream at once, and schedule the rest."""
        now = self.now_ms()
        key = math.ceil(stream.first_ms - _MS_EPS)
        if key <= math.floor(now + _MS_EPS):
            self._write_due(stream, now, key)
        else:
            self._schedule(stream, key)

    def _schedule(self, stream: PacedStream, key: int) -> None:
        """Put a stream in bucket ``key``, arming the timer for it if it is the earliest."""
        bucket = self.buckets.get(key)
        if bucket is not None:
            bucket.append(stream)
            return
        self.buckets[key] = [stream]
        heapq.heappush(self.keys, key)
        # In a tick, keys scheduled are past the one served, so the timer is left to the tick.
        if self.timer is None or key < self.timer_key:
            if self.timer is not None:
                self.timer.cancel()
            self._arm(key)

    def _arm(self, key: int) -> None:
        self.timer = self.loop.call_at(key / 1000.0, self._tick)
        self.timer_key = key

    def _tick(self) -> None:
        """Write the due events of every stream whose bucket is due, then re-arm the timer."""
        now = self.now_ms()
        # asyncio may run a timer a hair before its time (clock resolution); it is due then.
        limit = max(math.floor(now + _MS_EPS), self.timer_key)
        keys, buckets = self.keys, self.buckets
        while keys and keys[0] <= limit:
            for stream in buckets.pop(heapq.heappop(keys)):
                if not stream.done.done():  # else its handler was cancelled (server shutdown)
                    self._write_due(stream, now, limit)
        self.timer = None
        if keys:
            self._arm(keys[0])

    def _write_due(self, stream: PacedStream, now: float, limit: int) -> None:
        """Write the stream's next event and any others due by ``now``; then schedule or end it.

        The stream's next bucket is after ``limit``, the last one this tick serves.
        """
        transport = stream.transport
        if transport.is_closing():  # the client went away mid-stream
            stream.done.set_result(None)
            return
        events, sent = stream.events, stream.sent
        # A server that fell behind sends every token that is already due at once.
        upto = int((now - stream.first_ms) / self.itl_ms) + 1
        if upto <= sent:  # the tick came a hair early
            upto = sent + 1
        elif upto > events.n:
            upto = events.n
        data = events.render(sent, upto)
        if stream.record is not None:
            count = upto - sent + (stream.head_events if sent == 0 else 0)
            instant = perf_counter_ns()
            if count == 1:
                stream.record.append(instant)
            else:
                stream.record.extend(itertools.repeat(instant, count))
        transport.write(data)
        stream.sent = upto
        if upto == events.n:
            if stream.stop_reading:
                transport.pause_reading()
            stream.done.set_result(None)
            return
        key = math.ceil(stream.first_ms + upto * self.itl_ms - _MS_EPS)
        bucket = self.buckets.get(key) if key > limit else None
        if bucket is not None:  # the usual case, inlined: a bucket that already exists
            bucket.append(stream)
        else:
            self._schedule(stream, max(key, limit + 1))

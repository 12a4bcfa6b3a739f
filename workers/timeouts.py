"""--request-timeout, --idle-timeout and the output guard without a timer per request: one task
per worker sweeps its open requests a few times a second and cancels the one past a limit,
giving its reason. The sweep reads each stream's own counters, so reading costs nothing more.
"""

from __future__ import annotations

import asyncio
from time import perf_counter_ns

from workers.pooling import PooledAnswer
from workers.protocol import WorkerConfig
from workers.sse import SSEStream

SWEEP_S = 0.25  # how often open requests are checked against the timeouts (at most)


class OpenRequest:
    """What the sweep watches of a request in flight (perf_counter_ns instants): the sweep
    reads the stream's own counts, so reading a stream costs nothing more per read."""

    __slots__ = ("guard", "last_byte_ns", "reads_seen", "sent_ns", "stream", "timed_out")

    def __init__(self, sent_ns: int, stream: SSEStream | PooledAnswer, guard: int) -> None:
        self.sent_ns = sent_ns
        self.stream = stream
        self.guard = guard  # the most SSE messages it may bring (the output guard)
        self.last_byte_ns = sent_ns  # when bytes were last seen coming (the sweep's view)
        self.reads_seen = 0
        self.timed_out: str | None = None  # why a sweep cancelled it, if one did

    def progress(self, now_ns: int) -> None:
        """Note the time if the stream has read anything since the last look."""
        reads = len(self.stream.chunks) if isinstance(self.stream, SSEStream) else 0
        if reads != self.reads_seen:
            self.reads_seen, self.last_byte_ns = reads, now_ns


def _ns(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1e9)


async def sweep_timeouts(
    open_requests: dict[asyncio.Task[None], OpenRequest], config: WorkerConfig
) -> None:
    """Until cancelled: fail each open request past the output guard, --request-timeout or
    --idle-timeout (its task cancelled, ``timed_out`` saying why)."""
    total_ns = _ns(config.request_timeout_s)
    idle_ns = _ns(config.idle_timeout_s)
    given = [t for t in (config.request_timeout_s, config.idle_timeout_s) if t]
    interval_s = min(SWEEP_S, *(t / 4 for t in given))
    while True:
        await asyncio.sleep(interval_s)
        now = perf_counter_ns()
        for task, watched in list(open_requests.items()):
            if watched.timed_out is None:
                watched.timed_out = _why_stop(watched, now, total_ns, idle_ns, config)
                if watched.timed_out is not None:
                    task.cancel()


def _why_stop(
    watched: OpenRequest, now: int, total_ns: int | None, idle_ns: int | None, config: WorkerConfig
) -> str | None:
    """Why the request must stop now, or None."""
    watched.progress(now)
    ends = watched.stream.ends if isinstance(watched.stream, SSEStream) else 0
    if ends > watched.guard:
        return (
            f"output guard: more than {watched.guard} SSE messages (twice max_tokens and 64): "
            "the server does not end this stream"
        )
    if total_ns is not None and now - watched.sent_ns > total_ns:
        return (
            f"request timeout: not finished {config.request_timeout_s:g} s after it was sent "
            "(--request-timeout)"
        )
    if idle_ns is not None and now - watched.last_byte_ns > idle_ns:
        return (
            f"idle timeout: no byte from the server for {config.idle_timeout_s:g} s "
            "(--idle-timeout)"
        )
    return None

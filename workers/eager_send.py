"""The request's write: stamped when aiohttp hands the bytes to the connection, and, on Python
3.10 and 3.11, done in the loop pass that sent the request, as on 3.12+.

``StampedRequest`` (the worker session's ``request_class``) notes the instant its write starts
in the list the request's task put in ``WRITTEN_NS``. The worker starts TTFT and E2EL there, less
the time spent opening the request's connection, if it opened one: what aiohttp spends building
the request in Python (a few hundred microseconds at p99 in a busy worker, against the server's
own receipt: scripts/bench/accuracy.py's send leg) is the client's time, not the server's, and
delays the request's leaving instead (docs/compat.md, "Send instant").

aiohttp buffers a request's status line and headers, and writes them with the body in a task
(``ClientRequest.write_bytes``). From Python 3.12 it starts that task eagerly, so the request is
on the wire before ``session.post`` returns control; before 3.12 the task waits for the next
pass of the event loop, behind every read and timer already due. In a worker with hundreds of
open streams that pass held each request back by half a millisecond at the median, inside the
TTFT it measures (scripts/bench/accuracy.py: loadgen's send leg against the bare client's).

``install`` sets a task factory that runs the first step of that one coroutine at once, as
``eager_start`` does: almost always it writes and returns, and the factory hands aiohttp a
finished future (aiohttp drops a writer task that is already done). Should it wait instead
(the transport paused, a streamed body), the rest runs in an ordinary task. Every other
coroutine becomes an ordinary task.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import types
from collections.abc import Coroutine, Generator
from time import perf_counter_ns
from typing import Any, TypeVar

from aiohttp.client_reqrep import ClientRequest

# The current request's write instants, set in its own task's context (a re-send writes twice).
WRITTEN_NS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "written_ns", default=None
)


_T = TypeVar("_T")
# What a task factory is given before Python 3.12: a coroutine or a generator-based one.
_CoroutineLike = Generator[Any, None, _T] | Coroutine[Any, Any, _T]

_write_bytes = ClientRequest.write_bytes
_WRITE_BYTES = _write_bytes.__code__


class StampedRequest(ClientRequest):
    """aiohttp's request, noting in ``WRITTEN_NS`` when its status line, headers and body go to
    the connection (aiohttp buffers the head and writes it with the body in ``write_bytes``)."""

    def write_bytes(self, *args: Any) -> Coroutine[Any, Any, None]:
        # A plain function handing back aiohttp's own coroutine, which aiohttp (or ``install``)
        # starts at once: no coroutine of its own, and the factory still knows the write.
        if (written := WRITTEN_NS.get()) is not None:
            written.append(perf_counter_ns())
        return _write_bytes(self, *args)


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Start aiohttp's request writes eagerly on ``loop``; nothing to do from Python 3.12."""
    if sys.version_info < (3, 12):
        loop.set_task_factory(_factory)


def _factory(
    loop: asyncio.AbstractEventLoop, coro: _CoroutineLike[_T], **kwargs: Any
) -> asyncio.Future[_T]:
    if getattr(coro, "cr_code", None) is not _WRITE_BYTES:
        return asyncio.Task(coro, loop=loop, **kwargs)
    try:
        waiting = coro.send(None)
    except StopIteration as stop:
        done = loop.create_future()
        done.set_result(stop.value)
        return done
    except BaseException as exc:
        failed = loop.create_future()
        failed.set_exception(exc)
        return failed
    return asyncio.Task(_resume(coro, waiting), loop=loop, **kwargs)


@types.coroutine
def _resume(coro: _CoroutineLike[Any], waiting: Any) -> Generator[Any, Any, Any]:
    """The rest of ``coro``, which yielded ``waiting`` (the future it awaits) on its first step:
    the task waits on that future, then every value and exception goes on to ``coro``."""
    while True:
        try:
            value = yield waiting
        except BaseException as exc:
            try:
                waiting = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            waiting = coro.send(value)
        except StopIteration as stop:
            return stop.value

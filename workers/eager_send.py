"""Python 3.10 and 3.11: a request leaves in the loop pass that stamped its send, as on 3.12+.

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
import sys
import types
from collections.abc import Coroutine, Generator
from typing import Any

from aiohttp.client_reqrep import ClientRequest

_WRITE_BYTES = ClientRequest.write_bytes.__code__


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Start aiohttp's request writes eagerly on ``loop``; nothing to do from Python 3.12."""
    if sys.version_info < (3, 12):
        loop.set_task_factory(_factory)


def _factory(loop: asyncio.AbstractEventLoop, coro: Coroutine, **kwargs: Any) -> asyncio.Future:
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
def _resume(coro: Coroutine, waiting: Any) -> Generator[Any, Any, Any]:
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

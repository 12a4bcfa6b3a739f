"""Blocking work of the coordinator (building a dataset, loading a tokenizer) off its loop, in
threads a stopped run does not wait for.

``asyncio.to_thread`` uses the loop's pool, whose threads ``asyncio.run`` and the interpreter
join on the way out: Ctrl-C during a 2,000-prompt build of long prompts then took 14 s to exit.
A daemon thread is left behind instead; what it computes is no longer wanted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def in_daemon_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a daemon thread, awaited; a cancelled wait leaves the thread behind."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # the wait was cancelled: nobody wants it
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        result, error = None, None
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to the awaiting task, raised there
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: the run has ended
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(
        target=work, name=f"loadgen-{getattr(fn, '__name__', 'work')}", daemon=True
    ).start()
    return await future


def niced(fn: Callable[[], T], nice: int) -> Callable[[], T]:
    """``fn``, run at niceness ``nice`` in the thread that calls it (Linux schedules threads
    one by one: the thread yields the CPU as a niced process would; elsewhere, as it is)."""

    def run() -> T:
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        return fn()

    return run

"""The one helper that waits out a server's start-up: retry an operation until a deadline.

Every request that may reach a server that is still starting goes through ``retry_with_timeout``
with ``--ready-check-timeout-sec``: model discovery, the server tokenizer's probe and the ready
check. Failures a retry cannot fix (an empty model list, a request the server rejects as
malformed) raise ``NotRetryable`` and end the wait at once. The server tokenizer's calls use the
same helper with a bounded number of attempts, retrying only ``ConnectionLost``.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp

from loadgen.records.redact import redact_text
from loadgen.server.errors import (
    NotRetryable,
    ReadinessTimeout,
    ServerError,
    ServerUnreachable,
    describe_error,
)
from loadgen.terminal import printable

log = logging.getLogger(__name__)

T = TypeVar("T")

READY_CHECK_HINT = "--ready-check-timeout-sec N waits up to N s for it"
RETRYABLE = (ServerError, aiohttp.ClientError, OSError, TimeoutError)


async def retry_with_timeout(
    timeout_s: float,
    interval_s: float,
    op: Callable[[], Awaitable[T]],
    *,
    waiting_for: str = "the server",
    on_retry: Callable[[str, float, float], None] | None = None,
    attempts: int | None = None,
    retry_on: tuple[type[BaseException], ...] = RETRYABLE,
    backoff: float = 1.0,
) -> T:
    """Run ``op`` until it succeeds or ``timeout_s`` has passed; return its result.

    ``timeout_s == 0`` means exactly one attempt, not "wait forever": its result or its exception
    is passed through unchanged; ``math.inf`` means no deadline. Otherwise a failed attempt (by
    default a ``ServerError``, aiohttp or OS error, or timeout; else one of ``retry_on``) is
    retried after ``interval_s`` seconds, each pause ``backoff`` times the one before; each
    attempt is cut short at the deadline and no sleep reaches past it. ``NotRetryable`` and any
    other exception end the wait at once, and so does the last of ``attempts`` failures (raised
    unchanged). When the deadline passes, ``ReadinessTimeout`` names the timeout and the last
    error. ``on_retry(error, retry_in_s, left_s)`` is called before each sleep.
    """
    if timeout_s == 0:
        return await op()
    if timeout_s < 0 or interval_s <= 0 or backoff < 1 or (attempts is not None and attempts < 1):
        raise ValueError(
            "need timeout_s >= 0, interval_s > 0, backoff >= 1 and attempts >= 1, got "
            f"{timeout_s}, {interval_s}, {backoff}, {attempts}"
        )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    pause = interval_s
    attempt = 0
    while True:
        attempt += 1
        left = deadline - loop.time()
        try:
            return await asyncio.wait_for(op(), None if math.isinf(left) else left)
        except NotRetryable:
            raise
        except Exception as exc:
            cut_at_deadline = isinstance(exc, TimeoutError) and loop.time() >= deadline
            if not cut_at_deadline and (
                not isinstance(exc, retry_on) or (attempts is not None and attempt >= attempts)
            ):
                raise
            last_error = describe_error(exc)
        left = deadline - loop.time()
        if left > 0:
            retry_in = min(pause, left)
            pause *= backoff
            if on_retry is not None:
                on_retry(last_error, retry_in, left)
            await asyncio.sleep(retry_in)
        if deadline - loop.time() <= 0:
            raise ReadinessTimeout(
                f"{waiting_for} was not ready within --ready-check-timeout-sec {timeout_s:g}; "
                f"last error: {last_error}"
            )


def show_waiting(what: str) -> Callable[[str, float, float], None]:
    """An ``on_retry`` callback that tells the user what is awaited and how long is left."""

    def report(error: str, retry_in_s: float, left_s: float) -> None:
        log.info(
            f"Waiting for {what}: {printable(redact_text(error))}; "
            f"next try in {retry_in_s:.1f} s, {left_s:.1f} s left"
        )

    return report


async def wait_for_server(
    op: Callable[[], Awaitable[T]], what: str, timeout_s: float, interval_s: float
) -> T:
    """``op`` retried with the run's ready-check timeout and interval, each wait printed."""
    try:
        return await retry_with_timeout(
            timeout_s, interval_s, op, waiting_for=what, on_retry=show_waiting(what)
        )
    except ServerUnreachable as exc:
        raise with_hint(exc, timeout_s) from None


def with_hint(exc: ServerUnreachable, timeout_s: float) -> ServerUnreachable:
    """``exc``, told how to wait for the server when the run did not wait (``timeout_s`` 0)."""
    if timeout_s > 0:
        return exc
    return ServerUnreachable(f"{exc}; is the server up? {READY_CHECK_HINT}")

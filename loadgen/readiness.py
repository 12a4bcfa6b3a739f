"""Requests made before the timed run, and the one helper that waits out a server's start-up.

Every request that may reach a server that is still starting goes through ``retry_with_timeout``
with ``--ready-check-timeout-sec``: model discovery, the server tokenizer's probe and the
dataset-derived probe. Failures a retry cannot fix (an empty model list, a request the server
rejects as malformed) raise ``NotRetryable`` and end the wait at once. The server tokenizer's
calls use the same helper with a bounded number of attempts, retrying only ``ConnectionLost``.
"""

from __future__ import annotations

import asyncio
import errno
import math
import os
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
import orjson

T = TypeVar("T")

DEFAULT_RETRY_INTERVAL_S = 5.0
# 4xx answers about the request itself: no amount of waiting makes the server accept it.
REJECTED_STATUSES = (400, 404, 422)
READY_CHECK_HINT = "--ready-check-timeout-sec N waits up to N s for it"
# Below the 5 s after which uvicorn (vLLM) and llama.cpp close an idle connection, so a pooled
# connection the server has already closed is not picked for the next request.
KEEPALIVE_S = 4.0


class ServerError(RuntimeError):
    """The server could not be used; the message names the URL and what went wrong."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status when the server answered one


class ServerUnreachable(ServerError):
    """Nothing answered at the URL (connection refused, reset, DNS, or timed out)."""


class ConnectionLost(ServerUnreachable):
    """The connection closed or was reset before an answer; the server may never have seen the
    request, so an idempotent one can be sent again."""


class NotRetryable(ServerError):
    """An answer that waiting cannot change; ``retry_with_timeout`` passes it through at once."""


class ReadinessTimeout(ServerError):
    """The server was not ready before ``--ready-check-timeout-sec`` ran out."""


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


def describe_error(exc: BaseException) -> str:
    """One line for an exception: its message, or its type when it has none."""
    text = str(exc).strip()
    if isinstance(exc, TimeoutError) and not text:
        return "no answer before the deadline"
    return text.splitlines()[0] if text else type(exc).__name__


def _connect_reason(exc: BaseException) -> str:
    """'Connection refused' rather than aiohttp's host, ssl and call-site wording."""
    os_error = getattr(exc, "os_error", exc)
    if isinstance(os_error, OSError) and os_error.errno:
        return os.strerror(os_error.errno)
    return describe_error(exc)


def _connection_lost(exc: BaseException) -> str | None:
    """Why an open connection broke (closed, reset, a body that could not be written), or None
    for errors that are not that: a refused connection, DNS, TLS, a timeout."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "server disconnected"
    lost_errnos = (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return describe_error(exc)
    if isinstance(exc, aiohttp.ClientConnectionError) and not isinstance(
        exc, (aiohttp.ClientConnectorError, aiohttp.ServerTimeoutError, aiohttp.ClientSSLError)
    ):
        if isinstance(exc, OSError):
            if exc.errno in lost_errnos:
                return os.strerror(exc.errno)
            if exc.strerror:  # "Can not write request body for URL": the URL is said already
                return exc.strerror.split(" for ")[0]
        return describe_error(exc)
    if isinstance(exc, ConnectionError) and exc.errno in lost_errnos:
        return os.strerror(exc.errno)
    return None


def print_waiting(what: str) -> Callable[[str, float, float], None]:
    """An ``on_retry`` callback that tells the user what is awaited and how long is left."""

    def report(error: str, retry_in_s: float, left_s: float) -> None:
        print(
            f"Waiting for {what}: {error}; next try in {retry_in_s:.1f} s, {left_s:.1f} s left",
            flush=True,
        )

    return report


def proxy_for(url: str) -> str | None:
    """The proxy the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) names for ``url``, if any."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def auth_headers(extra: dict[str, str]) -> dict[str, str]:
    """``Authorization: Bearer $OPENAI_API_KEY`` when it is set, overridden by ``--header``."""
    headers: dict[str, str] = {}
    if api_key := os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = f"Bearer {api_key}"
    return {**headers, **extra}


def server_message(status: int, body: bytes) -> str:
    """The error message of an HTTP error answer: OpenAI's ``error.message``, else the body."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    message: Any = None
    if isinstance(data, dict):
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        message = message or data.get("message") or data.get("detail")
    if not message:
        message = body.decode("utf-8", "replace").strip()
    first = str(message).strip().splitlines()
    return f"HTTP {status}: {first[0]}" if first else f"HTTP {status}"


class StartupClient:
    """One aiohttp session for the coordinator's requests before the timed run."""

    def __init__(self, server_url: str, headers: dict[str, str], insecure: bool = False) -> None:
        self.server_url = server_url
        self.headers = headers
        self.insecure = insecure
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=0, ssl=not insecure, keepalive_timeout=KEEPALIVE_S
            ),
            trust_env=False,
        )
        self._forks: list[StartupClient] = []

    def fork(self) -> StartupClient:
        """A client with the same server, headers and TLS on its own connections; closed with
        this one."""
        fork = StartupClient(self.server_url, self.headers, self.insecure)
        self._forks.append(fork)
        return fork

    async def close(self) -> None:
        """Close the session and its connections, and those of its forks."""
        for fork in self._forks:
            await fork.close()
        await self.session.close()

    async def request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        *,
        headers: dict[str, str] | None = None,
        timeout_s: float | None = 30.0,
    ) -> bytes:
        """The body of a 2xx answer; otherwise ``ServerUnreachable`` (``ConnectionLost`` when an
        open connection broke), ``NotRetryable`` (400, 404, 422) or ``ServerError`` (any other
        status), each naming the URL."""
        all_headers = {**self.headers, **(headers or {})}
        if body is not None:
            all_headers.setdefault("Content-Type", "application/json")
        try:
            async with self.session.request(
                method,
                url,
                data=body,
                headers=all_headers,
                proxy=proxy_for(url),
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                payload = await response.read()
                status = response.status
        except aiohttp.ClientSSLError as exc:  # waiting will not change a certificate
            reason = describe_error(getattr(exc, "os_error", exc))
            raise NotRetryable(
                f"TLS failed with {url}: {reason}; --insecure skips the certificate check"
            ) from None
        except Exception as exc:
            if lost := _connection_lost(exc):
                raise ConnectionLost(
                    f"connection to {url} closed without an answer ({lost})"
                ) from None
            if isinstance(exc, (aiohttp.ClientConnectionError, OSError, TimeoutError)):
                raise ServerUnreachable(f"cannot reach {url}: {_connect_reason(exc)}") from None
            if isinstance(exc, aiohttp.ClientError):
                raise ServerError(f"{method} {url} failed: {describe_error(exc)}") from None
            raise
        if status < 300:
            return payload
        error = NotRetryable if status in REJECTED_STATUSES else ServerError
        raise error(f"{method} {url} answered {server_message(status, payload)}", status)

    async def fetch_first_model(self) -> tuple[str, str]:
        """``(data[0].id, data[0].root or id)`` from ``GET /v1/models``."""
        url = f"{self.server_url}/v1/models"
        payload = await self.request("GET", url)
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise ServerError(f"GET {url} answered something that is not JSON") from None
        models = data.get("data") if isinstance(data, dict) else None
        if not isinstance(models, list):
            raise ServerError(f"GET {url} answered JSON without a 'data' list")
        if not models:
            raise NotRetryable(f"no models found on the server at {url}; pass --model")
        first = models[0]
        if not isinstance(first, dict) or not isinstance(first.get("id"), str):
            raise ServerError(f"GET {url}: data[0] has no model id")
        return first["id"], first.get("root") or first["id"]

    async def generate(self, url: str, body: bytes) -> None:
        """Send one generation request and read its answer to the end; raise if it failed.

        As upstream's request functions judge it: a 200 stream needs at least one event with
        a non-empty ``choices`` list, and one that carries an error event fails like an error
        status would.
        """
        payload = await self.request("POST", url, body, timeout_s=None)
        if not payload.lstrip().startswith(b"data:"):
            return  # a whole JSON answer (not streamed): its 200 is the verdict
        has_choices = False
        for line in payload.splitlines():
            if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
                continue
            try:
                event = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                continue
            if not isinstance(event, dict):
                continue
            if event.get("error"):
                raise ServerError(f"POST {url} streamed an error: {server_message(200, line[5:])}")
            has_choices = has_choices or bool(event.get("choices"))
        if not has_choices:
            raise ServerError(f"POST {url} streamed no event with choices")

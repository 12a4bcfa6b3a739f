"""The coordinator's one HTTP client, and the one path every request it makes goes through.

``ServerClient.send`` sends a request and reads the whole answer, each chunk stamped on
arrival; a failure is raised as one of ``loadgen.server.errors``' types, naming the URL. Model
discovery, the ready check, warm-ups, probes, ``/metrics``, ``--profile``, the server tokenizer
and the prompt alignment all use it. Proxies come from the environment (``proxy_for``) and the
API key from ``OPENAI_API_KEY`` (``auth_headers``), as for the workers.
"""

from __future__ import annotations

import errno
import os
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import aiohttp
import orjson

from loadgen.server.errors import (
    ConnectionLost,
    NotRetryable,
    ServerError,
    ServerUnreachable,
    describe_error,
)

# 4xx answers about the request itself: no amount of waiting makes the server accept it.
REJECTED_STATUSES = (400, 404, 422)
# Below the 5 s after which uvicorn (vLLM) and llama.cpp close an idle connection, so a pooled
# connection the server has already closed is not picked for the next request.
KEEPALIVE_S = 4.0


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


@dataclass
class Answer:
    """An answer read to its end, its body as the chunks that arrived, each stamped on arrival
    (``perf_counter_ns``)."""

    status: int
    headers: Mapping[str, str]
    chunks: list[tuple[int, bytes]]  # (arrival instant, bytes), in arrival order
    sent_ns: int  # just before the request went out
    ended_ns: int  # when the body ended

    @property
    def body(self) -> bytes:
        """The whole body."""
        return b"".join(data for _, data in self.chunks)


class ServerClient:
    """One aiohttp session for every request the coordinator sends the server itself."""

    def __init__(
        self,
        server_url: str,
        headers: dict[str, str],
        insecure: bool = False,
        connect_timeout_s: float | None = None,
    ) -> None:
        self.server_url = server_url
        self.headers = headers
        self.insecure = insecure
        self.connect_timeout_s = connect_timeout_s  # --connect-timeout: opening a connection
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=0, ssl=not insecure, keepalive_timeout=KEEPALIVE_S
            ),
            trust_env=False,
        )
        self._forks: list[ServerClient] = []

    def fork(self) -> ServerClient:
        """A client with the same server, headers and TLS on its own connections; closed with
        this one."""
        return self.adopt(
            ServerClient(self.server_url, self.headers, self.insecure, self.connect_timeout_s)
        )

    def adopt(self, other: ServerClient) -> ServerClient:
        """``other``, to be closed with this client."""
        self._forks.append(other)
        return other

    async def close(self) -> None:
        """Close the session and its connections, and those of its forks."""
        for fork in self._forks:
            await fork.close()
        await self.session.close()

    async def send(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        *,
        headers: dict[str, str] | None = None,
        timeout_s: float | None = 30.0,
        idle_timeout_s: float | None = None,
        max_bytes: int | None = None,
    ) -> Answer:
        """Send one request and read its whole answer: a 2xx ``Answer``; otherwise
        ``ServerUnreachable`` (``ConnectionLost`` when an open connection broke),
        ``NotRetryable`` (400, 404, 422) or ``ServerError`` (any other status), each naming
        the URL. ``timeout_s`` bounds the whole request, ``idle_timeout_s`` each wait for a
        byte, the client's ``connect_timeout_s`` opening a connection; a body over
        ``max_bytes`` is a ServerError."""
        all_headers = {**self.headers, **(headers or {})}
        if body is not None:
            all_headers.setdefault("Content-Type", "application/json")
        proxy = proxy_for(url)
        timeout = aiohttp.ClientTimeout(
            total=timeout_s, sock_read=idle_timeout_s, sock_connect=self.connect_timeout_s
        )
        chunks: list[tuple[int, bytes]] = []
        sent_ns = perf_counter_ns()
        try:
            async with self.session.request(
                method, url, data=body, headers=all_headers, proxy=proxy, timeout=timeout
            ) as response:
                received = 0
                while data := await response.content.readany():
                    chunks.append((perf_counter_ns(), data))
                    received += len(data)
                    if max_bytes is not None and received > max_bytes:
                        raise ServerError(f"{method} {url}: the answer is over {max_bytes} bytes")
                ended_ns = perf_counter_ns()
                status = response.status
                answer_headers = response.headers
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
        answer = Answer(status, answer_headers, chunks, sent_ns, ended_ns)
        if status < 300:
            return answer
        error = NotRetryable if status in REJECTED_STATUSES else ServerError
        raise error(f"{method} {url} answered {server_message(status, answer.body)}", status)

    async def request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        *,
        headers: dict[str, str] | None = None,
        timeout_s: float | None = 30.0,
        idle_timeout_s: float | None = None,
    ) -> bytes:
        """The body of a 2xx answer to ``send``; its errors as ``send`` raises them."""
        answer = await self.send(
            method, url, body, headers=headers, timeout_s=timeout_s, idle_timeout_s=idle_timeout_s
        )
        return answer.body

"""The worker's connection pool: aiohttp's connector with the hooks a load generator needs
(connect time per request, fresh connections on demand, pooling stopped when the server closes
after every answer, the fate of pre-opened connections), and the pre-opening before t0."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

if TYPE_CHECKING:
    from aiohttp.client_reqrep import ClientRequest, ConnectionKey
    from aiohttp.connector import Connection
    from aiohttp.tracing import Trace

# The current request's connect time, set in its own task's context (see PoolConnector).
CONNECT_NS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "connect_ns", default=None
)
# True in a task that must not take a pooled connection: a re-send, a pre-opening GET.
FRESH_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("fresh_only", default=False)
# True in a request's task that took a pre-opened connection no request had used before.
TOOK_PREOPENED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "took_preopened", default=False
)
# Errors of a pooled connection that the server had closed before it read the request.
STALE_ERRORS = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, ConnectionResetError)
PREOPEN_BUDGET_S = 1.0  # pre-opening never delays t0 by more than about this, plus:
# per connection: a worker opens about 4,000 a second on a free core, but past about 14,000
# connections to one server each connect() costs ~1.5 ms in the kernel's search for a local
# port (scripts/bench/connect_floor.py)
PREOPEN_EACH_S = 0.002
PREOPEN_AT_ONCE = 32  # connections being opened at the same time
PREOPEN_SLOW_S = 0.25  # a pre-opening GET unanswered this long: the server serves no more
PREOPEN_POLL_S = 0.05  # how often pre-opening looks for GETs the server does not serve


class StampingHandler(ResponseHandler):
    """aiohttp's connection protocol, noting when bytes last came from the socket.

    A stream's reads are stamped with it rather than when its task wakes: the socket's callback
    runs first, then the woken tasks one after another, each parsing its own bytes, so with many
    streams readable in one loop pass the last task's clock would carry the others' parsing.
    The stamp is the instant the newest bytes in the buffer came, never before any of them."""

    received_ns = 0

    def data_received(
        self,
        data: bytes,
        _now: Callable[[], int] = perf_counter_ns,
        _received: Callable[[ResponseHandler, bytes], None] = ResponseHandler.data_received,
    ) -> None:
        # Runs for every read: the clock and aiohttp's method are bound once, as defaults.
        if data:  # aiohttp calls it with no bytes to resume its own parsing
            self.received_ns = _now()
        _received(self, data)


class PoolConnector(aiohttp.TCPConnector):
    """aiohttp's TCPConnector with what a load generator needs to know and decide about the
    pool (it hooks aiohttp's ``_create_connection``, ``_get`` and ``_release``; the tests in
    tests/integration/test_pool_hooks.py pin that to the aiohttp versions allowed):

    - the time spent opening a new connection is added to the current request's CONNECT_NS;
    - a task with FRESH_ONLY set never takes a pooled connection;
    - connections released while ``preopening`` are remembered, so the run can tell how many
      were open at t0 and how many the server closed before any request took them, and a
      request that takes one has TOOK_PREOPENED set;
    - with ``reuse`` off, every connection is closed after its response instead of pooled;
    - each connection's protocol is a ``StampingHandler`` (aiohttp's ``_factory``).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # typeshed's partial is invariant in what it returns: a StampingHandler is a
        # ResponseHandler, which is all aiohttp asks of the factory.
        self._factory = functools.partial(StampingHandler, loop=self._loop)  # type: ignore[assignment]
        self.reuse = True
        self.preopening = False
        # Pre-opened protocols no request has taken yet.
        self.preopened: set[ResponseHandler] = set()

    async def _create_connection(
        self, req: ClientRequest, traces: list[Trace], timeout: aiohttp.ClientTimeout
    ) -> ResponseHandler:
        started = perf_counter_ns()
        try:
            return await super()._create_connection(req, traces, timeout)
        finally:
            if (spent := CONNECT_NS.get()) is not None:
                spent.append(perf_counter_ns() - started)

    async def _get(self, key: ConnectionKey, traces: list[Trace]) -> Connection | None:
        if FRESH_ONLY.get():
            return None
        connection = await super()._get(key, traces)
        if connection is not None and self.preopened and connection.protocol in self.preopened:
            self.preopened.discard(connection.protocol)
            TOOK_PREOPENED.set(True)
        return connection

    def _release(
        self, key: ConnectionKey, protocol: ResponseHandler, *, should_close: bool = False
    ) -> None:
        super()._release(key, protocol, should_close=should_close or not self.reuse)
        if self.preopening and protocol.is_connected():
            self.preopened.add(protocol)

    def open_preopened(self) -> int:
        """Forget the pre-opened connections that are closed already; how many are open."""
        self.preopened = {p for p in self.preopened if p.is_connected()}
        return len(self.preopened)

    def some_preopened_closed(self) -> bool:
        """Whether the server has closed a pre-opened connection already."""
        return not all(p.is_connected() for p in self.preopened)

    def closed_before_use(self) -> int:
        """Pre-opened connections open at t0 that the server closed before any request."""
        return sum(not p.is_connected() for p in self.preopened)


def before_any_byte(exc: BaseException) -> bool:
    """Whether a stale-connection error came before any byte of an answer: aiohttp's
    ServerDisconnectedError carries the partial response it had parsed, if any."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return isinstance(exc.message, str)
    return True


async def preopen(
    session: aiohttp.ClientSession,
    connector: PoolConnector,
    url: str,
    headers: dict[str, str],
    proxy: str | None,
    count: int,
) -> tuple[int, str, str]:
    """Open the pool's connections before t0, so no handshake lands in a measured TTFT.

    Each connection is opened by a GET that may take no pooled connection (FRESH_ONLY), so
    it goes back to the pool as soon as its answer is read. PREOPEN_AT_ONCE openers each send
    one GET after another, within a budget of PREOPEN_BUDGET_S plus PREOPEN_EACH_S per
    connection. Opening stops early when a GET has waited PREOPEN_SLOW_S while one sent after
    it was answered (the server serves no more connections at once, as llama.cpp's fixed pool
    of HTTP threads where an idle connection holds a thread), or when one opened earlier is
    closed already (the server keeps no idle connections, or not for as long as opening them
    all takes). Returns how many are open, the first error, and why fewer than ``count``
    are open ("" when all are), for the coordinator to say before t0.

    The checks on the whole pool run once per PREOPEN_POLL_S, not once per answer: per answer
    they made opening n connections cost O(n^2) (10,000 took seconds of CPU).
    """
    enough = False
    failures: list[BaseException] = []
    sent_ns: dict[int, int] = {}  # GETs not answered yet: when each was sent
    last_answer_ns = 0
    next_key = 0

    async def opener() -> None:
        nonlocal enough, last_answer_ns, next_key
        FRESH_ONLY.set(True)  # this task's own context
        while not enough and next_key < count:
            key = next_key
            next_key += 1
            sent_ns[key] = perf_counter_ns()
            try:
                async with session.get(url, headers=headers, proxy=proxy) as resp:
                    await resp.read()
            except Exception as exc:  # counted; the run reports the first one
                failures.append(exc)
                enough = True
                return
            finally:
                del sent_ns[key]
            last_answer_ns = perf_counter_ns()

    def stuck() -> bool:
        now = perf_counter_ns()
        return any(
            now - sent > PREOPEN_SLOW_S * 1e9 and sent < last_answer_ns for sent in sent_ns.values()
        )

    loop = asyncio.get_running_loop()
    started = loop.time()
    budget_s = PREOPEN_BUDGET_S + PREOPEN_EACH_S * count
    why = ""
    connector.preopening = True
    pending = {asyncio.ensure_future(opener()) for _ in range(min(PREOPEN_AT_ONCE, count))}
    try:
        while pending and not enough and loop.time() < started + budget_s:
            _, pending = await asyncio.wait(
                pending, timeout=min(PREOPEN_POLL_S, started + budget_s - loop.time())
            )
            if stuck():
                why = "the server served no more connections at once"
                break
            if connector.some_preopened_closed():
                why = (
                    f"the server closed idle ones {loop.time() - started:.1f} s into opening "
                    "them (its keep-alive timeout is shorter than opening them all takes)"
                )
                break
        else:
            if pending and not enough:
                why = f"opening them took longer than its {budget_s:.1f} s budget"
    finally:
        enough = True
        connector.preopening = False
        for task in pending:
            task.cancel()  # a GET still waiting is not worth a later t0
        await asyncio.gather(*pending, return_exceptions=True)
    first = f"{type(failures[0]).__name__}: {failures[0]}" if failures else ""
    opened = connector.open_preopened()
    if opened >= count:
        why = ""
    elif failures:
        why = f"a GET failed: {first}"
    elif not why:
        why = f"the server closed {count - opened} of them already"
    return opened, first, why

"""How the mock holds connections: a bounded pool of connection handlers and closing after a
stream, as llama.cpp's cpp-httplib server does, counted for ``/mock/stats``.

cpp-httplib serves each accepted connection on one thread of a fixed pool for as long as the
connection lives, idle or not; a connection beyond the pool waits, accepted by the kernel, until
a thread frees (when a served connection closes, e.g. after its idle keep-alive timeout). The
mock does the same in the event loop: a connection takes a slot when it is made, or else its
reading is paused until one frees, and it gives the slot back when it is lost.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler


@dataclass
class ConnectionCounts:
    """Connection counters reported by ``/mock/stats``."""

    accepted: int = 0
    open: int = 0
    closed_after_response: int = 0  # closed by the server right after a streamed response
    waited_for_handler: int = 0  # accepted while every handler was held


class ConnectionHabits:
    """Counts connections, bounds the handlers they hold, and closes them after streams."""

    def __init__(
        self,
        handlers: int,
        keepalive_timeout_s: float,
        close_delay_ms: tuple[float, float] | None,
        seed: int,
    ) -> None:
        self.handlers = handlers  # 0: unbounded
        self.keepalive_timeout_s = keepalive_timeout_s
        self.close_delay_ms = close_delay_ms
        self.rng = random.Random(seed)
        self.counts = ConnectionCounts()
        self.holders: set[RequestHandler] = set()
        self.waiting: dict[RequestHandler, asyncio.Transport] = {}  # in order of arrival
        self.turns: dict[RequestHandler, asyncio.Future[None]] = {}  # requests read early wait

    def install(self, server: web.Server) -> None:
        """Hook into the aiohttp server's per-connection callbacks (not its per-request path)."""
        made, lost = server.connection_made, server.connection_lost

        def connection_made(handler: RequestHandler, transport: asyncio.Transport) -> None:
            made(handler, transport)
            self._made(handler, transport)

        def connection_lost(handler: RequestHandler, exc: BaseException | None = None) -> None:
            lost(handler, exc)
            self._lost(handler)

        server.connection_made = connection_made  # type: ignore[method-assign]
        server.connection_lost = connection_lost  # type: ignore[method-assign]

    def stats(self) -> dict[str, Any]:
        """The counters, plus the handlers held and the connections waiting for one."""
        return asdict(self.counts) | {
            "handlers_held": len(self.holders),
            "waiting_for_handler": len(self.waiting),
        }

    def _made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        self.counts.accepted += 1
        self.counts.open += 1
        if not self.handlers:
            return
        if len(self.holders) < self.handlers:
            self.holders.add(handler)
            return
        self.counts.waited_for_handler += 1
        self.waiting[handler] = transport
        # uvloop starts reading right after connection_made, and aiohttp arms its idle timer
        # after this hook: both are undone on the next loop turn. A waiting connection has no
        # thread yet, so its idle clock starts only when it gets one.
        asyncio.get_running_loop().call_soon(self._hold, handler, transport)

    def _hold(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        if handler in self.waiting:
            transport.pause_reading()
            _stop_idle_timer(handler)

    async def wait_for_handler(self, handler: Any) -> None:
        """Hold a request read before its connection's reading was paused until a handler frees."""
        if handler in self.waiting:
            turn = self.turns.get(handler)
            if turn is None:
                turn = self.turns[handler] = asyncio.get_running_loop().create_future()
            await turn

    def _lost(self, handler: RequestHandler) -> None:
        self.counts.open -= 1
        if self.waiting.pop(handler, None) is not None:
            turn = self.turns.pop(handler, None)
            if turn is not None:
                turn.cancel()
            return
        if handler in self.holders:
            self.holders.discard(handler)
            self._hand_over()

    def _hand_over(self) -> None:
        """Give a freed handler to the connection that has waited longest."""
        while self.waiting and len(self.holders) < self.handlers:
            handler = next(iter(self.waiting))
            transport = self.waiting.pop(handler)
            if transport.is_closing():
                continue
            self.holders.add(handler)
            _start_idle_timer(handler, self.keepalive_timeout_s)
            transport.resume_reading()
            turn = self.turns.pop(handler, None)
            if turn is not None:
                turn.set_result(None)

    def close_after_response(self, transport: asyncio.BaseTransport | None) -> None:
        """Close a connection a moment after its response ended, reading nothing more from it:
        a request sent on it in that window is never seen, its client sees the connection go."""
        if self.close_delay_ms is None or transport is None or transport.is_closing():
            return
        self.counts.closed_after_response += 1
        transport.pause_reading()  # type: ignore[attr-defined]
        delay_s = self.rng.uniform(*self.close_delay_ms) / 1000.0
        asyncio.get_running_loop().call_later(delay_s, transport.close)


# aiohttp keeps a connection's idle timer in private attributes; these two touch them only.
def _stop_idle_timer(handler: RequestHandler) -> None:
    timer = getattr(handler, "_keepalive_handle", None)
    if timer is not None:
        timer.cancel()
        handler._keepalive_handle = None


def _start_idle_timer(handler: RequestHandler, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    close_time = loop.time() + timeout_s
    handler._next_keepalive_close_time = close_time
    process: Callable[[], None] = handler._process_keepalive
    handler._keepalive_handle = loop.call_at(close_time, process)

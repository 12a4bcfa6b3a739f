"""The worker's two stamps: a request's send is when aiohttp writes it (workers/eager_send.py's
StampedRequest), not when the request was begun; a read is stamped when its bytes came from the
socket (workers/pool.py's StampingHandler), not when the reading task woke."""

from __future__ import annotations

import asyncio
import time
from time import perf_counter_ns

import aiohttp
import uvloop

from workers import eager_send
from workers.eager_send import WRITTEN_NS, StampedRequest
from workers.pool import PoolConnector, StampingHandler

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
CHUNK = b"data: {}\n\n"
BUSY_S = 0.05  # the library's work before the write, or the loop's before the read task wakes


class Server(asyncio.Protocol):
    """Notes when each request's first bytes came, then answers with a head and one SSE chunk,
    noting when it wrote them; the body's end follows later, on ``finish``."""

    def __init__(self) -> None:
        self.received_ns: list[int] = []
        self.written_ns: list[int] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.received_ns:
            self.received_ns.append(perf_counter_ns())
        if data.endswith(b"}"):  # the JSON body's end: the whole request came
            assert self.transport is not None
            self.written_ns.append(perf_counter_ns())
            self.transport.write(HEAD + b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))

    def finish(self) -> None:
        assert self.transport is not None
        self.transport.write(b"0\r\n\r\n")


def _session(trace: aiohttp.TraceConfig | None = None) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=PoolConnector(),
        request_class=StampedRequest,
        trace_configs=[trace] if trace else None,
    )


async def _serve() -> tuple[Server, asyncio.Server, str]:
    server = Server()
    listener = await asyncio.get_running_loop().create_server(lambda: server, "127.0.0.1", 0)
    return server, listener, f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/"


def test_the_send_is_stamped_at_the_write_not_before_the_librarys_work() -> None:
    """A trace hook keeps aiohttp busy before it writes: the stamp comes after that work and
    before the server has the request."""

    async def scenario() -> tuple[int, list[int], int]:
        eager_send.install(asyncio.get_running_loop())
        server, listener, url = await _serve()

        async def busy_library(*_: object) -> None:
            time.sleep(BUSY_S)  # stands for aiohttp's own work, which blocks the loop as this

        trace = aiohttp.TraceConfig()
        trace.on_request_start.append(busy_library)
        written: list[int] = []
        try:
            async with _session(trace) as session:
                WRITTEN_NS.set(written)
                begun = perf_counter_ns()
                async with session.post(url, data=b'{"prompt": "x"}') as resp:
                    server.finish()
                    await resp.read()
        finally:
            listener.close()
        return begun, written, server.received_ns[0]

    begun, written, received = uvloop.run(scenario())
    assert len(written) == 1
    assert written[0] - begun >= BUSY_S * 1e9  # the library's work is not in it
    assert written[0] <= received  # and the server never has a request before it was sent


def test_a_read_is_stamped_when_its_bytes_came_not_when_its_task_woke() -> None:
    """The bytes come while the reading task is held back: the stamp is their arrival."""

    async def scenario() -> tuple[int, int, int]:
        server, listener, url = await _serve()
        try:
            async with (
                _session() as session,
                session.post(url, data=b'{"prompt": "x"}') as resp,
            ):
                assert resp.connection is not None
                protocol = resp.connection.protocol
                assert isinstance(protocol, StampingHandler)
                while not resp.content.is_eof() and not resp.content._buffer:
                    await asyncio.sleep(0.001)  # the chunk has come into the buffer
                time.sleep(BUSY_S)  # the loop is busy elsewhere before the task reads
                data = await resp.content.readany()
                read = perf_counter_ns()
                assert data == CHUNK
                stamp = protocol.received_ns
                server.finish()
                await resp.read()
        finally:
            listener.close()
        return server.written_ns[0], stamp, read

    written, stamp, read = uvloop.run(scenario())
    assert written <= stamp  # never before the server wrote it
    assert read - stamp >= BUSY_S * 1e9  # the task's late wake-up is not in it

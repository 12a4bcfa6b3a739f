"""workers/eager_send.py: aiohttp's request write runs at once on Python < 3.12, and a write that
has to wait (a large body, a server that reads slowly, a cancelled request) still behaves as an
ordinary task."""

from __future__ import annotations

import asyncio
import socket
import sys

import aiohttp
import pytest
import uvloop

from workers import eager_send

pytestmark = pytest.mark.skipif(sys.version_info >= (3, 12), reason="aiohttp starts it eagerly")

REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class Server(asyncio.Protocol):
    """Answers each request once its declared body has come; can hold reading back."""

    def __init__(self, hold_s: float = 0.0) -> None:
        self.hold_s = hold_s
        self.received = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.hold_s:
            transport.pause_reading()  # type: ignore[attr-defined]
            asyncio.get_running_loop().call_later(self.hold_s, transport.resume_reading)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.received += data
        head, sep, body = bytes(self.received).partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        if sep and len(body) >= length:
            assert self.transport is not None
            self.transport.write(REPLY)
            self.received.clear()


async def post(server: Server, body: bytes) -> tuple[bytes, list[bool]]:
    """Post ``body`` with the factory installed; the reply, and for each aiohttp write task
    whether the factory returned it already done."""
    loop = asyncio.get_running_loop()
    eager_send.install(loop)
    factory = loop.get_task_factory()
    assert factory is not None
    writes: list[bool] = []

    def spy(loop: asyncio.AbstractEventLoop, coro, **kwargs):  # type: ignore[no-untyped-def]
        is_write = getattr(coro, "cr_code", None) is eager_send._WRITE_BYTES
        task = factory(loop, coro, **kwargs)
        if is_write:
            writes.append(task.done())
        return task

    loop.set_task_factory(spy)
    listener = await loop.create_server(lambda: server, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"http://127.0.0.1:{port}/", data=body) as resp,
        ):
            return await resp.read(), writes
    finally:
        listener.close()


def test_a_small_request_is_written_before_post_yields():
    reply, writes = uvloop.run(post(Server(), b"x" * 300))
    assert reply == b"ok"
    assert writes == [True]  # written in the factory: the task handed back was already done


def test_a_body_the_server_reads_late_is_finished_by_an_ordinary_task():
    body = b"y" * (8 << 20)  # well past the transport's high-water mark: the write must wait
    server = Server(hold_s=0.2)
    reply, writes = uvloop.run(post(server, body))
    assert reply == b"ok"
    assert writes == [False]


def test_a_request_cancelled_while_its_write_waits_is_cancelled():
    """A server that never reads (a listening socket nobody accepts from): the write waits for
    the transport to drain, in the task that resumed it, and the cancellation reaches it."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        eager_send.install(loop)
        with socket.create_server(("127.0.0.1", 0)) as listener:
            port = listener.getsockname()[1]
            async with aiohttp.ClientSession() as session:
                request = asyncio.ensure_future(
                    session.post(f"http://127.0.0.1:{port}/", data=b"z" * (64 << 20))
                )
                await asyncio.sleep(0.3)
                assert not request.done()
                request.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await asyncio.wait_for(request, 5)

    uvloop.run(scenario())


def test_other_coroutines_become_ordinary_tasks():
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        eager_send.install(loop)

        async def answer() -> int:
            await asyncio.sleep(0)
            return 42

        task = asyncio.ensure_future(answer())
        assert isinstance(task, asyncio.Task)
        assert not task.done()
        assert await task == 42

    uvloop.run(scenario())


def test_the_resumed_rest_gets_the_awaited_value_and_the_cancellation():
    """``_resume`` carries on a coroutine stepped once by hand, as ``eager_start`` does."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        seen: list[object] = []

        async def writer(gate: asyncio.Future) -> str:
            try:
                seen.append(await gate)
                await asyncio.sleep(0)
                return "written"
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        for cancel in (False, True):
            gate = loop.create_future()
            coro = writer(gate)
            first = coro.send(None)  # the factory's step: it stops at the gate
            task = asyncio.Task(eager_send._resume(coro, first))
            await asyncio.sleep(0)
            if cancel:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            else:
                gate.set_result(7)
                assert await task == "written"
        assert seen == [7, "cancelled"]

    uvloop.run(scenario())

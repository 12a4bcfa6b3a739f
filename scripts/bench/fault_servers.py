"""Misbehaving HTTP servers for the fault suite (scripts/bench/faults.py).

``FaultServer`` is a minimal HTTP/1.1 server on raw asyncio streams, in its own thread on
127.0.0.1, that answers ``GET /v1/models`` (loadgen pre-opens its connections with it) and
answers each ``POST /v1/completions`` (and ``/v1/chat/completions``) as its ``answer`` says:
a good stream, or one of the faults below. Streams go out with ``Transfer-Encoding:
chunked``, as uvicorn (vLLM, SGLang) sends them. Anything else gets 404.

Faults (``ANSWERS``, each an ``async (conn, k, n)`` for the k-th POST asking for n tokens):
hang after the headers, stall mid-stream, an endless stream, a reset mid-stream (SO_LINGER 0),
a clean end without ``data: [DONE]``, an HTML page, data events that are not JSON, an error
event after tokens, an error status for every request, and one 5 MB event written in 4 KiB
pieces. Connection habits (``FaultServer`` arguments): close connections idle for a while,
``Connection: close`` on every answer, close right after every answer while keep-alive is
advertised, and ``restart`` (stop listening and drop every
connection for a while, then listen again on the same port).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from collections.abc import Awaitable, Callable

MODELS = b'{"object":"list","data":[{"id":"m","object":"model","owned_by":"faults"}]}'
SSE = b"text/event-stream"
DONE = b"data: [DONE]\n\n"
FOREVER_S = 3600.0


def token_event(k: int, text: str | None = None) -> bytes:
    """One completions token event (vLLM's shape)."""
    chunk = {
        "id": "cmpl-f",
        "object": "text_completion",
        "model": "m",
        "choices": [{"index": 0, "text": f" t{k}" if text is None else text}],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def usage_event(n: int) -> bytes:
    chunk = {"id": "cmpl-f", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": n}}
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def good_stream(n: int) -> bytes:
    return b"".join(token_event(k) for k in range(n)) + usage_event(n) + DONE


class Conn:
    """One request's answer on a connection: a head, then chunks, then the end."""

    def __init__(self, server: FaultServer, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.writer = writer
        self.keep = True  # whether the connection serves another request after this one

    def head(self, status: bytes = b"200 OK", content_type: bytes = SSE) -> None:
        headers = b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type + b"\r\n"
        if self.server.connection_close:
            headers += b"Connection: close\r\n"
            self.keep = False
        self.writer.write(headers + b"Transfer-Encoding: chunked\r\n\r\n")

    async def chunk(self, data: bytes) -> None:
        self.writer.write(b"%x\r\n" % len(data) + data + b"\r\n")
        await self.writer.drain()

    async def end(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    async def whole(self, status: bytes, content_type: bytes, body: bytes) -> None:
        """A complete answer with a Content-Length."""
        close = b"Connection: close\r\n" if self.server.connection_close else b""
        self.keep = not self.server.connection_close
        self.writer.write(
            b"HTTP/1.1 %s\r\nContent-Type: %s\r\n%sContent-Length: %d\r\n\r\n"
            % (status, content_type, close, len(body))
            + body
        )
        await self.writer.drain()

    async def reset(self) -> None:
        """Close with a TCP reset (SO_LINGER 0), as a crashed process or a proxy may."""
        await self.writer.drain()
        await asyncio.sleep(0.01)  # what was written reaches the client first
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()
        self.keep = False


Answer = Callable[[Conn, int, int], Awaitable[None]]


# --- answers ---------------------------------------------------------------------------------


async def good(conn: Conn, k: int, n: int) -> None:
    conn.head()
    await conn.chunk(good_stream(n))
    await conn.end()


async def hang_after_headers(conn: Conn, k: int, n: int) -> None:
    conn.head()
    await conn.writer.drain()
    await asyncio.sleep(FOREVER_S)


async def stall_mid_stream(conn: Conn, k: int, n: int) -> None:
    conn.head()
    await conn.chunk(token_event(0) + token_event(1))
    await asyncio.sleep(FOREVER_S)


async def endless(conn: Conn, k: int, n: int) -> None:
    conn.head()
    i = 0
    while True:  # never [DONE], never the end of the body: a server that does not stop
        await conn.chunk(token_event(i))
        i += 1
        await asyncio.sleep(0.05)


async def endless_pings(conn: Conn, k: int, n: int) -> None:
    conn.head()
    await conn.chunk(token_event(0))
    while True:  # SSE comments forever (a gateway's keep-alive pings): bytes, no token event
        await conn.chunk(b": ping\n\n")
        await asyncio.sleep(0.02)


async def reset_mid_stream(conn: Conn, k: int, n: int) -> None:
    conn.head()
    await conn.chunk(token_event(0) + token_event(1))
    await conn.reset()


async def reset_before_answer(conn: Conn, k: int, n: int) -> None:
    await conn.reset()


async def eof_without_done(conn: Conn, k: int, n: int) -> None:
    conn.head()
    await conn.chunk(b"".join(token_event(i) for i in range(n)) + usage_event(n))
    await conn.end()  # the body's clean end, no data: [DONE]


HTML = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n\n<body>proxy</body></html>\n"


async def html_page(conn: Conn, k: int, n: int) -> None:
    await conn.whole(b"200 OK", b"text/html", HTML)


async def data_not_json(conn: Conn, k: int, n: int) -> None:
    conn.head()
    await conn.chunk(token_event(0) + b"data: not json\n\n" + DONE)
    await conn.end()


ERROR_EVENT = (  # vLLM 0.33's mid-stream error (create_streaming_error_response)
    b'data: {"error": {"message": "Internal server error", "type": "InternalServerError", '
    b'"param": null, "code": 500}}\n\n'
)


async def error_event_after_tokens(conn: Conn, k: int, n: int) -> None:
    conn.head()
    await conn.chunk(token_event(0) + token_event(1) + ERROR_EVENT + DONE)
    await conn.end()


def status(code: int, reason: str, message: str) -> Answer:
    """Every request answered ``code`` with an OpenAI-style error body."""
    body = json.dumps(
        {"error": {"message": message, "type": reason.replace(" ", ""), "param": None,
                   "code": code}}
    ).encode()  # fmt: skip

    async def answer(conn: Conn, k: int, n: int) -> None:
        await conn.whole(f"{code} {reason}".encode(), b"application/json", body)

    return answer


BIG_EVENT_BYTES = 5 * 1024 * 1024
WRITE_BYTES = 4096


async def big_event(conn: Conn, k: int, n: int) -> None:
    """One token, then one 5 MB token event written 4 KiB at a time, then usage and [DONE]."""
    conn.head()
    await conn.chunk(token_event(0))
    event = token_event(1, "x" * BIG_EVENT_BYTES)
    for start in range(0, len(event), WRITE_BYTES):
        await conn.chunk(event[start : start + WRITE_BYTES])
        await asyncio.sleep(0)  # the loop runs between writes: the client reads small pieces
    await conn.chunk(usage_event(2) + DONE)
    await conn.end()


def every_other(bad: Answer) -> Answer:
    """Odd POSTs get ``bad``, even ones a good stream: a run with both outcomes."""

    async def answer(conn: Conn, k: int, n: int) -> None:
        await (bad if k % 2 else good)(conn, k, n)

    return answer


def paced(n_events: int, gap_s: float) -> Answer:
    """A good stream of ``n_events`` tokens, one every ``gap_s``: requests stay in flight."""

    async def answer(conn: Conn, k: int, n: int) -> None:
        conn.head()
        for i in range(n_events):
            await conn.chunk(token_event(i))
            await asyncio.sleep(gap_s)
        await conn.chunk(usage_event(n_events) + DONE)
        await conn.end()

    return answer


# --- issue 27: answer bounds ---

HUGE_LINE_BYTES = 100 * 2**20  # one SSE line of 100 MB (issue 27: 14.9 GB in the coordinator)


async def huge_sse_line(conn: Conn, k: int, n: int) -> None:
    """A token, then one token event whose text is 100 MB, written 1 MiB at a time (no
    separator before its end), then [DONE]: one line a client must not hold whole."""
    conn.head()
    await conn.chunk(token_event(0) + b'data: {"id":"cmpl-f","choices":[{"index":0,"text":"')
    piece = b"x" * 2**20
    for _ in range(HUGE_LINE_BYTES // len(piece)):
        await conn.chunk(piece)
    await conn.chunk(b'"}]}\n\n' + DONE)
    await conn.end()


async def data_not_json_with_choices(conn: Conn, k: int, n: int) -> None:
    """n token events whose data is not JSON (a prefix before the object) though their bytes
    hold ``"choices":[{``, then [DONE]: no usage, so they would count as tokens by bytes."""
    conn.head()
    await conn.chunk(b"".join(b"data: chunk " + token_event(i)[6:] for i in range(n)) + DONE)
    await conn.end()


TEXT_PER_EVENT = 2000  # characters per token event: n of them pass the cap of 64 per guard event


async def long_text_no_usage(conn: Conn, k: int, n: int) -> None:
    """n token events of 2000 characters each and no usage: the text is re-tokenised, and
    more than the cap of a request asking for n tokens (64 x (2n + 64) characters)."""
    conn.head()
    text = " " + "y" * (TEXT_PER_EVENT - 1)
    await conn.chunk(b"".join(token_event(i, text) for i in range(n)) + DONE)
    await conn.end()


# --- the server --------------------------------------------------------------------------------


class FaultServer:
    """An HTTP/1.1 server in its own thread on 127.0.0.1 that answers POSTs with ``answer``.

    ``idle_close_s``: close a keep-alive connection idle this long. ``connection_close``: say
    ``Connection: close`` on every answer and close after it. ``close_after_s``: close this
    long after every answer without saying so (llama.cpp's habit). ``restart(down_s)``: stop
    listening and abort every connection, then listen again on the same port after ``down_s``.
    ``models``: the body of ``GET /v1/models`` (a subclass may list another model).
    """

    models = MODELS

    def __init__(
        self,
        answer: Answer = good,
        idle_close_s: float | None = None,
        connection_close: bool = False,
        close_after_s: float | None = None,
    ) -> None:
        self.answer = answer
        self.idle_close_s = idle_close_s
        self.connection_close = connection_close
        self.close_after_s = close_after_s
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self.posts = 0
        self.connections = 0
        self.first_post = threading.Event()
        self.lock = threading.Lock()
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True, name="fault-server")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FaultServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fault server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def restart(self, down_s: float) -> None:
        """From another thread: the server goes away for ``down_s`` and comes back."""
        asyncio.run_coroutine_threadsafe(self._restart(down_s), self.loop).result(down_s + 10)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(self._listen(0))
        self.port = self.server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()

    async def _listen(self, port: int) -> asyncio.Server:
        return await asyncio.start_server(
            self._serve, "127.0.0.1", port, reuse_address=True, backlog=1024
        )

    async def _restart(self, down_s: float) -> None:
        assert self.server is not None
        self.server.close()  # no new connection is accepted: they are refused
        for writer in list(self.writers):
            writer.transport.abort()  # as a process that dies: every connection goes
        await asyncio.sleep(down_s)
        self.server = await self._listen(self.port)

    async def _shutdown(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in list(self.writers):
            writer.transport.abort()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self.lock:
            self.connections += 1
        self.writers.add(writer)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.idle_close_s)
                except asyncio.TimeoutError:
                    return  # idle too long: closed, as a server's keep-alive timeout does
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                conn = Conn(self, writer)
                if head.startswith(b"GET /v1/models"):
                    await conn.whole(b"200 OK", b"application/json", self.models)
                elif head.startswith((b"POST /v1/completions ", b"POST /v1/chat/completions ")):
                    with self.lock:
                        k = self.posts
                        self.posts += 1
                    self.first_post.set()
                    n = int(json.loads(body).get("max_tokens") or 4)
                    await self.answer(conn, k, n)
                    if self.close_after_s is not None:  # llama.cpp: keep-alive said, then closed
                        await asyncio.sleep(self.close_after_s)
                        return
                else:
                    await conn.whole(b"404 Not Found", b"text/plain", b"not found")
                if not conn.keep:
                    return
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        except asyncio.CancelledError:  # shut down while it hangs, stalls or streams forever
            pass
        finally:
            self.writers.discard(writer)
            writer.close()


# --- issue 27: multi-turn ---------------------------------------------------------------------
# Chat-shaped answers (``--backend openai-chat``, ``POST /v1/chat/completions``, which the server
# routes to ``answer`` as it does completions) for the multi-turn cases, and a wrapper that
# spoils every 3rd POST.


def chat_event(k: int) -> bytes:
    """One chat token event (a ``delta`` with ``content``, vLLM's shape)."""
    chunk = {
        "id": "chatcmpl-f",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": f" t{k}"}}],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


async def chat_good(conn: Conn, k: int, n: int) -> None:
    conn.head()
    await conn.chunk(b"".join(chat_event(i) for i in range(n)) + usage_event(n) + DONE)
    await conn.end()


async def chat_reset_mid_stream(conn: Conn, k: int, n: int) -> None:
    conn.head()
    await conn.chunk(chat_event(0) + chat_event(1))
    await conn.reset()


async def chat_stall_mid_stream(conn: Conn, k: int, n: int) -> None:
    conn.head()
    await conn.chunk(chat_event(0) + chat_event(1))
    await asyncio.sleep(FOREVER_S)


def every_third(bad: Answer, good: Answer = chat_good) -> Answer:
    """POSTs 2, 5, 8, ... (from 0) get ``bad``, the others ``good``: a multi-turn run loses
    some conversations part-way."""

    async def answer(conn: Conn, k: int, n: int) -> None:
        await (bad if k % 3 == 2 else good)(conn, k, n)

    return answer


# --- issue 27: terminal escapes from the server ---------------------------------------------

# What a terminal acts on: an ANSI colour, an OSC window title ended by BEL, a bare BEL, a line
# break that would forge a line of loadgen's own, a carriage return and a clear-screen.
ESCAPES = "\x1b[31mred\x1b[0m \x1b]0;owned title\x07bell\x07 two\nerror: forged line\r\x1b[2J"
ESCAPED_MODEL = "m\x1b]0;model title\x07\x1b[1;31m\x07"  # listed by /v1/models, JSON-escaped
ESCAPED_MODELS = json.dumps(
    {"object": "list", "data": [{"id": ESCAPED_MODEL, "object": "model", "owned_by": "faults"}]}
).encode()


async def escape_codes(conn: Conn, k: int, n: int) -> None:
    """Every third POST an HTTP 500 whose plain-text body carries ``ESCAPES`` as raw bytes,
    every third a stream whose error event carries them (JSON-escaped), the rest good."""
    if k % 3 == 0:
        await conn.whole(b"500 Internal Server Error", b"text/plain", ESCAPES.encode())
    elif k % 3 == 1:
        event = {"error": {"message": ESCAPES, "type": "InternalServerError", "code": 500}}
        conn.head()
        await conn.chunk(token_event(0) + b"data: " + json.dumps(event).encode() + b"\n\n" + DONE)
        await conn.end()
    else:
        await good(conn, k, n)


class EscapingServer(FaultServer):
    """A FaultServer whose one model's id carries escapes (``ESCAPED_MODEL``)."""

    models = ESCAPED_MODELS

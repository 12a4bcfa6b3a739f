"""A minimal HTTP/1.1 server on raw sockets, in its own thread of the test process on 127.0.0.1,
whose connection habits each test sets exactly: close after every stream (as llama.cpp's does,
while it advertises keep-alive), fail a fresh connection, or die after the first response byte."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

MODELS = b'{"object":"list","data":[{"id":"m","object":"model"}]}'
CHUNK = b'data: {"choices":[{"index":0,"text":"a","finish_reason":null}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}\n\n'


@dataclass
class Habits:
    """How the raw server behaves."""

    close_after_stream_s: float | None = 0.0005  # close this long after a stream; None: keep
    fail_posts_on_fresh: int = 0  # close this many first POSTs of a new connection unanswered
    die_after_status_line: bool = False  # every POST: send a status line, then close
    # A connection that answered a GET closes on its first POST unanswered, as a server does
    # when its keep-alive timeout closes an idle pre-opened connection just as a request goes.
    fail_post_after_get: bool = False
    close_after_get: bool = False  # close every connection right after answering a GET
    # The answer to the k-th POST (from 0) asking for n tokens: (Content-Type, body); None: a
    # stream of n tokens, usage and [DONE]. The status is 200 either way.
    answer: Callable[[int, int], tuple[bytes, bytes]] | None = None
    posts: int = 0  # POSTs answered in full
    connections: int = 0
    generation_connections: int = 0  # connections that carried a POST /v1/completions
    closed_unanswered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class RawServer:
    """A minimal HTTP/1.1 server in its own thread, on 127.0.0.1."""

    def __init__(self, habits: Habits) -> None:
        self.habits = habits
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._main, daemon=True)

    def __enter__(self) -> RawServer:
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _shutdown(self) -> None:
        self.server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        habits = self.habits
        with habits.lock:
            habits.connections += 1
        posts_here = 0
        served_get = False
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                if head.startswith(b"GET"):
                    writer.write(_response(b"application/json", MODELS))
                    served_get = True
                    if habits.close_after_get:
                        await writer.drain()
                        writer.close()
                        return
                    continue
                if not head.startswith(b"POST /v1/completions "):  # /tokenize and the like
                    writer.write(_response(b"text/plain", b"not found", b"404 Not Found"))
                    continue
                posts_here += 1
                if posts_here == 1:
                    with habits.lock:
                        habits.generation_connections += 1
                if posts_here <= habits.fail_posts_on_fresh or (
                    habits.fail_post_after_get and served_get and posts_here == 1
                ):
                    with habits.lock:
                        habits.closed_unanswered += 1
                    writer.close()
                    return
                if habits.die_after_status_line:
                    writer.write(b"HTTP/1.1 200 OK\r\n")
                    await writer.drain()
                    writer.close()
                    return
                n = json.loads(body)["max_tokens"]
                with habits.lock:
                    k = habits.posts
                    habits.posts += 1
                if habits.answer is not None:
                    content_type, stream = habits.answer(k, n)
                else:
                    content_type = b"text/event-stream"
                    stream = CHUNK * n + USAGE % (5, n) + b"data: [DONE]\n\n"
                writer.write(_response(content_type, stream))
                if habits.close_after_stream_s is not None:
                    self.loop.call_later(habits.close_after_stream_s, writer.close)
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


def _response(content_type: bytes, body: bytes, status: bytes = b"200 OK") -> bytes:
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: "
        + content_type
        + b"\r\nConnection: keep-alive\r\n"
        b"Keep-Alive: timeout=5, max=100\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )

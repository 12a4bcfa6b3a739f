"""Connection habits of real servers, end to end through the real CLI and workers, against a
small raw-socket HTTP/1.1 server whose behaviour each test sets exactly: a server that closes
after every stream (as llama.cpp's does, while it advertises keep-alive), one that fails a fresh
connection, one that dies after the first response byte. Also pins aiohttp's pool internals
that workers/worker.py's PoolConnector hooks."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest

from workers.worker import FRESH_ONLY, PoolConnector

MODELS = b'{"object":"list","data":[{"id":"m","object":"model"}]}'
CHUNK = b'data: {"choices":[{"index":0,"text":"a","finish_reason":null}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}\n\n'


@dataclass
class Habits:
    """How the raw server behaves."""

    close_after_stream_s: float | None = 0.0005  # close this long after a stream; None: keep
    fail_posts_on_fresh: int = 0  # close this many first POSTs of a new connection unanswered
    die_after_status_line: bool = False  # every POST: send a status line, then close
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
                    continue
                if not head.startswith(b"POST /v1/completions "):  # /tokenize and the like
                    writer.write(_response(b"text/plain", b"not found", b"404 Not Found"))
                    continue
                posts_here += 1
                if posts_here == 1:
                    with habits.lock:
                        habits.generation_connections += 1
                if posts_here <= habits.fail_posts_on_fresh:
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
                stream = CHUNK * n + USAGE % (5, n) + b"data: [DONE]\n\n"
                writer.write(_response(b"text/event-stream", stream))
                with habits.lock:
                    habits.posts += 1
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


def run(port: int, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "loadgen", "run", "--base-url", f"http://127.0.0.1:{port}",
         "--model", "m", "--tokenizer", "loadgen-mock", "--random-input-len", "8",
         "--random-output-len", "4", "--disable-tqdm", "--save-result", "--save-detailed",
         "--result-dir", str(tmp_path), *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    files = list(tmp_path.glob("*.json"))
    return proc, json.loads(files[0].read_text()) if files else {}


@pytest.mark.parametrize(("workers", "concurrency"), [("1", "4"), ("2", "16")])
def test_a_server_that_closes_after_every_stream_loses_no_request(
    tmp_path: Path, workers: str, concurrency: str
) -> None:
    habits = Habits()
    with RawServer(habits) as server:
        proc, result = run(
            server.port, tmp_path, "--workers", workers, "--max-concurrency", concurrency,
            "--num-prompts", "300",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (result["completed"], result["failed"]) == (300, 0)
    assert habits.posts == 300  # each request reached the server once: none lost, none twice
    extra = result["loadgen"]
    assert extra["connection_reuse_stopped"] is True
    # Re-sends happen only until reuse stops: a few per worker, not one per request.
    assert 0 < extra["resent_on_stale_connection"] < 30
    assert "connections were no longer reused" in proc.stdout


def test_a_server_that_keeps_connections_sees_no_resend_and_no_new_connection(
    tmp_path: Path,
) -> None:
    habits = Habits(close_after_stream_s=None)
    with RawServer(habits) as server:
        proc, result = run(
            server.port, tmp_path, "--workers", "1", "--max-concurrency", "4",
            "--num-prompts", "100",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    extra = result["loadgen"]
    assert (extra["resent_on_stale_connection"], extra["connection_reuse_stopped"]) == (0, False)
    assert extra["connections_preopened"] == 4
    assert extra["connections_closed_before_use"] == 0
    assert extra["new_connections_during_run"]["count"] == 0
    assert habits.generation_connections == 4


def test_a_fresh_connection_that_fails_is_never_resent(tmp_path: Path) -> None:
    # Every connection's first POST is closed unanswered; pre-opened connections served a GET,
    # so their first POST is a reuse: re-sent once on a fresh connection, which fails again.
    habits = Habits(close_after_stream_s=None, fail_posts_on_fresh=1)
    with RawServer(habits) as server:
        proc, result = run(
            server.port, tmp_path, "--workers", "1", "--max-concurrency", "1",
            "--num-prompts", "3",
        )  # fmt: skip
    assert (proc.returncode, result["failed"]) == (1, 3)
    # The first request went on the pre-opened connection and was re-sent once on a new one;
    # the other two found no pooled connection, so their failure on a new one is final.
    assert (result["loadgen"]["resent_on_stale_connection"], habits.closed_unanswered) == (1, 4)
    assert habits.posts == 0


def test_no_resend_after_a_response_byte(tmp_path: Path) -> None:
    habits = Habits(close_after_stream_s=None, die_after_status_line=True)
    with RawServer(habits) as server:
        proc, result = run(
            server.port, tmp_path, "--workers", "1", "--max-concurrency", "1",
            "--num-prompts", "2",
        )  # fmt: skip
    assert proc.returncode == 1  # every request failed
    assert "every request failed" in proc.stderr
    assert (result["failed"], result["loadgen"]["resent_on_stale_connection"]) == (2, 0)
    assert habits.generation_connections == 2  # the pre-opened one, then a new one: no resend


def _pooled(connector: PoolConnector) -> int:
    return sum(len(conns) for conns in connector._conns.values())


async def _pool_hooks() -> tuple[int, int, int, int]:
    """Pre-open two connections, use one, then stop reuse; report what the hooks saw."""
    habits = Habits(close_after_stream_s=None)
    with RawServer(habits) as server:
        url = f"http://127.0.0.1:{server.port}/v1/models"
        connector = PoolConnector()
        async with aiohttp.ClientSession(connector=connector) as session:
            connector.preopening = True
            token = FRESH_ONLY.set(True)  # as the worker pre-opens: never from the pool
            for _ in range(2):
                async with session.get(url) as response:
                    await response.read()
            FRESH_ONLY.reset(token)
            connector.preopening = False
            opened = connector.open_preopened()
            async with session.get(url) as response:  # takes a pre-opened one from the pool
                await response.read()
            unused = len(connector.preopened)
            connector.reuse = False
            pooled_before = _pooled(connector)
            async with session.get(url) as response:  # the other pooled one, closed after
                await response.read()
            return opened, unused, pooled_before, _pooled(connector)


def test_pool_hooks_match_this_aiohttp() -> None:
    opened, unused, pooled_before, pooled_after = asyncio.run(_pool_hooks())
    assert opened == 2  # FRESH_ONLY made each GET open its own connection
    assert unused == 1  # taking a pooled one removes it from the pre-opened set
    assert (pooled_before, pooled_after) == (2, 1)  # with reuse off a used one is not pooled

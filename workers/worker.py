"""A worker process: one uvloop event loop, one aiohttp connection pool, one shard of requests.

Life cycle (messages in workers/protocol.py): HELLO -> receive SHARD -> open connections ->
READY -> receive START(t0) -> send every request at t0 + its scheduled offset, streaming
RECORDS batches back -> DONE. A STOP at any time cancels what is in flight; every request of
the shard is still reported, as failed when it never finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
from array import array
from time import perf_counter_ns

import aiohttp
import uvloop
import zmq
import zmq.asyncio

from workers.protocol import (
    Kind,
    Shard,
    decode,
    decode_shard,
    encode,
    records_message,
    worker_identity,
)
from workers.sse import SSEStream, generated_text

NOT_SENT = "not sent: the run was stopped before this request's turn"
CANCELLED = "cancelled: the run was stopped while this request was in flight"
MAX_ERROR_BODY = 512


def run_worker(endpoint: str, worker_id: int) -> None:
    """Process entry point: serve one shard for the coordinator at ``endpoint``."""
    # Ctrl-C reaches the whole process group; the coordinator alone decides how to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _raise_open_file_limit()
    uvloop.run(Worker(endpoint, worker_id).run())


def _raise_open_file_limit() -> None:
    # Each connection is a file descriptor; the common soft limit of 1024 is too low.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Worker:
    """Sends one shard on schedule and reports a record per request."""

    def __init__(self, endpoint: str, worker_id: int) -> None:
        self.endpoint = endpoint
        self.worker_id = worker_id
        self.ctx = zmq.asyncio.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.IDENTITY, worker_identity(worker_id))
        self.sock.setsockopt(zmq.LINGER, 5000)
        self.rows: list[tuple] = []
        self.events = array("q")
        self.errors: dict[int, str] = {}
        self.texts: dict[int, str] = {}
        self.stopping = False
        self.parent_pid = os.getppid()

    async def run(self) -> None:
        """Talk to the coordinator until the shard is done or the run is stopped."""
        self.sock.connect(self.endpoint)
        try:
            await self._send(encode(Kind.HELLO, worker_id=self.worker_id, pid=os.getpid()))
            kind, fields, frames = decode(await self.sock.recv_multipart())
            if kind is not Kind.SHARD:
                return
            shard = decode_shard(fields, frames)
            await self._serve(shard)
        except Exception as exc:
            await self._send(encode(Kind.FATAL, message=f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            self.sock.close()
            self.ctx.term()

    async def _send(self, parts: list) -> None:
        await self.sock.send_multipart(parts, copy=False)

    async def _serve(self, shard: Shard) -> None:
        config = shard.config
        connector = aiohttp.TCPConnector(
            limit=config.max_concurrency,
            limit_per_host=0,
            ttl_dns_cache=300,
            keepalive_timeout=300,
            force_close=False,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=6 * 60 * 60),
            read_bufsize=config.read_bufsize,
            # trust_env would re-read the proxy variables and ~/.netrc on every request, in a
            # thread: a third of the worker's CPU. The coordinator resolves the proxy once.
            trust_env=False,
        )
        try:
            opened, connect_error = await self._preopen(session, shard)
            await self._send(encode(Kind.READY, connections=opened, connect_error=connect_error))
            kind, fields, _ = decode(await self.sock.recv_multipart())
            if kind is not Kind.START:
                self._account_unsent(shard, range(len(shard.indices)), NOT_SENT)
                await self._flush()
                await self._send(encode(Kind.DONE, sent=0))
                return
            sent = await self._run_shard(session, shard, int(fields["t0_ns"]))
            await self._flush()
            await self._send(encode(Kind.DONE, sent=sent))
        finally:
            await session.close()

    async def _preopen(self, session: aiohttp.ClientSession, shard: Shard) -> tuple[int, str]:
        """Open the pool's connections before t0, so no handshake lands in a measured TTFT."""
        config = shard.config
        count = min(config.preopen_connections, len(shard.indices))
        waiting = count
        all_connected = asyncio.Event()

        def connected() -> None:
            nonlocal waiting
            waiting -= 1
            if waiting == 0:
                all_connected.set()

        async def touch() -> None:
            # Each request holds its connection (body unread) until every one has connected;
            # otherwise a fast server lets later requests reuse the first few connections.
            holding = False
            try:
                async with session.get(
                    config.preopen_url, headers=config.headers, proxy=config.proxy
                ) as resp:
                    holding = True
                    connected()
                    await all_connected.wait()
                    await resp.read()
            finally:
                if not holding:
                    connected()

        results = await asyncio.gather(*(touch() for _ in range(count)), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        first = f"{type(failures[0]).__name__}: {failures[0]}" if failures else ""
        return count - len(failures), first

    async def _run_shard(self, session: aiohttp.ClientSession, shard: Shard, t0_ns: int) -> int:
        """Release each request at t0 + its offset; return how many were sent."""
        config = shard.config
        semaphore = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None
        headers = {"Content-Type": "application/json", **config.headers}
        tasks: set[asyncio.Task] = set()
        flusher = asyncio.create_task(self._flush_periodically(config.flush_interval_s))
        listener = asyncio.create_task(self._listen_for_stop(tasks))
        released = 0
        try:
            for k in range(len(shard.indices)):
                delay_ns = t0_ns + int(shard.scheduled_ns[k]) - perf_counter_ns()
                if delay_ns > 0:
                    await asyncio.sleep(delay_ns / 1e9)
                if self.stopping:
                    break
                task = asyncio.create_task(
                    self._request(session, shard, k, headers, semaphore, t0_ns)
                )
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                released += 1
            while tasks:
                await asyncio.wait(set(tasks))
        finally:
            listener.cancel()
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
        self._account_unsent(shard, range(released, len(shard.indices)), NOT_SENT)
        return released

    async def _request(
        self,
        session: aiohttp.ClientSession,
        shard: Shard,
        k: int,
        headers: dict[str, str],
        semaphore: asyncio.Semaphore | None,
        t0_ns: int,
    ) -> None:
        config = shard.config
        index = int(shard.indices[k])
        arrival_ns = perf_counter_ns()
        if config.request_id_prefix is not None:
            headers = {**headers, "x-request-id": f"{config.request_id_prefix}{index}"}
        stream = SSEStream()
        chunks: list[bytes] = []
        status = 0
        error: str | None = None
        acquired = False
        send_ns = -1
        try:
            if semaphore is not None:
                await semaphore.acquire()
                acquired = True
            send_ns = perf_counter_ns()
            async with session.post(
                config.url, data=shard.body(k), headers=headers, proxy=config.proxy
            ) as resp:
                status = resp.status
                if status != 200:
                    body = await resp.content.read(MAX_ERROR_BODY)
                    text = body.decode("utf-8", "replace").strip()
                    error = f"HTTP {status} {resp.reason or ''}: {text}".strip()
                else:
                    content = resp.content
                    while True:
                        data = await content.readany()
                        now = perf_counter_ns() - t0_ns
                        if not data:
                            break
                        stream.feed(data, now)
                        chunks.append(data)
                    stream.finish(perf_counter_ns() - t0_ns)
        except asyncio.CancelledError:
            error = CANCELLED if send_ns >= 0 else NOT_SENT
        except Exception as exc:  # every failure becomes a failed record, never a lost request
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        finally:
            if acquired:
                semaphore.release()
        end_ns = perf_counter_ns()
        n_events = len(stream.event_ns)
        success = status == 200 and n_events > 0 and error is None
        if status == 200 and n_events == 0 and error is None:
            error = stream.error or (
                "Never received a valid chunk to calculate TTFT."
                "This response will be marked as failed!"
            )
        if error is not None:
            self.errors[index] = error
        if config.keep_text == "always" or stream.completion_tokens <= 0:
            self.texts[index] = generated_text(chunks, config.chat)
        self.events.extend(stream.event_ns)
        self.rows.append(
            (
                index,
                arrival_ns - t0_ns,
                send_ns - t0_ns if send_ns >= 0 else -1,
                end_ns - t0_ns,
                n_events,
                status,
                stream.prompt_tokens,
                stream.completion_tokens,
                success,
            )
        )

    def _account_unsent(self, shard: Shard, ks: range, reason: str) -> None:
        for k in ks:
            index = int(shard.indices[k])
            self.errors[index] = reason
            self.rows.append((index, -1, -1, -1, 0, 0, -1, -1, False))

    async def _flush(self) -> None:
        if not self.rows:
            return
        rows, events, errors, texts = self.rows, self.events, self.errors, self.texts
        self.rows, self.events, self.errors, self.texts = [], array("q"), {}, {}
        await self._send(records_message(rows, events.tobytes(), errors, texts))

    async def _flush_periodically(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await self._flush()
            if os.getppid() != self.parent_pid:  # the coordinator is gone; nobody will read us
                os._exit(3)

    async def _listen_for_stop(self, tasks: set[asyncio.Task]) -> None:
        while True:
            kind, _, _ = decode(await self.sock.recv_multipart())
            if kind is Kind.STOP:
                self.stopping = True
                for task in list(tasks):
                    task.cancel()
                return

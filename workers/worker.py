"""A worker process: one uvloop event loop, one aiohttp connection pool, one shard of requests.

Life cycle (messages in workers/protocol.py): HELLO -> receive SHARD -> open connections ->
READY -> receive START(t0) -> send every request at t0 + its scheduled offset, streaming
RECORDS batches back -> DONE (with the loop-lag samples and CPU time of the run). During the
run the coordinator sends a UDP probe every 10 ms; its delivery delay is a loop-lag sample. A STOP
at any time cancels what is in flight; every request of the shard is still reported, as failed
when it never finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import os
import resource
import signal
import socket
import time
from array import array
from time import perf_counter_ns

import aiohttp
import numpy as np
import uvloop
import zmq
import zmq.asyncio
from yarl import URL

from workers.credits import CreditGate
from workers.pooling import PooledAnswer
from workers.precise_timer import PreciseTimer
from workers.protocol import (
    Kind,
    Shard,
    decode,
    decode_probe,
    decode_shard,
    encode,
    records_message,
    worker_identity,
)
from workers.sse import SSEStream, generated_text

NOT_SENT = "not sent: the run was stopped before this request's turn"
CANCELLED = "cancelled: the run was stopped while this request was in flight"
MAX_ERROR_BODY = 512
BURST_YIELD = 4  # requests released back to back before the loop serves open streams


# The current request's connect time, set in its own task's context (see TimedConnector).
CONNECT_NS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "connect_ns", default=None
)


class TimedConnector(aiohttp.TCPConnector):
    """A TCPConnector that adds the time it spends opening a new connection to the current
    request's CONNECT_NS; reusing a pooled connection costs nothing extra."""

    async def _create_connection(self, req, traces, timeout):  # type: ignore[no-untyped-def]
        started = perf_counter_ns()
        try:
            return await super()._create_connection(req, traces, timeout)
        finally:
            if (spent := CONNECT_NS.get()) is not None:
                spent.append(perf_counter_ns() - started)


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
        self.loop_lag_ns = array("q")  # probe delivery delays during the run
        self.probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.probe.bind(("127.0.0.1", 0))
        self.probe.setblocking(False)
        self.cpu_ns = 0
        self.wall_ns = 0
        self.timer: PreciseTimer | None = None  # the dispatcher's sleeps; a STOP wakes it
        self.gate: CreditGate | None = None  # with --max-concurrency: this worker's credits
        self.demand_pending = False
        self.released = 0  # requests of the shard released so far, in order
        self.shard: Shard | None = None
        self.t0_ns = 0

    async def run(self) -> None:
        """Talk to the coordinator until the shard is done or the run is stopped."""
        self.sock.connect(self.endpoint)
        try:
            await self._send(
                encode(
                    Kind.HELLO,
                    worker_id=self.worker_id,
                    pid=os.getpid(),
                    probe_port=self.probe.getsockname()[1],
                )
            )
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
            self.probe.close()

    async def _send(self, parts: list) -> None:
        await self.sock.send_multipart(parts, copy=False)

    async def _serve(self, shard: Shard) -> None:
        config = shard.config
        connector = TimedConnector(
            ssl=not config.insecure,  # True: verify (aiohttp's default); False: --insecure
            limit=config.max_concurrency,
            limit_per_host=0,
            ttl_dns_cache=300,
            keepalive_timeout=300,
            force_close=False,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            # No deadline (upstream's is 6 h): a per-request timer costs ~10 % of a busy worker.
            timeout=aiohttp.ClientTimeout(total=None),
            read_bufsize=config.read_bufsize,
            # trust_env would re-read the proxy variables and ~/.netrc on every request, in a
            # thread: a third of the worker's CPU. The coordinator resolves the proxy once.
            trust_env=False,
        )
        try:
            opened, connect_error = await self._preopen(session, shard)
            # The shard, the pool and the imported modules live for the whole run: take them
            # out of the collector's reach before t0, so no full collection walks them (a
            # stall of milliseconds) while streams are being stamped. Upstream does the same.
            # Sending requests leaves no reference cycles (a collection after 500 requests
            # found none), so automatic collection stays off until the run ends: at 200
            # requests/s of 128-token streams that took send lag p99 from 2.7-3.6 to 2.2-2.5 ms.
            gc.collect()
            gc.freeze()
            gc.disable()
            await self._send(encode(Kind.READY, connections=opened, connect_error=connect_error))
            kind, fields, _ = decode(await self.sock.recv_multipart())
            if kind is not Kind.START:
                self._account_unsent(shard, range(len(shard.indices)), NOT_SENT)
                await self._flush()
                await self._send(encode(Kind.DONE, [b""], sent=0, cpu_ns=0, wall_ns=0))
                return
            try:
                sent = await self._run_shard(
                    session, shard, int(fields["t0_ns"]), fields["credits"]
                )
            finally:
                gc.enable()
            await self._flush()
            await self._send(
                encode(
                    Kind.DONE,
                    [self.loop_lag_ns.tobytes()],
                    sent=sent,
                    cpu_ns=self.cpu_ns,
                    wall_ns=self.wall_ns,
                )
            )
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

    async def _run_shard(
        self, session: aiohttp.ClientSession, shard: Shard, t0_ns: int, credits: int
    ) -> int:
        """Release each request at t0 + its offset, each taking one of the worker's credits of
        the global cap, if any; return how many were released."""
        config = shard.config
        self.shard, self.t0_ns = shard, t0_ns
        self.timer = PreciseTimer(asyncio.get_running_loop())
        slots = None
        if config.max_concurrency:
            slots = self.gate = CreditGate(
                credits,
                lambda: len(shard.indices) - self.released,
                self._due_unsent,
                self._notify_demand,
            )
        headers = {"Content-Type": "application/json", **config.headers}
        url = URL(config.url)
        tasks: set[asyncio.Task] = set()
        flusher = asyncio.create_task(self._flush_periodically(config.flush_interval_s))
        listener = asyncio.create_task(self._listen(tasks))
        self.cpu_start_ns, self.wall_start_ns = time.process_time_ns(), perf_counter_ns()
        released = 0
        slot_wait_ended_ns = 0  # when the dispatcher last got a slot it had to wait for
        try:
            for k in range(len(shard.indices)):
                due_ns = t0_ns + int(shard.scheduled_ns[k])
                delay_ns = due_ns - perf_counter_ns()
                if delay_ns > 0:
                    await self.timer.wait_until(due_ns)
                    # The loop's own timers (the fallback) can fire up to a millisecond early;
                    # the rest is waited out in loop passes, which still serve open streams.
                    while perf_counter_ns() < due_ns and not self.stopping:
                        await asyncio.sleep(0)
                elif released % BURST_YIELD == 0:
                    await asyncio.sleep(0)  # a burst must not starve the streams already open
                if self.stopping:
                    break
                # A request that fell due while every slot was taken arrived on time and then
                # queued; only the dispatcher's own lateness is send lag.
                arrival_ns = due_ns if due_ns < slot_wait_ended_ns else perf_counter_ns()
                if slots is not None and not slots.try_acquire():
                    await slots.acquire()
                    slot_wait_ended_ns = perf_counter_ns()
                    if self.stopping:
                        slots.release()
                        break
                task = asyncio.create_task(
                    self._request(session, url, shard, k, headers, slots, t0_ns, arrival_ns)
                )
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                released += 1
                self.released = released
            while tasks:
                await asyncio.wait(set(tasks))
        finally:
            self.cpu_ns = time.process_time_ns() - self.cpu_start_ns
            self.wall_ns = perf_counter_ns() - self.wall_start_ns
            listener.cancel()
            flusher.cancel()
            self.timer.close()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
        self._account_unsent(shard, range(released, len(shard.indices)), NOT_SENT)
        return released

    async def _request(
        self,
        session: aiohttp.ClientSession,
        url: URL,
        shard: Shard,
        k: int,
        headers: dict[str, str],
        slots: asyncio.Semaphore | None,
        t0_ns: int,
        arrival_ns: int,
    ) -> None:
        """Send request k (its slot, if any, already taken) and record what came back."""
        config = shard.config
        index = int(shard.indices[k])
        if config.request_id_prefix is not None:
            headers = {**headers, "x-request-id": f"{config.request_id_prefix}{index}"}
        streamed = config.response_form == "sse"
        stream = SSEStream() if streamed else PooledAnswer()
        chunks: list[bytes] = []
        status = 0
        error: str | None = None
        connect_ns: list[int] = []
        CONNECT_NS.set(connect_ns)  # this task's own context: other requests do not see it
        send_ns = perf_counter_ns()
        try:
            async with session.post(
                url, data=shard.body(k), headers=headers, proxy=config.proxy
            ) as resp:
                status = resp.status
                if status != 200:
                    body = await resp.content.read(MAX_ERROR_BODY)
                    text = " ".join(body.decode("utf-8", "replace").split())  # one line
                    error = f"HTTP {status} {resp.reason or ''}: {text}".strip()
                elif isinstance(stream, SSEStream):
                    content = resp.content
                    while True:
                        data = await content.readany()
                        now = perf_counter_ns() - t0_ns
                        if not data:
                            break
                        stream.feed(data, now)
                        chunks.append(data)
                    stream.finish(perf_counter_ns() - t0_ns)
                else:
                    body = await resp.read()
                    stream.read(config.response_form, body, resp.headers, perf_counter_ns() - t0_ns)
        except asyncio.CancelledError:
            error = CANCELLED
        except Exception as exc:  # every failure becomes a failed record, never a lost request
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        finally:
            if slots is not None:
                slots.release()
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
        if streamed and (config.keep_text == "always" or stream.completion_tokens <= 0):
            self.texts[index] = generated_text(chunks, config.chat)
        self.events.extend(stream.event_ns)
        self.rows.append(
            (
                index,
                arrival_ns - t0_ns,
                send_ns - t0_ns,
                end_ns - t0_ns,
                n_events,
                status,
                stream.prompt_tokens,
                stream.completion_tokens,
                sum(connect_ns),
                success,
            )
        )

    def _notify_demand(self) -> None:
        """Send one DEMAND at the end of this event-loop pass, however often it is asked for."""
        if not self.demand_pending:
            self.demand_pending = True
            asyncio.get_running_loop().call_soon(self._send_demand)

    def _due_unsent(self) -> int:
        """Requests of the shard that are due now and not yet released."""
        if self.shard is None:
            return 0
        now = perf_counter_ns() - self.t0_ns
        return max(0, int(np.searchsorted(self.shard.scheduled_ns, now, "right")) - self.released)

    def _send_demand(self) -> None:
        self.demand_pending = False
        gate = self.gate
        if gate is None:
            return
        waiting = self._due_unsent() if gate.waiters else 0
        gate.demand_reported = waiting > 0
        message = encode(Kind.DEMAND, returned=gate.take_returned(), waiting=waiting)
        self.sock.send_multipart(message, copy=False)  # queued at once; nothing to wait for

    def _account_unsent(self, shard: Shard, ks: range, reason: str) -> None:
        for k in ks:
            index = int(shard.indices[k])
            self.errors[index] = reason
            self.rows.append((index, -1, -1, -1, 0, 0, -1, -1, 0, False))

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

    async def _listen(self, tasks: set[asyncio.Task]) -> None:
        """Handle the coordinator's messages during the run (STOP) and its loop-lag probes."""
        loop = asyncio.get_running_loop()
        loop.add_reader(self.probe.fileno(), self._on_probe)
        try:
            await self._listen_for_stop(tasks)
        finally:
            loop.remove_reader(self.probe.fileno())

    def _on_probe(self) -> None:
        """Each probe's age when the loop gets to it: the delay an arriving chunk's stamp sees."""
        now = perf_counter_ns()
        while True:
            try:
                sent = decode_probe(self.probe.recv(64))
            except BlockingIOError:
                return
            if sent is not None:
                self.loop_lag_ns.append(now - sent)

    async def _listen_for_stop(self, tasks: set[asyncio.Task]) -> None:
        while True:
            kind, fields, _ = decode(await self.sock.recv_multipart())
            if kind is Kind.CREDITS and self.gate is not None:
                self.gate.set_lend(fields["lend"])
                self.gate.grant(fields["grant"])
            elif kind is Kind.STOP:
                self.stopping = True
                if self.timer is not None:
                    self.timer.wake()
                if self.gate is not None:
                    self.gate.wake_all()  # a dispatcher waiting for a credit sees the stop
                for task in list(tasks):
                    task.cancel()

"""A worker process: one uvloop event loop, one aiohttp connection pool, one shard of requests.

Life cycle (messages in workers/protocol.py): HELLO -> WELCOME (or REFUSED: exit 2) ->
receive SHARD -> open connections -> READY -> answer the clock PINGs -> receive START(t0) ->
send every request at t0 + its scheduled offset, streaming RECORDS batches back -> DONE (with
the loop-lag samples and CPU time of the run). During the run the coordinator sends a local
worker a UDP probe every 10 ms; its delivery delay is a loop-lag sample (a remote worker samples
a timer of its own: workers/loop_probe.py). A STOP at any time cancels what is in flight; every
request of the shard is still reported, as failed when it never finished. A reusable worker (a
campaign's, loadgen/session/campaign.py, and every remote one) then waits for its next SHARD, with
fresh run state, until a STOP whose reason is ``dismissed`` comes between runs. The timeout
sweep is workers/timeouts.py, the process's life around the run
workers/lifecycle.py, its tie to the coordinator (local or remote) workers/link.py.

Over 500 lines (about 800) because ``Worker`` is one object on purpose: the dispatcher, the request
path, the credit gate's callbacks and the listener share its hot-path state (open requests,
pending rows, the stale-connection streak) without indirection; split further, every request
would cross a module boundary for state it owns.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import signal
import socket
import sys
import time
from array import array
from collections.abc import Iterable
from dataclasses import asdict
from time import perf_counter_ns
from typing import Any

import aiohttp
import numpy as np
import uvloop
import zmq
import zmq.asyncio
from yarl import URL

from workers import eager_send
from workers.blocks import ShardBlocks
from workers.busy_hook import start_spinning
from workers.conversations import SESSION_HEADER, Conversations
from workers.credits import CreditGate
from workers.eager_send import WRITTEN_NS, StampedRequest
from workers.lifecycle import PARENT_CHECK_S, die_with, raise_open_file_limit
from workers.link import REFUSED_EXIT, Link, ParentLink
from workers.loop_probe import LoopProbe
from workers.pool import (
    CONNECT_NS,
    FRESH_ONLY,
    STALE_ERRORS,
    TOOK_PREOPENED,
    PoolConnector,
    StampingHandler,
    before_any_byte,
    preopen,
)
from workers.pooling import PooledAnswer
from workers.precise_timer import PreciseTimer
from workers.protocol import (
    CANCELLED_AT_DEADLINE,
    CANCELLED_PREFIX,
    LOADGEN_VERSION,
    NOT_SENT_AT_DEADLINE,
    NOT_SENT_AT_STOP,
    NOT_SENT_PREFIX,
    PROTOCOL_VERSION,
    Codec,
    ConnectionStats,
    Kind,
    ProtocolError,
    Record,
    Shard,
    decode_probe,
    decode_requests,
    decode_shard,
    peek,
    record,
    records_message,
    version_mismatch,
    worker_identity,
)
from workers.sse import NEVER_RECEIVED, SSEStream
from workers.stream_text import kept_text, text_cap
from workers.timeouts import OpenRequest, sweep_timeouts

NOT_SENT_AFTER_FAILED_TURN = f"{NOT_SENT_PREFIX} an earlier turn of this conversation failed"
CANCELLED = f"{CANCELLED_PREFIX} the run was stopped while this request was in flight"
MAX_ERROR_BODY = 512
BURST_YIELD = 4  # requests released back to back before the loop serves open streams


STALE_STREAK_LIMIT = 3  # stale reuses in a row that show the server closes after each answer


DISMISSED = "dismissed"  # a STOP's reason that ends a reusable worker between runs
ALIVE_AFTER_NS = 1_000_000_000  # a remote worker silent this long says ALIVE


class Refused(Exception):
    """The coordinator would not take this worker (another version); the message says why."""


def run_worker(
    endpoint: str, worker_id: int, token: str, parent_pid: int, reusable: bool = False
) -> None:
    """Process entry point: serve one shard for the coordinator at ``endpoint`` (``reusable``:
    one shard after another, until a STOP dismisses it between them); ``token`` is the run's
    secret (workers/protocol.py's Codec), ``parent_pid`` the coordinator's pid."""
    # Ctrl-C, or a SIGTERM or SIGHUP sent to the process group, reaches every worker too; the
    # coordinator alone decides how to stop (it sends STOP, and SIGKILL to a worker that hangs).
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    die_with(parent_pid)
    raise_open_file_limit()
    worker = Worker(endpoint, worker_identity(worker_id), Codec(token), ParentLink(parent_pid))
    worker.reusable = reusable
    uvloop.run(worker.run())


class Worker:
    """Sends one shard on schedule and reports a record per request."""

    def __init__(self, endpoint: str, identity: bytes, codec: Codec, link: Link) -> None:
        self.endpoint = endpoint
        self.worker_id = -1  # until WELCOME says
        self.codec = codec
        self.reusable = False
        self.link = link
        self.ctx = zmq.asyncio.Context()
        self.sock = link.connect(self.ctx, endpoint, identity)
        self.last_sent_ns = 0
        self.dismissed = False  # a STOP that ends a reusable worker came instead of START
        # A local worker takes the coordinator's UDP loop-lag probes; a remote one has its own.
        self.probe: socket.socket | None = None
        if not link.remote:
            self.probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.probe.bind(("127.0.0.1", 0))
            self.probe.setblocking(False)
        self._reset_run_state()

    def _reset_run_state(self) -> None:
        """Everything one shard's run keeps, fresh (a reusable worker serves several)."""
        self.rows: list[Record] = []
        self.events = array("q")
        self.errors: dict[int, str] = {}
        self.texts: dict[int, str] = {}
        self.stopping = False
        self.past_deadline = False  # --duration: the deadline came, nothing more is released
        self.loop_lag_ns = array("q")  # probe delivery delays during the run
        self.cpu_ns = 0
        self.wall_ns = 0
        self.timer: PreciseTimer | None = None  # the dispatcher's sleeps; a STOP wakes it
        self.gate: CreditGate | None = None  # with --max-concurrency: this worker's credits
        self.demand_pending = False
        self.released = 0  # requests of the shard released so far, in order
        self.shard: Shard | None = None
        self.blocks: ShardBlocks | None = None  # the shard and --duration's TOPUP blocks
        self.more = asyncio.Event()  # a TOPUP came, or a stop or the deadline: look again
        self.progress_released = 0  # the releases PROGRESS last said
        self.block_waits = 0  # times the dispatcher had nothing to release but a block to come
        self.topups = 0  # TOPUPs taken: DONE says how many, the rest are the coordinator's to count
        self.block_wait_ns = 0  # and how long it waited for them
        self.t0_ns = 0
        self.connections = ConnectionStats()
        self.connector: PoolConnector | None = None
        self.stale_streak = 0  # stale pooled connections in a row, since the last good reuse
        self.report_first = 0  # finished requests still to report one by one (fail fast)
        self.open: dict[asyncio.Task[None], OpenRequest] = {}  # requests in flight, for the sweep
        self.progress_sent = 0  # the token events in flight PROGRESS last said
        self.conversations: Conversations | None = None  # --multi-turn: the shard's turns

    async def run(self) -> None:
        """Talk to the coordinator until the shard is done or the run is stopped (a reusable
        worker: until it is dismissed)."""
        eager_send.install(asyncio.get_running_loop())
        try:
            await self._join()
            while True:
                kind, fields, frames = await self._receive()
                if kind is Kind.SHARD:
                    await self._serve(decode_shard(fields, frames))
                    if not self.reusable or self.dismissed:
                        return
                    gc.unfreeze()  # the last shard's objects may go now
                    self._reset_run_state()
                elif not self.reusable or (kind is Kind.STOP and fields.get("reason") == DISMISSED):
                    return
                # Else a STOP or CREDITS sent for the run that has just ended: nothing to do.
        except Refused as exc:
            print(f"loadgen worker: refused: {exc}", file=sys.stderr, flush=True)
            os._exit(REFUSED_EXIT)
        except Exception as exc:
            await self._send(self.codec.encode(Kind.FATAL, message=f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            self.sock.close()
            self.link.close()
            self.ctx.term()
            if self.probe is not None:
                self.probe.close()

    async def _join(self) -> None:
        """Say HELLO (with this host, its cores and versions) and take WELCOME's worker id."""
        await self._send(
            self.codec.encode(
                Kind.HELLO,
                probe_port=self.probe.getsockname()[1] if self.probe is not None else 0,
                host=socket.gethostname(),
                cores=len(os.sched_getaffinity(0))
                if hasattr(os, "sched_getaffinity")
                else os.cpu_count() or 1,
                pid=os.getpid(),
                loadgen=LOADGEN_VERSION,
            )
        )
        while True:
            kind, fields, _ = await self._receive()
            if kind is Kind.WELCOME:
                if why := version_mismatch("the coordinator", PROTOCOL_VERSION, fields["loadgen"]):
                    raise Refused(why)
                self.worker_id = fields["worker"]
                return

    async def _send(self, parts: list[bytes | memoryview]) -> None:
        self.last_sent_ns = perf_counter_ns()
        await self.sock.send_multipart(parts, copy=False)

    async def _receive(self, watch_parent: bool = True) -> tuple[Kind, dict[str, Any], list[bytes]]:
        """The coordinator's next message; one that is not this run's is logged and dropped, a
        PING is answered here. While waiting, the worker exits if the coordinator is gone
        (``watch_parent``; during the run the flusher checks instead, so a message costs no
        poll and no timer)."""
        while True:
            if watch_parent and not await self.sock.poll(int(PARENT_CHECK_S * 1000)):
                self.link.check()
                if self.link.remote:
                    await self._send(self.codec.encode(Kind.ALIVE))
                continue
            parts = await self.sock.recv_multipart()
            try:
                kind, fields, frames = self.codec.decode(parts, from_worker=False)
            except ProtocolError as exc:
                with contextlib.suppress(ProtocolError):
                    _, peeked_kind, header = peek(parts)
                    if peeked_kind == Kind.REFUSED.value:  # whatever its version
                        raise Refused(str(header.get("message"))) from None
                print(f"worker {self.worker_id}: dropped a message: {exc}", file=sys.stderr)
                continue
            if kind is Kind.REFUSED:
                raise Refused(fields["message"])
            if kind is Kind.PING:
                pong = self.codec.encode(
                    Kind.PONG, t_ns=fields["t_ns"], worker_ns=perf_counter_ns()
                )
                await self._send(pong)
                continue
            return kind, fields, frames

    async def _serve(self, shard: Shard) -> None:
        config = shard.config
        self.report_first = config.report_first
        connector = self.connector = PoolConnector(
            ssl=not config.insecure,  # True: verify (aiohttp's default); False: --insecure
            limit=config.max_concurrency,
            limit_per_host=0,
            ttl_dns_cache=300,
            keepalive_timeout=300,
            force_close=False,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            # No per-request timer (upstream's deadline is 6 h; a timer per request costs ~10 %
            # of a busy worker): --request-timeout and --idle-timeout are one sweep over the
            # open requests (_sweep_timeouts). Only opening a connection has a timer of its own.
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=config.connect_timeout_s),
            read_bufsize=config.read_bufsize,
            request_class=StampedRequest,
            # trust_env would re-read the proxy variables and ~/.netrc on every request, in a
            # thread: a third of the worker's CPU. The coordinator resolves the proxy once.
            trust_env=False,
        )
        try:
            opened, connect_error, preopen_short = await preopen(
                session,
                connector,
                config.preopen_url,
                config.headers,
                config.proxy,
                min(config.preopen_connections, len(shard.indices)),
            )
            # The shard, the pool and the imported modules live for the whole run: take them
            # out of the collector's reach before t0, so no full collection walks them (a
            # stall of milliseconds) while streams are being stamped. Upstream does the same.
            # Sending requests leaves no reference cycles (a collection after 500 requests
            # found none), so automatic collection stays off until the run ends: at 200
            # requests/s of 128-token streams that took send lag p99 from 2.7-3.6 to 2.2-2.5 ms.
            gc.collect()
            gc.freeze()
            gc.disable()
            await self._send(
                self.codec.encode(
                    Kind.READY,
                    connections=opened,
                    connect_error=connect_error,
                    preopen_short=preopen_short,
                )
            )
            kind, fields, _ = await self._receive()
            if kind is not Kind.START:
                # The run ended before t0 (a STOP), or the coordinator is done with this worker.
                self.dismissed = kind is Kind.STOP and fields["reason"] == DISMISSED
                self._account_unsent(shard, range(len(shard.indices)), NOT_SENT_AT_STOP)
                await self._flush()
                await self._send(
                    self.codec.encode(
                        Kind.DONE,
                        [b""],
                        cpu_ns=0,
                        wall_ns=0,
                        connections=asdict(self.connections),
                        block_waits=0,
                        block_wait_ns=0,
                        topups=0,
                    )
                )
                return
            self.connections.preopened_at_t0 = connector.open_preopened()
            try:
                await self._run_shard(session, shard, int(fields["t0_ns"]), fields["credits"])
            finally:
                gc.enable()
            self.connections.closed_before_use = connector.closed_before_use()
            await self._flush()
            await self._send(
                self.codec.encode(
                    Kind.DONE,
                    [self.loop_lag_ns.tobytes()],
                    cpu_ns=self.cpu_ns,
                    wall_ns=self.wall_ns,
                    connections=asdict(self.connections),
                    block_waits=self.block_waits,
                    block_wait_ns=self.block_wait_ns,
                    topups=self.topups,
                )
            )
        finally:
            await session.close()

    async def _run_shard(
        self, session: aiohttp.ClientSession, shard: Shard, t0_ns: int, credits: int
    ) -> None:
        """Release each request at t0 + its offset, each taking one of the worker's credits of
        the global cap, if any."""
        config = shard.config
        self.shard, self.t0_ns = shard, t0_ns
        self.timer = PreciseTimer(asyncio.get_running_loop())
        if config.multi_turn and shard.turns is not None:
            self.conversations = Conversations(
                shard.turns[:, 0],
                shard.turns[:, 1],
                shard.turns[:, 2],
                shard.scheduled_ns,
                config.session_prefix,
            )
        slots = None
        if config.max_concurrency:
            slots = self.gate = CreditGate(
                credits,
                self._unsent,
                self._due_unsent,
                self._notify_demand,
            )
        headers = {"Content-Type": config.content_type, **config.headers}
        url = URL(config.url)
        tasks: set[asyncio.Task[None]] = set()
        flusher = asyncio.create_task(self._flush_periodically(config.flush_interval_s))
        listener = asyncio.create_task(self._listen(tasks))
        sweeper = asyncio.create_task(sweep_timeouts(self.open, config))
        deadline_ns = t0_ns + config.deadline_ns if config.deadline_ns else 0
        closer = asyncio.create_task(self._close_at(deadline_ns, config.grace_ns, slots))
        spinner = start_spinning()  # None unless a test asks (workers/busy_hook.py)
        self.cpu_start_ns, self.wall_start_ns = time.process_time_ns(), perf_counter_ns()
        released = 0
        slot_wait_ended_ns = 0  # when the dispatcher last got a slot it had to wait for
        try:
            if self.conversations is not None:
                await self._dispatch_turns(session, url, shard, headers, slots, tasks)
            blocks = self.blocks = ShardBlocks(shard)
            k = 0
            while self.conversations is None:
                if k >= blocks.size:
                    if blocks.final or self.stopping or self.past_deadline:
                        break
                    # --duration: the next block is on its way (it should be here already)
                    self.more.clear()
                    waited_from = perf_counter_ns()
                    await self.more.wait()
                    self.block_waits += 1
                    self.block_wait_ns += perf_counter_ns() - waited_from
                    continue
                due_ns = t0_ns + blocks.due_ns(k)
                if deadline_ns and due_ns > deadline_ns:
                    self.past_deadline = True  # scheduled after the deadline: never sent
                    break
                delay_ns = due_ns - perf_counter_ns()
                if delay_ns > 0:
                    await self.timer.wait_until(due_ns)
                    # The loop's own timers (the fallback) can fire up to a millisecond early;
                    # the rest is waited out in loop passes, which still serve open streams.
                    while perf_counter_ns() < due_ns and not self.stopping:
                        await asyncio.sleep(0)
                elif released % BURST_YIELD == 0:
                    await asyncio.sleep(0)  # a burst must not starve the streams already open
                if self.stopping or (self.past_deadline and due_ns < deadline_ns):
                    break  # (one due at the deadline itself is still sent)
                # A request that fell due while every slot was taken arrived on time and then
                # queued; only the dispatcher's own lateness is send lag.
                released_ns = due_ns if due_ns < slot_wait_ended_ns else perf_counter_ns()
                if slots is not None and not slots.try_acquire():
                    granted = await slots.acquire()
                    slot_wait_ended_ns = perf_counter_ns()
                    # Due by the deadline, it queued for a slot past it: it is not sent. (No
                    # credit came: a stop or the deadline let the dispatcher go.)
                    late = not granted or (deadline_ns and slot_wait_ended_ns > deadline_ns)
                    if self.stopping or late:
                        self.past_deadline = self.past_deadline or not self.stopping
                        if granted:
                            slots.release()
                        break
                task = asyncio.create_task(
                    self._request(
                        session,
                        url,
                        shard,
                        k,
                        headers,
                        slots,
                        t0_ns,
                        released_ns,
                        blocks.body(k),
                        (blocks.index(k), blocks.guard(k)),
                    )
                )
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                released += 1
                k += 1
                self.released = released
                if k == blocks.blocks[0][0] + len(blocks.blocks[0][1].indices):
                    blocks.let_go(k)
            while tasks:
                await asyncio.wait(set(tasks))
        finally:
            self.cpu_ns = time.process_time_ns() - self.cpu_start_ns
            self.wall_ns = perf_counter_ns() - self.wall_start_ns
            listener.cancel()
            flusher.cancel()
            sweeper.cancel()
            closer.cancel()
            if spinner is not None:
                spinner.cancel()
            self.timer.close()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            with contextlib.suppress(asyncio.CancelledError):
                await closer
        if self.conversations is not None:
            self._account_unsent(shard, self.conversations.never_released(), NOT_SENT_AT_STOP)
        else:
            at_deadline = self.past_deadline and not self.stopping
            why = NOT_SENT_AT_DEADLINE if at_deadline else NOT_SENT_AT_STOP
            self._account_unsent_indices(self.blocks.indices_from(released), why)

    async def _close_at(self, deadline_ns: int, grace_ns: int, slots: CreditGate | None) -> None:
        """--duration: at ``deadline_ns`` nothing more is released (a dispatcher waiting for a
        credit is let go); ``grace_ns`` later the requests still in flight are cancelled."""
        if not deadline_ns:
            return
        await asyncio.sleep(max(0, deadline_ns - perf_counter_ns()) / 1e9)
        self.past_deadline = True
        self.more.set()
        if slots is not None:
            slots.wake_all()
        await asyncio.sleep(max(0, deadline_ns + grace_ns - perf_counter_ns()) / 1e9)
        for task, watched in list(self.open.items()):
            watched.timed_out = CANCELLED_AT_DEADLINE
            task.cancel()

    async def _dispatch_turns(
        self,
        session: aiohttp.ClientSession,
        url: URL,
        shard: Shard,
        headers: dict[str, str],
        slots: CreditGate | None,
        tasks: set[asyncio.Task[None]],
    ) -> None:
        """Release conversations' turns as they fall due (workers/conversations.py): turn 0
        at its conversation's scheduled instant, each later one when the turn before it ended,
        plus the think time. The one timer waits for the earliest due turn, and a turn that
        ends wakes it."""
        conversations = self.conversations
        assert conversations is not None and self.timer is not None
        t0_ns = self.t0_ns
        while not self.stopping:
            due = conversations.next_due_ns()
            if due is None:
                if not tasks:
                    return  # every conversation has ended
                await self.timer.wait_until(perf_counter_ns() + 1_000_000_000)
                continue
            due_ns = t0_ns + due
            if due_ns > perf_counter_ns():
                await self.timer.wait_until(due_ns)
                continue  # due now, or woken by a turn that ended: look again
            # The credit first, the turn off the heap after: while it waits for one, the turn
            # is still counted as due (the DEMAND says so) and as unsent (so the credits that
            # come stay here for it). Popped first, it was neither: a worker whose credits had
            # all gone back reported nothing waiting, and waited for a grant that never came.
            released_ns = perf_counter_ns()
            if slots is not None and not slots.try_acquire():
                await slots.acquire()
                if self.stopping:
                    slots.release()
                    return
                # It was due on time, then queued for a credit. (A turn pushed meanwhile is due
                # no earlier than now, so the heap's first is still one that was due.)
                released_ns = t0_ns + (conversations.next_due_ns() or 0)
            k = conversations.pop()
            turn_headers = {**headers, SESSION_HEADER: conversations.session(k)}
            body = conversations.body(k, shard.body(k))
            task = asyncio.create_task(
                self._request(session, url, shard, k, turn_headers, slots, t0_ns, released_ns, body)
            )
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            self.released += 1

    def _unsent(self) -> int:
        """Requests of the shard not yet released (turns: nor ended with their conversation)."""
        if self.conversations is not None:
            return self.conversations.pending
        if self.blocks is not None:
            # a block on its way counts: the credits stay for it
            return self.blocks.size - self.released or (0 if self.blocks.final else 1)
        return len(self.shard.indices) - self.released if self.shard is not None else 0

    async def _request(
        self,
        session: aiohttp.ClientSession,
        url: URL,
        shard: Shard,
        k: int,
        headers: dict[str, str],
        slots: CreditGate | None,
        t0_ns: int,
        released_ns: int,
        body: bytes | None = None,
        fields: tuple[int, int] | None = None,
    ) -> None:
        """Send request k (its slot, if any, already taken; ``body``: a turn's, with its
        conversation's history, or a block's; ``fields``: its index and output guard, when
        read from the blocks) and record what came back."""
        config = shard.config
        if body is None:
            body = shard.body(k)
        index, max_events = fields or (int(shard.indices[k]), int(shard.max_events[k]))
        if config.request_id_prefix is not None:
            headers = {**headers, "x-request-id": f"{config.request_id_prefix}{index}"}
        streamed = config.response_form == "sse"

        stream = SSEStream(config.chat) if streamed else PooledAnswer()
        status = 0
        error: str | None = None
        resent = False
        connect_ns: list[int] = []
        written_ns: list[int] = []
        CONNECT_NS.set(connect_ns)  # this task's own context: other requests do not see it
        WRITTEN_NS.set(written_ns)
        sent_ns = perf_counter_ns()
        task = asyncio.current_task()
        assert task is not None
        # The output guard (0: none): more SSE messages than this and the stream is endless.
        guard = max_events or sys.maxsize
        watched = self.open[task] = OpenRequest(sent_ns, stream, guard)
        try:
            try:
                resp = await session.post(url, data=body, headers=headers, proxy=config.proxy)
            except STALE_ERRORS as exc:
                if connect_ns or not before_any_byte(exc) or self.stopping:
                    raise  # a fresh connection failed, or the server had begun to answer
                # A pooled connection the server had closed before it read this request (as
                # llama.cpp closes after every stream): send it again, once, on a new one.
                resent = True
                self._on_stale_connection()
                FRESH_ONLY.set(True)
                sent_ns = watched.sent_ns = watched.last_byte_ns = perf_counter_ns()
                resp = await session.post(url, data=body, headers=headers, proxy=config.proxy)
            if written_ns:
                # TTFT and E2EL start when the request was written, less its connection's
                # opening (upstream counts that; aiohttp's own work is send lag, not the server's).
                sent_ns = written_ns[-1] - sum(connect_ns)
            if not connect_ns and not resent:
                self.stale_streak = 0  # a pooled connection answered: the server keeps them
            async with resp:
                watched.last_byte_ns = perf_counter_ns()  # the status line and headers came
                status = resp.status
                if status != 200:
                    body = await resp.content.read(MAX_ERROR_BODY)
                    text = " ".join(body.decode("utf-8", "replace").split())  # one line
                    error = f"HTTP {status} {resp.reason or ''}: {text}".strip()
                elif isinstance(stream, SSEStream):
                    content = resp.content
                    # Each read is stamped when its newest bytes came from the socket. A
                    # connection already released (the whole body came with the head) is
                    # gone: its reads are stamped as the task takes them.
                    protocol = resp.connection.protocol if resp.connection else None
                    if not isinstance(protocol, StampingHandler):
                        protocol = None
                    while True:
                        data = await content.readany()
                        if not data:
                            break
                        now = protocol.received_ns if protocol is not None else perf_counter_ns()
                        stream.feed(data, now - t0_ns)
                    if error is None:
                        # The body ended cleanly: the last event, then the check of the whole
                        # body (is it SSE of JSON events, did [DONE] come), once per response.
                        stream.finish(perf_counter_ns() - t0_ns)
                else:
                    body = await resp.read()
                    stream.read(config.response_form, body, resp.headers, perf_counter_ns() - t0_ns)
        except asyncio.CancelledError:
            error = watched.timed_out or CANCELLED
        except aiohttp.ConnectionTimeoutError:
            error = (
                f"connect timeout: no connection within {config.connect_timeout_s:g} s "
                "(--connect-timeout)"
            )
        except Exception as exc:  # every failure becomes a failed record, never a lost request
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        finally:
            del self.open[task]
            if slots is not None:
                slots.release()
        end_ns = perf_counter_ns()
        truncated = False
        if status == 200 and error is None:
            # A 200 the server marked failed (an error event, tokens or not), or whose body is
            # not SSE of JSON events, fails with the reason (workers/sse.py says where upstream
            # differs); one that ended without [DONE] is counted as upstream counts it, and
            # recorded as truncated so that the report says how many did.
            if isinstance(stream, SSEStream):
                error = stream.failure
                truncated = stream.truncated
            else:
                error = stream.error
            if error is None and not stream.event_ns:
                error = NEVER_RECEIVED
        n_events = len(stream.event_ns)
        success = status == 200 and n_events > 0 and error is None
        if error is not None:
            self.errors[index] = error
        # The text is kept for re-tokenisation (no usage), --save-detailed or the next turn of
        # a conversation; capped (workers/stream_text.py), the cap counted in the record.
        text, text_capped = "", False
        keep = config.keep_text == "always" or stream.completion_tokens <= 0
        if isinstance(stream, SSEStream) and (keep or (success and self.conversations is not None)):
            cap = text_cap(max_events)
            text, text_capped = kept_text(stream.chunks, config.chat, stream.choice_events, cap)
            if keep:
                self.texts[index] = text
        self.events.extend(stream.event_ns)
        if self.conversations is not None:
            self._turn_ended(shard, k, success, text, end_ns - t0_ns, error)
        server_queue_s, server_ttft_s = (
            (stream.server_queue_s, stream.server_ttft_s)
            if isinstance(stream, SSEStream)
            else (math.nan, math.nan)
        )
        self.rows.append(
            record(
                index=index,
                released_ns=released_ns - t0_ns,
                sent_ns=sent_ns - t0_ns,
                end_ns=end_ns - t0_ns,
                n_events=n_events,
                status=status,
                prompt_tokens=stream.prompt_tokens,
                completion_tokens=stream.completion_tokens,
                connect_ns=sum(connect_ns),
                success=success,
                resent=resent,
                truncated=truncated,
                server_queue_s=server_queue_s,
                server_ttft_s=server_ttft_s,
                text_capped=text_capped,
                cached_tokens=stream.cached_tokens if isinstance(stream, SSEStream) else -1,
            )
        )
        if self.report_first:
            # Fail fast judges the run on its first finished requests: while they fail, report
            # each at once (queued, nothing to wait for), so a run of failures stops within
            # milliseconds. A success means the run will not stop so: no more of this.
            self.report_first = self.report_first - 1 if not success else 0
            if not success:
                self.sock.send_multipart(self._records_message(), copy=False)

    def _turn_ended(
        self, shard: Shard, k: int, ok: bool, text: str, end_ns: int, error: str | None
    ) -> None:
        """The conversation of turn k goes on (its next turn is due after the think time, with
        ``text``, the answer, in its history) or, when k failed, ends: its later turns are each
        recorded at once, unsent with the reason (turn k's error in it), and the credits they
        would have used go back at once."""
        conversations = self.conversations
        assert conversations is not None
        dropped = conversations.ended(k, shard.body(k), ok, text, end_ns)
        turn = int(shard.turns[k, 1]) if shard.turns is not None else 0
        why = (
            NOT_SENT_AT_STOP
            if self.stopping
            else f"{NOT_SENT_AFTER_FAILED_TURN} (turn {turn}: {error or 'failed'})"
        )
        self._account_unsent(shard, dropped, why)
        if dropped and self.gate is not None:
            self.gate.settle()
        if self.timer is not None:
            self.timer.wake()

    def _on_stale_connection(self) -> None:
        """Count a re-send; a few in a row without a pooled connection that answered mean the
        server closes after every response, so connections are no longer pooled. A pre-opened
        connection that had never carried a request says nothing of that: the server closed it
        idle (its keep-alive timeout ran out before t0 or as the run began)."""
        self.connections.resent += 1
        if TOOK_PREOPENED.get():
            return
        self.stale_streak += 1
        if self.stale_streak >= STALE_STREAK_LIMIT and self.connector is not None:
            self.connector.reuse = False
            self.connections.reuse_stopped = True

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
        if self.conversations is not None:
            return self.conversations.due_count(now)
        if self.blocks is not None:
            return self.blocks.due_count(now, self.released)
        return max(0, int(np.searchsorted(self.shard.scheduled_ns, now, "right")) - self.released)

    def _send_demand(self) -> None:
        self.demand_pending = False
        gate = self.gate
        if gate is None:
            return
        waiting = self._due_unsent() if gate.waiters else 0
        gate.demand_reported = waiting > 0
        message = self.codec.encode(Kind.DEMAND, returned=gate.take_returned(), waiting=waiting)
        self.sock.send_multipart(message, copy=False)  # queued at once; nothing to wait for

    def _account_unsent(self, shard: Shard, ks: Iterable[int], reason: str) -> None:
        self._account_unsent_indices((int(shard.indices[k]) for k in ks), reason)

    def _account_unsent_indices(self, indices: Iterable[int], reason: str) -> None:
        for index in indices:
            self.errors[index] = reason
            self.rows.append(record(index=index))

    async def _flush(self) -> None:
        if self.rows:
            await self._send(self._records_message())

    def _records_message(self) -> list[bytes | memoryview]:
        """The RECORDS message of the requests finished since the last one."""
        rows, events, errors, texts = self.rows, self.events, self.errors, self.texts
        self.rows, self.events, self.errors, self.texts = [], array("q"), {}, {}
        return records_message(self.codec, rows, events.tobytes(), errors, texts)

    async def _flush_periodically(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await self._flush()
            await self._send_progress()
            self.link.check()
            if self.link.remote and perf_counter_ns() - self.last_sent_ns > ALIVE_AFTER_NS:
                await self._send(self.codec.encode(Kind.ALIVE))

    async def _send_progress(self) -> None:
        """PROGRESS: the token events the requests in flight have received, when it changed
        (one sum over them per flush; nothing per read)."""
        events = sum(len(r.stream.event_ns) for r in self.open.values())
        if events != self.progress_sent or self.released != self.progress_released:
            self.progress_sent, self.progress_released = events, self.released
            await self._send(
                self.codec.encode(Kind.PROGRESS, events=events, released=self.released)
            )

    async def _listen(self, tasks: set[asyncio.Task[None]]) -> None:
        """Handle the coordinator's messages during the run (STOP) and the loop-lag probes."""
        loop = asyncio.get_running_loop()
        probe = self.probe
        if probe is not None:
            loop.add_reader(probe.fileno(), self._on_probe)
        # The kernel's timer, every worker: the coordinator's probes thin out in bursts.
        own_probe = LoopProbe(loop, self.loop_lag_ns)
        try:
            await self._listen_for_stop(tasks)
        finally:
            if probe is not None:
                loop.remove_reader(probe.fileno())
            if own_probe is not None:
                own_probe.close()

    def _on_probe(self) -> None:
        """Each probe's age when the loop gets to it: the delay an arriving chunk's stamp sees."""
        now = perf_counter_ns()
        assert self.probe is not None
        while True:
            try:
                sent = decode_probe(self.probe.recv(64), self.codec.probe_token)
            except BlockingIOError:
                return
            if sent is not None:
                self.loop_lag_ns.append(now - sent)

    async def _listen_for_stop(self, tasks: set[asyncio.Task[None]]) -> None:
        while True:
            kind, fields, frames = await self._receive(watch_parent=False)
            if kind is Kind.CREDITS and self.gate is not None:
                self.gate.set_lend(fields["lend"])
                self.gate.grant(fields["grant"])
            elif kind is Kind.TOPUP and self.blocks is not None and self.shard is not None:
                self.blocks.append(decode_requests(self.shard.config, frames), fields["last"])
                self.topups += 1
                self.more.set()
            elif kind is Kind.STOP:
                self.stopping = True
                self.more.set()  # a dispatcher waiting for a block sees the stop
                if self.timer is not None:
                    self.timer.wake()
                if self.gate is not None:
                    self.gate.wake_all()  # a dispatcher waiting for a credit sees the stop
                for task in list(tasks):
                    task.cancel()

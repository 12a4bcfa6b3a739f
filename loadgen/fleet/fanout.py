"""Fan-out: start the workers, hand each its shard, start them together, collect records.

Workers are local processes, Ray actors (loadgen/fleet/ray_placement.py) or workers that join by
hand (``loadgen worker --connect``), all on one channel (loadgen/fleet/worker_channel.py). Before
t0 each worker's clock offset is estimated, and each is told t0 in its own clock.

Accounting is central and lives here: ``collect`` returns exactly one record per request.
A request a worker reported is taken as reported; a request whose worker died or was lost, or
that was never reported for any other reason, becomes a failed record with the reason as its
error (the ``Collector``, loadgen/fleet/collector.py). A lost worker's credits of the cap go
back to the others. Each batch of records goes, screened, to the collector and the observers
the session passes in (the records file, the live view, fail fast as a stop rule), one message
kind to one handler.

Over 500 lines because ``WorkerPool`` is the one owner of the channel through a run's
phases (hello, clocks, shards, start, collect, stop), each of which must also survive a worker
that vanishes or misbehaves; the channel, clocks, credits, placement, the screening of
records (loadgen/fleet/screen_records.py) and the collector are their own modules already.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from time import perf_counter_ns
from typing import TYPE_CHECKING

import numpy as np

from loadgen.fleet.channel_dir import private_directory
from loadgen.fleet.collector import BatchObserver, Collector, RecordBatch
from loadgen.fleet.credit_pool import CreditMessage, CreditPool
from loadgen.fleet.screen_records import screen_batch
from loadgen.fleet.topups import BlockPart, TopUps, wait_line
from loadgen.fleet.worker_channel import LOCAL, REMOTE, Listen, Member, WorkerChannel, join_hint
from loadgen.fleet.worker_spawn import start_without_main
from loadgen.records.collected import Collected
from loadgen.records.redact import redact_url
from loadgen.server.retry import READY_CHECK_HINT
from loadgen.terminal import printable
from workers.keys import new_keys
from workers.protocol import (
    NOT_SENT_AT_DEADLINE,
    NOT_SENT_AT_STOP,
    NOT_SENT_PREFIX,
    RECORD_DTYPE,
    UNSENT_ROW,
    Codec,
    ConnectionStats,
    Kind,
    ProtocolError,
    WorkerConfig,
    decode_records,
    encode_probe,
    shard_message,
    topup_message,
    worker_identity,
)
from workers.worker import DISMISSED, run_worker

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from loadgen.fleet.ray_placement import RayPlacement

START_LEAD_NS = 50_000_000  # t0 is this far after START is sent, so every worker has it in time
POLL_MS = 100
TOPUP_POLL_MS = 20  # --duration: how often a block's turn is looked at while nothing comes
PING_INTERVAL_NS = 10_000_000  # loop-lag probes: every 10 ms to every worker
STOP_GRACE_S = 5.0  # after STOP, how long a worker may take to report before it is killed
JOIN_TIMEOUT_S = 120.0  # how long local and Ray workers may take to say HELLO
REMOTE_JOIN_TIMEOUT_S = 600.0  # how long workers joining by hand may take


class FanoutError(Exception):
    """The run could not start or continue; the message says why, ``exit_code`` how to exit
    (128 + the signal's number when a stop signal ended the wait for workers)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class UnreachableServer(FanoutError):
    """No worker could open a connection to the server: it is down or not where it was said."""


@dataclass
class _Collecting:
    """The collect loop's state: the workers still running, who hears of each batch."""

    pending: set[int]
    collector: Collector
    observers: list[BatchObserver]  # the collector first
    probe_ports: dict[int, int]
    credit_pool: CreditPool | None = None
    topups: TopUps | None = None  # --duration: the blocks that follow the shards
    # each worker's TOPUPs sent, by their block's first request: those its DONE does not count
    # reached it after it had accounted for its requests, and are the coordinator's to count
    topup_bases: dict[int, list[int]] = field(default_factory=dict)
    stop_deadline: float | None = None  # set when STOP goes out
    next_ping_ns: int = field(default_factory=perf_counter_ns)


@dataclass
class ShardPlan:
    """One worker's part of the run."""

    config: WorkerConfig
    bodies: list[bytes]
    indices: np.ndarray
    scheduled_ns: np.ndarray
    max_events: np.ndarray | None = None  # each request's output guard (0: none)
    turns: np.ndarray | None = None  # --multi-turn: [N, 3] conversation, turn, think ns


class WorkerPool:
    """The run's workers behind one ROUTER socket, private to this run.

    Local workers connect over ``ipc://`` in a fresh directory only this user can enter
    (0700): no other local user can connect to it. Every message carries the run's token
    (``Codec``), which local workers get when they are spawned and remote ones in their key;
    ``listen`` adds workers that join by hand over CurveZMQ ``tcp://``, ``ray`` places the
    workers as Ray actors instead of local processes. A message that fails the checks is
    dropped with a warning, never acted on.
    """

    def __init__(
        self,
        num_workers: int,
        reusable: bool = False,
        listen: Listen | None = None,
        ray: RayPlacement | None = None,
    ) -> None:
        self.ray = ray
        if ray is not None:
            coordinator_keys, self.ray_keys = new_keys()
            listen = Listen(ray.connect(), 0, 0, coordinator_keys)
        self.codec = Codec(listen.keys.token) if listen is not None else Codec.new()
        self.run_dir = private_directory()
        self.endpoint = f"ipc://{self.run_dir}/coordinator"
        self.channel = WorkerChannel(self.endpoint, self.codec)
        self.tcp_endpoint = ""
        self.remote_workers = listen.remote_workers if listen is not None else 0
        if listen is not None:
            self.tcp_endpoint = self.channel.listen_tcp(
                listen.host, listen.port, listen.keys, self.remote_workers
            )
        self.local_workers = 0 if ray is not None else num_workers
        spawn = multiprocessing.get_context("spawn")
        self.processes = [
            spawn.Process(
                target=run_worker,
                args=(self.endpoint, w, self.codec.token, os.getpid(), reusable),
                name=f"loadgen-worker-{w}",
                daemon=True,
            )
            for w in range(self.local_workers)
        ]
        for w, process in enumerate(self.processes):
            self.channel.add(Member(w, worker_identity(w), LOCAL, process=process))
        self.placed = num_workers  # local processes or Ray actors
        self.num_workers = num_workers + self.remote_workers
        self.stop_requested = False
        self.stop_signal = signal.SIGINT  # what asked the run to stop (its exit code)
        self.probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.probe.setblocking(False)

    def start(self) -> None:
        """Launch the workers (they import and connect while the caller goes on)."""
        start_without_main(self.processes)  # a script without a __main__ guard, stdin, a notebook
        if self.ray is not None:
            for member in self.ray.start(self.tcp_endpoint, self.ray_keys, self.local_workers):
                self.channel.add(member)
        if self.tcp_endpoint and self.remote_workers:
            log.info(join_hint(self.tcp_endpoint, self.remote_workers))

    @property
    def hellos(self) -> dict[int, dict]:
        """Each worker's HELLO, by worker id, for those that have said it."""
        return {w: m.hello for w, m in self.channel.members.items() if m.hello is not None}

    @property
    def local_pids(self) -> list[int]:
        """The local worker processes' pids, in worker order."""
        return [process.pid or 0 for process in self.processes]

    def hosts(self) -> list[dict]:
        """Every worker's placement, host and clock offset, for the result JSON."""
        return [self.channel.members[w].describe() for w in sorted(self.channel.members)]

    def request_stop(self, signum: int = signal.SIGINT) -> None:
        """Ask the run to stop (signal ``signum`` came): in-flight requests are cancelled and
        reported as failed."""
        if not self.stop_requested:
            self.stop_signal = signal.Signals(signum)
        self.stop_requested = True

    @property
    def exit_code(self) -> int:
        """The exit code of a run stopped by a signal: 128 + its number (130 for Ctrl-C)."""
        return 128 + int(self.stop_signal)

    async def _recv(self, timeout_ms: int) -> tuple[int, Kind, dict, list[bytes]] | None:
        return await self.channel.recv(timeout_ms)

    async def _send(self, worker: int, parts: list) -> bool:
        return await self.channel.send(worker, parts)

    def _drop(self, why: str) -> None:
        self.channel.drop(why)

    def _check_stop(self, waiting_for: str, wanted: set[int]) -> None:
        """A stop signal while the run waits for its workers ends the wait at once."""
        if self.stop_requested:
            joined = len(wanted & self.hellos.keys())
            raise FanoutError(
                f"interrupted by {self.stop_signal.name} while waiting for {waiting_for}: "
                f"{joined} of {len(wanted)} workers had joined",
                self.exit_code,
            )

    def _lost(self, pending: set[int]) -> dict[int, str]:
        return {w: why for w in pending if (why := self.channel.lost(w)) is not None}

    async def _await_all(
        self, kind: Kind, workers: set[int], timeout_s: float, early: dict[int, dict]
    ) -> dict[int, dict]:
        """Wait until every worker in ``workers`` has sent ``kind`` (or had, in ``early``);
        fail on loss or timeout."""
        replies = {w: fields for w, fields in early.items() if w in workers}
        pending = set(workers) - replies.keys()
        deadline = time.monotonic() + timeout_s
        self.channel.listening()
        while pending:
            self._check_stop(f"the workers' {kind.value}", set(workers))
            got = await self._recv(POLL_MS)
            if got is not None:
                worker, got_kind, fields, _ = got
                if got_kind is Kind.FATAL:
                    raise FanoutError(f"worker {worker} failed: {printable(fields['message'])}")
                if got_kind is kind and worker in pending:
                    pending.discard(worker)
                    replies[worker] = fields
                continue
            if lost := self._lost(pending & self.channel.members.keys()):
                raise FanoutError(f"before {kind.value}: " + "; ".join(lost.values()))
            if time.monotonic() > deadline:
                raise FanoutError(f"workers {sorted(pending)} did not send {kind.value} in time")
        return replies

    async def _await_joined(self, count: int, early: dict[int, dict] | None = None) -> None:
        """Wait until the first ``count`` workers (those with a shard) have joined; a READY
        that comes meanwhile (of a worker with its shard) is kept in ``early``."""
        wanted = set(range(count))
        if wanted <= self.hellos.keys():
            return
        remote = wanted - set(range(self.placed))
        timeout = REMOTE_JOIN_TIMEOUT_S if remote else JOIN_TIMEOUT_S
        deadline = time.monotonic() + timeout
        self.channel.listening()
        while not wanted <= self.hellos.keys():
            self._check_stop("--remote-workers to join" if remote else "the workers", wanted)
            got = await self._recv(POLL_MS)
            if got is not None and got[1] is Kind.FATAL:
                raise FanoutError(f"worker {got[0]} failed: {printable(got[2]['message'])}")
            if got is not None and got[1] is Kind.READY and early is not None:
                early[got[0]] = got[2]
            lost = self._lost(wanted & self.channel.members.keys())
            for w in [w for w in lost if self.channel.members[w].placement == REMOTE]:
                self.channel.forget(w)  # joined by hand and gone: its place is open again
                del lost[w]
            if lost:
                raise FanoutError("before the run: " + "; ".join(lost.values()))
            if time.monotonic() > deadline:
                missing = sorted(wanted - self.hellos.keys())
                joined = len(remote) - len([w for w in missing if w >= self.placed])
                where = f" ({joined} of {len(remote)} remote workers joined)" if remote else ""
                raise FanoutError(f"workers {missing} did not join within {timeout:.0f} s{where}")

    async def run(
        self,
        plans: list[ShardPlan],
        num_requests: int,
        max_concurrency: int | None = None,
        observers: Sequence[BatchObserver] = (),
        topups: TopUps | None = None,
        rows_in_file: bool = False,
    ) -> Collected:
        """Send the shards, start all workers at one instant t0, and collect every record;
        with ``topups`` (--duration), the blocks that follow them (loadgen/fleet/topups.py).

        With ``max_concurrency`` the cap is lent out as credits (loadgen/fleet/credit_pool.py).
        Every batch of records goes to the collector and then to ``observers`` in order as it
        arrives (loadgen/fleet/collector.py), each told t0 once START is sent; an observer
        that asks to stop (fail fast's rule) stops the run as ``request_stop`` does. With
        ``rows_in_file`` an observer (the records file) keeps the rows and their token events:
        the collected records have none until they are read back (loadgen/fleet/collector.py).
        """
        workers = set(range(len(plans)))
        credit_pool = (
            CreditPool(max_concurrency, [len(plan.indices) for plan in plans])
            if max_concurrency
            else None
        )
        owner = np.full(num_requests, -1, dtype=np.int16)  # which worker sends each request
        for w, plan in enumerate(plans):
            owner[plan.indices] = w
        sent: set[int] = set()
        early: dict[int, dict] = {}  # READY of workers with a shard, while another is awaited
        while len(sent) < len(plans):  # a worker gone before its shard: wait for another
            await self._await_joined(len(plans), early)
            for w in sorted(workers - sent):
                if await self._send(w, _shard(self.codec, plans[w])):
                    sent.add(w)
                elif self.channel.members[w].placement == REMOTE:
                    self.channel.forget(w)
                else:
                    why = self.channel.lost(w) or f"worker {w} could not be sent its shard"
                    raise FanoutError(f"before the run: {why}")
        probe_ports = {w: hello["probe_port"] for w, hello in self.hellos.items()}
        ready = await self._await_all(Kind.READY, workers, timeout_s=600, early=early)
        connections = sum(r["connections"] for r in ready.values())
        if connections == 0 and any(r["connect_error"] for r in ready.values()):
            error = next(r["connect_error"] for r in ready.values() if r["connect_error"])
            url = redact_url(plans[0].config.url)
            raise UnreachableServer(
                f"cannot connect to the server at {url}: {error}; is it up? {READY_CHECK_HINT}"
            )
        if short := preopen_shortfall(plans, ready):
            log.warning(f"warning: {short}")
        try:
            await self.channel.sync_clocks(workers, self._before_start)
        except OSError as exc:
            raise FanoutError(str(exc)) from None
        t0_ns = perf_counter_ns() + START_LEAD_NS
        t0_wall = datetime.now() + timedelta(microseconds=(t0_ns - perf_counter_ns()) / 1e3)
        for w in workers:
            credits = credit_pool.initial[w] if credit_pool is not None else 0
            t0_worker = t0_ns + self.channel.offset_ns(w)
            await self._send(w, self.codec.encode(Kind.START, t0_ns=t0_worker, credits=credits))
        collector = Collector(workers, owner, rows_in_file)
        run = _Collecting(set(workers), collector, [collector, *observers], probe_ports)
        run.credit_pool = credit_pool
        run.topups = topups
        for observer in run.observers:
            observer.start(t0_ns, t0_wall.isoformat(), connections)
        if topups is not None:
            topups.start(t0_ns)
        try:
            await self._collect(run)
        finally:
            if topups is not None:
                await topups.close()
        if topups is not None and (
            line := wait_line(collector.block_waits, collector.block_wait_ns, len(plans))
        ):
            log.warning(line)
        collected = collector.collected(t0_ns, connections, interrupted=self.stop_requested)
        collected.t0_wall = t0_wall.isoformat()
        collected.hosts = self.hosts()
        return collected

    async def _before_start(self, worker: int, kind: Kind, fields: dict, _: list) -> None:
        """A message other than PONG while clocks are synchronized: a worker's failure."""
        if kind is Kind.FATAL:
            raise FanoutError(f"worker {worker} failed: {printable(fields['message'])}")

    async def _collect(self, run: _Collecting) -> None:
        """Hand each message to its kind's handler until every worker is done, failed or lost,
        or, after a stop, past STOP_GRACE_S; then tell the observers the records are in."""
        handlers = {
            Kind.RECORDS: self._on_records,
            Kind.PROGRESS: self._on_progress,
            Kind.DEMAND: self._on_demand,
            Kind.DONE: self._on_done,
            Kind.FATAL: self._on_fatal,
        }
        while run.pending:
            if self.stop_requested and run.stop_deadline is None:
                await self._send_stop(run)
            if run.stop_deadline is not None and time.monotonic() > run.stop_deadline:
                self._kill_unstopped(run)
                break
            self._ping(run)
            wait_ms = max(1, (run.next_ping_ns - perf_counter_ns()) // 1_000_000)
            if run.topups is not None and run.stop_deadline is None:
                await self._top_up(run)
                wait_ms = min(wait_ms, TOPUP_POLL_MS)
            got = await self._recv(wait_ms)
            if got is None:
                await self._on_silence(run)
                continue
            worker, kind, fields, frames = got
            handler = handlers.get(kind)
            if handler is not None:
                await handler(run, worker, fields, frames)
        for observer in run.observers:
            observer.end()

    async def _send_stop(self, run: _Collecting) -> None:
        """A stop was asked: STOP to every worker still running, which has STOP_GRACE_S."""
        run.stop_deadline = time.monotonic() + STOP_GRACE_S
        for w in run.pending:  # a send never raises: one that fails makes the worker lost
            await self._send(w, self.codec.encode(Kind.STOP, reason="interrupted"))

    def _kill_unstopped(self, run: _Collecting) -> None:
        """Past the grace after STOP: kill the local workers still running, name them all."""
        for w in run.pending:
            if w < len(self.processes):
                self.processes[w].kill()  # SIGKILL: a stopped worker ignores SIGTERM
            run.collector.problem(f"worker {w} did not stop within {STOP_GRACE_S:.0f} s")

    def _ping(self, run: _Collecting) -> None:
        """Every PING_INTERVAL_NS, a loop-lag probe to each local worker still running."""
        if perf_counter_ns() < run.next_ping_ns:
            return
        run.next_ping_ns = perf_counter_ns() + PING_INTERVAL_NS
        for w in run.pending:
            if not run.probe_ports.get(w):
                continue  # a remote worker samples its loop lag itself
            with contextlib.suppress(OSError):  # a full buffer drops a probe, no more
                self.probe.sendto(
                    encode_probe(perf_counter_ns(), self.codec.probe_token),
                    ("127.0.0.1", run.probe_ports[w]),
                )

    async def _on_silence(self, run: _Collecting) -> None:
        """Nothing came: a worker found lost is done, its requests fail, its credits go back."""
        for w, why in self._lost(run.pending).items():
            run.pending.discard(w)
            run.collector.lost(w, why)
            self.channel.members[w].lost = why
            log.warning(f"warning: {why}; its requests are failed records")
            await self._credits_back(run, w)

    async def _on_records(self, run: _Collecting, worker: int, fields: dict, frames: list) -> None:
        """A RECORDS batch: screened, then to the collector and the observers in order."""
        try:
            decoded = decode_records(fields, frames)
        except ProtocolError as exc:
            self._drop(f"worker {worker}'s records: {exc}")
            return
        # Rows of another shard, or of a request already reported, never go on.
        owner, seen = run.collector.look_up(worker, decoded[0]["index"])
        decoded, dropped = screen_batch(worker, *decoded, owner, seen)
        for why in dropped:
            self._drop(why)
        if not len(decoded[0]):
            return
        batch = RecordBatch(worker, *decoded)
        stop = False
        for observer in run.observers:  # each one, also after one has asked to stop
            stop = observer.batch(batch) or stop
        if stop:
            self.stop_requested = True  # STOP goes out at the top of the loop

    async def _on_progress(self, run: _Collecting, worker: int, fields: dict, _: list) -> None:
        """A worker's token events of answers still streaming: to the observers."""
        if worker in run.pending and fields["events"] >= 0:
            for observer in run.observers:
                observer.progress(worker, fields["events"])
        if run.topups is not None and worker in run.pending:
            run.topups.on_progress(worker, fields["released"])

    async def _top_up(self, run: _Collecting) -> None:
        """--duration: the next block to every worker, when one is about to run out; its
        requests join the run's."""
        assert run.topups is not None
        block = run.topups.poll(run.pending)
        if block is None:
            return
        run.collector.extend(block.owner)
        scheduled = np.concatenate([part.scheduled_ns for part in block.parts])
        for observer in run.observers[1:]:
            observer.added(np.sort(scheduled))
        for w, part in enumerate(block.parts):
            if w in run.pending and (len(part.indices) or block.last):
                await self._send(w, _topup(self.codec, part, block.last))
                run.topup_bases.setdefault(w, []).append(block.base)
            elif len(part.indices):  # its worker is gone: never sent, not failed
                why = f"{NOT_SENT_PREFIX} worker {w} was gone when its block came"
                self._not_sent(run, w, part.indices, why)

    def _not_taken(self, run: _Collecting, worker: int, taken: int) -> None:
        """The requests of the TOPUPs ``worker`` had not taken when it said DONE (they came
        after its deadline, or its stop): never sent, as its own batch would say."""
        bases = run.topup_bases.get(worker, [])[taken:]
        if not bases:
            return
        collector = run.collector
        after = np.arange(bases[0], collector.size, dtype=np.int64)
        mine = after[(collector.owner_of(after) == worker) & ~collector.received(after)]
        if len(mine):
            why = NOT_SENT_AT_STOP if self.stop_requested else NOT_SENT_AT_DEADLINE
            self._not_sent(run, worker, mine, why)

    def _not_sent(self, run: _Collecting, worker: int, indices: np.ndarray, why: str) -> None:
        """Requests of a block that ``worker`` never sent (it was gone, or done, when the block
        came): reported as never sent, as its own batch would (to the collector and every
        observer)."""
        rows = np.full(len(indices), np.array(UNSENT_ROW, dtype=RECORD_DTYPE))
        rows["index"] = indices
        batch = RecordBatch(
            worker, rows, np.zeros(0, np.int64), dict.fromkeys(indices.tolist(), why), {}
        )
        for observer in run.observers:
            observer.batch(batch)

    async def _on_demand(self, run: _Collecting, worker: int, fields: dict, _: list) -> None:
        """A worker wants credits, or returns some: the credit pool's answer."""
        if run.credit_pool is not None and worker in run.pending:
            messages = run.credit_pool.on_demand(worker, fields["returned"], fields["waiting"])
            await self._send_credits(messages, run.pending)

    async def _on_done(self, run: _Collecting, worker: int, fields: dict, frames: list) -> None:
        """A worker is done: its connections, loop lags and CPU time; its credits go back."""
        try:
            stats = ConnectionStats(**fields["connections"])
            lags = np.frombuffer(frames[0], dtype="<i8").copy()
        except (TypeError, ValueError) as exc:
            self._drop(f"worker {worker}'s DONE: {exc}")
            return
        run.pending.discard(worker)
        self._not_taken(run, worker, fields["topups"])
        for observer in run.observers:
            observer.progress(worker, 0)  # nothing of its own is streaming any more
        await self._credits_back(run, worker)  # a finished worker's, for those still busy
        run.collector.done(worker, stats, lags, fields)

    async def _on_fatal(self, run: _Collecting, worker: int, fields: dict, _: list) -> None:
        """A worker failed: its credits go back as a finished one's, its requests fail."""
        run.pending.discard(worker)
        await self._credits_back(run, worker)
        run.collector.problem(f"worker {worker} failed: {printable(fields['message'])}")

    async def _credits_back(self, run: _Collecting, worker: int) -> None:
        """``worker`` holds no credits any more: the pool lends them to those still running."""
        if run.credit_pool is not None:
            await self._send_credits(run.credit_pool.on_lost(worker), run.pending)

    async def _send_credits(self, messages: list[CreditMessage], pending: set[int]) -> None:
        """Send the credit pool's CREDITS messages to the workers still running."""
        for message in messages:
            if message.worker in pending:
                # A worker that has just finished may be gone (the send fails); it needs none.
                await self._send(
                    message.worker,
                    self.codec.encode(Kind.CREDITS, grant=message.grant, lend=message.lend),
                )

    def alive(self) -> bool:
        """Whether every worker still runs (a reusable pool can serve another run)."""
        return not self._lost(set(self.channel.members))

    def next_run(self, workers: int) -> None:
        """Make a reusable pool ready for its next run, after one that may have failed fast,
        which uses its first ``workers`` processes (as many as that run alone would start)."""
        self.stop_requested = False
        self.num_workers = min(workers, self.placed) + self.remote_workers

    async def dismiss(self, placement: str | None = None) -> None:
        """Tell reusable workers (of ``placement``, or all) there is no next run: they exit
        (``close`` waits for local ones)."""
        for w, member in self.channel.members.items():
            if member.hello is not None and placement in (None, member.placement):
                await self._send(w, self.codec.encode(Kind.STOP, reason=DISMISSED))

    def close(self, graceful: bool = True) -> None:
        """Stop the workers and release the socket; print the counts of capped warnings.

        After a finished run the workers are exiting on their own and are given time to; when
        the run never got that far they may still be importing, so they are killed at once.
        Remote workers serve one run after another and are dismissed; Ray's actors are killed.
        """
        for process in self.processes:
            if graceful and process.is_alive():
                process.join(timeout=2)
            if process.is_alive():
                process.kill()  # workers ignore SIGTERM, and a stopped one acts on no other
                process.join(timeout=2)
        told = self.channel.dismiss_remote(self.codec.encode(Kind.STOP, reason=DISMISSED))
        if self.ray is not None:
            self.ray.stop()
        self.channel.close(linger_ms=1000 if told else 0)
        self.probe.close()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.channel.warnings.flush()


def preopen_shortfall(plans: list[ShardPlan], ready: dict[int, dict]) -> str:
    """One line when the workers opened fewer connections before t0 than planned (each
    READY's ``connections`` against its plan's ``preopen_connections``), with their reasons;
    "" when every one opened its plan."""
    planned = sum(plan.config.preopen_connections for plan in plans)
    opened = sum(r["connections"] for r in ready.values())
    if opened >= planned:
        return ""
    reasons = sorted({r["preopen_short"] for r in ready.values() if r["preopen_short"]})
    why = f" ({'; '.join(reasons)})" if reasons else ""
    return (
        f"{opened} of the {planned} connections planned were opened before t0{why}; requests "
        "beyond them may open theirs during the run, the handshake inside their TTFT"
    )


def _topup(codec: Codec, part: BlockPart, last: bool) -> list:
    """The TOPUP message of a worker's ``part`` of a block."""
    return topup_message(codec, part.bodies, part.indices, part.scheduled_ns, part.max_events, last)


def _shard(codec: Codec, plan: ShardPlan) -> list:
    """The SHARD message of ``plan``."""
    return shard_message(
        codec,
        plan.config,
        plan.bodies,
        plan.indices,
        plan.scheduled_ns,
        plan.max_events,
        plan.turns,
    )

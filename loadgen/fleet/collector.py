"""Where each RECORDS batch goes as it arrives: the observers, and the collector among them.

The fan-out (loadgen/fleet/fanout.py) screens each batch a worker sends and hands it to its
observers in order, through ``BatchObserver``'s three methods: ``start`` at t0, ``batch`` for
each batch (True asks the run to stop: a stop rule, as fail fast's), ``end`` when the run's
records are all in. The session chooses the others (the records file, the live view, fail
fast); the ``Collector`` is the fan-out's own and always first: it notes each request
reported, keeps what the workers said at DONE or FATAL and what was lost, and assembles the
run's ``Collected``. Where the run has a records file (``rows_in_file``), the file alone
keeps the rows, their token events, errors and texts as they arrive, read back once the run
has ended (loadgen/records/read_back.py), and the collector holds each request's worker and
whether one reported it a block at a time, let go once the block's requests are all
reported (``RequestBlocks``): its memory does not grow with the run. Without a records file
it keeps every row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from loadgen.records.collected import Collected, assemble_events, mark_lost
from loadgen.records.request_blocks import RequestBlocks
from workers.protocol import RECORD_DTYPE, ConnectionStats


@dataclass(frozen=True)
class RecordBatch:
    """One worker's RECORDS batch, screened: its rows (RECORD_DTYPE), their token events, and
    their errors and texts by request index."""

    worker: int
    rows: np.ndarray
    events: np.ndarray
    errors: dict[int, str]
    texts: dict[int, str]


class BatchObserver:
    """Something told of the run's record batches as they arrive; each method does nothing
    unless overridden."""

    def start(self, t0_ns: int, t0_wall: str, connections: int) -> None:
        """The run starts at ``t0_ns`` (``t0_wall`` in wall-clock time) with ``connections``
        open."""

    def batch(self, batch: RecordBatch) -> bool:
        """One batch, as it arrived; True asks the run to stop."""
        return False

    def progress(self, worker: int, events: int) -> None:
        """``worker``'s requests in flight have received ``events`` token events so far."""

    def end(self) -> None:
        """The run's records are all in (or the run gave up on the rest)."""

    def added(self, scheduled_ns: np.ndarray) -> None:
        """A --duration top-up block's requests (their offsets) joined the run."""


class Collector(BatchObserver):
    """One record per request of the run, and what its workers said besides.

    A request no worker reported becomes a failed record whose error says why: its worker was
    lost, or failed, or never said.
    """

    def __init__(
        self,
        workers: Iterable[int],
        owner: np.ndarray,
        rows_in_file: bool = False,
    ) -> None:
        self.workers = sorted(workers)
        # True: the records file keeps the rows (and their events, errors and texts) alone;
        # the run's Collected has none until they are read back (read_back.with_rows).
        self.rows_in_file = rows_in_file
        # Which worker sends each request, and whether one has reported it: a block's let go
        # once each of its requests is reported (a later row of one is a repeat).
        self.requests = RequestBlocks(
            owner=np.asarray(owner, dtype=np.int16), received=np.zeros(len(owner), dtype=bool)
        )
        self.given = {int(w) for w in np.unique(owner)}  # the workers sent any request
        num_requests = self.size = len(owner)
        # Kept in memory only where no records file keeps them:
        self.records = np.zeros(0 if rows_in_file else num_requests, dtype=RECORD_DTYPE)
        self.reported_by = np.full(len(self.records), -1, dtype=np.int16)
        self.batches: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.errors: dict[int, str] = {}
        self.texts: dict[int, str] = {}
        self.problems: list[str] = []
        self.lost_workers: dict[int, str] = {}  # why each lost worker is gone
        self.loop_lag: list[np.ndarray] = []
        self.cpu_ns = dict.fromkeys(self.workers, 0)
        self.wall_ns = dict.fromkeys(self.workers, 0)
        self.stats: list[ConnectionStats] = []
        self.block_waits = 0  # --duration: times a worker waited for its next block
        self.block_wait_ns = 0  # and how long, over all workers

    def extend(self, owner: np.ndarray) -> None:
        """A top-up block's requests join the run (``owner``: each one's worker); the rows
        kept without a records file grow by doubling, so a long run copies each a few times,
        not once per block."""
        need = self.size + len(owner)
        self.requests.add(owner=owner, received=np.zeros(len(owner), dtype=bool))
        self.given.update(int(w) for w in np.unique(owner))
        if not self.rows_in_file and need > len(self.records):
            capacity = max(need, 2 * len(self.records))
            self.records = _grown(self.records, capacity, 0)
            self.reported_by = _grown(self.reported_by, capacity, -1)
        self.size = need

    def owner_of(self, index: np.ndarray) -> np.ndarray:
        """The worker each of requests ``index`` was sent to (-1 where it is not known: none,
        or its block was let go, every request of it reported)."""
        return self.requests.take("owner", index, gone=-1)

    def received(self, index: np.ndarray) -> np.ndarray:
        """Whether a worker has reported each of requests ``index``."""
        return self.requests.take("received", index, gone=True)

    def look_up(self, worker: int, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For ``worker``'s rows of requests ``index``: each one's worker (-1 outside the
        run) and whether a worker reported it before (screen_records.screen_batch). A request
        of a block let go was reported, as each of the block's was: its row is a repeat."""
        index = np.asarray(index, dtype=np.int64)
        if len(index) and int(index.min()) >= 0 and int(index.max()) < self.size:  # (always)
            return self.requests.take("owner", index, gone=worker), self.received(index)
        inside = (index >= 0) & (index < self.size)
        owner = np.full(len(index), -1, dtype=np.int16)
        seen = np.zeros(len(index), dtype=bool)
        owner[inside] = self.requests.take("owner", index[inside], gone=worker)
        seen[inside] = self.received(index[inside])
        return owner, seen

    def batch(self, batch: RecordBatch) -> bool:
        """Note a screened batch's requests as reported; keep its rows, events, errors and
        texts unless the records file does."""
        rows = batch.rows
        self.requests.done(rows["index"], received=True)
        if self.rows_in_file:
            return False
        self.records[rows["index"]] = rows
        self.reported_by[rows["index"]] = batch.worker
        self.batches.append((rows["index"].copy(), rows["n_events"].copy(), batch.events.copy()))
        self.errors.update(batch.errors)
        self.texts.update(batch.texts)
        return False

    def done(self, worker: int, stats: ConnectionStats, lags: np.ndarray, fields: dict) -> None:
        """``worker`` said DONE: its connections, loop lags and CPU time."""
        self.loop_lag.append(lags)
        self.cpu_ns[worker], self.wall_ns[worker] = fields["cpu_ns"], fields["wall_ns"]
        self.block_waits += fields["block_waits"]
        self.block_wait_ns += fields["block_wait_ns"]
        self.stats.append(stats)

    def problem(self, why: str) -> None:
        """A worker failed, or did not stop in time: the run's requests it had not reported
        fail with ``why`` (with every other problem)."""
        self.problems.append(why)

    def lost(self, worker: int, why: str) -> None:
        """``worker`` is gone: its unreported requests fail with ``why``."""
        self.problems.append(why)
        self.lost_workers[worker] = why

    def collected(self, t0_ns: int, connections: int, interrupted: bool) -> Collected:
        """The run's records, one per request, and what the workers said besides (with
        ``rows_in_file``, all but the rows: read_back.with_rows reads them)."""
        size = self.size
        for w in self.workers:
            if w not in self.given:  # an empty shard: its start-up is no run's CPU
                self.cpu_ns[w] = self.wall_ns[w] = 0
        if not self.rows_in_file:
            self.records, self.reported_by = self.records[:size], self.reported_by[:size]
        event_ns, event_offsets = (
            (np.zeros(0, np.int64), np.zeros(0, np.int64))
            if self.rows_in_file
            else assemble_events(self.records["n_events"], self.batches)
        )
        stats = self.stats
        collected = Collected(
            records=self.records,
            event_ns=event_ns,
            event_offsets=event_offsets,
            events_kept=not self.rows_in_file,
            rows_in_file=self.rows_in_file,
            requests=self.requests,
            lost_workers=self.lost_workers,
            errors=self.errors,
            texts=self.texts,
            t0_ns=t0_ns,
            connections=connections,
            worker=self.reported_by,
            worker_problems=self.problems,
            interrupted=interrupted,
            loop_lag_ns=np.concatenate(self.loop_lag) if self.loop_lag else np.zeros(0, np.int64),
            worker_cpu_ns=[self.cpu_ns[w] for w in self.workers],
            worker_wall_ns=[self.wall_ns[w] for w in self.workers],
            connection_stats=ConnectionStats(
                preopened_at_t0=sum(s.preopened_at_t0 for s in stats),
                closed_before_use=sum(s.closed_before_use for s in stats),
                resent=sum(s.resent for s in stats),
                reuse_stopped=any(s.reuse_stopped for s in stats),
            ),
        )
        if not self.rows_in_file:
            mark_lost(collected)
        return collected


def _grown(values: np.ndarray, capacity: int, fill: object) -> np.ndarray:
    """``values`` in a longer array, the rest ``fill``."""
    out = np.zeros(capacity, dtype=values.dtype)
    out[: len(values)] = values
    if fill:
        out[len(values) :] = fill
    return out

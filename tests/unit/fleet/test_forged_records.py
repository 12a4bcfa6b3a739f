"""Forged RECORDS batches: rows of another worker's shard, or of a request already reported (even
with fewer events the second time), are removed with a capped warning before they reach the
collector, and the run's records still assemble (loadgen/fleet/screen_records.py, and the
coordinator's collect loop fed the forged messages)."""

from __future__ import annotations

import asyncio
import signal
from dataclasses import asdict

import numpy as np
import pytest

from loadgen.fleet.collector import BatchObserver, Collector, RecordBatch
from loadgen.fleet.fanout import WorkerPool, _Collecting
from loadgen.fleet.screen_records import screen_batch
from workers.protocol import (
    RECORD_DTYPE,
    ConnectionStats,
    Kind,
    decode_records,
    records_message,
)

OWNER = np.array([0, 1, 0, 1, -1], dtype=np.int16)


def looked_up(batch: np.ndarray, received: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the collector says of the batch's rows (``Collector.look_up``) where OWNER says
    each request's worker and ``received`` which were reported."""
    index = batch["index"].astype(np.int64)
    inside = (index >= 0) & (index < len(OWNER))
    owner = np.full(len(index), -1, dtype=np.int16)
    owner[inside] = OWNER[index[inside]]
    seen = np.zeros(len(index), dtype=bool)
    seen[inside] = received[index[inside]]
    return owner, seen


def rows(*spec: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """A batch of (index, n_events) rows and their events (index * 100 + k, for each k)."""
    batch = np.zeros(len(spec), dtype=RECORD_DTYPE)
    batch["index"] = [i for i, _ in spec]
    batch["n_events"] = [n for _, n in spec]
    batch["success"] = 1
    events = np.array([i * 100 + k for i, n in spec for k in range(n)], dtype=np.int64)
    return batch, events


def test_a_worker_reports_its_own_requests_untouched():
    batch, events = rows((0, 2), (2, 1))
    received = np.zeros(len(OWNER), dtype=bool)
    (kept, kept_events, errors, _), why = screen_batch(
        0, batch, events, {2: "HTTP 500"}, {}, *looked_up(batch, received)
    )
    assert why == []
    assert kept is batch and kept_events is events and errors == {2: "HTTP 500"}


@pytest.mark.parametrize("foreign", [1, 3, 4, 5, -1])
def test_rows_of_another_shard_or_outside_the_run_are_removed(foreign):
    batch, events = rows((0, 2), (foreign, 3), (2, 1))
    received = np.zeros(len(OWNER), dtype=bool)
    (kept, kept_events, errors, texts), why = screen_batch(
        0, batch, events, {foreign: "forged"}, {foreign: "text"}, *looked_up(batch, received)
    )
    assert kept["index"].tolist() == [0, 2]
    assert kept_events.tolist() == [0, 1, 200]
    assert errors == {} and texts == {}
    assert why == [f"worker 0's records of 1 requests that are not in its shard (index {foreign})"]


def test_a_request_reported_again_with_fewer_events_is_removed():
    received = np.zeros(len(OWNER), dtype=bool)
    received[0] = True  # an earlier batch reported request 0 with 2 events
    batch, events = rows((0, 1), (2, 3), (2, 1))  # 0 again, and 2 twice in this batch
    (kept, kept_events, _, _), why = screen_batch(
        0, batch, events, {}, {}, *looked_up(batch, received)
    )
    assert kept["index"].tolist() == [2]
    assert kept_events.tolist() == [200, 201, 202]  # the first report of request 2 stands
    assert why == ["worker 0's records of 2 requests already reported (index 0, 2)"]


def test_errors_for_no_row_of_the_batch_are_removed():
    batch, events = rows((0, 1))
    received = np.zeros(len(OWNER), dtype=bool)
    (_, _, errors, _), why = screen_batch(
        0, batch, events, {0: "ok", 2: "forged"}, {}, *looked_up(batch, received)
    )
    assert errors == {0: "ok"}
    assert why == ["worker 0's records of 1 errors or texts of no row in the batch (index 2)"]


class Forged:
    """Stands in for the channel's ``recv``: hands the collect loop ``messages``, then None."""

    def __init__(self, pool: WorkerPool, messages: list[tuple[int, list]]) -> None:
        self.pool = pool
        self.messages = messages

    async def __call__(self, timeout_ms: int):
        if not self.messages:
            await asyncio.sleep(timeout_ms / 1000)
            return None
        worker, parts = self.messages.pop(0)
        kind, fields, payload = self.pool.codec.decode(parts, from_worker=True)
        return worker, kind, fields, payload


def records(pool: WorkerPool, *spec: tuple[int, int], errors=None) -> list:
    batch, events = rows(*spec)
    return records_message(
        pool.codec, [tuple(r) for r in batch.tolist()], events.tobytes(), errors or {}, {}
    )


def done(pool: WorkerPool) -> list:
    return pool.codec.encode(
        Kind.DONE,
        [np.zeros(0, "<i8").tobytes()],
        cpu_ns=5,
        wall_ns=10,
        connections=asdict(ConnectionStats()),
        block_waits=0,
        block_wait_ns=0,
        topups=0,
    )


def collect(pool: WorkerPool, workers: set[int], owner: np.ndarray, observers=()):
    """The pool's collect loop over what ``pool._recv`` hands it; the run's records."""
    collector = Collector(workers, owner)
    run = _Collecting(set(workers), collector, [collector, *observers], {})
    asyncio.run(pool._collect(run))
    return collector.collected(0, 1, interrupted=pool.stop_requested)


def test_the_collector_survives_forged_and_repeated_records(terminal, monkeypatch, capsys):
    pool = WorkerPool(0)
    try:
        owner = np.array([0, 1, 0, 1, 2], dtype=np.int16)  # worker 2: request 4
        messages = [
            (0, records(pool, (0, 2), (2, 3))),
            (1, records(pool, (0, 1), (1, 2))),  # request 0 is worker 0's
            (0, records(pool, (2, 1))),  # request 2 again, with fewer events
            *[(1, records(pool, (3, 1), (3, 1))) for _ in range(6)],  # and again, six times
            (0, done(pool)),
            (1, done(pool)),
            (2, done(pool)),
        ]
        monkeypatch.setattr(pool, "_recv", Forged(pool, messages))
        monkeypatch.setattr(pool, "_lost", lambda pending: {})
        collected = collect(pool, {0, 1, 2}, owner)
        pool.channel.warnings.flush()
    finally:
        pool.close()
    assert collected.records["index"].tolist()[:4] == [0, 1, 2, 3]
    assert collected.records["n_events"].tolist() == [2, 2, 3, 1, 0]
    assert collected.worker.tolist() == [0, 1, 0, 1, -1]
    starts = collected.event_offsets
    assert collected.event_ns[starts[2] : starts[3]].tolist() == [200, 201, 202]
    assert collected.errors == {4: "lost: no record arrived for this request"}
    err = capsys.readouterr().err
    assert err.count("warning: dropped") == 5  # then counted
    assert "worker 1's records of 1 requests that are not in its shard (index 0)" in err
    assert "worker 0's records of 1 requests already reported (index 2)" in err
    assert "warning: 3 more dropped messages not shown (8 in all)" in err


def test_an_empty_shard_reports_no_cpu(monkeypatch):
    """A worker without requests (a cap below the worker count) waits for t0 and ends: its
    CPU over that instant is no sign of saturation, so it counts as 0."""
    pool = WorkerPool(0)
    try:
        owner = np.array([0, 0], dtype=np.int16)
        messages = [(0, records(pool, (0, 1), (1, 1))), (0, done(pool)), (1, done(pool))]
        monkeypatch.setattr(pool, "_recv", Forged(pool, messages))
        monkeypatch.setattr(pool, "_lost", lambda pending: {})
        collected = collect(pool, {0, 1}, owner)
    finally:
        pool.close()
    assert collected.worker_cpu_ns == [5, 0] and collected.worker_wall_ns == [10, 0]


def test_a_stop_signal_ends_the_wait_for_remote_workers():
    pool = WorkerPool(0)
    try:
        pool.remote_workers = pool.num_workers = 2
        pool.request_stop(signal.SIGTERM)
        with pytest.raises(Exception, match="0 of 2 workers had joined") as raised:
            asyncio.run(pool._await_joined(2))
    finally:
        pool.close()
    assert raised.value.exit_code == 143


def test_decode_records_is_what_the_worker_sends():
    pool = WorkerPool(0)
    try:
        kind, fields, frames = pool.codec.decode(records(pool, (1, 2)), from_worker=True)
    finally:
        pool.close()
    batch, events, _, _ = decode_records(fields, frames)
    assert kind is Kind.RECORDS and batch["index"].tolist() == [1] and events.tolist() == [100, 101]


class Seen(BatchObserver):
    """An observer that keeps what it was told; ``stop_at``: the batch it asks to stop at."""

    def __init__(self, log: list, name: str, stop_at: int = -1) -> None:
        self.log, self.name, self.stop_at, self.batches = log, name, stop_at, 0

    def batch(self, batch: RecordBatch) -> bool:
        self.log.append((self.name, batch.worker, batch.rows["index"].tolist()))
        self.batches += 1
        return self.batches == self.stop_at

    def end(self) -> None:
        self.log.append((self.name, "end"))


def test_each_batch_goes_screened_to_every_observer_in_order_and_a_stop_rule_stops_the_run(
    monkeypatch,
):
    """The collect loop hands each screened batch to the collector and then to each observer
    in order (also after one asked to stop), ends them once; one asking to stop sends STOP."""
    pool = WorkerPool(0)
    log: list = []
    sent: list = []
    try:
        owner = np.array([0, 1, 0, 1], dtype=np.int16)
        messages = [
            (0, records(pool, (0, 1))),
            (1, records(pool, (0, 1), (1, 2))),  # request 0 is worker 0's: screened out
            (0, records(pool, (2, 1))),
            (0, done(pool)),
            (1, done(pool)),
        ]
        monkeypatch.setattr(pool, "_recv", Forged(pool, messages))
        monkeypatch.setattr(pool, "_lost", lambda pending: {})

        async def send(worker: int, parts: list) -> bool:
            sent.append((worker, pool.codec.decode(parts, from_worker=False)[0]))
            return True

        monkeypatch.setattr(pool, "_send", send)
        observers = [Seen(log, "rule", stop_at=2), Seen(log, "view")]
        collected = collect(pool, {0, 1}, owner, observers)
        pool.channel.warnings.flush()
    finally:
        pool.close()
    assert log == [
        ("rule", 0, [0]),
        ("view", 0, [0]),
        ("rule", 1, [1]),
        ("view", 1, [1]),  # told too, though the rule asked to stop at this batch
        ("rule", 0, [2]),
        ("view", 0, [2]),
        ("rule", "end"),
        ("view", "end"),
    ]
    assert pool.stop_requested and collected.interrupted
    assert [kind for _, kind in sent] == [Kind.STOP, Kind.STOP]
    assert collected.records["n_events"].tolist() == [1, 2, 1, 0]


def test_the_collector_fails_what_was_not_reported_naming_why():
    """Requests of a lost worker fail naming it; the rest, with the run's problems."""
    collector = Collector({0, 1, 2}, np.array([0, 1, 1, 2], dtype=np.int16))
    batch, events = rows((0, 2))
    assert not collector.batch(RecordBatch(0, batch, events, {}, {0: "text"}))
    collector.lost(1, "worker 1 was lost: its process exited")
    collector.problem("worker 2 failed: boom")
    collected = collector.collected(7, 3, interrupted=False)
    assert collected.t0_ns == 7 and collected.connections == 3
    assert collected.worker.tolist() == [0, -1, -1, -1]
    assert collected.texts == {0: "text"}
    assert collected.errors == {
        1: "lost: worker 1 was lost: its process exited",
        2: "lost: worker 1 was lost: its process exited",
        3: "lost: worker 1 was lost: its process exited; worker 2 failed: boom",
    }
    assert collected.event_ns.tolist() == [0, 1]


def test_a_block_whose_requests_are_all_reported_is_let_go_and_a_later_row_is_a_repeat():
    collector = Collector([0, 1], np.array([0, 1], dtype=np.int16))
    collector.extend(np.array([1, 0, 1], dtype=np.int16))  # a top-up block: requests 2 to 4
    for worker, index in ((0, 0), (1, 1), (1, 2)):
        batch, events = rows((index, 1))
        collector.batch(RecordBatch(worker, batch, events, {}, {}))
    assert [base for base, _ in collector.requests.held()] == [2]  # block 0: all reported
    batch, events = rows((0, 1), (3, 1), (2, 1), (4, 1), (9, 1))
    owner, seen = collector.look_up(1, batch["index"])
    assert owner.tolist() == [1, 0, 1, 1, -1] and seen.tolist() == [True, False, True, False, False]
    (kept, _, _, _), why = screen_batch(1, batch, events, {}, {}, owner, seen)
    assert kept["index"].tolist() == [4]
    assert why == [
        "worker 1's records of 2 requests that are not in its shard (index 3, 9)",
        "worker 1's records of 2 requests already reported (index 0, 2)",
    ]
    collector.lost(0, "worker 0 vanished")
    collected = collector.collected(0, 1, interrupted=False)
    assert collected.worker.tolist() == [0, 1, 1, -1, -1]
    assert collected.errors == {3: "lost: worker 0 vanished", 4: "lost: worker 0 vanished"}

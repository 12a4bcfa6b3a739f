"""--duration's top-ups in the fan-out: a block goes when a worker is about to run out, the
next one is prepared meanwhile, and the collector's per-request arrays grow with each."""

from __future__ import annotations

import asyncio
from time import perf_counter_ns

import numpy as np

from loadgen.fleet.collector import Collector, RecordBatch
from loadgen.fleet.topups import Block, BlockPart, TopUps, wait_line
from workers.protocol import RECORD_DTYPE


class Source:
    """Blocks of ``size`` requests dealt round-robin to two workers, ``count`` of them."""

    def __init__(self, size: int, count: int | None, due_ns: int = 0) -> None:
        self.size, self.count, self.due_ns = size, count, due_ns
        self.drawn: list[int] = []  # the base of each block drawn
        self.sent_blocks: list[int] = []

    async def next_block(self, base: int) -> Block | None:
        if self.count is not None and len(self.drawn) == self.count:
            return None
        self.drawn.append(base)
        owner = (np.arange(self.size) % 2).astype(np.int16)
        parts = []
        for w in range(2):
            mine = np.flatnonzero(owner == w)
            due = np.full(len(mine), self.due_ns, np.int64)
            parts.append(BlockPart([b"x"] * len(mine), base + mine, due, np.zeros(len(mine))))
        return Block(base, owner, parts, last=False)

    def sent(self, block: Block) -> None:
        self.sent_blocks.append(block.base)


def test_a_block_goes_when_a_worker_is_about_to_run_out() -> None:
    async def scenario() -> None:
        source = Source(8, None)
        topups = TopUps(source, [4, 4], [0, 0], margin=2, lead_s=None, deadline_ns=0)
        topups.start(perf_counter_ns())
        await asyncio.sleep(0)  # blocks 1 and 2 are prepared from t0: two ahead
        assert source.drawn == [8, 16] and topups.poll({0, 1}) is None  # 4 left: not yet
        topups.on_progress(1, 2)  # worker 1 has 2 left
        block = topups.poll({0, 1})
        assert block is not None and block.base == 8 and source.sent_blocks == [8]
        assert topups.given == [8, 8] and topups.next_base == 16
        assert topups.poll({0, 1}) is None  # 6 left each now: not yet
        await asyncio.sleep(0)
        assert source.drawn == [8, 16, 24]  # a block went: another is drawn
        topups.on_progress(1, 1)  # an older PROGRESS: released never goes back
        assert topups.released == [0, 2] and topups.poll({0, 1}) is None
        topups.on_progress(0, 7)
        assert topups.poll({0, 1}).base == 16  # the blocks go in order
        await topups.close()
        assert not topups.queue

    asyncio.run(scenario())


def test_a_block_not_ready_when_due_goes_when_it_is_and_is_counted() -> None:
    async def scenario() -> None:
        gate = asyncio.Event()
        source = Source(4, None)
        draw = source.next_block

        async def slow(base: int) -> Block | None:
            await gate.wait()
            return await draw(base)

        source.next_block = slow  # type: ignore[method-assign]
        topups = TopUps(source, [2, 2], [0, 0], margin=2, lead_s=None, deadline_ns=0)
        topups.start(perf_counter_ns())
        assert topups.poll({0, 1}) is None and topups.poll({0, 1}) is None
        assert topups.waits == 1  # counted once per block
        gate.set()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert topups.poll({0, 1}) is not None
        await topups.close()

    asyncio.run(scenario())


def test_a_paced_worker_gets_its_block_ahead_of_its_last_due_request() -> None:
    async def scenario() -> None:
        source = Source(4, None, due_ns=10**12)
        far = 10**12  # its last request is due in 1000 s: nothing to send yet
        topups = TopUps(source, [2, 2], [far, far], margin=0, lead_s=2.0, deadline_ns=0)
        topups.start(perf_counter_ns())
        await asyncio.sleep(0)
        assert topups.poll({0, 1}) is None
        topups.last_due_ns[0] = 1_000_000_000  # due within 2 s
        assert topups.poll({0, 1}) is not None
        await topups.close()

    asyncio.run(scenario())


def test_the_source_running_out_sends_an_empty_last_block_and_the_deadline_stops_them() -> None:
    async def scenario() -> None:
        source = Source(4, 0)
        topups = TopUps(source, [2, 2], [0, 0], margin=2, lead_s=None, deadline_ns=0)
        topups.start(perf_counter_ns())
        await asyncio.sleep(0)
        last = topups.poll({0, 1})
        assert last is not None and last.last and last.size == 0
        assert all(len(part.indices) == 0 for part in last.parts)
        assert topups.finished and topups.poll({0, 1}) is None
        ended = TopUps(Source(4, None), [2, 2], [0, 0], margin=2, lead_s=None, deadline_ns=1)
        ended.start(perf_counter_ns() - 10)  # past its deadline: nothing more goes
        await asyncio.sleep(0)
        assert ended.poll({0, 1}) is None
        await ended.close()
        # but up to the deadline itself: a worker that took no more is counted by its DONE
        closing = TopUps(Source(4, None), [2, 2], [0, 0], 2, None, deadline_ns=10**9)
        closing.start(perf_counter_ns() - 900_000_000)
        await asyncio.sleep(0)
        assert closing.queue and closing.poll({0, 1}) is not None
        await closing.close()

    asyncio.run(scenario())


def test_the_collector_grows_with_each_block_and_keeps_one_record_per_request() -> None:
    collector = Collector([0, 1], np.array([0, 1], dtype=np.int16))
    for _ in range(2, 40, 3):  # blocks of 3 past the first shard of 2
        collector.extend(np.array([0, 1, 0], dtype=np.int16))
    assert collector.size == 41
    assert collector.owner_of(np.array([0, 1, 2, 40])).tolist() == [0, 1, 0, 0]
    rows = np.zeros(2, dtype=RECORD_DTYPE)
    rows["index"] = [5, 40]
    rows["sent_ns"] = [1, 2]
    collector.batch(RecordBatch(1, rows, np.zeros(0, np.int64), {}, {}))
    collected = collector.collected(0, 0, interrupted=False)
    assert len(collected.records) == 41 and len(collected.worker) == 41
    assert collected.records["index"].tolist() == list(range(41))  # the unreported: lost rows
    assert collected.records["sent_ns"][[5, 40]].tolist() == [1, 2]


def test_the_wait_line_speaks_only_of_waits() -> None:
    assert wait_line(0, 0, 2) == ""
    assert "ran out of requests 3 time(s) before their next block came, 12 ms" in wait_line(
        3, 12_000_000, 2
    )


def test_a_block_that_cannot_be_prepared_ends_the_top_ups_not_the_run(caplog) -> None:
    async def scenario() -> None:
        source = Source(4, None)

        async def broken(base: int) -> Block | None:
            raise ValueError("the server's /tokenize went away")

        source.next_block = broken  # type: ignore[method-assign]
        topups = TopUps(source, [2, 2], [0, 0], margin=2, lead_s=None, deadline_ns=0)
        topups.start(perf_counter_ns())
        await asyncio.sleep(0)
        last = topups.poll({0, 1})
        assert last is not None and last.last and last.size == 0 and topups.finished
        await topups.close()

    asyncio.run(scenario())
    assert "could not be prepared (ValueError: the server's /tokenize went away)" in caplog.text


def test_a_block_dealt_to_a_worker_that_is_gone_is_never_sent_not_failed(monkeypatch) -> None:
    from loadgen.fleet.fanout import WorkerPool, _Collecting

    pool = WorkerPool(0)
    sent: list[tuple[int, list]] = []

    async def send(worker: int, parts: list) -> bool:
        sent.append((worker, parts))
        return True

    monkeypatch.setattr(pool, "_send", send)
    try:

        async def scenario() -> Collector:
            owner = np.array([0, 1], dtype=np.int16)
            collector = Collector([0, 1], owner)
            run = _Collecting({0}, collector, [collector], {})  # worker 1 is gone
            run.topups = TopUps(Source(4, None), [1, 1], [0, 0], 2, None, deadline_ns=0)
            run.topups.start(perf_counter_ns())
            await asyncio.sleep(0)
            await pool._top_up(run)
            await run.topups.close()
            return collector

        collector = asyncio.run(scenario())
    finally:
        pool.close()
    assert [w for w, _ in sent] == [0]  # one TOPUP, to the worker still running
    collected = collector.collected(0, 0, interrupted=False)
    assert len(collected.records) == 6
    gone = "not sent: worker 1 was gone when its block came"
    lost = "lost: no record arrived for this request"  # nothing came from worker 0 here
    assert collected.errors == {0: lost, 1: lost, 2: lost, 3: gone, 4: lost, 5: gone}


def test_a_block_a_worker_took_no_more_when_it_said_done_is_not_sent_at_the_deadline(
    monkeypatch,
) -> None:
    from loadgen.fleet.fanout import WorkerPool, _Collecting

    pool = WorkerPool(0)

    async def send(worker: int, parts: list) -> bool:
        return True

    monkeypatch.setattr(pool, "_send", send)
    done = {"cpu_ns": 0, "wall_ns": 0, "block_waits": 0, "block_wait_ns": 0,
            "connections": {"preopened_at_t0": 0, "closed_before_use": 0, "resent": 0,
                            "reuse_stopped": False}}  # fmt: skip
    try:

        async def scenario() -> Collector:
            owner = np.array([0, 1], dtype=np.int16)
            collector = Collector([0, 1], owner)
            run = _Collecting({0, 1}, collector, [collector], {})
            run.topups = TopUps(Source(4, None), [1, 1], [0, 0], 2, None, deadline_ns=0)
            run.topups.start(perf_counter_ns())
            await asyncio.sleep(0)
            await pool._top_up(run)  # requests 2..5: 2 and 4 to worker 0, 3 and 5 to worker 1
            await run.topups.close()
            lag = [np.zeros(0, np.int64).tobytes()]
            await pool._on_done(run, 0, done | {"topups": 1}, lag)  # took its TOPUP
            await pool._on_done(run, 1, done | {"topups": 0}, lag)  # done before it came
            return collector

        collector = asyncio.run(scenario())
    finally:
        pool.close()
    collected = collector.collected(0, 0, interrupted=False)
    lost = "lost: no record arrived for this request"  # nothing came from the workers here
    late = "not sent: --duration was up before this request's turn"
    assert collected.errors == {0: lost, 1: lost, 2: lost, 3: late, 4: lost, 5: late}

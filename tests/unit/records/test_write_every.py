"""A run's records file writes the batches of a second as one (``write_every_s``): the same
rows, events, errors and texts read back, in fewer batches; bounded in rows and events; kept
in memory on a full disk; written by the session's observer when its second is up."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pyarrow.ipc as ipc
import pytest
from test_records_file import collected_of, end, events, rows, start

from loadgen.fleet.collector import RecordBatch
from loadgen.records import arrow_file
from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.event_source import materialized
from loadgen.records.read import read_records
from loadgen.session.records import ToRecordsFile

N = 6


def writer(path: Path, write_every_s: float) -> RecordsWriter:
    out = RecordsWriter(
        str(path),
        start(),
        scheduled_ns=np.arange(N, dtype=np.int64) * 1_000_000,
        input_tokens=np.full(N, 9, dtype=np.int64),
        input_sequences=np.ones(N, dtype=np.int64),
        request_id_prefix="bench-abc-",
        write_every_s=write_every_s,
    )
    out.start(123_456, "2026-12-03T10:00:00.000001", connections=8)
    return out


BATCHES = [  # (worker, rows, errors, texts): requests 2 and 5 never reported
    (0, rows([3, 0], 4), {0: "boom"}, {}),
    (1, rows([4], 2), {}, {4: "some text"}),
    (0, rows([1], 3), {}, {}),
]


def finished(out: RecordsWriter) -> None:
    collected = collected_of(
        [(w, batch) for w, batch, _, _ in BATCHES],
        errors={0: "boom", 2: "lost: gone", 5: "lost: gone"},
        texts={4: "some text"},
    )
    out.finish(collected, end(np.zeros(N, np.int64)))


def row_batches(path: Path) -> int:
    with ipc.open_file(str(path)) as file:
        return sum(file.get_batch(i).num_rows > 0 for i in range(file.num_record_batches))


def test_the_batches_of_a_second_are_written_as_one_and_read_back_the_same(
    tmp_path: Path,
) -> None:
    runs = {}
    for every in (0.0, 60.0):
        path = tmp_path / f"every-{every}.records.arrow"
        out = writer(path, every)
        size = path.stat().st_size
        for w, batch, errors, texts in BATCHES:
            out.write(w, batch, events(batch), errors, texts)
        assert (path.stat().st_size > size) == (every == 0.0)  # else pending, in memory
        assert out.pending_rows == (4 if every else 0)
        finished(out)
        runs[every] = read_records(str(path))
        # each worker batch, and the lost rows; or the three together, and the lost rows
        assert row_batches(path) == (4 if every == 0.0 else 2)
    one, together = runs[0.0], runs[60.0]
    assert together.records.tobytes() == one.records.tobytes()
    assert together.worker.tolist() == one.worker.tolist() == [0, 0, -1, 0, 1, -1]
    assert together.errors == one.errors and together.texts == one.texts == {4: "some text"}
    assert together.scheduled_ns.tolist() == one.scheduled_ns.tolist()
    for got, want in zip(
        materialized(together.event_source), materialized(one.event_source), strict=True
    ):
        assert got.tolist() == want.tolist()


def test_pending_batches_are_written_past_the_row_or_event_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(arrow_file, "PENDING_ROWS", 3)
    out = writer(tmp_path / "rows.records.arrow", 60.0)
    for w, batch, errors, texts in BATCHES[:2]:
        out.write(w, batch, events(batch), errors, texts)
    assert out.pending_rows == 0 and not out.pending  # 2 + 1 rows: written at once
    out.close()
    monkeypatch.setattr(arrow_file, "PENDING_EVENTS", 5)
    out = writer(tmp_path / "events.records.arrow", 60.0)
    w, batch, errors, texts = BATCHES[0]
    out.write(w, batch, events(batch), errors, texts)  # 8 events
    assert not out.pending
    out.close()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_keeps_each_pending_batch_as_its_worker_sent_it() -> None:
    out = writer(Path("/dev/full"), 60.0)
    for w, batch, errors, texts in BATCHES:
        out.write(w, batch, events(batch), errors, texts)
    out.flush()
    assert out.failure is not None
    assert [(w, rows["index"].tolist()) for w, rows, _, _ in out.kept_rows] == [
        (0, [3, 0]),
        (1, [4]),
        (0, [1]),
    ]
    assert [e for _, _, e, _ in out.kept_rows] == [{0: "boom"}, {}, {}]
    assert [chunk[0].tolist() for chunk in out.kept_events] == [[3, 0], [4], [1]]
    # Their values stay held: the report reads them from the writer at the end.
    assert out.values.take("scheduled_ns", np.array([0, 1, 3, 4])).tolist() == [
        0,
        1_000_000,
        3_000_000,
        4_000_000,
    ]
    out.close()


def test_the_observer_writes_the_pending_batches_when_their_time_is_up(tmp_path: Path) -> None:
    path = tmp_path / "timed.records.arrow"
    out = writer(path, 0.05)
    observer = ToRecordsFile(out)

    async def scenario() -> list[int]:
        pending = []
        for w, batch, errors, texts in BATCHES[:2]:
            observer.batch(RecordBatch(w, batch, events(batch), errors, texts))
            pending.append(len(out.pending))
        await asyncio.sleep(0.2)  # the one timer fires: both written together
        pending.append(len(out.pending))
        w, batch, errors, texts = BATCHES[2]
        observer.batch(RecordBatch(w, batch, events(batch), errors, texts))
        pending.append(len(out.pending))
        observer.end()  # the run's records are all in: the last written at once
        pending.append(len(out.pending))
        return pending

    assert asyncio.run(scenario()) == [1, 2, 0, 1, 0]
    assert observer.timer is None
    finished(out)
    assert row_batches(path) == 3  # the first two together, the third, the lost rows
    assert read_records(str(path)).worker.tolist() == [0, 0, -1, 0, 1, -1]

"""A run's rows read back from its own records file at its end (the collector keeps none while
the run goes): every field as the workers sent it, the errors and texts, where the events lie,
and the batches a full disk kept out of the file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_records_file import N, events, rows, writer

from loadgen.fleet.collector import Collector, RecordBatch
from loadgen.records.events import RequestOrderEvents
from loadgen.records.read_back import read_back, with_rows
from workers.protocol import RECORD_DTYPE

BATCHES = [  # (worker, rows, errors, texts); request 2 never comes
    (0, rows([3, 0], 4), {}, {0: "some text"}),
    (1, rows([5], 0), {5: "HTTP 500: boom"}, {}),
    (0, rows([4, 1], 7), {}, {1: "more text"}),
]


def odd_values(batch: np.ndarray) -> np.ndarray:
    """The batch with the values the file stores as null: -1 counts, NaN server figures."""
    batch = batch.copy()
    batch["server_queue_s"] = np.where(batch["index"] % 2 == 0, np.nan, 0.25)
    batch["cached_tokens"] = np.where(batch["index"] == 4, -1, 3)
    batch["success"] = batch["n_events"] > 0
    batch["status"] = np.where(batch["n_events"] > 0, 200, 500)
    return batch


def collected_in_memory() -> Any:
    """What the collector keeps of the batches without a records file."""
    collector = Collector([0, 1], np.array([0, 0, 1, 0, 0, 1], np.int16))
    for worker, batch, errors, texts in BATCHES:
        collector.batch(RecordBatch(worker, odd_values(batch), events(batch), errors, texts))
    return collector.collected(0, 2, interrupted=False)


def write(out: Any, fail_after: int | None = None) -> None:
    out.start(1, "2026-12-07T01:00:00", connections=2)
    for k, (worker, batch, errors, texts) in enumerate(BATCHES):
        if k == fail_after:
            out._writer.write_batch = full_disk
        out.write(worker, odd_values(batch), events(batch), errors, texts)


def full_disk(*_: object, **__: object) -> None:
    raise OSError(28, "No space left on device")


def same_as_in_memory(path: str, out: Any) -> None:
    """The collector that reads the file back assembles the run the in-memory one does."""
    want = collected_in_memory()
    collector = Collector([0, 1], np.array([0, 0, 1, 0, 0, 1], np.int16), rows_in_file=True)
    for worker, batch, errors, texts in BATCHES:
        collector.batch(RecordBatch(worker, odd_values(batch), events(batch), errors, texts))
    assert collector.records.nbytes == 0 and not collector.errors and not collector.batches
    got = collector.collected(0, 2, interrupted=False)
    assert got.rows_in_file and len(got.records) == 0
    with_rows(got, read_back(path, got.num_requests, out.kept_rows, out.kept_events))
    assert not got.rows_in_file
    assert got.records.tobytes() == want.records.tobytes()  # NaN and -1 included
    assert got.worker.tolist() == want.worker.tolist() == [0, 0, -1, 0, 0, 1]
    assert got.errors == want.errors and 2 in got.errors
    assert got.texts == want.texts
    assert not got.events_kept and got.event_places is not None
    read = RequestOrderEvents(path, N, places=got.event_places)
    assert read.offsets.tolist() == want.event_offsets.tolist()
    assert np.concatenate([c[2] for c in read.chunks(max_events=5)]).tolist() == (
        want.event_ns.tolist()
    )


def test_rows_read_back_from_the_open_file_are_those_the_workers_sent(tmp_path: Path) -> None:
    out = writer(tmp_path / "r.records.arrow")
    write(out)
    assert out.failure is None and out.kept_rows == []
    same_as_in_memory(out.path, out)
    back = read_back(out.path, N)
    assert back.records.dtype == RECORD_DTYPE and len(back.records) == N
    out.close()


def test_rows_a_full_disk_refused_midway_join_those_in_the_file(tmp_path: Path) -> None:
    out = writer(tmp_path / "r.records.arrow")
    write(out, fail_after=1)
    assert out.failure is not None
    assert [rows["index"].tolist() for _, rows, _, _ in out.kept_rows] == [[5], [4, 1]]
    same_as_in_memory(out.path, out)
    in_file_only = read_back(out.path, N)  # the first batch alone reached the file
    assert in_file_only.worker.tolist() == [0, -1, -1, 0, -1, -1]
    out.close()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_rows_of_a_file_that_never_opened_are_all_in_memory() -> None:
    out = writer(Path("/dev/full"))
    write(out)
    assert out.failure is not None and len(out.kept_rows) == len(BATCHES)
    same_as_in_memory(out.path, out)
    out.close()

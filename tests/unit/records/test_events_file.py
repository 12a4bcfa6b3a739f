"""The token events a run keeps only in its records file: read back, batch by batch, from a file
still open, after a full disk (the batches it could not take are kept), and a temporary file
removed at the run's end."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_records_file import N, end, events, rows, write_run, writer

from loadgen.records import events as events_module
from loadgen.records import mapped
from loadgen.records import read as read_module
from loadgen.records.collected import assemble_events
from loadgen.records.events import (
    RequestOrderEvents,
    event_chunks,
    file_events,
    temporary_records_path,
)
from loadgen.records.mapped import PlacesBuilder
from loadgen.records.read import server_metrics_of
from loadgen.records.server_series import chunk_json


def expected(batches: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The events of ``batches`` laid out in memory, as the collector did."""
    n_events = np.zeros(N, np.int64)
    for batch in batches:
        n_events[batch["index"]] = batch["n_events"]
    chunks = [
        (b["index"].astype(np.int64), b["n_events"].astype(np.int64), events(b)) for b in batches
    ]
    return assemble_events(n_events, chunks)


def test_events_read_back_from_a_file_still_open_equal_those_kept_in_memory(
    tmp_path: Path,
) -> None:
    out = writer(tmp_path / "r.records.arrow")
    out.start(1, "2026-12-03T10:00:00", connections=2)
    batches = [rows([3, 0], 4), rows([5], 0), rows([4, 1], 7)]  # 2 never comes: lost
    for worker, batch in enumerate(batches):
        out.write(worker, batch, events(batch), {}, {})
    n_events = np.zeros(N, np.int64)
    for batch in batches:
        n_events[batch["index"]] = batch["n_events"]
    got_ns, got_offsets = file_events(out.path, n_events, out.kept_events)
    want_ns, want_offsets = expected(batches)
    assert got_offsets.tolist() == want_offsets.tolist()
    assert got_ns.tolist() == want_ns.tolist()
    assert [chunk[0].tolist() for chunk in event_chunks(out.path)] == [[3, 0], [4, 1]]
    assert out.kept_events == []
    out.close()


def test_a_finished_file_reads_the_same_events(tmp_path: Path) -> None:
    path = tmp_path / "r.records.arrow"
    batches, collected, _ = write_run(path)
    got_ns, got_offsets = file_events(str(path), collected.records["n_events"])
    want_ns, want_offsets = expected(batches)
    assert (got_ns.tolist(), got_offsets.tolist()) == (want_ns.tolist(), want_offsets.tolist())


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_batches_a_full_disk_refused_are_kept_and_read_back() -> None:
    out = writer(Path("/dev/full"))
    out.start(1, "2026-12-03T10:00:00", connections=2)
    batches = [rows([3, 0], 4), rows([4, 1], 7)]
    for worker, batch in enumerate(batches):
        out.write(worker, batch, events(batch), {}, {})
    assert out.failure is not None
    assert [chunk[0].tolist() for chunk in out.kept_events] == [[3, 0], [4, 1]]
    n_events = np.zeros(N, np.int64)
    for batch in batches:
        n_events[batch["index"]] = batch["n_events"]
    got_ns, _ = file_events(out.path, n_events, out.kept_events)
    assert got_ns.tolist() == expected(batches)[0].tolist()
    out.close()


def test_a_temporary_file_is_removed_when_finished_or_closed(tmp_path: Path) -> None:
    for how in ("finish", "close"):
        path = temporary_records_path(str(tmp_path))
        out = writer(Path(path))
        out.temporary = True
        out.start(1, "2026-12-03T10:00:00", connections=2)
        batch = rows([0], 3)
        out.write(0, batch, events(batch), {}, {})
        assert os.path.getsize(path) > 0
        n_events = np.zeros(N, np.int64)
        n_events[0] = 3
        assert file_events(path, n_events)[0].tolist() == events(batch).tolist()
        if how == "finish":
            collected = write_run(tmp_path / f"other-{how}.records.arrow")[1]
            out.finish(collected, end(np.zeros(N, np.int64)))
        else:
            out.close()
        assert not os.path.exists(path), how
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-finish.records.arrow"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_request_order_reads_the_batches_a_full_disk_kept_out_of_the_file(tmp_path: Path) -> None:
    whole = writer(tmp_path / "whole.records.arrow")
    full = writer(Path("/dev/full"))
    batches = [rows([3, 0], 4), rows([4, 1], 7)]
    for out in (whole, full):
        out.start(1, "2026-12-03T10:00:00", connections=2)
        for worker, batch in enumerate(batches):
            out.write(worker, batch, events(batch), {}, {})
    whole.close()
    assert full.failure is not None and len(full.kept_events) == 2
    on_disk = RequestOrderEvents(whole.path, N)
    in_memory = RequestOrderEvents(full.path, N, kept=full.kept_events)
    full.close()
    want = expected(batches)
    for read in (on_disk, in_memory):
        assert read.offsets.tolist() == want[1].tolist()
        assert (
            np.concatenate([c[2] for c in read.chunks(max_events=5)]).tolist() == want[0].tolist()
        )


def series_chunk(first_t_ns: int) -> dict:
    """A scraper's chunk of two scrapes of one series."""
    scrapes = [{("requests_running", ()): 1.0}, {("requests_running", ()): 2.0}]
    return chunk_json("http://127.0.0.1:8000/metrics", [first_t_ns, first_t_ns + 10], scrapes)


def test_the_scan_reads_back_the_server_series_written_as_they_came(tmp_path: Path) -> None:
    """The scrapers keep nothing they wrote to the records file: the run's series come back
    from the file's scan (and, after a full disk, from what the writer kept)."""
    out = writer(tmp_path / "r.records.arrow")
    out.start(1, "2026-12-03T10:00:00", connections=2)
    batch = rows([3, 0], 4)
    out.write_series(series_chunk(0))
    out.write(0, batch, events(batch), {}, {})
    out.write_series(series_chunk(100))
    scanned = RequestOrderEvents(out.path, N)
    (series,) = server_metrics_of(scanned.series, out.path) or []
    assert series.name == "requests_running"
    assert series.t_ns.tolist() == [0, 10, 100, 110] and series.values.tolist() == [1, 2, 1, 2]
    assert out.kept_series == []
    out.close()
    if os.path.exists("/dev/full"):
        full = writer(Path("/dev/full"))
        full.start(1, "2026-12-03T10:00:00", connections=2)
        full.write_series(series_chunk(0))
        assert full.failure is not None and len(full.kept_series) == 1
        (kept,) = server_metrics_of(full.kept_series, full.path) or []
        assert kept.t_ns.tolist() == [0, 10]
        full.close()


def test_both_readers_take_the_rows_a_window_at_a_time_as_the_stream_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decoded batch holds ~15 KB, and an hour's run writes tens of thousands: neither the
    run's scan nor read_records holds every batch before taking their rows (holding them was
    0.3 GB for 20,000 small batches). With windows of 2 batches and a server-metrics chunk
    after each batch, each window is taken once the stream has been read to its end."""
    monkeypatch.setattr(mapped, "WINDOW_BATCHES", 2)
    out = writer(tmp_path / "r.records.arrow")
    out.start(1, "2026-12-03T10:00:00", connections=2)
    for i in range(N):
        batch = rows([i], 3)
        out.write(i % 2, batch, events(batch), {}, {})
        out.write_series(series_chunk(100 * i))
    out.close()

    seen: list[int] = []  # the series chunks read when each window's rows were taken
    series: list[bytes] = []
    builder = PlacesBuilder()
    note_column = builder.note_column

    def noting(index: np.ndarray, *args: Any) -> None:
        seen.append(len(series))
        note_column(index, *args)

    monkeypatch.setattr(builder, "note_column", noting)
    events_module.scan_file(out.path, builder, series)
    # Each window once its second batch is read (all 6 chunks read first when every batch
    # was held before any window was taken).
    assert seen == [1, 3, 5]
    assert builder.places(N, 0).counts.tolist() == [3] * N

    taken: list[int] = []  # the stream's bytes read when each window's rows were taken
    take = read_module._Rows.take

    def taking(rows: read_module._Rows, window: list) -> None:
        taken.append(rows.scan.read_to)
        take(rows, window)

    monkeypatch.setattr(read_module._Rows, "take", taking)
    records = read_module.read_records(out.path)
    assert len(taken) == 3 and taken == sorted(taken) and taken[0] < taken[-1]
    assert records.event_offsets.tolist() == list(range(0, 3 * N + 1, 3))

"""A run's own records file read back at its end: the only copy of its rows the run keeps.

While a run goes, each worker batch is written to the records file as it arrives (a temporary
one where none is kept) and the coordinator keeps no row of it: what it holds per request is
a worker and a received flag (loadgen/fleet/collector.py), so its memory does not grow with
the run's rows. At the end one scan of the file lays them out again, request-major, for the
report, and notes where each request's token events lie, for the report's passes over them
(``RequestOrderEvents``). The batches a full disk kept out of the file are the writer's, in
memory (``RecordsWriter.kept_rows``, ``kept_events``), and join the file's here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute

from loadgen.records.collected import Collected, mark_lost
from loadgen.records.events import EventChunk, scan_file
from loadgen.records.mapped import EventPlaces, PlacesBuilder
from loadgen.records.read import fill_rows, strings
from workers.protocol import RECORD_DTYPE

# One batch the file could not take: its worker, its rows (RECORD_DTYPE), errors and texts.
RowChunk = tuple[int, np.ndarray, dict[int, str], dict[int, str]]


@dataclass
class FileRows:
    """A run's rows as its records file (and the writer's memory) holds them, request-major:
    one RECORD_DTYPE row per request and the worker that reported it (-1, and a zero row,
    where none did), the errors and kept texts by request, where each request's events lie,
    and the scraped server-metrics chunks (JSON) the file holds, in file order."""

    records: np.ndarray
    worker: np.ndarray
    errors: dict[int, str]
    texts: dict[int, str]
    places: EventPlaces
    series: list[bytes]
    # Asked for (``values``): each request's offset, prompt length and input sequences as
    # its row in the file says (-1 where the file has none), by column name.
    values: dict[str, np.ndarray]


def read_back(
    path: str,
    num_requests: int,
    kept_rows: Sequence[RowChunk] = (),
    kept_events: Sequence[EventChunk] = (),
    values: Sequence[str] = (),
) -> FileRows:
    """The rows of requests 0..num_requests - 1 in the records file at ``path`` (open: no
    end yet; up to its last complete batch) and in ``kept_rows`` / ``kept_events``; with
    them the file's ``values`` columns (the writer's RequestBlocks names) by request."""
    by_column = {name: np.full(num_requests, -1, dtype=np.int64) for name in values}
    records = np.zeros(num_requests, dtype=RECORD_DTYPE)
    worker = np.full(num_requests, -1, dtype=np.int16)
    errors: dict[int, str] = {}
    texts: dict[int, str] = {}

    def take(rows: pa.Table, index: np.ndarray) -> None:
        counts = pa.compute.list_value_length(rows["events_ns"]).to_numpy(zero_copy_only=False)
        fill_rows(records, worker, rows, index, counts.astype(np.int64))
        errors.update(strings(index, rows["error"]))
        texts.update(strings(index, rows["text"]))
        for name, column in by_column.items():
            column[index] = rows[name].fill_null(-1).to_numpy()

    builder = PlacesBuilder()
    series: list[bytes] = []
    size = 0
    # No file, or one without a schema (a full disk at its start): no batch there.
    with contextlib.suppress(OSError, pa.ArrowException, ValueError):
        size = scan_file(path, builder, series, take)
    for w, rows, row_errors, row_texts in kept_rows:
        records[rows["index"]] = rows
        worker[rows["index"]] = w
        errors.update(row_errors)
        texts.update(row_texts)
    for index, counts, events in kept_events:
        builder.note(index, counts, events)
    places = builder.places(num_requests, size)
    return FileRows(records, worker, errors, texts, places, series, by_column)


def with_rows(collected: Collected, rows: FileRows) -> None:
    """Lay a run's rows, read back (``read_back``), out in its ``Collected``, the requests
    no worker reported failed as ``mark_lost`` says."""
    collected.records, collected.worker = rows.records, rows.worker
    collected.errors, collected.texts = rows.errors, rows.texts
    collected.event_places, collected.file_series = rows.places, rows.series
    collected.file_values = rows.values
    collected.rows_in_file = False
    mark_lost(collected)

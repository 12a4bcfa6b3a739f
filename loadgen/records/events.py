"""A run's token events where they live: in its records file, read back in place (mapped).

The coordinator keeps no token event of a run in memory: each worker batch goes to the records
file as it arrives (a temporary one where none is kept: ``temporary_records_path``), and the
report reads them back from a memory map of the file in request order, a bounded chunk of
requests at a time (``RequestOrderEvents``, an ``EventSource``; loadgen/records/mapped.py).
``event_chunks`` (batch by batch, in file order) and ``file_events`` (every event laid out
request-major: tests' in-memory reference) read them whole. A batch the file could not take
(a full disk) is kept in memory by the writer's observer instead, and joins the file's batches
here.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from loadgen.records.arrow_file import MAGIC_LEN, SERIES_KEY, SUFFIX
from loadgen.records.collected import assemble_events
from loadgen.records.event_source import CHUNK_EVENTS, chunk_ends
from loadgen.records.mapped import EventPlaces, MappedFile, PlacesBuilder, gather, windows

# One batch of events: its requests' indices, their event counts and their events, the events
# of each request one after the other in the order of the indices.
EventChunk = tuple[np.ndarray, np.ndarray, np.ndarray]


def temporary_records_path(directory: str | None = None) -> str:
    """A fresh path for a records file that the run removes at its end (in ``directory``, or
    the system's temporary directory)."""
    fd, path = tempfile.mkstemp(prefix="loadgen-", suffix=SUFFIX, dir=directory)
    os.close(fd)
    return path


def event_chunks(path: str) -> Iterator[EventChunk]:
    """The events of each complete batch of the records file at ``path`` (open or closed, cut
    short or not), in file order; batches without events are skipped."""
    try:
        source = pa.memory_map(path, "r")
    except (OSError, pa.ArrowException):
        return
    with source:
        if source.size() <= MAGIC_LEN:
            return
        source.seek(MAGIC_LEN)
        try:
            stream = ipc.open_stream(source)
        except (pa.ArrowException, OSError, ValueError):
            return
        while True:
            try:
                batch = stream.read_next_batch()
            except (StopIteration, pa.ArrowException, OSError, ValueError):
                return  # the end, or a batch cut short: what follows was never written
            if batch.num_rows == 0:
                continue
            events = batch.column("events_ns")
            counts = events.value_lengths().to_numpy(zero_copy_only=False).astype(np.int64)
            if not counts.sum():
                continue
            index = batch.column("index").to_numpy().astype(np.int64)
            flat = events.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
            yield index, counts, flat


def file_events(
    path: str, n_events: np.ndarray, kept: Sequence[EventChunk] = ()
) -> tuple[np.ndarray, np.ndarray]:
    """The run's events laid out request-major (``assemble_events``) from the records file at
    ``path`` and the batches ``kept`` in memory (those the file could not take): request i's
    ``n_events[i]`` events at offsets[i]:offsets[i+1]. A batch both in the file and kept lands
    in the same places."""
    return assemble_events(n_events, itertools.chain(event_chunks(path), kept))


class RequestOrderEvents:
    """The token events of a records file in request order, read a bounded chunk at a time.

    One scan of the file (or read_records' own: ``places``) notes where each request's events
    lie in it, and each request's first and last event (``ends``); ``chunks`` then gathers the
    events of consecutive requests straight from a read-only memory map of the file
    (loadgen/records/mapped.py), letting its pages go as it reads, never the whole file at
    once. ``kept``: the batches a full disk kept out of the file (``RecordsWriter.kept_events``),
    read from memory.
    """

    def __init__(
        self,
        path: str,
        num_requests: int,
        kept: Sequence[EventChunk] = (),
        places: EventPlaces | None = None,
    ) -> None:
        self.path = path
        self._gone = False
        # The server-metrics chunks (JSON) its scan met, in file order (none with ``places``:
        # read_records reads them itself).
        self.series: list[bytes] = []
        if places is None:
            builder = PlacesBuilder()
            size = 0
            # No file, or one without a schema (a full disk at its start): no batch there.
            with contextlib.suppress(OSError, pa.ArrowException, ValueError):
                size = scan_file(path, builder, self.series)
            # Batches a full disk kept out of the file, read from memory.
            for index, counts, events in kept:
                builder.note(index, counts, events)
            places = builder.places(num_requests, size)
        self.places = places
        self.counts = places.counts
        self._held: MappedFile | None = None  # mapped for good (``hold``)

    @property
    def offsets(self) -> np.ndarray:
        """Request i's events are at offsets[i]:offsets[i+1] of the request-major layout."""
        return np.concatenate(([0], np.cumsum(self.counts))).astype(np.int64)

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        """Each request's first and last event (0 where it has none), read from no chunk."""
        return self.places.first, self.places.last

    def chunks(self, max_events: int = CHUNK_EVENTS) -> Iterator[tuple[int, int, np.ndarray]]:
        """(first request, end request, their events request-major) for consecutive runs of
        requests of at most ``max_events`` events (or one request, if it alone has more)."""
        held = self._held
        if self._gone and held is None:
            raise FileNotFoundError(
                "the run's token events were in a temporary records file, removed at its end "
                "(keep a records file to read them after the run: --save-result)"
            )
        mapped = held or (MappedFile(self.path, self.places.size) if self.places.size else None)
        words = mapped.words if mapped is not None else np.zeros(0, np.int64)
        try:
            for first, end in chunk_ends(self.counts, max_events):
                values = gather(self.places, words, first, end)
                if mapped is not None:
                    mapped.read(8 * len(values))
                yield first, end, values
        finally:
            del words
            if held is not None:
                held.release()
            elif mapped is not None:
                mapped.close()

    def hold(self) -> None:
        """Keep the file mapped from now on, so that its events still read once it is removed
        (a temporary records file: a run's summary read after the run, by calibrate or the
        Python API). Its disk space and one file descriptor are held until these events are
        freed; its pages are let go after each pass as before."""
        if self._held is None and self.places.size and not self._gone:
            self._held = MappedFile(self.path, self.places.size)

    def moved_to(self, path: str | None) -> None:
        """The file now lives at ``path`` (the run gave it the result's name); None: it is
        gone (a temporary one, removed at the run's end), and reading its events says so
        unless they were held (``hold``)."""
        self.path = path or ""
        self._gone = path is None


# What a scan does with each window of rows besides noting their events' places: the rows
# (their events_ns lists as they lie in the file) and each one's request.
TakeRows = Callable[[pa.Table, np.ndarray], None]


def scan_file(
    path: str, builder: PlacesBuilder, series: list[bytes], take: TakeRows | None = None
) -> int:
    """Note where each of the file's batches puts its requests' events (and hand ``take``
    each window of rows), and add its server-metrics chunks to ``series``; the bytes up to
    the end of its last complete batch."""
    mapped = MappedFile(path)
    try:
        return _scan_mapped(mapped, builder, series, take) if mapped.size > MAGIC_LEN else 0
    finally:
        mapped.close()


def _scan_mapped(
    mapped: MappedFile, builder: PlacesBuilder, series: list[bytes], take: TakeRows | None
) -> int:
    source = pa.BufferReader(mapped.buffer)
    source.seek(MAGIC_LEN)
    stream = ipc.open_stream(source)
    read_to = source.tell()

    def row_batches() -> Iterator[pa.RecordBatch]:
        # Read as the windows take them: a decoded batch holds ~15 KB, and an hour's run
        # writes tens of thousands of batches (loadgen/records/mapped.py's WINDOW_BATCHES).
        nonlocal read_to
        while True:
            try:
                batch, custom = stream.read_next_batch_with_custom_metadata()
            except (StopIteration, pa.ArrowException, OSError, ValueError):
                return  # the end, or a batch cut short
            if custom is not None and SERIES_KEY in custom:
                series.append(custom[SERIES_KEY])
            mapped.read(source.tell() - read_to)
            read_to = source.tell()
            if batch.num_rows:
                yield batch

    for window in windows(row_batches()):
        rows = pa.Table.from_batches(window)
        index = rows["index"].to_numpy().astype(np.int64)
        builder.note_column(index, rows["events_ns"], mapped)
        if take is not None:
            take(rows, index)
        mapped.release()
    return read_to

"""A run's token events where they live: in its records file, read back one batch at a time.

The coordinator keeps no token event of a run in memory: each worker batch goes to the records
file as it arrives (a temporary one where none is kept: ``temporary_records_path``), and the
report reads them back from the file in request order, a bounded chunk of requests at a time
(``RequestOrderEvents``, an ``EventSource``). ``event_chunks`` (batch by batch, in file order)
and ``file_events`` (every event laid out request-major: tests' in-memory reference) read them
whole. A batch the file could not take (a full disk) is kept in memory by the writer's
observer instead, and joins the file's batches here.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from loadgen.records.arrow_file import MAGIC_LEN, SUFFIX
from loadgen.records.collected import assemble_events
from loadgen.records.event_source import CHUNK_EVENTS, chunk_ends

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

    The file holds them in the order their batches arrived; one pass over it notes, for each
    request, the batch that holds its events and where (fixed-size per request), and each
    batch's place in the file. ``chunks`` then reads the events of consecutive requests from
    the few batches that hold them (a small cache of decoded batches), never the whole file;
    ``kept``: the batches a full disk kept out of the file (``RecordsWriter.kept_events``).

    A report reads the events many times over (exact percentiles take several passes), so the
    first whole pass also writes them, request-major, to an unnamed temporary file (8 bytes an
    event, on disk: ``spill_dir``, else the system's temporary directory); later passes of the
    same chunking read that file sequentially instead of decoding the batches again. Where it
    cannot be written (a full disk), every pass decodes the batches.
    """

    def __init__(
        self,
        path: str,
        num_requests: int,
        cache_batches: int = 8,
        kept: Sequence[EventChunk] = (),
        spill_dir: str | None = None,
    ) -> None:
        self.path = path
        self.spill_dir = spill_dir
        self._spilled: tuple[int, IO[bytes]] | None = None  # (max_events, the file)
        self.counts = np.zeros(num_requests, np.int64)
        self.batch_of = np.full(num_requests, -1, np.int32)
        self.start_in_batch = np.zeros(num_requests, np.int64)
        self._positions: list[int] = []  # the byte where each batch with events starts
        self._cache: dict[int, np.ndarray] = {}
        self._cache_batches = cache_batches
        self._gone = False
        self._schema: pa.Schema | None = None
        # No file, or one without a schema (a full disk at its start): no batch there.
        with contextlib.suppress(OSError, pa.ArrowException, ValueError):
            self._scan(path)
        # Batches a full disk kept out of the file (RecordsWriter.kept_events): numbered after
        # the file's, read from memory.
        self._kept: dict[int, np.ndarray] = {}
        for index, counts_np, events in kept:
            b = len(self._positions) + len(self._kept)
            self.counts[index] = counts_np
            self.batch_of[index] = b
            self.start_in_batch[index] = np.cumsum(counts_np) - counts_np
            self._kept[b] = events

    def _scan(self, path: str) -> None:
        """Note each of the file's batches with events: its place, and its requests'."""
        with pa.OSFile(path, "rb") as source:
            source.seek(MAGIC_LEN)
            stream = ipc.open_stream(source)
            self._schema = stream.schema
            while True:
                position = source.tell()
                try:
                    batch = stream.read_next_batch()
                except (StopIteration, pa.ArrowException, OSError, ValueError):
                    break  # the end, or a batch cut short
                if not batch.num_rows:
                    continue
                counts = batch.column("events_ns").value_lengths()
                counts_np = counts.to_numpy(zero_copy_only=False).astype(np.int64)
                if not counts_np.sum():
                    continue
                index = batch.column("index").to_numpy().astype(np.int64)
                self.counts[index] = counts_np
                self.batch_of[index] = len(self._positions)
                self.start_in_batch[index] = np.cumsum(counts_np) - counts_np
                self._positions.append(position)

    @property
    def offsets(self) -> np.ndarray:
        """Request i's events are at offsets[i]:offsets[i+1] of the request-major layout."""
        return np.concatenate(([0], np.cumsum(self.counts))).astype(np.int64)

    def chunks(self, max_events: int = CHUNK_EVENTS) -> Iterator[tuple[int, int, np.ndarray]]:
        """(first request, end request, their events request-major) for consecutive runs of
        requests of at most ``max_events`` events (or one request, if it alone has more)."""
        if self._spilled is not None and self._spilled[0] == max_events:
            yield from self._read_spilled(self._spilled[1], max_events)
            return
        spill = self._spill_file() if self._spilled is None else None
        for first, end in chunk_ends(self.counts, max_events):
            values = self._gather(first, end)
            if spill is not None:
                try:
                    values.tofile(spill)
                except OSError:  # a full disk: this pass, and later ones, decode the batches
                    spill.close()
                    spill = None
            yield first, end, values
        if spill is not None:  # a whole pass: later ones read it
            self._spilled = (max_events, spill)

    def _spill_file(self) -> IO[bytes] | None:
        """A fresh unnamed temporary file for a pass's events; None where none can be made."""
        try:
            return tempfile.TemporaryFile(prefix="loadgen-events-", dir=self.spill_dir)
        except OSError:
            return None

    def _read_spilled(
        self, spill: IO[bytes], max_events: int
    ) -> Iterator[tuple[int, int, np.ndarray]]:
        """A pass over the spilled events, chunk by chunk, in the order they were written."""
        spill.seek(0)
        for first, end in chunk_ends(self.counts, max_events):
            size = int(self.counts[first:end].sum())
            values = np.fromfile(spill, dtype=np.int64, count=size)
            if len(values) != size:
                raise OSError(f"the spilled token events stop short ({len(values)} of {size})")
            yield first, end, values

    def _gather(self, first: int, end: int) -> np.ndarray:
        counts = self.counts[first:end]
        out = np.empty(int(counts.sum()), np.int64)
        out_starts = np.cumsum(counts) - counts
        batches = self.batch_of[first:end]
        for b in np.unique(batches[counts > 0]).tolist():
            picked = (batches == b) & (counts > 0)
            source = self._batch_events(b)
            sizes = counts[picked]
            within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            starts = self.start_in_batch[first:end][picked]
            out[np.repeat(out_starts[picked], sizes) + within] = source[
                np.repeat(starts, sizes) + within
            ]
        return out

    def moved_to(self, path: str | None) -> None:
        """The file now lives at ``path`` (the run gave it the result's name); None: it is
        gone (a temporary one, removed at the run's end), and reading its events says so. The
        report is built: its spilled events are let go (a campaign keeps many runs' records;
        a later reader decodes the batches again)."""
        self.path = path or ""
        self._gone = path is None
        if self._spilled is not None:
            self._spilled[1].close()
            self._spilled = None

    def _batch_events(self, b: int) -> np.ndarray:
        """Batch ``b``'s events, flat (decoded again when it has left the cache)."""
        if b in self._kept:
            return self._kept[b]
        if b in self._cache:
            return self._cache[b]
        if self._gone:
            raise FileNotFoundError(
                "the run's token events were in a temporary records file, removed at its end "
                "(keep a records file to read them after the run: --save-result)"
            )
        with pa.OSFile(self.path, "rb") as source:
            source.seek(self._positions[b])
            assert self._schema is not None  # a batch was read with it
            batch = ipc.read_record_batch(ipc.read_message(source), self._schema)
        events = batch.column("events_ns").flatten().to_numpy(zero_copy_only=False)
        if len(self._cache) >= self._cache_batches:
            self._cache.pop(next(iter(self._cache)))
        self._cache[b] = events.astype(np.int64)
        return self._cache[b]

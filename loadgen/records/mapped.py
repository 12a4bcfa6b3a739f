"""A records file mapped into memory, and where each request's token events lie in it.

The report reads a records file's token events straight from a read-only memory map: its
batches are decoded in place (their buffers are the file's own bytes), each request's events
are a run of int64 in the file, and a chunk of requests is one gather from the mapping. The
pages read are let go every ``RELEASE_BYTES`` (madvise DONTNEED: they stay in the page cache,
out of the process's RSS), so what a scan or a pass holds is bounded whatever the file's size.

The mapping covers the bytes the file had when it was first read, and no more; its size is
checked again each time it is mapped. A file cut shorter while it is mapped (by another
process) would fault a read past its new end (SIGBUS): loadgen only ever appends to a records
file, and removes a temporary one only once its report is built.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

RELEASE_BYTES = 16 << 20  # the mapped bytes read between two releases of the pages
# The most batches a window holds: a decoded batch takes ~15 KB of the C heap whatever its
# size, and a long run at a low rate writes many small ones (20,000 held at once: 300 MB).
WINDOW_BATCHES = 256


class MappedFile:
    """The first ``size`` bytes of a file (all of it without ``size``), mapped read-only: as an
    Arrow buffer (``buffer``) and as int64 words (``words``, the file's 8-byte units)."""

    def __init__(self, path: str, size: int | None = None) -> None:
        with open(path, "rb") as f:
            stat = os.fstat(f.fileno())
            actual = stat.st_size if os.path.isfile(path) else 0
            if size is None:
                size = actual
            elif actual < size:
                raise OSError(f"{path} is shorter than when it was read ({actual} of {size} bytes)")
            self.size = size
            self._map = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else None
        self.buffer = pa.py_buffer(self._map) if self._map is not None else pa.py_buffer(b"")
        self.words = np.frombuffer(self.buffer, np.int64, count=size // 8)
        self._read = 0

    def offset_of(self, buffer: pa.Buffer) -> int | None:
        """Where ``buffer``'s bytes start in the file; None where they are not the file's (a
        buffer Arrow made: decompressed or byte-swapped)."""
        offset = buffer.address - self.buffer.address
        return offset if offset >= 0 and offset + buffer.size <= self.size else None

    def read(self, nbytes: int) -> None:
        """``nbytes`` more of the mapping were read: its pages are let go past RELEASE_BYTES."""
        self._read += nbytes
        if self._read >= RELEASE_BYTES:
            self.release()

    def release(self) -> None:
        """Let the pages read so far go from this process's memory (they are read again from
        the page cache if needed)."""
        self._read = 0
        if self._map is not None and hasattr(self._map, "madvise"):
            self._map.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        """Unmap now; where Arrow still holds a buffer of it, when the last one goes."""
        self.release()
        self.words = np.zeros(0, np.int64)
        self.buffer = pa.py_buffer(b"")
        if self._map is not None:
            with contextlib.suppress(BufferError):  # still exported: unmapped when freed
                self._map.close()


@dataclass
class EventPlaces:
    """Where each request's token events lie: ``counts[i]`` int64 from word ``words[i]`` of the
    records file (-1 where they are in ``kept`` instead, from ``kept_at[i]``), and each
    request's first and last event (0 without one), noted while the file was scanned."""

    counts: np.ndarray
    words: np.ndarray
    first: np.ndarray
    last: np.ndarray
    kept: np.ndarray
    kept_at: np.ndarray
    size: int  # the bytes of the file the places lie in


class PlacesBuilder:
    """Notes, batch by batch, where each request's events lie in a mapped records file."""

    def __init__(self) -> None:
        # Per batch: its requests, their counts, where their events start (words of the file,
        # or of the kept events), their first and last events, and whether they are kept.
        self._pieces: list[tuple[np.ndarray, ...]] = []
        self._kept: list[np.ndarray] = []
        self._kept_size = 0

    def note_column(self, index: np.ndarray, events: pa.ChunkedArray, mapped: MappedFile) -> None:
        """The rows of a table read from ``mapped`` (``index``: each row's request; ``events``:
        its events_ns lists, chunk by chunk as the file's batches lie in it): where each row's
        events lie (copied where Arrow decoded them elsewhere), and its first and last event."""
        parts, row = [], 0
        for chunk in events.chunks:
            rows = index[row : row + len(chunk)]
            row += len(chunk)
            offsets = chunk.offsets.to_numpy().astype(np.int64)
            counts = np.diff(offsets)
            child = chunk.values
            data = child.buffers()[1] if child.type == pa.int64() else None
            at = mapped.offset_of(data) if data is not None else None
            if at is None or at % 8:  # not the file's bytes: held in memory
                flat = child.to_numpy(zero_copy_only=False).astype(np.int64)
                self.note(rows, counts, flat[offsets[0] : offsets[-1]])
            else:
                parts.append((rows, counts, at // 8 + child.offset + offsets[:-1]))
        if parts:
            rows, counts, starts = (np.concatenate(part) for part in zip(*parts, strict=True))
            first, last = _ends_in_windows(mapped, starts, counts)
            self._pieces.append((rows, counts, starts, first, last, np.zeros(len(rows), bool)))

    def note(self, index: np.ndarray, counts: np.ndarray, events: np.ndarray) -> None:
        """Requests ``index`` with ``counts`` events each, ``events`` held in memory (one
        after the other in the order of ``index``)."""
        events = np.asarray(events, np.int64)
        starts = np.cumsum(counts) - counts
        first, last = _ends(events, starts, counts)
        kept = np.ones(len(index), bool)
        self._pieces.append((index, counts, starts + self._kept_size, first, last, kept))
        self._kept.append(events)
        self._kept_size += len(events)

    def places(self, num_requests: int, size: int) -> EventPlaces:
        """The places noted, of requests 0..num_requests - 1 (each noted once), in a file of
        ``size`` bytes."""
        counts = np.zeros(num_requests, np.int64)
        words = np.full(num_requests, -1, np.int64)
        kept_at = np.zeros(num_requests, np.int64)
        first = np.zeros(num_requests, np.int64)
        last = np.zeros(num_requests, np.int64)
        if self._pieces:
            index, n, starts, a, b, kept = (
                np.concatenate(part) for part in zip(*self._pieces, strict=True)
            )
            counts[index] = n
            words[index] = np.where(kept, -1, starts)
            kept_at[index] = np.where(kept, starts, 0)
            first[index] = a
            last[index] = b
        events = np.concatenate(self._kept) if self._kept else np.zeros(0, np.int64)
        return EventPlaces(counts, words, first, last, events, kept_at, size)


def windows(batches: Iterable[pa.RecordBatch]) -> Iterator[list[pa.RecordBatch]]:
    """Consecutive batches read in place from a mapping, about RELEASE_BYTES of it at a time
    (one batch at least, WINDOW_BATCHES at most): a reader that touches each window's pages
    lets them go after it (a page fault maps the pages around it too, so even a batch's rows
    touch most of it)."""
    window: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        window.append(batch)
        size += batch.get_total_buffer_size()
        if size >= RELEASE_BYTES or len(window) >= WINDOW_BATCHES:
            yield window
            window, size = [], 0
    if window:
        yield window


def _ends(source: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, ...]:
    """The first and last of each run of ``counts`` values from ``starts`` (0 for none)."""
    has = counts > 0
    first = np.zeros(len(starts), np.int64)
    last = np.zeros(len(starts), np.int64)
    first[has] = source[starts[has]]
    last[has] = source[starts[has] + counts[has] - 1]
    return first, last


def _ends_in_windows(
    mapped: MappedFile, starts: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, ...]:
    """``_ends`` of runs that lie in the mapped file in file order, a window of RELEASE_BYTES
    at a time, its pages let go after each: the memory it holds is a window's."""
    first = np.zeros(len(starts), np.int64)
    last = np.zeros(len(starts), np.int64)
    window = RELEASE_BYTES // 8
    cuts = np.searchsorted(starts, np.arange(window, int(starts.max()) + window, window))
    begin = 0
    for end in [*cuts.tolist(), len(starts)]:
        if end > begin:
            part = slice(begin, end)
            first[part], last[part] = _ends(mapped.words, starts[part], counts[part])
            mapped.release()
            begin = end
    return first, last


_ASCENDING = np.arange(0)


def _ascending(n: int) -> np.ndarray:
    """0, 1, ..., n - 1: a view of one array kept for every chunk of a pass (read only)."""
    global _ASCENDING
    if len(_ASCENDING) < n:
        _ASCENDING = np.arange(max(n, 1 << 18), dtype=np.int64)
        _ASCENDING.flags.writeable = False
    return _ASCENDING[:n]


def gather(places: EventPlaces, words: np.ndarray, first: int, end: int) -> np.ndarray:
    """Requests ``first``..``end``'s events, request-major, from the mapped file's ``words``
    and the events kept in memory."""
    counts = places.counts[first:end]
    has = counts > 0
    sizes = counts[has]
    total = int(sizes.sum())
    starts = places.words[first:end][has]
    out_starts = np.cumsum(sizes) - sizes
    in_file = starts >= 0
    if in_file.all():
        index = np.repeat(starts - out_starts, sizes)
        index += _ascending(total)
        return words.take(index)
    kept_starts = places.kept_at[first:end][has]
    out = np.empty(total, np.int64)
    for picked, source, at in ((in_file, words, starts), (~in_file, places.kept, kept_starts)):
        if picked.any():
            where = np.repeat(picked, sizes)
            index = np.repeat(at[picked] - out_starts[picked], sizes[picked])
            out[where] = source[index + np.flatnonzero(where)]
    return out

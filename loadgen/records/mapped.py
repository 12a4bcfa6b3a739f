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
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

RELEASE_BYTES = 16 << 20  # the mapped bytes read between two releases of the pages


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

    def note_batch(self, batch: pa.RecordBatch, mapped: MappedFile) -> np.ndarray:
        """A batch of rows read from ``mapped``: where its requests' events lie in it (or a
        copy of them, where Arrow decoded them elsewhere); their counts."""
        events = batch.column("events_ns")
        index = batch.column("index").to_numpy(zero_copy_only=False).astype(np.int64)
        offsets = events.offsets.to_numpy().astype(np.int64)
        counts = np.diff(offsets)
        child = events.values
        data = child.buffers()[1]
        at = mapped.offset_of(data) if data is not None else None
        if at is None or at % 8 or child.type != pa.int64():
            flat = child.to_numpy(zero_copy_only=False).astype(np.int64)
            self.note(index, counts, flat[offsets[0] : offsets[-1]])
            return counts
        starts = at // 8 + child.offset + offsets[:-1]
        self._note(index, counts, starts, mapped.words, 0, False)
        return counts

    def note(self, index: np.ndarray, counts: np.ndarray, events: np.ndarray) -> None:
        """Requests ``index`` with ``counts`` events each, ``events`` held in memory (one
        after the other in the order of ``index``)."""
        starts = np.cumsum(counts) - counts
        self._note(index, counts, starts + self._kept_size, events, self._kept_size, True)
        self._kept.append(np.asarray(events, np.int64))
        self._kept_size += len(events)

    def _note(
        self,
        index: np.ndarray,
        counts: np.ndarray,
        starts: np.ndarray,
        source: np.ndarray,
        base: int,
        kept: bool,
    ) -> None:
        has = counts > 0
        first = np.zeros(len(index), np.int64)
        last = np.zeros(len(index), np.int64)
        first[has] = source[starts[has] - base]
        last[has] = source[starts[has] - base + counts[has] - 1]
        self._pieces.append((index, counts, starts, first, last, np.full(len(index), kept)))

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
        return words[np.repeat(starts - out_starts, sizes) + np.arange(total)]
    kept_starts = places.kept_at[first:end][has]
    out = np.empty(total, np.int64)
    for picked, source, at in ((in_file, words, starts), (~in_file, places.kept, kept_starts)):
        if picked.any():
            where = np.repeat(picked, sizes)
            index = np.repeat(at[picked] - out_starts[picked], sizes[picked])
            out[where] = source[index + np.flatnonzero(where)]
    return out

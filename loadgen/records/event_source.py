"""A run's token events as every report reads them: in request order, a bounded chunk of
requests at a time (``EventSource``), wherever they are held.

The run's records file holds them (loadgen/records/events.py's ``RequestOrderEvents``); a test
or a benchmark may hold them in arrays (``ArrayEvents``). ``ScaledEvents`` turns ns into s a
chunk at a time and ``PickedEvents`` keeps some requests, so no view lays them all out.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Protocol, TypeVar

import numpy as np

T = TypeVar("T")

CHUNK_EVENTS = 1 << 18  # the events a chunk of requests holds at most (one request may hold more)


class EventSource(Protocol):
    """A run's token events, read in request order a bounded chunk of requests at a time: the
    one way the report reads them (the run's records file, or arrays a test holds)."""

    @property
    def counts(self) -> np.ndarray:
        """Each request's number of events (int64 [N])."""
        ...

    def chunks(self, max_events: int = CHUNK_EVENTS) -> Iterator[tuple[int, int, np.ndarray]]:
        """(first request, end request, their events request-major) for consecutive runs of
        requests of at most ``max_events`` events (or one request, if it alone has more)."""
        ...

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        """Each request's first and last event ([N] each; any value where it has none), the
        two that TTFT and E2EL read, without a pass over the events."""
        ...


def chunk_ends(counts: np.ndarray, max_events: int) -> Iterator[tuple[int, int]]:
    """(first, end) of consecutive runs of requests of at most ``max_events`` events each (one
    request alone where it has more)."""
    n = len(counts)
    ends = np.cumsum(counts)
    first = 0
    while first < n:
        base = int(ends[first - 1]) if first else 0
        end = int(np.searchsorted(ends, base + max_events, side="right"))
        end = min(max(end, first + 1), n)
        yield first, end
        first = end


class ArrayEvents:
    """Events held in memory, request-major (request i's at values[offsets[i]:offsets[i+1]]):
    runs made up by tests and benchmarks, and a run whose coordinator kept its events."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray) -> None:
        self.values = values
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.counts = np.diff(self.offsets) if len(self.offsets) else np.zeros(0, np.int64)

    def chunks(self, max_events: int = CHUNK_EVENTS) -> Iterator[tuple[int, int, np.ndarray]]:
        """As ``EventSource.chunks``: slices of the arrays."""
        for first, end in chunk_ends(self.counts, max_events):
            yield first, end, self.values[self.offsets[first] : self.offsets[end]]

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        """As ``EventSource.ends``: the values at each request's first and last offset."""
        if not len(self.values):
            return np.zeros(len(self.counts), self.values.dtype), np.zeros(
                len(self.counts), self.values.dtype
            )
        first = np.minimum(self.offsets[:-1], len(self.values) - 1)
        last = np.maximum(self.offsets[1:] - 1, 0)
        return self.values[first], self.values[last]


class ScaledEvents:
    """Another source's events divided by ``divisor`` (ns to s: 1e9), a chunk at a time: each
    value is the one ``values / divisor`` gives on the whole array. The next chunk is read and
    divided in a thread while the reader works on this one (``prefetched``)."""

    def __init__(self, source: EventSource, divisor: float) -> None:
        self.source = source
        self.divisor = divisor
        self.counts = source.counts

    def chunks(self, max_events: int = CHUNK_EVENTS) -> Iterator[tuple[int, int, np.ndarray]]:
        """As ``EventSource.chunks``, each chunk divided."""
        return prefetched(
            (first, end, values / self.divisor)
            for first, end, values in self.source.chunks(max_events)
        )

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        """As ``EventSource.ends``, divided (each the value its chunk's division gives)."""
        first, last = self.source.ends()
        return first / self.divisor, last / self.divisor


class PickedEvents:
    """The events of the requests ``keep`` picks of another source, renumbered in order (the
    kept requests are 0, 1, ...)."""

    def __init__(self, source: EventSource, keep: np.ndarray) -> None:
        self.source = source
        self.keep = np.asarray(keep, dtype=bool)
        self.counts = source.counts[self.keep]
        self._before = np.concatenate(([0], np.cumsum(self.keep))).astype(np.int64)

    def chunks(self, max_events: int = CHUNK_EVENTS) -> Iterator[tuple[int, int, np.ndarray]]:
        """As ``EventSource.chunks``: each of the source's chunks, its unkept requests left out
        (a chunk holds at most as many events as the source's)."""
        for first, end, values in self.source.chunks(max_events):
            new_first, new_end = int(self._before[first]), int(self._before[end])
            if new_end > new_first:
                keep = self.keep[first:end]
                yield new_first, new_end, values[np.repeat(keep, self.source.counts[first:end])]

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        """As ``EventSource.ends``: the kept requests'."""
        first, last = self.source.ends()
        return first[self.keep], last[self.keep]


_END = object()


def prefetched(items: Iterator[T]) -> Iterator[T]:
    """``items``, each next one produced in a thread while the one before is used: reading
    the events of a chunk (a gather from the mapped file, a division) lets the GIL go, so it
    runs beside the statistics of the chunk before. Closing it closes ``items``."""
    with ThreadPoolExecutor(1, thread_name_prefix="loadgen-events") as pool:
        try:
            ahead = pool.submit(next, items, _END)
            while (item := ahead.result()) is not _END:
                ahead = pool.submit(next, items, _END)
                yield item  # type: ignore[misc]  # not _END
        finally:
            ahead.cancel()
            wait([ahead])
            close = getattr(items, "close", None)
            if close is not None:
                close()


def materialized(source: EventSource) -> tuple[np.ndarray, np.ndarray]:
    """The source's events and offsets laid out whole in memory (request i's at
    values[offsets[i]:offsets[i+1]]): for the views that hold every event by definition
    (--save-detailed's per-request ITL lists, --plot-timeline) and for tests."""
    counts = np.asarray(source.counts, dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    parts = [values for _, _, values in source.chunks()]
    values = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return values, offsets

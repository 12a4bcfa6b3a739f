"""The mock server's timing records: the one writer (:class:`TimingRecorder`) and the one reader
(:class:`TimingRecords`) of their file format.

The format is an uncompressed NumPy ``.npz`` archive (it loads without pickle) of four arrays,
on ``time.perf_counter_ns()`` of the server's host:

- ``request_ids``: str ``[R]``, the ``x-request-id`` header, or the response id without one;
- ``arrival_ns``: int64 ``[R]``, when the request reached its handler;
- ``event_offsets``: int64 ``[R + 1]``, request ``r`` owns ``event_ns[off[r]:off[r + 1]]``;
- ``event_ns``: int64 ``[E]``, when each choices-bearing SSE event was written.

``--record-timings PATH`` saves it at shutdown and ``GET /timings`` serves it so far;
docs/mock-server.md describes it for users.
"""

from __future__ import annotations

import io
import os
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np


class TimingsSaveError(Exception):
    """The timing records could not be written to their file."""


class TimingRecorder:
    """Server-side instants of generation requests, on ``time.perf_counter_ns()``.

    Per request: its id, its arrival (handler entry) and one instant per choices-bearing SSE
    event, taken right before the write that carried it (events of one write share it).
    """

    def __init__(self) -> None:
        self.request_ids: list[str] = []
        self.arrival_ns = array("q")
        self.event_ns: list[array] = []

    def add(self, request_id: str, arrival_ns: int) -> array:
        """Record a request's arrival; return the array its event instants are appended to."""
        events = array("q")
        self.request_ids.append(request_id)
        self.arrival_ns.append(arrival_ns)
        self.event_ns.append(events)
        return events

    def arrays(self) -> dict[str, np.ndarray]:
        """The records as arrays: ``request_ids``, ``arrival_ns``, ``event_offsets``, ``event_ns``.

        Request i's event instants are ``event_ns[event_offsets[i]:event_offsets[i + 1]]``.
        """
        counts = [len(events) for events in self.event_ns]
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        events = np.empty(int(offsets[-1]), dtype=np.int64)
        for i, chunk in enumerate(self.event_ns):
            events[offsets[i] : offsets[i + 1]] = np.frombuffer(chunk, dtype=np.int64)
        return {
            "request_ids": np.array(self.request_ids, dtype=np.str_),
            "arrival_ns": np.frombuffer(self.arrival_ns, dtype=np.int64).copy(),
            "event_offsets": offsets,
            "event_ns": events,
        }

    def npz(self) -> bytes:
        """The records as an uncompressed ``.npz`` archive (loads without pickle)."""
        buffer = io.BytesIO()
        # mypy checks **arrays against savez's keyword allow_pickle (bool) too.
        np.savez(buffer, **self.arrays())  # type: ignore[arg-type]
        return buffer.getvalue()

    def save(self, path: Path) -> None:
        """Write the ``.npz`` archive to ``path`` (through a temporary file, then renamed)."""
        partial = path.with_name(path.name + ".partial")
        try:
            partial.write_bytes(self.npz())
            os.replace(partial, path)
        except OSError as exc:
            raise TimingsSaveError(f"cannot write the timing records to {path}: {exc}") from None


@dataclass
class TimingRecords:
    """Timing records read back from the archive :class:`TimingRecorder` writes."""

    request_ids: np.ndarray  # str [R]
    arrival_ns: np.ndarray  # int64 [R], handler entry
    event_offsets: np.ndarray  # int64 [R+1]; request r owns event_ns[off[r]:off[r+1]]
    event_ns: np.ndarray  # int64 [E], write instants of the token events

    @classmethod
    def load(cls, source: str | Path | IO[bytes]) -> TimingRecords:
        """Read an archive from a path or a binary file."""
        with np.load(source) as data:
            return cls(
                request_ids=data["request_ids"],
                arrival_ns=data["arrival_ns"],
                event_offsets=data["event_offsets"],
                event_ns=data["event_ns"],
            )

    @classmethod
    def from_bytes(cls, data: bytes) -> TimingRecords:
        """Read an archive held in memory (a ``GET /timings`` body)."""
        return cls.load(io.BytesIO(data))

    def events_of(self, row: int) -> np.ndarray:
        """The event write instants of record ``row``."""
        return self.event_ns[self.event_offsets[row] : self.event_offsets[row + 1]]

"""The mock server's timing records: the one writer (:class:`TimingRecorder`) and the one reader
(:class:`TimingRecords`) of their file format.

The format is an uncompressed NumPy ``.npz`` archive (it loads without pickle) of six arrays,
on ``time.perf_counter_ns()`` of the server's host:

- ``request_ids``: str ``[R]``, the ``x-request-id`` header, or the response id without one;
- ``arrival_ns``: int64 ``[R]``, when the request reached its handler;
- ``read_ns``: int64 ``[R]``, when the server's loop read the request's bytes (the last read of
  its connection before aiohttp made the request; parsing runs in that read), 0 where unknown;
- ``accepted_ns``: int64 ``[R]``, when its connection was accepted, 0 where unknown;
- ``event_offsets``: int64 ``[R + 1]``, request ``r`` owns ``event_ns[off[r]:off[r + 1]]``;
- ``event_ns``: int64 ``[E]``, when each choices-bearing SSE event was written.

``read_ns`` and ``accepted_ns`` split what comes before the handler (the server's accept, read
and parse queue) from the client's write; archives saved before they existed load with zeros.

``--record-timings PATH`` saves it at shutdown and ``GET /timings`` serves it so far;
docs/mock-server.md describes it for users.
"""

from __future__ import annotations

import asyncio
import io
import os
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns
from typing import IO, Any

import numpy as np
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

PENDING_LIMIT = 100_000  # read stamps of requests whose handler never recorded them (GETs)


class TimingsSaveError(Exception):
    """The timing records could not be written to their file."""


class TimingRecorder:
    """Server-side instants of generation requests, on ``time.perf_counter_ns()``.

    Per request: its id, its arrival (handler entry), when its bytes were read and its
    connection accepted (with ``install``), and one instant per choices-bearing SSE event,
    taken right before the write that carried it (events of one write share it).
    """

    def __init__(self) -> None:
        self.request_ids: list[str] = []
        self.arrival_ns = array("q")
        self.read_ns = array("q")
        self.accepted_ns = array("q")
        self.event_ns: list[array] = []
        # x-request-id -> (read, accepted), from aiohttp making the request to its handler.
        self.pending: dict[str, tuple[int, int]] = {}

    def add(self, request_id: str, arrival_ns: int) -> array:
        """Record a request's arrival; return the array its event instants are appended to."""
        read_ns, accepted_ns = self.pending.pop(request_id, (0, 0))
        events = array("q")
        self.request_ids.append(request_id)
        self.arrival_ns.append(arrival_ns)
        self.read_ns.append(read_ns)
        self.accepted_ns.append(accepted_ns)
        self.event_ns.append(events)
        return events

    def install(self, server: web.Server) -> None:
        """Stamp each connection's accept and reads, and hand a request's stamps to ``add`` by
        its x-request-id (per connection and per read: nothing per token)."""
        made, make_request = server.connection_made, server.request_factory
        reads: dict[RequestHandler, list[int]] = {}  # [accepted, last read]

        def connection_made(handler: RequestHandler, transport: asyncio.Transport) -> None:
            made(handler, transport)
            stamps = reads[handler] = [perf_counter_ns(), 0]
            # aiohttp's handler has slots, and uvloop binds data_received when the transport is
            # made: the transport is given a protocol that stamps each read, then passes it on.
            transport.set_protocol(_Stamping(handler, stamps))

        def request_factory(message: Any, payload: Any, protocol: Any, *args: Any) -> Any:
            request_id = message.headers.get("x-request-id")
            stamps = reads.get(protocol)
            if request_id is not None and stamps is not None:
                if len(self.pending) >= PENDING_LIMIT:
                    self.pending.clear()
                self.pending[request_id] = (stamps[1], stamps[0])
            return make_request(message, payload, protocol, *args)

        lost = server.connection_lost

        def connection_lost(handler: RequestHandler, exc: BaseException | None = None) -> None:
            lost(handler, exc)
            reads.pop(handler, None)

        server.connection_made = connection_made  # type: ignore[method-assign]
        server.connection_lost = connection_lost  # type: ignore[method-assign]
        server.request_factory = request_factory

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
            "read_ns": np.frombuffer(self.read_ns, dtype=np.int64).copy(),
            "accepted_ns": np.frombuffer(self.accepted_ns, dtype=np.int64).copy(),
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
    read_ns: np.ndarray | None = None  # int64 [R], the read of its bytes; 0: unknown
    accepted_ns: np.ndarray | None = None  # int64 [R], its connection's accept; 0: unknown

    @classmethod
    def load(cls, source: str | Path | IO[bytes]) -> TimingRecords:
        """Read an archive from a path or a binary file."""
        with np.load(source) as data:
            optional = {name: data[name] for name in ("read_ns", "accepted_ns") if name in data}
            return cls(
                request_ids=data["request_ids"],
                arrival_ns=data["arrival_ns"],
                event_offsets=data["event_offsets"],
                event_ns=data["event_ns"],
                **optional,
            )

    @classmethod
    def from_bytes(cls, data: bytes) -> TimingRecords:
        """Read an archive held in memory (a ``GET /timings`` body)."""
        return cls.load(io.BytesIO(data))

    def events_of(self, row: int) -> np.ndarray:
        """The event write instants of record ``row``."""
        return self.event_ns[self.event_offsets[row] : self.event_offsets[row + 1]]


class _Stamping(asyncio.Protocol):
    """A connection's protocol in front of aiohttp's handler: notes when each read came, then
    hands every callback to the handler."""

    def __init__(self, handler: RequestHandler, stamps: list[int]) -> None:
        self.handler = handler
        self.stamps = stamps

    def data_received(self, data: bytes, _now: Callable[[], int] = perf_counter_ns) -> None:
        self.stamps[1] = _now()
        self.handler.data_received(data)

    def eof_received(self) -> None:
        self.handler.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.handler.connection_lost(exc)

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()

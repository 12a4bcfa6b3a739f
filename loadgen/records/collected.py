"""What a run collected: the workers' per-request records and what they said besides."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from loadgen.records.mapped import EventPlaces
from loadgen.records.request_blocks import RequestBlocks
from workers.protocol import RECORD_DTYPE, UNSENT_ROW, ConnectionStats


@dataclass
class Collected:
    """Everything the workers reported, one RECORD_DTYPE row per request (row i = request i)."""

    records: np.ndarray
    event_ns: np.ndarray  # request-major token-event instants (ns after t0)
    event_offsets: np.ndarray  # [N+1]
    errors: dict[int, str]
    texts: dict[int, str]
    t0_ns: int
    connections: int
    worker: np.ndarray  # the worker that reported each request; -1 when none did
    t0_wall: str = ""  # t0 as local wall-clock time, ISO 8601
    worker_problems: list[str] = field(default_factory=list)
    interrupted: bool = False
    loop_lag_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    worker_cpu_ns: list[int] = field(default_factory=list)  # CPU time of each worker's run
    worker_wall_ns: list[int] = field(default_factory=list)
    # What the workers saw of the server's connections, summed (ConnectionStats' fields).
    connection_stats: ConnectionStats = field(default_factory=ConnectionStats)
    # Each worker's placement, host and clock offset (WorkerPool.hosts), in worker order.
    hosts: list[dict] = field(default_factory=list)
    # False: the run kept no token event (both arrays empty); they are in its records file
    # (loadgen/records/events.py), read back from there
    events_kept: bool = True
    # True: the rows (records, worker, errors, texts) are in the run's records file, not yet
    # read back (loadgen/records/read_back.py's with_rows lays them out): all four empty.
    rows_in_file: bool = False
    # Which worker each request was sent to (its "owner"; the blocks with a request no
    # worker reported), and why each lost worker is gone: what the requests no worker
    # reported fail with (``mark_lost``).
    requests: RequestBlocks | None = None
    lost_workers: dict[int, str] = field(default_factory=dict)
    # Read back with the rows: where the run's events lie in its records file, and the
    # scraped series chunks the file holds.
    event_places: EventPlaces | None = None
    file_series: list[bytes] = field(default_factory=list)
    # And, where asked (a --duration run's blocks let theirs go once written), the values
    # the writer's RequestBlocks held, by name, as the file's rows say (-1: no row).
    file_values: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def num_requests(self) -> int:
        """The run's requests (its rows, once laid out)."""
        return self.requests.size if self.requests is not None else len(self.records)


def mark_lost(collected: Collected) -> None:
    """The requests no worker reported become failed rows whose error says why: their worker
    was lost, or failed, or never said. (A reported request with no row, in a records file
    that lost it, would be lost too, not a zero row: the writer keeps what the file refuses.)"""
    records, errors = collected.records, collected.errors
    missing = np.flatnonzero(collected.worker < 0)
    if not len(missing):
        return
    owner = np.full(len(missing), -1, dtype=np.int16)
    if collected.requests is not None:  # (a reported request whose row a file lost: -1)
        owner = collected.requests.take("owner", missing, gone=-1)
    reason = "; ".join(collected.worker_problems) or "no record arrived for this request"
    records[missing] = np.array(UNSENT_ROW, dtype=RECORD_DTYPE)
    records["index"][missing] = missing
    for i, w in zip(missing.tolist(), owner.tolist(), strict=True):
        errors[i] = f"lost: {collected.lost_workers.get(w, reason)}"


def assemble_events(
    n_events: np.ndarray, batches: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray]:
    """Lay batches of events out request-major: request i at offsets[i]:offsets[i+1].

    ``n_events[i]`` is request i's event count; each batch is (indices, counts, events) with
    its requests' events one after the other in the order of ``indices``.
    """
    counts = n_events.astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    out = np.empty(offsets[-1], dtype=np.int64)
    for batch in batches:
        place_events(out, offsets, batch)
    return out, offsets


def place_events(
    out: np.ndarray, offsets: np.ndarray, batch: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    """Write one batch's events into ``out`` at their requests' ``offsets``."""
    indices, batch_counts, events = batch
    if len(events) == 0:
        return
    batch_starts = np.concatenate(([0], np.cumsum(batch_counts)[:-1]))
    shift = np.repeat(offsets[indices] - batch_starts, batch_counts)
    out[np.arange(len(events)) + shift] = events

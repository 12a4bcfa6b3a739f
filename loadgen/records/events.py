"""A run's token events where they live: in its records file, read back one batch at a time.

The coordinator keeps no token event of a run in memory: each worker batch goes to the records
file as it arrives (a temporary one where none is kept: ``temporary_records_path``), and what
needs the events reads them back from the file, batch by batch (``event_chunks``), or laid out
request-major (``file_events``). A batch the file could not take (a full disk) is kept in memory
by the writer's observer instead, and joins the file's batches here.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from loadgen.records.arrow_file import MAGIC_LEN, SUFFIX
from loadgen.records.collected import assemble_events

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

"""The records file: one Arrow IPC file per run, written batch by batch while the run goes.

Layout (docs/records.md says why Arrow and what every column means):
- the schema's metadata ``loadgen.records`` holds ``RunStart`` as JSON, with ``format`` and
  ``format_version``;
- record batches of one row per request (``COLUMNS``): each RECORDS message a worker sent,
  or during a run those that came within ``WRITE_EVERY_S`` of each other, as one;
- during the run, the scraped server metrics (server_series.py): empty batches whose custom
  metadata ``loadgen.series`` holds a chunk of them as JSON (older readers skip them);
- after the run, the requests no worker reported (their error says why), then an empty batch
  whose custom metadata ``loadgen.end`` holds ``RunEnd`` as JSON; the footer closes the file.

A run that crashes leaves a file with no end batch and no footer, perhaps cut inside a batch;
read.py reads it up to its last complete batch. A run's writer writes the batches of a second
together (``write_every_s``): at a low rate a worker's 50 ms batches hold a request each, and
each batch costs the file's footer an entry the writer holds to the end (24 bytes: 2 MB an
hour at 20 batches a second) and the read at the run's end a pass (about 100 us); a crash
loses at most that second's batches.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import logging
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from loadgen.records.collected import Collected
from loadgen.records.model import RunEnd, RunStart
from loadgen.records.request_blocks import RequestBlocks
from workers.protocol import RECORD_DTYPE

log = logging.getLogger(__name__)

FORMAT = "loadgen-records"
FORMAT_VERSION = 1
START_KEY = b"loadgen.records"
END_KEY = b"loadgen.end"
SERIES_KEY = b"loadgen.series"
SUFFIX = ".records.arrow"
MAGIC = b"ARROW1"  # the file format's first and last bytes
MAGIC_LEN = 8  # "ARROW1" padded: the file format's stream starts after it

# Batches not written yet are written at once past either bound (rows of 80 bytes, events of 8
# in memory: at most ~10 MB), whatever ``write_every_s`` says.
PENDING_ROWS = 8192
PENDING_EVENTS = 1 << 20

# Every column, in order (docs/records.md describes each). A worker's "none" (-1 for an
# instant or a count, NaN for a server figure) is written as null.
COLUMNS: list[tuple[str, pa.DataType]] = [
    ("index", pa.int64()),
    ("request_id", pa.string()),
    ("worker", pa.int16()),
    ("scheduled_ns", pa.int64()),
    ("released_ns", pa.int64()),
    ("sent_ns", pa.int64()),
    ("end_ns", pa.int64()),
    ("events_ns", pa.list_(pa.int64())),
    ("status", pa.int32()),
    ("success", pa.bool_()),
    ("input_tokens", pa.int32()),
    ("prompt_tokens", pa.int32()),
    ("completion_tokens", pa.int32()),
    ("input_sequences", pa.int32()),
    ("connect_ns", pa.int64()),
    ("resent", pa.bool_()),
    ("truncated", pa.bool_()),
    ("text_capped", pa.bool_()),  # its text was cut to the cap (absent before: read as false)
    ("server_queue_s", pa.float64()),
    ("server_ttft_s", pa.float64()),
    ("cached_tokens", pa.int32()),  # served from the prefix cache (absent before: read as null)
    ("conversation", pa.int64()),  # --multi-turn: the request's conversation; else null
    ("turn", pa.int32()),  # --multi-turn: its turn in the conversation (0: the first); else null
    ("input_audio_s", pa.float64()),  # openai-audio: the upload's duration (RTFx); else null
    ("error", pa.string()),
    ("text", pa.string()),
]
# Record fields (each column has its field's name) stored as they are, and those whose -1 is
# stored as null.
PLAIN_COLUMNS = ("status", "connect_ns")
MINUS_ONE_IS_NULL = (
    "released_ns", "sent_ns", "end_ns", "prompt_tokens", "completion_tokens", "cached_tokens",
)  # fmt: skip
NAN_IS_NULL = ("server_queue_s", "server_ttft_s")
BOOL_COLUMNS = ("success", "resent", "truncated", "text_capped")


def records_path(result_path: str) -> str:
    """The records file beside a result JSON: ``NAME.json`` -> ``NAME.records.arrow``."""
    stem = result_path[: -len(".json")] if result_path.endswith(".json") else result_path
    return stem + SUFFIX


def schema(start: RunStart) -> pa.Schema:
    """The file's schema: COLUMNS, with the run's start as metadata."""
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, **asdict(start)}
    return pa.schema(COLUMNS, metadata={START_KEY: _dumps(meta)})


class RecordsWriter:
    """Writes a run's records file as the run goes (a ``RecordsSink`` for the worker pool).

    The file opens at t0 (``start``), each worker batch is written when it arrives (or with
    those that come within ``write_every_s`` of it: ``flush`` writes them; the session's
    observer calls it when the time is up), and ``finish`` adds the unreported requests and
    the end. A write that fails (a full disk) stops the file with a warning; the run and its
    report go on.
    """

    def __init__(
        self,
        path: str,
        start: RunStart,
        scheduled_ns: np.ndarray,
        input_tokens: np.ndarray,
        input_sequences: np.ndarray,
        request_id_prefix: str | None,
        turns: np.ndarray | None = None,
        input_audio_s: np.ndarray | None = None,
        temporary: bool = False,
        write_every_s: float = 0.0,
    ) -> None:
        self.path = path
        self.write_every_s = write_every_s
        # The batches not written yet (worker, rows, events, errors, texts), their rows and
        # events, and when the first came (time.monotonic).
        self.pending: list[tuple[int, np.ndarray, np.ndarray, dict[int, str], dict[int, str]]]
        self.pending = []
        self.pending_rows = self.pending_events = 0
        self.pending_since = 0.0
        # Removed when closed: the run keeps no records file, this one holds its token events
        # while it runs (loadgen/records/events.py).
        self.temporary = temporary
        # The batches the file could not take (a full disk), for the run's report: their
        # rows (worker, rows, errors, texts) and events (indices, counts, events)
        self.kept_rows: list[tuple[int, np.ndarray, dict[int, str], dict[int, str]]] = []
        self.kept_events: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.kept_series: list[bytes] = []  # and its server-metrics chunks (JSON)
        self.input_audio_s = input_audio_s
        # --multi-turn: [N, 3] conversation, turn, think ns; a later turn's scheduled_ns is
        # written as its intended instant, from the end of the turn before (records/turns.py).
        self.turns = turns
        self.end_ns = np.full(len(scheduled_ns) if turns is not None else 0, -1, dtype=np.int64)
        self.run_start = start
        # Each row's offset, prompt length and input sequences, by request index: let go a
        # block at a time once written (a --duration run's blocks join: topup.py).
        self.values = RequestBlocks(
            scheduled_ns=np.asarray(scheduled_ns, dtype=np.int64),
            input_tokens=np.asarray(input_tokens, dtype=np.int64),
            input_sequences=np.asarray(input_sequences, dtype=np.int64),
        )
        self.request_id_prefix = request_id_prefix
        self.failure: str | None = None
        self._file: pa.NativeFile | None = None
        self._writer: ipc.RecordBatchFileWriter | None = None
        self._schema = schema(start)

    def start(self, t0_ns: int, t0_wall: str, connections: int) -> None:
        """Open the file at t0, its metadata the run's start."""
        self.run_start = dataclasses.replace(
            self.run_start, t0_ns=t0_ns, t0_wall=t0_wall, connections=connections
        )
        self._guard(self._open)

    def _open(self) -> None:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._schema = schema(self.run_start)
        # Buffered, and flushed after each batch: one write() per batch, on disk once written.
        self._file = pa.BufferedOutputStream(pa.OSFile(self.path, "wb"), 1 << 20)
        self._writer = ipc.new_file(self._file, self._schema)
        # On disk before the first batch (up to a second later): a run killed before it
        # leaves a file that says so, not an empty one.
        self._file.flush()

    def write(
        self,
        worker: int,
        rows: np.ndarray,
        event_ns: np.ndarray,
        errors: dict[int, str],
        texts: dict[int, str],
    ) -> None:
        """One batch of a worker's records, as it arrived: written now, or with those that
        come within ``write_every_s`` of the first not written (up to PENDING_ROWS rows or
        PENDING_EVENTS events)."""
        if not self.pending:
            self.pending_since = time.monotonic()
        self.pending.append((worker, rows, event_ns, errors, texts))
        self.pending_rows += len(rows)
        self.pending_events += len(event_ns)
        if (
            time.monotonic() - self.pending_since >= self.write_every_s
            or self.pending_rows >= PENDING_ROWS
            or self.pending_events >= PENDING_EVENTS
        ):
            self.flush()

    def flush(self) -> None:
        """Write the batches not written yet, as one."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        self.pending_rows = self.pending_events = 0
        if len(pending) == 1:
            worker, rows, event_ns, errors, texts = pending[0]
            workers = np.full(len(rows), worker, dtype=np.int16)
        else:
            rows = np.concatenate([p[1] for p in pending])
            event_ns = np.concatenate([p[2] for p in pending])
            workers = np.repeat(
                np.array([p[0] for p in pending], dtype=np.int16), [len(p[1]) for p in pending]
            )
            errors = {k: v for p in pending for k, v in p[3].items()}
            texts = {k: v for p in pending for k, v in p[4].items()}
        self._write(lambda: self._batch(rows, workers, event_ns, errors, texts))
        if self.failure is None:  # in the file, their values with them
            self.values.done(rows["index"])
            return
        for worker, rows, event_ns, errors, texts in pending:
            # kept, so the report still has them (and their values are held)
            self.kept_rows.append((worker, rows.copy(), dict(errors), dict(texts)))
            if len(event_ns):
                self.kept_events.append(
                    (rows["index"].copy(), rows["n_events"].copy(), event_ns.copy())
                )

    def write_series(self, chunk: dict[str, Any]) -> None:
        """A chunk of scraped server metrics (server_series.chunk_json), as it comes."""
        encoded = _dumps(chunk)
        self.flush()  # the file's batches in the order they came
        self._write(self._empty_batch, {SERIES_KEY: encoded})
        if self.failure is not None:  # kept, so the report still has them
            self.kept_series.append(encoded)

    def _empty_batch(self) -> pa.RecordBatch:
        no_rows = np.zeros(0, dtype=RECORD_DTYPE)
        return self._batch(no_rows, np.zeros(0, np.int16), np.zeros(0, np.int64), {}, {})

    def finish(self, collected: Collected, end: RunEnd) -> None:
        """The requests no worker reported, then the run's end; the file is then complete
        (a temporary one is removed)."""
        self.flush()
        if self.temporary:
            self.close()
            return
        lost = np.flatnonzero(collected.worker < 0)
        if len(lost):
            rows = collected.records[lost]
            errors = {int(i): collected.errors.get(int(i), "") for i in lost}
            empty = np.zeros(0, dtype=np.int64)
            unreported = np.full(len(rows), -1, np.int16)
            self._write(lambda: self._batch(rows, unreported, empty, errors, {}))
        self._write(self._empty_batch, {END_KEY: _dumps(_end_json(end))})
        self.close()

    def close(self) -> None:
        """Write the footer and close the file (also after a failure: what is there stays)."""
        self.flush()
        writer, self._writer = self._writer, None
        if writer is not None:
            self._guard(writer.close)
        file, self._file = self._file, None
        if file is not None:
            self._guard(file.close)  # flushes: a full disk fails here too
        if self.temporary:
            with contextlib.suppress(OSError):
                os.remove(self.path)

    def _write(self, batch: Any, custom_metadata: dict[bytes, bytes] | None = None) -> None:
        """Write the batch ``batch()`` builds, unless the file is closed or has failed."""
        if (writer := self._writer) is not None and (file := self._file) is not None:
            self._guard(lambda: writer.write_batch(batch(), custom_metadata=custom_metadata))
            self._guard(file.flush)

    def _guard(self, write: Any) -> None:
        try:
            write()
        except (OSError, pa.ArrowException) as exc:
            if self.failure is None:
                self.failure = f"records file {self.path}: {exc}"
                then = "token events stay in memory" if self.temporary else "the records stop here"
                log.warning(f"warning: {self.failure}; {then}")
            self._writer = None

    def _batch(
        self,
        rows: np.ndarray,
        workers: np.ndarray,
        event_ns: np.ndarray,
        errors: dict[int, str],
        texts: dict[int, str],
    ) -> pa.RecordBatch:
        index = rows["index"]
        offsets = np.concatenate(([0], np.cumsum(rows["n_events"], dtype=np.int32)))
        prefix = self.request_id_prefix
        # -1 for a request whose values went with its block, written before: only the lost
        # rows of a file damaged under the run (its rows not read back) can be one.
        scheduled = self.values.take("scheduled_ns", index, gone=-1)
        no_turn = np.ones(len(index), dtype=bool)
        conversation = turn = np.zeros(len(index), dtype=np.int64)
        if self.turns is not None:
            # A turn's row comes after the row of the turn before it (same worker, ended first).
            self.end_ns[index] = rows["end_ns"]
            conversation, turn, think = (self.turns[index, j] for j in range(3))
            before = self.end_ns[np.maximum(index - 1, 0)]
            later = (turn > 0) & (before >= 0)
            scheduled = np.where(later, before + think, scheduled)
            no_turn = np.zeros(len(index), dtype=bool)
        columns: dict[str, pa.Array] = {
            "index": _numbers(index, "index"),
            "request_id": _request_ids(prefix, index),
            "worker": _numbers(workers, "worker", nulls=workers < 0),
            "scheduled_ns": _numbers(scheduled, "scheduled_ns"),
            "conversation": _numbers(conversation, "conversation", nulls=no_turn),
            "turn": _numbers(turn, "turn", nulls=no_turn),
            "input_audio_s": _audio_column(self.input_audio_s, index),
            "events_ns": pa.ListArray.from_arrays(
                _numbers(offsets, pa.int32()), _numbers(event_ns, pa.int64())
            ),
            "input_tokens": _numbers(
                self.values.take("input_tokens", index, gone=-1), "input_tokens"
            ),
            "input_sequences": _numbers(
                self.values.take("input_sequences", index, gone=-1), "input_sequences"
            ),
            "error": _texts_at(index, errors),
            "text": _texts_at(index, texts),
        }
        for column in PLAIN_COLUMNS:
            columns[column] = _numbers(rows[column], column)
        for column in MINUS_ONE_IS_NULL:
            columns[column] = _numbers(rows[column], column, nulls=rows[column] == -1)
        for column in NAN_IS_NULL:
            columns[column] = _numbers(rows[column], column, nulls=np.isnan(rows[column]))
        for column in BOOL_COLUMNS:
            columns[column] = _bits(rows[column].astype(bool))
        return pa.record_batch([columns[name] for name, _ in COLUMNS], schema=self._schema)


# Arrays built from their buffers: pa.array() looks for pandas among its inputs' types and
# imports it, which cost the coordinator 0.4 s of CPU at the run's first batch.
_TYPES = dict(COLUMNS)
_NUMPY = {pa.int16(): "<i2", pa.int32(): "<i4", pa.int64(): "<i8", pa.float64(): "<f8"}


def _numbers(
    values: np.ndarray, column: str | pa.DataType, nulls: np.ndarray | None = None
) -> pa.Array:
    """A numeric column (or array of ``column``'s type) from numpy, null where ``nulls``."""
    arrow_type = _TYPES[column] if isinstance(column, str) else column
    data = np.ascontiguousarray(values, dtype=_NUMPY[arrow_type])
    null_count = int(nulls.sum()) if nulls is not None else 0
    validity = _bitmap(~nulls) if nulls is not None and null_count else None
    return pa.Array.from_buffers(
        arrow_type, len(data), [validity, pa.py_buffer(data)], null_count=null_count
    )


def _audio_column(input_audio_s: np.ndarray | None, index: np.ndarray) -> pa.Array:
    """The input_audio_s of the rows ``index``: all null in a run without audio."""
    if input_audio_s is None:
        return _numbers(np.zeros(len(index)), "input_audio_s", nulls=np.ones(len(index), bool))
    return _numbers(input_audio_s[index], "input_audio_s")


def _request_ids(prefix: str | None, index: np.ndarray) -> pa.Array:
    """The x-request-id of each request: ``prefix`` + its index (null without a prefix)."""
    if prefix is None:
        return pa.nulls(len(index), pa.string())
    return _texts([prefix + number for number in map(str, index.tolist())])


def _texts_at(index: np.ndarray, values: dict[int, str]) -> pa.Array:
    """A string column of the batch's requests: ``values[i]``, null where absent or empty
    (most requests have no error and no kept text: no work per row then)."""
    if not values:
        return pa.nulls(len(index), pa.string())
    return _texts([values.get(i) or None for i in index.tolist()])


def _texts(values: list[str | None]) -> pa.Array:
    """A string column, null where a value is None."""
    encoded = [value.encode() if value is not None else b"" for value in values]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype("<i4")
    nulls = np.fromiter((value is None for value in values), dtype=bool, count=len(values))
    null_count = int(nulls.sum())
    validity = _bitmap(~nulls) if null_count else None
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(values), buffers, null_count=null_count)


def _bits(values: np.ndarray) -> pa.Array:
    """A bool column from numpy."""
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, _bitmap(values)])


def _bitmap(values: np.ndarray) -> pa.Buffer:
    """Arrow's bit-packed layout of booleans (least significant bit first)."""
    return pa.py_buffer(np.packbits(values, bitorder="little"))


def _end_json(end: RunEnd) -> dict[str, Any]:
    out = asdict(end)
    out["loop_lag_ns"] = _array_b64(end.loop_lag_ns, "<i8")
    out["output_lens"] = _array_b64(end.output_lens, "<i8")
    return out


def _array_b64(values: np.ndarray, dtype: str) -> str:
    """An integer array as base64 of its little-endian bytes (exact, and compact in JSON)."""
    return base64.b64encode(np.ascontiguousarray(values, dtype=dtype).tobytes()).decode()


def _dumps(value: Any) -> bytes:
    """JSON as the result file writes it: ``inf`` as ``Infinity``, sets as sorted lists."""

    def plain(obj: Any) -> Any:
        if isinstance(obj, set | frozenset):
            return sorted(obj)
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
        raise TypeError(f"cannot store {type(obj).__name__} in a records file")

    return json.dumps(value, default=plain).encode()


def move(path: str, destination: str) -> str:
    """Rename a closed records file; never over another run's file (a suffix -2, -3... then)."""
    if path == destination:
        return path
    target, n = destination, 1
    while os.path.exists(target):
        n += 1
        target = destination[: -len(SUFFIX)] + f"-{n}{SUFFIX}"
    os.replace(path, target)
    return target

"""Reading a records file (the layout: arrow_file.py), whole or cut short by a crash.

The file is read as the Arrow stream after its magic, up to its last complete batch, so every
batch written before a crash is still there; a closed file's footer is checked against that
stream. What is read is checked before it is used (checks.py): a forged or damaged file is
one ``RecordsFileError``, and nothing is allocated from the file's own claims unchecked.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute
import pyarrow.ipc as ipc

from loadgen.records.arrow_file import (
    BOOL_COLUMNS,
    COLUMNS,
    END_KEY,
    FORMAT,
    FORMAT_VERSION,
    MAGIC,
    MAGIC_LEN,
    MINUS_ONE_IS_NULL,
    NAN_IS_NULL,
    PLAIN_COLUMNS,
    SERIES_KEY,
    START_KEY,
)
from loadgen.records.checks import (
    RecordsFileError,
    check_columns,
    check_event_nulls,
    check_rows,
    checked_end,
    checked_start,
    parse_json,
)
from loadgen.records.events import RequestOrderEvents
from loadgen.records.mapped import MappedFile, PlacesBuilder, windows
from loadgen.records.model import RunEnd, RunRecords, RunStart
from loadgen.records.server_series import MetricSeries, SeriesError, series_of
from workers.protocol import RECORD_DTYPE, UNSENT_ROW


def read_records(path: str) -> RunRecords:
    """A run's records file, whole or cut short by a crash (then ``end`` is None): every
    complete batch up to where it stops. A file that is not one loadgen wrote, or is damaged
    where a crash cannot damage it, is a RecordsFileError (loadgen/records/checks.py). Its
    token events stay in the file: the file is read once, through a memory map, each batch
    checked and noted (its rows, and where its requests' events lie), and the report reads the
    events back from the file a chunk at a time (``RequestOrderEvents``)."""
    if not os.path.isfile(path):
        raise RecordsFileError(f"records file {path}: No such file")
    try:
        mapped = MappedFile(path)
    except (OSError, ValueError) as exc:
        raise RecordsFileError(f"cannot read records file {path}: {exc}") from None
    try:
        return _read(_Scan(path, mapped))
    except UnicodeDecodeError:  # a column's name, or a metadata key
        raise RecordsFileError(f"{path}: a name in its schema is not UTF-8") from None
    except (OSError, pa.ArrowException) as exc:
        raise RecordsFileError(f"cannot read records file {path}: {exc}") from None
    finally:
        mapped.close()
        pa.default_memory_pool().release_unused()  # the rows' tables, gone


def _read(scan: _Scan) -> RunRecords:
    """The run of a mapped records file; nothing it returns holds a buffer of the mapping."""
    start, rows, end_meta, series = _read_batches(scan)
    records = _records_of(start, rows, end_meta, scan)
    records.server_metrics = server_metrics_of(series, scan.path)
    return records


class _Scan:
    """One read of a mapped records file: where it is, and where its requests' events lie."""

    def __init__(self, path: str, mapped: MappedFile) -> None:
        self.path = path
        self.mapped = mapped
        self.places: PlacesBuilder | None = None  # once the file's start is read
        self.read_to = 0  # the end of its last complete batch


def _start_of(file_schema: pa.Schema, path: str) -> RunStart:
    """The run's start, from the schema's metadata, once the schema is checked."""
    raw_meta = (file_schema.metadata or {}).get(START_KEY)
    meta = parse_json(raw_meta, "metadata", path) if raw_meta is not None else {}
    if meta.get("format") != FORMAT:
        raise RecordsFileError(f"{path} is an Arrow file but not a loadgen records file")
    if meta.get("format_version") != FORMAT_VERSION:
        raise RecordsFileError(
            f"{path} has records format version {meta.get('format_version')!r}; this loadgen "
            f"reads version {FORMAT_VERSION}"
        )
    meta.pop("format")
    meta.pop("format_version")
    start = checked_start(meta, path)
    check_columns(file_schema, COLUMNS, path)
    return start


def _records_of(start: RunStart, rows: _Rows, end_meta: bytes | None, scan: _Scan) -> RunRecords:
    """The run of a file's start, rows and end, every part checked."""
    path = scan.path
    table, places = rows.table()
    end = None
    if end_meta is not None:
        end = checked_end(parse_json(end_meta, "run's end", path), start.num_requests, path)
        if end.num_requests is not None:  # --duration's blocks: the start knew block 0
            start = dataclasses.replace(
                start,
                num_requests=end.num_requests,
                schedule_sha256=end.schedule_sha256 or start.schedule_sha256,
            )
    elif start.config.get("duration") is not None and table.num_rows:
        # Torn (no end) in a --duration run: its blocks after the first, which the start did
        # not know, count as far as its rows reach (check_rows bounds what they may claim).
        reached = int(pa.compute.max(table["index"]).as_py()) + 1
        start = dataclasses.replace(start, num_requests=max(start.num_requests, reached))
    return _run_records(start, table, end, scan, places)


def server_metrics_of(chunks: list[bytes], path: str) -> list[MetricSeries] | None:
    """The scraped series of the file's chunks; None when it has none (older files too)."""
    if not chunks:
        return None
    try:
        return series_of(parse_json(chunk, "server metrics", path) for chunk in chunks)
    except SeriesError as exc:
        raise RecordsFileError(f"{path}: {exc}") from None


def _read_batches(scan: _Scan) -> tuple[RunStart, _Rows, bytes | None, list[bytes]]:
    """The run's start, its rows (taken from the batches as the stream is read) and the end's
    metadata, read as the stream the file starts with, up to its last complete batch: a file
    the run did not close (a crash, a full disk) has no footer. A closed file's footer must
    name the same batches. Also the chunks of scraped server metrics, in file order."""
    path, size = scan.path, scan.mapped.size
    source = pa.BufferReader(scan.mapped.buffer)
    head = source.read(len(MAGIC)) if size >= MAGIC_LEN else b""
    if head != MAGIC:
        raise RecordsFileError(f"{path} is not a loadgen records file (not an Arrow file)")
    closed = (
        size > 2 * MAGIC_LEN and scan.mapped.buffer.slice(size - len(MAGIC)).to_pybytes() == MAGIC
    )
    footer = _footer(scan.mapped.buffer) if closed else None
    blocks = _footer_blocks(scan.mapped.buffer) if footer is not None else None
    source.seek(MAGIC_LEN)
    stream = _StreamRead(source, scan)
    if closed:
        if not stream.ended:  # closed, yet a batch does not read: damaged, not cut by a crash
            raise RecordsFileError(f"{path}: batch {len(stream.places) + 1} is damaged")
        if footer is None or footer.num_record_batches != len(stream.places):
            raise RecordsFileError(f"{path}: its footer is damaged")
        if not footer.schema.equals(stream.file_schema, check_metadata=True):
            raise RecordsFileError(f"{path}: its footer is damaged")
        # Its batches are the stream's: the same bytes of the file, each at its place.
        places = stream.places
        if blocks is None or len(blocks) != len(places) or not _same_places(blocks, places):
            raise RecordsFileError(f"{path}: its footer is damaged")
    return stream.start, stream.rows, stream.end_meta, stream.series


def _footer(buffer: pa.Buffer) -> ipc.RecordBatchFileReader | None:
    """The file's footer as a reader of the batches it names; None where it does not read."""
    try:
        return ipc.open_file(pa.BufferReader(buffer))
    except (pa.ArrowException, OSError, ValueError, IndexError):
        return None


class _StreamRead:
    """The stream after the magic, read up to the first batch that is cut short or does not
    read, each batch checked whole and let go once its rows are taken (``_Rows``): whether
    the stream reached its end-of-stream marker, where each batch's message lies in the file
    (its first byte, its length), the end's metadata and the server-metrics chunks."""

    def __init__(self, source: pa.BufferReader, scan: _Scan) -> None:
        try:
            stream = ipc.open_stream(source)
            self.file_schema = stream.schema
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise RecordsFileError(
                f"{scan.path} is not a loadgen records file, or stops before its schema ({exc})"
            ) from None
        self.start = _start_of(self.file_schema, scan.path)
        self.rows = _Rows(self.file_schema, scan)
        self.places: list[tuple[int, int]] = []
        self.end_meta: bytes | None = None
        self.series: list[bytes] = []
        self.ended = False
        for window in windows(self._row_batches(stream, source, scan)):
            self.rows.take(window)

    def _row_batches(
        self, stream: ipc.RecordBatchStreamReader, source: pa.BufferReader, scan: _Scan
    ) -> Iterator[pa.RecordBatch]:
        """The batches of rows, read as the windows take them; the others noted."""
        while True:
            at = source.tell()
            try:
                batch, custom = _checked(*stream.read_next_batch_with_custom_metadata())
            except StopIteration:
                self.ended = True
                return
            except (pa.ArrowException, OSError, ValueError, IndexError):
                return  # cut short (or damaged): the rest is lost
            self.places.append((at, source.tell() - at))
            scan.mapped.read(source.tell() - scan.read_to)
            scan.read_to = source.tell()
            if custom is not None and END_KEY in custom:
                self.end_meta = custom[END_KEY]
            elif custom is not None and SERIES_KEY in custom:
                self.series.append(custom[SERIES_KEY])
            elif batch.num_rows:
                yield batch


# The Arrow file format's Block: where a message lies (its metadata's length includes its
# prefix and padding).
BLOCK = np.dtype([("offset", "<i8"), ("metadata", "<i4"), ("pad", "<i4"), ("body", "<i8")])
RECORD_BATCHES_FIELD = 3  # the Footer table's field of the record batches' blocks


def _footer_blocks(buffer: pa.Buffer) -> np.ndarray | None:
    """The blocks of the record batches the file's footer names, read from its flatbuffer
    (format/File.fbs: the root table Footer, its field ``recordBatches``); None where they do
    not read. Every position is checked before it is read."""
    size = buffer.size
    length = int.from_bytes(buffer.slice(size - len(MAGIC) - 4, 4).to_pybytes(), "little")
    start = size - len(MAGIC) - 4 - length
    if length < 8 or start < MAGIC_LEN:
        return None
    footer = buffer.slice(start, length).to_pybytes()

    def read(kind: str, at: int) -> int:
        if not 0 <= at <= len(footer) - struct.calcsize(kind):
            raise ValueError("outside the footer")
        return int(struct.unpack_from(kind, footer, at)[0])

    try:
        table = read("<I", 0)
        vtable = table - read("<i", table)
        fields = (read("<H", vtable) - 4) // 2
        field = read("<H", vtable + 4 + 2 * RECORD_BATCHES_FIELD) if fields > 3 else 0
        if field == 0:
            return np.zeros(0, BLOCK)
        vector = table + field + read("<I", table + field)
        count = read("<I", vector)
        if vector + 4 + BLOCK.itemsize * count > len(footer):
            return None
    except ValueError:
        return None
    return np.frombuffer(footer, BLOCK, count=count, offset=vector + 4)


def _same_places(blocks: np.ndarray, places: list[tuple[int, int]]) -> bool:
    """Each block names the message at its place: the same first byte, the same length."""
    at = np.array(places, dtype=np.int64).reshape(-1, 2)
    return bool(
        np.array_equal(blocks["offset"], at[:, 0])
        and np.array_equal(blocks["metadata"].astype(np.int64) + blocks["body"], at[:, 1])
    )


class _Rows:
    """The rows of a file's batches, taken a window at a time as the stream is read (a decoded
    batch holds ~15 KB, and an hour's run writes tens of thousands: ``windows`` bounds what
    is held), their events_ns lists replaced by their lengths (int32), and where their events
    lie in the file; each window's pages are let go after it."""

    def __init__(self, file_schema: pa.Schema, scan: _Scan) -> None:
        self.file_schema = file_schema
        # Each batch's events_ns lists as their counts: the events stay in the file.
        self.at = file_schema.get_field_index("events_ns")
        self.counted = file_schema.set(self.at, pa.field("events_ns", pa.int32()))
        self.scan = scan
        self.places = PlacesBuilder()
        self.parts: list[pa.Table] = []

    def take(self, window: list[pa.RecordBatch]) -> None:
        """The rows of a window of batches (as they lie in the mapped file)."""
        path = self.scan.path
        try:
            table = pa.Table.from_batches(window, schema=self.file_schema)
            events = table.column(self.at)
            check_event_nulls(events, path)
            lengths = pa.compute.list_value_length(events)
            rows = table.set_column(self.at, self.counted.field(self.at), lengths)
            rows = rows.combine_chunks()
            index = rows["index"].to_numpy(zero_copy_only=False).astype(np.int64)
            self.places.note_column(index, events, self.scan.mapped)
        except (pa.ArrowException, ValueError) as exc:
            raise RecordsFileError(f"{path}: its batches do not fit its schema ({exc})") from None
        self.parts.append(rows)
        self.scan.mapped.release()

    def table(self) -> tuple[pa.Table, PlacesBuilder]:
        """Every row taken (a chunk per window: each column is laid out whole only as it is
        read, in _run_records) and where their events lie."""
        return pa.concat_tables(self.parts or [self.counted.empty_table()]), self.places


def _checked(batch: pa.RecordBatch, custom: Any) -> tuple[pa.RecordBatch, Any]:
    """A batch whose buffers hold what its metadata says (offsets in bounds, valid UTF-8):
    nothing is read past them. ArrowInvalid when they do not."""
    batch.validate(full=True)
    return batch, custom


def _run_records(
    start: RunStart, table: pa.Table, end: RunEnd | None, scan: _Scan, places: PlacesBuilder
) -> RunRecords:
    """Rows in arrival order -> request-major arrays; requests with no row are lost."""
    n, path = start.num_requests, scan.path
    index = table["index"].to_numpy()
    check_rows(table, index, n, path)
    records = np.zeros(n, dtype=RECORD_DTYPE)
    records[:] = np.array(UNSENT_ROW, dtype=RECORD_DTYPE)
    records["index"] = np.arange(n)
    worker = np.full(n, -1, dtype=np.int16)
    scheduled = np.zeros(n, dtype=np.int64)
    input_tokens = np.zeros(n, dtype=np.int64)
    sequences = np.ones(n, dtype=np.int64)
    counts = table["events_ns"].to_numpy(zero_copy_only=False).astype(np.int64)
    fill_rows(records, worker, table, index, counts)
    scheduled[index] = table["scheduled_ns"].to_numpy()
    input_tokens[index] = table["input_tokens"].to_numpy()
    sequences[index] = table["input_sequences"].to_numpy()
    events = RequestOrderEvents(path, n, places=places.places(n, scan.read_to))
    conversation = turn = None
    if "turn" in table.column_names and table["turn"].null_count < len(index):
        conversation = np.full(n, -1, dtype=np.int64)
        turn = np.full(n, -1, dtype=np.int64)
        conversation[index] = table["conversation"].fill_null(-1).to_numpy()
        turn[index] = table["turn"].fill_null(-1).to_numpy()
    input_audio_s = None
    if "input_audio_s" in table.column_names and table["input_audio_s"].null_count < len(index):
        input_audio_s = np.zeros(n, dtype=np.float64)
        input_audio_s[index] = table["input_audio_s"].fill_null(0.0).to_numpy()
    errors = strings(index, table["error"])
    seen = np.zeros(n, bool)
    seen[index] = True
    lost = np.flatnonzero(~seen)
    for i in lost:
        errors[int(i)] = "lost: the records file has no row for this request"
    return RunRecords(
        start=start,
        end=end,
        records=records,
        worker=worker,
        scheduled_ns=scheduled,
        input_tokens=input_tokens,
        input_sequences=sequences,
        event_ns=np.zeros(0, np.int64),
        event_offsets=events.offsets,
        errors=errors,
        texts=strings(index, table["text"]),
        conversation=conversation,
        turn=turn,
        input_audio_s=input_audio_s,
        events=events,
    )


def fill_rows(
    records: np.ndarray,
    worker: np.ndarray,
    table: pa.Table,
    index: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Put a table's rows into the run's request-major arrays at ``index`` (``counts``: each
    row's token events): RECORD_DTYPE's fields from their columns (null as -1 or NaN), and the
    worker that reported each."""
    records["index"][index] = index
    records["n_events"][index] = counts
    for column in (*PLAIN_COLUMNS, *MINUS_ONE_IS_NULL):
        if column in table.column_names:  # "cached_tokens": absent from older files
            records[column][index] = table[column].fill_null(-1).to_numpy()
    for column in NAN_IS_NULL:
        records[column][index] = table[column].to_numpy(zero_copy_only=False)
    for column in BOOL_COLUMNS:
        if column in table.column_names:  # "truncated", "text_capped": absent from older files
            records[column][index] = table[column].to_numpy(zero_copy_only=False)
    worker[index] = table["worker"].fill_null(-1).to_numpy()


def strings(index: np.ndarray, column: pa.ChunkedArray) -> dict[int, str]:
    """{request index: value} of a string column's non-null values."""
    if column.null_count == len(column):  # most rows have none: no Python object made for them
        return {}
    valid = column.is_valid()
    picked = index[valid.to_numpy(zero_copy_only=False)] if column.null_count else index
    values = column.filter(valid) if column.null_count else column
    return dict(zip(picked.tolist(), values.to_pylist(), strict=True))

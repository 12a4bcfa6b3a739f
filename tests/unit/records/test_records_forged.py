"""Forged and damaged records files: each is refused with one line naming the file and what is
wrong (`loadgen report` and `loadgen compare` exit 2, no traceback), and nothing is allocated
from what the file claims."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from click.testing import CliRunner
from test_records_file import N, write_run

from loadgen.cli.compare import compare_command
from loadgen.cli.report import report_command
from loadgen.records.arrow_file import END_KEY, MAGIC_LEN, START_KEY
from loadgen.records.checks import MAX_UNREPORTED, RecordsFileError
from loadgen.records.read import _footer_blocks, read_records

Batch = tuple[pa.RecordBatch, pa.KeyValueMetadata | None]


def real(tmp_path: Path) -> Path:
    path = tmp_path / "real.records.arrow"
    write_run(path)
    return path


def forge(
    tmp_path: Path,
    meta: Callable[[dict], dict | bytes] = lambda m: m,
    schema: Callable[[pa.Schema], pa.Schema] = lambda s: s,
    batches: Callable[[list[Batch], pa.Schema], list[Batch]] = lambda b, s: b,
) -> Path:
    """A real run's file rewritten with its start metadata, schema or batches changed."""
    reader = ipc.open_file(str(real(tmp_path)))
    original = [reader.get_batch_with_custom_metadata(i) for i in range(reader.num_record_batches)]
    start = meta(json.loads(reader.schema.metadata[START_KEY]))
    raw = start if isinstance(start, bytes) else json.dumps(start).encode()
    new_schema = schema(reader.schema).with_metadata({START_KEY: raw})
    out = tmp_path / "forged.records.arrow"
    with ipc.new_file(str(out), new_schema) as sink:
        for batch, custom in batches(original, new_schema):
            columns = [batch.column(name) for name in new_schema.names]
            sink.write_batch(pa.record_batch(columns, schema=new_schema), custom_metadata=custom)
    return out


def refused(path: Path, reason: str) -> None:
    """read_records refuses ``path`` saying ``reason``, and both commands say it in one line and
    exit 2."""
    with pytest.raises(RecordsFileError, match=reason):
        read_records(str(path))
    for command, args in ((report_command, [str(path)]), (compare_command, [str(path)] * 2)):
        result = CliRunner().invoke(command, args)
        assert result.exit_code == 2, result.output
        assert isinstance(result.exception, SystemExit)
        (line,) = result.stderr.splitlines()
        assert line.startswith("error: ") and reason.split("(")[0] in line


def unended(batches: list[Batch], schema: pa.Schema) -> list[Batch]:
    """The batches of a run that crashed before its end."""
    return [(b, c) for b, c in batches if c is None or END_KEY not in c]


def without(name: str) -> Callable[[pa.Schema], pa.Schema]:
    return lambda schema: schema.remove(schema.get_field_index(name))


def test_the_unchanged_rewrite_reads(tmp_path: Path) -> None:
    assert read_records(str(forge(tmp_path))).end is not None


def test_metadata_that_is_not_json(tmp_path: Path) -> None:
    refused(forge(tmp_path, meta=lambda m: b"{'format': 'loadgen-records'"), "is not JSON")


def test_metadata_without_config(tmp_path: Path) -> None:
    def drop(meta: dict) -> dict:
        del meta["config"]
        return meta

    refused(forge(tmp_path, meta=drop), "its run's start has no config")


def test_metadata_of_the_wrong_type(tmp_path: Path) -> None:
    refused(forge(tmp_path, meta=lambda m: {**m, "num_requests": "6"}), "num_requests of the wrong")
    refused(forge(tmp_path, meta=lambda m: {**m, "config": [1]}), "config of the wrong type")
    refused(forge(tmp_path, meta=lambda m: {**m, "extra": 1}), "does not know: extra")


def test_a_setting_of_the_wrong_type(tmp_path: Path) -> None:
    def rate(meta: dict) -> dict:
        return {**meta, "config": {**meta["config"], "request_rate": "fast"}}

    path = forge(tmp_path, meta=rate)
    read_records(str(path))  # the settings are judged where the report builds its config
    for command, args in ((report_command, [str(path)]), (compare_command, [str(path)] * 2)):
        result = CliRunner().invoke(command, args)
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
        (line,) = result.stderr.splitlines()
        assert line.endswith("its setting request_rate is of the wrong type")


def test_a_missing_column(tmp_path: Path) -> None:
    refused(forge(tmp_path, schema=without("events_ns")), "no column events_ns")


def test_a_column_of_the_wrong_type(tmp_path: Path) -> None:
    def index_as_text(schema: pa.Schema) -> pa.Schema:
        return schema.set(0, pa.field("index", pa.string()))

    def texts(batches: list[Batch], schema: pa.Schema) -> list[Batch]:
        out = []
        for batch, custom in batches:
            columns = [batch.column(i) for i in range(batch.num_columns)]
            columns[0] = pa.array([str(i) for i in columns[0].to_pylist()], pa.string())
            out.append((pa.RecordBatch.from_arrays(columns, schema=schema), custom))
        return out

    refused(forge(tmp_path, schema=index_as_text, batches=texts), "column index is string")


def test_a_request_twice_or_outside_the_run(tmp_path: Path) -> None:
    def twice(batches: list[Batch], schema: pa.Schema) -> list[Batch]:
        return [batches[0], *batches]

    refused(forge(tmp_path, batches=twice), "a request has more than one row")
    refused(forge(tmp_path, meta=lambda m: {**m, "num_requests": 3}), "end counts the output")


def test_junk_after_the_magic(tmp_path: Path) -> None:
    data = real(tmp_path).read_bytes()
    junk = tmp_path / "junk.records.arrow"
    junk.write_bytes(data[:MAGIC_LEN] + bytes(range(256)) * 8)
    refused(junk, "not a loadgen records file")


def test_a_flipped_bit_in_the_footer(tmp_path: Path) -> None:
    path = real(tmp_path)
    data = path.read_bytes()
    whole = read_records(str(path)).records.tobytes()
    # The footer: after the end-of-stream marker, before its length and the magic.
    footer_start = data.rindex(b"\xff\xff\xff\xff\x00\x00\x00\x00") + 8
    reasons = set()
    for offset in range(footer_start, len(data) - 10):
        flipped = bytearray(data)
        flipped[offset] ^= 0x10
        path.write_bytes(flipped)
        try:
            run = read_records(str(path))  # a bit no reader looks at: the same run
            assert run.records.tobytes() == whole
        except RecordsFileError as exc:
            reasons.add(str(exc).split(": ", 1)[1])
    assert "its footer is damaged" in reasons
    path.write_bytes(data[: footer_start + 40] + bytes([data[footer_start + 40] ^ 1]))
    path.write_bytes(
        data[: footer_start + 4] + bytes([data[footer_start + 4] ^ 0xFF]) + data[footer_start + 5 :]
    )
    refused(path, "footer is damaged")


def test_a_claim_of_a_trillion_requests_allocates_nothing(tmp_path: Path) -> None:
    path = forge(tmp_path, meta=lambda m: {**m, "num_requests": 10**12}, batches=unended)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        with pytest.raises(RecordsFileError, match=f"more than {MAX_UNREPORTED} requests"):
            read_records(str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * size  # what reading the file itself takes, not the claim
    refused(path, "more than")
    whole = forge(tmp_path, meta=lambda m: {**m, "num_requests": 10**12})
    refused(whole, "its end counts the output of 6 requests, its start says 1000000000000")


def test_a_crashed_run_with_requests_never_reported_reads_within_the_bound(
    tmp_path: Path,
) -> None:
    # The 6 rows of a run of 104 requests that crashed: 98 requests have no row.
    crashed = forge(tmp_path, meta=lambda m: {**m, "num_requests": N + 98}, batches=unended)
    run = read_records(str(crashed))
    assert run.end is None and run.num_requests == N + 98
    no_row = "lost: the records file has no row for this request"
    assert sum(error == no_row for error in run.errors.values()) == 98
    over = forge(
        tmp_path, meta=lambda m: {**m, "num_requests": N + MAX_UNREPORTED + 1}, batches=unended
    )
    refused(over, f"more than {MAX_UNREPORTED} requests without a row")


def test_the_footers_blocks_are_read_off_its_flatbuffer(tmp_path: Path) -> None:
    path = real(tmp_path)
    data = path.read_bytes()
    blocks = _footer_blocks(pa.py_buffer(data))
    footer = ipc.open_file(pa.py_buffer(data))
    assert blocks is not None and len(blocks) == footer.num_record_batches > 2
    for i, (offset, _, _, body) in enumerate(blocks.tolist()):
        message = ipc.read_message(pa.BufferReader(pa.py_buffer(data[offset:])))
        assert message.body.size == body
        assert ipc.read_record_batch(message, footer.schema).equals(footer.get_batch(i))
    # A footer naming a batch one message later is not the stream's.
    first, second = (int(o).to_bytes(8, "little") for o in blocks["offset"][:2])
    footer_start = data.rindex(b"\xff\xff\xff\xff\x00\x00\x00\x00") + 8
    moved = data[:footer_start] + data[footer_start:].replace(first, second, 1)
    assert moved != data
    path.write_bytes(moved)
    refused(path, "footer is damaged")

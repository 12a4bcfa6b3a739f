"""Tests for the coordinator/worker wire format: envelopes, SHARD and RECORDS payloads."""

from __future__ import annotations

from array import array
from math import nan

import numpy as np
import orjson
import pytest

from workers.protocol import (
    PROTOCOL_VERSION,
    RECORD_DTYPE,
    UNSENT_ROW,
    Kind,
    WorkerConfig,
    decode,
    decode_records,
    decode_shard,
    encode,
    records_message,
    shard_message,
    worker_identity,
)


def wire(parts: list) -> list[bytes]:
    """What the receiving socket hands over: every frame as plain bytes."""
    return [bytes(p) for p in parts]


def message_fields(fields: dict) -> dict:
    """The header fields a sender passed (decode may leave the envelope's "v" in)."""
    return {k: v for k, v in fields.items() if k != "v"}


def make_config(**overrides) -> WorkerConfig:
    fields = {
        "url": "http://127.0.0.1:8000/v1/completions",
        "headers": {"Authorization": "Bearer sk-test", "Content-Type": "application/json"},
        "request_id_prefix": "bench-",
        "max_concurrency": 3,
        "preopen_url": "http://127.0.0.1:8000/v1/models",
        "preopen_connections": 3,
    }
    fields.update(overrides)
    return WorkerConfig(**fields)


# --- envelope -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        (Kind.HELLO, {"worker_id": 2, "pid": 41234}),
        (Kind.READY, {"connections": 16, "connect_error": None}),
        (Kind.READY, {"connections": 0, "connect_error": "Connection refused"}),
        (Kind.START, {"t0_ns": 9_876_543_210_123_456}),
        (Kind.DONE, {"sent": 1000}),
        (Kind.STOP, {"reason": "interrupted"}),
        (Kind.FATAL, {"message": "Traceback (most recent call last): …"}),
    ],
)
def test_round_trip_header_only(kind, fields):
    parts = encode(kind, **fields)
    assert len(parts) == 1
    header = orjson.loads(parts[0])
    assert header["v"] == PROTOCOL_VERSION
    assert header["kind"] == kind.value
    got_kind, got_fields, frames = decode(wire(parts))
    assert got_kind is kind
    assert message_fields(got_fields) == fields
    assert frames == []


def test_round_trip_with_frames():
    payload = [b"\x00\x01\x02", np.arange(4, dtype="<i8").tobytes(), b""]
    parts = encode(Kind.RECORDS, payload, errors={}, texts={})
    kind, fields, frames = decode(wire(parts))
    assert kind is Kind.RECORDS
    assert message_fields(fields) == {"errors": {}, "texts": {}}
    assert frames == payload


def test_every_kind_round_trips():
    for kind in Kind:
        got, fields, frames = decode(wire(encode(kind, [b"x"], n=1)))
        assert (got, message_fields(fields), frames) == (kind, {"n": 1}, [b"x"])


@pytest.mark.parametrize("version", [PROTOCOL_VERSION + 1, 0, None, "1"])
def test_version_mismatch_raises(version):
    header = {"kind": "hello", "worker_id": 0, "pid": 1}
    if version is not None:
        header["v"] = version
    with pytest.raises(ValueError, match="protocol version"):
        decode([orjson.dumps(header)])


def test_unknown_kind_raises():
    with pytest.raises(ValueError):
        decode([orjson.dumps({"v": PROTOCOL_VERSION, "kind": "bogus"})])


def test_worker_identity():
    assert worker_identity(0) == b"w0"
    assert worker_identity(12) == b"w12"
    assert worker_identity(1) != worker_identity(11)


# --- SHARD --------------------------------------------------------------------------------


def test_shard_round_trip():
    config = make_config(chat=True, keep_text="always", insecure=True)
    bodies = [
        b'{"model":"m","prompt":"hi","max_tokens":8,"stream":true}',
        b"",
        b'{"model":"m","prompt":"' + "é".encode() * 3000 + b'"}',
        b"x",
    ]
    indices = np.array([4, 7, 9, 1_000_003], dtype=np.int64)
    scheduled = np.array([0, 1, 2**40 + 5, 2**40 + 5], dtype=np.int64)
    kind, fields, frames = decode(wire(shard_message(config, bodies, indices, scheduled)))
    assert kind is Kind.SHARD
    shard = decode_shard(fields, frames)
    assert shard.config == config
    assert [shard.body(k) for k in range(len(bodies))] == bodies
    lengths = [len(b) for b in bodies]
    assert shard.offsets.tolist() == [0, *np.cumsum(lengths).tolist()]
    assert shard.offsets.dtype == np.dtype("<i8")
    np.testing.assert_array_equal(shard.indices, indices)
    np.testing.assert_array_equal(shard.scheduled_ns, scheduled)
    assert shard.indices.dtype == np.dtype("<i8")
    assert shard.scheduled_ns.dtype == np.dtype("<i8")


def test_shard_accepts_other_integer_inputs_and_memoryview_frames():
    config = make_config(request_id_prefix=None, max_concurrency=0)
    bodies = [b"a", b"bb", b"ccc"]
    parts = shard_message(config, bodies, [2, 5, 8], np.array([10, 20, 30], dtype=np.int32))
    _, fields, frames = decode(wire(parts))
    shard = decode_shard(fields, [memoryview(f) for f in frames])  # zero-copy frames
    assert shard.config == config
    assert [shard.body(k) for k in range(3)] == bodies
    assert shard.indices.tolist() == [2, 5, 8]
    assert shard.scheduled_ns.tolist() == [10, 20, 30]


def test_empty_shard():
    config = make_config()
    parts = shard_message(config, [], np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    shard = decode_shard(*decode(wire(parts))[1:])
    assert shard.offsets.tolist() == [0]
    assert len(shard.indices) == len(shard.scheduled_ns) == 0
    assert shard.bodies == b""


# --- RECORDS ------------------------------------------------------------------------------


def record_rows():
    # (index, arrival_ns, send_ns, end_ns, n_events, status, prompt, completion, connect_ns,
    #  success, resent, server_queue_s, server_ttft_s)
    return [
        (0, 0, 1_000, 2_000_000_000, 3, 200, 12, 3, 0, True, False, 0.0015, 0.04225),
        (5, 250_000_000, 260_000_000, 900_000_000, 0, 500, -1, -1, 180_000, False, True, nan, nan),
        (17, *UNSENT_ROW[1:]),  # never sent
        (2**40, 2**40, 2**40 + 1, 2**41, 2, 200, 2_000_000, 1, 0, True, False, nan, 2.5),
    ]


def test_records_round_trip():
    rows = record_rows()
    events = array("q", [100, 200, 300, 2**40 + 10, 2**40 + 20])
    errors = {5: "Internal Server Error", 17: "not sent: run interrupted"}
    texts = {0: "Hello, wörld", 2**40: ""}
    kind, fields, frames = decode(wire(records_message(rows, events.tobytes(), errors, texts)))
    assert kind is Kind.RECORDS
    records, event_ns, got_errors, got_texts = decode_records(fields, frames)
    assert records.dtype == RECORD_DTYPE
    assert records.tobytes() == np.array(rows, dtype=RECORD_DTYPE).tobytes()  # NaNs too
    assert records["index"].tolist() == [0, 5, 17, 2**40]
    assert records["send_ns"].tolist() == [1_000, 260_000_000, -1, 2**40 + 1]
    assert records["n_events"].tolist() == [3, 0, 0, 2]
    assert records["prompt_tokens"].tolist() == [12, -1, -1, 2_000_000]
    assert records["success"].astype(bool).tolist() == [True, False, False, True]
    assert event_ns.dtype == np.dtype("<i8")
    assert event_ns.tolist() == list(events)
    assert got_errors == errors  # int keys survive the JSON header
    assert got_texts == texts
    assert all(isinstance(k, int) for k in (*got_errors, *got_texts))


def test_records_without_errors_or_texts():
    rows = record_rows()[:1]
    parts = records_message(rows, array("q", [1, 2, 3]).tobytes(), {}, {})
    records, event_ns, errors, texts = decode_records(*decode(wire(parts))[1:])
    assert len(records) == 1
    assert event_ns.tolist() == [1, 2, 3]
    assert errors == {}
    assert texts == {}
    # a header that omits the dicts altogether decodes the same
    records, _, errors, texts = decode_records({}, wire(parts)[1:])
    assert (len(records), errors, texts) == (1, {}, {})


def test_empty_records_batch():
    parts = records_message([], b"", {}, {})
    records, event_ns, errors, texts = decode_records(*decode(wire(parts))[1:])
    assert len(records) == 0
    assert len(event_ns) == 0
    assert (errors, texts) == ({}, {})


@pytest.mark.parametrize("n_events", [[3, 0, 0, 2], [3, 0, 0, 0], [0, 0, 0, 0]])
def test_records_event_count_mismatch_raises(n_events):
    rows = [(*row[:4], n, *row[5:]) for row, n in zip(record_rows(), n_events, strict=True)]
    events = array("q", [1, 2, 3, 4]).tobytes()  # four instants; the rows claim otherwise
    parts = records_message(rows, events, {}, {})
    with pytest.raises(ValueError, match="inconsistent"):
        decode_records(*decode(wire(parts))[1:])

"""Tests for the coordinator/worker wire format: envelopes, SHARD and RECORDS payloads."""

from __future__ import annotations

import inspect
from array import array
from math import nan

import numpy as np
import orjson
import pytest

from workers.protocol import (
    LOADGEN_VERSION,
    PROTOCOL_VERSION,
    RECORD_DTYPE,
    SCHEMA,
    UNSENT_ROW,
    Codec,
    Kind,
    ProtocolError,
    WorkerConfig,
    decode_probe,
    decode_records,
    decode_shard,
    encode_probe,
    peek,
    record,
    records_message,
    shard_message,
    version_mismatch,
    worker_identity,
)


def wire(parts: list) -> list[bytes]:
    """What the receiving socket hands over: every frame as plain bytes."""
    return [bytes(p) for p in parts]


def from_coordinator(parts: list) -> tuple:
    return CODEC.decode(wire(parts), from_worker=False)


def from_worker(parts: list) -> tuple:
    return CODEC.decode(wire(parts), from_worker=True)


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

CODEC = Codec.new()
VALID = [  # one conforming message of every kind, and who sends it
    (
        Kind.HELLO,
        {"probe_port": 41234, "host": "node-1", "cores": 8, "pid": 4242, "loadgen": "0.1.0"},
        0,
        True,
    ),
    (Kind.WELCOME, {"worker": 3, "loadgen": "0.1.0"}, 0, False),
    (Kind.REFUSED, {"message": "another version"}, 0, False),
    (Kind.PING, {"t_ns": 123}, 0, False),
    (Kind.PONG, {"t_ns": 123, "worker_ns": 456}, 0, True),
    (Kind.ALIVE, {}, 0, True),
    (Kind.SHARD, {"config": {}}, 6, False),
    (Kind.READY, {"connections": 16, "connect_error": None, "preopen_short": ""}, 0, True),
    (
        Kind.READY,
        {"connections": 0, "connect_error": "Connection refused", "preopen_short": ""},
        0,
        True,
    ),
    (Kind.START, {"t0_ns": 9_876_543_210_123_456, "credits": 3}, 0, False),
    (Kind.CREDITS, {"grant": 2, "lend": True}, 0, False),
    (Kind.DEMAND, {"returned": 1, "waiting": 0}, 0, True),
    (Kind.RECORDS, {"errors": {}, "texts": {}}, 2, True),
    (Kind.PROGRESS, {"events": 12, "released": 3}, 0, True),
    (
        Kind.DONE,
        {
            "cpu_ns": 1,
            "wall_ns": 2,
            "connections": {},
            "block_waits": 0,
            "block_wait_ns": 0,
            "topups": 0,
        },
        1,
        True,
    ),
    (Kind.TOPUP, {"last": False}, 6, False),
    (Kind.STOP, {"reason": "interrupted"}, 0, False),
    (Kind.FATAL, {"message": "Traceback (most recent call last): …"}, 0, True),
]


@pytest.mark.parametrize(("kind", "fields", "frames", "from_worker"), VALID)
def test_every_kind_round_trips(kind, fields, frames, from_worker):
    payload = [bytes([k]) * k for k in range(frames)]
    parts = CODEC.encode(kind, payload, **fields)
    header = orjson.loads(parts[0])
    assert (header["v"], header["t"], header["kind"]) == (PROTOCOL_VERSION, CODEC.token, kind.value)
    got_kind, got_fields, got_frames = CODEC.decode(wire(parts), from_worker=from_worker)
    assert (got_kind, got_fields, got_frames) == (kind, fields, payload)


def test_every_kind_has_a_schema_and_a_direction():
    assert set(SCHEMA) == set(Kind)
    assert {kind for kind, *_ in VALID} == set(Kind)


def header(**changes) -> list[bytes]:
    fields = {"v": PROTOCOL_VERSION, "t": CODEC.token, "kind": "ready", "connections": 1}
    fields["connect_error"] = None
    fields["preopen_short"] = ""
    fields.update(changes)
    return [orjson.dumps({k: v for k, v in fields.items() if v is not ...})]


@pytest.mark.parametrize(
    ("parts", "why"),
    [
        ([b"not json"], "not JSON"),
        ([b"[1, 2]"], "not a JSON object"),
        ([], "not a JSON object"),
        (header(v=PROTOCOL_VERSION + 1), "protocol version"),
        (header(v=...), "protocol version"),
        (header(t=...), "token"),
        (header(t=Codec.new().token), "token"),  # another run's
        (header(t=7), "token"),
        (header(kind="bogus"), "unknown kind"),
        (header(kind="stop", reason="x"), "wrong way"),  # a worker never sends STOP
        (header(connections=...), "fields"),
        (header(extra=1), "fields"),
        (header(connections="16"), "type str"),
        (header(connections=True), "type bool"),
        (header(connect_error=5), "type int"),
        ([*header(), b"frame"], "1 frames"),
    ],
)
def test_a_message_that_is_not_this_runs_is_refused(parts, why):
    with pytest.raises(ProtocolError, match=why):
        CODEC.decode(parts, from_worker=True)


def test_probes_carry_the_runs_token():
    probe = encode_probe(123_456_789, CODEC.probe_token)
    assert decode_probe(probe, CODEC.probe_token) == 123_456_789
    assert decode_probe(probe, Codec.new().probe_token) is None  # another run's
    assert decode_probe((123).to_bytes(8, "little"), CODEC.probe_token) is None  # no token
    assert decode_probe(b"", CODEC.probe_token) is None
    assert len(CODEC.probe_token) == 16 and Codec.new().token != CODEC.token


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
    kind, fields, frames = from_coordinator(
        shard_message(CODEC, config, bodies, indices, scheduled)
    )
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
    parts = shard_message(CODEC, config, bodies, [2, 5, 8], np.array([10, 20, 30], np.int32))
    _, fields, frames = from_coordinator(parts)
    shard = decode_shard(fields, [memoryview(f) for f in frames])  # zero-copy frames
    assert shard.config == config
    assert [shard.body(k) for k in range(3)] == bodies
    assert shard.indices.tolist() == [2, 5, 8]
    assert shard.scheduled_ns.tolist() == [10, 20, 30]


def test_empty_shard():
    config = make_config()
    parts = shard_message(CODEC, config, [], np.array([], np.int64), np.array([], np.int64))
    shard = decode_shard(*from_coordinator(parts)[1:])
    assert shard.offsets.tolist() == [0]
    assert len(shard.indices) == len(shard.scheduled_ns) == 0
    assert shard.bodies == b""


# --- RECORDS ------------------------------------------------------------------------------


def record_rows():
    # (index, released_ns, sent_ns, end_ns, n_events, status, prompt, completion, connect_ns,
    #  success, resent, truncated, server_queue_s, server_ttft_s, text_capped, cached_tokens)
    ms = 1_000_000
    return [
        (0, 0, 1_000, 2_000 * ms, 3, 200, 12, 3, 0, True, False, False, 0.0015, 0.04225, False,
         -1),
        (5, 250 * ms, 260 * ms, 900 * ms, 0, 500, -1, -1, 180_000, False, True, False, nan, nan,
         False, -1),
        record(index=17),  # never sent
        (2**40, 2**40, 2**40 + 1, 2**41, 2, 200, 2_000_000, 1, 0, True, False, True, nan, 2.5,
         True, 1_999_984),
    ]  # fmt: skip


def test_record_dtype_is_made_from_the_record_fields():
    # One name per field: the worker builds its row by name, the dtype takes those names.
    assert RECORD_DTYPE.names == tuple(inspect.signature(record).parameters)
    # The bytes of a row are those of protocol version 13 (only names changed): no new version.
    formats = [RECORD_DTYPE[name].str for name in RECORD_DTYPE.names]
    assert formats == (
        ["<i8"] * 4 + ["<i4"] * 4 + ["<i8"] + ["|u1"] * 3 + ["<f8"] * 2 + ["|u1"] + ["<i4"]
    )
    assert RECORD_DTYPE.itemsize == 5 * 8 + 4 * 4 + 4 + 2 * 8 + 4


def test_record_by_name_is_the_positional_row():
    by_name = record(
        index=3, released_ns=10, sent_ns=20, end_ns=90, n_events=2, status=200,
        prompt_tokens=7, completion_tokens=2, connect_ns=5, success=True, resent=False,
        truncated=True, server_queue_s=0.5, server_ttft_s=nan, text_capped=True, cached_tokens=4,
    )  # fmt: skip
    positional = (3, 10, 20, 90, 2, 200, 7, 2, 5, True, False, True, 0.5, nan, True, 4)
    assert (
        np.array([by_name], RECORD_DTYPE).tobytes()
        == np.array([positional], RECORD_DTYPE).tobytes()
    )
    assert np.array([by_name], RECORD_DTYPE)["sent_ns"][0] == 20


def test_an_unsent_record_holds_no_instant_and_no_count():
    row = np.array([record(index=9)], RECORD_DTYPE)[0]
    assert row["index"] == 9
    assert row["released_ns"] == row["sent_ns"] == row["end_ns"] == -1
    assert row["prompt_tokens"] == row["completion_tokens"] == row["cached_tokens"] == -1
    assert row["n_events"] == row["status"] == row["connect_ns"] == 0
    assert not (row["success"] or row["resent"] or row["truncated"] or row["text_capped"])
    assert np.isnan(row["server_queue_s"]) and np.isnan(row["server_ttft_s"])
    unsent = np.array([UNSENT_ROW], RECORD_DTYPE)
    assert unsent.tobytes() == np.array([record(index=-1)], RECORD_DTYPE).tobytes()


def test_records_round_trip():
    rows = record_rows()
    events = array("q", [100, 200, 300, 2**40 + 10, 2**40 + 20])
    errors = {5: "Internal Server Error", 17: "not sent: run interrupted"}
    texts = {0: "Hello, wörld", 2**40: ""}
    kind, fields, frames = from_worker(
        records_message(CODEC, rows, events.tobytes(), errors, texts)
    )
    assert kind is Kind.RECORDS
    records, event_ns, got_errors, got_texts = decode_records(fields, frames)
    assert records.dtype == RECORD_DTYPE
    assert records.tobytes() == np.array(rows, dtype=RECORD_DTYPE).tobytes()  # NaNs too
    assert records["index"].tolist() == [0, 5, 17, 2**40]
    assert records["sent_ns"].tolist() == [1_000, 260_000_000, -1, 2**40 + 1]
    assert records["n_events"].tolist() == [3, 0, 0, 2]
    assert records["prompt_tokens"].tolist() == [12, -1, -1, 2_000_000]
    assert records["success"].astype(bool).tolist() == [True, False, False, True]
    assert records["text_capped"].astype(bool).tolist() == [False, False, False, True]
    assert records["cached_tokens"].tolist() == [-1, -1, -1, 1_999_984]
    assert event_ns.dtype == np.dtype("<i8")
    assert event_ns.tolist() == list(events)
    assert got_errors == errors  # int keys survive the JSON header
    assert got_texts == texts
    assert all(isinstance(k, int) for k in (*got_errors, *got_texts))


def test_protocol_version_covers_the_cached_tokens_column():
    # Version 11 added text_capped to RECORD_DTYPE, version 13 cached_tokens: a worker of
    # version 12 sends 15-field rows and is refused by version before any row is read as
    # another layout.
    assert PROTOCOL_VERSION >= 13
    assert RECORD_DTYPE.names[-2:] == ("text_capped", "cached_tokens")
    assert len(UNSENT_ROW) == len(RECORD_DTYPE)
    assert UNSENT_ROW[-2] is False and UNSENT_ROW[-1] == -1
    old = orjson.dumps({"v": 12, "t": CODEC.token, "kind": "records", "errors": {}, "texts": {}})
    with pytest.raises(ProtocolError, match="protocol version"):
        CODEC.decode([old, b"", b""], from_worker=True)


def test_records_without_errors_or_texts():
    rows = record_rows()[:1]
    parts = records_message(CODEC, rows, array("q", [1, 2, 3]).tobytes(), {}, {})
    records, event_ns, errors, texts = decode_records(*from_worker(parts)[1:])
    assert len(records) == 1
    assert event_ns.tolist() == [1, 2, 3]
    assert errors == {}
    assert texts == {}


def test_empty_records_batch():
    parts = records_message(CODEC, [], b"", {}, {})
    records, event_ns, errors, texts = decode_records(*from_worker(parts)[1:])
    assert len(records) == 0
    assert len(event_ns) == 0
    assert (errors, texts) == ({}, {})


@pytest.mark.parametrize("n_events", [[3, 0, 0, 2], [3, 0, 0, 0], [0, 0, 0, 0]])
def test_records_event_count_mismatch_raises(n_events):
    rows = [(*row[:4], n, *row[5:]) for row, n in zip(record_rows(), n_events, strict=True)]
    events = array("q", [1, 2, 3, 4]).tobytes()  # four instants; the rows claim otherwise
    parts = records_message(CODEC, rows, events, {}, {})
    with pytest.raises(ProtocolError, match="inconsistent"):
        decode_records(*from_worker(parts)[1:])


def test_records_frames_that_are_not_whole_rows_are_refused():
    parts = wire(records_message(CODEC, record_rows()[:1], array("q", [1, 2, 3]).tobytes(), {}, {}))
    with pytest.raises(ProtocolError, match="whole rows"):
        decode_records(*from_worker([parts[0], parts[1][:-1], parts[2]])[1:])
    with pytest.raises(ProtocolError, match="whole rows"):
        decode_records(*from_worker([parts[0], parts[1], parts[2][:-3]])[1:])


def test_records_errors_keyed_by_something_else_are_refused():
    parts = records_message(CODEC, [], b"", {}, {})
    _, fields, frames = from_worker(parts)
    with pytest.raises(ProtocolError, match="keyed"):
        decode_records({**fields, "errors": {"zero": "boom"}}, frames)


def test_shard_carries_each_requests_output_guard():
    config = make_config()
    guards = np.array([80, 0, 2**33], dtype=np.int64)
    parts = shard_message(CODEC, config, [b"a", b"b", b"c"], [0, 1, 2], [0, 0, 0], guards)
    assert decode_shard(*from_coordinator(parts)[1:]).max_events.tolist() == [80, 0, 2**33]
    parts = shard_message(CODEC, config, [b"a"], [0], [0])  # no guards given: none
    assert decode_shard(*from_coordinator(parts)[1:]).max_events.tolist() == [0]


def test_peek_reads_any_version_and_mismatch_names_both_sides():
    parts = [orjson.dumps({"v": PROTOCOL_VERSION + 7, "kind": "hello", "loadgen": "9.9"})]
    with pytest.raises(ProtocolError, match="protocol version"):
        CODEC.decode(parts, from_worker=True)
    version, kind, fields = peek(parts)
    assert (version, kind, fields["loadgen"]) == (PROTOCOL_VERSION + 7, "hello", "9.9")
    why = version_mismatch("the worker on h", version, fields["loadgen"])
    assert why is not None
    assert "loadgen 9.9" in why and f"wire protocol {PROTOCOL_VERSION + 7}" in why
    assert f"loadgen {LOADGEN_VERSION}" in why
    assert version_mismatch("x", PROTOCOL_VERSION, LOADGEN_VERSION) is None
    assert version_mismatch("x", PROTOCOL_VERSION, "0.0.1-other") is not None
    with pytest.raises(ProtocolError):
        peek([b"not json"])

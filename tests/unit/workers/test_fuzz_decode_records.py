"""Property tests of ``decode_records`` (issue 27, point 10): a RECORDS message of any frames
and any errors and texts either decodes to rows whose events add up or raises
``ProtocolError``; any rows ``records_message`` encodes come back as they were. Bounded
examples, no example database."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workers.protocol import (
    RECORD_DTYPE,
    Codec,
    Kind,
    ProtocolError,
    decode_records,
    records_message,
)

BOUNDED = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
CODEC = Codec("0123456789abcdef0123456789abcdef")
ROW = RECORD_DTYPE.itemsize

json_values = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8)
keyed = st.dictionaries(
    st.text(max_size=6) | st.integers(-(10**20), 10**20).map(str), json_values, max_size=6
)


def decode(fields: dict, frames: list[bytes]):
    parts = CODEC.encode(Kind.RECORDS, frames, **fields)
    try:
        _, checked, payload = CODEC.decode(parts, from_worker=True)
        return decode_records(checked, payload)
    except ProtocolError as exc:
        assert str(exc)
        return None


@BOUNDED
@given(
    st.binary(max_size=4 * ROW) | st.integers(0, 4).map(lambda n: bytes(n * ROW)),
    st.binary(max_size=80),
    keyed,
    keyed,
)
def test_any_records_message_decodes_consistently_or_raises_protocol_error(
    rows, events, errors, texts
):
    decoded = decode({"errors": errors, "texts": texts}, [rows, events])
    if decoded is None:
        return
    records, event_ns, got_errors, got_texts = decoded
    assert (records["n_events"] >= 0).all()
    assert int(records["n_events"].sum()) == len(event_ns)
    assert all(isinstance(k, int) and isinstance(v, str) for k, v in got_errors.items())
    assert all(isinstance(k, int) and isinstance(v, str) for k, v in got_texts.items())


def _field(name: str, kind: str):
    if name == "n_events":
        return st.integers(0, 3)
    if kind == "f":
        return st.floats(allow_nan=True, width=64)
    if kind == "u":
        return st.booleans()
    bits = RECORD_DTYPE[name].itemsize * 8
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


row = st.tuples(*(_field(name, RECORD_DTYPE[name].kind) for name in RECORD_DTYPE.names))


@BOUNDED
@given(
    st.lists(row, max_size=6),
    st.dictionaries(st.integers(0, 2**62), st.text(max_size=10), max_size=4),
    st.dictionaries(st.integers(0, 2**62), st.text(max_size=10), max_size=4),
    st.data(),
)
def test_encoded_rows_come_back_as_they_were(rows, errors, texts, data):
    total = sum(r[RECORD_DTYPE.names.index("n_events")] for r in rows)
    events = data.draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=total, max_size=total))
    event_bytes = np.array(events, dtype="<i8").tobytes()
    parts = records_message(CODEC, rows, event_bytes, errors, texts)
    _, fields, payload = CODEC.decode(parts, from_worker=True)
    records, event_ns, got_errors, got_texts = decode_records(fields, payload)
    assert records.tobytes() == np.array(rows, dtype=RECORD_DTYPE).tobytes()
    assert event_ns.tolist() == events
    assert (got_errors, got_texts) == (errors, texts)


def test_negative_event_counts_are_a_protocol_error():
    rows = np.zeros(1, dtype=RECORD_DTYPE)
    rows["n_events"] = -1
    assert decode({"errors": {}, "texts": {}}, [rows.tobytes(), b""]) is None

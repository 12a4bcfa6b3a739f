"""Property tests of the wire codec's decode (issue 27, point 10): any frames, any header,
raise nothing but ``ProtocolError`` from ``Codec.decode`` and ``decode_shard``; whatever
``encode`` builds decodes to what it was given. Bounded examples, no example database."""

from __future__ import annotations

import contextlib

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workers.protocol import (
    FROM_WORKER,
    PROTOCOL_VERSION,
    SCHEMA,
    Codec,
    Kind,
    ProtocolError,
    decode_shard,
    peek,
)

BOUNDED = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
CODEC = Codec("0123456789abcdef0123456789abcdef")

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)
kinds = st.sampled_from([k.value for k in Kind]) | st.text(max_size=8)


@st.composite
def headers(draw) -> bytes:
    """A header frame: this run's (or a near one: another version, token, kind, fields)."""
    fields = draw(st.dictionaries(st.text(max_size=12), json_values, max_size=5))
    kind = draw(kinds)
    if draw(st.booleans()) and kind in Kind._value2member_map_:
        for name in SCHEMA[Kind(kind)][0]:  # the right field names, values of any type
            fields[name] = draw(json_values)
    header = {
        "v": draw(st.sampled_from([PROTOCOL_VERSION, PROTOCOL_VERSION - 1, "11", None])),
        "t": draw(st.sampled_from([CODEC.token, CODEC.token.upper(), "", 7])),
        "kind": kind,
        **fields,
    }
    return orjson.dumps(header)


frames = st.lists(st.binary(max_size=64), max_size=8)


def decode(parts: list[bytes], from_worker: bool):
    try:
        return CODEC.decode(parts, from_worker)
    except ProtocolError as exc:
        assert str(exc)  # says why
        return None


@BOUNDED
@given(st.lists(st.binary(max_size=200), max_size=8), st.booleans())
def test_any_frames_decode_or_raise_protocol_error(parts, from_worker):
    decode(parts, from_worker)
    with contextlib.suppress(ProtocolError):
        peek(parts)


@BOUNDED
@given(headers(), frames, st.booleans())
def test_any_header_decodes_to_its_schema_or_raises_protocol_error(header, payload, from_worker):
    decoded = decode([header, *payload], from_worker)
    if decoded is not None:
        kind, fields, rest = decoded
        expected, count = SCHEMA[kind]
        assert set(fields) == set(expected) and len(rest) == count


@BOUNDED
@given(st.dictionaries(st.text(max_size=12), json_values, max_size=6), frames)
def test_any_shard_decodes_or_raises_protocol_error(config, payload):
    parts = CODEC.encode(Kind.SHARD, payload, config=config)
    decoded = decode(parts, from_worker=False)
    if decoded is None:
        return
    try:
        shard = decode_shard(decoded[1], decoded[2])
    except ProtocolError as exc:
        assert str(exc)
        return
    assert len(shard.offsets) == len(shard.indices) + 1


@BOUNDED
@given(
    st.sampled_from([k for k in Kind if not SCHEMA[k][1]]),
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=20),
)
def test_what_encode_builds_decodes_to_what_it_was_given(kind, number, text):
    values = {int: number, str: text, bool: number % 2 == 0, dict: {"k": text}}
    fields = {}
    for name, types in SCHEMA[kind][0].items():
        first = types[0] if isinstance(types, tuple) else types
        fields[name] = values[first]
    parts = CODEC.encode(kind, **fields)
    got_kind, got, rest = CODEC.decode(
        parts,
        from_worker=kind in FROM_WORKER,
    )
    assert (got_kind, got, rest) == (kind, fields, [])


def test_a_shard_of_another_layout_is_a_protocol_error():
    parts = CODEC.encode(Kind.SHARD, [b"", b"\0" * 8, b"", b"", b"", b""], config={"url": 1})
    _, fields, payload = CODEC.decode(parts, from_worker=False)
    with pytest.raises(ProtocolError, match="SHARD"):
        decode_shard(fields, payload)
